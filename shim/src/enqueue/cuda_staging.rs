//! Staging of a CUDA queue's device buffers: MPICH underneath is not GPU-aware (Debian's) or has no
//! CUDA (PyPI's), so device buffers go through pinned host buffers from a pool. The stream copies
//! inputs device-to-host before the operation's ready signal and outputs host-to-device after its
//! wait; a pool buffer is reused once its operation is done and the stream has passed the position
//! written after its copy back.
use super::cuda::{check, CtxGuard, CudaQueue, StageBuf, Staging};
use super::flags::{reached, POSITION_WORD};
use super::ops::{Buf, Kind, MPI_IN_PLACE};
use cudarc::driver::sys;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;

/// A copy back to the device, queued after the operation's wait.
#[derive(Debug)]
pub struct CopyBack {
    dev: u64,
    host: *mut u8,
    bytes: usize,
    buf: usize,
}

/// The copies an operation still owes the device.
#[derive(Debug, Default)]
pub struct Staged {
    pub back: Vec<CopyBack>,
}

unsafe impl Send for Staged {}

impl CudaQueue {
    /// Stages the device buffers of operation `seq` (`kind` is rewritten to point at pinned copies;
    /// input copies are queued now, before the ready signal). Returns the copies back to the device,
    /// to queue after the operation's wait.
    pub unsafe fn stage(&self, kind: &mut Kind, comm: MPI_Comm, seq: u32) -> Result<Staged, String> {
        if self.gpu_aware {
            return Ok(Staged::default());
        }
        let p = pmpi();
        let (mut rank, mut size) = (0, 0);
        (p.PMPI_Comm_rank)(comm, &mut rank);
        (p.PMPI_Comm_size)(comm, &mut size);
        let bufs = kind.buffers(rank, size);
        if bufs.is_empty() {
            return Ok(Staged::default());
        }
        let _g = CtxGuard::push(self.ctx)?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.recycle(&mut st);
        let mut staged = Staged::default();
        for b in bufs {
            let Some(region) = device_region(&b)? else {
                continue;
            };
            let (dev, bytes, lb) = (region.dev, region.bytes, region.true_lb);
            let idx = take(&mut st, bytes)?;
            let host = st.pool[idx].host;
            // An output with gaps (a vector, indexed or struct type) is copied in too: the copy back
            // covers the whole span, and the gaps must come back as the device had them.
            if b.input || (b.output && region.gaps) {
                check(
                    sys::cuMemcpyDtoHAsync_v2(host as *mut c_void, dev, bytes, self.stream),
                    "cuMemcpyDtoHAsync (staging)",
                )?;
            }
            let sb = &mut st.pool[idx];
            sb.seq = seq;
            sb.output = b.output;
            sb.pos = None;
            // MPI addresses the buffer at `ptr + true_lb`; the staged copy starts there.
            kind.set_buffer(b.which, host.wrapping_offset(-(lb as isize)) as *mut c_void);
            if b.output {
                staged.back.push(CopyBack { dev, host, bytes, buf: idx });
            }
        }
        Ok(staged)
    }

    /// Queues the copies back to the device (after the operation's wait) and marks when the stream is
    /// past them.
    pub fn copy_back(&self, staged: Staged) -> Result<(), String> {
        if staged.back.is_empty() {
            return Ok(());
        }
        unsafe {
            let _g = CtxGuard::push(self.ctx)?;
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for c in &staged.back {
                check(
                    sys::cuMemcpyHtoDAsync_v2(c.dev, c.host as *const c_void, c.bytes, self.stream),
                    "cuMemcpyHtoDAsync (staging)",
                )?;
            }
            let pos = st.next_pos;
            st.next_pos = st.next_pos.wrapping_add(1);
            self.write_word(POSITION_WORD, pos)?;
            for c in &staged.back {
                st.pool[c.buf].pos = Some(pos);
            }
            Ok(())
        }
    }

    fn recycle(&self, st: &mut Staging) {
        let position = self.flags().word(POSITION_WORD).load(Ordering::Acquire);
        for b in st.pool.iter_mut().filter(|b| b.busy) {
            let done = self.flags().is_done(b.seq);
            let copied = !b.output || b.pos.is_some_and(|p| reached(position, p));
            if done && copied {
                b.busy = false;
            }
        }
    }
}

/// A free pinned buffer of at least `bytes` (reused, or allocated).
unsafe fn take(st: &mut Staging, bytes: usize) -> Result<usize, String> {
    if let Some(i) = st.pool.iter().position(|b| !b.busy && b.cap >= bytes) {
        st.pool[i].busy = true;
        return Ok(i);
    }
    let cap = bytes.max(4096).next_power_of_two();
    let mut host: *mut c_void = std::ptr::null_mut();
    check(sys::cuMemHostAlloc(&mut host, cap, sys::CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc (staging)")?;
    st.pool.push(StageBuf { host: host as *mut u8, cap, busy: true, seq: 0, output: false, pos: None });
    Ok(st.pool.len() - 1)
}

/// The device memory a buffer argument spans.
struct DeviceRegion {
    /// Device address of its first byte.
    dev: u64,
    bytes: usize,
    /// The datatype's true lower bound (MPI addresses the buffer at `ptr + true_lb`).
    true_lb: i64,
    /// Whether the span holds bytes the datatype does not cover.
    gaps: bool,
}

/// The device memory a buffer argument spans, or None for host memory (pageable, pinned or managed:
/// MPI reads it directly).
unsafe fn device_region(b: &Buf) -> Result<Option<DeviceRegion>, String> {
    if b.ptr.is_null() || b.ptr == MPI_IN_PLACE || b.count <= 0 {
        return Ok(None);
    }
    let addr = b.ptr as u64;
    let mut mem_type: u32 = 0;
    let r = sys::cuPointerGetAttribute(
        &mut mem_type as *mut u32 as *mut c_void,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        addr,
    );
    if r != sys::CUresult::CUDA_SUCCESS || mem_type != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return Ok(None);
    }
    let mut managed: c_int = 0;
    let r = sys::cuPointerGetAttribute(
        &mut managed as *mut c_int as *mut c_void,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        addr,
    );
    if r == sys::CUresult::CUDA_SUCCESS && managed != 0 {
        return Ok(None);
    }
    let p = pmpi();
    let (mut lb, mut extent, mut tlb, mut textent, mut size) = (0, 0, 0, 0, 0);
    if (p.PMPI_Type_get_extent_c)(b.dt, &mut lb, &mut extent) != MPI_SUCCESS
        || (p.PMPI_Type_get_true_extent_c)(b.dt, &mut tlb, &mut textent) != MPI_SUCCESS
        || (p.PMPI_Type_size_c)(b.dt, &mut size) != MPI_SUCCESS
    {
        return Err(format!("datatype 0x{:08x} is not valid", b.dt as u32));
    }
    if extent < 0 || textent < 0 {
        return Err("a device buffer with a negative-extent datatype cannot be staged".into());
    }
    let bytes = (b.count - 1) * extent + textent;
    Ok(Some(DeviceRegion {
        dev: (addr as i64 + tlb) as u64,
        bytes: bytes as usize,
        true_lb: tlb,
        gaps: size * b.count != bytes,
    }))
}
