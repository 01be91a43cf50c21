//! What the companion library `libmpixstream_tools.so` (counters, report, one-thread-per-communicator
//! check) may ask the lean library: a small C API over the state we already keep (backend, pool,
//! policy, which communicator carries which stream, and on which VCI), so the mapping lives in one
//! place. Nothing here runs on a communication path of the lean library.
//! (What the lean library tells the tools library, the other way: `tools_link`.)
use crate::comms::Origin;
use crate::config::Policy;
use crate::multiplex::{endpoints, registry};
use crate::native_fixes::plain_twin;
use crate::runtime;
use crate::{backend::Backend, policy};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::tools::Description;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::Ordering;

/// Fills `*out` (whose `size` field the caller set to `sizeof` its struct). 0 on success; -1 when MPI
/// is not initialised through us or `out` is too small.
///
/// # Safety
/// `out` is NULL or points to the caller's `Description` of `(*out).size` bytes, writable.
#[no_mangle]
pub unsafe extern "C" fn mpixstream_describe(out: *mut Description) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_describe", -1, || {
        if out.is_null() {
            return -1;
        }
        // SAFETY: non-null: the tools library's own struct, which starts with the `size` field it set.
        if (unsafe { (*out).size } as usize) < std::mem::size_of::<Description>() {
            return -1;
        }
        // SAFETY: the caller's struct is a whole `Description` (its size says so), alive and used by no
        // one else during this call.
        let d = unsafe { &mut *out };
        if mpixstream_wrappers::abi::standard() {
            return crate::standard_abi::policy::describe(d);
        }
        let Some(rt) = runtime::active() else {
            return -1;
        };
        d.backend = match rt.backend {
            Backend::Serial => 0,
            Backend::Native => 1,
            Backend::Split => 2,
        };
        d.policy = match rt.config.policy {
            Policy::Implicit => 0,
            Policy::Explicit => 1,
            Policy::Guided => 2,
        };
        d.pool = rt.streams.capacity() as c_int;
        d.implicit_vcis = rt.backend.implicit_vcis() as c_int;
        d.thread_level = rt.thread_level;
        d.rank = rt.rank;
        d.nranks = rt.size;
        d.streams_in_use = rt.streams.in_use() as c_int;
        d.policy_attached = policy::STATS.attached.load(Ordering::Relaxed);
        d.policy_exhausted = policy::STATS.exhausted.load(Ordering::Relaxed);
        d.policy_nonblocking = policy::STATS.nonblocking.load(Ordering::Relaxed);
        d.policy_intercomm = policy::STATS.intercomm.load(Ordering::Relaxed);
        d.policy_unserved = policy::STATS.unserved.load(Ordering::Relaxed);
        d.policy_retired = policy::STATS.retired.load(Ordering::Relaxed);
        d.policy_twins = plain_twin::TWINS.load(Ordering::Relaxed);
        d.multiplex_on_streams = endpoints::STATS.on_streams.load(Ordering::Relaxed);
        d.multiplex_pooled = endpoints::STATS.pooled.load(Ordering::Relaxed);
        if let Some(p) = policy::guided::in_force(rt) {
            d.guided_selected = policy::guided::STATS.selected.load(Ordering::Relaxed);
            d.guided_unseen = policy::guided::STATS.unseen.load(Ordering::Relaxed);
            d.guided_unidentified = policy::guided::STATS.unidentified.load(Ordering::Relaxed);
            d.guided_nranks = p.nranks as c_int;
            copy_str(&mut d.guided_profile, &p.path);
        }
        copy_str(&mut d.library, &rt.library);
        copy_str(&mut d.backend_reason, &rt.backend_reason);
        if let Some((requested, why)) = rt.inert {
            copy_str(&mut d.policy_inert, &format!("{requested} requested; inert: {}", why.describe()));
        }
        0
    })
}

fn copy_str(dst: &mut [c_char], src: &str) {
    let n = src.len().min(dst.len() - 1);
    for (d, &b) in dst.iter_mut().zip(src.as_bytes()[..n].iter()) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// The stream whose reserved endpoint request (or matched message) `request` runs on, by the pool bits
/// of its handle (`StreamTable::of_request`), or -1 (none, or MPI not initialised through us): what
/// the completion calls claim.
#[no_mangle]
pub extern "C" fn mpixstream_request_stream(request: MPI_Request) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_request_stream", -1, || {
        runtime::active().and_then(|rt| rt.streams.of_request(request)).map_or(-1, |s| s as c_int)
    })
}

/// The stream index `comm` carries, or -1 (no stream, or MPI not initialised through us). A hidden
/// communicator of a multiplex communicator carries the stream of the local index this process
/// attached in it (`multiplex::registry::hidden_comm`).
#[no_mangle]
pub extern "C" fn mpixstream_comm_stream(comm: MPI_Comm) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_comm_stream", -1, || {
        let Some(rt) = runtime::active() else {
            return -1;
        };
        match rt.comms.get(comm) {
            Some(r) => r.stream.map_or(-1, |s| s as c_int),
            None => registry::hidden_comm(comm).and_then(|h| h.stream).map_or(-1, |s| s as c_int),
        }
    })
}

/// Whether the calls on `comm` note which of their requests are sends (`native_fixes::cancel`): 1 on a
/// policy stream of a program that names `MPI_Cancel`, 0 on any other stream, -1 without a stream.
#[no_mangle]
pub extern "C" fn mpixstream_comm_notes_sends(comm: MPI_Comm) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_comm_notes_sends", -1, || {
        let Some(rt) = runtime::active() else {
            return -1;
        };
        match rt.comms.get(comm).and_then(|r| r.stream) {
            Some(s) => rt.streams.slot(s).notes_sends.load(std::sync::atomic::Ordering::Acquire) as c_int,
            None => -1,
        }
    })
}

/// Who attached `comm`'s stream, as a `StreamOrigin` (0 none, 1 the application, 2 the explicit
/// policy, 3 a multiplex communicator's hidden communicator, with or without a stream).
#[no_mangle]
pub extern "C" fn mpixstream_comm_origin(comm: MPI_Comm) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_comm_origin", -1, || {
        let Some(rt) = runtime::active() else {
            return Origin::None as c_int;
        };
        match rt.comms.get(comm) {
            Some(r) if r.stream.is_some() => r.origin as c_int,
            Some(_) => Origin::None as c_int,
            None if registry::hidden_comm(comm).is_some() => Origin::Multiplex as c_int,
            None => Origin::None as c_int,
        }
    })
}

/// Where `comm` is a hidden communicator of a multiplex communicator, 1, with that communicator in
/// `*user` and the local index whose stream `comm` carries here in `*index` (-1: one on MPICH's
/// implicit pool, which carries any index); else 0. The tools library counts the indexed traffic of
/// one multiplex communicator per index, whichever hidden communicator carried it.
///
/// # Safety
/// `user` and `index` are each NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mpixstream_multiplex_of(comm: MPI_Comm, user: *mut MPI_Comm, index: *mut c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_multiplex_of", -1, || {
        let Some(h) = runtime::active().and_then(|_| registry::hidden_comm(comm)) else {
            return 0;
        };
        // SAFETY: `user` and `index` are the caller's output variables or NULL (C's convention for an
        // output it does not want), valid for one write each.
        unsafe {
            if let Some(user) = user.as_mut() {
                *user = h.user;
            }
            if let Some(index) = index.as_mut() {
                *index = h.index.map_or(-1, |i| i as c_int);
            }
        }
        1
    })
}

/// Where `comm` is the plain base of a policy communicator with a stream (it carries that
/// communicator's nonblocking collectives: `wrapped_collectives::schedule_comm`), that stream's index,
/// else -1: the one-thread check of the policy communicator covers its base too.
#[no_mangle]
pub extern "C" fn mpixstream_base_owner_stream(comm: MPI_Comm) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_base_owner_stream", -1, || {
        runtime::active().and_then(|rt| rt.comms.owner_of_base(comm)).map_or(-1, |c| mpixstream_comm_stream(c))
    })
}

/// The VCI stream `index`'s traffic runs on, where we know it, else -1.
#[no_mangle]
pub extern "C" fn mpixstream_stream_vci(index: c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_stream_vci", -1, || {
        let Some(rt) = runtime::active() else {
            return -1;
        };
        if index < 0 || index as usize >= rt.streams.capacity() {
            return -1;
        }
        rt.backend.stream_vci(rt.streams.slot(index as usize).native()).map_or(-1, |v| v as c_int)
    })
}

/// The standard ABI (handles are pointers, passed here pointer-wide): the stream index `comm` carries, or
/// -1, with who attached it in `*origin` (a `StreamOrigin` code: 1 the application, 2 the explicit
/// policy; 0 with -1).
///
/// # Safety
/// `origin` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mpixstream_std_comm_stream(comm: usize, origin: *mut c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_std_comm_stream", -1, || {
        let found =
            if mpixstream_wrappers::abi::standard() { crate::standard_abi::policy::comm_stream(comm) } else { None };
        // SAFETY: `origin` is the caller's output variable or NULL, valid for one write.
        if let Some(origin) = unsafe { origin.as_mut() } {
            *origin = found.map_or(Origin::None as c_int, |(_, o)| o);
        }
        found.map_or(-1, |(i, _)| i as c_int)
    })
}

/// The standard ABI: where `comm` is a hidden communicator of a multiplex communicator, 1, with that
/// communicator in `*user`, the local indices whose sends and receives it carries (-1: none on this
/// process) and their streams (-1: none); else 0.
///
/// # Safety
/// `user` and `indices` are each NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mpixstream_std_multiplex_of(comm: usize, user: *mut usize, indices: *mut [c_int; 4]) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_std_multiplex_of", -1, || {
        if !mpixstream_wrappers::abi::standard() {
            return 0;
        }
        let Some(h) = crate::standard_abi::multiplex::hidden_of(comm) else {
            return 0;
        };
        // SAFETY: `user` and `indices` are the caller's output variables or NULL, valid for one write each.
        unsafe {
            if let Some(user) = user.as_mut() {
                *user = h.user;
            }
            if let Some(indices) = indices.as_mut() {
                *indices = [h.send_index, h.recv_index, h.send_stream, h.recv_stream];
            }
        }
        1
    })
}

/// The node of `comm`'s identity (`policy::identity`: root, constructors, numbers of the calls), or -1
/// where it has none or identities are not kept. With [`mpixstream_identity_parent`] and
/// [`mpixstream_identity_step`] the tools library writes it as a path (`comm_identity::format`).
#[no_mangle]
pub extern "C" fn mpixstream_comm_identity(comm: MPI_Comm) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_comm_identity", -1, || {
        let Some(rt) = runtime::active() else { return -1 };
        if !policy::identity::on(rt) {
            return -1;
        }
        policy::identity::node_of(comm).map_or(-1, |n| n as c_int)
    })
}

/// How many identity nodes this process made (the roots `MPI_COMM_WORLD` 0 and `MPI_COMM_SELF` 1
/// included; the others in order of creation).
#[no_mangle]
pub extern "C" fn mpixstream_identity_count() -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_identity_count", 0, || {
        runtime::active().filter(|rt| policy::identity::on(rt)).map_or(0, |_| policy::identity::count() as c_int)
    })
}

/// The parent node of identity node `node`, or -1 (a root, or no such node).
#[no_mangle]
pub extern "C" fn mpixstream_identity_parent(node: c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("mpixstream_identity_parent", -1, || {
        let parts = u32::try_from(node).ok().and_then(policy::identity::parts);
        parts.and_then(|(parent, _)| parent).map_or(-1, |p| p as c_int)
    })
}

/// The step that made identity node `node`: its constructor's position in `CommCtor::ALL` times 2^32
/// plus the number of the call on its parent; -1 for `MPI_COMM_WORLD`, -2 for `MPI_COMM_SELF`, -3 for
/// no such node.
#[no_mangle]
pub extern "C" fn mpixstream_identity_step(node: c_int) -> i64 {
    mpixstream_wrappers::guard::guard_with("mpixstream_identity_step", -3, || {
        match u32::try_from(node).ok().and_then(policy::identity::parts) {
            None => -3,
            Some((_, Some(step))) => ((step.kind as i64) << 32) | step.seq as i64,
            Some((_, None)) if node == 1 => -2,
            Some((_, None)) => -1,
        }
    })
}
