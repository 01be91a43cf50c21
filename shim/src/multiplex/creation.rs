//! Making a multiplex communicator's hidden communicators and its record: the collective part that
//! every constructor shares (`MPIX_Stream_comm_create_multiplex`, every dup form, the nonblocking
//! dup's thread), on a base communicator of the user's group.
use super::endpoints::{self, Endpoints, Layout};
use super::offer::{LayoutFacts, Preagreed, TakenAhead};
use super::{progress, registry, Multiplex};
use crate::backend::Backend;
use crate::errors::{raise, Class};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Errhandler, MpiResult, Op, OwnedComm};
use std::os::raw::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What errors of the creation are reported as (every constructor of a multiplex communicator).
const F: &str = "multiplex communicator";

/// The communicator with `user`'s group and ranks on which the creation's collectives run and from
/// which the hidden communicators are made.
pub(super) enum Base {
    /// A split of `user`, freed after: a split never inherits a stream, so it is on the implicit pool
    /// on every backend, and it carries no attribute for a dup to copy.
    Split,
    /// One made already (the nonblocking dup's idup of its parent's plain communicator), freed after.
    Made(OwnedComm),
    /// `user` itself, on the split backend where `user` has no endpoint of its own: its dedicated
    /// endpoints' communicators are made with `MPI_Comm_create`, which copies none of `user`'s
    /// attributes, so the split's collective is saved (milliseconds between hosts, docs/cluster.md).
    /// Errors of the creation's own calls on it meet `user`'s handler, as they would in MPICH's.
    User,
}

/// Collective over `user` (the user's new communicator): the hidden communicators and the record, made
/// from `base`. `pre`: what every process agreed already (`None`: agreed here).
#[allow(clippy::too_many_arguments)]
pub(super) fn build(
    rt: &'static Runtime,
    user: MPI_Comm,
    base: Base,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
    pre: Option<Preagreed>,
) -> Result<Arc<Multiplex>, c_int> {
    let owned = match base {
        Base::Split => {
            let b = Comm(user).split(0, rank)?;
            let _ = b.set_errhandler(Errhandler::ERRORS_RETURN);
            Some(b)
        }
        Base::Made(b) => Some(b),
        Base::User => None,
    };
    let on = owned.as_ref().map_or(Comm(user), |b| **b);
    let built = build_on(rt, user, on, rank, counts, tag_ub, streams, pre);
    if let Some(b) = owned.filter(|b| b.raw() != MPI_COMM_NULL) {
        let _ = b.free();
    }
    built
}

/// The shape of a new multiplex communicator, the same on every process (from the agreed counts).
struct Shape {
    /// `N`: processes.
    size: usize,
    /// `S`: the largest count.
    width: usize,
    native: bool,
    /// The split backend's streams layout on dedicated endpoints. It has no pooled layout: its
    /// conventional endpoint may not be driven by two threads at once, which the pooled communicators
    /// would need.
    dedicated: bool,
    /// Hidden communicators the streams layout takes (`streams_layout_cost`).
    cost: usize,
}

impl Shape {
    fn of(rt: &Runtime, counts: &[c_int]) -> Shape {
        let size = counts.len();
        let width = counts.iter().copied().max().unwrap_or(0).max(0) as usize;
        Shape {
            size,
            width,
            native: rt.backend == Backend::Native,
            dedicated: rt.backend == Backend::Split && width > 0,
            cost: endpoints::streams_layout_cost(size, width),
        }
    }
}

/// The layout the processes agreed on, and what goes with it.
struct Agreed {
    layout: Layout,
    /// Streams layout where some process attached MPIX_STREAM_NULL: per rank, which indices have a
    /// stream (`Endpoints::set_conventional`).
    conventional: Option<Box<[u64]>>,
    /// Why the indexed traffic runs on MPICH's implicit pool, where it does on the native backend.
    pooled_because: Option<String>,
}

/// `build` once the base exists (`Comm::NULL` only where no process has an index): the layout agreed,
/// the hidden communicators made, the record registered.
#[allow(clippy::too_many_arguments)]
fn build_on(
    rt: &'static Runtime,
    user: MPI_Comm,
    base: Comm,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
    pre: Option<Preagreed>,
) -> Result<Arc<Multiplex>, c_int> {
    let shape = Shape::of(rt, &counts);
    let (facts, ahead) = match pre {
        Some(p) => (Some(p.layout), p.endpoints),
        None => (None, TakenAhead::none(rt.backend)),
    };
    let agreed = agree_layout(rt, user, base, rank, &shape, &streams, facts)?;
    // MPICH 4.1's route is a fact of the build, not of this communicator: said with the banner's
    // verbosity only (a program may make many multiplex communicators).
    let quiet = agreed.layout == Layout::Pooled && !pairs_across_vcis_work(rt) && !rt.config.verbose;
    if let (Some(why), 0, false) = (&agreed.pooled_because, rank, quiet) {
        mpixstream_wrappers::say!(
            "mpixstream: a multiplex communicator of {} processes and {} stream indices: {why}; its \
             indexed traffic runs on MPICH's implicit pool instead",
            shape.size,
            shape.width
        );
    }
    let mut endpoints = make_endpoints(rt, user, base, rank, &shape, agreed.layout, &streams, ahead)?;
    if let Some(real) = agreed.conventional {
        endpoints.set_conventional(real);
    }
    Ok(finish(rt, user, rank, counts, tag_ub, streams, endpoints))
}

/// The layout, from the backend and the shape, then (streams layout) agreed over `base`: the pooled
/// one after all where some process would pass its bound of live hidden communicators, and which
/// indices are conventional where some process attached MPIX_STREAM_NULL. `facts`: those two facts
/// as every process agreed them already (`offer::gather`; `None`: one reduction over `base` here).
fn agree_layout(
    rt: &Runtime,
    user: MPI_Comm,
    base: Comm,
    rank: c_int,
    shape: &Shape,
    streams: &[Option<usize>],
    facts: Option<LayoutFacts>,
) -> Result<Agreed, c_int> {
    let (size, width, cost) = (shape.size, shape.width, shape.cost);
    let layout = if shape.dedicated { Layout::Streams } else { endpoints::choose_layout(shape.native, size, width) };
    // Why this communicator's indexed traffic runs on MPICH's implicit pool, if it does on the native
    // backend (the same on every process: decided from agreed values and the MPICH every process runs).
    let pooled_because = (shape.native && layout == Layout::Pooled && width > 0).then(|| {
        format!(
            "it would need {cost} hidden communicators on the streams' endpoints (bound {})",
            endpoints::MAX_HIDDEN_COMMS
        )
    });
    let mut agreed = Agreed { layout, conventional: None, pooled_because };
    if layout == Layout::Streams && !shape.dedicated && !pairs_across_vcis_work(rt) {
        agreed.layout = Layout::Pooled;
        agreed.pooled_because = Some(
            "MPICH 4.1 mixes up messages between two different reserved VCIs over shared memory \
             (docs/native-defects.md, \"Messages between two reserved VCIs on MPICH 4.1\")"
                .to_string(),
        );
        return Ok(agreed);
    }
    if layout != Layout::Streams {
        return Ok(agreed);
    }
    // The streams layout only while no process would pass its bound of live hidden communicators.
    // Whether any process attached MPIX_STREAM_NULL: then every process learns which indices have a
    // stream (messages with an end on a conventional index take the implicit pool, `endpoints`).
    let (some_conventional, some_over_bound) = match facts {
        Some(f) => (f.some_conventional, endpoints::passes_process_bound(f.most_live_hidden, cost)),
        None => {
            let mine: [c_int; 2] =
                [streams.iter().any(|s| s.is_none()) as c_int, endpoints::over_process_bound(cost) as c_int];
            let mut any: [c_int; 2] = [0; 2];
            base.allreduce(&mine, &mut any, Op::MAX)?;
            (any[0] != 0, any[1] != 0)
        }
    };
    if shape.dedicated && some_conventional {
        return Err(raise(
            user,
            Class::Stream,
            F,
            "on the split backend every index of a multiplex communicator needs a stream: a process \
             attached MPIX_STREAM_NULL, and several threads may use a conventional index at once, which \
             Intel MPI's thread-split endpoints forbid",
        ));
    }
    if some_over_bound && !shape.dedicated {
        agreed.layout = Layout::Pooled;
        agreed.pooled_because = Some(format!(
            "its {cost} hidden communicators on the streams' endpoints would pass a process's bound of {} \
             alive at once (free multiplex communicators no longer used)",
            endpoints::MAX_HIDDEN_COMMS_PER_PROCESS
        ));
    } else if some_conventional {
        agreed.conventional = Some(gather_stream_masks(base, size, streams)?);
        if rank == 0 && rt.config.verbose {
            mpixstream_wrappers::say!(
                "mpixstream: a multiplex communicator with MPIX_STREAM_NULL entries: messages to or from \
                 those indices run on MPICH's implicit pool, every other pair on its streams' endpoints"
            );
        }
    }
    Ok(agreed)
}

/// Whether the loaded MPICH carries a message from one reserved VCI to a different one correctly, which
/// the streams layout's `C_{i,j,b}` need. MPICH 4.1 (4.1.3 measured) does not over shared memory: two
/// ranks' threads each on their own stream, exchanging messages on stream communicators whose members
/// attached different streams, get messages out of order, wrong statuses, MPICH assertions and
/// segmentation faults, without mpixstream (`tests/mpich_builds/stream_pairs.c`), and communicators
/// whose members all attached the same VCI less often; with the netmod alone (no shared memory), and on
/// 4.2.3 and 5.0.2, none. So on 4.1 every multiplex communicator takes the pooled layout (MPICH's locked
/// implicit pool, where the same program is correct).
pub(super) fn pairs_across_vcis_work(rt: &Runtime) -> bool {
    !matches!(rt.mpich_version, Some((4, 1, _)))
}

/// Collective over `base`: per rank, a 64-bit mask of the indices that have a stream. An index from 64
/// up (the streams layout allows that many only on one process) counts as conventional, which routes
/// it correctly on the implicit pool.
fn gather_stream_masks(base: Comm, size: usize, streams: &[Option<usize>]) -> MpiResult<Box<[u64]>> {
    let bits: u64 = streams.iter().enumerate().filter(|(i, s)| *i < 64 && s.is_some()).fold(0, |m, (i, _)| m | 1 << i);
    let mine: [c_int; 2] = [bits as u32 as c_int, (bits >> 32) as u32 as c_int];
    let mut all = vec![0 as c_int; 2 * size];
    base.allgather(&mine, &mut all)?;
    Ok(all.chunks(2).map(|w| w[0] as u32 as u64 | (w[1] as u32 as u64) << 32).collect())
}

/// Collective over `base`: the hidden communicators of `layout` (`Endpoints::build`), on the streams'
/// endpoints or on dedicated ones (`shape.dedicated`: those of `ahead` where every process took the
/// ones needed, else agreed here).
#[allow(clippy::too_many_arguments)]
fn make_endpoints(
    rt: &'static Runtime,
    user: MPI_Comm,
    base: Comm,
    rank: c_int,
    shape: &Shape,
    layout: Layout,
    streams: &[Option<usize>],
    ahead: TakenAhead,
) -> Result<Endpoints, c_int> {
    let attach = |i: usize| -> MPIX_Stream {
        match streams.get(i).copied().flatten() {
            Some(slot) => rt.streams.slot(slot).native(),
            None => MPIX_STREAM_NULL,
        }
    };
    let stream_comm = |parent: MPI_Comm, s: MPIX_Stream| -> MpiResult<OwnedComm> {
        rt.backend.stream_comm(Comm(parent), mpixstream_wrappers::mpi::Stream(s))
    };
    // Every dedicated endpoint agreed at once (the same count, so the same outcome, on every member);
    // where that fails, each is agreed on its own below (and fails there, with its error).
    let agreed = std::cell::RefCell::new(if shape.dedicated {
        let need = endpoints::dedicated_cost(shape.size, shape.width);
        // Taken alike on every process: all of them keep them, or (another count) all give them back.
        if ahead.len() == need {
            ahead.keep()
        } else {
            drop(ahead);
            rt.backend.agree_endpoints(base.raw(), need).unwrap_or_default()
        }
    } else {
        Vec::new()
    });
    let make_dedicated = |base: MPI_Comm| {
        let next = agreed.borrow_mut().pop();
        dedicated_endpoint(rt, user, Comm(base), shape, next)
    };
    let built = Endpoints::build(
        layout,
        base.raw(),
        rank,
        shape.size,
        shape.width,
        &attach,
        &stream_comm,
        shape.dedicated.then_some(&make_dedicated as endpoints::MakeDedicated),
    );
    // Endpoints agreed and not used (a build that failed part way): back to the pool.
    for h in agreed.into_inner() {
        let _ = Backend::Split.free_stream(h);
    }
    built
}

/// Collective over `base` (split backend): a dup of it on an endpoint of its own, agreed by every
/// member (`agreed`, else here), with that endpoint (`endpoints::MakeDedicated`).
fn dedicated_endpoint(
    rt: &Runtime,
    user: MPI_Comm,
    base: Comm,
    shape: &Shape,
    agreed: Option<MPIX_Stream>,
) -> Result<(OwnedComm, MPIX_Stream), c_int> {
    let Some(endpoint) = agreed.or_else(|| rt.backend.agree_endpoint(base.raw(), true)) else {
        let need = endpoints::dedicated_cost(shape.size, shape.width);
        return Err(raise(
            user,
            Class::Stream,
            F,
            &format!(
                "a multiplex communicator of {} processes and {} stream indices takes {need} \
                 thread-split endpoints free on every process, and fewer are (MPIXSTREAM_STREAMS sets the \
                 pool: {} endpoints, the program's streams and communicators included)",
                shape.size, shape.width, rt.config.streams
            ),
        ));
    };
    let made = base.create_from_own_group().and_then(|comm| {
        // Its errors come back here (MPI_Comm_create may give it the user's handler).
        let _ = comm.set_errhandler(Errhandler::ERRORS_RETURN);
        // Before anything else uses it (`Backend::put_on_endpoint`).
        let rc = rt.backend.put_on_endpoint(comm.raw(), endpoint);
        if rc != MPI_SUCCESS {
            let _ = comm.free();
            return Err(rc);
        }
        Ok(comm)
    });
    match made {
        Ok(comm) => Ok((comm, endpoint)),
        Err(rc) => {
            let _ = rt.backend.free_stream(endpoint);
            Err(rc)
        }
    }
}

/// The record of the user's communicator `user` once its hidden communicators exist: registered, and
/// the progress thread started where it has work.
pub(super) fn finish(
    rt: &'static Runtime,
    user: MPI_Comm,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
    endpoints: Endpoints,
) -> Arc<Multiplex> {
    let layout = endpoints.layout;
    let counter = if layout == Layout::Streams { &endpoints::STATS.on_streams } else { &endpoints::STATS.pooled };
    counter.fetch_add(1, Ordering::Relaxed);
    // The streams' reserved endpoints (native backend): their native streams are not NULL.
    let reserved: Vec<Option<&'static crate::streams::StreamSlot>> = (0..streams.len())
        .map(|i| streams[i].map(|slot| rt.streams.slot(slot)).filter(|s| s.native() != MPIX_STREAM_NULL))
        .collect();
    // The split backend's dedicated endpoints: the helper thread turns each while the index that drives
    // it is away (its sends' last bytes may still sit in libfabric's queue), holding that index's claim.
    for (h, i) in endpoints.dedicated_owners() {
        rt.backend.set_endpoint_owner(h, streams.get(i).copied().flatten());
    }
    let mx = Multiplex::new(user, rank, counts, tag_ub, streams, endpoints, &|j| reserved[j]);
    // Built under MPI_ERRORS_RETURN (a failed creation is reported by us, on every rank); from here on
    // the same handler as every later MPI_Comm_set_errhandler gives them.
    mx.follow_user_errhandler();
    let mx = registry::register(rt, mx);
    // The progress thread turns only engines on the implicit pool: a communicator whose every index
    // is on its stream's reserved VCI gives it nothing to do, and its 1 ms wake-ups would only take
    // the cores from the streams' threads.
    if mx.engines.iter().any(|e| !e.on_reserved_vci) {
        progress::ensure_started(rt);
    }
    mx
}
