//! Unit tests of `endpoints`: every layout's routes, sources and send table against each other, for
//! many process counts and index counts (fake handles, no MPI).
use super::*;

/// Every (sender, source index, receiver, destination index) of `n` processes with `s` indices each.
fn messages(n: usize, s: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    (0..n).flat_map(move |a| (0..n).flat_map(move |b| (0..s).flat_map(move |i| (0..s).map(move |j| (a, b, i, j)))))
}

#[test]
fn bits_and_cost() {
    assert_eq!(rank_bits(1), 0);
    assert_eq!(rank_bits(2), 1);
    assert_eq!(rank_bits(4), 2);
    assert_eq!(rank_bits(5), 3);
    assert_eq!(streams_layout_cost(4, 4), 8 + 12 * 2);
    assert_eq!(choose_layout(true, 4, 4), Layout::Streams);
    assert_eq!(choose_layout(false, 4, 4), Layout::Pooled);
    assert_eq!(choose_layout(true, 64, 16), Layout::Pooled);
    assert_eq!(choose_layout(true, 4, 0), Layout::Pooled);
}

/// Every (sender, source index, receiver, destination index) goes through exactly one hidden
/// communicator, in which the sender attached its source index and the receiver its destination
/// index; the receiver finds it among its sources for that index and decodes the right source
/// index; self messages between two indices use the pooled one.
#[test]
fn every_pair_has_one_comm_with_the_right_streams() {
    for n in 1..=9usize {
        for s in 1..=4usize {
            let eps: Vec<Endpoints> = (0..n).map(|r| Endpoints::fake(Layout::Streams, r as c_int, n, s)).collect();
            let counts = vec![s as c_int; n];
            for (a, b, i, j) in messages(n, s) {
                let r = eps[a].route(a as c_int, i, b as c_int, j);
                let src = eps[b].sources(j, &counts);
                let found: Vec<&Source> = src.iter().filter(|x| x.comm == r.comm).collect();
                assert_eq!(found.len(), 1, "n={n} s={s} {a}({i}) -> {b}({j})");
                let tag = if r.tag_in_tag { 7 * s as c_int + i as c_int } else { 7 };
                assert_eq!(found[0].index.decode(a as c_int, tag, s as c_int), (7, i as c_int));
                if a == b && i != j {
                    assert!(r.tag_in_tag);
                    continue;
                }
                assert!(!r.tag_in_tag);
                assert_eq!(eps[a].attached(a as c_int, r.comm), Some(i));
                assert_eq!(eps[b].attached(b as c_int, r.comm), Some(j));
                // Both ends agree on the communicator.
                assert_eq!(eps[b].route(a as c_int, i, b as c_int, j), r);
            }
            // Every communicator a process receives on for j is one where it attached j.
            for (r, ep) in eps.iter().enumerate() {
                for j in 0..s {
                    for x in ep.sources(j, &counts).iter().filter(|x| x.comm != 1000 + j as MPI_Comm) {
                        assert_eq!(ep.attached(r as c_int, x.comm), Some(j));
                    }
                }
            }
        }
    }
}

/// With conventional (`MPIX_STREAM_NULL`) indices: a message with an end on one takes `P_j` with the
/// source index in the tag, every other keeps the streams' communicator; the receiver finds each
/// exactly once among its sources, and a conventional index receives on `P_j` only.
#[test]
fn conventional_indices_take_the_pooled_communicator() {
    for n in 1..=6usize {
        for s in 1..=4usize {
            // rank r has no stream at index (r % s) when r is odd, and at index s - 1 when r % 3 == 2
            let real: Vec<u64> = (0..n)
                .map(|r| {
                    let mut m = (1u64 << s) - 1;
                    if r % 2 == 1 {
                        m &= !(1 << (r % s));
                    }
                    if r % 3 == 2 {
                        m &= !(1 << (s - 1));
                    }
                    m
                })
                .collect();
            let has = |r: usize, i: usize| (real[r] >> i) & 1 == 1;
            let eps: Vec<Endpoints> = (0..n)
                .map(|r| {
                    let mut e = Endpoints::fake(Layout::Streams, r as c_int, n, s);
                    e.set_conventional(real.clone().into_boxed_slice());
                    e
                })
                .collect();
            let counts = vec![s as c_int; n];
            for (a, b, i, j) in messages(n, s) {
                let r = eps[a].route(a as c_int, i, b as c_int, j);
                assert_eq!(eps[b].route(a as c_int, i, b as c_int, j), r);
                let src = eps[b].sources(j, &counts);
                let found: Vec<&Source> = src.iter().filter(|x| x.comm == r.comm).collect();
                assert_eq!(found.len(), 1, "n={n} s={s} {a}({i}) -> {b}({j})");
                let tag = if r.tag_in_tag { 7 * s as c_int + i as c_int } else { 7 };
                assert_eq!(found[0].index.decode(a as c_int, tag, s as c_int), (7, i as c_int));
                if !has(a, i) || !has(b, j) || (a == b && i != j) {
                    assert!(r.tag_in_tag && r.comm == 1000 + j as MPI_Comm, "{a}({i}) -> {b}({j})");
                } else {
                    assert!(!r.tag_in_tag);
                    assert_eq!(eps[a].attached(a as c_int, r.comm), Some(i));
                    assert_eq!(eps[b].attached(b as c_int, r.comm), Some(j));
                }
            }
            for (r, ep) in eps.iter().enumerate() {
                for j in (0..s).filter(|&j| !has(r, j)) {
                    assert_eq!(ep.sources(j, &counts).len(), 1, "a conventional index receives on P_j only");
                }
            }
        }
    }
}

/// Dedicated endpoints (split backend): a message between two processes, or from an index to itself,
/// goes through exactly one hidden communicator, in which the sender attached its source index and
/// the receiver its destination index; one between two indices of one process is local (never an
/// MPI message, 0 in the send table); and on each process every hidden communicator, hence every
/// endpoint it took, is attached to exactly one local index: only that index's thread drives it.
#[test]
fn dedicated_endpoints_route_and_each_has_one_owner() {
    for n in 1..=6usize {
        for s in 1..=4usize {
            let eps: Vec<Endpoints> = (0..n).map(|r| Endpoints::fake_dedicated(r as c_int, n, s)).collect();
            let counts = vec![s as c_int; n];
            for a in 0..n {
                let table = eps[a].send_table(&counts, s);
                for b in 0..n {
                    for i in 0..s {
                        for j in 0..s {
                            let r = eps[a].route(a as c_int, i, b as c_int, j);
                            let word = table[(b * s + j) * s + i];
                            if a == b && i != j {
                                assert_eq!(r, Route::LOCAL, "n={n} s={s} {a}({i}) -> {b}({j})");
                                assert_eq!(word, 0);
                                continue;
                            }
                            assert_eq!(Route::unpack(word), r);
                            assert!(!r.tag_in_tag);
                            let found = eps[b].sources(j, &counts).iter().filter(|x| x.comm == r.comm).count();
                            assert_eq!(found, 1, "n={n} s={s} {a}({i}) -> {b}({j})");
                            assert_eq!(eps[a].attached(a as c_int, r.comm), Some(i));
                            assert_eq!(eps[b].attached(b as c_int, r.comm), Some(j));
                        }
                    }
                }
                let owners: Vec<(MPI_Comm, Option<usize>)> = eps[a].attached_indices().collect();
                assert_eq!(owners.len(), dedicated_cost(n, s), "n={n} s={s}: one endpoint per hidden communicator");
                assert!(owners.iter().all(|&(c, i)| c != MPI_COMM_NULL && i.is_some()));
                for j in 0..s {
                    assert!(eps[a].sources(j, &counts).iter().all(|x| eps[a].attached(a as c_int, x.comm) == Some(j)));
                }
            }
        }
    }
}

/// The send table holds exactly `try_route` for valid pairs and 0 elsewhere.
#[test]
fn send_table_matches_the_routes() {
    let counts: Vec<c_int> = vec![3, 1, 0, 2];
    for layout in [Layout::Streams, Layout::Pooled] {
        for me in 0..counts.len() {
            let ep = Endpoints::fake(layout, me as c_int, counts.len(), 3);
            let local = counts[me] as usize;
            let t = ep.send_table(&counts, local);
            assert_eq!(t.len(), counts.len() * 9);
            for dest in 0..counts.len() {
                for di in 0..3 {
                    for si in 0..3 {
                        let w = t[(dest * 3 + di) * 3 + si];
                        if si < local && (di as c_int) < counts[dest] {
                            assert_eq!(Route::unpack(w), ep.route(me as c_int, si, dest as c_int, di));
                        } else {
                            assert_eq!(w, 0);
                        }
                    }
                }
            }
        }
    }
    let big = Endpoints::fake(Layout::Pooled, 0, 2000, 3);
    assert!(big.send_table(&vec![3; 2000], 3).is_empty());
}

#[test]
fn pooled_layout_routes_by_destination_index() {
    let ep = Endpoints::fake(Layout::Pooled, 1, 4, 3);
    assert_eq!(ep.route(1, 2, 0, 1), Route { comm: 1001, tag_in_tag: true });
    assert_eq!(ep.sources(2, &[3; 4]).len(), 1);
    assert_eq!(ep.count(), 3);
}

/// A receiver probes only what some sender can reach it through: with counts that differ, every
/// route to `(b, j)` from an index that exists is among `b`'s sources for `j`, and nothing else
/// is. A process with one index and no conventional index has no `P_j` to probe (nobody routes a
/// message there); a process with several has it (its messages to itself between them).
#[test]
fn sources_are_exactly_the_communicators_senders_use() {
    for counts in [vec![1, 4], vec![4, 1], vec![2, 0, 3], vec![1, 1, 1, 1, 1], vec![3, 1, 2, 4, 1, 2, 1]] {
        let n = counts.len();
        let s = *counts.iter().max().unwrap() as usize;
        let eps: Vec<Endpoints> = (0..n).map(|r| Endpoints::fake(Layout::Streams, r as c_int, n, s)).collect();
        for b in 0..n {
            for j in 0..counts[b] as usize {
                let want: std::collections::BTreeSet<MPI_Comm> = (0..n)
                    .flat_map(|a| (0..counts[a] as usize).map(move |i| (a, i)))
                    .map(|(a, i)| eps[a].route(a as c_int, i, b as c_int, j).comm)
                    .collect();
                let got: Vec<MPI_Comm> = eps[b].sources(j, &counts).iter().map(|x| x.comm).collect();
                assert_eq!(got.len(), want.len(), "{counts:?}: {b}({j}) probes {got:?}, senders use {want:?}");
                assert!(got.iter().all(|c| want.contains(c)), "{counts:?}: {b}({j})");
                assert_eq!(got.contains(&(1000 + j as MPI_Comm)), counts[b] >= 2, "{counts:?}: P_{j} of {b}");
            }
        }
    }
    // The N-to-1 benchmark's receiver: one index, four senders' indices on one peer: exactly the
    // four communicators of the pairs (0 -> 0 on D_0, i -> 0 on C_{0,i,0}).
    let ep = Endpoints::fake(Layout::Streams, 0, 2, 4);
    assert_eq!(ep.sources(0, &[1, 4]).len(), 4);
}

/// What the tools library is told about each hidden communicator (`attached_indices`): a
/// message's communicator is listed with the sender's source index on the sender and with the
/// receiver's destination index on the receiver; the `P_j` with none; nothing twice.
#[test]
fn attached_indices_name_each_end_of_a_message() {
    for layout in [Layout::Streams, Layout::Pooled] {
        for n in 1..=5usize {
            for s in 1..=3usize {
                let eps: Vec<Endpoints> = (0..n).map(|r| Endpoints::fake(layout, r as c_int, n, s)).collect();
                let maps: Vec<std::collections::HashMap<MPI_Comm, Option<usize>>> =
                    eps.iter().map(|e| e.attached_indices().collect()).collect();
                assert_eq!(maps[0].len(), eps[0].count(), "{layout:?} n={n} s={s}: each once");
                for (a, b, i, j) in messages(n, s) {
                    let r = eps[a].route(a as c_int, i, b as c_int, j);
                    let (on_a, on_b) = if r.tag_in_tag { (None, None) } else { (Some(i), Some(j)) };
                    assert_eq!(maps[a][&r.comm], on_a, "{layout:?} n={n} s={s} {a}({i}) -> {b}({j})");
                    assert_eq!(maps[b][&r.comm], on_b, "{layout:?} n={n} s={s} {a}({i}) -> {b}({j})");
                }
            }
        }
    }
}
