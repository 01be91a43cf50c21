//! The plain **base** of each explicit-policy communicator (native backend), and what it serves: the
//! policy's `MPI_Comm_idup*` of the communicator, the windows, files and distributed graphs made on it
//! (`plain_twin.rs`), and on MPICH >= 4.3 its nonblocking and persistent collectives
//! (`wrapped_collectives::schedule_comm`).
//!
//! Every process keeps, beside each policy communicator, a plain communicator with its group and ranks
//! (made at its creation: the split, create or create_group result the stream communicator was made
//! from, or one more split for a dup; freed with it). MPICH gives a split no stream, so the base is on
//! the implicit pool, and every process has one, whether its pool had a stream for the communicator or
//! not: all members take the same path.
//!
//! Idups. MPICH's idup copies the parent's stream into the child (every idup of a stream communicator
//! is on the parent's reserved VCI). A program that gives the children of one communicator to
//! different threads, as MPICH's `threads/comm/idup_nb` does, then drives one unlocked VCI from several
//! threads at once: MPICH corrupts its state or hangs. The application never asked for a stream, and
//! attaching a new one is a blocking collective (which an idup must not become), so the policy leaves
//! the child on the implicit pool, as it documents for idups: the child is MPICH's idup of the base.
//! What MPICH's idup of the parent would copy, the child gets here too:
//! - the attributes: MPICH runs the copy callbacks at the idup call, into the new communicator; so do
//!   we, once per attribute, for every keyval the program made with `MPI_Comm_create_keyval` (recorded
//!   by its interposer), with the parent as `oldcomm`, and set the kept values on the child. Keyvals of
//!   other languages' bindings and of the removed MPI-1 `MPI_Keyval_create` are not recorded; their
//!   attributes are not copied (docs/policy.md);
//! - the error handler; info hints as MPICH gives them (an idup copies none of the parent's,
//!   `MPI_Comm_idup_with_info` applies its own).
//!
//! A parent with a topology (a policy dup of a Cartesian communicator) has a base with a copy of it
//! (`topology_copy`), which MPICH's idup of the base copies into the child; where that copy failed
//! (on every member alike) the parent keeps MPICH's idup, whose child shares its stream.
pub use crate::comms::Base;
use crate::native_fixes::plain_twin::{give_errhandler, plain_split};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// A keyval the program made with `MPI_Comm_create_keyval` (its copy callback and extra state).
#[derive(Clone, Copy)]
struct Keyval {
    keyval: c_int,
    copy: Option<MPI_Comm_copy_attr_function>,
    extra: usize,
}

/// The live keyvals, in the order the program made them.
static KEYVALS: Mutex<Vec<Keyval>> = Mutex::new(Vec::new());

/// `base`, made for a policy communicator, as its record keeps it (asked once: whether it carries a
/// topology).
pub fn base_of(base: MPI_Comm) -> Base {
    Base { comm: base, topology: unsafe { has_topology(base) } }
}

/// Makes the base of a policy dup of `parent` (collective over `parent`, as the dup is). A parent with a topology gives the base a copy of it (`topology_copy`), so that the
/// neighbourhood collectives run there too; where that copy fails (on every member alike: a
/// collective's outcome), the base has none and they stay on the stream.
pub unsafe fn split_base(parent: MPI_Comm) -> Option<Base> {
    let mut split = plain_split(parent).ok()?;
    let base = match topology_copy(parent, split) {
        Some(copy) => {
            (pmpi().PMPI_Comm_free)(&mut split);
            give_errhandler(parent, copy);
            copy
        }
        None => split,
    };
    Some(base_of(base))
}

/// `parent`'s topology on `split` (a plain split of it: the same ranks), made without reordering so
/// that ranks stay the same; `None` where `parent` has none or the copy failed. The graph of a
/// distributed graph is copied as its neighbour lists, with weights 1 where it has none (only
/// neighbourhood collectives run on the base, and they ignore weights).
unsafe fn topology_copy(parent: MPI_Comm, split: MPI_Comm) -> Option<MPI_Comm> {
    let p = pmpi();
    let ok = |rc: c_int| if rc == MPI_SUCCESS { Some(()) } else { None };
    let mut topology = MPI_UNDEFINED;
    ok((p.PMPI_Topo_test)(parent, &mut topology))?;
    let mut copy = MPI_COMM_NULL;
    match topology {
        MPI_CART => {
            let mut ndims = 0;
            ok((p.PMPI_Cartdim_get)(parent, &mut ndims))?;
            let n = ndims.max(1) as usize;
            let (mut dims, mut periods, mut coords) = (vec![0; n], vec![0; n], vec![0; n]);
            ok((p.PMPI_Cart_get)(parent, ndims, dims.as_mut_ptr(), periods.as_mut_ptr(), coords.as_mut_ptr()))?;
            ok((p.PMPI_Cart_create)(split, ndims, dims.as_ptr(), periods.as_ptr(), 0, &mut copy))?;
        }
        MPI_GRAPH => {
            let (mut nnodes, mut nedges) = (0, 0);
            ok((p.PMPI_Graphdims_get)(parent, &mut nnodes, &mut nedges))?;
            let mut index = vec![0; nnodes.max(1) as usize];
            let mut edges = vec![0; nedges.max(1) as usize];
            ok((p.PMPI_Graph_get)(parent, nnodes, nedges, index.as_mut_ptr(), edges.as_mut_ptr()))?;
            ok((p.PMPI_Graph_create)(split, nnodes, index.as_ptr(), edges.as_ptr(), 0, &mut copy))?;
        }
        MPI_DIST_GRAPH => {
            let (mut indegree, mut outdegree, mut weighted) = (0, 0, 0);
            ok((p.PMPI_Dist_graph_neighbors_count)(parent, &mut indegree, &mut outdegree, &mut weighted))?;
            let (ni, no) = (indegree.max(1) as usize, outdegree.max(1) as usize);
            let (mut sources, mut source_weights) = (vec![0; ni], vec![1; ni]);
            let (mut dests, mut dest_weights) = (vec![0; no], vec![1; no]);
            ok((p.PMPI_Dist_graph_neighbors)(
                parent,
                indegree,
                sources.as_mut_ptr(),
                source_weights.as_mut_ptr(),
                outdegree,
                dests.as_mut_ptr(),
                dest_weights.as_mut_ptr(),
            ))?;
            ok((p.PMPI_Dist_graph_create_adjacent)(
                split,
                indegree,
                sources.as_ptr(),
                source_weights.as_ptr(),
                outdegree,
                dests.as_ptr(),
                dest_weights.as_ptr(),
                MPI_INFO_NULL,
                0,
                &mut copy,
            ))?;
        }
        _ => return None,
    }
    (copy != MPI_COMM_NULL).then_some(copy)
}

/// Whether `comm` carries a topology.
pub unsafe fn has_topology(comm: MPI_Comm) -> bool {
    let mut topology = MPI_UNDEFINED;
    (pmpi().PMPI_Topo_test)(comm, &mut topology) == MPI_SUCCESS && topology != MPI_UNDEFINED
}

/// After the program's `MPI_Comm_create_keyval` succeeded.
pub fn keyval_created(keyval: c_int, copy: Option<MPI_Comm_copy_attr_function>, extra: *mut c_void) {
    let mut kvs = KEYVALS.lock().unwrap_or_else(|e| e.into_inner());
    kvs.retain(|k| k.keyval != keyval);
    kvs.push(Keyval { keyval, copy, extra: extra as usize });
}

/// Before the program's `MPI_Comm_free_keyval`.
pub fn keyval_freed(keyval: c_int) {
    KEYVALS.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| k.keyval != keyval);
}

/// The base of the policy communicator `comm` (with `comm`'s error handler: the one it had at the
/// base's creation, and each one set since, `errhandler_set`), or `None` (not a policy communicator on
/// the native backend).
fn current_base(comm: MPI_Comm) -> Option<Base> {
    crate::runtime::active()?.comms.base(comm)
}

/// After the program's `MPI_Comm_set_errhandler(comm, handler)` succeeded: the base of `comm`, if it
/// has one, gets the handler too, so that errors of what runs there reach the handler the program
/// set (once here, instead of a copy at every use of the base).
pub unsafe fn errhandler_set(comm: MPI_Comm, handler: MPI_Errhandler) {
    if let Some(base) = current_base(comm) {
        (pmpi().PMPI_Comm_set_errhandler)(base.comm, handler);
    }
}

/// The policy's `MPI_Comm_idup`/`MPI_Comm_idup_with_info` of its communicator `parent`
/// (`ctor_plan`: `IdupOfBase`: native backend, a parent whose base carries its topology, if it has
/// one, which MPICH's idup of the base copies into the child). `info`: `MPI_Comm_idup_with_info`'s.
pub unsafe fn idup(
    rt: &Runtime,
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: *mut MPI_Comm,
    info: Option<MPI_Info>,
    request: Option<*mut MPI_Request>,
) -> c_int {
    let p = pmpi();
    let (Some(request), false, Some(base)) =
        (request.filter(|r| !r.is_null()), newcomm.is_null(), rt.comms.base(parent))
    else {
        // A null argument: MPICH's own idup reports it.
        return match info {
            Some(info) => (p.PMPI_Comm_idup_with_info)(parent, info, newcomm, request.unwrap_or(std::ptr::null_mut())),
            None => (p.PMPI_Comm_idup)(parent, newcomm, request.unwrap_or(std::ptr::null_mut())),
        };
    };
    let base = base.comm;
    // The attribute copies, as MPICH's idup of the parent makes them: at the call, before anything is
    // started, so that a callback's error fails the call with nothing left behind.
    let keyvals = KEYVALS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut copies: Vec<(c_int, *mut c_void)> = Vec::new();
    for kv in keyvals {
        let Some(copy) = kv.copy else { continue }; // MPI_COMM_NULL_COPY_FN
        let (mut value, mut found) = (std::ptr::null_mut::<c_void>(), 0);
        let rc = (p.PMPI_Comm_get_attr)(parent, kv.keyval, &mut value as *mut *mut c_void as *mut c_void, &mut found);
        if rc != MPI_SUCCESS || found == 0 {
            continue;
        }
        let (mut out, mut keep) = (std::ptr::null_mut::<c_void>(), 0);
        let rc = copy(
            parent,
            kv.keyval,
            kv.extra as *mut c_void,
            value,
            &mut out as *mut *mut c_void as *mut c_void,
            &mut keep,
        );
        if rc != MPI_SUCCESS {
            // As MPICH's idup: the callback's error through the parent's error handler, no communicator.
            *newcomm = MPI_COMM_NULL;
            (p.PMPI_Comm_call_errhandler)(parent, rc);
            return rc;
        }
        if keep != 0 {
            copies.push((kv.keyval, out));
        }
    }
    // Info hints as MPICH's idup gives them: none copied from the parent, `MPI_Comm_idup_with_info`'s
    // applied.
    let rc = match info {
        Some(info) if matches!(kind, CommCtor::IdupWithInfo) => {
            (p.PMPI_Comm_idup_with_info)(base, info, newcomm, request)
        }
        _ => (p.PMPI_Comm_idup)(base, newcomm, request),
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    for (keyval, value) in copies {
        (p.PMPI_Comm_set_attr)(*newcomm, keyval, value);
    }
    MPI_SUCCESS
}
