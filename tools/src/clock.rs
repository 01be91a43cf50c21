//! The profile's clock: one timestamp when a call enters MPI and one when it leaves, so it must cost
//! little. On x86-64, where Linux itself keeps time with the TSC (its clocksource is `tsc`: the counter
//! is constant-rate and the same on every core), a timestamp is one `rdtsc` (10.6 ns here, against
//! 22.8 ns for `clock_gettime`); elsewhere `CLOCK_MONOTONIC`. Ticks become nanoseconds by the ratio of
//! ticks to `CLOCK_MONOTONIC` nanoseconds between [`start`] and [`stop`] (the whole run), so no
//! calibration loop delays `MPI_Init`.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static TSC: AtomicBool = AtomicBool::new(false);
/// (ticks, ns) at `start`, and at `stop`.
static START: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static STOP: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

use mpixstream_wrappers::os::monotonic_ns;

/// A timestamp in ticks (TSC cycles, or nanoseconds where the TSC is not used).
#[inline]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if TSC.load(Ordering::Relaxed) {
        return mpixstream_wrappers::os::tsc();
    }
    monotonic_ns()
}

/// Chooses the time source and marks the start (at `MPI_Init`).
pub fn start() {
    let tsc = cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc");
    TSC.store(tsc, Ordering::Relaxed);
    START[0].store(now(), Ordering::Relaxed);
    START[1].store(monotonic_ns(), Ordering::Relaxed);
}

/// Marks the end of the measured span (at `MPI_Finalize`, before the report).
pub fn stop() {
    STOP[0].store(now(), Ordering::Relaxed);
    STOP[1].store(monotonic_ns(), Ordering::Relaxed);
}

/// The name of the time source, for the report.
pub fn source() -> &'static str {
    if TSC.load(Ordering::Relaxed) {
        "tsc"
    } else {
        "clock_monotonic"
    }
}

/// Nanoseconds per tick over the measured span.
pub fn ns_per_tick() -> f64 {
    let ticks = STOP[0].load(Ordering::Relaxed).saturating_sub(START[0].load(Ordering::Relaxed));
    let ns = STOP[1].load(Ordering::Relaxed).saturating_sub(START[1].load(Ordering::Relaxed));
    if ticks == 0 || ns == 0 || !TSC.load(Ordering::Relaxed) {
        1.0
    } else {
        ns as f64 / ticks as f64
    }
}

/// The tick count at `start`: timestamps are kept relative to it.
pub fn origin() -> u64 {
    START[0].load(Ordering::Relaxed)
}

/// `CLOCK_MONOTONIC` at `start`, in ns: the origin of the timeline's times (ranks on one host share it).
pub fn origin_ns() -> u64 {
    START[1].load(Ordering::Relaxed)
}

/// The measured span in ns.
pub fn span_ns() -> u64 {
    STOP[1].load(Ordering::Relaxed).saturating_sub(START[1].load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_nanoseconds_over_the_span() {
        start();
        let t0 = now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let t1 = now();
        stop();
        let ns = (t1 - t0) as f64 * ns_per_tick();
        // 20 ms of sleep: at least that, and not absurdly more on a busy machine.
        assert!((19.0e6..2.0e9).contains(&ns), "{ns} ns");
        assert!(span_ns() >= 19_000_000);
    }
}
