//! Each communicator's identity from run to run (`mpixstream_wrappers::comm_identity`), kept where the
//! guided policy needs it (its selection is keyed on it) or the tools library is loaded (the report
//! writes it, and the profile carries it to the guided policy).
//!
//! A table of nodes, one per communicator an interposed constructor made (its parent's node, its
//! step, the number of the next call on it, its node in the guided policy's profile), in order of
//! creation; the communicator carries its node's index in an attribute of ours (no copy callback: a
//! dup does not inherit it). Nodes 0 and 1 are `MPI_COMM_WORLD` and `MPI_COMM_SELF`. A constructor
//! reads its parent's attribute and appends one node under one lock: constructors only, never a
//! communication call. Nodes stay after `MPI_Comm_free` (24 bytes each: the report lists every
//! identity a rank made).
//!
//! Results of `MPI_Comm_idup*` are numbered on their parent but carry no node (setting an attribute
//! before the idup completed is not allowed), so what is made from them has no identity; neither has
//! what `MPI_Comm_create_group` makes, or what is made from a communicator the library did not see
//! made (topology constructors, spawn, `MPIX_Stream_comm_create`…). Those stay implicit under the
//! guided policy.
use super::{guided, guided_profile};
use crate::config::Policy;
use crate::runtime::Runtime;
use mpixstream_wrappers::comm_identity::{self, Root, Step};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::{self, Comm, Opaque};
use std::os::raw::c_int;
use std::sync::{Mutex, OnceLock};

/// No node: the roots' parent, and "not in the profile".
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    /// `None` for the roots.
    step: Option<Step>,
    /// The number the next constructor called on it gets.
    next_seq: u32,
    /// Its node in the guided policy's profile (`NONE`: not there, or no guided policy).
    profile: u32,
}

static TABLE: Mutex<Vec<Node>> = Mutex::new(Vec::new());
static KEYVAL: OnceLock<Option<c_int>> = OnceLock::new();
static ON: OnceLock<bool> = OnceLock::new();

/// A constructor's child-to-be: its parent's node and its step, and the profile's node for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    parent: u32,
    step: Step,
    profile: Option<u32>,
}

impl Pending {
    /// The guided policy's profile selected this communicator.
    pub fn selected(self) -> bool {
        guided::selected(self.profile)
    }
}

/// Whether identities are kept in this process: under the guided policy, or with the tools library.
pub fn on(rt: &Runtime) -> bool {
    *ON.get_or_init(|| rt.config.policy == Policy::Guided || mpixstream_wrappers::tools::ToolsEntries::preloaded())
}

fn keyval() -> Option<c_int> {
    *KEYVAL.get_or_init(|| mpi::comm::create_keyval((None, None), Opaque(std::ptr::null_mut())).ok())
}

fn table() -> std::sync::MutexGuard<'static, Vec<Node>> {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if t.is_empty() {
        let root = |profile| Node { parent: NONE, step: None, next_seq: 0, profile };
        let (world, slf) = if guided_profile::profile().is_some() {
            (guided_profile::WORLD, guided_profile::SELF)
        } else {
            (NONE, NONE)
        };
        t.push(root(world));
        t.push(root(slf));
    }
    t
}

/// The node of `comm`: 0 and 1 for `MPI_COMM_WORLD` and `MPI_COMM_SELF`, else its attribute's.
pub fn node_of(comm: MPI_Comm) -> Option<u32> {
    match comm {
        MPI_COMM_WORLD => Some(0),
        MPI_COMM_SELF => Some(1),
        MPI_COMM_NULL => None,
        c if !mpixstream_wrappers::handles::is_comm(c) => None,
        c => {
            // No keyval yet: no communicator has a node.
            let k = (*KEYVAL.get()?)?;
            let word = Comm(c).attr(k).ok()??;
            (word.0 as usize).checked_sub(1).map(|n| n as u32)
        }
    }
}

/// Before a constructor of `kind` runs over `parent` (every member of the parent calls this alike):
/// numbers the call on the parent and looks the child up in the guided policy's profile. `None`: the
/// child will have no identity.
pub fn begin(rt: &Runtime, kind: CommCtor, parent: MPI_Comm) -> Option<Pending> {
    if !comm_identity::numbered(kind) {
        return None;
    }
    let p = node_of(parent)?;
    let (step, parent_profile) = {
        let mut t = table();
        let node = t.get_mut(p as usize)?;
        let step = Step { kind, seq: node.next_seq };
        node.next_seq += 1;
        (step, (node.profile != NONE).then_some(node.profile))
    };
    // An idup's result has no node (`made`), so the profile never lists it: not looked up, not unseen.
    let looked_up = kind.is_blocking() && guided::in_force(rt).is_some();
    let profile = looked_up.then(|| guided::child(rt, parent_profile, step, || path(p))).flatten();
    Some(Pending { parent: p, step, profile })
}

/// After the constructor: `child` (this member's new communicator) carries its node. Not for an idup's
/// result, which is not complete yet.
pub fn made(pending: Pending, kind: CommCtor, child: MPI_Comm) {
    if !kind.is_blocking() || child == MPI_COMM_NULL {
        return;
    }
    let Some(k) = keyval() else { return };
    let n = {
        let mut t = table();
        t.push(Node {
            parent: pending.parent,
            step: Some(pending.step),
            next_seq: 0,
            profile: pending.profile.unwrap_or(NONE),
        });
        t.len()
    };
    // The word is the node's index + 1, never followed as a pointer.
    let _ = Comm(child).set_attr(k, Opaque(std::ptr::without_provenance_mut(n)));
}

/// The identity of node `n` (`world/dup:0/...`).
pub fn path(n: u32) -> String {
    let t = table();
    let mut steps = Vec::new();
    let mut at = n;
    while let Some(node) = t.get(at as usize) {
        match node.step {
            Some(s) => steps.push(s),
            None => break,
        }
        at = node.parent;
    }
    steps.reverse();
    comm_identity::format(if at == 1 { Root::SelfComm } else { Root::World }, &steps)
}

/// How many nodes there are (the roots included).
pub fn count() -> usize {
    table().len()
}

/// Node `n`'s parent and step (`None` for a root), for the tools library (`query.rs`).
pub fn parts(n: u32) -> Option<(Option<u32>, Option<Step>)> {
    let t = table();
    let node = t.get(n as usize)?;
    Some(((node.parent != NONE).then_some(node.parent), node.step))
}
