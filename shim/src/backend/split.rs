//! Split backend: Intel MPI's thread-split endpoints (docs/architecture.md, "Intel MPI's thread-split
//! endpoints"). Intel MPI opens `MPIR_CVAR_THREAD_MAX` endpoints at `MPI_Init*` when
//! `MPIR_CVAR_THREAD_SPLIT` is on, and a communicator whose info sets `thread_id=k` runs on endpoint `k`
//! on every process: both ends of a message use the same number. Endpoint 0 stays the conventional
//! one (communicators without the key); our streams are endpoints 1 ..= pool.
//!
//! Intel's rule is that one endpoint is never driven by two threads at once: with the mode on, four
//! threads on `MPI_COMM_WORLD` hang, and four on their own plain dups (all endpoint 0) receive wrong
//! values (measured with Intel MPI 2021.19, shm). So this backend is chosen only on request
//! (`MPIXSTREAM_BACKEND=split`), and a stream communicator exists only where every member attached the
//! same endpoint: anything else is refused on every member.
use crate::errors::{raise, Class};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Info, MpiResult, Op, OwnedComm, OwnedInfo, SharedComm};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Intel MPI's control variables (writable through the tool interface before `MPI_Init*`, as MPICH's).
pub const SPLIT_VARIABLE: &str = "MPIR_CVAR_THREAD_SPLIT";
pub const THREAD_MAX_VARIABLE: &str = "MPIR_CVAR_THREAD_MAX";

/// The info key Intel MPI reads a communicator's endpoint from (`MPIR_CVAR_EP_ID_KEY`'s default).
const KEY: &std::ffi::CStr = c"thread_id";

/// Our handle for endpoint `k`: a value of our own (never passed to Intel MPI), distinct from
/// `MPIX_STREAM_NULL` and from MPICH's stream handles.
const HANDLE_BASE: MPIX_Stream = 0x7d00_0000;

/// Endpoints taken, one bit each (bit 0, the conventional endpoint, is never taken), and the pool size.
/// Held only to take or give back a bit, never across an MPI call.
static TAKEN: Mutex<(u64, u32)> = Mutex::new((0, 0));

/// For each taken endpoint, a private communicator on it that never carries a message: its
/// `MPI_Iprobe` turns that endpoint's progress only ([`progress`]); read without a lock.
/// Owned here, freed when the endpoint is given back.
static QUIET: [SharedComm; 64] = [const { SharedComm::empty() }; 64];

/// Endpoints whose stream the application freed, one bit each: their quiet communicators are kept and
/// turned by the helper thread ([`turn_retired`]) until a new stream takes the endpoint ([`claim`]). A
/// send Intel MPI completed may still sit in the endpoint's queue (libfabric's tcp provider writes it to
/// the socket in a later progress turn of that endpoint); once its thread is gone nothing else turns
/// it: across hosts a multiplex receiver waited forever for the last messages of senders that had freed
/// their streams (`tests/c/multiplex_n_to_1.c`, `tests/scripts/hosts_multiplex.sh`), as on MPICH's
/// native streams (`native::RETIRED`). The lock is held while a turn polls and while an endpoint is
/// taken back, so a retired endpoint is never turned once it has an owner again.
static RETIRED: Mutex<u64> = Mutex::new(0);
/// RETIRED's bits, read without its lock by [`turn_retired`] first.
static RETIRED_BITS: AtomicU64 = AtomicU64::new(0);

/// For each taken endpoint, the stream-table slot whose claim every call driving it holds, plus one
/// (0: none known): a multiplex communicator's dedicated endpoints, each the slot of the index that
/// drives it (`multiplex::endpoints`; every indexed call claims its index). A stream's own endpoint is
/// not recorded: calls on a stream communicator of this backend take no claim. The same hazard as for
/// RETIRED while the endpoint is still owned: a thread whose sends completed and which then stops
/// calling MPI on its endpoints (it waits in a barrier, or has ended) leaves their last bytes in
/// libfabric's queue, and the peer waits for them; across hosts `tests/c/multiplex_alltoall.c` hung
/// in 3 of 6 runs so (a receiver's socket held the first 24 bytes of a message whose rest never came).
/// The helper thread turns them while that slot's owner is away ([`turn_owned_by`]), holding the
/// slot's claim. Changed under RETIRED's lock, which a turn holds, so an endpoint is never turned once
/// it is given back.
static OWNER: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];
/// OWNER's slots, one bit each (a slot past 63 is not recorded: its endpoints are not turned).
static OWNING: AtomicU64 = AtomicU64::new(0);

/// Records `slot` as the one whose claim guards endpoint `native` (`None`: none any more).
pub fn set_owner(native: MPIX_Stream, slot: Option<usize>) {
    let Some(k) = endpoint_of(native).filter(|&k| (1..64).contains(&k)) else { return };
    let _turns = lock_retired();
    OWNER[k as usize].store(slot.filter(|&s| s < 64).map_or(0, |s| s + 1), Ordering::Relaxed);
    let owning = OWNER.iter().filter_map(|o| o.load(Ordering::Relaxed).checked_sub(1)).fold(0u64, |m, s| m | 1 << s);
    OWNING.store(owning, Ordering::Relaxed);
}

/// The slots that guard some endpoint, one bit each (one relaxed load).
pub fn owning_slots() -> u64 {
    OWNING.load(Ordering::Relaxed)
}

/// One progress turn of every endpoint `slot` guards; the caller holds `slot`'s claim, so no thread of
/// the program is inside any of them. Skipped this time while an endpoint is being given back.
pub fn turn_owned_by(slot: usize) {
    let Ok(_turns) = RETIRED.try_lock() else { return };
    for (k, owner) in OWNER.iter().enumerate() {
        if owner.load(Ordering::Relaxed) == slot + 1 {
            let _ = QUIET[k].view().iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG);
        }
    }
}

fn lock_retired() -> std::sync::MutexGuard<'static, u64> {
    RETIRED.lock().unwrap_or_else(|e| e.into_inner())
}

/// One progress turn of every retired endpoint (the helper thread's; `try_lock`: an endpoint being
/// taken by a new stream is skipped this time). Only this turns them: nobody owns a retired endpoint.
pub fn turn_retired() {
    // Every poll loop of ours helps (`helper::help`): while nothing is retired, one relaxed load, no lock.
    if RETIRED_BITS.load(Ordering::Relaxed) == 0 {
        return;
    }
    if let Ok(retired) = RETIRED.try_lock() {
        let mut bits = *retired;
        while bits != 0 {
            let k = bits.trailing_zeros() as usize;
            let _ = QUIET[k].view().iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG);
            bits &= bits - 1;
        }
    }
}

fn taken() -> std::sync::MutexGuard<'static, (u64, u32)> {
    TAKEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// At `MPI_Init*`: `pool` endpoints for streams, numbered 1 ..= pool (at most 63: settings.rs).
pub fn set_pool(pool: u32) {
    taken().1 = pool.min(63);
}

/// The endpoints free here, one bit each.
fn free_mask() -> u64 {
    let (bits, pool) = *taken();
    (1..=pool).map(|k| 1u64 << k).filter(|b| bits & b == 0).fold(0, |m, b| m | b)
}

/// The endpoint number behind one of our handles (0: `MPIX_STREAM_NULL`, the conventional endpoint).
pub fn endpoint_of(native: MPIX_Stream) -> Option<u32> {
    match native {
        MPIX_STREAM_NULL => Some(0),
        h if h & !0xff == HANDLE_BASE => Some((h & 0xff) as u32),
        _ => None,
    }
}

/// An info object holding `thread_id=k` (the caller frees it).
fn info_for(k: u32) -> MpiResult<OwnedInfo> {
    let info = Info::create()?;
    let value = std::ffi::CString::new(k.to_string()).unwrap_or_default();
    if let Err(rc) = info.set(KEY, &value) {
        let _ = info.free();
        return Err(rc);
    }
    Ok(info)
}

/// Puts `comm` on endpoint `k` (`MPI_Comm_set_info`, which Intel MPI honours on an existing
/// communicator: tests/impi/thread_split_probe.sh).
pub fn set_endpoint(comm: MPI_Comm, k: u32) -> c_int {
    let info = match info_for(k) {
        Ok(i) => i,
        Err(rc) => return rc,
    };
    let rc = Comm(comm).set_info(*info);
    let _ = info.free();
    rc.err().unwrap_or(MPI_SUCCESS)
}

/// Takes endpoint `k` if it is free here, with its quiet communicator (a dup of `MPI_COMM_SELF`: a
/// local call).
fn claim(k: u32) -> Result<MPIX_Stream, String> {
    {
        let mut t = taken();
        if k == 0 || k > t.1 || t.0 & 1u64 << k != 0 {
            return Err(format!("endpoint {k} is not free here"));
        }
        t.0 |= 1u64 << k;
    }
    {
        // A retired endpoint keeps its quiet communicator: its new owner turns it from now on.
        let mut retired = lock_retired();
        if *retired & 1u64 << k != 0 {
            *retired &= !(1u64 << k);
            RETIRED_BITS.store(*retired, Ordering::Relaxed);
            return Ok(HANDLE_BASE | k as c_int);
        }
    }
    let made = Comm::SELF.dup().and_then(|quiet| match set_endpoint(quiet.raw(), k) {
        MPI_SUCCESS => Ok(quiet),
        rc => {
            let _ = quiet.free();
            Err(rc)
        }
    });
    let quiet = match made {
        Ok(quiet) => quiet,
        Err(rc) => {
            taken().0 &= !(1u64 << k);
            return Err(format!("cannot make endpoint {k}'s progress communicator (error {rc})"));
        }
    };
    if let Err(stale) = QUIET[k as usize].put(quiet) {
        // Endpoint k was free (its bit was clear), so its slot is empty: never reached.
        let _ = stale.free();
    }
    Ok(HANDLE_BASE | k as c_int)
}

/// A new stream: the lowest free endpoint of this process.
pub fn create_stream() -> Result<MPIX_Stream, String> {
    loop {
        let free = free_mask();
        if free == 0 {
            return Err(format!(
                "all {} thread-split endpoints are taken (MPIXSTREAM_STREAMS sets MPIR_CVAR_THREAD_MAX = pool + 1)",
                taken().1
            ));
        }
        // Another thread may take it between the two steps: then try the next.
        if let Ok(h) = claim(free.trailing_zeros()) {
            return Ok(h);
        }
    }
}

/// Collective over `comm`: an endpoint free on every member, taken on each (`None` on every member
/// where there is none, or where a member cannot take one: `can_take` false). Intel MPI's rule (both
/// ends of a message on one endpoint number) makes a per-process choice useless for a communicator;
/// this is the explicit policy's. No lock is held across the collectives (a lock held there would let
/// two threads making communicators over different parents deadlock across processes): a member whose
/// other thread took the agreed endpoint meanwhile makes the round fail on every member, and the next
/// round offers what is free then.
pub fn agree_endpoint(comm: MPI_Comm, can_take: bool) -> Option<MPIX_Stream> {
    agree_endpoints(comm, 1, can_take)?.pop()
}

/// Collective over `comm`: `n` endpoints free on every member, taken on each, in one agreement (two
/// reductions a round, where `n` agreements of one would take `2n`: a small reduction between hosts
/// costs milliseconds, docs/cluster.md); `None` on every member where fewer are free everywhere, or
/// where a member cannot take any (`can_take` false: it offers none). As [`agree_endpoint`], no lock is
/// held across the collectives: a round another thread spoiled fails everywhere and the next one runs.
pub fn agree_endpoints(comm: MPI_Comm, n: usize, can_take: bool) -> Option<Vec<MPIX_Stream>> {
    let allreduce = |mine: u64, op: Op| -> Option<u64> {
        let mut all = [0u64];
        Comm(comm).allreduce(&[mine], &mut all, op).ok()?;
        Some(all[0])
    };
    for _ in 0..64 {
        let common = allreduce(if can_take { free_mask() } else { 0 }, Op::BAND)?;
        if (common.count_ones() as usize) < n {
            return None;
        }
        let mine = claim_lowest(common, n);
        match allreduce(mine.is_some() as u64, Op::MIN) {
            Some(1) => return mine,
            Some(_) => give_back(mine.unwrap_or_default()),
            None => {
                give_back(mine.unwrap_or_default());
                return None;
            }
        }
    }
    None
}

/// The `n` lowest endpoints of `mask`, taken here; `None` (those taken given back) where another
/// thread took one of them first.
fn claim_lowest(mut mask: u64, n: usize) -> Option<Vec<MPIX_Stream>> {
    let mut mine = Vec::with_capacity(n);
    while mine.len() < n {
        match claim(mask.trailing_zeros()) {
            Ok(h) => mine.push(h),
            Err(_) => {
                give_back(mine);
                return None;
            }
        }
        mask &= mask - 1;
    }
    Some(mine)
}

fn give_back(taken: Vec<MPIX_Stream>) {
    for h in taken {
        let _ = free_stream(h);
    }
}

/// The `n` lowest endpoints free here, taken ahead of a collective that offers them
/// (`multiplex::offer`: where every member took the same ones, no agreement round is needed); none
/// where fewer are free or another thread took one meanwhile (given back then).
pub fn take_ahead(n: usize) -> Vec<MPIX_Stream> {
    let free = free_mask();
    if n == 0 || (free.count_ones() as usize) < n {
        return Vec::new();
    }
    claim_lowest(free, n).unwrap_or_default()
}

/// The endpoints of `taken` (handles of ours), one bit each.
pub fn mask_of(taken: &[MPIX_Stream]) -> u64 {
    taken.iter().filter_map(|&h| endpoint_of(h)).fold(0, |m, k| m | 1u64 << k)
}

pub fn free_stream(native: MPIX_Stream) -> Result<(), String> {
    let Some(k) = endpoint_of(native).filter(|&k| (1..64).contains(&k)) else {
        return Err(format!("0x{:08x} is no thread-split endpoint", native as u32));
    };
    set_owner(native, None);
    // Retired, not freed (RETIRED says why): the quiet communicator stays until MPI_Finalize or the
    // endpoint's next stream.
    if QUIET[k as usize].view() != Comm::NULL {
        let mut retired = lock_retired();
        *retired |= 1u64 << k;
        RETIRED_BITS.store(*retired, Ordering::Relaxed);
    }
    taken().0 &= !(1u64 << k);
    Ok(())
}

/// Collective over `parent`: a dup on `native`'s endpoint, where every member attached the same one
/// (Intel MPI's rule); refused on every member otherwise, with an error naming the endpoints.
pub fn stream_comm_create(parent: MPI_Comm, native: MPIX_Stream) -> MpiResult<OwnedComm> {
    const F: &str = "MPIX_Stream_comm_create";
    let k = endpoint_of(native).unwrap_or(0) as c_int;
    // max(k) and max(-k) = -min(k), in one reduction.
    let mine: [c_int; 2] = [k, -k];
    let mut all: [c_int; 2] = [0; 2];
    Comm(parent).allreduce(&mine, &mut all, Op::MAX)?;
    let (high, low) = (all[0], -all[1]);
    if high != low {
        return Err(raise(
            parent,
            Class::Stream,
            F,
            &format!(
                "on Intel MPI's thread-split endpoints both ends of a message use the same endpoint, so every \
                 process must attach a stream on the same one; this process attached endpoint {k}, the \
                 members' range from {low} to {high} (create the streams in the same order on every process)"
            ),
        ));
    }
    let new = Comm(parent).dup()?;
    if k == 0 {
        return Ok(new);
    }
    // A failure here leaves MPICH's dup unfreed, as before the typed layer (then the caller's handle).
    crate::errors::check(set_endpoint(new.raw(), k as u32))?;
    Ok(new)
}

/// One turn of endpoint `native`'s progress: `MPI_Iprobe` on its quiet communicator (`None`: not one
/// of ours).
pub fn progress(native: MPIX_Stream) -> Option<c_int> {
    let k = endpoint_of(native).filter(|&k| (1..64).contains(&k))?;
    let quiet = QUIET[k as usize].view();
    if quiet == Comm::NULL {
        return None;
    }
    Some(quiet.iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG).err().unwrap_or(MPI_SUCCESS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owners the helper thread reads: set per endpoint, cleared by `None`; a slot past 63 and a
    /// handle that is no endpoint of ours are not recorded.
    #[test]
    fn owners_are_recorded_per_endpoint_and_cleared() {
        let h = |k: c_int| HANDLE_BASE | k;
        set_owner(h(3), Some(5));
        set_owner(h(4), Some(5));
        set_owner(h(7), Some(2));
        assert_eq!(owning_slots(), 1 << 5 | 1 << 2);
        set_owner(h(3), None);
        assert_eq!(owning_slots(), 1 << 5 | 1 << 2, "slot 5 still guards endpoint 4");
        set_owner(h(4), None);
        set_owner(h(9), Some(64));
        set_owner(MPIX_STREAM_NULL, Some(1));
        assert_eq!(owning_slots(), 1 << 2);
        set_owner(h(7), None);
        assert_eq!(owning_slots(), 0);
    }
}
