//! What our `MPI_*` interposers do (the symbols themselves are generated in `mpixstream-wrappers`).
//!
//! The hooks here are the bodies of `extern "C"` entry points: their raw pointers are the
//! application's arguments, and where one passes to MPICH unchanged (an output variable MPICH writes,
//! `argc`/`argv`) the call is made with it as the application made it, in one `unsafe` block that says
//! so. Everything else goes through the typed layer (`mpixstream_wrappers::mpi`).
use crate::backend::{self, demand, program_scan, Backend};
use crate::comms::{CommRecord, Origin};
use crate::config::{Config, Policy};
use crate::errors::{self, Errors};
use crate::forward;
use crate::policy;
use crate::runtime::{self, Runtime};
use crate::streams::{RequestPools, StreamTable};
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::{self, Comm, Errhandler, Opaque};
use mpixstream_wrappers::pmpi;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;

// The exported `MPI_*` interposers, generated from wrappers/mpi.prototypes: each calls a function of
// this module (`init`, `finalize`, the constructors…) or of `native_fixes`.
mpixstream_wrappers::interposers!(crate::interposed, crate::native_fixes);

/// `MPI_Init` (thread = None) and `MPI_Init_thread`, with the application's arguments.
pub fn init(argc: AppArg<c_int>, argv: AppArg<*mut *mut c_char>, thread: Option<(c_int, AppArg<c_int>)>) -> c_int {
    ffi_guard("MPI_Init", || {
        // A program on the MPI standard ABI runs untouched: nothing below may run (MPICH's constants).
        if mpixstream_wrappers::abi::standard() {
            return crate::standard_abi::init(argc, argv, thread);
        }
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(e) => {
                mpixstream_wrappers::say_once!("mpixstream: {e}");
                return MPI_ERR_OTHER;
            }
        };
        if runtime::is_initialized_by_us() {
            // A second MPI_Init: MPICH reports the error.
            return match thread {
                None => forward::MPI_Init(argc, argv),
                Some((required, provided)) => forward::MPI_Init_thread(argc, argv, required, provided),
            };
        }
        let mut config = match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                mpixstream_wrappers::say_once!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        // What the program can gain (`demand`): where nothing, every policy behaves as `implicit` and the
        // backend reserves nothing. The scan of the loaded objects runs at most once.
        let mpi_code = p.PMPI_Init as usize;
        let streams_named = std::cell::OnceCell::new();
        let names_streams = || *streams_named.get_or_init(|| program_scan::names_streams(mpi_code));
        let spawned = demand::spawned(|k| std::env::var(k).ok());
        let inert = demand::decide(
            &config,
            thread.map(|(required, _)| required),
            spawned,
            names_streams,
            || backend::policy_unserved(p, &config),
            || program_scan::names_blocking_constructor(mpi_code),
        );
        // The guided policy's profile, read before the pool is sized (an unreadable one stops here, inert
        // or not).
        if let Err(e) = policy::guided_profile::load(&config) {
            mpixstream_wrappers::say_once!("mpixstream: {e}");
            std::process::exit(1);
        }
        let requested_policy = config.policy;
        if inert.is_some() {
            config.policy = Policy::Implicit;
        }
        let detected = match backend::detect(p, &config, inert, names_streams) {
            Ok(d) => d,
            Err(e) => {
                mpixstream_wrappers::say_once!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        // MPIXSTREAM_THREAD_MULTIPLE=1: the enqueue engine's threads call MPI, so ask for MULTIPLE. The
        // native backend always does: its progress helper thread keeps MPI's progress rule for the
        // streams' reserved endpoints (helper.rs), and may call MPI only at that level.
        let multiple = config.enqueue.thread_multiple || detected.backend == Backend::Native;
        let ucx_window = match detected.configure_mpich().and_then(|()| backend::ucx_init::open(&detected, mpi_code)) {
            Ok(window) => window,
            Err(e) => {
                mpixstream_wrappers::say_once!("mpixstream: {e}");
                std::process::exit(1);
            }
        };
        // The application's own arguments (the thread level raised where `multiple`; a local for the
        // level provided where it passed none).
        let rc = match thread {
            None if multiple => mpi::env::init_thread(argc, argv, MPI_THREAD_MULTIPLE).err().unwrap_or(MPI_SUCCESS),
            None => mpi::env::init(argc, argv).err().unwrap_or(MPI_SUCCESS),
            Some((required, provided)) => {
                forward::MPI_Init_thread(argc, argv, if multiple { MPI_THREAD_MULTIPLE } else { required }, provided)
            }
        };
        backend::ucx_init::close(ucx_window);
        if rc != MPI_SUCCESS {
            return rc;
        }
        if detected.backend == Backend::Native && detected.pool > 0 {
            backend::shm_segments::remember();
        }
        match start_runtime(config, detected, inert.map(|why| (requested_policy, why))) {
            Ok(rt) => {
                if rt.backend == Backend::Native && rt.config.policy.makes_streams() {
                    rt.streams.set_program_cancels(program_scan::names_cancel(mpi_code));
                }
                if rt.config.verbose {
                    // Collective: the hosts of the job and their pools, on rank 0.
                    let hosts = backend::hosts::gather(rt.rank, rt.size, rt.streams.capacity() as u32);
                    if rt.rank == 0 {
                        mpixstream_wrappers::say!("{}", banner(rt, hosts.as_deref()));
                    }
                }
                crate::helper::start(rt);
                crate::tools_link::tools_init();
                MPI_SUCCESS
            }
            Err(e) => {
                mpixstream_wrappers::say!("mpixstream: initialisation failed after MPI_Init: {e}");
                Comm::WORLD.abort(1);
                MPI_ERR_OTHER
            }
        }
    })
}

fn start_runtime(
    config: Config,
    detected: backend::Detected,
    inert: Option<(Policy, demand::Inert)>,
) -> Result<&'static Runtime, String> {
    // As before the typed layer: a failed query leaves the default.
    let rank = Comm::WORLD.rank().unwrap_or(0);
    let size = Comm::WORLD.size().unwrap_or(1);
    let level = mpi::env::query_thread().unwrap_or(MPI_THREAD_SINGLE);
    errors::install(Errors::create()?);
    let progress_comm_owned = Comm::SELF.dup().map_err(|_| "could not duplicate MPI_COMM_SELF".to_string())?;
    let progress_comm = progress_comm_owned.raw();
    // The communicator records' keyval: not copied by a dup (each constructor settles its result's
    // record), deleted by `record_deleted`.
    let record_keyval = mpi::comm::create_keyval((None, Some(record_deleted)), Opaque(std::ptr::null_mut()))
        .map_err(|_| "could not create the keyval of the communicator records".to_string())?;
    let native = detected.backend == Backend::Native;
    let pools = if native { RequestPools::of_mpich(detected.version) } else { RequestPools::NONE };
    Ok(runtime::install(Runtime {
        streams: StreamTable::new(detected.pool as usize, pools),
        helper_turns_implicit: native && backend::helper_turns_implicit(detected.version),
        comms: Default::default(),
        record_keyval,
        backend: detected.backend,
        library: detected.library,
        mpich_version: detected.version,
        backend_reason: detected.reason,
        rank,
        size,
        thread_level: level,
        inert,
        progress_comm,
        progress_comm_owned: mpi::SharedComm::new(progress_comm_owned),
        global_progress: Mutex::new(None),
        config,
    }))
}

/// `hosts`: where the ranks run (`backend::hosts`), else their number alone.
pub fn banner(rt: &Runtime, hosts: Option<&str>) -> String {
    let level = demand::level_name(rt.thread_level);
    let pool = rt.streams.capacity();
    let mapping = match rt.backend {
        Backend::Native => {
            format!("{pool} streams, each a native stream on its own reserved VCI (MPIR_CVAR_CH4_RESERVE_VCIS={pool})")
        }
        Backend::Serial if rt.inert.is_some() => {
            format!(
                "none reserved ({pool} streams of bookkeeping on MPICH's one endpoint, for a stream call made anyway)"
            )
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
    let progress = match (crate::helper::banner_note(rt), rt.inert) {
        (_, Some((requested, why))) => format!(" ({requested} requested; inert: {})", why.describe()),
        (Some(note), None) if rt.config.policy.makes_streams() => format!(" ({note})"),
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

/// `MPI_Finalize`.
pub fn finalize() -> c_int {
    ffi_guard("MPI_Finalize", || {
        let Some(rt) = runtime::active() else {
            return match pmpi::load() {
                Ok(_) => mpi::env::finalize().err().unwrap_or(MPI_SUCCESS),
                Err(_) => MPI_ERR_OTHER,
            };
        };
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
        if let Some(progress_comm) = rt.progress_comm_owned.take() {
            let _ = progress_comm.free();
        }
        runtime::mark_finalized();
        errors::retire();
        let rc = mpi::env::finalize().err().unwrap_or(MPI_SUCCESS);
        backend::shm_segments::remove_left();
        backend::close_tool_interface();
        if rc == MPI_SUCCESS && !drained {
            return MPI_ERR_PENDING;
        }
        rc
    })
}

/// A communicator constructor on the MPI standard ABI (`newcomm`, the application's argument,
/// pointer-wide): the explicit policy's bookkeeping there (`standard_abi::policy`).
pub fn std_comm_constructed(
    kind: CommCtor,
    parent: mpixstream_wrappers::ffi::WideHandle,
    newcomm: AppArg<mpixstream_wrappers::ffi::WideHandle>,
    create: impl FnOnce() -> c_int,
) -> c_int {
    ffi_guard(kind.name(), move || crate::standard_abi::policy::comm_constructed(kind, parent, newcomm, create))
}

/// `MPI_Finalize` on the MPI standard ABI: the tools library's report first (while MPI is up), then the
/// library's.
pub fn std_finalize(finalize: impl FnOnce() -> c_int) -> c_int {
    crate::tools_link::tools_finalize();
    finalize()
}

/// `MPI_Comm_set_errhandler`: on a multiplex communicator the hidden communicators follow (see
/// `multiplex::errhandler_set`).
/// The constructors' body lives in its own file (`constructors`); the generated interposers call it here.
pub use crate::constructors::comm_constructed;

pub fn comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    ffi_guard("MPI_Comm_set_errhandler", || {
        if pmpi::load().is_err() {
            return MPI_ERR_OTHER;
        }
        let rc = Comm(comm).set_errhandler(Errhandler(errhandler)).err().unwrap_or(MPI_SUCCESS);
        if rc == MPI_SUCCESS && runtime::active().is_some() {
            if let Some(mx) = crate::multiplex::registry::lookup(comm) {
                crate::multiplex::errhandler_set(mx);
            }
            crate::policy::base::errhandler_set(comm, errhandler);
        }
        rc
    })
}

/// `MPI_Comm_free`.
pub fn comm_free(comm: AppArg<MPI_Comm>) -> c_int {
    ffi_guard("MPI_Comm_free", || {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let handle = comm.get().unwrap_or(MPI_COMM_NULL);
        if let Some(rt) = runtime::active() {
            if let Err((class, msg)) = crate::enqueue::check_comm_free(rt, handle) {
                return errors::raise(handle, class, "MPI_Comm_free", &msg);
            }
        }
        // MPICH sets the variable to MPI_COMM_NULL, or reports a null one.
        destroyed(p.call_PMPI_Comm_free(comm))
    })
}

/// `MPI_Comm_disconnect`: as `MPI_Comm_free` (after it waited for the communicator's pending
/// operations), the destruction work of its record runs once MPICH returns.
pub fn comm_disconnect(comm: AppArg<MPI_Comm>) -> c_int {
    ffi_guard("MPI_Comm_disconnect", || match pmpi::load() {
        Ok(p) => destroyed(p.call_PMPI_Comm_disconnect(comm)),
        Err(_) => MPI_ERR_OTHER,
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
///
/// # Safety
/// Called by MPICH only, once per record: `value` is the word `Runtime::attach_record` stored.
unsafe extern "C" fn record_deleted(comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    ffi_guard("MPI_Comm_free (communicator record)", || {
        // SAFETY: `value` is the word of the record `attach_record` set under this keyval (`kept::give`),
        // whose reference MPICH held until this, the attribute's one delete call: taken back once.
        let record = unsafe { mpi::kept::take_back::<CommRecord>(value) };
        let Some(rt) = runtime::active() else { return MPI_SUCCESS };
        let Some(last) = rt.comms.remove(&rt.streams, comm, &record) else { return MPI_SUCCESS };
        // The multiplex record leaves the registry now (the handle may be reused at once); its hidden
        // communicators go through `crate::deferred` too.
        if let Some(mx) = crate::multiplex::registry::lookup(comm) {
            crate::multiplex::comm_freed(rt, comm, mx);
        }
        let retire = match (record.origin, record.stream) {
            (Origin::Policy, Some(s)) if last => Some(s),
            _ => None,
        };
        if record.base.is_some() || retire.is_some() {
            crate::deferred::defer(move |rt| {
                // The record's one delete: its base is freed once, here.
                if let Some(base) = record.base.as_ref().and_then(|b| b.take()) {
                    let _ = base.free();
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
pub fn comm_create_keyval(
    copy: Option<MPI_Comm_copy_attr_function>,
    delete: Option<MPI_Comm_delete_attr_function>,
    keyval: AppArg<c_int>,
    extra_state: AppArg<c_void>,
) -> c_int {
    ffi_guard("MPI_Comm_create_keyval", || {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let rc = p.call_PMPI_Comm_create_keyval(copy, delete, keyval, extra_state);
        if let Some(k) = keyval.get().filter(|_| rc == MPI_SUCCESS) {
            crate::policy::base::keyval_created(k, copy, extra_state.ptr());
        }
        rc
    })
}

/// `MPI_Comm_free_keyval`.
pub fn comm_free_keyval(keyval: AppArg<c_int>) -> c_int {
    ffi_guard("MPI_Comm_free_keyval", || {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        if let Some(k) = keyval.get() {
            crate::policy::base::keyval_freed(k);
        }
        p.call_PMPI_Comm_free_keyval(keyval)
    })
}

/// `MPI_Error_class`: our dynamic classes answered as the standard ones they stand for.
pub fn error_class(code: c_int, class: AppArg<c_int>) -> c_int {
    ffi_guard("MPI_Error_class", || {
        let p = match pmpi::load() {
            Ok(p) => p,
            Err(_) => return MPI_ERR_OTHER,
        };
        let rc = p.call_PMPI_Error_class(code, class);
        if let Some(standard) = class.get().filter(|_| rc == MPI_SUCCESS).and_then(errors::standard_class) {
            class.set(standard);
        }
        rc
    })
}
