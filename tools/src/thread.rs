//! The calling thread's identity, as the check and the request tracking name it.
use std::cell::Cell;

thread_local! {
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// The calling thread's kernel id (never 0, so 0 can mean "no thread").
#[inline]
pub fn thread_id() -> u32 {
    TID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let id = mpixstream_wrappers::os::thread_id();
        t.set(id);
        id
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_thread_and_differ_between_threads() {
        let me = thread_id();
        assert_ne!(me, 0);
        assert_eq!(thread_id(), me);
        let other = std::thread::spawn(thread_id).join().unwrap();
        assert_ne!(other, 0);
        assert_ne!(other, me);
    }
}
