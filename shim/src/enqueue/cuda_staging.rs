//! Staging of a CUDA queue's device buffers: MPICH underneath is not GPU-aware (Debian's) or has no
//! CUDA (PyPI's), so device buffers go through pinned host buffers from a pool. The stream copies
//! inputs device-to-host before the operation's ready signal and outputs host-to-device after its
//! wait; a pool buffer is reused once its operation is done and the stream has passed the position
//! written after its copy back.
use super::cuda::{CudaQueue, StageBuf, Staging};
use super::flags::{reached, POSITION_WORD};
use super::ops::{Buf, Kind, MPI_IN_PLACE};
use mpixstream_wrappers::cuda::{pointer_attribute, Current, MemoryType, PinnedBuf, PointerAttribute};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::Comm;
use std::os::raw::c_void;
use std::sync::atomic::Ordering;

/// A copy back to the device, queued after the operation's wait: `bytes` from pool buffer `buf` to
/// device address `dev`.
#[derive(Debug)]
pub struct CopyBack {
    dev: u64,
    bytes: usize,
    buf: usize,
}

/// The copies an operation still owes the device.
#[derive(Debug, Default)]
pub struct Staged {
    pub back: Vec<CopyBack>,
}

impl CudaQueue {
    /// Stages the device buffers of operation `seq` (`kind` is rewritten to point at pinned copies;
    /// input copies are queued now, before the ready signal). Returns the copies back to the device,
    /// to queue after the operation's wait.
    pub fn stage(&self, kind: &mut Kind, comm: MPI_Comm, seq: u32) -> Result<Staged, String> {
        if self.gpu_aware {
            return Ok(Staged::default());
        }
        // An invalid communicator fails the operation itself later; here it only means no staging.
        let comm = Comm(comm);
        let (rank, size) = (comm.rank().unwrap_or(0), comm.size().unwrap_or(0));
        let bufs = kind.buffers(rank, size);
        if bufs.is_empty() {
            return Ok(Staged::default());
        }
        let current = self.current()?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.recycle(&mut st);
        let mut staged = Staged::default();
        for b in bufs {
            let Some(region) = device_region(&b)? else {
                continue;
            };
            let (dev, bytes, lb) = (region.dev, region.bytes, region.true_lb);
            let idx = take(&current, &mut st, bytes)?;
            let host = st.pool[idx].host.as_ptr();
            // An output with gaps (a vector, indexed or struct type) is copied in too: the copy back
            // covers the whole span, and the gaps must come back as the device had them.
            if b.input || (b.output && region.gaps) {
                // SAFETY: the destination is pool buffer `idx`, ours and at least `bytes` long (`take`),
                // left alone until the operation is done; the source is a device address, which only the
                // driver touches (a bad one is a CUDA error, or a fault of the stream's context).
                let r = unsafe { self.stream.copy_from_device(&current, &st.pool[idx].host, dev, bytes) };
                self.answer(r, "cuMemcpyDtoHAsync (staging)")?;
            }
            let sb = &mut st.pool[idx];
            sb.seq = seq;
            sb.output = b.output;
            sb.pos = None;
            // MPI addresses the buffer at `ptr + true_lb`; the staged copy starts there.
            let at = host.wrapping_offset(-(lb as isize)) as *mut c_void;
            if let Some(buf) = kind.buffer_mut(b.which) {
                // SAFETY: pool buffer `idx`, ours, `bytes` long from `ptr + true_lb` as the operation's
                // count and datatype (the buffer's own) address it, kept for the operation alone until it is
                // done (`sb.seq`).
                unsafe { buf.retarget(at) };
            }
            if b.output {
                staged.back.push(CopyBack { dev, bytes, buf: idx });
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
        let current = self.current()?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for c in &staged.back {
            // SAFETY: the source is pool buffer `c.buf` (at least `c.bytes` long), kept until the stream
            // passed this copy (the position written below); the destination is a device address, which
            // only the driver touches.
            let r = unsafe { self.stream.copy_to_device(&current, c.dev, &st.pool[c.buf].host, c.bytes) };
            self.answer(r, "cuMemcpyHtoDAsync (staging)")?;
        }
        let pos = st.next_pos;
        st.next_pos = st.next_pos.wrapping_add(1);
        self.write_word(&current, POSITION_WORD, pos)?;
        for c in &staged.back {
            st.pool[c.buf].pos = Some(pos);
        }
        Ok(())
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

/// A free pinned buffer of at least `bytes` (reused, or allocated; the queue's context is current).
fn take(current: &Current, st: &mut Staging, bytes: usize) -> Result<usize, String> {
    if let Some(i) = st.pool.iter().position(|b| !b.busy && b.host.cap() >= bytes) {
        st.pool[i].busy = true;
        return Ok(i);
    }
    let host = PinnedBuf::alloc(current, bytes.max(4096).next_power_of_two())?;
    st.pool.push(StageBuf { host, busy: true, seq: 0, output: false, pos: None });
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
fn device_region(b: &Buf) -> Result<Option<DeviceRegion>, String> {
    if b.ptr.is_null() || b.ptr == MPI_IN_PLACE || b.count <= 0 {
        return Ok(None);
    }
    let addr = b.ptr as u64;
    let device = MemoryType::CU_MEMORYTYPE_DEVICE as u32;
    if pointer_attribute(PointerAttribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr) != Some(device) {
        return Ok(None);
    }
    if pointer_attribute(PointerAttribute::CU_POINTER_ATTRIBUTE_IS_MANAGED, addr).is_some_and(|m| m != 0) {
        return Ok(None);
    }
    let invalid = || format!("datatype 0x{:08x} is not valid", b.dt.raw() as u32);
    let (_lb, extent) = b.dt.extent().map_err(|_| invalid())?;
    let (tlb, textent) = b.dt.true_extent().map_err(|_| invalid())?;
    let size = b.dt.size().map_err(|_| invalid())?;
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
