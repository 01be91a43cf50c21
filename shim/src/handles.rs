//! MPICH's handle layout, where we must read a handle without asking MPICH (whose own check would
//! raise an error): kind in bits 30-31 (0 invalid), object type in bits 26-29 (1 communicator).
use mpixstream_wrappers::ffi::MPI_Comm;

/// Whether `comm` looks like a valid communicator handle.
pub fn is_comm(comm: MPI_Comm) -> bool {
    let kind = (comm as u32) >> 30;
    let object = ((comm as u32) >> 26) & 0xf;
    kind != 0 && object == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpixstream_wrappers::ffi::{MPI_COMM_NULL, MPI_COMM_WORLD};

    #[test]
    fn communicators_are_told_apart() {
        assert!(is_comm(MPI_COMM_WORLD));
        assert!(!is_comm(MPI_COMM_NULL));
        assert!(!is_comm(0x1234));
        assert!(!is_comm(0x4c00_0000u32 as i32)); // a datatype
    }
}
