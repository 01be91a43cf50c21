//! The guided policy's profile (`MPIXSTREAM_PROFILE`, the `guided` section `mpixrun --profile` writes):
//! read once at `MPI_Init`, before the pool is sized, into a tree of communicator identities, and how
//! many streams its selection needs. Nothing here depends on the runtime, so the pool's sizing reads it
//! without reaching up to the policy's decisions (`guided.rs`), which do.
use super::json_read::{self, Value};
use crate::config::{Config, Policy};
use mpixstream_wrappers::comm_identity::{self, Root, Step};
use mpixstream_wrappers::interpose::CommCtor;
use std::sync::OnceLock;

/// The version of the `guided` section this library reads.
pub const FORMAT_VERSION: u32 = 1;

/// One identity the profile saw.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    step: Option<Step>,
    /// Its parent's node (roots: themselves).
    parent: u32,
    /// The profile's verdict gives it a stream.
    selected: bool,
    /// Its children, sorted by their step's number.
    children: Vec<(u32, u32)>,
}

/// The profile, as the guided policy follows it.
#[derive(Debug)]
pub struct Profile {
    pub path: String,
    pub nranks: u32,
    /// Nodes 0 and 1: `MPI_COMM_WORLD` and `MPI_COMM_SELF`.
    nodes: Vec<Node>,
    /// Per rank of the profile, the communicators that got a stream there under this selection.
    wanted: Vec<u32>,
    pub selected: usize,
}

pub const WORLD: u32 = 0;
pub const SELF: u32 = 1;

impl Profile {
    /// The profile of `text` (the file at `path`), or why it cannot guide.
    pub fn parse(path: &str, text: &str) -> Result<Profile, String> {
        let v = json_read::parse(text).map_err(|e| format!("not JSON ({e})"))?;
        let g = v
            .get("guided")
            .filter(|g| !matches!(g, Value::Null))
            .ok_or("no `guided` section: write it with this version's `mpixrun --profile` (scripts/contention.py)")?;
        let version = g.get("version").and_then(Value::as_u32);
        if version != Some(FORMAT_VERSION) {
            return Err(format!("its `guided` section has version {version:?}; this library reads {FORMAT_VERSION}"));
        }
        match g.get("policy").and_then(Value::as_str) {
            Some("implicit") => {}
            other => {
                return Err(format!(
                    "it was made under the {} policy; the guided policy follows a profile made under `implicit` \
                     (mpixrun --profile's default), where the threads' meetings show",
                    other.unwrap_or("unknown")
                ))
            }
        }
        let nranks = g.get("nranks").and_then(Value::as_u32).filter(|&n| n > 0).ok_or("no `nranks`")?;
        let strings = |v: Option<&Value>, what: &str| -> Result<Vec<String>, String> {
            let items = v.and_then(Value::as_array).ok_or(format!("no `{what}` list"))?;
            items.iter().map(|i| i.as_str().map(str::to_string).ok_or(format!("`{what}`: not a string"))).collect()
        };
        let mut p = Profile {
            path: path.to_string(),
            nranks,
            nodes: vec![Node::root(WORLD), Node::root(SELF)],
            wanted: Vec::new(),
            selected: 0,
        };
        let ranks = g.get("ranks").and_then(Value::as_array).ok_or("no `ranks` list")?;
        let mut made = vec![Vec::new(); ranks.len()];
        for (i, r) in ranks.iter().enumerate() {
            let ids: Vec<u32> =
                strings(r.get("made"), "made")?.iter().map(|s| p.insert(s)).collect::<Result<_, _>>()?;
            // In the rank's place (contention.py writes them in order).
            let at = r.get("rank").and_then(Value::as_u32).map_or(i, |r| r as usize);
            if at >= made.len() {
                made.resize(at + 1, Vec::new());
            }
            made[at] = ids;
        }
        for s in strings(g.get("select"), "select")? {
            let n = p.insert(&s)?;
            if !p.nodes[n as usize].selected {
                p.nodes[n as usize].selected = true;
                p.selected += 1;
            }
        }
        p.wanted = made.iter().map(|ids| ids.iter().filter(|&&n| p.gets_stream(n)).count() as u32).collect();
        Ok(p)
    }

    /// The node of `path`, made with its ancestors where new.
    fn insert(&mut self, path: &str) -> Result<u32, String> {
        let (root, steps) = comm_identity::parse(path).ok_or(format!("`{path}` is not a communicator's identity"))?;
        let mut at = match root {
            Root::World => WORLD,
            Root::SelfComm => SELF,
        };
        for step in steps {
            at = match self.child(at, step) {
                Ok(n) => n,
                Err(Some(_)) => return Err(format!("`{path}`: two constructors with one number on one parent")),
                Err(None) => {
                    let n = self.nodes.len() as u32;
                    self.nodes.push(Node { step: Some(step), parent: at, selected: false, children: Vec::new() });
                    let children = &mut self.nodes[at as usize].children;
                    let i = children.partition_point(|&(seq, _)| seq < step.seq);
                    children.insert(i, (step.seq, n));
                    n
                }
            };
        }
        Ok(at)
    }

    /// The child of `parent` made by `step`: `Err(None)` where the profile saw no call of that number on
    /// it, `Err(Some(n))` where its call `n` was another constructor.
    pub(super) fn child(&self, parent: u32, step: Step) -> Result<u32, Option<u32>> {
        let children = &self.nodes[parent as usize].children;
        let i = children.binary_search_by_key(&step.seq, |&(seq, _)| seq).map_err(|_| None)?;
        let n = children[i].1;
        if self.nodes[n as usize].step.map(|s| s.kind) == Some(step.kind) {
            Ok(n)
        } else {
            Err(Some(n))
        }
    }

    /// Whether the profile's verdict selected node `n`.
    #[inline]
    pub(super) fn is_selected(&self, n: u32) -> bool {
        self.nodes[n as usize].selected
    }

    /// Whether the communicator of node `n` gets a stream under this selection: selected, or a blocking
    /// dup of one that gets a stream (a dup of a stream communicator would otherwise share its stream:
    /// `interposed::facts` makes it as the explicit policy does).
    pub(super) fn gets_stream(&self, n: u32) -> bool {
        let node = &self.nodes[n as usize];
        if node.selected {
            return true;
        }
        match node.step {
            Some(s) if matches!(s.kind, CommCtor::Dup | CommCtor::DupWithInfo) => self.gets_stream(node.parent),
            _ => false,
        }
    }

    /// The streams this selection gives on profile rank `rank` (`None`: the most on any rank), none
    /// where the job has another number of ranks (`size`, where known).
    pub fn wanted(&self, rank: Option<u32>, size: Option<u32>) -> u32 {
        if size.is_some_and(|s| s != self.nranks) {
            return 0;
        }
        match rank.and_then(|r| self.wanted.get(r as usize)) {
            Some(&n) => n,
            None => self.wanted.iter().copied().max().unwrap_or(0),
        }
    }
}

impl Node {
    fn root(me: u32) -> Node {
        Node { step: None, parent: me, selected: false, children: Vec::new() }
    }
}

static PROFILE: OnceLock<Profile> = OnceLock::new();

/// At `MPI_Init`, before the pool is sized: reads `MPIXSTREAM_PROFILE` under the guided policy. The
/// error names the variable and the file.
pub fn load(config: &Config) -> Result<(), String> {
    let (Policy::Guided, Some(path)) = (config.policy, config.profile.as_deref()) else { return Ok(()) };
    let text = std::fs::read_to_string(path).map_err(|e| format!("MPIXSTREAM_PROFILE={path}: cannot read it: {e}"))?;
    let profile = Profile::parse(path, &text).map_err(|e| format!("MPIXSTREAM_PROFILE={path}: {e}"))?;
    let _ = PROFILE.set(profile);
    Ok(())
}

/// The profile in force (the guided policy), if any.
pub fn profile() -> Option<&'static Profile> {
    PROFILE.get()
}

/// How many streams the guided policy's selection needs on a process at most: the communicators of the
/// busiest rank that the profile selected, and the dups of those. The busiest rank's, not this rank's:
/// every rank of a node must ask MPICH for the same pool (it lays out one shared segment for the queues
/// of all its VCI pairs). `None` where the policy is not guided; 0 where the job's rank count (Hydra's
/// `PMI_SIZE`) differs from the profile's. For sizing the pool before `MPI_Init`.
pub fn streams_wanted() -> Option<u32> {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u32>().ok());
    Some(profile()?.wanted(None, env("PMI_SIZE")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(select: &[&str], made: &[&[&str]], nranks: u32) -> Result<Profile, String> {
        let list = |v: &[&str]| v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(",");
        let ranks: Vec<String> =
            made.iter().enumerate().map(|(r, m)| format!("{{\"rank\":{r},\"made\":[{}]}}", list(m))).collect();
        let text = format!(
            "{{\"format\":\"mpixstream-profile\",\"guided\":{{\"version\":1,\"policy\":\"implicit\",\"nranks\":{nranks},\
             \"select\":[{}],\"ranks\":[{}]}}}}",
            list(select),
            ranks.join(",")
        );
        Profile::parse("p.json", &text)
    }

    fn step(kind: CommCtor, seq: u32) -> Step {
        Step { kind, seq }
    }

    /// The selection answers by identity; the dups of a selected communicator get a stream too.
    #[test]
    fn selects_by_identity() {
        let made: &[&str] =
            &["world/dup:0", "world/dup:1", "world/split:2", "world/dup:0/dup:0", "world/dup:0/split:1"];
        let p = profile(&["world/dup:0", "world/dup:1"], &[made, made], 2).unwrap();
        assert_eq!(p.selected, 2);
        let d0 = p.child(WORLD, step(CommCtor::Dup, 0)).unwrap();
        let d1 = p.child(WORLD, step(CommCtor::Dup, 1)).unwrap();
        let s2 = p.child(WORLD, step(CommCtor::Split, 2)).unwrap();
        assert!(p.nodes[d0 as usize].selected && p.nodes[d1 as usize].selected && !p.nodes[s2 as usize].selected);
        // Another constructor at that number, or a number the profile never saw: not found.
        assert_eq!(p.child(WORLD, step(CommCtor::Split, 0)), Err(Some(d0)));
        assert_eq!(p.child(WORLD, step(CommCtor::Dup, 3)), Err(None));
        assert_eq!(p.child(SELF, step(CommCtor::Dup, 0)), Err(None));
        // A dup of a selected communicator gets a stream (as under explicit), a split of it does not.
        let dd = p.child(d0, step(CommCtor::Dup, 0)).unwrap();
        let ds = p.child(d0, step(CommCtor::Split, 1)).unwrap();
        assert!(p.gets_stream(dd) && !p.gets_stream(ds) && !p.gets_stream(s2));
        assert_eq!(p.wanted(Some(0), Some(2)), 3);
        assert_eq!(p.wanted(None, None), 3);
    }

    /// streams_wanted's count: per rank, and none for a job of another size.
    #[test]
    fn streams_wanted_per_rank() {
        let r0: &[&str] = &["world/dup:0", "world/dup:1", "world/dup:2"];
        let r1: &[&str] = &["world/dup:0", "world/dup:1", "world/dup:2", "world/dup:2/dup:0"];
        let p = profile(&["world/dup:1", "world/dup:2"], &[r0, r1], 2).unwrap();
        assert_eq!(p.wanted(Some(0), Some(2)), 2);
        assert_eq!(p.wanted(Some(1), Some(2)), 3);
        assert_eq!(p.wanted(None, Some(2)), 3);
        assert_eq!(p.wanted(Some(7), None), 3);
        assert_eq!(p.wanted(Some(0), Some(4)), 0);
        let none = profile(&[], &[r0, r1], 2).unwrap();
        assert_eq!((none.selected, none.wanted(Some(1), Some(2))), (0, 0));
    }

    #[test]
    fn refuses_a_profile_that_cannot_guide() {
        let err = |text: &str| Profile::parse("p.json", text).unwrap_err();
        assert!(err("{").contains("not JSON"));
        assert!(err("{\"format\":\"mpixstream-profile\"}").contains("no `guided` section"));
        assert!(err("{\"guided\":{\"version\":9}}").contains("version"));
        let g = |body: &str| format!("{{\"guided\":{{\"version\":1,{body}}}}}");
        assert!(err(&g("\"policy\":\"explicit\",\"nranks\":2")).contains("made under the explicit policy"));
        assert!(err(&g("\"policy\":\"implicit\"")).contains("nranks"));
        assert!(err(&g("\"policy\":\"implicit\",\"nranks\":2,\"ranks\":[],\"select\":[\"x/dup:0\"]"))
            .contains("not a communicator's identity"));
        let clash = g("\"policy\":\"implicit\",\"nranks\":1,\"ranks\":[{\"made\":[\"world/dup:0\",\"world/split:0\"]}],\"select\":[]");
        assert!(err(&clash).contains("two constructors"));
    }
}
