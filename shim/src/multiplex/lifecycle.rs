//! Creation (`MPIX_Stream_comm_create_multiplex`), duplication (every dup form of a multiplex
//! communicator is multiplex with the same streams), free, and the queries
//! (`MPIX_Comm_get_stream`, `MPIX_Comm_multiplex_tag_ub`).
use super::creation::build;
use super::{registry, Multiplex};
use crate::comms::{CommRecord, Origin, Route};
use crate::errors::{raise, Class};
use crate::runtime::mpix_entry;
use crate::runtime::Runtime;
use crate::streams::{LookupError, StreamTable};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;

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
unsafe fn local_streams(
    rt: &Runtime,
    count: c_int,
    array: *const MPIX_Stream,
    newcomm: *mut MPI_Comm,
) -> Result<Box<[Option<usize>]>, (Class, String)> {
    if newcomm.is_null() {
        return Err((Class::Arg, "the newcomm argument is a null pointer".into()));
    }
    if count < 0 {
        return Err((Class::Count, format!("count {count} is negative")));
    }
    if count > 0 && array.is_null() {
        return Err((Class::Arg, format!("array_of_streams is a null pointer and count is {count}")));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let h = *array.add(i);
        match rt.streams.lookup(h) {
            Ok((slot, _)) => out.push(Some(slot)),
            Err(LookupError::Null) => out.push(None),
            Err(e) => return Err((Class::Stream, format!("array_of_streams[{i}]: {}", e.describe(h)))),
        }
    }
    Ok(out.into_boxed_slice())
}

#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_comm_create_multiplex(
    comm: WideHandle,
    count: c_int,
    array_of_streams: *mut MPIX_Stream,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // The standard ABI: pointer-wide handles, in the array and out (`crate::standard_abi`).
    if mpixstream_wrappers::abi::standard() {
        return crate::runtime::standard_entry("MPIX_Stream_comm_create_multiplex", || unsafe {
            crate::standard_abi::mpix::comm_create_multiplex(comm, count, array_of_streams.cast(), newcomm.cast())
        });
    }
    let comm = comm as MPI_Comm;
    mpix_entry("MPIX_Stream_comm_create_multiplex", |rt| unsafe {
        const F: &str = "MPIX_Stream_comm_create_multiplex";
        let p = pmpi();
        if comm == MPI_COMM_NULL {
            return raise(MPI_COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
        }
        let mut inter = 0;
        let rc = (p.PMPI_Comm_test_inter)(comm, &mut inter);
        if rc != MPI_SUCCESS {
            return rc;
        }
        if inter != 0 {
            return raise(
                comm,
                Class::Comm,
                F,
                "the parent is an intercommunicator; multiplex communicators need an intracommunicator",
            );
        }
        // Collectives over `comm` from here on: inside its stream's endpoint, where it has one.
        let _claim = crate::native_fixes::native_streams::native_stream_of(comm).map(|s| s.claim());
        let local = local_streams(rt, count, array_of_streams, newcomm);
        // Every process learns every count (and whether anyone's arguments were wrong, so that all
        // fail together instead of some waiting in a collective the others skipped).
        let mine: c_int = match &local {
            Ok(s) => s.len() as c_int,
            Err((class, _)) => -1 - class.standard(),
        };
        let (mut rank, mut size) = (0, 0);
        (p.PMPI_Comm_rank)(comm, &mut rank);
        (p.PMPI_Comm_size)(comm, &mut size);
        let mut counts = vec![0 as c_int; size as usize].into_boxed_slice();
        let rc = (p.PMPI_Allgather)(
            &mine as *const c_int as *const c_void,
            1,
            MPI_INT,
            counts.as_mut_ptr() as *mut c_void,
            1,
            MPI_INT,
            comm,
        );
        if rc != MPI_SUCCESS {
            return rc;
        }
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
        let mut ub: *mut c_int = std::ptr::null_mut();
        let mut flag = 0;
        (p.PMPI_Comm_get_attr)(comm, MPI_TAG_UB, &mut ub as *mut *mut c_int as *mut c_void, &mut flag);
        let tag_ub = if flag != 0 && !ub.is_null() { *ub } else { 32767 };
        let mut user = MPI_COMM_NULL;
        let rc = (p.PMPI_Comm_dup)(comm, &mut user);
        if rc != MPI_SUCCESS {
            return rc;
        }
        match build(rt, user, None, rank, counts, tag_ub, streams) {
            Ok(_) => {
                // MPICH copied the parent's stream (if it has one) into the dup: record it.
                attach_record(rt, comm, user);
                *newcomm = user;
                MPI_SUCCESS
            }
            Err(rc) => {
                (p.PMPI_Comm_free)(&mut user);
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
pub unsafe fn comm_constructed(
    rt: &'static Runtime,
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> Option<c_int> {
    let parent_handle = parent;
    match kind {
        CommCtor::Dup | CommCtor::DupWithInfo => {}
        CommCtor::Idup | CommCtor::IdupWithInfo => {
            let parent = registry::lookup(parent)?;
            let rc = super::idup::started(rt, parent, *newcomm, request?);
            attach_record(rt, parent_handle, *newcomm);
            return Some(rc);
        }
        _ => return None,
    }
    let parent = registry::lookup(parent)?;
    Some(match build(rt, *newcomm, None, parent.rank, parent.counts.clone(), parent.tag_ub, parent.streams.clone()) {
        Ok(_) => {
            attach_record(rt, parent_handle, *newcomm);
            MPI_SUCCESS
        }
        Err(rc) => {
            (pmpi().PMPI_Comm_free)(newcomm);
            rc
        }
    })
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
pub fn errhandler_set(mx: &Multiplex) {
    if !mx.freed.load(Ordering::Acquire) {
        mx.follow_user_errhandler();
    }
}

/// At the destruction of a multiplex communicator (its record's delete callback): its streams are
/// detached at once; its hidden communicators are freed as soon as no receive on it is pending, by the
/// work returned (which calls MPI, so it runs outside MPICH's callback: `crate::deferred`).
pub fn comm_freed(rt: &Runtime, handle: MPI_Comm, mx: &Multiplex) {
    if registry::unregister(rt, handle, mx) {
        mx.maybe_release();
    }
}

impl Multiplex {
    /// Frees the hidden communicators once the user has freed the communicator and no receive is
    /// pending. Called where a receive completes, which may be inside MPICH (a generalized request's
    /// poll in another thread's wait): the release, which calls MPI, is deferred to where the library
    /// is in control (`crate::deferred`).
    pub(super) fn maybe_release(&self) {
        if !self.freed.load(Ordering::Acquire) || self.pending.load(Ordering::Acquire) != 0 {
            return;
        }
        if self.release_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let held = registry::shared(self);
        crate::deferred::defer(move |_| held.release_now());
    }

    /// The release itself: messages nobody received taken out of MPICH (inside each index's endpoint;
    /// while another thread is inside one, the release is deferred again), the hidden communicators
    /// freed.
    fn release_now(&self) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        // Messages nobody received: take them out of MPICH so that nothing stays matched.
        if !self.engines.iter().all(|e| unsafe { e.drain_unexpected() }) {
            let held = registry::shared(self);
            crate::deferred::defer(move |_| held.release_now());
            return;
        }
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        unsafe {
            registry::forget_hidden(self);
            self.endpoints.free();
        }
        registry::released(self);
    }
}

/// `MPIX_Comm_get_stream` on a multiplex communicator.
pub unsafe fn get_stream(mx: &Multiplex, idx: c_int, stream: *mut MPIX_Stream) -> c_int {
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
    *stream = mx.streams[idx as usize].map_or(MPIX_STREAM_NULL, StreamTable::handle);
    MPI_SUCCESS
}

/// Ours: the largest tag an indexed call on multiplex communicator `comm` accepts.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Comm_multiplex_tag_ub(comm: WideHandle, tag_ub: *mut c_int) -> c_int {
    const F: &str = "MPIX_Comm_multiplex_tag_ub";
    if mpixstream_wrappers::abi::standard() {
        return crate::runtime::standard_entry(F, || unsafe { crate::standard_abi::multiplex::tag_ub(comm, tag_ub) });
    }
    let comm = comm as MPI_Comm;
    mpix_entry(F, |rt| unsafe {
        let Some(mx) = registry::lookup(comm) else {
            return super::errors::not_multiplex(rt, comm, F);
        };
        if tag_ub.is_null() {
            return raise(comm, Class::Arg, F, "the tag_ub argument is a null pointer");
        }
        *tag_ub = mx.max_tag;
        MPI_SUCCESS
    })
}
