//! The hosts a job runs on, for the banner (`MPIXSTREAM_VERBOSE=1`): each rank's host name and stream
//! pool, gathered on rank 0 at `MPI_Init`. The pool is sized per host (`pool_size`, from the ranks on
//! the host), so a job with uneven ranks per host can have a different pool on each host; the banner
//! says so.
use mpixstream_wrappers::mpi::Comm;
use std::os::raw::c_int;

/// Bytes of a host name in the gathered records (longer names are cut; the banner only shows them).
const NAME: usize = 64;
/// Hosts the banner names one by one; past that, a count and the range of ranks per host.
const SHOWN: usize = 4;

/// Collective over `MPI_COMM_WORLD` (every rank calls it when the banner is asked for, the setting
/// being the same on every rank): on rank 0, the layout for the banner; elsewhere `None`. Between
/// `MPI_Init*` and `MPI_Finalize`.
pub fn gather(rank: c_int, size: c_int, pool: u32) -> Option<String> {
    let mut mine = [0u8; NAME + 4];
    let name = mpixstream_wrappers::os::hostname(NAME - 1);
    mine[..name.len()].copy_from_slice(&name);
    mine[NAME..].copy_from_slice(&pool.to_le_bytes());
    let mut all = vec![0u8; if rank == 0 { (NAME + 4) * size.max(0) as usize } else { 0 }];
    let gathered = Comm::WORLD.gather(&mine, &mut all, 0);
    if gathered.is_err() || rank != 0 {
        return None;
    }
    let records: Vec<(String, u32)> = all
        .chunks(NAME + 4)
        .map(|r| {
            let len = r[..NAME].iter().position(|&b| b == 0).unwrap_or(NAME);
            let pool = u32::from_le_bytes([r[NAME], r[NAME + 1], r[NAME + 2], r[NAME + 3]]);
            (String::from_utf8_lossy(&r[..len]).into_owned(), pool)
        })
        .collect();
    Some(summary(&records))
}

/// `4 ranks on 2 hosts (h1: 3, h2: 1)`, and, where the hosts' pools differ, `; pool by host: h1 6, h2 8`.
/// Hosts in the order of their first rank.
pub fn summary(records: &[(String, u32)]) -> String {
    let mut hosts: Vec<(&str, usize, u32)> = Vec::new();
    for (name, pool) in records {
        match hosts.iter_mut().find(|h| h.0 == name) {
            Some(h) => h.1 += 1,
            None => hosts.push((name, 1, *pool)),
        }
    }
    let per_host = |h: &(&str, usize, u32)| format!("{}: {}", h.0, h.1);
    let mut text =
        format!("{} ranks on {} host{}", records.len(), hosts.len(), if hosts.len() == 1 { "" } else { "s" });
    if hosts.len() <= SHOWN {
        text += &format!(" ({})", hosts.iter().map(per_host).collect::<Vec<_>>().join(", "));
    } else {
        let (lo, hi) = hosts.iter().fold((usize::MAX, 0), |(lo, hi), h| (lo.min(h.1), hi.max(h.1)));
        let shown: Vec<String> = hosts.iter().take(SHOWN).map(per_host).collect();
        text += &format!(" ({}, … {} more; {lo}..{hi} ranks per host)", shown.join(", "), hosts.len() - SHOWN);
    }
    if hosts.iter().any(|h| h.2 != hosts[0].2) {
        let pools: Vec<String> = hosts.iter().take(SHOWN * 2).map(|h| format!("{} {}", h.0, h.2)).collect();
        text += &format!("; pool by host: {}{}", pools.join(", "), if hosts.len() > SHOWN * 2 { ", …" } else { "" });
    }
    text
}

#[cfg(test)]
mod tests {
    use super::summary;

    fn job(layout: &[(&str, u32)]) -> Vec<(String, u32)> {
        layout.iter().map(|(h, p)| (h.to_string(), *p)).collect()
    }

    #[test]
    fn names_hosts_and_ranks_per_host() {
        assert_eq!(summary(&job(&[("h1", 8), ("h1", 8), ("h2", 8), ("h2", 8)])), "4 ranks on 2 hosts (h1: 2, h2: 2)");
        assert_eq!(summary(&job(&[("vm", 8), ("vm", 8)])), "2 ranks on 1 host (vm: 2)");
        // Round robin placement: hosts in the order of their first rank, counted whole.
        assert_eq!(summary(&job(&[("a", 8), ("b", 8), ("a", 8)])), "3 ranks on 2 hosts (a: 2, b: 1)");
    }

    #[test]
    fn uneven_hosts_show_their_pools() {
        let s = summary(&job(&[("h1", 6), ("h1", 6), ("h1", 6), ("h1", 6), ("h2", 8)]));
        assert_eq!(s, "5 ranks on 2 hosts (h1: 4, h2: 1); pool by host: h1 6, h2 8");
    }

    #[test]
    fn many_hosts_are_summed_up() {
        let mut layout = Vec::new();
        for h in 0..10 {
            for _ in 0..(1 + h % 3) {
                layout.push((format!("n{h:02}"), 8));
            }
        }
        let records: Vec<(String, u32)> = layout;
        let s = summary(&records);
        assert_eq!(s, "19 ranks on 10 hosts (n00: 1, n01: 2, n02: 3, n03: 1, … 6 more; 1..3 ranks per host)");
    }
}
