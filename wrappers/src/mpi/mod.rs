//! The safe, typed layer over the resolved `PMPI_*` table ([`crate::pmpi`]): what the rest of mpixstream
//! calls instead of the raw entry points.
//!
//! - Handles are newtypes ([`Comm`], [`Request`], [`Datatype`], [`Info`], [`Stream`], [`Op`],
//!   [`Errhandler`]) over MPICH's `int` handles: borrowed views, `Copy`, compared and hashed as the `int`,
//!   `.raw()` for the C side. A view names a handle someone else owns (MPICH's predefined ones, the
//!   application's that we pass through, one of ours borrowed): it can be used, never freed. A handle is
//!   a name MPICH checks (error checking is on in every build we support), never a pointer we follow, so
//!   passing a wrong one is an MPI error, not unsoundness.
//! - What mpixstream makes, it owns: [`OwnedComm`], [`OwnedRequest`], [`OwnedInfo`], [`OwnedStream`],
//!   [`OwnedErrhandler`] (what MPICH's constructors here return) are neither `Copy` nor `Clone`, borrow
//!   as their view ([`std::ops::Deref`]), and `free(self)` consumes them: a handle of ours is freed once,
//!   by its one owner (a double free does not compile, see [`OwnedComm`]). Dropped unfreed, a handle leaks
//!   (never freed by `Drop`: after `MPI_Finalize`, or from a thread MPI does not expect, a free is wrong).
//!   `into_raw` hands the handle on (to the application, as a constructor's result); `from_raw`, the only
//!   way to own an `int`, is `unsafe`: its caller asserts the handle is its own to free.
//! - Every call returns [`MpiResult`]: `Err` carries the MPI error code MPICH returned, unchanged.
//! - Buffers: count and datatype always come from the same typed value as the memory. Our own memory is
//!   a slice (`&[T]` / `&mut [T]` of a type with an MPI datatype, [`Element`], as rsmpi's `Equivalence`:
//!   the slice gives address, count and datatype). Where the application's own buffer passes through to
//!   an operation that completes later (an enqueued send, a multiplex receive, a routed replace), it is a
//!   `crate::app::PendingBuf`: the application's address with the count and datatype its call gave,
//!   paired once by an `unsafe` constructor whose `# Safety` states the contract; the calls here
//!   (`raw_buffers`) take the pair whole.
//!
//! Why it is sound: every entry point in the table was resolved from the loaded MPICH under the name of a
//! row of `wrappers/mpi.prototypes`, whose prototype is checked against both MPICHs' `mpi.h`
//! (tests/scripts/prototypes_match_mpi_h.sh); the functions here pass only pointers to live Rust values
//! (locals, slices, `&mut` results) of the C type the prototype names, valid for the whole call, and MPICH
//! keeps none of them past the call unless its documentation says so (noted where it does). That argument
//! is made once, in [`call!`], the only `unsafe` of the safe functions.
use crate::ffi::*;
use std::os::raw::c_int;

pub mod comm;
pub mod datatype;
pub mod env;
pub mod errors;
mod info;
pub mod kept;
mod owned;
mod raw_buffers;
pub mod request;
pub mod stream;
pub mod tool_interface;
pub mod topology;

pub use datatype::Element;
pub use owned::{OwnedComm, OwnedErrhandler, OwnedInfo, OwnedRequest, OwnedStream, SharedComm};
pub use raw_buffers::MessageCopy;
pub use request::{AsyncThing, GrequestFns};

/// The outcome of an MPI call: `Err` holds the error code MPICH returned.
pub type MpiResult<T = ()> = Result<T, c_int>;

/// `rc` as a result.
#[inline(always)]
pub fn check(rc: c_int) -> MpiResult {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Calls `PMPI_NAME(args…)` from the resolved table and gives its return code.
///
/// Used only in this module's functions, whose arguments are handles (plain `int`s), values, and
/// pointers to live Rust values of the prototype's C types, valid for the whole call.
macro_rules! call {
    ($name:ident ( $($arg:expr),* $(,)? )) => {{
        let f = $crate::pmpi::pmpi().$name;
        // SAFETY: `f` is the loaded MPICH's `$name`, resolved under the name of a row of
        // `mpi.prototypes` whose prototype tests/scripts/prototypes_match_mpi_h.sh checks against mpi.h, so
        // the call's types are the function's. Callers of this macro pass handles and values, and
        // pointers only to live Rust values of the prototype's types, valid for the whole call (the
        // module comment); handles are checked by MPICH, which reports a bad one as an error code.
        unsafe { f($($arg),*) }
    }};
}
pub(crate) use call;

/// An optional entry point (`pmpi?` rows): `Err(MPI_ERR_UNSUPPORTED_OPERATION)` where the loaded MPICH
/// lacks it, else as [`call!`].
macro_rules! call_optional {
    ($name:ident ( $($arg:expr),* $(,)? )) => {{
        match $crate::pmpi::pmpi().$name {
            None => MPI_ERR_UNSUPPORTED_OPERATION,
            // SAFETY: as in `call!`: the entry point named `$name` of the loaded MPICH, whose prototype
            // is checked against mpi.h; arguments are handles, values and pointers to live Rust values.
            Some(f) => unsafe { f($($arg),*) },
        }
    }};
}
pub(crate) use call_optional;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident($c:ty) $(, $konst:ident = $value:expr)*) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        pub struct $name(pub $c);
        impl $name {
            $(pub const $konst: $name = $name($value);)*
            /// The C handle.
            #[inline(always)]
            pub const fn raw(self) -> $c {
                self.0
            }
        }
        impl From<$c> for $name {
            #[inline(always)]
            fn from(h: $c) -> $name {
                $name(h)
            }
        }
    };
}

handle!(
    /// A communicator.
    Comm(MPI_Comm), NULL = MPI_COMM_NULL, WORLD = MPI_COMM_WORLD, SELF = MPI_COMM_SELF
);
handle!(
    /// A request (a point-to-point or collective operation's, or a generalized one).
    Request(MPI_Request), NULL = MPI_REQUEST_NULL
);
handle!(
    /// A datatype.
    Datatype(MPI_Datatype), NULL = MPI_DATATYPE_NULL, BYTE = MPI_BYTE, INT = MPI_INT, UINT64 = MPI_UINT64_T, PACKED = MPI_PACKED
);
handle!(
    /// An info object.
    Info(MPI_Info), NULL = MPI_INFO_NULL
);
handle!(
    /// An MPIX stream of the loaded MPICH (>= 4.1).
    Stream(MPIX_Stream), NULL = MPIX_STREAM_NULL
);
handle!(
    /// A reduction operation.
    Op(MPI_Op), SUM = MPI_SUM, MAX = MPI_MAX, MIN = MPI_MIN, BAND = MPI_BAND
);
handle!(
    /// An error handler.
    Errhandler(MPI_Errhandler), ERRORS_RETURN = MPI_ERRORS_RETURN, ERRORS_ARE_FATAL = MPI_ERRORS_ARE_FATAL
);

/// An opaque word that MPICH stores and hands back to our callbacks (an attribute value, a generalized
/// request's or async thing's extra state, an async thing): MPICH never dereferences it, so passing one is
/// safe; the callbacks that turn it back into a reference say, in their own safety notes, why that is sound.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Opaque(pub *mut std::os::raw::c_void);

/// The byte count a status MPICH filled in records (`MPIR_STATUS_GET_COUNT`: the low 32 bits in
/// `count_lo`, the high ones above the cancelled bit), without a call into MPICH.
#[inline]
pub fn status_bytes(status: &MPI_Status) -> MPI_Count {
    (status.count_lo as u32 as MPI_Count) | (((status.count_hi_and_cancelled as u32 >> 1) as MPI_Count) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_their_c_ints() {
        assert_eq!(std::mem::size_of::<Comm>(), std::mem::size_of::<c_int>());
        assert_eq!(Comm::WORLD.raw(), MPI_COMM_WORLD);
        assert_eq!(Comm::from(MPI_COMM_SELF), Comm::SELF);
        assert_ne!(Request::NULL, Request(0));
    }

    #[test]
    fn check_keeps_the_code() {
        assert_eq!(check(MPI_SUCCESS), Ok(()));
        assert_eq!(check(MPI_ERR_COMM), Err(MPI_ERR_COMM));
    }

    #[test]
    fn status_bytes_reads_both_halves() {
        let mut st = MPI_Status { count_lo: -1, ..Default::default() };
        assert_eq!(status_bytes(&st), 0xffff_ffff);
        st.count_lo = 24;
        st.count_hi_and_cancelled = 3 << 1 | 1;
        assert_eq!(status_bytes(&st), (3 << 32) | 24);
    }
}
