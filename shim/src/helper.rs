//! The progress helper: MPI's progress rule for every stream, by one mechanism.
//!
//! MPI promises that while any thread of a process is blocked in MPI, every operation the process
//! started advances. MPICH keeps that promise on its implicit pool only: its global progress never
//! turns a stream's reserved endpoint, which only calls on that stream enter. A thread blocked in
//! `MPI_Barrier` on `MPI_COMM_WORLD` therefore starves every stream whose owner is away, and a thread
//! blocked on its stream starves the implicit pool.
//!
//! [`help`] is the one remedy: it turns every stream's endpoint that nobody is inside right now (the
//! claim, `StreamSlot::try_claim`, makes "nobody" exact: a helper never enters an endpoint another
//! thread is inside, and an owner's next call waits for the helper's one turn to end), completes the
//! operations nobody waits for (`orphans`) and runs the destruction work kept out of MPICH's callbacks
//! (`deferred`). It runs in every poll loop of ours (completion calls, routed probes, a buffered send
//! waiting for space, `MPI_Buffer_detach`, `MPI_Finalize`) and, for the calls that block inside MPICH
//! where we cannot run anything, in the helper thread: a thread of ours that looks every [`PERIOD`]
//! and turns the endpoints whose owner is away (nobody entered them since its previous look; an owner
//! at work turns its own), and the implicit pool while a thread is blocked on its stream (so that
//! thread no longer starves it); while every owner is at work its looks space out. The thread needs `MPI_THREAD_MULTIPLE`, which the native backend therefore asks MPICH for
//! (`interposed::init`).
//!
//! Cost: the owner's claim on each of its calls (one compare-and-swap and one store, measured in
//! docs/performance.md) and the helper thread's looks (a turn only where an owner is away).
use crate::backend::Backend;
use crate::ownership::Presence;
use crate::runtime::Runtime;
use crate::streams::StreamSlot;
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the helper thread helps. Short enough that a peer waiting on a stream whose owner is
/// away sees its protocol steps at this pace; long enough that its turns cost the program's threads
/// nothing measurable (docs/performance.md).
pub const PERIOD: Duration = Duration::from_micros(200);

/// One help: a progress turn of every stream's reserved endpoint nobody is inside (and which no
/// thread of ours drives as its registered driver: a progress thread or an enqueue engine turns it
/// itself), the orphans, the deferred work; and, with `implicit`, a turn of the implicit pool.
/// Never called from inside MPICH (a callback): only from our own loops, where the calling thread is
/// inside no endpoint's progress, so that it may also turn the endpoints it owns further up.
pub fn help(rt: &Runtime, implicit: bool) {
    if rt.backend == Backend::Native && rt.streams.any_reserved() {
        for (_, slot) in rt.streams.live() {
            if slot.has_endpoint() && slot.driver().is_none() {
                turn(rt, slot);
            }
        }
    }
    help_rest(rt, implicit, false);
}

/// [`help`] for a program's thread waiting for what orphans hold (space in the attached buffer): the
/// orphans whose endpoint another thread is inside also give back what is known complete without
/// entering it (`orphans::Orphan::reclaim`), since that thread may be blocked there for good (a
/// `MPI_Recv` on the same communicator waiting for a message this thread's next send enables).
pub fn help_reclaiming(rt: &Runtime) {
    if rt.backend == Backend::Native && rt.streams.any_reserved() {
        for (_, slot) in rt.streams.live() {
            if slot.has_endpoint() && slot.driver().is_none() {
                turn(rt, slot);
            }
        }
    }
    help_rest(rt, false, true);
}

/// A progress turn of the stream's endpoint unless a thread is inside it; whether it turned.
fn turn(rt: &Runtime, slot: &StreamSlot) -> bool {
    match slot.try_claim() {
        Some(_claim) => {
            rt.progress(slot.native());
            true
        }
        None => false,
    }
}

/// The orphans (`reclaim`: see [`help_reclaiming`]), the deferred work and, with `implicit`, a turn of
/// the implicit pool.
fn help_rest(rt: &Runtime, implicit: bool, reclaim: bool) {
    // Each backend's retired streams (one relaxed load while it has none).
    crate::backend::turn_retired();
    crate::orphans::turn(rt, reclaim);
    if crate::deferred::pending() {
        crate::deferred::run(rt);
    }
    if implicit {
        rt.progress(MPIX_STREAM_NULL);
    }
}

/// The helper thread's help: like [`help`], but only the endpoints whose owner is away (nobody entered
/// them since the previous look, `seen`): an owner at work turns its endpoint in its own calls, and a
/// turn of ours there would only make its next call wait. The implicit pool is turned only while a
/// thread has been blocked inside a stream's endpoint for a whole period (its stream's progress turns
/// nothing else), at the pace [`ImplicitPace`] sets. Whether anything may still need the helper soon:
/// a stream away or blocked, orphans, deferred work.
fn help_away(rt: &Runtime, seen: &mut [u32], pace: &mut ImplicitPace) -> bool {
    let mut needed = false;
    let mut blocked = false;
    // The slots whose endpoints this thread watches (a bit set; slots are below 64 on both backends):
    // native, each stream's reserved endpoint; split, the endpoints a slot's claim guards (a multiplex
    // communicator's dedicated endpoints, `split::OWNER`).
    let watched = match rt.backend {
        Backend::Native if rt.streams.any_reserved() => rt
            .streams
            .live()
            // Never claimed: no communicator was made on it (every constructor and call claims), so
            // nothing can be waiting on its VCI, and a turn is not free (on MPICH 4.1.3 over ch4:ofi it
            // takes libfabric's lock, which the program's threads then wait for: docs/cluster.md,
            // policy_idup on 4.1.3). The pool's streams the policy has not handed out stay quiet.
            .filter(|(i, slot)| *i < 64 && slot.has_endpoint() && slot.driver().is_none() && slot.claim_count() != 0)
            .fold(0u64, |m, (i, _)| m | 1 << i),
        Backend::Split => crate::backend::owning_slots(),
        _ => 0,
    };
    // Those whose owner is away.
    let mut away = 0u64;
    let mut bits = watched;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if i >= seen.len() {
            continue;
        }
        match rt.streams.slot(i).presence(&mut seen[i]) {
            Presence::Entered => {}
            Presence::Blocked => {
                blocked = true;
                needed = true;
            }
            Presence::Away => {
                needed = true;
                away |= 1 << i;
            }
        }
    }
    // MPICH's progress (any turn, any test) runs its progress hooks, which post the next rounds of every
    // nonblocking collective's schedule, on whatever endpoint they run: a round on a stream's endpoint
    // while its owner is inside would be two threads in one VCI. The program's own threads run the
    // hooks in their calls (MPICH's doing, docs/native-defects.md); this thread, which no program call
    // made, calls MPI only while it holds the claims of every endpoint with such a schedule
    // (`wrapped_collectives`), else looks again next period.
    let Some(schedules) = ScheduleClaims::take(rt) else { return true };
    let mut turned = 0u64;
    let mut bits = away;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let slot = rt.streams.slot(i);
        // Split: the endpoints the slot guards, never its own (a stream communicator's calls take no
        // claim on that backend).
        let done = match rt.backend {
            Backend::Split => slot.try_claim().map(|_claim| crate::backend::turn_owned_by(i)).is_some(),
            _ => turn(rt, slot),
        };
        if done {
            turned |= 1 << i;
        }
    }
    help_rest(rt, false, false);
    if blocked && rt.helper_turns_implicit && pace.due() {
        let start = Instant::now();
        rt.progress(MPIX_STREAM_NULL);
        pace.turned(start.elapsed());
    }
    let ours = turned | schedules.taken;
    drop(schedules);
    // Our own claims are not the owners' return.
    let mut bits = ours;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        seen[i] = rt.streams.slot(i).claim_count();
    }
    needed || crate::orphans::pending() != 0 || crate::deferred::pending()
}

/// The claims of every stream endpoint on which a nonblocking collective's schedule is open (MPICH's
/// progress hooks post its rounds there), all taken now or none; released when dropped.
struct ScheduleClaims<'a> {
    rt: &'a Runtime,
    /// Slots whose claim was taken here (outermost), as a bit set (the native backend's slots are below 64).
    taken: u64,
}

impl<'a> ScheduleClaims<'a> {
    fn take(rt: &'a Runtime) -> Option<ScheduleClaims<'a>> {
        let mut claims = ScheduleClaims { rt, taken: 0 };
        if !rt.streams.any_reserved() {
            return Some(claims);
        }
        let me = crate::streams::thread_token();
        for (i, slot) in rt.streams.live() {
            if i >= 64 || !slot.endpoint().scheduled() {
                continue;
            }
            match slot.endpoint().try_claim(me) {
                Some(c) => {
                    if c.keep() {
                        claims.taken |= 1 << i;
                    }
                }
                // Dropping `claims` releases those taken.
                None => return None,
            }
        }
        Some(claims)
    }
}

impl Drop for ScheduleClaims<'_> {
    fn drop(&mut self) {
        let mut bits = self.taken;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            self.rt.streams.slot(i).endpoint().leave();
            bits &= bits - 1;
        }
    }
}

/// How often the helper thread turns the implicit pool for a thread blocked on its stream: at every
/// look while its turns are quick, ever more rarely (every 2nd, 4th … 256th look, one turn per 51 ms)
/// while they are slow. A turn is MPICH's global progress; a slow one means other threads were inside
/// the implicit pool (turning it themselves, so the turn was not needed) or the helper was preempted
/// inside it, holding what those threads wait for. A turn at every look made `tests/c/policy_idup.c`
/// at 4 ranks on MPICH 4.3.2 (4 threads on the implicit pool) take 73-91 s instead of 17-46 s without
/// the turns; a fixed pace slow enough for it (every 256th look) starves the steps a lone blocked
/// thread's peers need (`tests/c/policy_nbc_progress.c`: a 1 MiB `MPI_Iallreduce`'s rounds).
struct ImplicitPace {
    /// Looks between two turns.
    gap: u32,
    /// Looks since the last turn.
    since: u32,
}

/// A turn of the implicit pool longer than this was contended.
const SLOW_TURN: Duration = Duration::from_micros(50);

/// The longest gap, in looks.
const MAX_GAP: u32 = 256;

impl ImplicitPace {
    const fn new() -> ImplicitPace {
        ImplicitPace { gap: 1, since: 0 }
    }

    /// Whether this look turns the implicit pool (counts the look).
    fn due(&mut self) -> bool {
        self.since += 1;
        self.since >= self.gap
    }

    /// A turn took `took`: the next one after twice the gap if it was slow, half if it was quick.
    fn turned(&mut self, took: Duration) {
        self.since = 0;
        self.gap = if took > SLOW_TURN { (self.gap * 2).min(MAX_GAP) } else { (self.gap / 2).max(1) };
    }
}

/// Whether a policy stream keeps MPI's progress rule on this MPICH: a thread blocked on its stream
/// starves the implicit pool unless the helper thread turns it (MPICH >= 4.3 under the native backend;
/// MPICH 4.1.3 broke beside a thread of ours on the implicit pool, docs/native-defects.md). Where it
/// does not, the explicit policy gives no streams (`policy::take_stream`); nor once a request made on a
/// stream did not decode to it (`request_check`).
pub fn serves_policy_streams(rt: &Runtime) -> bool {
    rt.backend == Backend::Native && rt.helper_turns_implicit && rt.thread_multiple() && crate::request_check::decodes()
}

/// What the banner says after `policy explicit` about MPI's progress rule: nothing where the policy
/// gives native streams, else why every communicator stays implicit.
pub fn banner_note(rt: &Runtime) -> Option<&'static str> {
    if rt.backend != Backend::Native || serves_policy_streams(rt) {
        None
    } else {
        Some(
            "MPICH 4.1 and 4.2 have no progress helper on the implicit pool, so nothing could keep MPI's progress \
             rule for a stream: every communicator stays implicit",
        )
    }
}

/// The helper thread, while it runs.
static THREAD: Mutex<Option<BackgroundThread>> = Mutex::new(None);

/// How long the helper thread sleeps while no stream has a reserved endpoint.
const IDLE: Duration = Duration::from_millis(10);

/// The longest the helper thread sleeps while every stream's owner is at work: the delay before it
/// notices an owner gone away.
const RELAXED: Duration = Duration::from_millis(2);

/// Starts the helper thread at `MPI_Init*`, where it has endpoints to serve (the native backend) and
/// may call MPI (`MPI_THREAD_MULTIPLE`, which the native backend asks MPICH for).
pub fn start(rt: &'static Runtime) {
    // Split: the endpoints a slot's claim guards (a multiplex communicator's dedicated ones) while
    // their owner is away, the retired endpoints (`split::turn_retired`: nobody else turns them) and
    // the orphans.
    if !matches!(rt.backend, Backend::Native | Backend::Split) || !rt.thread_multiple() {
        return;
    }
    let mut guard = THREAD.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_some() {
        return;
    }
    // The claim counts of the streams at the previous look (`StreamSlot::presence`).
    let mut seen = vec![0u32; rt.streams.capacity()];
    let mut sleep = PERIOD;
    let mut pace = ImplicitPace::new();
    match BackgroundThread::spawn("mpixstream-helper", move |_| {
        std::thread::park_timeout(sleep);
        let serving = rt.streams.any_reserved()
            || crate::backend::owning_slots() != 0
            || crate::orphans::pending() != 0
            || crate::deferred::pending();
        // Every period while something may need a turn; while every owner is at work (or nothing has
        // an endpoint), the looks space out up to `RELAXED`, `IDLE`.
        sleep = if !serving {
            help_rest(rt, false, false);
            IDLE
        } else if help_away(rt, &mut seen, &mut pace) {
            PERIOD
        } else {
            (sleep * 2).min(RELAXED)
        };
        Turn::Again
    }) {
        Ok(t) => *guard = Some(t),
        Err(e) => {
            mpixstream_wrappers::say!("mpixstream: no progress helper thread ({e}); only waits of ours will help")
        }
    }
}

/// Stops the helper thread (`MPI_Finalize`, before the last helps and `PMPI_Finalize`).
pub fn stop() {
    let thread = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(t) = thread {
        t.request_stop();
        if let Some(handle) = t.thread() {
            handle.unpark();
        }
        t.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implicit_turns_space_out_while_slow_and_come_back_while_quick() {
        let mut pace = ImplicitPace::new();
        assert!(pace.due(), "the first blocked look turns");
        let slow = SLOW_TURN * 2;
        for _ in 0..20 {
            pace.turned(slow);
        }
        assert_eq!(pace.gap, MAX_GAP);
        assert_eq!((0..MAX_GAP).filter(|_| pace.due()).count(), 1, "one turn per MAX_GAP looks");
        pace.turned(Duration::ZERO);
        assert_eq!(pace.gap, MAX_GAP / 2);
        for _ in 0..10 {
            pace.turned(Duration::ZERO);
        }
        assert_eq!(pace.gap, 1);
        assert!(pace.due(), "quick turns: every look");
    }
}
