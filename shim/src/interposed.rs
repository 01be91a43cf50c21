//! What our `MPI_*` interposers do (the symbols themselves are generated in `mpixstream-wrappers`).
use crate::backend::{self, Backend};
use crate::comms::{CommRecord, Origin};
use crate::config::{Config, Policy};
use crate::errors::{self, Errors};
use crate::policy;
use crate::runtime::{self, Runtime};
use crate::streams::StreamTable;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::pmpi::{self, pmpi, Pmpi};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

// The exported `MPI_*` interposers, generated from wrappers/mpi.prototypes: each calls a function of
// this module (`init`, `finalize`, the constructors…) or of `native_fixes`.
mpixstream_wrappers::interposers!(crate::interposed, crate::native_fixes);

/// `MPI_Init` (thread = None) and `MPI_Init_thread`.
pub unsafe fn init(argc: *mut c_int, argv: *mut *mut *mut c_char, thread: Option<(c_int, *mut c_int)>) -> c_int {
    ffi_guard("MPI_Init", || unsafe {
        // A program on the MPI standard ABI runs untouched: nothing below may run (MPICH's constants).
        if mpixstream_wrappers::abi::standard() {
            return crate::standard_abi::init(argc, argv, thread);
        }
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("mpixstream: {e}");
                return MPI_ERR_OTHER;
            }
        };
        if runtime::is_initialized_by_us() {
            // A second MPI_Init: MPICH reports the error.
            return match thread {
                None => (p.PMPI_Init)(argc, argv),
                Some((required, provided)) => (p.PMPI_Init_thread)(argc, argv, required, provided),
            };
        }
        let config = match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        // MPIXSTREAM_THREAD_MULTIPLE=1: the enqueue engine's threads call MPI, so ask for MULTIPLE.
        let multiple = config.enqueue.thread_multiple;
        let call = |p: &Pmpi| match thread {
            None if multiple => (p.PMPI_Init_thread)(argc, argv, MPI_THREAD_MULTIPLE, &mut 0),
            None => (p.PMPI_Init)(argc, argv),
            Some((required, provided)) => {
                (p.PMPI_Init_thread)(argc, argv, if multiple { MPI_THREAD_MULTIPLE } else { required }, provided)
            }
        };
        let detected = match backend::detect(p, &config) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        if let Err(e) = detected.configure_mpich() {
            eprintln!("mpixstream: {e}");
            std::process::exit(1);
        }
        let rc = call(p);
        if rc != MPI_SUCCESS {
            return rc;
        }
        match start_runtime(p, config, detected) {
            Ok(rt) => {
                if rt.config.verbose && rt.rank == 0 {
                    eprintln!("{}", banner(rt));
                }
                crate::tools_link::tools_init();
                MPI_SUCCESS
            }
            Err(e) => {
                eprintln!("mpixstream: initialisation failed after MPI_Init: {e}");
                (p.PMPI_Abort)(MPI_COMM_WORLD, 1);
                MPI_ERR_OTHER
            }
        }
    })
}

unsafe fn start_runtime(p: &Pmpi, config: Config, detected: backend::Detected) -> Result<&'static Runtime, String> {
    let mut rank = 0;
    let mut size = 1;
    let mut level = MPI_THREAD_SINGLE;
    (p.PMPI_Comm_rank)(MPI_COMM_WORLD, &mut rank);
    (p.PMPI_Comm_size)(MPI_COMM_WORLD, &mut size);
    (p.PMPI_Query_thread)(&mut level);
    errors::install(Errors::create()?);
    let mut progress_comm = MPI_COMM_NULL;
    if (p.PMPI_Comm_dup)(MPI_COMM_SELF, &mut progress_comm) != MPI_SUCCESS {
        return Err("could not duplicate MPI_COMM_SELF".into());
    }
    // The communicator records' keyval: not copied by a dup (each constructor settles its result's
    // record), deleted by `record_deleted`.
    let mut record_keyval: c_int = 0;
    if (p.PMPI_Comm_create_keyval)(None, Some(record_deleted), &mut record_keyval, std::ptr::null_mut()) != MPI_SUCCESS
    {
        return Err("could not create the keyval of the communicator records".into());
    }
    Ok(runtime::install(Runtime {
        streams: StreamTable::new(detected.pool as usize),
        comms: Default::default(),
        record_keyval,
        backend: detected.backend,
        library: detected.library,
        mpich_version: detected.version,
        backend_reason: detected.reason,
        rank,
        size,
        thread_level: level,
        progress_comm,
        global_progress: Mutex::new(None),
        config,
    }))
}

pub fn banner(rt: &Runtime) -> String {
    let level = ["MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"]
        .get(rt.thread_level as usize)
        .copied()
        .unwrap_or("unknown");
    let pool = rt.streams.capacity();
    let mapping = match rt.backend {
        Backend::Native => {
            format!("{pool} streams, each a native stream on its own reserved VCI (MPIR_CVAR_CH4_RESERVE_VCIS={pool})")
        }
        Backend::Serial => {
            format!("{pool} streams, all on MPICH's one endpoint (VCI 0): functionally complete, serialised")
        }
        Backend::Split => format!(
            "{pool} streams, each on its own Intel MPI thread-split endpoint 1..{pool} (MPIR_CVAR_THREAD_MAX={})",
            pool + 1
        ),
    };
    // MPICH 4.1 and 4.2 (no MPIX_Async_start) under the explicit policy: how MPI's progress rule is kept.
    let progress = match crate::policy::progress_rule::banner_note(rt) {
        Some(note) if rt.config.policy == Policy::Explicit => format!(" ({note})"),
        _ => String::new(),
    };
    format!(
        "mpixstream {}: {} | backend {} ({}) | pool: {} | policy {}{} | {} | {} ranks | {}",
        env!("CARGO_PKG_VERSION"),
        rt.library,
        rt.backend.name(),
        rt.backend_reason,
        mapping,
        rt.config.policy,
        progress,
        level,
        rt.size,
        rt.config.describe()
    )
}

pub unsafe fn finalize() -> c_int {
    ffi_guard("MPI_Finalize", || unsafe {
        let Some(rt) = runtime::active() else {
            return match pmpi::load() {
                Ok(p) => (p.PMPI_Finalize)(),
                Err(_) => MPI_ERR_OTHER,
            };
        };
        let p = pmpi();
        // Enqueued work: drained, or reported and abandoned after MPIXSTREAM_FINALIZE_TIMEOUT.
        crate::multiplex::shutdown();
        let drained = crate::enqueue::finalize();
        // The finalizing thread's routed buffered sends are delivered (MPICH's detach does it for its own).
        crate::native_fixes::buffered::finalize();
        // And its nonblocking send-receives freed before they completed.
        crate::native_fixes::sendrecv_requests::finalize();
        crate::tools_link::tools_finalize();
        if let Some(t) = rt.global_progress.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.stop();
        }
        for (_, slot) in rt.streams.live() {
            if let Some(t) = slot.progress.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.stop();
            }
        }
        // MPICH's MPI_Finalize waits for the policy streams' async things: they finish now.
        crate::policy::progress_rule::finalize();
        let mut pc = rt.progress_comm;
        (p.PMPI_Comm_free)(&mut pc);
        runtime::mark_finalized();
        errors::retire();
        let rc = (p.PMPI_Finalize)();
        backend::close_tool_interface();
        if rc == MPI_SUCCESS && !drained {
            return MPI_ERR_PENDING;
        }
        rc
    })
}

/// A communicator constructor on the MPI standard ABI (`newcomm` pointer-wide): the explicit policy's
/// bookkeeping there (`standard_abi::policy`).
pub unsafe fn std_comm_constructed(
    kind: CommCtor,
    parent: mpixstream_wrappers::ffi::WideHandle,
    newcomm: *mut mpixstream_wrappers::ffi::WideHandle,
    create: impl FnOnce() -> c_int,
) -> c_int {
    ffi_guard(kind.name(), move || unsafe {
        crate::standard_abi::policy::comm_constructed(kind, parent, newcomm, create)
    })
}

/// `MPI_Finalize` on the MPI standard ABI: the tools library's report first (while MPI is up), then the
/// library's.
pub unsafe fn std_finalize(finalize: impl FnOnce() -> c_int) -> c_int {
    crate::tools_link::tools_finalize();
    finalize()
}

/// A communicator constructor: `create` makes the communicator; we then record stream inheritance
/// (dup-like constructors of a stream communicator) or apply the explicit policy. `info`: the info
/// argument of `MPI_Comm_dup_with_info`; `request`: the request of `MPI_Comm_idup*`.
pub unsafe fn comm_constructed(
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: *mut MPI_Comm,
    info: Option<MPI_Info>,
    request: Option<*mut MPI_Request>,
    create: &dyn Fn(&Pmpi) -> c_int,
) -> c_int {
    ffi_guard(kind.name(), || unsafe {
        let Some(rt) = runtime::active() else {
            return match pmpi::load() {
                Ok(p) => create(p),
                Err(_) => MPI_ERR_OTHER,
            };
        };
        // A constructor is a collective on `parent` (a blocking one, but for the idups): the calling
        // thread's buffered messages that only it can deliver leave first.
        if request.is_none() {
            crate::native_fixes::before_blocking(parent);
        }
        // The policy's blocking dup on the native backend: the stream communicator made from `parent`
        // directly, so that MPICH copies the attributes once, into the communicator the application gets.
        if let Some(rc) = policy::dup_directly(rt, kind, parent, newcomm, info) {
            return rc;
        }
        // The policy's idup of one of its communicators: the child is not on the parent's stream.
        if let Some(rc) = crate::policy::base::idup(rt, kind, parent, newcomm, info, request) {
            if rc == MPI_SUCCESS {
                policy::STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
            }
            return rc;
        }
        // On the split backend a multiplex communicator's dup agrees endpoints for its hidden
        // communicators with blocking collectives, which a nonblocking dup cannot run (the same on every
        // member: the backend and the parent's kind are).
        if rt.backend == Backend::Split && !kind.is_blocking() && crate::multiplex::registry::lookup(parent).is_some() {
            return crate::errors::raise(
                parent,
                crate::errors::Class::Unsupported,
                kind.name(),
                "a nonblocking dup of a multiplex communicator is not supported on the split backend (its hidden \
                 communicators' thread-split endpoints are agreed with blocking collectives); use MPI_Comm_dup",
            );
        }
        // The split backend's endpoint for the new communicator, agreed over `parent` first.
        let agreed = policy::endpoint_before(rt, kind, parent);
        let rc = create(pmpi());
        if rc != MPI_SUCCESS || newcomm.is_null() || *newcomm == MPI_COMM_NULL {
            policy::give_back(rt, agreed);
            return rc;
        }
        // A dup of a multiplex communicator is multiplex too.
        if let Some(rc) = crate::multiplex::comm_constructed(rt, kind, parent, newcomm, request) {
            policy::give_back(rt, agreed);
            return rc;
        }
        if let Some(agreed) = agreed {
            return policy::attach_stream(rt, kind, newcomm, Some(agreed));
        }
        match rt.comms.get(parent) {
            // The application's stream communicator: dup-like children share its stream (native MPICH
            // does the same for the endpoint; this is our bookkeeping of it).
            Some(e) if e.origin == Origin::User && kind.inherits_stream() => inherit(rt, &e, *newcomm, rc),
            // A nonblocking dup of a policy communicator that MPICH made (`policy_base::idup` did not
            // apply): MPICH gives the child the parent's stream (and the policy cannot attach a new one
            // without blocking), so record that they share it.
            Some(e) if e.origin == Origin::Policy && kind.inherits_stream() && !kind.is_blocking() => {
                inherit(rt, &e, *newcomm, rc)
            }
            _ if rt.config.policy == Policy::Explicit => policy::attach_stream(rt, kind, newcomm, None),
            _ => rc,
        }
    })
}

/// `child` carries the stream of `parent`'s record (where this process has one), and runs its
/// collectives on itself: it has no base.
fn inherit(rt: &Runtime, parent: &CommRecord, child: MPI_Comm, rc: c_int) -> c_int {
    match parent.stream {
        Some(s) => rt.attach_record(child, CommRecord::on_stream(s, parent.origin)),
        None => rc,
    }
}

/// `MPI_Comm_set_errhandler`: on a multiplex communicator the hidden communicators follow (see
/// `multiplex::errhandler_set`).
pub unsafe fn comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    ffi_guard("MPI_Comm_set_errhandler", || unsafe {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let rc = (p.PMPI_Comm_set_errhandler)(comm, errhandler);
        if rc == MPI_SUCCESS && runtime::active().is_some() {
            if let Some(mx) = crate::multiplex::registry::lookup(comm) {
                crate::multiplex::errhandler_set(mx);
            }
            crate::policy::base::errhandler_set(comm, errhandler);
        }
        rc
    })
}

pub unsafe fn comm_free(comm: *mut MPI_Comm) -> c_int {
    ffi_guard("MPI_Comm_free", || unsafe {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let handle = if comm.is_null() { MPI_COMM_NULL } else { *comm };
        if let Some(rt) = runtime::active() {
            if let Err((class, msg)) = crate::enqueue::check_comm_free(rt, handle) {
                return errors::raise(handle, class, "MPI_Comm_free", &msg);
            }
        }
        // What the library keeps of the communicator goes with its record (`record_deleted`).
        (p.PMPI_Comm_free)(comm)
    })
}

/// The delete callback of the communicator records' keyval: MPICH runs it on every destruction path
/// of a communicator with a record (`MPI_Comm_free`, `MPI_Comm_disconnect`), before the handle can be
/// reused. The record leaves the cache, its base is freed, a policy stream no communicator uses any
/// more is given back, and a multiplex communicator's record goes (`multiplex::comm_freed`).
unsafe extern "C" fn record_deleted(comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    ffi_guard("MPI_Comm_free (communicator record)", || unsafe {
        let record = std::sync::Arc::from_raw(value as *const CommRecord);
        let Some(rt) = runtime::active() else { return MPI_SUCCESS };
        if rt.comms.remove(&rt.streams, comm, &record) {
            if let Some(mut base) = record.base {
                (pmpi().PMPI_Comm_free)(&mut base.comm);
            }
            if let (Origin::Policy, Some(s)) = (record.origin, record.stream) {
                if rt.streams.slot(s).comms.load(Ordering::Acquire) == 0 {
                    policy::release_stream(rt, s);
                }
            }
            if let Some(mx) = crate::multiplex::registry::lookup(comm) {
                crate::multiplex::comm_freed(rt, comm, mx);
            }
        }
        MPI_SUCCESS
    })
}

/// `MPI_Comm_create_keyval`: recorded, so that the policy's idups copy the attributes (policy_base.rs).
pub unsafe fn comm_create_keyval(
    copy: Option<MPI_Comm_copy_attr_function>,
    delete: Option<MPI_Comm_delete_attr_function>,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    ffi_guard("MPI_Comm_create_keyval", || unsafe {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let rc = (p.PMPI_Comm_create_keyval)(copy, delete, keyval, extra_state);
        if rc == MPI_SUCCESS && !keyval.is_null() {
            crate::policy::base::keyval_created(*keyval, copy, extra_state);
        }
        rc
    })
}

pub unsafe fn comm_free_keyval(keyval: *mut c_int) -> c_int {
    ffi_guard("MPI_Comm_free_keyval", || unsafe {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        if !keyval.is_null() {
            crate::policy::base::keyval_freed(*keyval);
        }
        (p.PMPI_Comm_free_keyval)(keyval)
    })
}

pub unsafe fn error_class(code: c_int, class: *mut c_int) -> c_int {
    ffi_guard("MPI_Error_class", || unsafe {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let rc = (p.PMPI_Error_class)(code, class);
        if rc == MPI_SUCCESS && !class.is_null() {
            if let Some(standard) = errors::standard_class(*class) {
                *class = standard;
            }
        }
        rc
    })
}
