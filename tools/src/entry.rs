//! What every interposer does when its call enters MPI and when it leaves: the one-thread check
//! (`check`, when `MPIXSTREAM_CHECK` is on) and the contention profile (`profile`, with the report),
//! on the endpoints of the communicators and requests the call drives.
use crate::check;
use crate::profile::{self, Inside};
use crate::state::{self, CommRec, ReqInfo};
use mpixstream_wrappers::ffi::MPI_Request;

/// Held while the call is inside MPI; dropping it leaves the endpoints and the check's owner slots.
pub struct Entered {
    _profile: Inside,
    _check: check::Guard,
}

/// A call on `rec`'s communicator (none where the handle is not a communicator).
#[inline]
pub fn enter(name: &'static str, rec: Option<&'static CommRec>) -> Entered {
    let check = check::enter(name, rec);
    let profile = match rec {
        Some(r) => profile::enter_comm(r.slot(), &r.threads),
        _ => Inside::none(),
    };
    Entered { _profile: profile, _check: check }
}

/// A call that drives several operations at once: `tracked` are those we follow (their communicators),
/// `all` every request of the call (where an untracked one's handle names its endpoint, that counts too).
#[inline]
pub fn enter_requests(
    name: &'static str,
    all: impl Iterator<Item = MPI_Request>,
    tracked: &[(usize, MPI_Request, ReqInfo)],
) -> Entered {
    let check = check::enter_many(name, tracked.iter().map(|x| x.2.rec));
    let profile = if profile::on() {
        // `tracked` is in the order of `all`: one walk over both.
        let mut t = tracked.iter().peekable();
        profile::enter(all.enumerate().filter_map(move |(i, h)| match t.peek() {
            Some(x) if x.0 == i => t.next().map(|x| x.2.rec.slot()),
            _ => state::request_slot(h),
        }))
    } else {
        Inside::none()
    };
    Entered { _profile: profile, _check: check }
}

/// A call on records of several communicators (`MPI_Startall`, the standard ABI's completions).
#[inline]
pub fn enter_many(name: &'static str, recs: impl Iterator<Item = &'static CommRec> + Clone) -> Entered {
    let check = check::enter_many(name, recs.clone());
    let profile = if profile::on() { profile::enter(recs.map(|r| r.slot())) } else { Inside::none() };
    Entered { _profile: profile, _check: check }
}

/// A completion call on one request we do not follow: profiled on the endpoint its handle names.
#[inline]
pub fn enter_untracked(h: MPI_Request) -> Inside {
    match state::request_slot(h) {
        Some(s) if profile::on() => profile::enter([s]),
        _ => Inside::none(),
    }
}
