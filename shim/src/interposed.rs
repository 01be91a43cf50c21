//! What our `MPI_*` interposers do (the symbols themselves are generated in `mpixstream-wrappers`).
use crate::backend::{self, Backend};
use crate::comms::{CommRecord, Origin};
use crate::config::{Config, Policy};
use crate::ctor_plan::{self, Parent, Plan};
use crate::errors::{self, Errors};
use crate::policy;
use crate::runtime::{self, Runtime};
use crate::streams::{RequestPools, StreamTable};
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
        let detected = match backend::detect(p, &config) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        // MPIXSTREAM_THREAD_MULTIPLE=1: the enqueue engine's threads call MPI, so ask for MULTIPLE. The
        // native backend always does: its progress helper thread keeps MPI's progress rule for the
        // streams' reserved endpoints (helper.rs), and may call MPI only at that level.
        let multiple = config.enqueue.thread_multiple || detected.backend == Backend::Native;
        let call = |p: &Pmpi| match thread {
            None if multiple => (p.PMPI_Init_thread)(argc, argv, MPI_THREAD_MULTIPLE, &mut 0),
            None => (p.PMPI_Init)(argc, argv),
            Some((required, provided)) => {
                (p.PMPI_Init_thread)(argc, argv, if multiple { MPI_THREAD_MULTIPLE } else { required }, provided)
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
                if rt.config.verbose {
                    // Collective: the hosts of the job and their pools, on rank 0.
                    let hosts = backend::hosts::gather(p, rt.rank, rt.size, rt.streams.capacity() as u32);
                    if rt.rank == 0 {
                        eprintln!("{}", banner(rt, hosts.as_deref()));
                    }
                }
                crate::helper::start(rt);
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
    let native = detected.backend == Backend::Native;
    let pools = if native { RequestPools::of_mpich(detected.version) } else { RequestPools::NONE };
    Ok(runtime::install(Runtime {
        streams: StreamTable::new(detected.pool as usize, pools),
        helper_turns_implicit: native && detected.version.is_some_and(|v| (v.0, v.1) >= (4, 3)),
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

/// `hosts`: where the ranks run (`backend::hosts`), else their number alone.
pub fn banner(rt: &Runtime, hosts: Option<&str>) -> String {
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
    let progress = match crate::helper::banner_note(rt) {
        Some(note) if rt.config.policy == Policy::Explicit => format!(" ({note})"),
        _ => String::new(),
    };
    format!(
        "mpixstream {}: {} | backend {} ({}) | pool: {} | policy {}{} | {} | {} | {}",
        env!("CARGO_PKG_VERSION"),
        rt.library,
        rt.backend.name(),
        rt.backend_reason,
        mapping,
        rt.config.policy,
        progress,
        level,
        hosts.map_or_else(|| format!("{} ranks", rt.size), str::to_string),
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
        if let Some(t) = rt.global_progress.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.stop();
        }
        for (_, slot) in rt.streams.live() {
            if let Some(t) = slot.progress.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.stop();
            }
        }
        // No other thread calls MPI any more (MPI 4.1 §11.2.2): the operations nobody waits for (every
        // thread's routed buffered messages, freed send-receives) complete here, as MPICH delivers its
        // own buffered messages in its finalize, and the deferred destruction runs.
        crate::helper::stop();
        while crate::orphans::pending() != 0 || crate::deferred::pending() {
            crate::helper::help(rt, true);
            std::thread::yield_now();
        }
        crate::tools_link::tools_finalize();
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

/// A communicator constructor: what every member does is planned from facts they all share
/// (`ctor_plan`), then done: MPICH's constructor (`create`), the child's inherited record, the explicit
/// policy's stream, or a multiplex dup. `info`: the info argument of `MPI_Comm_dup_with_info`;
/// `request`: the request of `MPI_Comm_idup*`. The constructor runs collectives over `parent`: inside
/// its stream's endpoint, where it has one.
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
        let plan = ctor_plan::plan(facts(rt, kind, parent));
        let _claim = crate::native_fixes::native_streams::native_stream_of(parent).map(|s| s.claim());
        match plan {
            Plan::RefuseNonblockingMultiplexDup => crate::errors::raise(
                parent,
                crate::errors::Class::Unsupported,
                kind.name(),
                "a nonblocking dup of a multiplex communicator is not supported on the split backend (its hidden \
                 communicators' thread-split endpoints are agreed with blocking collectives); use MPI_Comm_dup",
            ),
            // The policy's blocking dup on the native backend: the stream communicator made from `parent`
            // directly, so that MPICH copies the attributes once, into the communicator the application
            // gets.
            Plan::PolicyDup => policy::dup_directly(rt, parent, newcomm, info),
            // The policy's idup of one of its communicators: the child is not on the parent's stream.
            Plan::IdupOfBase => {
                let rc = crate::policy::base::idup(rt, kind, parent, newcomm, info, request);
                if rc == MPI_SUCCESS {
                    policy::STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
                }
                rc
            }
            Plan::PolicyAttach { endpoint_first } => {
                // The split backend's endpoint for the new communicator, agreed over `parent` first.
                let agreed = if endpoint_first { Some(policy::endpoint_before(rt, parent)) } else { None };
                let rc = create(pmpi());
                made(rc, kind, parent, newcomm);
                if rc != MPI_SUCCESS || newcomm.is_null() || *newcomm == MPI_COMM_NULL {
                    policy::give_back(rt, agreed);
                    return rc;
                }
                policy::attach_stream(rt, newcomm, agreed)
            }
            Plan::Plain | Plan::PlainNonblocking | Plan::Inherit | Plan::MultiplexDup => {
                let rc = create(pmpi());
                made(rc, kind, parent, newcomm);
                if rc != MPI_SUCCESS || newcomm.is_null() || *newcomm == MPI_COMM_NULL {
                    return rc;
                }
                match plan {
                    Plan::PlainNonblocking => {
                        policy::STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
                        rc
                    }
                    Plan::Inherit => inherit(rt, parent, *newcomm, rc),
                    Plan::MultiplexDup => {
                        crate::multiplex::comm_constructed(rt, kind, parent, newcomm, request).unwrap_or(rc)
                    }
                    _ => rc,
                }
            }
        }
    })
}

/// MPICH's constructor returned `rc`: the tools library (if loaded) counts what it made, as MPICH's
/// round robin over its implicit VCIs does (`*newcomm` may be `MPI_COMM_NULL`: this process got none).
unsafe fn made(rc: c_int, kind: CommCtor, parent: MPI_Comm, newcomm: *mut MPI_Comm) {
    if rc == MPI_SUCCESS && !newcomm.is_null() {
        crate::tools_link::tools_comm_created(kind, parent, *newcomm);
    }
}

/// The facts of a constructor of `parent` that every member shares (`ctor_plan`).
unsafe fn facts(rt: &Runtime, kind: CommCtor, parent: MPI_Comm) -> ctor_plan::Facts {
    let class = if crate::multiplex::registry::lookup(parent).is_some() {
        Parent::Multiplex
    } else {
        match rt.comms.get(parent) {
            Some(r) if r.origin == Origin::User => Parent::AppStream,
            Some(r) if r.origin == Origin::Policy => Parent::Policy {
                base_idup: r.base.is_some_and(|b| b.topology || !crate::policy::base::has_topology(parent)),
            },
            _ => Parent::Plain,
        }
    };
    // Only the policy's plans look at it (one query of MPICH's, the same on every member).
    let mut inter = 0;
    if rt.config.policy == Policy::Explicit && parent != MPI_COMM_NULL {
        (pmpi().PMPI_Comm_test_inter)(parent, &mut inter);
    }
    ctor_plan::Facts { backend: rt.backend, policy: rt.config.policy, kind, parent: class, intercomm: inter != 0 }
}

/// `child` carries the record of `parent` on this member: its stream, or none (every member records
/// the child alike, so that a constructor of the child is planned alike: `ctor_plan`). No base: its
/// collectives run on itself.
fn inherit(rt: &Runtime, parent: MPI_Comm, child: MPI_Comm, rc: c_int) -> c_int {
    match rt.comms.get(parent) {
        Some(p) => rt.attach_record(
            child,
            CommRecord { stream: p.stream, origin: p.origin, base: None, collectives: crate::comms::Route::Comm },
        ),
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
        destroyed((p.PMPI_Comm_free)(comm))
    })
}

/// `MPI_Comm_disconnect`: as `MPI_Comm_free` (after it waited for the communicator's pending
/// operations), the destruction work of its record runs once MPICH returns.
pub unsafe fn comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    ffi_guard("MPI_Comm_disconnect", || unsafe {
        match pmpi::load() {
            Ok(p) => destroyed((p.PMPI_Comm_disconnect)(comm)),
            Err(_) => MPI_ERR_OTHER,
        }
    })
}

/// After MPICH destroyed a communicator: what the library keeps of it went with its record
/// (`record_deleted`), whose calls into MPI run here, after MPICH returned.
fn destroyed(rc: c_int) -> c_int {
    if let Some(rt) = runtime::active() {
        crate::deferred::settle(rt);
    }
    rc
}

/// The delete callback of the communicator records' keyval: MPICH runs it on every destruction path
/// of a communicator with a record (`MPI_Comm_free`, `MPI_Comm_disconnect`), before the handle can be
/// reused, wherever it drops the last reference (inside another thread's wait, say). Only bookkeeping
/// here: the record leaves the cache, and what calls MPI (freeing the base, giving back a policy stream
/// no communicator uses any more, a multiplex communicator's hidden communicators) is deferred to where
/// the library is in control (`crate::deferred`: right after our `MPI_Comm_free`, every help, and
/// `MPI_Finalize`).
unsafe extern "C" fn record_deleted(comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    ffi_guard("MPI_Comm_free (communicator record)", || unsafe {
        let record = std::sync::Arc::from_raw(value as *const CommRecord);
        let Some(rt) = runtime::active() else { return MPI_SUCCESS };
        let Some(last) = rt.comms.remove(&rt.streams, comm, &record) else { return MPI_SUCCESS };
        // The multiplex record leaves the registry now (the handle may be reused at once); its hidden
        // communicators go through `crate::deferred` too.
        if let Some(mx) = crate::multiplex::registry::lookup(comm) {
            crate::multiplex::comm_freed(rt, comm, mx);
        }
        let base = record.base;
        let retire = match (record.origin, record.stream) {
            (Origin::Policy, Some(s)) if last => Some(s),
            _ => None,
        };
        if base.is_some() || retire.is_some() {
            crate::deferred::defer(move |rt| {
                if let Some(mut base) = base {
                    (pmpi().PMPI_Comm_free)(&mut base.comm);
                }
                if let Some(s) = retire {
                    policy::release_stream(rt, s);
                }
            });
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
