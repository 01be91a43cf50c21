//! Values of ours that MPI keeps as a word (an attribute value, a generalized request's extra state) and
//! hands back to our callbacks: one `Arc` reference, which MPI owns from the call that takes the word
//! until the callback that ends its hold (a delete or free function) gives it back.
//!
//! [`give`] makes the word as a [`Given`], which the call that hands it over settles: [`Given::taken`]
//! where MPI kept it, [`Given::refused`] (the reference back, safely: no word ever left) where it did not.
//! The callbacks reach the value with [`lend`] (borrowed for one closure: none keeps it past its own
//! return) and end MPI's hold with [`take_back`]; both are `unsafe`, their obligation the one thing only
//! the callback knows: the word is one of ours and MPI still holds it.
use super::Opaque;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::raw::c_void;
use std::sync::Arc;

/// A reference to a `T`, as the word MPI is about to keep. Dropped unsettled, the reference leaks (never
/// a double free).
#[must_use = "settle it: `taken` where MPI kept the word, `refused` where it did not"]
pub struct Given<T> {
    word: *mut c_void,
    _value: PhantomData<Arc<T>>,
}

/// One more reference to `value`, as a word for MPI.
pub fn give<T>(value: &Arc<T>) -> Given<T> {
    Given { word: Arc::into_raw(value.clone()) as *mut c_void, _value: PhantomData }
}

impl<T> Given<T> {
    /// The word to hand to MPI.
    pub fn word(&self) -> Opaque {
        Opaque(self.word)
    }

    /// MPI kept the word: the reference is MPI's until a callback takes it back (a `Given` owns
    /// nothing when dropped).
    pub fn taken(self) {}

    /// MPI did not keep the word: the reference is ours again.
    pub fn refused(self) -> Arc<T> {
        let word = ManuallyDrop::new(self).word;
        // SAFETY: `word` is the `Arc::into_raw` of `give`, which nobody else took (MPI refused it, and a
        // `Given` settles once: `self` is consumed).
        unsafe { Arc::from_raw(word as *const T) }
    }
}

/// `f` of the value behind `word`, borrowed for the call of `f` only.
///
/// # Safety
/// `word` came from [`give`] for a `T` and MPI still holds it: the callback that ends its hold
/// ([`take_back`]) has not run, and does not run during `f` (MPI calls a keyval's or a request's callbacks
/// one at a time for one word, and `f` makes no call that frees its owner).
pub unsafe fn lend<T, R>(word: *mut c_void, f: impl FnOnce(&Arc<T>) -> R) -> R {
    // SAFETY: the caller's promise: a live reference MPI holds for the whole call; wrapped so that this
    // borrow never drops it.
    let value = ManuallyDrop::new(unsafe { Arc::from_raw(word as *const T) });
    f(&value)
}

/// MPI's reference behind `word`, back to us (its hold ends: a delete or free callback).
///
/// # Safety
/// `word` came from [`give`] for a `T`, MPI took it ([`Given::taken`]), and this is the one callback that
/// ends its hold: it runs once per word.
pub unsafe fn take_back<T>(word: *mut c_void) -> Arc<T> {
    // SAFETY: the caller's promise: the reference `give` made, owned by MPI until now, taken back once.
    unsafe { Arc::from_raw(word as *const T) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_lends_and_comes_back_once() {
        let value = Arc::new(7);
        let refused = give(&value).refused();
        assert_eq!((Arc::strong_count(&value), *refused), (2, 7));
        drop(refused);
        let given = give(&value);
        let word = given.word().0;
        given.taken();
        // SAFETY: a word of `give`, held (taken above) until `take_back` below.
        assert_eq!(unsafe { lend(word, |v: &Arc<i32>| **v + 1) }, 8);
        assert_eq!(Arc::strong_count(&value), 2);
        // SAFETY: the one end of that hold.
        drop(unsafe { take_back::<i32>(word) });
        assert_eq!(Arc::strong_count(&value), 1);
    }
}
