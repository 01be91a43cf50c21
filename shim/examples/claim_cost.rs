//! The cost of an uncontended claim of a stream's endpoint (`StreamSlot::claim` and its release), the
//! price every call on a stream communicator pays (docs/performance.md, "Ownership claims"): the median
//! of REPS timed loops of N claim-and-release pairs, in nanoseconds per pair, against the same loop
//! without the claim. No MPI involved.
//!   cargo run --release --example claim_cost [N] [REPS]
use mpixstream::streams::{RequestPools, StreamTable};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000_000);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9);
    let table = StreamTable::new(1, RequestPools::NONE);
    let slot = table.slot(table.allocate().expect("one slot"));
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut work = 0u64;
    for _ in 0..reps {
        let t = Instant::now();
        for i in 0..n {
            let _claim = black_box(slot.claim());
            work = black_box(work.wrapping_add(i));
        }
        with.push(t.elapsed().as_secs_f64() * 1e9 / n as f64);
        let t = Instant::now();
        for i in 0..n {
            work = black_box(work.wrapping_add(i));
        }
        without.push(t.elapsed().as_secs_f64() * 1e9 / n as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (w, o) = (median(&mut with), median(&mut without));
    println!(
        "claim + release: {:.2} ns per pair (loop {:.2} ns with it, {:.2} ns without; median of {reps} x {n}; {})",
        w - o,
        w,
        o,
        work % 2
    );
}
