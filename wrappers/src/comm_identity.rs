//! A communicator's identity from run to run, as the guided policy keys its selection and the report
//! writes it: the root it derives from (`world`, `self`), then each constructor on the way, with the
//! number of the call on its parent (`world/dup:0/split:1`: the first constructor called on
//! `MPI_COMM_WORLD` was a dup, and the second constructor called on that dup a split).
//!
//! The number counts every constructor the lean library interposes on that parent except
//! `MPI_Comm_create_group` (collective over the new group only, so the members of the parent need not
//! have called the same ones): every member of the parent calls the others in the same order (MPI's
//! rule for collectives on one communicator), so every member computes the same identity without a
//! message. Both libraries share this grammar: the lean library parses the profile's identities, the
//! tools library writes them (from the lean library's table: `shim/src/policy/identity.rs`).
use crate::interpose::CommCtor;

/// Where a path starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    World,
    SelfComm,
}

impl Root {
    pub fn name(self) -> &'static str {
        match self {
            Root::World => "world",
            Root::SelfComm => "self",
        }
    }
}

/// One constructor on the way: which, and the number of the call on its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub kind: CommCtor,
    pub seq: u32,
}

/// The short name of a constructor in a path (`MPI_Comm_split_type`: `split_type`).
pub fn kind_name(kind: CommCtor) -> &'static str {
    &kind.name()["MPI_Comm_".len()..]
}

/// Whether calls of `kind` are numbered on their parent (and so have an identity).
pub fn numbered(kind: CommCtor) -> bool {
    kind != CommCtor::CreateGroup
}

/// The path of `root` then `steps`.
pub fn format(root: Root, steps: &[Step]) -> String {
    steps.iter().fold(root.name().to_string(), |s, &st| format_step(&s, st))
}

/// The identity of what `step` makes from the communicator of identity `parent`.
pub fn format_step(parent: &str, step: Step) -> String {
    format!("{parent}/{}:{}", kind_name(step.kind), step.seq)
}

/// A path back into its root and steps; `None` for text that is not one.
pub fn parse(path: &str) -> Option<(Root, Vec<Step>)> {
    let mut parts = path.split('/');
    let root = match parts.next()? {
        "world" => Root::World,
        "self" => Root::SelfComm,
        _ => return None,
    };
    let steps = parts
        .map(|p| {
            let (kind, seq) = p.split_once(':')?;
            let kind = *CommCtor::ALL.iter().find(|k| kind_name(**k) == kind && numbered(**k))?;
            Some(Step { kind, seq: seq.parse().ok()? })
        })
        .collect::<Option<Vec<Step>>>()?;
    Some((root, steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_back_as_written() {
        let steps = [Step { kind: CommCtor::Dup, seq: 0 }, Step { kind: CommCtor::SplitType, seq: 12 }];
        let p = format(Root::World, &steps);
        assert_eq!(p, "world/dup:0/split_type:12");
        assert_eq!(parse(&p), Some((Root::World, steps.to_vec())));
        assert_eq!(parse("self"), Some((Root::SelfComm, vec![])));
        for k in CommCtor::ALL.into_iter().filter(|&k| numbered(k)) {
            let p = format(Root::SelfComm, &[Step { kind: k, seq: 3 }]);
            assert_eq!(parse(&p), Some((Root::SelfComm, vec![Step { kind: k, seq: 3 }])), "{p}");
        }
        for bad in ["", "world/", "world/dup", "world/dup:x", "world/create_group:0", "node/dup:0", "world/Dup:0"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
