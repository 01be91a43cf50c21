//! Making a multiplex communicator's hidden communicators and its record: the collective part that
//! every constructor shares (`MPIX_Stream_comm_create_multiplex`, every dup form, the nonblocking
//! dup's thread), on a base communicator of the user's group.
use super::endpoints::{self, Endpoints, Layout};
use super::{progress, registry, Multiplex};
use crate::backend::Backend;
use crate::errors::{raise, Class};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What errors of the creation are reported as (every constructor of a multiplex communicator).
const F: &str = "multiplex communicator";

/// Collective over `user` (the user's new communicator): the hidden communicators and the record.
/// `base`: a plain communicator with `user`'s group and ranks on which the creation's collectives run
/// and from which the hidden communicators are made (freed here); `None`: a split of `user`.
pub(super) unsafe fn build(
    rt: &'static Runtime,
    user: MPI_Comm,
    base: Option<MPI_Comm>,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
) -> Result<Arc<Multiplex>, c_int> {
    let p = pmpi();
    let mut base = match base {
        Some(b) => b,
        None => {
            // A split never inherits a stream: the base is on the implicit pool on every backend.
            let mut b = MPI_COMM_NULL;
            let rc = (p.PMPI_Comm_split)(user, 0, rank, &mut b);
            if rc != MPI_SUCCESS {
                return Err(rc);
            }
            (p.PMPI_Comm_set_errhandler)(b, MPI_ERRORS_RETURN);
            b
        }
    };
    let built = build_on(rt, user, base, rank, counts, tag_ub, streams);
    if base != MPI_COMM_NULL {
        (p.PMPI_Comm_free)(&mut base);
    }
    built
}

/// `build` once the base exists (`MPI_COMM_NULL` only where no process has an index).
unsafe fn build_on(
    rt: &'static Runtime,
    user: MPI_Comm,
    base: MPI_Comm,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
) -> Result<Arc<Multiplex>, c_int> {
    let p = pmpi();
    let size = counts.len();
    let width = counts.iter().copied().max().unwrap_or(0).max(0) as usize;
    let native = rt.backend == Backend::Native;
    // The split backend has no pooled layout: its conventional endpoint may not be driven by two
    // threads at once, which the pooled communicators would need.
    let dedicated = rt.backend == Backend::Split && width > 0;
    let mut layout = if dedicated { Layout::Streams } else { endpoints::choose_layout(native, size, width) };
    let cost = endpoints::streams_layout_cost(size, width);
    // Why this communicator's indexed traffic runs on MPICH's implicit pool, if it does on the native
    // backend (the same on every process: decided from agreed values).
    let mut pooled_because = (native && layout == Layout::Pooled && width > 0).then(|| {
        format!(
            "it would need {cost} hidden communicators on the streams' endpoints (bound {})",
            endpoints::MAX_HIDDEN_COMMS
        )
    });
    // Where some process attached MPIX_STREAM_NULL: per rank, which indices have a stream.
    let mut conventional: Option<Box<[u64]>> = None;
    if layout == Layout::Streams {
        // The streams layout only while no process would pass its bound of live hidden communicators.
        // Whether any process attached MPIX_STREAM_NULL: then every process learns which indices have
        // a stream (messages with an end on a conventional index take the implicit pool, `endpoints`).
        let mine: [c_int; 2] =
            [streams.iter().any(|s| s.is_none()) as c_int, endpoints::over_process_bound(cost) as c_int];
        let mut any: [c_int; 2] = [0; 2];
        let rc = (p.PMPI_Allreduce)(
            mine.as_ptr() as *const c_void,
            any.as_mut_ptr() as *mut c_void,
            2,
            MPI_INT,
            MPI_MAX,
            base,
        );
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        if dedicated && any[0] != 0 {
            return Err(raise(
                user,
                Class::Stream,
                F,
                "on the split backend every index of a multiplex communicator needs a stream: a process \
                 attached MPIX_STREAM_NULL, and several threads may use a conventional index at once, which \
                 Intel MPI's thread-split endpoints forbid",
            ));
        }
        if any[1] != 0 && !dedicated {
            layout = Layout::Pooled;
            pooled_because = Some(format!(
                "its {cost} hidden communicators on the streams' endpoints would pass a process's bound of {} \
                 alive at once (free multiplex communicators no longer used)",
                endpoints::MAX_HIDDEN_COMMS_PER_PROCESS
            ));
        } else if any[0] != 0 {
            // A 64-bit mask per process; an index from 64 up (the streams layout allows that many only on
            // one process) counts as conventional, which routes it correctly on the implicit pool.
            let bits: u64 =
                streams.iter().enumerate().filter(|(i, s)| *i < 64 && s.is_some()).fold(0, |m, (i, _)| m | 1 << i);
            let mine: [c_int; 2] = [bits as u32 as c_int, (bits >> 32) as u32 as c_int];
            let mut all = vec![0 as c_int; 2 * size];
            let rc = (p.PMPI_Allgather)(
                mine.as_ptr() as *const c_void,
                2,
                MPI_INT,
                all.as_mut_ptr() as *mut c_void,
                2,
                MPI_INT,
                base,
            );
            if rc != MPI_SUCCESS {
                return Err(rc);
            }
            conventional = Some(all.chunks(2).map(|w| w[0] as u32 as u64 | (w[1] as u32 as u64) << 32).collect());
            if rank == 0 && rt.config.verbose {
                eprintln!(
                    "mpixstream: a multiplex communicator with MPIX_STREAM_NULL entries: messages to or from \
                     those indices run on MPICH's implicit pool, every other pair on its streams' endpoints"
                );
            }
        }
    }
    if let (Some(why), 0) = (&pooled_because, rank) {
        eprintln!(
            "mpixstream: a multiplex communicator of {size} processes and {width} stream indices: {why}; its \
             indexed traffic runs on MPICH's implicit pool instead"
        );
    }
    let attach = |i: usize| -> MPIX_Stream {
        match streams.get(i).copied().flatten() {
            Some(slot) => rt.streams.slot(slot).native(),
            None => MPIX_STREAM_NULL,
        }
    };
    let stream_comm =
        |parent: MPI_Comm, s: MPIX_Stream, out: *mut MPI_Comm| rt.backend.stream_comm_create(parent, s, out);
    let need = endpoints::dedicated_cost(size, width);
    let make_dedicated = |base: MPI_Comm| -> Result<(MPI_Comm, MPIX_Stream), c_int> {
        let Some(endpoint) = rt.backend.agree_endpoint(base, true) else {
            return Err(raise(
                user,
                Class::Stream,
                F,
                &format!(
                    "a multiplex communicator of {size} processes and {width} stream indices takes {need} \
                     thread-split endpoints free on every process, and fewer are (MPIXSTREAM_STREAMS sets the \
                     pool: {} endpoints, the program's streams and communicators included)",
                    rt.config.streams
                ),
            ));
        };
        let mut comm = MPI_COMM_NULL;
        let mut rc = (p.PMPI_Comm_dup)(base, &mut comm);
        if rc == MPI_SUCCESS {
            // Before anything else uses it (`Backend::put_on_endpoint`).
            rc = rt.backend.put_on_endpoint(comm, endpoint);
            if rc != MPI_SUCCESS {
                (p.PMPI_Comm_free)(&mut comm);
            }
        }
        if rc != MPI_SUCCESS {
            let _ = rt.backend.free_stream(endpoint);
            return Err(rc);
        }
        Ok((comm, endpoint))
    };
    let mut endpoints = Endpoints::build(
        layout,
        base,
        rank,
        size,
        width,
        &attach,
        &stream_comm,
        dedicated.then_some(&make_dedicated as endpoints::MakeDedicated),
    )?;
    if let Some(real) = conventional {
        endpoints.set_conventional(real);
    }
    Ok(finish(rt, user, rank, counts, tag_ub, streams, endpoints))
}

/// The record of the user's communicator `user` once its hidden communicators exist: registered, and
/// the progress thread started where it has work.
pub(super) unsafe fn finish(
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
