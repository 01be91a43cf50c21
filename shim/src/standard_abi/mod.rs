//! A program whose MPI library speaks the MPI-5 standard ABI (built with `mpicc -mpi-abi`: `mpi_abi.h`,
//! `libmpi_abi.so.1`; handles are pointers and the constants are not MPICH's) runs untouched: the
//! generated interposers forward every call, arguments unchanged, to the next definition
//! (`mpixstream_wrappers::abi`), nothing of the runtime starts (no backend, no policy, no records, no
//! keyval). What the lean library does on that ABI: `MPI_Init*` passed through, then the banner
//! (`MPIXSTREAM_VERBOSE=1`) or a line saying which settings have no effect, and the tools library started
//! where it is preloaded (its check, and its report at `MPI_Finalize`: `std_finalize`); the explicit policy as
//! bookkeeping (`policy`: a stream per communicator of a blocking constructor, on the shared endpoints);
//! and the MPIX stream API on the serial model (`mpix`: streams, stream and multiplex communicators, indexed
//! point-to-point, every stream on the library's shared endpoints, since no library of this ABI exports
//! streams), with the calls it cannot serve refused with `MPI_ERR_UNSUPPORTED_OPERATION` ([`refuse`]).
//! Every MPI call made here takes no handle, or takes the standard ABI's own handles through the typed
//! methods of its own table (`mpi::Mpi`) or `next_wide!`.
pub mod errors;
pub use mpixstream_wrappers::std_mpi as mpi;
pub mod mpix;
pub mod multiplex;
pub mod policy;
pub mod streams;

use crate::config::{Check, Config, Policy, Report};
use mpixstream_wrappers::abi;
use mpixstream_wrappers::app::AppArg;
use std::os::raw::{c_char, c_int};

/// What the program's MPI library is, for the banner and the refusal: its first version line and file.
fn library() -> String {
    // MPI_Get_library_version takes no handle: callable before MPI_Init too.
    let text = mpi::mpi().ok().and_then(|m| m.library_version().ok()).unwrap_or_default();
    let path = abi::library_path();
    mpixstream_wrappers::mpich_build::describe(&text, |k| std::env::var(k).ok(), path.as_deref())
}

/// The ABI version the library reports (`MPI_Abi_get_version`), where it has the call.
fn abi_version() -> String {
    match abi::abi_version() {
        Some((major, minor)) => format!("standard ABI {major}.{minor}"),
        None => "standard ABI".into(),
    }
}

/// The settings that ask for what cannot happen here.
fn without_effect(config: &Config, tools: bool) -> Vec<String> {
    let mut v = Vec::new();
    if !matches!(config.report, Report::Off) && !tools {
        v.push("MPIXSTREAM_REPORT (no report: libmpixstream_tools.so is not preloaded)".into());
    }
    if !matches!(config.check, Check::Off) && !tools {
        v.push("MPIXSTREAM_CHECK (no check: libmpixstream_tools.so is not preloaded)".into());
    }
    if config.enqueue.thread_multiple {
        v.push("MPIXSTREAM_THREAD_MULTIPLE".into());
    }
    v
}

/// The banner on this ABI (`MPIXSTREAM_VERBOSE=1`, rank 0).
pub fn banner(config: &Config, size: c_int) -> String {
    let tools = tools_preloaded();
    let ignored = without_effect(config, tools);
    let report = match (&config.report, tools) {
        (Report::Off, _) => "no report",
        (_, true) => "report (libmpixstream_tools.so: point-to-point, indexed and collective calls counted)",
        (_, false) => "no report",
    };
    let check = match (&config.check, tools) {
        (Check::Off, _) | (_, false) => "no check",
        (Check::Policy, true) => "check of the policy's communicators (one thread at a time)",
        (Check::All, true) => "check of every stream's communicators (one thread at a time)",
    };
    format!(
        "mpixstream {}: {} | MPI {}: handles are pointers, MPI calls pass through untouched | serial model \
         (every stream on the library's shared endpoints; the policy is bookkeeping): policy {}{}, {report}, \
         {check}{} | MPIX stream API on the serial model: {} streams sharing the library's endpoints, no enqueue, no progress \
         threads | {} ranks | {}",
        env!("CARGO_PKG_VERSION"),
        library(),
        abi_version(),
        config.policy,
        if config.policy == Policy::Explicit { " (a stream per communicator of a blocking constructor)" } else { "" },
        if ignored.is_empty() { String::new() } else { format!(" ({} without effect)", ignored.join(", ")) },
        config.streams,
        size,
        config.describe()
    )
}

/// `MPI_Init` (thread = None) and `MPI_Init_thread` on the standard ABI, the program's arguments passed
/// on unchanged.
pub fn init(argc: AppArg<c_int>, argv: AppArg<*mut *mut c_char>, thread: Option<(c_int, AppArg<c_int>)>) -> c_int {
    // A malformed setting stops the program here on either ABI (a user's mistake either way).
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            mpixstream_wrappers::say_once!("mpixstream: {e}");
            std::process::exit(1);
        }
    };
    let rc = match thread {
        None => crate::forward::MPI_Init(argc, argv),
        Some((required, provided)) => crate::forward::MPI_Init_thread(argc, argv, required, provided),
    };
    if rc != 0 {
        return rc;
    }
    streams::set_capacity(config.streams);
    let world =
        |f: fn(&mpi::Mpi, mpi::H) -> mpi::MpiResult<c_int>| mpi::mpi().ok().and_then(|m| f(m, mpi::COMM_WORLD).ok());
    let (rank, size) = (world(mpi::Mpi::comm_rank).unwrap_or(0), world(mpi::Mpi::comm_size).unwrap_or(0));
    let level = mpi::mpi().map_or(0, |m| m.query_thread());
    let tools = tools_preloaded();
    policy::init(policy::Setup {
        explicit: config.policy == Policy::Explicit,
        rank,
        size,
        thread_level: policy::thread_level_as_mpich(level),
        library: if tools && !matches!(config.report, Report::Off) { library() } else { String::new() },
        reason: format!(
            "the program's MPI library speaks the MPI {}: the serial model (every stream on the library's shared endpoints)",
            abi_version()
        ),
    });
    if rank == 0 {
        if config.verbose {
            mpixstream_wrappers::say!("{}", banner(&config, size));
        } else {
            let ignored = without_effect(&config, tools);
            if !ignored.is_empty() {
                mpixstream_wrappers::say!(
                    "mpixstream: {} without effect: this program's MPI library speaks the MPI {} ({}), \
                     on which mpixstream passes MPI calls through untouched (its MPIX API and the explicit \
                     policy run on the serial model)",
                    ignored.join(", "),
                    abi_version(),
                    abi::library_path().unwrap_or_else(|| "library path unknown".into())
                );
            }
        }
    }
    // The tools library (the report on this ABI: `std_abi` there), where it is preloaded.
    crate::tools_link::tools_init();
    rc
}

/// Whether libmpixstream_tools.so is in the process.
fn tools_preloaded() -> bool {
    mpixstream_wrappers::tools::ToolsEntries::preloaded()
}

/// An MPIX entry point that the standard ABI's serial model does not serve (the enqueue calls, the
/// host queues, the progress threads, the info and asynchronous extensions): an error of class
/// `MPI_ERR_UNSUPPORTED_OPERATION` (the standard ABI's class) whose string says why, raised through
/// `MPI_COMM_WORLD`'s error handler, as every error of ours (the default handler aborts the job). Before
/// `MPI_Init` and after `MPI_Finalize`: the bare class, and the reason on stderr.
#[cold]
#[inline(never)]
pub fn refuse(func: &str) -> c_int {
    let why = if func.contains("enqueue") || func.contains("Host_queue") {
        "the enqueue API is not available to a program built for the MPI standard ABI: its MPIX streams are \
         on the serial model (no GPU or host queues)"
    } else {
        "not available to a program built for the MPI standard ABI: its MPIX streams are on the serial model \
         (streams, stream and multiplex communicators, indexed point-to-point, MPIX_Stream_progress)"
    };
    errors::raise(abi::MPI_COMM_WORLD, errors::Class::Unsupported, func, why)
}
