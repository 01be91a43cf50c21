//! The process-wide state that exists between `MPI_Init*` and `MPI_Finalize`.
use crate::backend::Backend;
use crate::comms::{CommRecord, CommTable};
use crate::config::Config;
use crate::streams::StreamTable;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{kept, Comm};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

pub struct Runtime {
    pub config: Config,
    pub backend: Backend,
    /// The MPI build: MPICH's version, netmod in use and library path (`mpich_build::describe`).
    pub library: String,
    /// MPICH's version, where `MPI_Get_library_version` names one.
    pub mpich_version: Option<(u32, u32, u32)>,
    pub rank: c_int,
    pub size: c_int,
    pub thread_level: c_int,
    /// Where the program cannot gain from the library (`backend::demand`): the policy it asked for and
    /// why it is inert (then `config.policy` is `implicit`).
    pub inert: Option<(crate::config::Policy, crate::backend::demand::Inert)>,
    pub streams: StreamTable,
    pub comms: CommTable,
    /// The keyval under which each communicator's record is attached (`attach_record`); its delete
    /// callback (`interposed::record_deleted`) retires the record.
    pub record_keyval: c_int,
    /// A private duplicate of `MPI_COMM_SELF` on which `MPI_Iprobe` drives MPICH's global progress.
    pub progress_comm: MPI_Comm,
    /// The same communicator, owned: freed once, in `MPI_Finalize` (`progress_comm` is its view).
    pub progress_comm_owned: mpixstream_wrappers::mpi::SharedComm,
    /// Why this backend (for the banner and the report).
    pub backend_reason: String,
    /// `MPIX_Start_progress_thread(MPIX_STREAM_NULL)`'s thread.
    pub global_progress: std::sync::Mutex<Option<crate::thread::BackgroundThread>>,
    /// Whether the progress helper thread turns the implicit pool too (`helper`): on MPICH >= 4.3,
    /// where the explicit policy gives streams; MPICH 4.1.3 broke beside a thread of ours on the
    /// implicit pool (docs/native-defects.md).
    pub helper_turns_implicit: bool,
}

const UNINITIALIZED: u8 = 0;
const ACTIVE: u8 = 1;
const FINALIZED: u8 = 2;

static PHASE: AtomicU8 = AtomicU8::new(UNINITIALIZED);
static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, if MPI is initialised through us and not finalised.
#[inline]
pub fn active() -> Option<&'static Runtime> {
    if PHASE.load(Ordering::Acquire) == ACTIVE {
        RUNTIME.get()
    } else {
        None
    }
}

/// The runtime for an MPIX entry point, or the error code it must return: calls before `MPI_Init`
/// and after `MPI_Finalize` are erroneous in MPI; we say so on stderr and return `MPI_ERR_OTHER`. On
/// the MPI standard ABI, where the runtime never starts, the entry points that serve it dispatch to
/// `standard_abi` before getting here; the others (enqueue, progress threads, ...) get
/// `MPI_ERR_UNSUPPORTED_OPERATION` (`standard_abi::refuse`).
#[inline]
pub fn require(func: &str) -> Result<&'static Runtime, c_int> {
    match active() {
        Some(rt) => Ok(rt),
        None => Err(outside_mpi(func)),
    }
}

#[cold]
fn outside_mpi(func: &str) -> c_int {
    // The runtime never starts on the standard ABI: an MPIX entry point without an implementation
    // there gets here.
    if mpixstream_wrappers::abi::standard() {
        return crate::standard_abi::refuse(func);
    }
    let when = match PHASE.load(Ordering::Acquire) {
        FINALIZED => "after MPI_Finalize",
        _ => "before MPI_Init (or MPI was not initialised through mpixstream)",
    };
    mpixstream_wrappers::say!("mpixstream: {func} called {when}");
    MPI_ERR_OTHER
}

pub fn install(rt: Runtime) -> &'static Runtime {
    let rt = RUNTIME.get_or_init(|| rt);
    PHASE.store(ACTIVE, Ordering::Release);
    rt
}

pub fn mark_finalized() {
    PHASE.store(FINALIZED, Ordering::Release);
}

pub fn is_initialized_by_us() -> bool {
    PHASE.load(Ordering::Acquire) != UNINITIALIZED
}

/// Runs an MPIX entry point: `ffi_guard` (a Rust panic never crosses the C boundary), and the runtime
/// for the body, or, for a call outside `MPI_Init`..`MPI_Finalize`, the error it must return.
pub(crate) fn mpix_entry(name: &'static str, body: impl FnOnce(&'static Runtime) -> c_int) -> c_int {
    mpixstream_wrappers::guard::ffi_guard(name, || match require(name) {
        Ok(rt) => body(rt),
        Err(code) => code,
    })
}

/// An MPIX entry point on the standard ABI: `crate::standard_abi` with the program's pointer-wide
/// handles, under the same panic guard as [`mpix_entry`].
#[cold]
#[inline(never)]
pub(crate) fn standard_entry(name: &'static str, body: impl FnOnce() -> c_int) -> c_int {
    mpixstream_wrappers::guard::ffi_guard(name, body)
}

impl Runtime {
    pub fn thread_multiple(&self) -> bool {
        self.thread_level == MPI_THREAD_MULTIPLE
    }

    /// Attaches `record` to `comm` as an MPI attribute, so that MPICH runs the record's delete callback
    /// on every destruction path of `comm` before its handle can be reused, and caches it by handle
    /// (`comms`). Fails only where MPICH refuses the attribute (then `comm` has no record).
    pub fn attach_record(&self, comm: MPI_Comm, record: CommRecord) -> c_int {
        let record = std::sync::Arc::new(record);
        let value = kept::give(&record);
        if let Err(rc) = Comm(comm).set_attr(self.record_keyval, value.word()) {
            // MPICH refused the attribute and keeps no copy: the reference is ours again, and nothing of
            // the record stays (its base is freed here, before anyone else could see it).
            drop(value.refused());
            if let Some(base) = record.base.as_ref().and_then(|b| b.take()) {
                let _ = base.free();
            }
            return rc;
        }
        value.taken();
        self.comms.insert(&self.streams, comm, record);
        MPI_SUCCESS
    }

    /// One turn of progress on a native stream's endpoint (`MPIX_STREAM_NULL`: MPICH's global progress).
    /// The caller holds the stream's claim (`StreamSlot::claim`).
    pub fn progress(&self, native: MPIX_Stream) -> c_int {
        self.backend.progress(native, self.progress_comm)
    }

    /// Makes the backend's endpoint of stream `index` and records it in the stream's slot (on the
    /// native backend with its reserved VCI, which the request handles made there name).
    pub fn create_endpoint(&self, index: usize) -> Result<MPIX_Stream, String> {
        let native = self.backend.create_stream()?;
        let vci = match self.backend {
            crate::backend::Backend::Native => self.backend.stream_vci(native),
            _ => None,
        };
        self.streams.set_native(index, native, vci);
        Ok(native)
    }
}
