//! The handles mpixstream makes and so owns: one owner, freed once, by consuming it.
//!
//! An owned handle is the view ([`Comm`], [`Request`], ...) without `Copy` and `Clone`: it borrows as its
//! view for every call that does not free it, and `free(self)` consumes it, so safe code cannot free one
//! handle twice, nor free MPICH's predefined handles or the application's (those exist only as views).
//! Nothing frees one on `Drop` (a free after `MPI_Finalize`, or on a thread that MPI does not expect, is
//! wrong): an owned handle dropped unfreed leaks, as a `mem::forget` does, which is safe.
//!
//! Where the handle leaves mpixstream (a constructor's result handed to the application), `into_raw`
//! gives the `int` up with the ownership. Where an `int` becomes ours again, `from_raw` is `unsafe`: its
//! caller asserts what only it knows, that this handle is its own to free and nobody else frees it.
//!
//! A double free does not compile:
//! ```compile_fail,E0382
//! fn twice(comm: mpixstream_wrappers::mpi::OwnedComm) {
//!     let _ = comm.free();
//!     let _ = comm.free(); // `comm` was moved by the first free
//! }
//! ```
//! nor does a copy of an owned handle:
//! ```compile_fail,E0382
//! fn copied(info: mpixstream_wrappers::mpi::OwnedInfo) {
//!     let kept = info;
//!     let _ = info.free(); // `info` moved into `kept`
//!     let _ = kept.free();
//! }
//! ```
//! nor a free of a view (MPICH's `MPI_COMM_WORLD`, or the application's communicator):
//! ```compile_fail,E0599
//! let _ = mpixstream_wrappers::mpi::Comm::WORLD.free();
//! ```
//! while the one free of an owned handle, and the use of its view, do:
//! ```no_run
//! fn once(comm: mpixstream_wrappers::mpi::OwnedComm) -> mpixstream_wrappers::mpi::MpiResult {
//!     let _rank = comm.rank()?;
//!     let view: mpixstream_wrappers::mpi::Comm = *comm;
//!     let _size = view.size()?;
//!     comm.free()
//! }
//! ```
use super::{call, call_optional, check, Comm, Errhandler, Info, MpiResult, Request, Stream};
use crate::ffi::*;

macro_rules! owned {
    ($(#[$doc:meta])* $owned:ident($view:ident: $c:ty), |$h:ident| $free:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(PartialEq, Eq, Debug)]
        pub struct $owned($view);

        impl $owned {
            /// Owns `raw` from here on.
            ///
            /// # Safety
            /// `raw` is a live handle of this kind that the caller owns and gives up: not one of MPICH's
            /// predefined handles, not the application's (unless the application handed it over, as a
            /// constructor's result that never reached it), and nothing else frees it or makes another
            /// owner of it. (A wrong handle is an MPI error, not memory unsafety; what this guards is the
            /// ownership: a handle freed twice may free a later, reused one of somebody else.)
            #[inline(always)]
            pub const unsafe fn from_raw(raw: $c) -> $owned {
                $owned($view(raw))
            }

            /// Made by MPICH for us (the constructors of this module).
            #[inline(always)]
            pub(crate) const fn made(raw: $c) -> $owned {
                $owned($view(raw))
            }

            /// Gives the handle up with its ownership (to the application, or to a table that owns it by
            /// its `int`): whoever takes the `int` frees it.
            #[inline(always)]
            pub fn into_raw(self) -> $c {
                (self.0).0
            }

            /// Frees the handle (whatever the outcome, it is gone).
            pub fn free(self) -> MpiResult {
                let mut $h = (self.0).0;
                check($free)
            }
        }

        impl std::ops::Deref for $owned {
            type Target = $view;
            #[inline(always)]
            fn deref(&self) -> &$view {
                &self.0
            }
        }
    };
}

owned!(
    /// A communicator of ours (a dup, a split, a stream communicator, a topology's).
    OwnedComm(Comm: MPI_Comm),
    |c| call!(PMPI_Comm_free(&mut c))
);
owned!(
    /// A request of ours: test or wait on it through `&mut` (MPICH sets a completed one to
    /// `MPI_REQUEST_NULL`), or free it.
    OwnedRequest(Request: MPI_Request),
    |r| call!(PMPI_Request_free(&mut r))
);
owned!(
    /// An info object of ours.
    OwnedInfo(Info: MPI_Info),
    |i| call!(PMPI_Info_free(&mut i))
);
owned!(
    /// An MPIX stream of ours (MPICH >= 4.1).
    OwnedStream(Stream: MPIX_Stream),
    |s| call_optional!(PMPIX_Stream_free(&mut s))
);
owned!(
    /// An error handler reference of ours (`MPI_Comm_get_errhandler`'s result).
    OwnedErrhandler(Errhandler: MPI_Errhandler),
    |e| call!(PMPI_Errhandler_free(&mut e))
);

/// An owned communicator that several holders reach (a record in an `Arc`, a table read without a
/// lock): each reads its view, one takes it to free it (a swap: once). Empty: `MPI_COMM_NULL`.
#[derive(Debug)]
pub struct SharedComm(std::sync::atomic::AtomicI32);

impl SharedComm {
    pub const fn empty() -> SharedComm {
        SharedComm(std::sync::atomic::AtomicI32::new(MPI_COMM_NULL))
    }

    pub fn new(comm: OwnedComm) -> SharedComm {
        SharedComm(std::sync::atomic::AtomicI32::new(comm.into_raw()))
    }

    /// The communicator's view (`Comm::NULL` once taken): one acquire load.
    #[inline(always)]
    pub fn view(&self) -> Comm {
        Comm(self.0.load(std::sync::atomic::Ordering::Acquire))
    }

    /// The communicator, to free: `None` where it is empty or was taken.
    pub fn take(&self) -> Option<OwnedComm> {
        let c = self.0.swap(MPI_COMM_NULL, std::sync::atomic::Ordering::AcqRel);
        (c != MPI_COMM_NULL).then(|| OwnedComm::made(c))
    }

    /// Holds `comm` where it is empty; else gives it back.
    pub fn put(&self, comm: OwnedComm) -> Result<(), OwnedComm> {
        let raw = comm.raw();
        let ordering = std::sync::atomic::Ordering::AcqRel;
        match self.0.compare_exchange(MPI_COMM_NULL, raw, ordering, std::sync::atomic::Ordering::Acquire) {
            Ok(_) => {
                let _ = comm.into_raw();
                Ok(())
            }
            Err(_) => Err(comm),
        }
    }
}

impl OwnedComm {
    /// `MPI_Comm_disconnect`.
    pub fn disconnect(self) -> MpiResult {
        let mut c = (self.0).0;
        check(call!(PMPI_Comm_disconnect(&mut c)))
    }
}

impl OwnedStream {
    /// `MPIX_Stream_free`, the stream back where MPICH refuses: MPICH frees a stream only when nothing
    /// holds it (`MPIR_Stream_free_impl` checks first that no communicator keeps a reference, and fails
    /// with the stream untouched), so on an error the handle is still live and still ours.
    pub fn free_or_keep(self) -> Result<(), (OwnedStream, std::os::raw::c_int)> {
        let mut s = (self.0).0;
        match check(call_optional!(PMPIX_Stream_free(&mut s))) {
            Ok(()) => Ok(()),
            Err(rc) => Err((self, rc)),
        }
    }
}

impl OwnedRequest {
    /// `MPI_Test` ([`Request::test`]): once complete, the handle is `MPI_REQUEST_NULL` (or, persistent,
    /// inactive), nothing left to free.
    pub fn test(&mut self) -> MpiResult<Option<MPI_Status>> {
        self.0.test()
    }

    /// `MPI_Test` into `status` ([`Request::test_into`]).
    pub fn test_into(&mut self, status: &mut MPI_Status) -> MpiResult<bool> {
        self.0.test_into(status)
    }

    /// `MPI_Wait` ([`Request::wait`]).
    pub fn wait(&mut self) -> MpiResult<MPI_Status> {
        self.0.wait()
    }

    /// `MPI_Request_free`, the request back where MPICH refuses. For a point-to-point or collective
    /// request (not a generalized one, whose free callback may fail after MPICH let go of it), MPICH's
    /// free fails only in its checks of the handle, before it frees anything: the handle is still ours.
    pub fn free_or_keep(self) -> Result<(), (OwnedRequest, std::os::raw::c_int)> {
        let mut r = (self.0).0;
        match check(call!(PMPI_Request_free(&mut r))) {
            Ok(()) => Ok(()),
            Err(rc) => Err((self, rc)),
        }
    }

    /// No request (`MPI_REQUEST_NULL`): nothing to free.
    pub const fn null() -> OwnedRequest {
        OwnedRequest(Request::NULL)
    }

    /// The request, leaving `MPI_REQUEST_NULL` in its place (for an owner that frees it in `Drop`).
    pub fn take(&mut self) -> OwnedRequest {
        std::mem::replace(self, OwnedRequest::null())
    }

    /// Whether the request completed and MPICH freed it (`MPI_REQUEST_NULL`).
    #[inline(always)]
    pub fn is_null(&self) -> bool {
        self.0 == Request::NULL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_handle_is_its_int() {
        assert_eq!(std::mem::size_of::<OwnedComm>(), std::mem::size_of::<MPI_Comm>());
        // SAFETY: never freed: a value to look at.
        let c = unsafe { OwnedComm::from_raw(0x4400_0003) };
        assert_eq!((c.raw(), *c), (0x4400_0003, Comm(0x4400_0003)));
        assert_eq!(c.into_raw(), 0x4400_0003);
        let r = OwnedRequest::made(MPI_REQUEST_NULL);
        assert!(r.is_null());
    }

    #[test]
    fn a_shared_communicator_is_taken_once() {
        let shared = SharedComm::empty();
        assert_eq!((shared.view(), shared.take()), (Comm::NULL, None));
        assert!(shared.put(OwnedComm::made(0x4400_0005)).is_ok());
        assert_eq!(shared.put(OwnedComm::made(0x4400_0006)).map_err(|c| c.into_raw()), Err(0x4400_0006));
        assert_eq!(shared.view(), Comm(0x4400_0005));
        assert_eq!(shared.take().map(OwnedComm::into_raw), Some(0x4400_0005));
        assert_eq!((shared.view(), shared.take()), (Comm::NULL, None));
    }
}
