//! libmpixstream_tools.so: what the lean library must not carry (it would cost every application),
//! preloaded after libmpixstream.so only when asked for (`scripts/mpixrun` adds it when
//! `MPIXSTREAM_REPORT` or `MPIXSTREAM_CHECK` is set):
//! - traffic counters per communicator and per stream/endpoint (messages and bytes, sent and received),
//!   and a report at `MPI_Finalize` (a table on rank 0's stderr and a JSON file, `docs/report.schema.json`);
//! - in the report, the contention profile: per endpoint, the threads inside MPI on it and for how long
//!   two or more were inside at once, with a verdict on what explicit endpoints would change;
//! - the one-thread-per-communicator check of the explicit policy (`MPIXSTREAM_CHECK`).
//!
//! The modules, from the top down (each uses only those below it):
//! - this file: the interposers (generated from the rows of `wrappers/mpi.prototypes` with a `tools:`
//!   role) and the two calls of the lean library, which start the state and the check at `MPI_Init` and
//!   write the report at `MPI_Finalize`;
//! - [`persistent`]: what the persistent requests' interposers do (their constructors, `MPI_Start*`);
//! - [`counting`]: what each other interposer does (count, track requests, enter the check and the
//!   profile through [`entry`]); [`completion`]: the completion calls' hooks (`MPI_Wait*`, `MPI_Test*`,
//!   `MPI_Request_free`), which finish what `counting` tracked;
//! - [`report`]: the report, from what it is given, with its profile section ([`profile_report`]) and
//!   [`verdict`]; [`check`]: the one-thread check;
//! - [`request_table`]: the requests followed to their completion;
//! - [`state`]: the records of communicators, messages and persistent requests, and what is switched on;
//! - [`round_robin`]: MPICH's own VCI for a communicator without a stream (its interposers of the window
//!   and topology constructors count what moves it); [`profile`]: the profile's endpoints and threads;
//! - [`clock`], [`json`], [`text`], [`thread`]; the lean library's query API
//!   (`mpixstream_wrappers::lean_query`: the stream mapping is asked of it, never duplicated here).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod check;
pub mod clock;
pub mod completion;
pub mod counting;
pub mod entry;
pub mod handle_map;
pub mod json;
pub mod persistent;
pub mod profile;
pub mod profile_report;
pub mod report;
pub mod request_table;
pub mod round_robin;
pub mod state;
pub mod std_abi;
pub mod text;
pub mod thread;
pub mod verdict;

/// What the generated interposers call: the hooks of `counting`, `completion` and `persistent`.
mod hooks {
    pub use crate::completion::*;
    pub use crate::counting::*;
    pub use crate::persistent::{persistent, persistent_send, start, startall};
    pub use crate::round_robin::{comm_made, comm_made_inside};
    pub use crate::std_abi;
}
mpixstream_wrappers::comm_call_interposers!(crate::hooks);

use mpixstream_wrappers::guard::guard_with;
use mpixstream_wrappers::lean_query;

/// Called by the lean library at the end of `MPI_Init*`.
#[no_mangle]
pub extern "C" fn mpixstream_tools_init() {
    let ok = guard_with("mpixstream_tools_init", false, || {
        if mpixstream_wrappers::abi::standard() {
            std_abi_init();
            return true;
        }
        if let Some(setup) = state::init() {
            let d = setup.description;
            check::init(d.map_or(0, |d| d.pool.max(0) as usize), d.map_or(-1, |d| d.rank));
            start_profile(setup.report_path.is_some());
            state::start();
        }
        true
    });
    if !ok {
        mpixstream_wrappers::say!("mpixstream-tools: internal error at MPI_Init; counters and checks are off");
    }
}

static STD_SETUP: std::sync::OnceLock<state::Setup> = std::sync::OnceLock::new();
static STD_CHECK: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// `MPI_Init` on the MPI standard ABI: the report and the check on `std_abi`'s state.
fn std_abi_init() {
    let settings = match mpixstream_wrappers::settings::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            mpixstream_wrappers::say_once!("mpixstream-tools: {e}; counters are off");
            return;
        }
    };
    use mpixstream_wrappers::settings::{Check, Report};
    let report_path = match settings.report {
        Report::Off => None,
        Report::On => Some(format!("mpixstream-report.{}.json", std::process::id())),
        Report::To(path) => Some(path),
    };
    let check = match settings.check {
        Check::Off => 0,
        Check::Policy => 1,
        Check::All => 2,
    };
    if report_path.is_none() && check == 0 {
        return;
    }
    let description = lean_query::get().describe();
    if check != 0 {
        check::init(description.map_or(0, |d| d.pool.max(0) as usize), description.map_or(-1, |d| d.rank));
    }
    if std_abi::init(check) {
        start_profile(report_path.is_some());
        let _ = STD_SETUP.set(state::Setup { description, report_path });
        STD_CHECK.store(check, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The contention profile goes with the report.
fn start_profile(report: bool) {
    if report {
        clock::start();
        profile::start();
    }
}

/// Called by the lean library at the start of `MPI_Finalize`, while MPI is still fully up.
#[no_mangle]
pub extern "C" fn mpixstream_tools_finalize() {
    let ok = guard_with("mpixstream_tools_finalize", false, || {
        if mpixstream_wrappers::abi::standard() {
            if let Some(setup) = STD_SETUP.get().filter(|s| s.report_path.is_some()) {
                std_abi::stop();
                profile::stop();
                clock::stop();
                let (rank, size) = std_abi::world();
                let d = lean_query::get().describe().or(setup.description);
                report::write_with(
                    d,
                    setup.report_path.clone().unwrap_or_default(),
                    &std_abi::all_records(),
                    STD_CHECK.load(std::sync::atomic::Ordering::Relaxed),
                    (rank, size),
                    report::Abi::Standard,
                    std_abi::gather,
                );
            }
            std_abi::stop();
            return true;
        }
        if !state::on() {
            return true;
        }
        if let (true, Some(setup)) = (state::report_on(), state::setup()) {
            profile::stop();
            clock::stop();
            report::write(setup, &state::all_records(), state::check_mode());
        }
        state::stop();
        true
    });
    if !ok {
        mpixstream_wrappers::say!("mpixstream-tools: internal error while writing the report");
    }
}

/// Called by the lean library when a call on `comm` (named `call`, a static C string) finds the
/// communicator's endpoint owned by another thread (`mpixstream_wrappers::tools::CONTENDED_SYMBOL`):
/// under the check, another application thread inside a call on that stream is a violation, reported
/// here, since the calling thread would otherwise wait for the endpoint and never reach the check.
///
/// # Safety
/// `call` is null or a NUL-terminated string that outlives the call (the lean library passes a
/// static C string literal).
#[no_mangle]
pub unsafe extern "C" fn mpixstream_tools_contended(
    comm: mpixstream_wrappers::ffi::MPI_Comm,
    call: *const libc::c_char,
) {
    let ok = guard_with("mpixstream_tools_contended", false, || {
        if !state::on() || state::check_mode() == 0 || call.is_null() {
            return true;
        }
        // SAFETY: by the contract, a non-null `call` is a NUL-terminated string that outlives the call
        // (the lean library passes a C string literal of its own, static).
        let Ok(call) = unsafe { std::ffi::CStr::from_ptr(call) }.to_str() else { return true };
        if let Some(rec) = state::rec(comm) {
            check::contended(call, rec);
        }
        true
    });
    if !ok {
        mpixstream_wrappers::say!("mpixstream-tools: internal error while checking a contended endpoint");
    }
}

/// Called by each thread of the lean library's own when it starts
/// (`mpixstream_wrappers::tools::LIBRARY_THREAD_SYMBOL`): its calls are not the program's, and the
/// profile leaves them out.
#[no_mangle]
pub extern "C" fn mpixstream_tools_library_thread() {
    guard_with("mpixstream_tools_library_thread", (), profile::mark_library_thread);
}

/// Called by the lean library after each communicator constructor it interposes
/// (`mpixstream_wrappers::tools::COMM_CREATED_SYMBOL`, `kind` a `CommCtor`'s position in
/// `CommCtor::ALL`): MPICH's round robin counts it (`round_robin`).
#[no_mangle]
pub extern "C" fn mpixstream_tools_comm_created(
    kind: std::os::raw::c_int,
    parent: mpixstream_wrappers::ffi::MPI_Comm,
    newcomm: mpixstream_wrappers::ffi::MPI_Comm,
) {
    use mpixstream_wrappers::interpose::CommCtor;
    let ok = guard_with("mpixstream_tools_comm_created", false, || {
        let Some(&ctor) = usize::try_from(kind).ok().and_then(|k| CommCtor::ALL.get(k)) else { return true };
        round_robin::made(ctor.name(), round_robin::commits_of(ctor), parent, newcomm, ctor.is_blocking());
        true
    });
    if !ok {
        mpixstream_wrappers::say!("mpixstream-tools: internal error while following a communicator's creation");
    }
}

/// Called by the lean library when it hands the application `outer` in place of `inner`
/// (`mpixstream_wrappers::tools::REQUEST_REPLACED_SYMBOL`): the entry of `inner` moves to `outer`.
#[no_mangle]
pub extern "C" fn mpixstream_tools_request_replaced(
    inner: mpixstream_wrappers::ffi::MPI_Request,
    outer: mpixstream_wrappers::ffi::MPI_Request,
) {
    let ok = guard_with("mpixstream_tools_request_replaced", false, || {
        if !state::on() {
            return true;
        }
        // `outer` MPI_REQUEST_NULL: the lean library completes `inner` itself (a routed buffered
        // send): only forget it.
        if let Some(info) = request_table::requests().remove(inner) {
            if outer != mpixstream_wrappers::ffi::MPI_REQUEST_NULL {
                request_table::requests().insert(outer, info);
            }
        }
        true
    });
    if !ok {
        mpixstream_wrappers::say!("mpixstream-tools: internal error while following a wrapped nonblocking collective");
    }
}
