//! The `MPI_*` interposers of the lean library, generated from the tables below.
//!
//! The library interposes only what it must (DESIGN.md §3): the initialisation and finalisation calls,
//! the communicator constructors and `MPI_Comm_free` (bookkeeping and the endpoint policy), and
//! `MPI_Error_class` (so that our error codes report standard classes on every MPICH), and `MPI_Sendrecv`,
//! the probes (around native MPICH defects; one relaxed load while no stream communicator exists). Everything else,
//! `MPI_Send` on a stream communicator included, goes straight to MPICH.
//!
//! A table row becomes an exported `#[no_mangle]` function that forwards to a hook of the crate that
//! instantiates the table (`interposers!(path::to::hooks)`), so the symbols are defined once, here, and
//! the policy lives in the shim.

/// Which constructor made a communicator: decides stream inheritance (dup-like ones inherit their
/// parent's stream, as native MPICH does) and whether the explicit policy can attach a stream
/// (not to a nonblocking constructor, whose result is not ready when the call returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommCtor {
    Dup,
    DupWithInfo,
    Idup,
    IdupWithInfo,
    Split,
    SplitType,
    Create,
    CreateGroup,
}

impl CommCtor {
    /// Dup-like constructors keep the parent's stream (native MPICH's rule; `split` does not).
    pub fn inherits_stream(self) -> bool {
        matches!(self, CommCtor::Dup | CommCtor::DupWithInfo | CommCtor::Idup | CommCtor::IdupWithInfo)
    }
    /// Whether the new communicator is complete when the call returns.
    pub fn is_blocking(self) -> bool {
        !matches!(self, CommCtor::Idup | CommCtor::IdupWithInfo)
    }
    pub fn name(self) -> &'static str {
        match self {
            CommCtor::Dup => "MPI_Comm_dup",
            CommCtor::DupWithInfo => "MPI_Comm_dup_with_info",
            CommCtor::Idup => "MPI_Comm_idup",
            CommCtor::IdupWithInfo => "MPI_Comm_idup_with_info",
            CommCtor::Split => "MPI_Comm_split",
            CommCtor::SplitType => "MPI_Comm_split_type",
            CommCtor::Create => "MPI_Comm_create",
            CommCtor::CreateGroup => "MPI_Comm_create_group",
        }
    }
}

/// Defines the communicator-constructor interposers from one table. Each row:
/// `MPI_name => PMPI_name (args...) parent <arg> out <arg> kind Kind;`, naming the parent communicator
/// and the output handle among the arguments. The hook receives the parent, the output pointer and a closure
/// that performs the real `PMPI_*` call.
#[macro_export]
macro_rules! comm_constructor_interposers {
    ($hooks:path; $( $mpi:ident => $pmpi:ident ( $($arg:ident : $ty:ty),* )
                     parent $parent:ident out $out:ident kind $kind:ident ; )*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $mpi($($arg: $ty),*) -> std::os::raw::c_int {
                use $hooks as hooks;
                hooks::comm_constructed(
                    $crate::interpose::CommCtor::$kind,
                    $parent,
                    $out,
                    &|p: &$crate::pmpi::Pmpi| (p.$pmpi)($($arg),*),
                )
            }
        )*
    };
}

/// Defines the nonblocking-collective interposers from one table. Each row:
/// `MPI_name => PMPI_name (args...) comm <arg> request <arg>;`; the hook
/// `$fixes::nonblocking_collective(comm, request, create)` receives a closure making the real call
/// through the next definition in the preload chain (so that the tools library still counts it).
#[macro_export]
macro_rules! nonblocking_collective_interposers {
    ($fixes:path; $( $mpi:ident => $pmpi:ident ( $($arg:ident : $ty:ty),* ) comm $comm:ident request $req:ident ; )*) => {
        /// The nonblocking-collective interposers (a module, so that the rows can name MPI's types).
        pub mod nonblocking_collectives {
        #[allow(unused_imports)]
        use $crate::ffi::*;
        #[allow(unused_imports)]
        use std::os::raw::{c_int, c_void};
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $mpi($($arg: $ty),*) -> std::os::raw::c_int {
                use $fixes as fixes;
                fixes::nonblocking_collective(
                    $comm,
                    $req,
                    &|p: &$crate::pmpi::Pmpi, req: *mut $crate::ffi::MPI_Request| unsafe {
                        static NEXT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
                        let name = concat!(stringify!($mpi), "\0");
                        let name = std::ffi::CStr::from_bytes_with_nul_unchecked(name.as_bytes());
                        let $req = req;
                        $crate::pmpi::next_or(&NEXT, name, p.$pmpi)($($arg),*)
                    },
                )
            }
        )*
        }
    };
}

/// Instantiates every interposer of the lean library over the hooks module `$hooks`, which provides
/// `init`, `finalize`, `comm_constructed`, `comm_free` and `error_class`, and the module `$fixes` with
/// the routes around native MPICH defects (`sendrecv`, `probe`, `mprobe`, `iprobe`, `improbe`).
#[macro_export]
macro_rules! interposers {
    ($hooks:path, $fixes:path) => {
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init(
            argc: *mut std::os::raw::c_int,
            argv: *mut *mut *mut std::os::raw::c_char,
        ) -> std::os::raw::c_int {
            use $hooks as hooks;
            hooks::init(argc, argv, None)
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init_thread(
            argc: *mut std::os::raw::c_int,
            argv: *mut *mut *mut std::os::raw::c_char,
            required: std::os::raw::c_int,
            provided: *mut std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            use $hooks as hooks;
            hooks::init(argc, argv, Some((required, provided)))
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Finalize() -> std::os::raw::c_int {
            use $hooks as hooks;
            hooks::finalize()
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Comm_free(comm: *mut $crate::ffi::MPI_Comm) -> std::os::raw::c_int {
            use $hooks as hooks;
            hooks::comm_free(comm)
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Error_class(
            errorcode: std::os::raw::c_int,
            errorclass: *mut std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            use $hooks as hooks;
            hooks::error_class(errorcode, errorclass)
        }

        /// `MPI_Sendrecv`: native MPICH 5.0.2 hangs on it over a native stream communicator
        /// (tests/native_defects); the hook routes only those through Irecv + Isend + Waitall.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Sendrecv(
            sendbuf: *const std::os::raw::c_void,
            sendcount: std::os::raw::c_int,
            sendtype: $crate::ffi::MPI_Datatype,
            dest: std::os::raw::c_int,
            sendtag: std::os::raw::c_int,
            recvbuf: *mut std::os::raw::c_void,
            recvcount: std::os::raw::c_int,
            recvtype: $crate::ffi::MPI_Datatype,
            source: std::os::raw::c_int,
            recvtag: std::os::raw::c_int,
            comm: $crate::ffi::MPI_Comm,
            status: *mut $crate::ffi::MPI_Status,
        ) -> std::os::raw::c_int {
            use $fixes as fixes;
            fixes::sendrecv(
                sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm,
                status,
            )
        }

        /// `MPI_Probe`, `MPI_Mprobe`, `MPI_Iprobe`, `MPI_Improbe`: the same native defect as `MPI_Sendrecv`.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Probe(
            source: std::os::raw::c_int,
            tag: std::os::raw::c_int,
            comm: $crate::ffi::MPI_Comm,
            status: *mut $crate::ffi::MPI_Status,
        ) -> std::os::raw::c_int {
            use $fixes as fixes;
            fixes::probe(source, tag, comm, status)
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Mprobe(
            source: std::os::raw::c_int,
            tag: std::os::raw::c_int,
            comm: $crate::ffi::MPI_Comm,
            message: *mut $crate::ffi::MPI_Message,
            status: *mut $crate::ffi::MPI_Status,
        ) -> std::os::raw::c_int {
            use $fixes as fixes;
            fixes::mprobe(source, tag, comm, message, status)
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Iprobe(
            source: std::os::raw::c_int,
            tag: std::os::raw::c_int,
            comm: $crate::ffi::MPI_Comm,
            flag: *mut std::os::raw::c_int,
            status: *mut $crate::ffi::MPI_Status,
        ) -> std::os::raw::c_int {
            use $fixes as fixes;
            fixes::iprobe(source, tag, comm, flag, status)
        }

        #[no_mangle]
        pub unsafe extern "C" fn MPI_Improbe(
            source: std::os::raw::c_int,
            tag: std::os::raw::c_int,
            comm: $crate::ffi::MPI_Comm,
            flag: *mut std::os::raw::c_int,
            message: *mut $crate::ffi::MPI_Message,
            status: *mut $crate::ffi::MPI_Status,
        ) -> std::os::raw::c_int {
            use $fixes as fixes;
            fixes::improbe(source, tag, comm, flag, message, status)
        }

        $crate::nonblocking_collective_interposers! { $fixes;
            MPI_Ibarrier => PMPI_Ibarrier (comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Ibcast => PMPI_Ibcast (buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int,
                comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Ireduce => PMPI_Ireduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int,
                datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm, request: *mut MPI_Request)
                comm comm request request;
            MPI_Iallreduce => PMPI_Iallreduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int,
                datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Igather => PMPI_Igather (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) comm comm request request;
            MPI_Igatherv => PMPI_Igatherv (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype,
                root: c_int, comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Iscatter => PMPI_Iscatter (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm,
                request: *mut MPI_Request) comm comm request request;
            MPI_Iscatterv => PMPI_Iscatterv (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
                sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int,
                comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Iallgather => PMPI_Iallgather (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm,
                request: *mut MPI_Request) comm comm request request;
            MPI_Iallgatherv => PMPI_Iallgatherv (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype,
                comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Ialltoall => PMPI_Ialltoall (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm,
                request: *mut MPI_Request) comm comm request request;
            MPI_Ialltoallv => PMPI_Ialltoallv (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
                sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int,
                recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Ireduce_scatter_block => PMPI_Ireduce_scatter_block (sendbuf: *const c_void, recvbuf: *mut c_void,
                recvcount: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request)
                comm comm request request;
            MPI_Iscan => PMPI_Iscan (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
                op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
            MPI_Iexscan => PMPI_Iexscan (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int,
                datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) comm comm request request;
        }

        $crate::comm_constructor_interposers! { $hooks;
            MPI_Comm_dup => PMPI_Comm_dup (comm: $crate::ffi::MPI_Comm, newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind Dup;
            MPI_Comm_dup_with_info => PMPI_Comm_dup_with_info (comm: $crate::ffi::MPI_Comm, info: $crate::ffi::MPI_Info,
                newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind DupWithInfo;
            MPI_Comm_idup => PMPI_Comm_idup (comm: $crate::ffi::MPI_Comm, newcomm: *mut $crate::ffi::MPI_Comm,
                request: *mut $crate::ffi::MPI_Request) parent comm out newcomm kind Idup;
            MPI_Comm_idup_with_info => PMPI_Comm_idup_with_info (comm: $crate::ffi::MPI_Comm, info: $crate::ffi::MPI_Info,
                newcomm: *mut $crate::ffi::MPI_Comm, request: *mut $crate::ffi::MPI_Request) parent comm out newcomm kind IdupWithInfo;
            MPI_Comm_split => PMPI_Comm_split (comm: $crate::ffi::MPI_Comm, color: std::os::raw::c_int,
                key: std::os::raw::c_int, newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind Split;
            MPI_Comm_split_type => PMPI_Comm_split_type (comm: $crate::ffi::MPI_Comm, split_type: std::os::raw::c_int,
                key: std::os::raw::c_int, info: $crate::ffi::MPI_Info, newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind SplitType;
            MPI_Comm_create => PMPI_Comm_create (comm: $crate::ffi::MPI_Comm, group: $crate::ffi::MPI_Group,
                newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind Create;
            MPI_Comm_create_group => PMPI_Comm_create_group (comm: $crate::ffi::MPI_Comm, group: $crate::ffi::MPI_Group,
                tag: std::os::raw::c_int, newcomm: *mut $crate::ffi::MPI_Comm) parent comm out newcomm kind CreateGroup;
        }
    };
}
