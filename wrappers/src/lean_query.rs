//! The lean library's query API (`shim/src/query.rs`), as the tools library calls it: found at run time in
//! the process (the lean library is preloaded before the tools library), each entry typed here once.
//! Without it (the tools library preloaded alone) every communicator reads as carrying no stream and the
//! report says the backend is unknown.
use crate::ffi::{MPI_Comm, WideHandle};
use crate::tools::{Description, StreamOrigin};
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

type DescribeFn = unsafe extern "C" fn(*mut Description) -> c_int;
type CommFn = extern "C" fn(MPI_Comm) -> c_int;
type VciFn = extern "C" fn(c_int) -> c_int;
type MultiplexOfFn = unsafe extern "C" fn(MPI_Comm, *mut MPI_Comm, *mut c_int) -> c_int;
type StdCommStreamFn = unsafe extern "C" fn(WideHandle, *mut c_int) -> c_int;
type StdMultiplexOfFn = unsafe extern "C" fn(WideHandle, *mut WideHandle, *mut [c_int; 4]) -> c_int;
type CountFn = extern "C" fn() -> c_int;
type StepFn = extern "C" fn(c_int) -> i64;

/// The query entries the lean library defines (each `None` where it is absent).
pub struct LeanQuery {
    describe: Option<DescribeFn>,
    comm_stream: Option<CommFn>,
    comm_origin: Option<CommFn>,
    base_owner_stream: Option<CommFn>,
    stream_vci: Option<VciFn>,
    multiplex_of: Option<MultiplexOfFn>,
    std_comm_stream: Option<StdCommStreamFn>,
    std_multiplex_of: Option<StdMultiplexOfFn>,
    comm_identity: Option<CommFn>,
    identity_count: Option<CountFn>,
    identity_parent: Option<VciFn>,
    identity_step: Option<StepFn>,
}

/// The process's symbol `name` as a `T`, `None` where no object defines it.
///
/// # Safety
/// `T` is the function pointer type of the symbol's C prototype (the lean library's `shim/src/query.rs`).
unsafe fn sym<T: Copy>(name: &CStr) -> Option<T> {
    const { assert!(std::mem::size_of::<T>() == std::mem::size_of::<*mut c_void>()) };
    let p = crate::dl::default_symbol(name);
    // SAFETY: a non-null symbol address, as the pointer type of its prototype (the contract; same size).
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// The entries, looked up once.
pub fn get() -> &'static LeanQuery {
    static QUERY: OnceLock<LeanQuery> = OnceLock::new();
    // SAFETY: each type is the prototype of that symbol in shim/src/query.rs (the lean library's query API).
    QUERY.get_or_init(|| unsafe {
        LeanQuery {
            describe: sym(c"mpixstream_describe"),
            comm_stream: sym(c"mpixstream_comm_stream"),
            comm_origin: sym(c"mpixstream_comm_origin"),
            base_owner_stream: sym(c"mpixstream_base_owner_stream"),
            stream_vci: sym(c"mpixstream_stream_vci"),
            multiplex_of: sym(c"mpixstream_multiplex_of"),
            std_comm_stream: sym(c"mpixstream_std_comm_stream"),
            std_multiplex_of: sym(c"mpixstream_std_multiplex_of"),
            comm_identity: sym(c"mpixstream_comm_identity"),
            identity_count: sym(c"mpixstream_identity_count"),
            identity_parent: sym(c"mpixstream_identity_parent"),
            identity_step: sym(c"mpixstream_identity_step"),
        }
    })
}

impl LeanQuery {
    pub fn present(&self) -> bool {
        self.describe.is_some()
    }

    pub fn describe(&self) -> Option<Description> {
        let f = self.describe?;
        let mut d = Description::default();
        // SAFETY: the lean library's `mpixstream_describe`, writing a `Description` into a live one.
        (unsafe { f(&mut d) } == 0).then_some(d)
    }

    /// (stream index, origin) of `comm`.
    pub fn comm_stream(&self, comm: MPI_Comm) -> (Option<u32>, StreamOrigin) {
        let stream = self.comm_stream.map_or(-1, |f| f(comm));
        if stream < 0 {
            return (None, StreamOrigin::None);
        }
        let origin = StreamOrigin::from_code(self.comm_origin.map_or(0, |f| f(comm)));
        (Some(stream as u32), origin)
    }

    /// Where `comm` is the plain base of a policy communicator (which runs that communicator's
    /// nonblocking collectives on the implicit pool), the policy communicator's stream index.
    pub fn base_owner_stream(&self, comm: MPI_Comm) -> Option<u32> {
        let s = self.base_owner_stream.map_or(-1, |f| f(comm));
        (s >= 0).then_some(s as u32)
    }

    /// Where `comm` is a hidden communicator of a multiplex communicator: (that communicator, the
    /// local index whose stream `comm` carries here; `None` on MPICH's implicit pool).
    pub fn multiplex_of(&self, comm: MPI_Comm) -> Option<(MPI_Comm, Option<u32>)> {
        let f = self.multiplex_of?;
        let (mut user, mut index) = (0 as MPI_Comm, -1 as c_int);
        // SAFETY: the lean library's `mpixstream_multiplex_of`, writing into two live locals.
        (unsafe { f(comm, &mut user, &mut index) } == 1).then_some((user, (index >= 0).then_some(index as u32)))
    }

    pub fn stream_vci(&self, index: u32) -> Option<u32> {
        let v = self.stream_vci.map_or(-1, |f| f(index as c_int));
        (v >= 0).then_some(v as u32)
    }

    /// On the standard ABI: the stream `comm` carries (-1: none) and who attached it (a `StreamOrigin`
    /// code).
    pub fn std_comm_stream(&self, comm: WideHandle) -> (c_int, c_int) {
        let Some(f) = self.std_comm_stream else { return (-1, 0) };
        let mut origin = 0;
        // SAFETY: the lean library's `mpixstream_std_comm_stream`, given a handle and a live `int`.
        let stream = unsafe { f(comm, &mut origin) };
        (stream, origin)
    }

    /// On the standard ABI, where `comm` is a hidden communicator of a multiplex communicator: that
    /// communicator, and the local send and receive indices and their streams (-1: none).
    pub fn std_multiplex_of(&self, comm: WideHandle) -> Option<(WideHandle, [c_int; 4])> {
        let f = self.std_multiplex_of?;
        let (mut user, mut ix) = (0, [-1 as c_int; 4]);
        // SAFETY: the lean library's `mpixstream_std_multiplex_of`, given a handle and two live out
        // values of its parameter types.
        (unsafe { f(comm, &mut user, &mut ix) } == 1).then_some((user, ix))
    }

    /// `comm`'s identity from run to run (`comm_identity`), where the lean library keeps one.
    pub fn comm_identity(&self, comm: MPI_Comm) -> Option<String> {
        let n = self.comm_identity.map_or(-1, |f| f(comm));
        (n >= 0).then(|| self.identity_path(n)).flatten()
    }

    /// Every identity this process made, in order of creation (the roots left out).
    pub fn identities(&self) -> Vec<String> {
        let n = self.identity_count.map_or(0, |f| f());
        (2..n).filter_map(|i| self.identity_path(i)).collect()
    }

    /// The path of the lean library's identity node `node`, from its parents' steps.
    fn identity_path(&self, node: c_int) -> Option<String> {
        let (parent, step) = (self.identity_parent?, self.identity_step?);
        let mut steps = Vec::new();
        let mut at = node;
        let root = loop {
            match step(at) {
                -1 => break crate::comm_identity::Root::World,
                -2 => break crate::comm_identity::Root::SelfComm,
                code if code >= 0 => {
                    let kind = *crate::interpose::CommCtor::ALL.get((code >> 32) as usize)?;
                    steps.push(crate::comm_identity::Step { kind, seq: code as u32 });
                    at = parent(at);
                }
                _ => return None,
            }
        };
        steps.reverse();
        Some(crate::comm_identity::format(root, &steps))
    }
}
