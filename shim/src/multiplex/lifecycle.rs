//! Creation (`MPIX_Stream_comm_create_multiplex`), duplication (every dup form of a multiplex
//! communicator is multiplex with the same streams), free, and the queries
//! (`MPIX_Comm_get_stream`, `MPIX_Comm_multiplex_tag_ub`).
use super::creation::{build, Base};
use super::offer;
use super::{registry, Multiplex};
use crate::backend::Backend;
use crate::comms::{CommRecord, Origin, Route};
use crate::errors::{raise, Class};
use crate::runtime::mpix_entry;
use crate::runtime::Runtime;
use crate::streams::{LookupError, StreamTable};
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::{Comm, OwnedComm};
use std::ops::Deref;
use std::os::raw::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Standard class number -> our class (for agreeing on an error at creation).
fn class_of(standard: c_int) -> Class {
    match standard {
        MPI_ERR_ARG => Class::Arg,
        MPI_ERR_COUNT => Class::Count,
        MPIX_ERR_STREAM => Class::Stream,
        MPI_ERR_COMM => Class::Comm,
        _ => Class::Other,
    }
}

/// The local arguments of `MPIX_Stream_comm_create_multiplex`: the stream slots, or the error.
/// `array`: the application's `count` stream handles, `None` where its pointer is NULL.
fn local_streams(
    rt: &Runtime,
    count: c_int,
    array: Option<&[MPIX_Stream]>,
    newcomm_is_null: bool,
) -> Result<Box<[Option<usize>]>, (Class, String)> {
    if newcomm_is_null {
        return Err((Class::Arg, "the newcomm argument is a null pointer".into()));
    }
    if count < 0 {
        return Err((Class::Count, format!("count {count} is negative")));
    }
    let handles = match array {
        Some(handles) => handles,
        None if count > 0 => {
            return Err((Class::Arg, format!("array_of_streams is a null pointer and count is {count}")))
        }
        None => &[],
    };
    let mut out = Vec::with_capacity(count as usize);
    for (i, &h) in handles.iter().enumerate() {
        match rt.streams.lookup(h) {
            Ok((slot, _)) => out.push(Some(slot)),
            Err(LookupError::Null) => out.push(None),
            Err(e) => return Err((Class::Stream, format!("array_of_streams[{i}]: {}", e.describe(h)))),
        }
    }
    Ok(out.into_boxed_slice())
}

/// Ours, as MPICH's would be: a multiplex stream communicator over `comm` with `count` streams.
///
/// # Safety
/// C arguments as MPI requires them: `array_of_streams` holds `count` handles (or is NULL for 0),
/// `newcomm` is writable (checked for NULL).
#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_comm_create_multiplex(
    comm: WideHandle,
    count: c_int,
    array_of_streams: *mut MPIX_Stream,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // The standard ABI: pointer-wide handles, in the array and out (`crate::standard_abi`).
    if mpixstream_wrappers::abi::standard() {
        // SAFETY: the application's arguments, passed on unchanged to the standard ABI's implementation,
        // whose contract is this entry point's.
        return crate::runtime::standard_entry("MPIX_Stream_comm_create_multiplex", || unsafe {
            let scope = mpixstream_wrappers::app::CallScope::new();
            crate::standard_abi::mpix::comm_create_multiplex(
                comm,
                count,
                mpixstream_wrappers::app::AppInArray::new(&scope, array_of_streams.cast(), count as i64),
                AppArg::new(&scope, newcomm.cast()),
            )
        });
    }
    let comm = comm as MPI_Comm;
    mpix_entry("MPIX_Stream_comm_create_multiplex", |rt| {
        const F: &str = "MPIX_Stream_comm_create_multiplex";
        if comm == MPI_COMM_NULL {
            return raise(MPI_COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
        }
        let parent = Comm(comm);
        let inter = match parent.is_inter() {
            Ok(inter) => inter,
            Err(rc) => return rc,
        };
        if inter {
            return raise(
                comm,
                Class::Comm,
                F,
                "the parent is an intercommunicator; multiplex communicators need an intracommunicator",
            );
        }
        // Collectives over `comm` from here on: inside its stream's endpoint, where it has one.
        let _claim = crate::native_fixes::native_streams::native_stream_of(comm).map(|s| s.claim());
        let array = (count > 0 && !array_of_streams.is_null()).then(|| {
            // SAFETY: the application's array of `count` stream handles (not NULL), as MPI requires it;
            // read only during this call.
            unsafe { std::slice::from_raw_parts(array_of_streams.cast_const(), count as usize) }
        });
        let local = local_streams(rt, count, array, newcomm.is_null());
        // Every process learns every count (and whether anyone's arguments were wrong, so that all
        // fail together instead of some waiting in a collective the others skipped), with what the
        // creation agrees on next (`offer`).
        let mine: c_int = match &local {
            Ok(s) => s.len() as c_int,
            Err((class, _)) => -1 - class.standard(),
        };
        let rank = parent.rank().unwrap_or(0);
        let size = parent.size().unwrap_or(0).max(0) as usize;
        let gathered = match offer::gather(rt, parent, size, mine, local.as_ref().ok().map(|s| &s[..])) {
            Ok(g) => g,
            Err(rc) => return rc,
        };
        let offer::Gathered { counts, pre } = gathered;
        let streams = match local {
            Err((class, msg)) => return raise(comm, class, F, &msg),
            Ok(s) => s,
        };
        if let Some(r) = counts.iter().position(|&c| c < 0) {
            return raise(
                comm,
                class_of(-1 - counts[r]),
                F,
                &format!("rank {r} passed invalid arguments (see its error); no communicator was created"),
            );
        }
        let tag_ub = parent.tag_ub().ok().flatten().unwrap_or(32767);
        let user = match parent.dup() {
            Ok(user) => user,
            Err(rc) => return rc,
        };
        // On the split backend the hidden communicators come from `user` itself where MPICH gave it no
        // endpoint (the parent has none), one collective less (`Base::User`).
        let parent_has_stream = rt.comms.get(comm).is_some_and(|r| r.stream.is_some());
        let base = if rt.backend == Backend::Split && !parent_has_stream { Base::User } else { Base::Split };
        match build(rt, user.raw(), base, rank, counts, tag_ub, streams, Some(pre)) {
            Ok(_) => {
                // MPICH copied the parent's stream (if it has one) into the dup: record it.
                attach_record(rt, comm, user.raw());
                // SAFETY: `newcomm` is not NULL (`local_streams` checked) and is the application's
                // output argument, writable during its call; the communicator is the application's now.
                unsafe { *newcomm = user.into_raw() };
                MPI_SUCCESS
            }
            Err(rc) => {
                let _ = user.free();
                rc
            }
        }
    })
}

/// After a communicator constructor made `*newcomm` from `parent`: every dup of a multiplex
/// communicator is multiplex too, with the same streams and indices and its own hidden communicators.
/// A blocking dup (`MPI_Comm_dup`/`MPI_Comm_dup_with_info`) makes them here (collective, like the dup
/// itself); a nonblocking one (`request`: `MPI_Comm_idup*`) by the time its request completes
/// (`idup`). `None`: `parent` is not multiplex or the constructor does not make a multiplex child.
/// `newcomm` (and `request`, where given): the constructor's output arguments, which MPICH's constructor
/// that just succeeded wrote.
pub fn comm_constructed(
    rt: &'static Runtime,
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: AppArg<MPI_Comm>,
    request: Option<AppArg<MPI_Request>>,
) -> Option<c_int> {
    let parent_handle = parent;
    let child = newcomm.get()?;
    match kind {
        CommCtor::Dup | CommCtor::DupWithInfo => {}
        CommCtor::Idup | CommCtor::IdupWithInfo => {
            let parent = registry::lookup(parent)?;
            let request = request?;
            let mut handle = request.get()?;
            let rc = super::idup::started(rt, &parent, child, &mut handle);
            request.set(handle);
            attach_record(rt, parent_handle, child);
            return Some(rc);
        }
        _ => return None,
    }
    let parent = registry::lookup(parent)?;
    Some(
        match build(
            rt,
            child,
            Base::Split,
            parent.rank,
            parent.counts.clone(),
            parent.tag_ub,
            parent.streams.clone(),
            None,
        ) {
            Ok(_) => {
                attach_record(rt, parent_handle, child);
                MPI_SUCCESS
            }
            Err(rc) => {
                // As `PMPI_Comm_free(newcomm)`: the application's handle becomes MPI_COMM_NULL once freed.
                // SAFETY: `child` is what MPICH's constructor made in this very call, which has not returned
                // to the program: nobody else holds it to free it.
                let child = unsafe { OwnedComm::from_raw(child) };
                if child.free().is_ok() {
                    newcomm.set(MPI_COMM_NULL);
                }
                rc
            }
        },
    )
}

/// The record of the user's multiplex communicator `child`, a dup of `parent` (MPICH's
/// `PMPI_Comm_dup`): its delete callback frees the multiplex record on every destruction path of
/// `child` (`interposed::record_deleted`). MPICH gives `child` `parent`'s stream where `parent` is a
/// stream communicator: the record carries it like any dup's, so that the stream cannot be freed while
/// `child` uses it, the routes around native defects drive it and the tools library sees it.
fn attach_record(rt: &Runtime, parent: MPI_Comm, child: MPI_Comm) {
    // The parent's origin and this member's stream, or none: the same class on every member.
    let record = match rt.comms.get(parent) {
        Some(r) => CommRecord { stream: r.stream, origin: r.origin, base: None, collectives: Route::Comm },
        None => CommRecord { stream: None, origin: Origin::None, base: None, collectives: Route::Comm },
    };
    rt.attach_record(child, record);
}

/// After `MPI_Comm_set_errhandler` on multiplex communicator `mx`: its hidden communicators follow
/// (`Multiplex::follow_user_errhandler`).
/// (`mx`: a counted reference or a borrowed one.)
pub fn errhandler_set(mx: impl Deref<Target = Multiplex>) {
    if !mx.freed.load(Ordering::Acquire) {
        mx.follow_user_errhandler();
    }
}

/// At the destruction of a multiplex communicator (its record's delete callback): its streams are
/// detached at once; its hidden communicators are freed as soon as no receive on it is pending, by the
/// work returned (which calls MPI, so it runs outside MPICH's callback: `crate::deferred`).
pub fn comm_freed(rt: &Runtime, handle: MPI_Comm, mx: Arc<Multiplex>) {
    if registry::unregister(rt, handle, &mx) {
        mx.maybe_release();
    }
}

impl Multiplex {
    /// Frees the hidden communicators once the user has freed the communicator and no receive is
    /// pending. Called where a receive completes, which may be inside MPICH (a generalized request's
    /// poll in another thread's wait): the release, which calls MPI, is deferred to where the library
    /// is in control (`crate::deferred`).
    pub(super) fn maybe_release(self: &Arc<Self>) {
        if !self.freed.load(Ordering::Acquire) || self.pending.load(Ordering::Acquire) != 0 {
            return;
        }
        if self.release_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let held = self.clone();
        crate::deferred::defer(move |_| held.release_now());
    }

    /// The release itself: messages nobody received taken out of MPICH (inside each index's endpoint;
    /// while another thread is inside one, the release is deferred again), the hidden communicators
    /// freed.
    fn release_now(self: &Arc<Self>) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        // Messages nobody received: take them out of MPICH so that nothing stays matched.
        if !self.engines.iter().all(|e| e.drain_unexpected()) {
            let held = self.clone();
            crate::deferred::defer(move |_| held.release_now());
            return;
        }
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        registry::forget_hidden(self);
        self.endpoints.free();
        registry::released(self);
    }
}

/// `MPIX_Comm_get_stream` on a multiplex communicator (`mx`: a counted reference or a borrowed one;
/// `stream`: the application's output argument).
pub fn get_stream(mx: impl Deref<Target = Multiplex>, idx: c_int, stream: AppArg<MPIX_Stream>) -> c_int {
    const F: &str = "MPIX_Comm_get_stream";
    let n = mx.streams.len();
    if idx < 0 || idx as usize >= n {
        return raise(
            mx.comm,
            Class::Arg,
            F,
            &format!("index {idx} is out of range: this process attached {n} stream(s) to the multiplex communicator"),
        );
    }
    let handle = mx.streams[idx as usize].map_or(MPIX_STREAM_NULL, StreamTable::handle);
    stream.set(handle);
    MPI_SUCCESS
}

/// Ours: the largest tag an indexed call on multiplex communicator `comm` accepts.
///
/// # Safety
/// `tag_ub` is NULL (an error) or writable.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Comm_multiplex_tag_ub(comm: WideHandle, tag_ub: *mut c_int) -> c_int {
    const F: &str = "MPIX_Comm_multiplex_tag_ub";
    if mpixstream_wrappers::abi::standard() {
        // SAFETY: the application's argument, passed on unchanged (the standard ABI's implementation).
        return crate::runtime::standard_entry(F, || unsafe {
            let scope = mpixstream_wrappers::app::CallScope::new();
            crate::standard_abi::multiplex::tag_ub(comm, AppArg::new(&scope, tag_ub))
        });
    }
    let comm = comm as MPI_Comm;
    mpix_entry(F, |rt| {
        let Some(mx) = registry::lookup(comm) else {
            return super::errors::not_multiplex(rt, comm, F);
        };
        if tag_ub.is_null() {
            return raise(comm, Class::Arg, F, "the tag_ub argument is a null pointer");
        }
        // SAFETY: `tag_ub` is the application's output argument, not NULL (checked above).
        unsafe { *tag_ub = mx.max_tag };
        MPI_SUCCESS
    })
}
