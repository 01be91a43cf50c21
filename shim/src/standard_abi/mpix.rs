//! The MPIX stream API for a program on the standard ABI (`include/mpix_stream_abi.h`), on the serial
//! model: the exported entry points (`crate::mpix`, `crate::multiplex`) call these with the program's
//! pointer-wide handles where `abi::standard()`. Streams are local objects (`streams`); a stream
//! communicator is a dup of its parent carrying its stream in a record; its traffic, like every stream's,
//! is the library's own on its shared endpoints. The queue-backed streams (`info` key `type`), the enqueue
//! calls and the progress threads are refused ([`super::refuse`]).
//!
//! Their pointer arguments are the program's arguments of the entry point, wrapped there
//! (`mpixstream_wrappers::app`): read and written through them, a null one refused.
use super::errors::{agree, mpi_live, raise, Class};
use super::mpi::{self, H};
use super::multiplex;
use super::streams::{self, Record};
use mpixstream_wrappers::app::{AppArg, AppInArray};
use std::os::raw::c_int;

/// The table and state, or the error to return: before `MPI_Init` and after `MPI_Finalize` a call is
/// erroneous (the bare class and a line on stderr, as on MPICH's ABI).
fn ready(f: &str) -> Result<(&'static mpi::Mpi, &'static streams::State), c_int> {
    let m = mpi::mpi().map_err(|e| {
        mpixstream_wrappers::say!("mpixstream: {f}: {e}");
        mpi::ERR_OTHER
    })?;
    if !mpi_live() {
        mpixstream_wrappers::say!("mpixstream: {f} called outside MPI_Init .. MPI_Finalize");
        return Err(mpi::ERR_OTHER);
    }
    let st = streams::state().map_err(|e| raise(mpi::COMM_WORLD, Class::Other, f, &e))?;
    Ok((m, st))
}

/// The `type` info value of `MPIX_Stream_create`'s `info`, if any.
fn info_type(m: &mpi::Mpi, info: H) -> Option<String> {
    if info == mpi::INFO_NULL || info == 0 {
        return None;
    }
    let text = m.info_get_string(info, c"type").ok()??;
    (!text.is_empty()).then_some(text)
}

/// `MPIX_Stream_create`.
pub fn stream_create(info: H, stream: AppArg<H>) -> c_int {
    const F: &str = "MPIX_Stream_create";
    let (m, _) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if stream.is_empty() {
        return raise(mpi::COMM_WORLD, Class::Arg, F, "the stream argument is a null pointer");
    }
    if let Some(t) = info_type(m, info) {
        return raise(
            mpi::COMM_WORLD,
            Class::Unsupported,
            F,
            &format!(
                "info type \"{t}\" asks for a queue-backed stream: the enqueue API is not available on the MPI \
                 standard ABI (serial model)"
            ),
        );
    }
    let Some(i) = streams::allocate() else {
        return raise(
            mpi::COMM_WORLD,
            Class::Other,
            F,
            &format!(
                "out of streams: all {} streams of the pool are in use (raise MPIXSTREAM_STREAMS)",
                streams::capacity()
            ),
        );
    };
    stream.set(streams::handle(i));
    mpi::SUCCESS
}

/// `MPIX_Stream_free`.
pub fn stream_free(stream_arg: AppArg<H>) -> c_int {
    const F: &str = "MPIX_Stream_free";
    if let Err(rc) = ready(F) {
        return rc;
    }
    let Some(stream) = stream_arg.get() else {
        return raise(mpi::COMM_WORLD, Class::Arg, F, "the stream argument is a null pointer");
    };
    if stream == 0 {
        return raise(mpi::COMM_WORLD, Class::Stream, F, "the stream is MPIX_STREAM_NULL");
    }
    let i = match streams::lookup(stream) {
        Ok(i) => i,
        Err((class, e)) => return raise(mpi::COMM_WORLD, class, F, &e),
    };
    let n = streams::slot(i).attached();
    if n > 0 {
        return raise(
            mpi::COMM_WORLD,
            Class::Other,
            F,
            &format!("stream 0x{stream:x} is still attached to {n} communicator(s); free them first"),
        );
    }
    streams::release(i);
    stream_arg.set(0);
    mpi::SUCCESS
}

/// `MPIX_Stream_comm_create`.
pub fn stream_comm_create(comm: H, stream: H, newcomm: AppArg<H>) -> c_int {
    const F: &str = "MPIX_Stream_comm_create";
    let (m, st) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if comm == mpi::COMM_NULL {
        return raise(mpi::COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
    }
    let inter = match m.comm_test_inter(comm) {
        Ok(inter) => inter,
        Err(rc) => return rc,
    };
    if inter {
        return raise(
            comm,
            Class::Comm,
            F,
            "the parent is an intercommunicator; stream communicators need an intracommunicator",
        );
    }
    // Arguments only this process can judge: checked, then agreed on by every member.
    let local = if newcomm.is_empty() {
        Err((Class::Arg, "the newcomm argument is a null pointer".to_string()))
    } else if stream == 0 {
        Ok(None)
    } else {
        streams::lookup(stream).map(Some)
    };
    let index = match agree(m, comm, F, local.as_ref().map(|_| ()).map_err(|e| e.clone())) {
        Ok(()) => local.unwrap_or(None),
        Err(rc) => return rc,
    };
    let new = match m.comm_dup(comm) {
        Ok(new) => new,
        Err(rc) => return rc,
    };
    if let Some(i) = index {
        // Attached before the record exists: the stream cannot be freed between the two.
        streams::slot(i).attach();
        let rc = streams::attach(st, new, Record::Stream(i));
        if rc != mpi::SUCCESS {
            streams::slot(i).detach();
            let _ = m.comm_free(new);
            return rc;
        }
    } else if streams::has_record(st, new) {
        // MPIX_STREAM_NULL: a plain communicator, even from a stream communicator (whose dup copied its
        // record): the record goes (its delete callback detaches the stream).
        let _ = m.comm_delete_attr(new, st.keyval);
    }
    // Agreed above: every member's `newcomm` is there.
    newcomm.set(new);
    mpi::SUCCESS
}

/// `MPIX_Comm_get_stream`.
pub fn comm_get_stream(comm: H, idx: c_int, stream: AppArg<H>) -> c_int {
    const F: &str = "MPIX_Comm_get_stream";
    let (m, st) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if stream.is_empty() {
        return raise(comm, Class::Arg, F, "the stream argument is a null pointer");
    }
    if comm == mpi::COMM_NULL {
        return raise(mpi::COMM_WORLD, Class::Comm, F, "the communicator is MPI_COMM_NULL");
    }
    /// What the record says, taken out of it (no MPI call while it is lent).
    enum Seen {
        None,
        Multiplex(Result<H, String>),
        Stream(usize),
        Plain,
    }
    let seen = streams::with_record(st, comm, |record| match record {
        None => Seen::None,
        Some(Record::Multiplex(layout)) => match multiplex::of(layout.as_ref()) {
            Some(mx) => Seen::Multiplex(mx.stream_at(idx)),
            None => Seen::Plain,
        },
        Some(Record::Stream(i)) | Some(Record::Policy(i)) => Seen::Stream(*i),
    });
    let found = match seen {
        Seen::Multiplex(Ok(h)) => {
            stream.set(h);
            return mpi::SUCCESS;
        }
        Seen::Multiplex(Err(e)) => return raise(comm, Class::Arg, F, &e),
        Seen::None => {
            // Not one of ours: the library judges the handle (a freed communicator is its MPI_ERR_COMM).
            if let Err(rc) = m.comm_test_inter(comm) {
                return rc;
            }
            None
        }
        Seen::Stream(i) => Some(i),
        Seen::Plain => None,
    };
    if idx != 0 {
        return raise(
            comm,
            Class::Arg,
            F,
            &format!("index {idx} is out of range: the communicator has 1 local stream (index 0)"),
        );
    }
    stream.set(found.map_or(0, streams::handle));
    mpi::SUCCESS
}

/// `MPIX_Stream_progress`.
pub fn stream_progress(stream: H) -> c_int {
    const F: &str = "MPIX_Stream_progress";
    let (m, st) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if stream != 0 {
        if let Err((class, e)) = streams::lookup(stream) {
            return raise(mpi::COMM_WORLD, class, F, &e);
        }
    }
    // Every stream shares the library's endpoints: a probe on our private communicator turns its
    // progress engine once.
    mpi::code(m.iprobe(mpi::ANY_SOURCE, mpi::ANY_TAG, st.progress_comm).map(|_| ()))
}

/// `MPIX_Stream_comm_create_multiplex`: `array`, the program's `count` handles (a count out of
/// `0..=multiplex::MAX_WIDTH` is refused unread).
pub fn comm_create_multiplex(comm: H, count: c_int, array: AppInArray<H>, newcomm: AppArg<H>) -> c_int {
    if let Err(rc) = ready("MPIX_Stream_comm_create_multiplex") {
        return rc;
    }
    let streams: Option<Vec<H>> =
        (!array.ptr().is_null() && (0..=multiplex::MAX_WIDTH).contains(&count)).then(|| array.iter().collect());
    let mut made = newcomm.get();
    let rc = multiplex::create(comm, count, streams.as_deref(), made.as_mut());
    if let Some(made) = made {
        newcomm.set(made);
    }
    rc
}
