//! The application's pointer arguments, as an interposer received them: the one place their validity is
//! asserted. A generated interposer wraps each pointer it hands a hook or a fix: one value as an
//! [`AppArg`] (a `T *`) or an [`AppIn`] (a `const T *`), an array as an [`AppArray`] or an [`AppInArray`]
//! (with its length), each tied to a [`CallScope`] local to the interposer; the hooks and fixes are safe
//! functions that read and write those arguments through them, and forward them to MPI through the
//! generated safe forwarders (`forwarders!`, `crate::forward`). A one-value argument is a pointer and
//! nothing else, so an interposer that only forwards its arguments pays nothing for wrapping them.
//!
//! The contract the interposer asserts when it wraps an argument (`new`) is MPI's on the application: the
//! pointer is null, one of MPI's sentinels, or valid as MPI requires of that argument for the call; one
//! value, or an array's `len` elements (the row's `count` or `incount`; 0 where MPI takes the length from
//! elsewhere), may be read and written while the call runs, and a buffer is valid for the application's
//! own count and datatype. What holds it up here:
//! - nothing of ours keeps a reference into the application's memory: every read and write is a copy
//!   through the pointer ([`AppArg::get`], [`AppArg::set`], [`AppArray::iter`]), so MPI may write the same
//!   memory between two of them;
//! - null and MPICH's `MPI_STATUS(ES)_IGNORE` are never read or written (checked when read);
//! - an argument lives no longer than its interposer's `CallScope` (the lifetime `'call`): a hook cannot
//!   keep one past the call;
//! - the forwarders pass a buffer on with the count and datatype beside it, which the code forwarding it
//!   takes from the same call (the application's own, as every route here does).
use crate::ffi::MPI_STATUS_IGNORE;
use std::marker::PhantomData;
use std::os::raw::c_void;

/// The scope of one interposed call: each argument wrapped in it borrows it, so none outlives the call.
pub struct CallScope(());

impl CallScope {
    #[inline(always)]
    #[allow(clippy::new_without_default)] // one per interposed call, made by the generated code
    pub fn new() -> CallScope {
        CallScope(())
    }
}

/// Whether an argument points to memory: not null, and not MPICH's `MPI_STATUS(ES)_IGNORE` (the address
/// 1, never mapped). Checked when an argument is read, never when it is made.
#[inline(always)]
fn points_to_memory<T>(p: *const T) -> bool {
    !p.is_null() && p.cast::<c_void>() != MPI_STATUS_IGNORE.cast::<c_void>().cast_const()
}

fn length(len: i64) -> usize {
    usize::try_from(len).unwrap_or(0)
}

macro_rules! copy_type {
    ($name:ident) => {
        impl<T> Clone for $name<'_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<'_, T> {}
    };
}

/// A `T *` argument of the application's call holding one value (a flag, a request, a status, a
/// communicator), or a buffer handed on (`T` = `c_void`); or a local of ours ([`AppArg::local`]).
pub struct AppArg<'call, T> {
    p: *mut T,
    _call: PhantomData<&'call mut T>,
}
copy_type!(AppArg);

/// A `const T *` argument of the application's call holding one value, or a buffer handed on.
pub struct AppIn<'call, T> {
    p: *const T,
    _call: PhantomData<&'call T>,
}
copy_type!(AppIn);

/// A `T []` argument of the application's call (requests, statuses, indices), `len` elements of which
/// may be read and written.
pub struct AppArray<'call, T> {
    p: *mut T,
    len: usize,
    _call: PhantomData<&'call mut [T]>,
}
copy_type!(AppArray);

/// A `const T []` argument of the application's call, `len` elements of which may be read.
pub struct AppInArray<'call, T> {
    p: *const T,
    len: usize,
    _call: PhantomData<&'call [T]>,
}
copy_type!(AppInArray);

impl<'call, T> AppArg<'call, T> {
    /// The application's argument `p`.
    ///
    /// # Safety
    /// MPI's contract on the application (module comment): `p` null, a sentinel, or valid for reading and
    /// writing one `T` (a buffer: as MPI requires of it), while `scope`'s call runs.
    #[inline(always)]
    pub unsafe fn new(_scope: &'call CallScope, p: *mut T) -> Self {
        AppArg { p, _call: PhantomData }
    }

    /// A local of ours, passed where MPI takes a `T *` (a flag, a request, a status).
    #[inline(always)]
    pub fn local(x: &'call mut T) -> Self {
        AppArg { p: x, _call: PhantomData }
    }

    /// The pointer, as the application passed it (to compare, or to hand to a call that MPI defines on it).
    #[inline(always)]
    pub fn ptr(self) -> *mut T {
        self.p
    }

    /// Whether there is no value: null, or `MPI_STATUS(ES)_IGNORE`.
    #[inline(always)]
    pub fn is_empty(self) -> bool {
        !points_to_memory(self.p)
    }

    /// The same argument as an array of one.
    #[inline(always)]
    pub fn as_array(self) -> AppArray<'call, T> {
        AppArray { p: self.p, len: 1, _call: PhantomData }
    }

    /// The same argument as read-only.
    #[inline(always)]
    pub fn as_in(self) -> AppIn<'call, T> {
        AppIn { p: self.p, _call: PhantomData }
    }
}

impl AppArg<'_, c_void> {
    /// The same buffer, with `count` elements of `datatype`, handed to an operation that completes after
    /// the call returns.
    ///
    /// # Safety
    /// As [`PendingBuf::new`]: `count` and `datatype` are the ones the call gives for this buffer, which
    /// MPI requires valid until that operation completes (a nonblocking call's buffer), and that
    /// operation is the one it goes to.
    #[inline(always)]
    pub unsafe fn pending(self, count: crate::ffi::MPI_Count, datatype: crate::ffi::MPI_Datatype) -> PendingBuf {
        PendingBuf { p: self.p, count, datatype }
    }
}

impl<T: Copy> AppArg<'_, T> {
    /// The value, `None` where there is none.
    #[inline(always)]
    pub fn get(self) -> Option<T> {
        // SAFETY: it points to memory: one `T`, valid for a read while the call runs (`new`'s contract,
        // or a local's borrow); a copy read, no reference kept.
        points_to_memory(self.p).then(|| unsafe { self.p.read() })
    }

    /// Writes the value; false where there is none.
    #[inline(always)]
    pub fn set(self, v: T) -> bool {
        if !points_to_memory(self.p) {
            return false;
        }
        // SAFETY: it points to memory: one `T`, valid for a write while the call runs (`new`'s contract,
        // or a local's borrow); a copy written, no reference made.
        unsafe { self.p.write(v) };
        true
    }
}

impl<'call, T> AppIn<'call, T> {
    /// The application's argument `p`.
    ///
    /// # Safety
    /// MPI's contract on the application (module comment): `p` null, a sentinel, or valid for reading one
    /// `T` (a buffer: as MPI requires of it), while `scope`'s call runs.
    #[inline(always)]
    pub unsafe fn new(_scope: &'call CallScope, p: *const T) -> Self {
        AppIn { p, _call: PhantomData }
    }

    /// A local of ours, passed where MPI takes a `const T *`.
    #[inline(always)]
    pub fn local(x: &'call T) -> Self {
        AppIn { p: x, _call: PhantomData }
    }

    #[inline(always)]
    pub fn ptr(self) -> *const T {
        self.p
    }

    #[inline(always)]
    pub fn is_empty(self) -> bool {
        !points_to_memory(self.p)
    }
}

impl<T: Copy> AppIn<'_, T> {
    #[inline(always)]
    pub fn get(self) -> Option<T> {
        // SAFETY: it points to memory: one `T`, valid for a read while the call runs (`new`'s contract,
        // or a local's borrow); a copy read, no reference kept.
        points_to_memory(self.p).then(|| unsafe { self.p.read() })
    }
}

impl<'call, T> AppArray<'call, T> {
    /// The application's array `p` of `len` elements (a negative length: none).
    ///
    /// # Safety
    /// MPI's contract on the application (module comment): `p` null, a sentinel, or valid for reading and
    /// writing `len` elements while `scope`'s call runs.
    #[inline(always)]
    pub unsafe fn new(_scope: &'call CallScope, p: *mut T, len: i64) -> Self {
        AppArray { p, len: length(len), _call: PhantomData }
    }

    /// Locals of ours, passed where MPI takes an array.
    #[inline(always)]
    pub fn local_slice(x: &'call mut [T]) -> Self {
        AppArray { p: x.as_mut_ptr(), len: x.len(), _call: PhantomData }
    }

    #[inline(always)]
    pub fn ptr(self) -> *mut T {
        self.p
    }

    /// How many elements may be read and written (none where the pointer is null or a sentinel).
    #[inline(always)]
    pub fn len(self) -> usize {
        if points_to_memory(self.p) {
            self.len
        } else {
            0
        }
    }

    #[inline(always)]
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Element `i` as an argument of its own (an array's element passed where MPI takes one), `None`
    /// past the end.
    #[inline(always)]
    pub fn element(self, i: usize) -> Option<AppArg<'call, T>> {
        // SAFETY: `i < len`: within the array's elements (`new`'s contract, or a local's borrow).
        (i < self.len()).then(|| AppArg { p: unsafe { self.p.add(i) }, _call: PhantomData })
    }
}

impl<'call, T: Copy> AppArray<'call, T> {
    /// Element `i`, `None` where the pointer is null or `i` past the end.
    #[inline(always)]
    pub fn at(self, i: usize) -> Option<T> {
        self.element(i).and_then(AppArg::get)
    }

    /// Writes element `i`; false where the pointer is null or `i` past the end.
    #[inline(always)]
    pub fn set_at(self, i: usize, v: T) -> bool {
        self.element(i).is_some_and(|e| e.set(v))
    }

    /// The elements, each copied when reached (the iterator, like the argument, lasts for the call only).
    #[inline(always)]
    pub fn iter(self) -> impl Iterator<Item = T> + 'call {
        (0..self.len()).filter_map(move |i| self.at(i))
    }
}

impl<'call, T> AppInArray<'call, T> {
    /// The application's array `p` of `len` elements (a negative length: none).
    ///
    /// # Safety
    /// MPI's contract on the application (module comment): `p` null, a sentinel, or valid for reading
    /// `len` elements while `scope`'s call runs.
    #[inline(always)]
    pub unsafe fn new(_scope: &'call CallScope, p: *const T, len: i64) -> Self {
        AppInArray { p, len: length(len), _call: PhantomData }
    }

    /// Locals of ours, passed where MPI takes a `const T []`.
    #[inline(always)]
    pub fn local_slice(x: &'call [T]) -> Self {
        AppInArray { p: x.as_ptr(), len: x.len(), _call: PhantomData }
    }

    #[inline(always)]
    pub fn ptr(self) -> *const T {
        self.p
    }

    #[inline(always)]
    pub fn len(self) -> usize {
        if points_to_memory(self.p) {
            self.len
        } else {
            0
        }
    }

    #[inline(always)]
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

impl<'call, T: Copy> AppInArray<'call, T> {
    #[inline(always)]
    pub fn at(self, i: usize) -> Option<T> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: non-null and `i < len`: valid for a read while the call runs (`new`'s contract, or a
        // local's borrow); a copy read, no reference kept.
        Some(unsafe { self.p.add(i).read() })
    }

    /// The elements, each copied when reached (the iterator, like the argument, lasts for the call only).
    #[inline(always)]
    pub fn iter(self) -> impl Iterator<Item = T> + 'call {
        (0..self.len()).filter_map(move |i| self.at(i))
    }
}

/// The application's buffer handed to an operation that completes after the call returns (an enqueued
/// operation's buffer, a nonblocking receive's that a multiplex engine matches later, a persistent
/// buffered send's), bound to the count and datatype its call gave for it: one value, so that safe code
/// can hand MPI the buffer only with its own count and datatype (the typed layer's `raw_buffers` calls
/// take them from here). Valid as MPI requires of it (readable for a send, writable for a receive) until
/// that operation completes, and passed to that operation only (MPI's rule on the application).
/// Neither `Copy` nor `Clone`: one operation's buffer has one holder.
///
/// A buffer and a count of safe code's choosing do not compile together:
/// ```compile_fail,E0061
/// fn wider(comm: mpixstream_wrappers::mpi::Comm, buf: &mpixstream_wrappers::app::PendingBuf) {
///     let _ = comm.irecv(buf, 1 << 20, mpixstream_wrappers::mpi::Datatype::BYTE, 0, 0);
/// }
/// ```
/// nor a second holder of one buffer:
/// ```compile_fail,E0599
/// fn twice(buf: mpixstream_wrappers::app::PendingBuf) -> (mpixstream_wrappers::app::PendingBuf, mpixstream_wrappers::app::PendingBuf) {
///     (buf.clone(), buf)
/// }
/// ```
/// while a receive into the buffer, with its own count and datatype, does:
/// ```no_run
/// fn into(comm: mpixstream_wrappers::mpi::Comm, buf: &mpixstream_wrappers::app::PendingBuf) {
///     let _ = comm.irecv(buf, 0, 0);
/// }
/// ```
pub struct PendingBuf {
    p: *mut c_void,
    count: crate::ffi::MPI_Count,
    datatype: crate::ffi::MPI_Datatype,
}

impl std::fmt::Debug for PendingBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingBuf({:p}, {} x 0x{:08x})", self.p, self.count, self.datatype as u32)
    }
}

// SAFETY: an address with its count and datatype, never dereferenced by Rust code: only MPI reads or
// writes the memory, within the one operation it is handed to, and MPI's rule keeps it valid until that
// operation completes whichever thread completes it (MPI lets any).
unsafe impl Send for PendingBuf {}
// SAFETY: shared, it is only read (address, count, datatype: plain values); the memory behind it is
// reached only through MPI, by the operation's one completion (a multiplex receive's `finish`).
unsafe impl Sync for PendingBuf {}

impl PendingBuf {
    /// The application's buffer `p` of `count` elements of `datatype`, handed to one operation that
    /// completes later.
    ///
    /// # Safety
    /// `p`, `count` and `datatype` are one buffer argument of the application's call with the count and
    /// datatype that call gives for it (as MPI pairs them: a collective's per-process count times the
    /// group size where the buffer holds one part per process is the caller's to pass as that call's
    /// own); `p` is valid as the operation requires of that buffer until it completes (MPI's rule on the
    /// application), and not handed to another operation meanwhile. `p` may be one of MPI's sentinels
    /// (`MPI_IN_PLACE`, `MPI_BOTTOM`) where the call allows it.
    #[inline(always)]
    pub unsafe fn new(p: *mut c_void, count: crate::ffi::MPI_Count, datatype: crate::ffi::MPI_Datatype) -> Self {
        PendingBuf { p, count, datatype }
    }

    /// No memory: an operation of no elements.
    #[inline(always)]
    pub fn none() -> Self {
        PendingBuf { p: std::ptr::null_mut(), count: 0, datatype: crate::ffi::MPI_BYTE }
    }

    /// The address, as the application passed it (to compare, or to stage).
    #[inline(always)]
    pub fn ptr(&self) -> *mut c_void {
        self.p
    }

    #[inline(always)]
    pub fn count(&self) -> crate::ffi::MPI_Count {
        self.count
    }

    #[inline(always)]
    pub fn datatype(&self) -> crate::ffi::MPI_Datatype {
        self.datatype
    }

    /// The same buffer at `p` instead (staging: a copy of it in other memory).
    ///
    /// # Safety
    /// `p` holds (for a send) or has room for (for a receive) this buffer's `count` elements of its
    /// `datatype`, as MPI would read or write them, and stays valid until the operation completes.
    #[inline(always)]
    pub unsafe fn retarget(&mut self, p: *mut c_void) {
        self.p = p;
    }

    /// The address as an argument of a call of its operation (to a forwarder, beside `count()` and
    /// `datatype()`).
    #[inline(always)]
    pub fn arg(&self) -> AppArg<'_, c_void> {
        AppArg { p: self.p, _call: PhantomData }
    }
}

/// Where an operation that completes after its call returns puts its status: the application's status
/// object, or nowhere (null or `MPI_STATUS_IGNORE`). Written by whichever thread completes the operation.
#[derive(Clone, Copy, Debug)]
pub struct PendingStatus(*mut crate::ffi::MPI_Status);

// SAFETY: the pointer is only written through `write`, and `PendingStatus::new`'s contract (the object
// stays writable, and untouched by the application, until the operation completes) holds on any thread.
unsafe impl Send for PendingStatus {}

impl PendingStatus {
    pub const NOWHERE: PendingStatus = PendingStatus(std::ptr::null_mut());

    /// # Safety
    /// `p` is null, `MPI_STATUS_IGNORE`, or the status object the application passed for one
    /// operation: writable, and not accessed by the application, until that operation completes (for a
    /// queued blocking call: until the queue has run it, as MPIX's enqueue semantics require).
    pub unsafe fn new(p: *mut crate::ffi::MPI_Status) -> PendingStatus {
        PendingStatus(p)
    }

    /// Stores `status` there (nothing for nowhere).
    pub fn write(self, status: crate::ffi::MPI_Status) {
        if points_to_memory(self.0) {
            // SAFETY: a real destination is writable until its operation completes (`new`'s contract);
            // it is written when the operation completes or, already complete, at its wait.
            unsafe { *self.0 = status };
        }
    }
}

impl AppArg<'_, crate::ffi::MPI_Status> {
    /// `MPI_STATUS_IGNORE`, where MPI takes a status.
    #[inline(always)]
    pub fn ignore() -> Self {
        AppArg { p: MPI_STATUS_IGNORE, _call: PhantomData }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::MPI_Status;

    #[test]
    fn arrays_read_and_write_within_their_length_only() {
        let scope = CallScope::new();
        let mut xs = [1, 2, 3];
        // SAFETY: a live array of 3, valid for the scope.
        let a = unsafe { AppArray::new(&scope, xs.as_mut_ptr(), 2) };
        assert_eq!(a.iter().collect::<Vec<_>>(), [1, 2]);
        assert!(a.set_at(1, 7) && !a.set_at(2, 9));
        assert_eq!((a.at(0), a.at(1), a.at(2)), (Some(1), Some(7), None));
        // SAFETY: null.
        let null = unsafe { AppArray::<i32>::new(&scope, std::ptr::null_mut(), 5) };
        assert_eq!((null.len(), null.at(0), null.set_at(0, 1)), (0, None, false));
        // SAFETY: a negative count: nothing to read.
        let negative = unsafe { AppInArray::new(&scope, xs.as_ptr(), -1) };
        assert!(negative.is_empty());
        assert_eq!(xs, [1, 7, 3]);
    }

    #[test]
    fn one_value_is_a_pointer_and_sentinels_are_never_read() {
        assert_eq!(std::mem::size_of::<AppArg<'_, i32>>(), std::mem::size_of::<*mut i32>());
        let scope = CallScope::new();
        // SAFETY: MPI's sentinel, never read.
        let ignored = unsafe { AppArg::new(&scope, MPI_STATUS_IGNORE) };
        assert!(ignored.is_empty() && ignored.get().is_none() && !ignored.set(MPI_Status::default()));
        assert_eq!(ignored.ptr(), MPI_STATUS_IGNORE);
        let mut s = MPI_Status { MPI_TAG: 4, ..Default::default() };
        let local = AppArg::local(&mut s);
        assert_eq!(local.get().map(|s| s.MPI_TAG), Some(4));
        assert_eq!(AppArg::ignore().ptr(), MPI_STATUS_IGNORE);
    }
}
