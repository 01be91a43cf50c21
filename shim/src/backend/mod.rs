//! The backend, chosen once at `MPI_Init*` from what the loaded MPICH is (docs/architecture.md):
//! - `native`: MPICH >= 4.1 with native streams; each of our streams is a native stream from the
//!   reserved VCI pool (`MPIR_CVAR_CH4_RESERVE_VCIS`), so a stream communicator's traffic runs on its
//!   own endpoint, without MPICH's locks.
//! - `serial`: any other MPICH (Debian's 4.0.2 has one VCI and a global critical section): functionally
//!   complete, every stream on MPICH's one endpoint.
//! - `split`: Intel MPI's thread-split endpoints, on request only (`MPIXSTREAM_BACKEND=split`: the mode
//!   changes what Intel MPI allows the program's own communicators, `split.rs`); a stream is an endpoint
//!   number, a stream communicator a dup whose info names it.
//!
//! One code path for the API; the few operations that differ are here.
pub mod demand;
pub mod hosts;
mod native;
mod pool_size;
pub mod program_scan;
mod serial;
pub mod shm_segments;
mod split;
pub mod ucx_init;

use crate::config::{BackendChoice, Config};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, MpiResult, OwnedComm, Stream};
use mpixstream_wrappers::mpich_build;
use mpixstream_wrappers::pmpi::Pmpi;
use std::os::raw::c_int;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Native,
    Serial,
    Split,
}

/// What we learnt about the loaded MPICH before `MPI_Init`.
pub struct Detected {
    pub backend: Backend,
    /// The MPI build: MPICH's version, netmod in use and library path (`mpich_build::describe`).
    pub library: String,
    pub version: Option<(u32, u32, u32)>,
    /// Why the backend is what it is, for the banner.
    pub reason: String,
    /// The explicit pool size actually in force.
    pub pool: u32,
    /// MPICH control variables to write before `PMPI_Init*` ([`Detected::configure_mpich`]).
    control_variables: Vec<(&'static str, u32)>,
    /// The netmod MPICH will use ("ucx", "ofi"), where the library names its device.
    pub netmod: Option<String>,
    /// Whether MPICH will have more than one VCI (a reserved pool, or more than one implicit VCI).
    pub many_vcis: bool,
}

impl Detected {
    /// Just before `PMPI_Init*`: gives MPICH the pool sizes (through the MPI tool interface, which
    /// stays open until [`close_tool_interface`], so the values stay readable with `MPI_T`).
    pub fn configure_mpich(&self) -> Result<(), String> {
        native::write_control_variables(&self.control_variables)
    }
}

/// A progress turn of the streams the application freed (`native::turn_retired`,
/// `split::turn_retired`).
pub fn turn_retired() {
    native::turn_retired();
    split::turn_retired();
}

/// The split backend's slots that guard an endpoint, one bit each (`Backend::set_endpoint_owner`; 0
/// elsewhere): one relaxed load.
pub fn owning_slots() -> u64 {
    split::owning_slots()
}

/// One turn of every endpoint slot `slot` guards (split backend); the caller holds its claim.
pub fn turn_owned_by(slot: usize) {
    split::turn_owned_by(slot);
}

/// After `PMPI_Finalize`: closes the tool-interface session `configure_mpich` opened, if any (not
/// earlier: some MPICH builds re-read their control variables from the environment when the tool
/// interface is initialised again after being closed, and the application may read them back).
pub fn close_tool_interface() {
    native::finish_control_variables();
}

/// Parses "MPICH Version:  5.0.2" out of `MPI_Get_library_version`'s text.
pub fn parse_mpich_version(text: &str) -> Option<(u32, u32, u32)> {
    let rest = text.split("MPICH Version:").nth(1)?;
    let word = rest.split_whitespace().next()?;
    let mut nums = word.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().ok());
    let major = nums.next()??;
    let minor = nums.next().flatten().unwrap_or(0);
    let patch = nums.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// Whether the loaded MPICH has native streams: MPICH >= 4.1 with the stream calls.
fn native_streams_in(p: &Pmpi, version: Option<(u32, u32, u32)>) -> bool {
    p.PMPIX_Stream_create.is_some()
        && p.PMPIX_Stream_comm_create.is_some()
        && p.PMPIX_Stream_free.is_some()
        && version.is_some_and(|v| (v.0, v.1) >= (4, 1))
}

/// Whether the progress helper thread may turn MPICH's implicit pool (MPICH >= 4.3 under the native
/// backend: on 4.1 and 4.2 it turns the streams' endpoints only, docs/policy.md "Progress on MPICH 4.1
/// and 4.2"). Without it the explicit and guided policies give no streams (`helper::serves_policy_streams`).
pub fn helper_turns_implicit(version: Option<(u32, u32, u32)>) -> bool {
    version.is_some_and(|v| (v.0, v.1) >= (4, 3))
}

/// Before `MPI_Init*`: whether the policy could give no stream in this process whatever the program
/// does (the native backend on MPICH 4.1 and 4.2, [`helper_turns_implicit`]) and nothing asked for the
/// pool by its size (`MPIXSTREAM_STREAMS`, `MPIR_CVAR_CH4_RESERVE_VCIS`). `demand::decide` then makes a
/// program that names no stream call inert: the pool would have no user.
pub fn policy_unserved(p: &Pmpi, config: &Config) -> bool {
    if config.backend != BackendChoice::Auto && config.backend != BackendChoice::Native {
        return false;
    }
    if config.streams_set || native::user_reserve().is_some() {
        return false;
    }
    let text = mpixstream_wrappers::mpi::env::library_version().unwrap_or_default();
    let version = parse_mpich_version(&text);
    native_streams_in(p, version) && !helper_turns_implicit(version)
}

/// Chooses the backend before `PMPI_Init*` and, for `native`, the VCI pool sizes to give MPICH (the same
/// values on every rank of a node, from our variables and the node). `inert`: the program cannot gain
/// from the library (`demand`): no pool, no backend that changes MPICH's setup. `names_streams`: whether
/// a loaded object names `MPIX_Stream_create` (`program_scan`, asked only where it decides). Err: a pool
/// MPICH cannot set up.
pub fn detect(
    p: &Pmpi,
    config: &Config,
    inert: Option<demand::Inert>,
    names_streams: impl FnOnce() -> bool,
) -> Result<Detected, String> {
    let text = mpixstream_wrappers::mpi::env::library_version().unwrap_or_default();
    let path = mpich_build::library_path_of(p.PMPI_Init as usize);
    let library = mpich_build::describe(&text, |k| std::env::var(k).ok(), path.as_deref());
    let version = parse_mpich_version(&text);
    let has_native = native_streams_in(p, version);

    let intel = text.contains("Intel(R) MPI");
    let (backend, reason) = match (config.backend, has_native) {
        (BackendChoice::Serial, _) => (Backend::Serial, "forced by MPIXSTREAM_BACKEND=serial".to_string()),
        (BackendChoice::Split, _) if intel => (
            Backend::Split,
            "MPIXSTREAM_BACKEND=split: Intel MPI's thread-split endpoints (communicators used by two threads \
             at once must be stream communicators)"
                .to_string(),
        ),
        (BackendChoice::Split, _) => {
            mpixstream_wrappers::say_once!(
                "mpixstream: MPIXSTREAM_BACKEND=split needs Intel MPI's thread-split endpoints, and this MPI \
                 library is not Intel MPI; using the {} backend",
                if has_native { "native" } else { "serial" }
            );
            if has_native {
                (Backend::Native, "split requested but this is not Intel MPI".to_string())
            } else {
                (Backend::Serial, "split requested but this is not Intel MPI".to_string())
            }
        }
        (_, true) => (Backend::Native, "the MPICH has native streams".to_string()),
        (BackendChoice::Native, false) => {
            mpixstream_wrappers::say_once!(
                "mpixstream: MPIXSTREAM_BACKEND=native, but this MPI library has no native streams \
                 (needs MPICH >= 4.1); using the serial backend"
            );
            (Backend::Serial, "native requested but unavailable".to_string())
        }
        (BackendChoice::Auto, false) => (Backend::Serial, "no native streams in this MPICH".to_string()),
    };
    // Under `implicit`, a program that cannot create a stream gets no reserved pool: MPICH would set
    // up its shared memory at MPI_Init for nothing (pool_size). Streams made anyway (dlsym) still work.
    // A program that cannot gain from the library at all gets neither a pool nor Intel MPI's split mode.
    let user_sized = config.streams_set || native::user_reserve().is_some();
    let (backend, reason) = if inert.is_some() && backend != Backend::Serial {
        (Backend::Serial, "the program cannot gain from the library (see the policy): nothing reserved".to_string())
    } else if backend == Backend::Native && !pool_size::wanted(config, user_sized, names_streams) {
        (
            Backend::Serial,
            "implicit policy and nothing loaded calls MPIX_Stream_create: no VCIs reserved \
             (MPIXSTREAM_STREAMS reserves them)"
                .to_string(),
        )
    } else {
        (backend, reason)
    };
    let (pool, control_variables) = match backend {
        Backend::Native => {
            let node = pool_size::Node::from_env(|k| std::env::var(k).ok());
            native::configure_pools(config, &node, version.map_or(0, |v| v.0))?
        }
        Backend::Serial => (config.streams, Vec::new()),
        Backend::Split => {
            split::set_pool(config.streams);
            (config.streams, vec![(split::SPLIT_VARIABLE, 1), (split::THREAD_MAX_VARIABLE, config.streams + 1)])
        }
    };
    let netmod = mpich_build::netmod_in_use(&text, |k| std::env::var(k).ok());
    let many_vcis = (backend == Backend::Native && pool > 0)
        || control_variables.iter().any(|&(name, n)| name == native::IMPLICIT && n > 1)
        || native::user_implicit().is_some_and(|n| n > 1)
        || native::user_reserve().is_some_and(|n| n > 0);
    Ok(Detected { backend, library, version, reason, pool, control_variables, netmod, many_vcis })
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Serial => "serial",
            Backend::Split => "split",
        }
    }

    /// Creates the endpoint behind a new stream; returns the native stream (or `MPIX_STREAM_NULL`).
    pub fn create_stream(self) -> Result<MPIX_Stream, String> {
        match self {
            Backend::Native => native::create_stream(),
            Backend::Serial => Ok(MPIX_STREAM_NULL),
            Backend::Split => split::create_stream(),
        }
    }

    /// Records the stream-table slot whose claim every call driving `native`'s endpoint holds (`None`:
    /// none any more): on the split backend the helper thread then turns that endpoint while the slot's
    /// owner is away (`split::turn_owned_by`); nothing elsewhere.
    pub fn set_endpoint_owner(self, native: MPIX_Stream, slot: Option<usize>) {
        if self == Backend::Split {
            split::set_owner(native, slot);
        }
    }

    pub fn free_stream(self, native: MPIX_Stream) -> Result<(), String> {
        match self {
            Backend::Native => native::free_stream(native),
            Backend::Serial => Ok(()),
            Backend::Split => split::free_stream(native),
        }
    }

    /// Collective over `parent`: a communicator whose traffic runs on `native` (may be NULL).
    pub fn stream_comm(self, parent: Comm, native: Stream) -> MpiResult<OwnedComm> {
        match self {
            Backend::Native => native::stream_comm_create(parent, native),
            Backend::Serial => serial::stream_comm_create(parent),
            Backend::Split => split::stream_comm_create(parent.raw(), native.raw()),
        }
    }

    /// The VCI a stream's traffic runs on, where we know it (for the report): native, `NUM_VCIS` + the
    /// reserved index MPICH gave it; serial, VCI 0 when MPICH has one implicit VCI; split, the Intel MPI
    /// endpoint (`thread_id`).
    pub fn stream_vci(self, native: MPIX_Stream) -> Option<u32> {
        match self {
            Backend::Native => native::vci_of(native),
            Backend::Split => split::endpoint_of(native),
            Backend::Serial => (self.implicit_vcis() == 1).then_some(0),
        }
    }

    /// MPICH's implicit VCI pool in force (`MPIR_CVAR_CH4_NUM_VCIS`, default 1).
    pub fn implicit_vcis(self) -> u32 {
        native::implicit_vcis_in_force()
    }

    /// Drives progress on one stream's endpoint (`MPIX_STREAM_NULL`: MPICH's global progress; where there
    /// is no `MPIX_Stream_progress`, turned by an `MPI_Iprobe` on `quiet_comm`, a private communicator
    /// that never carries a message).
    pub fn progress(self, native: MPIX_Stream, quiet_comm: MPI_Comm) -> c_int {
        match self {
            // `MPIX_Stream_progress(MPIX_STREAM_NULL)`: MPICH's whole global progress, its hooks (the
            // nonblocking collectives' schedules, RMA) included, which an `MPI_Iprobe` does not run.
            Backend::Native => native::progress(native),
            Backend::Split => split::progress(native).unwrap_or_else(|| serial::global_progress(quiet_comm)),
            _ => serial::global_progress(quiet_comm),
        }
    }

    /// The explicit policy's endpoint for a communicator about to be made from `parent` on the split
    /// backend: collective over `parent`, an endpoint free on every member, taken (`None` on every member
    /// where there is none; `can_take` false: this member has no slot for it). Agreed before the
    /// communicator exists because Intel MPI must see its `thread_id` before its first collective
    /// ([`Backend::put_on_endpoint`]).
    pub fn agree_endpoint(self, parent: MPI_Comm, can_take: bool) -> Option<MPIX_Stream> {
        if self != Backend::Split {
            return None;
        }
        split::agree_endpoint(parent, can_take)
    }

    /// `n` endpoints for communicators about to be made from `parent` on the split backend, agreed at
    /// once (`split::agree_endpoints`); `None` on every member where fewer are free, or elsewhere.
    pub fn agree_endpoints(self, parent: MPI_Comm, n: usize) -> Option<Vec<MPIX_Stream>> {
        if self != Backend::Split {
            return None;
        }
        split::agree_endpoints(parent, n, true)
    }

    /// The split backend's `n` lowest free endpoints, taken ahead of the collective that offers them
    /// (`split::take_ahead`); none elsewhere.
    pub fn take_endpoints_ahead(self, n: usize) -> Vec<MPIX_Stream> {
        if self != Backend::Split {
            return Vec::new();
        }
        split::take_ahead(n)
    }

    /// The split backend's endpoints of `taken`, one bit each (0 elsewhere).
    pub fn endpoint_mask(self, taken: &[MPIX_Stream]) -> u64 {
        if self != Backend::Split {
            return 0;
        }
        split::mask_of(taken)
    }

    /// Puts the new communicator `comm` on the split backend's endpoint `native`, before anything else
    /// uses it: a `thread_id` set after the communicator's first collective makes Intel MPI 2021.19 hang
    /// in the next collective over it (4 ranks, shm; measured without this library).
    pub fn put_on_endpoint(self, comm: MPI_Comm, native: MPIX_Stream) -> c_int {
        match (self, split::endpoint_of(native)) {
            (Backend::Split, Some(k)) if k > 0 => split::set_endpoint(comm, k),
            _ => MPI_SUCCESS,
        }
    }
}
