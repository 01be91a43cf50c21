//! What the lean library and the tools library (`libmpixstream_tools.so`: traffic counters, the report,
//! the one-thread-per-communicator check) share:
//! - [`Description`], the C struct through which the lean library's `mpixstream_describe` tells the
//!   tools library its backend, pool and policy (see `shim/src/query.rs` for the whole query API);
//! - the names of the hooks the lean library calls in the tools library;
//! - [`comm_call_interposers!`], the communication interposers of the tools library, generated from the
//!   rows of `wrappers/mpi.prototypes` with a `tools:` role.
//!
//! The lean library never instantiates that macro: a plain preload interposes nothing on `MPI_Send`,
//! `MPI_Isend`, `MPI_Wait`…, whose cost it would add to every call.
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// Called by the lean library at the end of `MPI_Init*`, if the tools library is loaded.
pub const INIT_SYMBOL: &CStr = c"mpixstream_tools_init";
/// Called by the lean library at the start of `MPI_Finalize`, while MPI is still fully up.
pub const FINALIZE_SYMBOL: &CStr = c"mpixstream_tools_finalize";
/// `extern "C" fn(inner: MPI_Request, outer: MPI_Request)`: called by the lean library when it hands
/// the application `outer` in place of `inner`, which it completes itself with `PMPI_Test` (a wrapped
/// nonblocking collective): the tools library then tracks `outer`, the request the application waits on.
pub const REQUEST_REPLACED_SYMBOL: &CStr = c"mpixstream_tools_request_replaced";
/// `extern "C" fn(MPI_Comm, *const c_char)`: the lean library found the endpoint of a call on the
/// communicator (the call's name, a static C string) owned by another thread; the check decides
/// whether that is a violation (another application thread inside a call on the same stream).
pub const CONTENDED_SYMBOL: &CStr = c"mpixstream_tools_contended";

/// `extern "C" fn(kind: c_int, parent: MPI_Comm, newcomm: MPI_Comm)`: called by the lean library after
/// each communicator constructor it interposes succeeded (`kind`: the constructor's position in
/// `interpose::CommCtor::ALL`; `newcomm` may be `MPI_COMM_NULL`), on every process that called it: the
/// tools library counts MPICH's communicators as MPICH's round robin over its implicit VCIs does.
pub const COMM_CREATED_SYMBOL: &CStr = c"mpixstream_tools_comm_created";

/// `extern "C" fn()`: called by each thread of the lean library's own (progress, multiplex, enqueue
/// engine threads) when it starts: the tools library does not count its calls as the program's.
pub const LIBRARY_THREAD_SYMBOL: &CStr = c"mpixstream_tools_library_thread";

/// The tools library's entry points, where it is preloaded (each `None` where its symbol is absent), as
/// the lean library calls them: looked up once ([`ToolsEntries::lookup`]).
pub struct ToolsEntries {
    pub init: Option<extern "C" fn()>,
    pub finalize: Option<extern "C" fn()>,
    pub request_replaced: Option<extern "C" fn(crate::ffi::MPI_Request, crate::ffi::MPI_Request)>,
    pub contended: Option<extern "C" fn(crate::ffi::MPI_Comm, *const c_char)>,
    pub comm_created: Option<extern "C" fn(c_int, crate::ffi::MPI_Comm, crate::ffi::MPI_Comm)>,
    pub library_thread: Option<extern "C" fn()>,
}

impl ToolsEntries {
    /// The symbols in the global scope.
    pub fn lookup() -> ToolsEntries {
        let at = |name: &CStr| crate::dl::default_symbol(name) as usize;
        let a = [
            INIT_SYMBOL,
            FINALIZE_SYMBOL,
            REQUEST_REPLACED_SYMBOL,
            CONTENDED_SYMBOL,
            COMM_CREATED_SYMBOL,
            LIBRARY_THREAD_SYMBOL,
        ]
        .map(at);
        // SAFETY: each address is 0 (absent: `None`, the function pointer's niche) or that of the symbol the
        // tools library defines with this prototype (its `#[no_mangle]` definitions, typed by the comments
        // of the names above, which both libraries share).
        unsafe {
            use std::mem::transmute;
            ToolsEntries {
                init: transmute::<usize, Option<extern "C" fn()>>(a[0]),
                finalize: transmute::<usize, Option<extern "C" fn()>>(a[1]),
                request_replaced: transmute::<
                    usize,
                    Option<extern "C" fn(crate::ffi::MPI_Request, crate::ffi::MPI_Request)>,
                >(a[2]),
                contended: transmute::<usize, Option<extern "C" fn(crate::ffi::MPI_Comm, *const c_char)>>(a[3]),
                comm_created: transmute::<
                    usize,
                    Option<extern "C" fn(c_int, crate::ffi::MPI_Comm, crate::ffi::MPI_Comm)>,
                >(a[4]),
                library_thread: transmute::<usize, Option<extern "C" fn()>>(a[5]),
            }
        }
    }

    /// Whether the tools library is in the process.
    pub fn preloaded() -> bool {
        !crate::dl::default_symbol(INIT_SYMBOL).is_null()
    }
}

/// Who attached a communicator's stream: what the lean library records and `mpixstream_comm_origin`
/// reports to the tools library (as this `int`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamOrigin {
    /// No stream: a conventional communicator.
    None = 0,
    /// `MPIX_Stream_comm_create` or a dup of such a communicator: the application owns the stream.
    User = 1,
    /// The explicit policy: the stream was created for this communicator.
    Policy = 2,
    /// A hidden communicator of a multiplex stream communicator: it carries, on this process, the
    /// stream of one local index (or MPICH's implicit pool; `mpixstream_multiplex_of` says which).
    Multiplex = 3,
}

impl StreamOrigin {
    /// The value `mpixstream_comm_origin` returned.
    pub fn from_code(code: c_int) -> StreamOrigin {
        match code {
            1 => StreamOrigin::User,
            2 => StreamOrigin::Policy,
            3 => StreamOrigin::Multiplex,
            _ => StreamOrigin::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StreamOrigin::None => "none",
            StreamOrigin::User => "user",
            StreamOrigin::Policy => "policy",
            StreamOrigin::Multiplex => "multiplex",
        }
    }
}

/// `mpixstream_describe`'s answer. The caller sets `size` to `size_of::<Description>()`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Description {
    pub size: c_int,
    /// 0 serial, 1 native.
    pub backend: c_int,
    /// 0 implicit, 1 explicit, 2 guided.
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
    /// Left implicit because nothing could keep MPI's progress rule for a stream (MPICH 4.1 and 4.2
    /// below `MPI_THREAD_MULTIPLE`).
    pub policy_unserved: u64,
    /// Native policy streams whose communicators are gone, kept until `MPI_Finalize`.
    pub policy_retired: u64,
    /// Windows, files and distributed graphs made on a plain twin of a stream communicator
    /// (`plain_twin::TWINS`): their traffic is on MPICH's implicit pool.
    pub policy_twins: u64,
    /// Multiplex communicators made so far: on the streams' own endpoints, and on MPICH's implicit pool
    /// (the serial backend, `MPIX_STREAM_NULL` entries, or past a bound on hidden communicators).
    pub multiplex_on_streams: u64,
    pub multiplex_pooled: u64,
    /// The guided policy (`shim/src/policy/guided.rs`): constructors whose communicator its profile
    /// selected; constructors the profile never saw; communicators without an identity; the profile's
    /// rank count (0: no guided policy) and path (NUL-terminated).
    pub guided_selected: u64,
    pub guided_unseen: u64,
    pub guided_unidentified: u64,
    pub guided_nranks: c_int,
    pub guided_profile: [c_char; 256],
    /// The MPI build (version, netmod, library path: `mpich_build::describe`), NUL-terminated.
    pub library: [c_char; 256],
    pub backend_reason: [c_char; 256],
    /// Where the program cannot gain from the library (the lean library's `backend::demand`): the policy
    /// it asked for and why the library is inert, NUL-terminated; empty otherwise.
    pub policy_inert: [c_char; 256],
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
            policy_unserved: 0,
            policy_retired: 0,
            policy_twins: 0,
            multiplex_on_streams: 0,
            multiplex_pooled: 0,
            guided_selected: 0,
            guided_unseen: 0,
            guided_unidentified: 0,
            guided_nranks: 0,
            guided_profile: [0; 256],
            library: [0; 256],
            backend_reason: [0; 256],
            policy_inert: [0; 256],
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/tools_interposers.rs"));
