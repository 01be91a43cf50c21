//! The enqueue engine's settings, from `MPIXSTREAM_*` variables, read once by [`config`] (the one
//! place that reads them; docs/enqueue.md lists them).
use super::cuda::SyncMode;
use std::sync::OnceLock;
use std::time::Duration;

pub struct EnqConfig {
    /// `MPIXSTREAM_THREAD_MULTIPLE=1`: our `MPI_Init*` asks MPICH for `MPI_THREAD_MULTIPLE`.
    pub thread_multiple: bool,
    /// `MPIXSTREAM_FINALIZE_TIMEOUT` (seconds): how long `MPI_Finalize` waits for enqueued work.
    pub finalize_timeout: Duration,
    /// `MPIXSTREAM_ENQUEUE_SPIN`: turns a waiting thread spins (`spin_loop`) before it yields.
    pub spin: u32,
    /// `MPIXSTREAM_ENQUEUE_YIELD_US`: how long a waiting thread then yields its core before it sleeps.
    pub yield_for: Duration,
    /// `MPIXSTREAM_GPU_AWARE=1`: the MPI library takes device pointers (no staging).
    pub gpu_aware: bool,
    /// `MPIXSTREAM_CUDA_SYNC=auto|memops|hostfn`.
    pub cuda_sync: SyncMode,
}

fn env_flag(name: &str) -> bool {
    matches!(std::env::var(name).as_deref().map(str::trim), Ok("1") | Ok("yes") | Ok("true"))
}

pub fn config() -> &'static EnqConfig {
    static CONFIG: OnceLock<EnqConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let finalize_timeout = std::env::var("MPIXSTREAM_FINALIZE_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(10));
        // Spinning pays where cores are spare; on a small or oversubscribed machine every spinning
        // thread delays the one it waits for, so the defaults scale with the cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let num =
            |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default);
        let spin = num("MPIXSTREAM_ENQUEUE_SPIN", if cores >= 8 { 2000 } else { 0 }) as u32;
        let yield_for = Duration::from_micros(num("MPIXSTREAM_ENQUEUE_YIELD_US", if cores >= 8 { 200 } else { 100 }));
        let cuda_sync = match std::env::var("MPIXSTREAM_CUDA_SYNC").as_deref().map(str::trim) {
            Ok("memops") => SyncMode::Memops,
            Ok("hostfn") => SyncMode::HostFn,
            _ => SyncMode::Auto,
        };
        EnqConfig {
            thread_multiple: env_flag("MPIXSTREAM_THREAD_MULTIPLE"),
            finalize_timeout,
            spin,
            yield_for,
            gpu_aware: env_flag("MPIXSTREAM_GPU_AWARE"),
            cuda_sync,
        }
    })
}
