//! Which queue a stream asks for: `MPIX_Stream_create`'s info `type` (and `value`) parsed into a
//! [`QueueSpec`].
use super::cuda;
use crate::errors::Class;
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::Info;

/// The info `type` of a host queue.
pub const HOST_QUEUE_TYPE: &str = "mpixstream_host_queue";
pub const CUDA_TYPE: &str = "cudaStream_t";
pub const HIP_TYPE: &str = "hipStream_t";

/// A queue kind, as `MPIX_Stream_create`'s info asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSpec {
    Host,
    /// A `cudaStream_t` handle.
    Cuda(u64),
}

/// Reads the queue kind out of `MPIX_Stream_create`'s info (`ty` is its non-empty `type`). Errors are
/// (class, message) for `errors::raise`.
pub fn parse_info(rt: &Runtime, info: MPI_Info, ty: &str) -> Result<QueueSpec, (Class, String)> {
    let spec = match ty {
        HOST_QUEUE_TYPE => QueueSpec::Host,
        CUDA_TYPE => {
            let value = Info(info)
                .get(c"value")
                .map_err(|_| (Class::InfoValue, "cannot read info key \"value\"".to_string()))?
                .ok_or_else(|| {
                    (
                        Class::InfoValue,
                        "info type=cudaStream_t needs key \"value\": the stream handle, set with \
                         MPIX_Info_set_hex(info, \"value\", &stream, sizeof(cudaStream_t))"
                            .to_string(),
                    )
                })?;
            let bytes = crate::hex::decode(&value, 8).map_err(|e| {
                (
                    Class::InfoValue,
                    format!("info type=cudaStream_t: value \"{value}\" is not an 8-byte stream handle: {e}"),
                )
            })?;
            let handle = u64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
            cuda::probe().map_err(|e| (Class::Other, format!("info type=cudaStream_t: {e}")))?;
            QueueSpec::Cuda(handle)
        }
        HIP_TYPE => {
            return Err((
                Class::Unsupported,
                "info type=hipStream_t: HIP streams are not supported by mpixstream \
                 (supported queue types: cudaStream_t, mpixstream_host_queue)"
                    .into(),
            ))
        }
        other => {
            return Err((
                Class::InfoValue,
                format!(
                    "info type=\"{other}\" is not a stream type this library supports \
                     (cudaStream_t, {HOST_QUEUE_TYPE}, or none)"
                ),
            ))
        }
    };
    if !rt.thread_multiple() {
        return Err((
            Class::Other,
            format!(
                "a stream with info type={ty} runs its MPI operations on a thread of ours, which needs \
                 MPI_THREAD_MULTIPLE: initialise with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) \
                 or set MPIXSTREAM_THREAD_MULTIPLE=1"
            ),
        ));
    }
    Ok(spec)
}
