//! The enqueue engine's settings: parsed strictly at `MPI_Init*` with every other setting
//! (`crate::config`, the one table); the defaults left open there (spin and yield, "by core count")
//! are chosen here, once (docs/enqueue.md lists the variables).
use super::cuda::SyncMode;
use crate::config::CudaSync;
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

pub fn config() -> &'static EnqConfig {
    static CONFIG: OnceLock<EnqConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        // Between MPI_Init and MPI_Finalize the runtime holds the parsed settings; outside (never on
        // a path that runs MPI) the defaults.
        let s = crate::runtime::active()
            .map(|rt| rt.config.enqueue.clone())
            .unwrap_or_else(|| crate::config::Config::from_lookup(|_| None).expect("the defaults parse").enqueue);
        // Spinning pays where cores are spare; on a small or oversubscribed machine every spinning
        // thread delays the one it waits for, so the defaults scale with the cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        EnqConfig {
            thread_multiple: s.thread_multiple,
            finalize_timeout: s.finalize_timeout,
            spin: s.spin.unwrap_or(if cores >= 8 { 2000 } else { 0 }),
            yield_for: s.yield_for.unwrap_or(Duration::from_micros(if cores >= 8 { 200 } else { 100 })),
            gpu_aware: s.gpu_aware,
            cuda_sync: match s.cuda_sync {
                CudaSync::Auto => SyncMode::Auto,
                CudaSync::Memops => SyncMode::Memops,
                CudaSync::HostFn => SyncMode::HostFn,
            },
        }
    })
}
