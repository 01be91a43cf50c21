//! How many reserved VCIs the native backend asks MPICH for, and which sizes it refuses.
//!
//! What a VCI costs, measured on PyPI MPICH 5.0.2 (ch4:ucx, shared memory between the ranks of a node;
//! docs/policy.md, "Reserved pool"): at `MPI_Init` every rank maps one shared segment for the eager
//! queues of every VCI pair, of exactly `V² × L × (cells × 16384 + 8768)` bytes, with `V` the VCIs in all
//! (implicit + reserved), `L` the ranks on the node and `cells` = `MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS`
//! (64): 1.06 MB per VCI pair and rank. MPICH touches all of it during `MPI_Init` (about 6 s per GB on
//! the 2-core machine it was measured on) and fails `MPI_Init` with "MPIDI_POSIX_comm_set_vcis: Out of
//! memory" once it exceeds 2 GiB. Other builds lay their memory out differently (4.1.3 crashes in UCX at
//! 2 ranks with 30 reserved, 4.2.3 and 4.3.2 start with 31): the default uses this model everywhere as an
//! estimate; the refusal applies where it was measured exact, MPICH 5.
use crate::config::{Config, DEFAULT_STREAMS};

/// Shared memory the default pool may make MPICH map per node: 256 MiB (about 1.5 s of start-up on
/// the machine above), and at most an eighth of the free space in `/dev/shm`.
const DEFAULT_BUDGET: u64 = 256 << 20;
/// The most MPICH 5 maps for its VCI queues (more fails `MPI_Init`).
const MPICH5_LIMIT: u64 = (1 << 31) - 1;
const CELL_BYTES: u64 = 16384;
const PAIR_OVERHEAD: u64 = 8768;

/// The node as MPI_Init will see it: ranks on this node (Hydra's `MPI_LOCALNRANKS`; under Slurm's
/// `srun`, which sets none, the most tasks any node of the step runs; 1 if unknown), whether MPICH's
/// shared memory is in use, and the queue depth.
#[derive(Clone, Copy, Debug)]
pub struct Node {
    pub local_ranks: u64,
    pub shared_memory: bool,
    pub cells: u64,
    /// Free bytes in `/dev/shm`, if known.
    pub shm_free: Option<u64>,
}

impl Node {
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Node {
        let num = |k: &str| env(k).and_then(|v| v.trim().parse::<u64>().ok());
        let on = |k: &str| env(k).is_some_and(|v| matches!(v.trim(), "1" | "yes" | "true" | "on"));
        Node {
            local_ranks: num("MPI_LOCALNRANKS")
                .filter(|&n| n >= 1)
                .or_else(|| slurm_busiest_node(&env("SLURM_STEP_TASKS_PER_NODE")?))
                .unwrap_or(1),
            shared_memory: !on("MPIR_CVAR_NOLOCAL"),
            cells: num("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS").filter(|&n| n >= 1).unwrap_or(64),
            shm_free: mpixstream_wrappers::os::shm_free(),
        }
    }

    /// Bytes of shared memory MPICH maps for `vcis` VCIs in all (0 without shared memory or peers).
    pub fn vci_queue_bytes(&self, vcis: u64) -> u64 {
        if !self.shared_memory || self.local_ranks < 2 {
            return 0;
        }
        vcis * vcis * self.local_ranks * (self.cells * CELL_BYTES + PAIR_OVERHEAD)
    }

    /// The default pool: `DEFAULT_STREAMS`, less where its queues would pass the budget (at least 1).
    pub fn default_reserve(&self, implicit: u32) -> u32 {
        let budget = self.shm_free.map_or(DEFAULT_BUDGET, |free| DEFAULT_BUDGET.min(free / 8));
        (1..=DEFAULT_STREAMS).rev().find(|&n| self.vci_queue_bytes((implicit + n) as u64) <= budget).unwrap_or(1)
    }

    /// MPICH 5 fails `MPI_Init` past its limit, and any MPICH when `/dev/shm` cannot hold the queues:
    /// refuse such a pool before, naming the variable, the arithmetic and the largest size that fits.
    pub fn refuse(&self, mpich_major: u32, implicit: u32, reserve: u32, variable: &str) -> Result<(), String> {
        let limit = match (mpich_major >= 5, self.shm_free) {
            (true, Some(free)) => MPICH5_LIMIT.min(free),
            (true, None) => MPICH5_LIMIT,
            (false, Some(free)) => free,
            (false, None) => return Ok(()),
        };
        let need = self.vci_queue_bytes((implicit + reserve) as u64);
        if need <= limit {
            return Ok(());
        }
        let fits = (0..reserve).rev().find(|&n| self.vci_queue_bytes((implicit + n) as u64) <= limit).unwrap_or(0);
        let why = if limit == MPICH5_LIMIT { "the 2 GiB MPICH 5 can map" } else { "the free space in /dev/shm" };
        Err(format!(
            "{variable}={reserve}: with {} ranks on this node, MPICH would map {:.2} GB of shared memory for \
             its endpoint queues ((implicit {implicit} + reserved {reserve})² VCIs × {} ranks × {:.2} MB), more \
             than {why} ({:.2} GB); at most {fits} reserved VCIs fit",
            self.local_ranks,
            need as f64 / 1e9,
            self.local_ranks,
            (self.cells * CELL_BYTES + PAIR_OVERHEAD) as f64 / 1e6,
            limit as f64 / 1e9
        ))
    }
}

/// The most tasks on one node in Slurm's `SLURM_STEP_TASKS_PER_NODE` (`2(x3),1`: three nodes with 2,
/// one with 1). Every node of the step then sizes the same pool, for its busiest node: this node's own
/// count cannot be told apart reliably (the step's node list need not be the allocation's).
fn slurm_busiest_node(per_node: &str) -> Option<u64> {
    per_node
        .split(',')
        .map(|entry| entry.split('(').next().and_then(|n| n.trim().parse::<u64>().ok()))
        .try_fold(0, |most, n| n.map(|n| most.max(n)))
        .filter(|&n| n >= 1)
}

/// Whether the pool is wanted at all: under `explicit`, and under `guided` where the profile selected
/// a communicator (the policy makes the streams); when the user sized it; under `implicit` only if the
/// program can create a stream (`program_uses_streams`).
pub fn wanted(config: &Config, user_sized: bool, program_uses_streams: impl FnOnce() -> bool) -> bool {
    let policy_needs = config.policy.makes_streams() && crate::policy::guided_profile::streams_wanted() != Some(0);
    policy_needs || user_sized || program_uses_streams()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(l: u64) -> Node {
        Node { local_ranks: l, shared_memory: true, cells: 64, shm_free: None }
    }

    #[test]
    fn model_matches_measured_segments() {
        // Sizes of MPICH 5.0.2's mpich_vci_* segment, read in /dev/shm.
        assert_eq!(node(2).vci_queue_bytes(2), 8_458_752);
        assert_eq!(node(2).vci_queue_bytes(9), 171_289_728);
        assert_eq!(node(8).vci_queue_bytes(5), 211_468_800);
    }

    #[test]
    fn ranks_on_the_node_from_hydra_or_slurm() {
        let from = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            Node::from_env(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).local_ranks
        };
        assert_eq!(from(&[("MPI_LOCALNRANKS", "3")]), 3);
        assert_eq!(from(&[("SLURM_STEP_TASKS_PER_NODE", "2(x3),5,1")]), 5);
        assert_eq!(from(&[("SLURM_STEP_TASKS_PER_NODE", "4(x2)")]), 4);
        // Hydra's count wins (mpirun inside a Slurm allocation); a malformed Slurm value counts as unknown.
        assert_eq!(from(&[("MPI_LOCALNRANKS", "2"), ("SLURM_STEP_TASKS_PER_NODE", "8")]), 2);
        assert_eq!(from(&[("SLURM_STEP_TASKS_PER_NODE", "x")]), 1);
        assert_eq!(from(&[]), 1);
    }

    #[test]
    fn default_shrinks_with_ranks_per_node() {
        assert_eq!(node(1).default_reserve(1), 8);
        assert_eq!(node(2).default_reserve(1), 8);
        assert_eq!(node(4).default_reserve(1), 6);
        assert_eq!(node(16).default_reserve(1), 2);
        assert_eq!(node(256).default_reserve(1), 1);
    }

    #[test]
    fn refuses_what_mpich5_cannot_map() {
        // Measured: 30 reserved start at 2 ranks, 31 fail; 10 start at 16 ranks, 11 fail.
        assert!(node(2).refuse(5, 1, 30, "X").is_ok());
        let e = node(2).refuse(5, 1, 31, "MPIXSTREAM_STREAMS").unwrap_err();
        assert!(e.contains("MPIXSTREAM_STREAMS=31") && e.contains("at most 30"), "{e}");
        assert!(node(16).refuse(5, 1, 10, "X").is_ok());
        assert!(node(16).refuse(5, 1, 11, "X").is_err());
        // Not modelled on 4.x unless /dev/shm is too small; no shared memory, no limit.
        assert!(node(2).refuse(4, 1, 40, "X").is_ok());
        assert!(Node { shared_memory: false, ..node(64) }.refuse(5, 1, 63, "X").is_ok());
    }
}
