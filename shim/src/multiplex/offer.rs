//! What each process brings to a new multiplex communicator, gathered in one allgather over the parent
//! at `MPIX_Stream_comm_create_multiplex`: its count (or the class of its argument error), whether it
//! attached `MPIX_STREAM_NULL`, how many hidden communicators it has alive and, on the split backend,
//! the dedicated endpoints it took ahead. A small collective between hosts costs milliseconds
//! (docs/cluster.md), and this one allgather stands for four: the counts' allgather, the layout's
//! reduction (`creation::agree_layout`) and the endpoint agreement's two reductions
//! (`split::agree_endpoints`). Those still run where the offers differ, and in the dup forms, which
//! have no allgather of their own.
use super::endpoints;
use crate::backend::Backend;
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, MpiResult};
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

/// Words per process in the allgather: count, conventional, live hidden communicators, endpoint mask
/// (low and high half).
const WORDS: usize = 5;

/// Endpoints this process took; given back when dropped, unless [`TakenAhead::keep`] took them over.
pub(super) struct TakenAhead {
    backend: Backend,
    handles: Vec<MPIX_Stream>,
}

impl TakenAhead {
    pub(super) fn none(backend: Backend) -> TakenAhead {
        TakenAhead { backend, handles: Vec::new() }
    }

    /// The endpoints, ascending, now the caller's to give back.
    pub(super) fn keep(mut self) -> Vec<MPIX_Stream> {
        std::mem::take(&mut self.handles)
    }

    pub(super) fn len(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for TakenAhead {
    fn drop(&mut self) {
        for &h in &self.handles {
            let _ = self.backend.free_stream(h);
        }
    }
}

/// What every process agreed on in the allgather, for the layout (`creation::agree_layout`).
pub(super) struct LayoutFacts {
    /// Some process attached `MPIX_STREAM_NULL` at an index.
    pub some_conventional: bool,
    /// The most hidden communicators alive on one process (`endpoints::over_process_bound`'s count).
    pub most_live_hidden: usize,
}

/// What `MPIX_Stream_comm_create_multiplex` agreed in its allgather, which the creation's own
/// agreements need not ask again (`creation::build`).
pub(super) struct Preagreed {
    pub layout: LayoutFacts,
    pub endpoints: TakenAhead,
}

/// The creation's facts agreed in one collective.
pub(super) struct Gathered {
    /// Each process's count, or `-1 - class` (standard class number) where its arguments were wrong.
    pub counts: Box<[c_int]>,
    /// The layout's facts, and the split backend's dedicated endpoints where every process took the
    /// same ones (else none: given back, and `creation` agrees on them over its base).
    pub pre: Preagreed,
}

/// Collective over `parent` (`size` processes): `mine` is this process's count or `-1 - class`;
/// `streams` its stream slots where its arguments are right.
pub(super) fn gather(
    rt: &Runtime,
    parent: Comm,
    size: usize,
    mine: c_int,
    streams: Option<&[Option<usize>]>,
) -> MpiResult<Gathered> {
    // The endpoints this process's own count needs: all processes take the same ones where their counts
    // and free endpoints are alike, the usual case.
    let need = if mine > 0 { endpoints::dedicated_cost(size, mine as usize) } else { 0 };
    let ahead = TakenAhead { backend: rt.backend, handles: rt.backend.take_endpoints_ahead(need) };
    let mask = rt.backend.endpoint_mask(&ahead.handles);
    let conventional = streams.is_some_and(|s| s.iter().any(|slot| slot.is_none()));
    let live = endpoints::STATS.live_hidden.load(Ordering::Relaxed).min(c_int::MAX as usize) as c_int;
    let offer: [c_int; WORDS] = [mine, conventional as c_int, live, mask as u32 as c_int, (mask >> 32) as u32 as c_int];
    let mut all = vec![0 as c_int; WORDS * size];
    parent.allgather(&offer, &mut all)?;
    let rows = || all.chunks(WORDS);
    let mask_of = |row: &[c_int]| row[3] as u32 as u64 | (row[4] as u32 as u64) << 32;
    let same_endpoints = mask != 0 && rows().all(|row| mask_of(row) == mask);
    Ok(Gathered {
        counts: rows().map(|row| row[0]).collect(),
        pre: Preagreed {
            layout: LayoutFacts {
                some_conventional: rows().any(|row| row[1] != 0),
                most_live_hidden: rows().map(|row| row[2].max(0) as usize).max().unwrap_or(0),
            },
            endpoints: if same_endpoints { ahead } else { TakenAhead::none(rt.backend) },
        },
    })
}
