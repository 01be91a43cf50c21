//! MPICH's handle layout, the one place that knows it. An MPICH handle (`MPI_Comm`, `MPI_Request`, …,
//! an `int`) is, from the top bit down:
//! - bits 30-31, the kind: 0 invalid (the `*_NULL` handles are of this kind), 1 builtin (predefined
//!   objects such as `MPI_COMM_WORLD`, and MPICH's shared pre-completed requests), 2 direct (an index into
//!   a static array), 3 indirect (block and index into dynamically allocated blocks);
//! - bits 26-29, the object type (1 communicator, … 11 request, 15 stream): every handle of one type
//!   shares these bits, which is how MPICH tells a communicator from a request;
//! - bits 0-25, the object's index (for indirect handles, block and index).
//!
//! The same in MPICH 4.0.2 and 5.0.2 (their `mpi.h` constants, checked in the tests below). mpixstream
//! uses it to tell communicators from other handles without asking MPICH (whose own check would raise an
//! error), to recognise builtin requests, to make stream handles that look like native ones, and (the
//! tools library's profile) to read from a request the VCI that carries it ([`request_pool`]).
use crate::ffi::c_handle;
use std::os::raw::c_int;

/// The kind of a handle (bits 30-31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Invalid = 0,
    Builtin = 1,
    Direct = 2,
    Indirect = 3,
}

/// MPICH's object types (bits 26-29), those mpixstream deals with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Object {
    Comm = 1,
    Group = 2,
    Datatype = 3,
    Errhandler = 5,
    Op = 6,
    Info = 7,
    Request = 11,
    Stream = 15,
}

const KIND_SHIFT: u32 = 30;
const OBJECT_SHIFT: u32 = 26;
const OBJECT_BITS: u32 = 0xf;
/// The kind and object-type bits: equal for every handle of one kind and type.
pub const KIND_AND_OBJECT_MASK: u32 = 0xfc00_0000;
/// The index bits of a direct handle.
pub const INDEX_MASK: u32 = 0x03ff_ffff;

#[inline]
pub const fn kind(h: c_int) -> Kind {
    match (h as u32) >> KIND_SHIFT {
        0 => Kind::Invalid,
        1 => Kind::Builtin,
        2 => Kind::Direct,
        _ => Kind::Indirect,
    }
}

/// The object-type bits of `h` (compare with `Object::X as u32`).
#[inline]
pub const fn object_bits(h: c_int) -> u32 {
    ((h as u32) >> OBJECT_SHIFT) & OBJECT_BITS
}

/// Whether `h` is a handle of a live `object` by its shape (any kind but invalid): what MPICH's own
/// validity check looks at first, without dereferencing anything.
#[inline]
pub const fn is_object(h: c_int, object: Object) -> bool {
    !matches!(kind(h), Kind::Invalid) && object_bits(h) == object as u32
}

/// Whether `h` has the shape of a communicator handle (`MPI_COMM_NULL` has not).
#[inline]
pub const fn is_comm(h: c_int) -> bool {
    is_object(h, Object::Comm)
}

/// Whether `h` is a builtin handle. For requests: MPICH may hand an operation that completed at once
/// (an eager send) a shared, pre-completed builtin request, the same handle in every thread at the same
/// time, so it identifies no operation.
#[inline]
pub const fn is_builtin(h: c_int) -> bool {
    matches!(kind(h), Kind::Builtin)
}

/// The handle of kind `kind`, type `object` and index `index` (`index` must fit in [`INDEX_MASK`]).
#[inline]
pub const fn make(kind: Kind, object: Object, index: u32) -> c_int {
    c_handle(((kind as u32) << KIND_SHIFT) | ((object as u32) << OBJECT_SHIFT) | (index & INDEX_MASK))
}

/// The null handle of `object` (kind invalid, index 0): `MPI_COMM_NULL`, `MPI_REQUEST_NULL`, …
#[inline]
pub const fn null(object: Object) -> c_int {
    make(Kind::Invalid, object, 0)
}

/// The index of a direct handle of `object`, None for any other handle.
#[inline]
pub const fn direct_index(h: c_int, object: Object) -> Option<u32> {
    if (h as u32) & KIND_AND_OBJECT_MASK == (make(Kind::Direct, object, 0) as u32) {
        Some((h as u32) & INDEX_MASK)
    } else {
        None
    }
}

/// Where MPICH writes the request pool into a request handle. MPICH >= 4.1 makes each point-to-point
/// request from the pool of the VCI that carries it (`MPIR_Request_create_from_pool`) and writes the
/// pool's number into the handle of an indirect request (pool 0 also hands out direct ones): bits 20-25
/// up to 4.2; from 4.3 on, bits 19-24 under the flag bit 25 (pool 0 leaves the flag clear).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestPools {
    /// MPICH 4.0 (one VCI), Intel MPI, or not MPICH: the handle says nothing about a VCI.
    None,
    /// MPICH 4.1 and 4.2.
    Bits20,
    /// MPICH 4.3 and later.
    Flagged,
}

impl RequestPools {
    /// The layout of MPICH `major.minor`.
    pub const fn of_mpich(major: u32, minor: u32) -> RequestPools {
        match (major, minor) {
            (4, 1) | (4, 2) => RequestPools::Bits20,
            (4, 0) | (0..=3, _) => RequestPools::None,
            _ => RequestPools::Flagged,
        }
    }
}

/// The VCI whose pool made request `h` (a real request: neither null nor builtin), where the layout
/// says it: MPICH's own record of the endpoint an operation runs on.
#[inline]
pub const fn request_pool(h: c_int, layout: RequestPools) -> Option<u32> {
    // Kind and object in one comparison each (every wait decodes each of its requests this way).
    const INDIRECT_REQUEST: u32 = ((Kind::Indirect as u32) << KIND_SHIFT) | ((Object::Request as u32) << OBJECT_SHIFT);
    const DIRECT_REQUEST: u32 = ((Kind::Direct as u32) << KIND_SHIFT) | ((Object::Request as u32) << OBJECT_SHIFT);
    let h = h as u32;
    let shape = h & KIND_AND_OBJECT_MASK;
    match layout {
        RequestPools::None => None,
        // A direct request comes from pool 0's preallocated objects.
        _ if shape == DIRECT_REQUEST => Some(0),
        _ if shape != INDIRECT_REQUEST => None,
        RequestPools::Bits20 => Some((h >> 20) & 0x3f),
        RequestPools::Flagged if h & 0x0200_0000 != 0 => Some((h >> 19) & 0x3f),
        RequestPools::Flagged => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;

    #[test]
    fn nulls_and_predefined_handles_are_mpichs() {
        assert_eq!(null(Object::Comm), MPI_COMM_NULL);
        assert_eq!(null(Object::Group), MPI_GROUP_NULL);
        assert_eq!(null(Object::Datatype), MPI_DATATYPE_NULL);
        assert_eq!(null(Object::Info), MPI_INFO_NULL);
        assert_eq!(null(Object::Request), MPI_REQUEST_NULL);
        assert_eq!(null(Object::Stream), MPIX_STREAM_NULL);
        assert_eq!(make(Kind::Builtin, Object::Comm, 0), MPI_COMM_WORLD);
        assert_eq!(make(Kind::Builtin, Object::Comm, 1), MPI_COMM_SELF);
        assert_eq!(kind(MPI_BYTE), Kind::Builtin);
        assert_eq!(object_bits(MPI_BYTE), Object::Datatype as u32);
        assert_eq!(object_bits(MPI_SUM), Object::Op as u32);
        assert_eq!(object_bits(MPI_ERRORS_RETURN), Object::Errhandler as u32);
    }

    #[test]
    fn communicator_handles_by_shape() {
        assert!(is_comm(MPI_COMM_WORLD));
        assert!(is_comm(MPI_COMM_SELF));
        assert!(is_comm(0x8400_0006u32 as i32)); // direct
        assert!(is_comm(0xc400_0001u32 as i32)); // indirect
        assert!(!is_comm(MPI_COMM_NULL));
        assert!(!is_comm(MPI_REQUEST_NULL));
        assert!(!is_comm(0xac00_0003u32 as i32)); // a request
        assert!(!is_comm(12345));
    }

    #[test]
    fn builtin_requests_are_recognised() {
        // MPICH's shared pre-completed send request and the PROC_NULL receive (seen on 4.0.2 and 5.0.2).
        assert!(is_builtin(0x6c00_0001));
        assert!(is_builtin(0x6c00_0002));
        assert!(is_object(0x6c00_0001, Object::Request));
        // Direct and indirect request handles are real ones; the null request is not builtin.
        assert!(!is_builtin(0xac00_0003u32 as i32));
        assert!(!is_builtin(0xec00_0010u32 as i32));
        assert!(!is_builtin(MPI_REQUEST_NULL));
    }

    #[test]
    fn direct_handles_round_trip() {
        let h = make(Kind::Direct, Object::Stream, 7);
        assert_eq!(h as u32, 0xbc00_0007);
        assert_eq!(direct_index(h, Object::Stream), Some(7));
        assert_eq!(direct_index(h, Object::Comm), None);
        assert_eq!(direct_index(MPIX_STREAM_NULL, Object::Stream), None);
        assert_eq!(direct_index(make(Kind::Indirect, Object::Stream, 7), Object::Stream), None);
        assert_eq!(direct_index(make(Kind::Direct, Object::Stream, INDEX_MASK), Object::Stream), Some(INDEX_MASK));
    }

    #[test]
    fn request_pools_name_the_vci() {
        // Receive requests of MPICH 5.0.2 on communicators of VCI 0, 1, 2 and 3 (MPIR_CVAR_CH4_NUM_VCIS=4).
        let f = RequestPools::of_mpich(5, 0);
        assert_eq!(f, RequestPools::Flagged);
        assert_eq!(request_pool(0xac00_0000u32 as i32, f), Some(0));
        assert_eq!(request_pool(0xee08_0000u32 as i32, f), Some(1));
        assert_eq!(request_pool(0xee10_0000u32 as i32, f), Some(2));
        assert_eq!(request_pool(0xee18_0000u32 as i32, f), Some(3));
        // Pool 0's indirect requests carry no flag; a builtin request and a communicator name no pool.
        assert_eq!(request_pool(0xec00_1005u32 as i32, f), Some(0));
        assert_eq!(request_pool(0x6c00_0001, f), None);
        assert_eq!(request_pool(MPI_COMM_WORLD, f), None);
        // MPICH 4.1 and 4.2: the pool in bits 20-25, no flag.
        assert_eq!(request_pool(0xec30_0004u32 as i32, RequestPools::of_mpich(4, 2)), Some(3));
        assert_eq!(RequestPools::of_mpich(4, 3), RequestPools::Flagged);
        assert_eq!(request_pool(0xee08_0000u32 as i32, RequestPools::of_mpich(4, 0)), None);
    }
}
