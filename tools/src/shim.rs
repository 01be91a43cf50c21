//! The lean library's query API (`shim/src/query.rs`), found at run time in the process (it is
//! preloaded before us). Without it (the tools library preloaded alone) every communicator reads as
//! carrying no stream and the report says the backend is unknown.
use mpixstream_wrappers::ffi::MPI_Comm;
use mpixstream_wrappers::tools::Description;
use std::os::raw::c_int;
use std::sync::OnceLock;

type DescribeFn = unsafe extern "C" fn(*mut Description) -> c_int;
type CommFn = extern "C" fn(MPI_Comm) -> c_int;
type VciFn = extern "C" fn(c_int) -> c_int;
type MultiplexOfFn = unsafe extern "C" fn(MPI_Comm, *mut MPI_Comm, *mut c_int) -> c_int;

pub struct Shim {
    describe: Option<DescribeFn>,
    comm_stream: Option<CommFn>,
    comm_origin: Option<CommFn>,
    base_owner_stream: Option<CommFn>,
    stream_vci: Option<VciFn>,
    multiplex_of: Option<MultiplexOfFn>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();

/// The process's symbol `name` as a `T`, `None` where no object defines it.
///
/// # Safety
/// `T` is a function pointer type of the symbol's C prototype (the lean library's `shim/src/query.rs`).
unsafe fn sym<T: Copy>(name: &std::ffi::CStr) -> Option<T> {
    const { assert!(std::mem::size_of::<T>() == std::mem::size_of::<*mut libc::c_void>()) };
    // SAFETY: `name` is a NUL-terminated string; RTLD_DEFAULT searches the loaded objects.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: a non-null symbol address, as the pointer type of its prototype (the contract; same size).
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut libc::c_void, T>(&p) })
}

pub fn get() -> &'static Shim {
    // SAFETY: each type is the prototype of that symbol in shim/src/query.rs (the lean library's query API).
    SHIM.get_or_init(|| unsafe {
        Shim {
            describe: sym(c"mpixstream_describe"),
            comm_stream: sym(c"mpixstream_comm_stream"),
            comm_origin: sym(c"mpixstream_comm_origin"),
            base_owner_stream: sym(c"mpixstream_base_owner_stream"),
            stream_vci: sym(c"mpixstream_stream_vci"),
            multiplex_of: sym(c"mpixstream_multiplex_of"),
        }
    })
}

/// Who attached a communicator's stream (the lean library's own type).
pub use mpixstream_wrappers::tools::StreamOrigin as Origin;

impl Shim {
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
    pub fn comm_stream(&self, comm: MPI_Comm) -> (Option<u32>, Origin) {
        let stream = self.comm_stream.map_or(-1, |f| f(comm));
        if stream < 0 {
            return (None, Origin::None);
        }
        let origin = Origin::from_code(self.comm_origin.map_or(0, |f| f(comm)));
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
}
