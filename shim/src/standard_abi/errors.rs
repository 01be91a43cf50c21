//! The errors of the MPIX API on the standard ABI: each distinct message gets an error code of its
//! standard class (`MPI_Add_error_code` on the predefined class, with the message as its string), raised
//! through the communicator's error handler as any MPI error is: `MPI_ERRORS_ARE_FATAL` ends the job with
//! the message, `MPI_ERRORS_RETURN` returns the code, whose `MPI_Error_class` is the standard class and
//! whose `MPI_Error_string` is the message. (The MPICH-ABI runtime uses dynamic classes instead, because
//! MPICH 4.0.2 garbles codes added to a predefined class; no library of this ABI predates MPICH 5.)
use super::mpi::{self, H};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::{Mutex, OnceLock};

/// The classes raised here, as the standard ABI numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Arg,
    Count,
    Comm,
    Tag,
    Rank,
    Other,
    Pending,
    Unsupported,
    /// An invalid stream. The standard ABI has no `MPIX_ERR_STREAM`: `mpix_stream_abi.h` defines it as
    /// `MPI_ERR_ARG` (an invalid argument), the message names the stream.
    Stream,
}

const ALL: [Class; 9] = [
    Class::Arg,
    Class::Count,
    Class::Comm,
    Class::Tag,
    Class::Rank,
    Class::Other,
    Class::Pending,
    Class::Unsupported,
    Class::Stream,
];

impl Class {
    pub fn standard(self) -> c_int {
        match self {
            Class::Arg | Class::Stream => mpi::ERR_ARG,
            Class::Count => mpi::ERR_COUNT,
            Class::Comm => mpi::ERR_COMM,
            Class::Tag => mpi::ERR_TAG,
            Class::Rank => mpi::ERR_RANK,
            Class::Other => mpi::ERR_OTHER,
            Class::Pending => mpi::ERR_PENDING,
            Class::Unsupported => mpi::ERR_UNSUPPORTED_OPERATION,
        }
    }

    fn index(self) -> c_int {
        ALL.iter().position(|&c| c == self).unwrap_or(0) as c_int
    }
}

/// Distinct messages get distinct codes up to this many (a program looping on errors reuses the bare
/// class beyond it).
const MAX_CODES: usize = 1024;

static CODES: OnceLock<Mutex<HashMap<(Class, String), c_int>>> = OnceLock::new();

/// The code whose class is `class` and whose string is `text`.
fn code(class: Class, text: &str) -> c_int {
    let Ok(m) = mpi::mpi() else { return class.standard() };
    let mut codes = CODES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&c) = codes.get(&(class, text.to_string())) {
        return c;
    }
    if codes.len() >= MAX_CODES {
        return class.standard();
    }
    let Ok(c) = m.add_error_code(class.standard()) else {
        return class.standard();
    };
    let mut s = text.replace('\0', " ");
    if s.len() >= mpi::MAX_ERROR_STRING {
        let mut cut = mpi::MAX_ERROR_STRING - 4;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    let s = CString::new(s).unwrap_or_default();
    let _ = m.add_error_string(c, &s);
    codes.insert((class, text.to_string()), c);
    c
}

/// Whether MPI is initialised and not finalised (else no error code can be made, no handler called).
pub fn mpi_live() -> bool {
    let Ok(m) = mpi::mpi() else { return false };
    // Both asked, in this order, as MPI allows at any time.
    let (initialized, finalized) = (m.initialized(), m.finalized());
    initialized && !finalized
}

/// Raises an error of an MPIX entry point through `comm`'s error handler (`MPI_COMM_WORLD`'s where
/// `comm` is `MPI_COMM_NULL`); returns the code for `MPI_ERRORS_RETURN`. Outside `MPI_Init` ..
/// `MPI_Finalize` the bare class, and the message on stderr.
#[cold]
#[inline(never)]
pub fn raise(comm: H, class: Class, func: &str, msg: &str) -> c_int {
    let text = format!("mpixstream: {func}: {msg}");
    if !mpi_live() {
        mpixstream_wrappers::say!("{text}");
        return class.standard();
    }
    let code = code(class, &text);
    let target = if comm == mpi::COMM_NULL { mpi::COMM_WORLD } else { comm };
    if let Ok(m) = mpi::mpi() {
        m.comm_call_errhandler(target, code);
    }
    code
}

/// An error of the MPI library on one of our hidden communicators, reported through the user's; the code
/// to return.
#[inline]
pub fn forward(comm: H, r: mpi::MpiResult) -> c_int {
    let Err(rc) = r else { return mpi::SUCCESS };
    #[cold]
    fn call(comm: H, rc: c_int) -> c_int {
        if let Ok(m) = mpi::mpi() {
            m.comm_call_errhandler(comm, rc);
        }
        rc
    }
    call(comm, rc)
}

/// Makes a local check of a collective's arguments collective over intracommunicator `comm`: every
/// member learns whether any failed (one `MPI_Allreduce` of an `int`), so that all fail together instead
/// of some waiting in a collective the others skipped. The failing member raises its own message, the
/// others one naming the lowest failing rank, in its class.
pub fn agree(m: &mpi::Mpi, comm: H, func: &str, local: Result<(), (Class, String)>) -> Result<(), c_int> {
    let width = ALL.len() as c_int;
    // A failure here shows in the allreduce below. (The size is asked as it always was; unused.)
    let rank = m.comm_rank(comm).unwrap_or(0);
    let _size = m.comm_size(comm);
    let mine = match &local {
        Ok(()) => c_int::MAX,
        Err((class, _)) => rank * width + class.index(),
    };
    let mut lowest = [c_int::MAX];
    m.allreduce_ints(&[mine], &mut lowest, mpi::MIN, comm)?;
    let lowest = lowest[0];
    if let Err((class, msg)) = local {
        return Err(raise(comm, class, func, &msg));
    }
    if lowest == c_int::MAX {
        return Ok(());
    }
    let (culprit, class) = (lowest / width, ALL[(lowest % width) as usize]);
    Err(raise(
        comm,
        class,
        func,
        &format!("rank {culprit} of the communicator passed invalid arguments (see its error); nothing was created"),
    ))
}
