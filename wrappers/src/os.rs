//! What the libraries ask of the operating system, safely: the host's name, the free space of
//! `/dev/shm`, the calling thread's id, the clocks.
use std::os::raw::c_char;

/// This host's name (the UTS namespace's: a simulated host has its own), at most `max` bytes.
pub fn hostname(max: usize) -> Vec<u8> {
    let mut name = [0u8; 256];
    // SAFETY: `gethostname` writes at most `name.len() - 1` bytes into `name`, a live local (the last byte
    // stays 0, so the name is terminated even where it was cut).
    if unsafe { libc::gethostname(name.as_mut_ptr() as *mut c_char, name.len() - 1) } != 0 {
        return Vec::new();
    }
    let len = name.iter().position(|&b| b == 0).unwrap_or(0).min(max);
    name[..len].to_vec()
}

/// The bytes free to an unprivileged user in the file system holding `/dev/shm` (MPICH's shared memory).
pub fn shm_free() -> Option<u64> {
    // SAFETY: `statvfs` is a plain C struct of integers, for which all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live, writable `statvfs` for the call to fill.
    let rc = unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// The calling thread's kernel id (never 0).
pub fn thread_id() -> u32 {
    // SAFETY: `gettid` takes no argument and cannot fail.
    (unsafe { libc::syscall(libc::SYS_gettid) } as u32).max(1)
}

/// A word unique to the calling thread among live threads, never 0, read in one instruction where the
/// architecture keeps the thread pointer in a register (x86-64: the TCB's self pointer at `%fs:0`;
/// AArch64: `TPIDR_EL0`); elsewhere the address of a thread-local. A thread-local's address in a
/// shared library costs a call to `__tls_get_addr` (about ten instructions), which every claim of an
/// endpoint would pay (benches/claim_cost.sh).
#[inline(always)]
pub fn thread_pointer() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux, glibc and musl keep the thread control block's own address in its first
        // word, at `%fs:0`, for as long as the thread lives; the load reads only that word.
        unsafe { std::arch::asm!("mov {}, qword ptr fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
        tp
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: reads the thread pointer register, which the C library sets per thread and never 0.
        unsafe { std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags)) };
        tp
    }
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), target_os = "linux")))]
    {
        thread_local! {
            static TOKEN: u8 = const { 0 };
        }
        TOKEN.with(|t| t as *const u8 as usize)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a live `timespec` for the call to fill; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The x86-64 time-stamp counter (`rdtsc`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tsc() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter: no memory, no precondition on any x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The files under `/dev/shm` whose name starts with `prefix` that this process maps now (from
/// `/proc/self/maps`), each once.
pub fn mapped_shm(prefix: &str) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut found: Vec<String> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.strip_prefix("/dev/shm/").is_some_and(|name| name.starts_with(prefix)))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Runs `f` when the process exits normally (`exit`, or a return from `main`), after the handlers
/// registered later. `false` where the C library has no room for another handler.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain function with no arguments, callable at any time, as `atexit` requires;
    // registering it has no other effect.
    unsafe { libc::atexit(f) == 0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_system_answers() {
        assert!(!super::hostname(64).is_empty());
        assert!(super::thread_id() >= 1);
        let a = super::monotonic_ns();
        assert!(super::monotonic_ns() >= a);
        assert!(super::shm_free().is_some());
    }
}

#[cfg(test)]
mod thread_pointer_tests {
    use super::thread_pointer;

    #[test]
    fn one_word_per_live_thread() {
        let here = thread_pointer();
        assert_ne!(here, 0);
        assert_eq!(here, thread_pointer(), "stable within a thread");
        let barrier = std::sync::Barrier::new(2);
        let (a, b) = std::thread::scope(|s| {
            let one = s.spawn(|| {
                barrier.wait();
                let t = thread_pointer();
                barrier.wait();
                t
            });
            let two = s.spawn(|| {
                barrier.wait();
                let t = thread_pointer();
                barrier.wait();
                t
            });
            (one.join().unwrap(), two.join().unwrap())
        });
        assert!(a != b && a != here && b != here && a != 0 && b != 0, "{here:#x} {a:#x} {b:#x}");
    }
}
