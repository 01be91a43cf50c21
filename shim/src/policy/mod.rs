//! The explicit endpoint policy for unmodified programs: each communicator the application creates
//! gets its own stream, so codes that give each thread its own communicator get dedicated endpoints.
//! The policy is the user's assertion that each such communicator is used by one thread at a time.
pub mod base;
pub mod guided;
pub mod guided_profile;
pub mod identity;
mod json_read;

use crate::backend::Backend;
use crate::comms::{CommRecord, Origin, OwnedBase, Route};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Info, OwnedComm, Stream};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What the policy did, for the report.
#[derive(Default)]
pub struct PolicyStats {
    pub attached: AtomicU64,
    /// Left on the implicit pool because every stream was taken.
    pub exhausted: AtomicU64,
    /// Left on the implicit pool because MPICH refused a native stream.
    pub refused: AtomicU64,
    /// Left implicit because nothing could keep MPI's progress rule for a stream (MPICH 4.1 and 4.2:
    /// `helper::serves_policy_streams`).
    pub unserved: AtomicU64,
    /// Left implicit because the constructor was nonblocking (`MPI_Comm_idup*`: attaching a stream is a
    /// blocking collective, which would change the program's synchronisation).
    pub nonblocking: AtomicU64,
    /// Left implicit: intercommunicators have no stream communicators.
    pub intercomm: AtomicU64,
    /// Native streams whose communicators were freed, kept until `MPI_Finalize` (see `release_stream`).
    pub retired: AtomicU64,
}

pub static STATS: PolicyStats = PolicyStats {
    attached: AtomicU64::new(0),
    exhausted: AtomicU64::new(0),
    refused: AtomicU64::new(0),
    unserved: AtomicU64::new(0),
    nonblocking: AtomicU64::new(0),
    intercomm: AtomicU64::new(0),
    retired: AtomicU64::new(0),
};

/// Gives the new communicator `*newcomm` (made by a blocking constructor: `ctor_plan`) a stream of its
/// own. On the native backend this replaces it with a native stream communicator (a collective every
/// member makes, whether or not its own pool is exhausted, so that all members take the same path). The
/// blocking dups on the native backend do not come here: [`dup_directly`]. On the split backend the
/// endpoint was agreed before the constructor ran (`agreed`, [`endpoint_before`]). An
/// intercommunicator (every member's result is one) stays implicit.
pub fn attach_stream(rt: &Runtime, newcomm: &mut MPI_Comm, agreed: Option<Agreed>) -> c_int {
    // As before the typed layer: a failed query counts as an intracommunicator.
    if Comm(*newcomm).is_inter().unwrap_or(false) {
        give_back(rt, agreed);
        STATS.intercomm.fetch_add(1, Ordering::Relaxed);
        return MPI_SUCCESS;
    }
    if rt.backend == Backend::Split {
        return attach_endpoint(rt, *newcomm, agreed);
    }
    let taken = take_stream(rt);
    attach_native(rt, taken, *newcomm, Made::Replaced, newcomm)
}

/// The split backend's endpoint for a communicator a constructor is about to make, agreed over its
/// parent: `Some(None)` where no endpoint is free on every member (or this member has no slot).
pub struct Agreed(Option<(usize, MPIX_Stream)>);

/// On the split backend under the explicit policy, before a constructor every member of `parent`
/// calls runs over it (`ctor_plan`: `PolicyAttach { endpoint_first }`): the endpoint of the
/// communicator it will make, agreed by every member of `parent` (Intel MPI's rule: both ends of a
/// message on one endpoint number; and the `thread_id` must be on the communicator before its first
/// collective, so the agreement cannot run over the new communicator itself).
pub fn endpoint_before(rt: &Runtime, parent: MPI_Comm) -> Agreed {
    let slot = rt.streams.allocate();
    match (slot, rt.backend.agree_endpoint(parent, slot.is_some())) {
        (Some(i), Some(native)) => Agreed(Some((i, native))),
        (slot, _) => {
            if let Some(i) = slot {
                rt.streams.release(i);
            }
            Agreed(None)
        }
    }
}

/// An agreed endpoint that no communicator got (this member's result is `MPI_COMM_NULL`, or the
/// constructor failed): given back at once.
pub fn give_back(rt: &Runtime, agreed: Option<Agreed>) {
    if let Some(Agreed(Some((i, native)))) = agreed {
        let _ = rt.backend.free_stream(native);
        rt.streams.release(i);
    }
}

/// The split backend's stream for the new communicator `comm`: the endpoint its members agreed on
/// before it existed, set on it before anything else uses it; where there was none (pool exhausted on
/// some member, or a constructor not every member calls), it stays on endpoint 0 on every member.
fn attach_endpoint(rt: &Runtime, comm: MPI_Comm, agreed: Option<Agreed>) -> c_int {
    match agreed {
        Some(Agreed(Some((i, native)))) => {
            let rc = rt.backend.put_on_endpoint(comm, native);
            if rc != MPI_SUCCESS {
                give_back(rt, Some(Agreed(Some((i, native)))));
                return rc;
            }
            rt.streams.set_native(i, native, None);
            rt.streams.slot(i).policy_owned.store(true, Ordering::Release);
            finish(rt, Some(i), None, comm)
        }
        Some(Agreed(None)) => {
            STATS.exhausted.fetch_add(1, Ordering::Relaxed);
            finish(rt, None, None, comm)
        }
        None => finish(rt, None, None, comm),
    }
}

/// How the communicator a stream communicator is made from came about.
enum Made {
    /// Another constructor just made it for the caller: it becomes the base once replaced.
    Replaced,
    /// It is the parent of a dup; the base was made for the dup (`None`: that failed, on every member).
    Dup(Option<OwnedBase>),
}

/// The policy's `MPI_Comm_dup` / `MPI_Comm_dup_with_info` on the native backend, instead of MPICH's
/// (`ctor_plan`: `PolicyDup`): the native stream communicator is made from `parent` itself
/// (`MPIX_Stream_comm_create` is a dup, one collective), so MPICH runs the attribute copy callbacks
/// exactly once, into the communicator the application receives, and no communicator it never sees is
/// created and freed (which fired the delete callbacks); `info` (of `dup_with_info`) is then set on it
/// with `MPI_Comm_set_info`. `newcomm`: the application's output variable (a null one is MPICH's to
/// report: the caller passes the call through instead).
pub fn dup_directly(rt: &Runtime, parent: MPI_Comm, newcomm: &mut MPI_Comm, info: Option<MPI_Info>) -> c_int {
    let taken = take_stream(rt);
    let index = taken.index;
    // Its base (policy_base.rs): one more collective over `parent`, made first so that the record has
    // it from the start.
    let base = crate::policy::base::split_base(parent);
    // Not `replace`: `*newcomm` holds whatever the caller's variable held (even the parent itself, in
    // `MPI_Comm_dup(c, &c)`), never a communicator made for this call.
    let rc = attach_native(rt, taken, parent, Made::Dup(base), newcomm);
    if rc != MPI_SUCCESS {
        // As MPI_Comm_dup: a failed dup (an attribute copy callback's error) returns MPI_COMM_NULL.
        *newcomm = MPI_COMM_NULL;
        return rc;
    }
    if let Some(info) = info.filter(|&i| i != MPI_INFO_NULL) {
        let _claim = index.map(|i| rt.streams.slot(i).claim());
        if let Err(rc) = Comm(*newcomm).set_info(Info(info)) {
            return rc;
        }
    }
    MPI_SUCCESS
}

/// A stream for a new policy communicator ([`take_stream`]).
#[derive(Clone, Copy)]
struct Taken {
    /// Its slot; `None` (and `native` `MPIX_STREAM_NULL`): none for this communicator on this member.
    index: Option<usize>,
    /// It is a retired one ([`take_retired`]).
    reused: bool,
    native: MPIX_Stream,
}

impl Taken {
    const NONE: Taken = Taken { index: None, reused: false, native: MPIX_STREAM_NULL };
}

/// A stream for a new policy communicator. None where the pool is exhausted, MPICH refused a native
/// stream or nothing could keep MPI's progress rule for one (`helper::serves_policy_streams`): the
/// process still takes part in the collective that makes the communicator, as its peers do.
fn take_stream(rt: &Runtime) -> Taken {
    if rt.backend == Backend::Native && !crate::helper::serves_policy_streams(rt) {
        STATS.unserved.fetch_add(1, Ordering::Relaxed);
        return Taken::NONE;
    }
    if let Some(i) = take_retired() {
        return Taken { index: Some(i), reused: true, native: rt.streams.slot(i).native() };
    }
    let Some(i) = rt.streams.allocate() else {
        STATS.exhausted.fetch_add(1, Ordering::Relaxed);
        return Taken::NONE;
    };
    match rt.create_endpoint(i) {
        Ok(native) => {
            rt.streams.slot(i).policy_owned.store(true, Ordering::Release);
            Taken { index: Some(i), reused: false, native }
        }
        Err(e) => {
            mpixstream_wrappers::say!("mpixstream: explicit policy: {e}; this communicator stays implicit here");
            STATS.refused.fetch_add(1, Ordering::Relaxed);
            rt.streams.release(i);
            Taken::NONE
        }
    }
}

/// Gives a stream [`take_stream`] gave back as it came: a retired one stays retired, a new one (no
/// communicator ever used it, so MPICH holds no reference) goes at once.
fn untake(rt: &Runtime, taken: Taken) {
    let Some(i) = taken.index else { return };
    if taken.reused {
        RETIRED.lock().unwrap_or_else(|e| e.into_inner()).push(i);
    } else {
        let _ = rt.backend.free_stream(taken.native);
        rt.streams.release(i);
    }
}

/// On the native backend, makes `*newcomm` a native stream communicator on `taken`'s stream duplicated
/// from `source` (a collective every member makes, whatever its own stream), made as `made` says. On
/// the serial backend `*newcomm` stays as it is. Then attaches its record ([`finish`]).
fn attach_native(rt: &Runtime, taken: Taken, source: MPI_Comm, made: Made, newcomm: &mut MPI_Comm) -> c_int {
    let (replace, base) = match made {
        Made::Replaced => (true, None),
        Made::Dup(base) => (false, base),
    };
    // The collectives over the new communicator run inside its stream's endpoint (a retired stream's
    // endpoint may still be turned by the progress helper).
    let _claim = taken.index.map(|i| rt.streams.slot(i).claim());
    if rt.backend != Backend::Native {
        return finish(rt, taken.index, base, *newcomm);
    }
    let streamed = match rt.backend.stream_comm(Comm(source), Stream(taken.native)) {
        Ok(streamed) => streamed,
        Err(rc) => {
            untake(rt, taken);
            free_base(base);
            return if replace { stays_implicit(rt, rc, *newcomm) } else { rc };
        }
    };
    let base = if replace {
        match become_base(source, &streamed) {
            Ok(b) => Some(b),
            Err(rc) => {
                let _ = streamed.free();
                return rc;
            }
        }
    } else {
        base
    };
    // The program's from here on.
    *newcomm = streamed.into_raw();
    finish(rt, taken.index, base, *newcomm)
}

/// MPICH could not make the stream communicator of `comm`, which another constructor just made: `rc`.
/// The constructor itself succeeded (MPICH agreed on it over the parent, members or not); only our
/// extra collective over its group failed, on every member alike (its context id is agreed there),
/// typically out of context ids. Failing the call would fail it on the members only, and the
/// non-members' next collective over the parent would hang (MPICH's errors/comm/too_many_comms2 and
/// 3). So `comm` stays implicit.
fn stays_implicit(rt: &Runtime, rc: c_int, comm: MPI_Comm) -> c_int {
    STATS.refused.fetch_add(1, Ordering::Relaxed);
    note_stream_comm_refused(rc);
    finish(rt, None, None, comm)
}

/// `made`, the communicator a constructor made for the caller, replaced by the stream communicator
/// `streamed`: it stays, as `streamed`'s base (a plain communicator of the same group:
/// policy_base.rs), and `streamed` gets its hints (MPICH's stream communicator starts with none; an
/// `MPI_Comm_split_type` with info, say, gave `made` some). Where the hints fail, `streamed` is freed.
fn become_base(made: MPI_Comm, streamed: &OwnedComm) -> Result<OwnedBase, c_int> {
    let rc = copy_hints(made, streamed.raw());
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    // SAFETY: `made` is the communicator the program's constructor just made in this call, which the
    // program never sees (its variable gets `streamed` instead): nobody else owns it or frees it.
    let made = unsafe { OwnedComm::from_raw(made) };
    Ok(crate::policy::base::base_of(made))
}

fn free_base(base: Option<OwnedBase>) {
    if let Some(b) = base {
        b.free();
    }
}

/// Says once per process why a constructor's result stayed implicit.
fn note_stream_comm_refused(rc: c_int) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        mpixstream_wrappers::say!(
            "mpixstream: explicit policy: MPICH could not make a stream communicator of a new \
             communicator ({}); it stays implicit, as will others where this happens again",
            crate::errors::error_string(rc)
        );
    }
}

/// Sets the hints `from` has on `to` (`MPI_Comm_set_info`: collective over the group both share).
fn copy_hints(from: MPI_Comm, to: MPI_Comm) -> c_int {
    let info = match Comm(from).info() {
        Ok(info) => info,
        Err(rc) => return rc,
    };
    let set = Comm(to).set_info(*info);
    let _ = info.free();
    set.err().unwrap_or(MPI_SUCCESS)
}

/// Attaches the record of the new policy communicator `comm` on every member, with where its
/// collectives run (`route_of`).
fn finish(rt: &Runtime, index: Option<usize>, base: Option<OwnedBase>, comm: MPI_Comm) -> c_int {
    if rt.backend != Backend::Native {
        // No native stream communicators, so no routes: only the stream, where this process has one.
        // A record on every member, with a stream or not, so that every member plans a constructor of
        // `comm` alike (`ctor_plan`).
        return attach(
            rt,
            comm,
            CommRecord { stream: index, origin: Origin::Policy, base: None, collectives: Route::Comm },
        );
    }
    let collectives = route_of(base.as_ref().map(OwnedBase::view));
    attach(rt, comm, CommRecord { stream: index, origin: Origin::Policy, base, collectives })
}

fn attach(rt: &Runtime, comm: MPI_Comm, record: CommRecord) -> c_int {
    let stream = record.stream;
    let rc = rt.attach_record(comm, record);
    if rc != MPI_SUCCESS {
        // MPICH refused the attribute: nothing of the record stays (`attach_record` freed its base).
        if let Some(i) = stream {
            release_stream(rt, i);
        }
        return rc;
    }
    if stream.is_some() {
        STATS.attached.fetch_add(1, Ordering::Relaxed);
    }
    MPI_SUCCESS
}

/// Where the nonblocking and persistent collectives of a new policy communicator run: on its base if it
/// has one (all of them if the base carries the communicator's topology, else all but the
/// neighbourhood ones), else on the communicator. Decided by each member alone from facts every member
/// shares: whether the base exists and whether it carries the topology are the outcomes of collectives
/// (the split that made it, the topology's copy), the same on every member; whether this member has a
/// stream is not used (members with and without a stream once ran one collective on different
/// communicators, and it never completed).
fn route_of(base: Option<crate::comms::Base>) -> Route {
    match base {
        Some(b) if b.topology => Route::Base,
        Some(_) => Route::BaseButNeighbourhood,
        None => Route::Comm,
    }
}

/// Gives back a stream the policy created, once the last communicator using it is freed.
///
/// On the native backend the stream is retired, not freed: MPICH 5.0.2 keeps a reference to a native
/// stream from every stream communicator made with it, even after `MPI_Comm_free` (its
/// `MPIX_Stream_free` then fails, fatally under the default handler). A retired stream keeps its slot
/// and its native stream, and the next policy communicator reuses it ([`take_retired`]), so the policy
/// never stops applying after `MPIXSTREAM_STREAMS` communicators. (A request still pending on the freed
/// communicator then shares the endpoint with the new one: complete a communicator's requests before
/// the next communicator is created, as single-threaded programs do.)
pub fn release_stream(rt: &Runtime, index: usize) {
    if rt.backend == Backend::Native {
        STATS.retired.fetch_add(1, Ordering::Relaxed);
        RETIRED.lock().unwrap_or_else(|e| e.into_inner()).push(index);
        return;
    }
    if rt.backend == Backend::Split {
        let _ = rt.backend.free_stream(rt.streams.slot(index).native());
    }
    rt.streams.release(index);
}

/// Retired native policy streams, ready for the next policy communicator.
static RETIRED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A retired policy stream (its slot still holds its native stream), if any: the one retired longest
/// ago, so that a request still pending on its freed communicator has had the most time to complete
/// before another communicator shares its endpoint.
fn take_retired() -> Option<usize> {
    let mut retired = RETIRED.lock().unwrap_or_else(|e| e.into_inner());
    (!retired.is_empty()).then(|| retired.remove(0))
}
