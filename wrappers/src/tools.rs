//! What the lean library and the tools library (`libmpixstream_tools.so`: traffic counters, the report,
//! the one-thread-per-communicator check) share:
//! - [`Description`], the C struct through which the lean library's `mpixstream_describe` tells the
//!   tools library its backend, pool and policy (see `shim/src/query.rs` for the whole query API);
//! - the names of the two hooks the lean library calls in the tools library;
//! - [`comm_call_interposers!`], the one table of the communication interposers of the tools library.
//!
//! The lean library never instantiates the table: a plain preload interposes nothing on `MPI_Send`,
//! `MPI_Isend`, `MPI_Wait`… (DESIGN.md §3).
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Called by the lean library at the end of `MPI_Init*`, if the tools library is loaded.
pub const INIT_SYMBOL: &CStr = c"mpixstream_tools_init";
/// Called by the lean library at the start of `MPI_Finalize`, while MPI is still fully up.
pub const FINALIZE_SYMBOL: &CStr = c"mpixstream_tools_finalize";

/// `mpixstream_describe`'s answer. The caller sets `size` to `size_of::<Description>()`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Description {
    pub size: c_int,
    /// 0 serial, 1 native.
    pub backend: c_int,
    /// 0 implicit, 1 explicit.
    pub policy: c_int,
    /// Streams in the explicit pool (native: `MPIR_CVAR_CH4_RESERVE_VCIS`).
    pub pool: c_int,
    /// MPICH's implicit VCI pool in force (`MPIR_CVAR_CH4_NUM_VCIS`); reserved VCIs start here.
    pub implicit_vcis: c_int,
    pub thread_level: c_int,
    pub rank: c_int,
    pub nranks: c_int,
    pub streams_in_use: c_int,
    /// The explicit policy's counters (`policy::STATS`).
    pub policy_attached: u64,
    pub policy_exhausted: u64,
    pub policy_nonblocking: u64,
    pub policy_intercomm: u64,
    /// Native policy streams whose communicators are gone, kept until `MPI_Finalize`.
    pub policy_retired: u64,
    /// The MPI build (version, netmod, library path: `mpich_build::describe`), NUL-terminated.
    pub library: [c_char; 256],
    pub backend_reason: [c_char; 256],
}

impl Default for Description {
    fn default() -> Self {
        Description {
            size: std::mem::size_of::<Description>() as c_int,
            backend: -1,
            policy: -1,
            pool: 0,
            implicit_vcis: 1,
            thread_level: 0,
            rank: 0,
            nranks: 1,
            streams_in_use: 0,
            policy_attached: 0,
            policy_exhausted: 0,
            policy_nonblocking: 0,
            policy_intercomm: 0,
            policy_retired: 0,
            library: [0; 256],
            backend_reason: [0; 256],
        }
    }
}

/// Resolves `PMPI_*` `name` (NUL-terminated) from the loaded MPICH into `slot`; aborts with a message
/// if the MPICH lacks it (a tools library that silently skipped a call would report wrong numbers).
#[cold]
pub fn resolve(slot: &AtomicUsize, name: &'static str) -> usize {
    let cname = CStr::from_bytes_with_nul(name.as_bytes()).expect("NUL-terminated name");
    let p = crate::pmpi::lookup(cname) as usize;
    if p == 0 {
        eprintln!("mpixstream-tools: the loaded MPI library has no {}", cname.to_string_lossy());
        std::process::abort();
    }
    slot.store(p, Ordering::Relaxed);
    p
}

/// Defines the tools library's communication interposers, from the one table below, over the hooks
/// module `$hooks`. Each row:
///
/// `MPI_name(arg: type, ...) => hook(expr, ...) [param, ...];`
///
/// becomes an exported `MPI_name` that calls `hook(stringify!(MPI_name), expr..., call)`, where `call`
/// is a closure performing `PMPI_name` (resolved once, lazily) and taking the listed `param`s, which
/// replace the arguments of the same name (so a hook can pass its own status array where the
/// application passed `MPI_STATUS_IGNORE`).
///
/// The hooks module provides: `send`, `isend`, `recv`, `irecv`, `sendrecv`, `probe`, `mprobe`,
/// `improbe`, `mrecv`, `imrecv`, `wait`, `test`, `waitall`, `testall`, `waitany`, `testany`,
/// `waitsome`, `testsome`, `request_free`, `collective`, `icollective` (see `tools/src/hooks.rs`).
#[macro_export]
macro_rules! comm_call_interposers {
    (@rows $hooks:path; $( $mpi:ident ( $($arg:ident : $ty:ty),* ) => $hook:ident ( $($e:expr),* ) [ $($cp:ident),* ] ; )*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $mpi($($arg: $ty),*) -> c_int {
                use $hooks as hooks;
                type Real = unsafe extern "C" fn($($ty),*) -> c_int;
                static REAL: AtomicUsize = AtomicUsize::new(0);
                let mut f = REAL.load(Ordering::Relaxed);
                if f == 0 {
                    f = $crate::tools::resolve(&REAL, concat!("P", stringify!($mpi), "\0"));
                }
                let real: Real = std::mem::transmute::<usize, Real>(f);
                hooks::$hook(stringify!($mpi), $($e,)* move |$($cp),*| real($($arg),*))
            }
        )*
    };
    ($hooks:path) => {
        /// The communication interposers of the tools library (generated from one table).
        #[allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]
        pub mod comm_calls {
            use $crate::ffi::*;
            use std::os::raw::{c_int, c_void};
            use std::sync::atomic::{AtomicUsize, Ordering};

            $crate::comm_call_interposers! { @rows $hooks;
            // Blocking sends: counted when called (the message is on its way when they return).
            MPI_Send(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
                => send(comm, count as MPI_Count, datatype, dest) [];
            MPI_Ssend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
                => send(comm, count as MPI_Count, datatype, dest) [];
            MPI_Rsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
                => send(comm, count as MPI_Count, datatype, dest) [];
            MPI_Bsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
                => send(comm, count as MPI_Count, datatype, dest) [];
            MPI_Send_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
                => send(comm, count, datatype, dest) [];
            // Nonblocking sends: counted when posted (as the UCX probe counts them).
            MPI_Isend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => isend(comm, count as MPI_Count, datatype, dest, request) [];
            MPI_Issend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => isend(comm, count as MPI_Count, datatype, dest, request) [];
            MPI_Irsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => isend(comm, count as MPI_Count, datatype, dest, request) [];
            MPI_Ibsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => isend(comm, count as MPI_Count, datatype, dest, request) [];
            MPI_Isend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => isend(comm, count, datatype, dest, request) [];
            // Receives: counted on completion, with the received size from the status.
            MPI_Recv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                status: *mut MPI_Status) => recv(comm, status) [status];
            MPI_Recv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                status: *mut MPI_Status) => recv(comm, status) [status];
            MPI_Irecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => irecv(comm, request) [];
            MPI_Irecv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => irecv(comm, request) [];
            MPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                comm: MPI_Comm, status: *mut MPI_Status)
                => sendrecv(comm, sendcount as MPI_Count, sendtype, dest, status) [status];
            MPI_Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, sendtag: c_int,
                source: c_int, recvtag: c_int, comm: MPI_Comm, status: *mut MPI_Status)
                => sendrecv(comm, count as MPI_Count, datatype, dest, status) [status];
            // Probes move no data but drive the communicator's endpoint (checked, not counted).
            MPI_Probe(source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) => probe(comm) [];
            MPI_Iprobe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int, status: *mut MPI_Status)
                => probe(comm) [];
            MPI_Mprobe(source: c_int, tag: c_int, comm: MPI_Comm, message: *mut MPI_Message, status: *mut MPI_Status)
                => mprobe(comm, message) [];
            MPI_Improbe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int, message: *mut MPI_Message,
                status: *mut MPI_Status) => improbe(comm, flag, message) [];
            MPI_Mrecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message,
                status: *mut MPI_Status) => mrecv(message, status) [status];
            MPI_Imrecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message,
                request: *mut MPI_Request) => imrecv(message, request) [];
            // Completion: where nonblocking receives are counted, and where a request's endpoint is driven.
            MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) => wait(request, status) [status];
            MPI_Test(request: *mut MPI_Request, flag: *mut c_int, status: *mut MPI_Status)
                => test(request, flag, status) [status];
            MPI_Waitall(count: c_int, array_of_requests: *mut MPI_Request, array_of_statuses: *mut MPI_Status)
                => waitall(count, array_of_requests, array_of_statuses) [array_of_statuses];
            MPI_Testall(count: c_int, array_of_requests: *mut MPI_Request, flag: *mut c_int,
                array_of_statuses: *mut MPI_Status)
                => testall(count, array_of_requests, flag, array_of_statuses) [array_of_statuses];
            MPI_Waitany(count: c_int, array_of_requests: *mut MPI_Request, index: *mut c_int, status: *mut MPI_Status)
                => waitany(count, array_of_requests, index, status) [status];
            MPI_Testany(count: c_int, array_of_requests: *mut MPI_Request, index: *mut c_int, flag: *mut c_int,
                status: *mut MPI_Status) => testany(count, array_of_requests, index, flag, status) [status];
            MPI_Waitsome(incount: c_int, array_of_requests: *mut MPI_Request, outcount: *mut c_int,
                array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status)
                => waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses) [array_of_statuses];
            MPI_Testsome(incount: c_int, array_of_requests: *mut MPI_Request, outcount: *mut c_int,
                array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status)
                => testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses) [array_of_statuses];
            MPI_Request_free(request: *mut MPI_Request) => request_free(request) [];
            // Collectives: counted as calls (their internal messages are MPICH's business), and checked.
            MPI_Barrier(comm: MPI_Comm) => collective(comm) [];
            MPI_Bcast(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm)
                => collective(comm) [];
            MPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op,
                root: c_int, comm: MPI_Comm) => collective(comm) [];
            MPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op,
                comm: MPI_Comm) => collective(comm) [];
            MPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) => collective(comm) [];
            MPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm)
                => collective(comm) [];
            MPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) => collective(comm) [];
            MPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm)
                => collective(comm) [];
            MPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) => collective(comm) [];
            MPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm)
                => collective(comm) [];
            MPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) => collective(comm) [];
            MPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype,
                comm: MPI_Comm) => collective(comm) [];
            MPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int,
                datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) => collective(comm) [];
            MPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op,
                comm: MPI_Comm) => collective(comm) [];
            MPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op,
                comm: MPI_Comm) => collective(comm) [];
            MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) => icollective(comm, request) [];
            MPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) => icollective(comm, request) [];
            MPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
                op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) => icollective(comm, request) [];
            MPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op,
                root: c_int, comm: MPI_Comm, request: *mut MPI_Request) => icollective(comm, request) [];
            MPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request)
                => icollective(comm, request) [];
            MPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
                recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request)
                => icollective(comm, request) [];
            }
        }
    };
}
