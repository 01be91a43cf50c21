//! The MPIX stream API for a program on the standard ABI (`include/mpix_stream_abi.h`), on the serial
//! model: the exported entry points (`crate::mpix`, `crate::multiplex`) call these with the program's
//! pointer-wide handles where `abi::standard()`. Streams are local objects (`streams`); a stream
//! communicator is a dup of its parent carrying its stream in a record; its traffic, like every stream's,
//! is the library's own on its shared endpoints. The queue-backed streams (`info` key `type`), the enqueue
//! calls and the progress threads are refused ([`super::refuse`]).
use super::errors::{agree, mpi_live, raise, Class};
use super::mpi::{self, H};
use super::multiplex;
use super::streams::{self, Record};
use std::os::raw::{c_char, c_int};

/// The table and state, or the error to return: before `MPI_Init` and after `MPI_Finalize` a call is
/// erroneous (the bare class and a line on stderr, as on MPICH's ABI).
fn ready(f: &str) -> Result<(&'static mpi::Mpi, &'static streams::State), c_int> {
    let m = mpi::mpi().map_err(|e| {
        eprintln!("mpixstream: {f}: {e}");
        mpi::ERR_OTHER
    })?;
    if !mpi_live() {
        eprintln!("mpixstream: {f} called outside MPI_Init .. MPI_Finalize");
        return Err(mpi::ERR_OTHER);
    }
    let st = streams::state().map_err(|e| raise(mpi::COMM_WORLD, Class::Other, f, &e))?;
    Ok((m, st))
}

/// The `type` info value of `MPIX_Stream_create`'s `info`, if any.
unsafe fn info_type(m: &mpi::Mpi, info: H) -> Option<String> {
    if info == mpi::INFO_NULL || info == 0 {
        return None;
    }
    let mut buf = vec![0 as c_char; 1025];
    let (mut len, mut flag) = (buf.len() as c_int, 0);
    if (m.Info_get_string)(info, c"type".as_ptr(), &mut len, buf.as_mut_ptr(), &mut flag) != mpi::SUCCESS || flag == 0 {
        return None;
    }
    let text = std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned();
    (!text.is_empty()).then_some(text)
}

pub unsafe fn stream_create(info: H, stream: *mut H) -> c_int {
    const F: &str = "MPIX_Stream_create";
    let (m, _) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if stream.is_null() {
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
    *stream = streams::handle(i);
    mpi::SUCCESS
}

pub unsafe fn stream_free(stream: *mut H) -> c_int {
    const F: &str = "MPIX_Stream_free";
    if let Err(rc) = ready(F) {
        return rc;
    }
    if stream.is_null() {
        return raise(mpi::COMM_WORLD, Class::Arg, F, "the stream argument is a null pointer");
    }
    if *stream == 0 {
        return raise(mpi::COMM_WORLD, Class::Stream, F, "the stream is MPIX_STREAM_NULL");
    }
    let i = match streams::lookup(*stream) {
        Ok(i) => i,
        Err((class, e)) => return raise(mpi::COMM_WORLD, class, F, &e),
    };
    let n = streams::slot(i).attached();
    if n > 0 {
        return raise(
            mpi::COMM_WORLD,
            Class::Other,
            F,
            &format!("stream 0x{:x} is still attached to {n} communicator(s); free them first", *stream),
        );
    }
    streams::release(i);
    *stream = 0;
    mpi::SUCCESS
}

pub unsafe fn stream_comm_create(comm: H, stream: H, newcomm: *mut H) -> c_int {
    const F: &str = "MPIX_Stream_comm_create";
    let (m, st) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if comm == mpi::COMM_NULL {
        return raise(mpi::COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
    }
    let mut inter = 0;
    let rc = (m.Comm_test_inter)(comm, &mut inter);
    if rc != mpi::SUCCESS {
        return rc;
    }
    if inter != 0 {
        return raise(
            comm,
            Class::Comm,
            F,
            "the parent is an intercommunicator; stream communicators need an intracommunicator",
        );
    }
    // Arguments only this process can judge: checked, then agreed on by every member.
    let local = if newcomm.is_null() {
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
    let mut new = mpi::COMM_NULL;
    let rc = (m.Comm_dup)(comm, &mut new);
    if rc != mpi::SUCCESS {
        return rc;
    }
    if let Some(i) = index {
        // Attached before the record exists: the stream cannot be freed between the two.
        streams::slot(i).attach();
        let rc = streams::attach(st, new, Record::Stream(i));
        if rc != mpi::SUCCESS {
            streams::slot(i).detach();
            (m.Comm_free)(&mut new);
            return rc;
        }
    } else if streams::record(st, new).is_some() {
        // MPIX_STREAM_NULL: a plain communicator, even from a stream communicator (whose dup copied its
        // record): the record goes (its delete callback detaches the stream).
        (m.Comm_delete_attr)(new, st.keyval);
    }
    *newcomm = new;
    mpi::SUCCESS
}

pub unsafe fn comm_get_stream(comm: H, idx: c_int, stream: *mut H) -> c_int {
    const F: &str = "MPIX_Comm_get_stream";
    let (m, st) = match ready(F) {
        Ok(r) => r,
        Err(rc) => return rc,
    };
    if stream.is_null() {
        return raise(comm, Class::Arg, F, "the stream argument is a null pointer");
    }
    if comm == mpi::COMM_NULL {
        return raise(mpi::COMM_WORLD, Class::Comm, F, "the communicator is MPI_COMM_NULL");
    }
    let record = streams::record(st, comm);
    if let Some(mx) = record.and_then(|r| match r {
        Record::Multiplex(layout) => multiplex::of(layout.as_ref()),
        _ => None,
    }) {
        return multiplex::get_stream(comm, mx, idx, stream);
    }
    if record.is_none() {
        // Not one of ours: the library judges the handle (a freed communicator is its MPI_ERR_COMM).
        let mut inter = 0;
        let rc = (m.Comm_test_inter)(comm, &mut inter);
        if rc != mpi::SUCCESS {
            return rc;
        }
    }
    if idx != 0 {
        return raise(
            comm,
            Class::Arg,
            F,
            &format!("index {idx} is out of range: the communicator has 1 local stream (index 0)"),
        );
    }
    *stream = match record {
        Some(Record::Stream(i)) | Some(Record::Policy(i)) => streams::handle(*i),
        _ => 0,
    };
    mpi::SUCCESS
}

pub unsafe fn stream_progress(stream: H) -> c_int {
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
    let mut flag = 0;
    (m.Iprobe)(mpi::ANY_SOURCE, mpi::ANY_TAG, st.progress_comm, &mut flag, mpi::STATUS_IGNORE)
}

pub unsafe fn comm_create_multiplex(comm: H, count: c_int, array: *const H, newcomm: *mut H) -> c_int {
    if let Err(rc) = ready("MPIX_Stream_comm_create_multiplex") {
        return rc;
    }
    multiplex::create(comm, count, array, newcomm)
}
