//! The route around MPICH's `MPI_Init` hang over ch4:ucx between hosts with more than one VCI
//! (docs/native-defects.md, "More than one VCI over UCX's tcp between hosts"): while `PMPI_Init*` runs,
//! every UCX progress call turns every worker MPICH created (`mpixstream_wrappers::ucx`), so each
//! VCI's connection handshake completes; once it returns, the interposers pass straight through.
//! Where the calls cannot reach us, `MPI_Init` is not entered: the error names the settings to change.
use super::Detected;

// The exported `ucp_worker_create` and `ucp_worker_progress` (lean library only).
mpixstream_wrappers::ucx_interposers!();

/// An open init window, closed by [`close`].
pub struct Window(bool);

/// Just before `PMPI_Init*`: opens the window where MPICH will use UCX with more than one VCI.
/// `mpi_code`: an address in the loaded MPI library. Err: MPICH's UCX calls cannot be routed, and
/// `MPI_Init` would hang between hosts; the message names the settings that avoid it.
pub fn open(detected: &Detected, mpi_code: usize) -> Result<Window, String> {
    if detected.netmod.as_deref() != Some("ucx") || !detected.many_vcis {
        return Ok(Window(false));
    }
    match mpixstream_wrappers::ucx::routable(mpi_code) {
        Ok(false) => Ok(Window(false)),
        Ok(true) => {
            mpixstream_wrappers::ucx::open_init_window();
            Ok(Window(true))
        }
        Err(why) => Err(format!(
            "MPICH over ch4:ucx with more than one VCI (the reserved pool) hangs in MPI_Init when UCX joins \
             hosts by TCP, and mpixstream cannot route around it here: {why}. Set MPIR_CVAR_CH4_NETMOD=ofi \
             (with FI_PROVIDER=tcp between hosts), or MPIXSTREAM_BACKEND=serial (no reserved pool), or \
             preload libmpixstream.so first"
        )),
    }
}

/// When `PMPI_Init*` has returned: the pass-through from now on. Returns, for an open window, how
/// many UCX workers MPICH created in it and how many progress calls turned them all.
pub fn close(window: Window) -> Option<(usize, usize)> {
    window.0.then(mpixstream_wrappers::ucx::close_init_window)
}
