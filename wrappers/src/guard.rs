//! The one panic guard of every C entry point of both libraries: a Rust panic never crosses the C
//! boundary; it is reported and turned into `MPI_ERR_INTERN`. The generated interposers
//! ([`crate::interpose`], [`crate::tools`]) wrap their bodies in it, the hand-written entry points call
//! it themselves. On the path that does not panic it costs next to nothing (`catch_unwind` of a closure
//! that returns normally is a call through a landing pad).
use crate::ffi::MPI_ERR_INTERN;
use std::os::raw::c_int;

#[inline(always)]
pub fn ffi_guard(func: &str, body: impl FnOnce() -> c_int) -> c_int {
    guard_with(func, MPI_ERR_INTERN, body)
}

/// The same guard for an entry point whose result is not an MPI error code (a query returning -1 for
/// "none", a callback returning nothing): `on_panic` is what it returns after the report.
#[inline(always)]
pub fn guard_with<T>(func: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(cause) => {
            report(func, cause);
            on_panic
        }
    }
}

#[cold]
#[inline(never)]
fn report(func: &str, cause: Box<dyn std::any::Any + Send>) -> c_int {
    let what = cause
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| cause.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into());
    crate::say!("mpixstream: internal error in {func}: {what}");
    MPI_ERR_INTERN
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_becomes_mpi_err_intern() {
        assert_eq!(super::ffi_guard("test", || panic!("on purpose")), crate::ffi::MPI_ERR_INTERN);
        assert_eq!(super::ffi_guard("test", || 7), 7);
        assert_eq!(super::guard_with("test", -1, || -> i32 { panic!("on purpose") }), -1);
    }
}
