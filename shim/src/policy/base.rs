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
pub use crate::comms::{Base, OwnedBase};
use crate::native_fixes::plain_twin::{give_errhandler, plain_split};
use crate::runtime::Runtime;
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::{Comm, Errhandler, Info, MpiResult, Opaque, OwnedComm};
use mpixstream_wrappers::pmpi::Pmpi;
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
pub fn base_of(base: OwnedComm) -> OwnedBase {
    let topology = has_topology(base.raw());
    OwnedBase::new(base, topology)
}

/// Makes the base of a policy dup of `parent` (collective over `parent`, as the dup is). A parent with
/// a topology gives the base a copy of it (`topology_copy`), so that the neighbourhood collectives run
/// there too; where that copy fails (on every member alike: a collective's outcome), the base has none
/// and they stay on the stream.
pub fn split_base(parent: MPI_Comm) -> Option<OwnedBase> {
    let split = plain_split(parent).ok()?;
    let base = match topology_copy(Comm(parent), *split) {
        Some(copy) => {
            let _ = split.free();
            give_errhandler(parent, copy.raw());
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
fn topology_copy(parent: Comm, split: Comm) -> Option<OwnedComm> {
    let copy: MpiResult<OwnedComm> = match parent.topology().ok()? {
        MPI_CART => split.cart_create(&parent.cart().ok()?, false),
        MPI_GRAPH => split.graph_create(&parent.graph().ok()?, false),
        MPI_DIST_GRAPH => split.dist_graph_create_adjacent(&parent.dist_graph().ok()?, Info::NULL, false),
        _ => return None,
    };
    copy.ok().filter(|c| c.raw() != MPI_COMM_NULL)
}

/// Whether `comm` carries a topology.
pub fn has_topology(comm: MPI_Comm) -> bool {
    Comm(comm).topology().is_ok_and(|t| t != MPI_UNDEFINED)
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
pub fn errhandler_set(comm: MPI_Comm, handler: MPI_Errhandler) {
    if let Some(base) = current_base(comm) {
        let _ = Comm(base.comm).set_errhandler(Errhandler(handler));
    }
}

/// The policy's `MPI_Comm_idup`/`MPI_Comm_idup_with_info` of its communicator `parent`
/// (`ctor_plan`: `IdupOfBase`: native backend, a parent whose base carries its topology, if it has
/// one, which MPICH's idup of the base copies into the child). `info`: `MPI_Comm_idup_with_info`'s.
/// `create`: the application's own call, for MPICH to report a null argument. `newcomm`, `request`:
/// the application's output arguments, written before this returns.
pub fn idup(
    rt: &Runtime,
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: AppArg<MPI_Comm>,
    info: Option<MPI_Info>,
    request: Option<AppArg<MPI_Request>>,
    create: &dyn Fn(&Pmpi) -> c_int,
) -> c_int {
    let request = request.filter(|r| !r.is_empty());
    let (false, Some(request_arg), Some(base)) = (newcomm.is_empty(), request, rt.comms.base(parent)) else {
        // A null argument: MPICH's own idup reports it.
        return create(mpixstream_wrappers::pmpi::pmpi());
    };
    // Copies of the application's variables, written back whole (what the body left unchanged, unchanged).
    let (mut child, mut made) = (newcomm.get().unwrap_or(MPI_COMM_NULL), request_arg.get().unwrap_or(MPI_REQUEST_NULL));
    let rc = idup_of_base(kind, parent, base, info, &mut child, &mut made);
    newcomm.set(child);
    request_arg.set(made);
    rc
}

/// The body of [`idup`], into our locals.
fn idup_of_base(
    kind: CommCtor,
    parent: MPI_Comm,
    base: crate::comms::Base,
    info: Option<MPI_Info>,
    newcomm: &mut MPI_Comm,
    request: &mut MPI_Request,
) -> c_int {
    let parent = Comm(parent);
    let base = Comm(base.comm);
    // The attribute copies, as MPICH's idup of the parent makes them: at the call, before anything is
    // started, so that a callback's error fails the call with nothing left behind.
    let keyvals = KEYVALS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut copies: Vec<(c_int, Opaque)> = Vec::new();
    for kv in keyvals {
        let Some(copy) = kv.copy else { continue }; // MPI_COMM_NULL_COPY_FN
        let Ok(Some(value)) = parent.attr(kv.keyval) else { continue };
        let (mut out, mut keep) = (std::ptr::null_mut::<c_void>(), 0);
        // SAFETY: the program's copy callback of `kv.keyval`, called as MPICH's idup would: the parent,
        // the keyval and the extra state it was made with, the value stored under it, and live locals
        // for the callback's two outputs.
        let rc = unsafe {
            copy(
                parent.raw(),
                kv.keyval,
                kv.extra as *mut c_void,
                value.0,
                &mut out as *mut *mut c_void as *mut c_void,
                &mut keep,
            )
        };
        if rc != MPI_SUCCESS {
            // As MPICH's idup: the callback's error through the parent's error handler, no communicator.
            *newcomm = MPI_COMM_NULL;
            parent.call_errhandler(rc);
            return rc;
        }
        if keep != 0 {
            copies.push((kv.keyval, Opaque(out)));
        }
    }
    // Info hints as MPICH's idup gives them: none copied from the parent, `MPI_Comm_idup_with_info`'s
    // applied.
    let started = match info {
        Some(info) if matches!(kind, CommCtor::IdupWithInfo) => base.idup_with_info(Info(info)),
        _ => base.idup(),
    };
    let (child, req) = match started {
        Ok(started) => started,
        Err(rc) => return rc,
    };
    for (keyval, value) in copies {
        let _ = child.set_attr(keyval, value);
    }
    // The program's from here on.
    *newcomm = child.into_raw();
    *request = req.into_raw();
    MPI_SUCCESS
}
