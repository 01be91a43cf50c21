//! MPICH's shared-memory segments (`/dev/shm/mpich_*`) of a process whose pool the library reserved
//! never outlive its job. MPICH removes them in `MPI_Finalize`; a process that ends without it (an `exit`
//! after an error, a return from `main`) leaves them behind, and with a reserved pool they are large
//! (the VCI queues: V² × ranks on the node × 1.06 MB, 171 MB at 2 ranks with 8 reserved; docs/policy.md,
//! "Reserved pool"). So the segments this process maps are remembered right after `MPI_Init`, and what is
//! left of them is removed after `PMPI_Finalize` and when the process exits without it. Removing a name
//! leaves every mapping of it alive: the other ranks of the node keep theirs. A job killed outright
//! (SIGKILL, a time limit) runs nothing of ours: `mpixrun` removes its segments after it
//! (scripts/shm_cleanup.sh: those no live process maps or holds open).
use std::sync::Mutex;

static SEGMENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Right after `PMPI_Init*` on a process whose pool was reserved: the segments it maps now.
pub fn remember() {
    let mapped = mpixstream_wrappers::os::mapped_shm("mpich_");
    if mapped.is_empty() {
        return;
    }
    *SEGMENTS.lock().unwrap_or_else(|e| e.into_inner()) = mapped;
    if !mpixstream_wrappers::os::at_exit(at_exit) {
        mpixstream_wrappers::say!(
            "mpixstream: no exit handler left: MPICH's segments stay in /dev/shm if MPI_Finalize is skipped"
        );
    }
}

/// Removes the remembered segments that are still there (after `PMPI_Finalize`: none, normally).
pub fn remove_left() {
    let segments = std::mem::take(&mut *SEGMENTS.lock().unwrap_or_else(|e| e.into_inner()));
    for path in segments {
        // Gone already (MPICH's finalize, another rank of the node): nothing to do.
        let _ = std::fs::remove_file(path);
    }
}

/// The exit handler: a process that exits between `MPI_Init` and `MPI_Finalize`.
extern "C" fn at_exit() {
    mpixstream_wrappers::guard::guard_with("exit handler", (), || {
        if crate::runtime::active().is_some() {
            remove_left();
        }
    })
}
