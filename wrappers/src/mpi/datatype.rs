//! Datatypes, statuses, and the Rust types that have an MPI datatype ([`Element`]).
use super::{call, check, Datatype, MpiResult};
use crate::ffi::*;
use std::os::raw::c_int;

/// A Rust type whose values MPI moves as [`Element::DATATYPE`], with the same size and layout, so a
/// slice of it is a valid buffer of `len` elements of that datatype. Sealed: implemented here only.
pub trait Element: Copy + sealed::Sealed {
    const DATATYPE: Datatype;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for std::os::raw::c_int {}
    impl Sealed for u64 {}
}

impl Element for u8 {
    const DATATYPE: Datatype = Datatype::BYTE;
}
impl Element for c_int {
    const DATATYPE: Datatype = Datatype::INT;
}
impl Element for u64 {
    const DATATYPE: Datatype = Datatype::UINT64;
}

impl Datatype {
    /// `MPI_Type_size_c`: bytes of data in one element.
    pub fn size(self) -> MpiResult<MPI_Count> {
        let mut size = 0;
        check(call!(PMPI_Type_size_c(self.0, &mut size)))?;
        Ok(size)
    }

    /// `MPI_Type_get_extent_c`: (lower bound, extent).
    pub fn extent(self) -> MpiResult<(MPI_Count, MPI_Count)> {
        let (mut lb, mut extent) = (0, 0);
        check(call!(PMPI_Type_get_extent_c(self.0, &mut lb, &mut extent)))?;
        Ok((lb, extent))
    }

    /// `MPI_Type_get_true_extent_c`: (true lower bound, true extent).
    pub fn true_extent(self) -> MpiResult<(MPI_Count, MPI_Count)> {
        let (mut lb, mut extent) = (0, 0);
        check(call!(PMPI_Type_get_true_extent_c(self.0, &mut lb, &mut extent)))?;
        Ok((lb, extent))
    }
}

/// `MPI_Get_count_c` of `status` in elements of `datatype` (`MPI_UNDEFINED` where it is not a whole number).
pub fn get_count(status: &MPI_Status, datatype: Datatype) -> MpiResult<MPI_Count> {
    let mut n = 0;
    check(call!(PMPI_Get_count_c(status, datatype.0, &mut n)))?;
    Ok(n)
}

/// `MPI_Status_set_cancelled`.
pub fn set_cancelled(status: &mut MPI_Status, cancelled: bool) -> MpiResult {
    check(call!(PMPI_Status_set_cancelled(status, cancelled as c_int)))
}

/// `MPI_Status_set_elements_x`.
pub fn set_elements(status: &mut MPI_Status, datatype: Datatype, count: MPI_Count) -> MpiResult {
    check(call!(PMPI_Status_set_elements_x(status, datatype.0, count)))
}
