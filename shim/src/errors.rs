//! MPI errors raised by mpixstream: a readable message per error, reported through the communicator's
//! error handler like any MPI error.
//!
//! How: at `MPI_Init` we add one dynamic error class per standard class we report, and give each distinct
//! message its own dynamic error code in that class (`MPI_Add_error_code` + `MPI_Add_error_string`), so
//! `MPI_Error_string` returns the message and a fatal handler prints it. Our `MPI_Error_class`
//! interposer maps our dynamic classes back to the standard ones (MPICH 4.0.2's `MPI_Add_error_code`
//! on a predefined class yields codes with garbage strings, so we cannot use predefined classes there).
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles;
use mpixstream_wrappers::mpi::{self, Comm, Op};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The error classes we report, as standard (or native MPIX) classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Arg,
    Count,
    Comm,
    Tag,
    Rank,
    Request,
    Other,
    Intern,
    Pending,
    InfoValue,
    Unsupported,
    Stream,
}

const ALL: [Class; 12] = [
    Class::Arg,
    Class::Count,
    Class::Comm,
    Class::Tag,
    Class::Rank,
    Class::Request,
    Class::Other,
    Class::Intern,
    Class::Pending,
    Class::InfoValue,
    Class::Unsupported,
    Class::Stream,
];

impl Class {
    pub fn standard(self) -> c_int {
        match self {
            Class::Arg => MPI_ERR_ARG,
            Class::Count => MPI_ERR_COUNT,
            Class::Comm => MPI_ERR_COMM,
            Class::Tag => MPI_ERR_TAG,
            Class::Rank => MPI_ERR_RANK,
            Class::Request => MPI_ERR_REQUEST,
            Class::Other => MPI_ERR_OTHER,
            Class::Intern => MPI_ERR_INTERN,
            Class::Pending => MPI_ERR_PENDING,
            Class::InfoValue => MPI_ERR_INFO_VALUE,
            Class::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
            Class::Stream => MPIX_ERR_STREAM,
        }
    }
}

/// Distinct messages get distinct codes up to this many; beyond it (a program looping on errors)
/// a message reuses its class's generic code, whose string says so.
const MAX_CODES: usize = 1024;

pub struct Errors {
    /// Our dynamic class for each entry of `ALL`.
    dynamic: [c_int; ALL.len()],
    codes: Mutex<HashMap<(Class, String), c_int>>,
    generic: [c_int; ALL.len()],
}

impl Errors {
    /// Creates our classes; called once, right after `PMPI_Init*`.
    pub fn create() -> Result<Errors, String> {
        let mut dynamic = [0; ALL.len()];
        let mut generic = [0; ALL.len()];
        for (i, class) in ALL.iter().enumerate() {
            dynamic[i] = mpi::errors::add_error_class().map_err(|rc| format!("MPI_Add_error_class failed ({rc})"))?;
            let msg = format!("mpixstream: {:?} error (see earlier messages)", class);
            generic[i] = add_code(dynamic[i], &msg)?;
        }
        Ok(Errors { dynamic, codes: Mutex::new(HashMap::new()), generic })
    }

    fn index(class: Class) -> usize {
        ALL.iter().position(|&c| c == class).unwrap_or(0)
    }

    /// The code carrying `msg` in `class`.
    pub fn code(&self, class: Class, msg: &str) -> c_int {
        let i = Self::index(class);
        let mut codes = self.codes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&c) = codes.get(&(class, msg.to_string())) {
            return c;
        }
        if codes.len() >= MAX_CODES {
            return self.generic[i];
        }
        match add_code(self.dynamic[i], msg) {
            Ok(c) => {
                codes.insert((class, msg.to_string()), c);
                c
            }
            Err(_) => self.generic[i],
        }
    }

    /// Maps one of our dynamic classes to the standard class it stands for.
    pub fn standard_class(&self, dynamic_class: c_int) -> Option<c_int> {
        self.dynamic.iter().position(|&d| d == dynamic_class).map(|i| ALL[i].standard())
    }
}

fn add_code(class: c_int, msg: &str) -> Result<c_int, String> {
    let code = mpi::errors::add_error_code(class).map_err(|rc| format!("MPI_Add_error_code failed ({rc})"))?;
    // MPICH keeps at most MPI_MAX_ERROR_STRING - 1 characters.
    let mut text = msg.replace('\0', " ");
    if text.len() >= MPI_MAX_ERROR_STRING {
        let mut cut = MPI_MAX_ERROR_STRING - 4;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    let c = CString::new(text).unwrap_or_default();
    mpi::errors::add_error_string(code, &c).map_err(|rc| format!("MPI_Add_error_string failed ({rc})"))?;
    Ok(code)
}

/// Our error classes and codes, created at `MPI_Init*` ([`install`]) and usable until `MPI_Finalize`
/// ([`retire`]); before and after that, errors are reported on stderr.
static ERRORS: OnceLock<Errors> = OnceLock::new();
static LIVE: AtomicBool = AtomicBool::new(false);

/// Makes `errors` the registry [`raise`] reports through (once, right after `PMPI_Init*`).
pub fn install(errors: Errors) {
    let _ = ERRORS.set(errors);
    LIVE.store(true, Ordering::Release);
}

/// From `MPI_Finalize` on, errors go to stderr (MPICH's handlers are gone).
pub fn retire() {
    LIVE.store(false, Ordering::Release);
}

fn live() -> Option<&'static Errors> {
    if LIVE.load(Ordering::Acquire) {
        ERRORS.get()
    } else {
        None
    }
}

/// The standard class behind one of our dynamic classes (our `MPI_Error_class`).
pub fn standard_class(dynamic_class: c_int) -> Option<c_int> {
    ERRORS.get()?.standard_class(dynamic_class)
}

/// Raises an error from an MPIX entry point: through `comm`'s error handler once MPI is initialised
/// (MPI_ERRORS_ARE_FATAL aborts with the message; MPI_ERRORS_RETURN returns the code), else on stderr.
/// `func` names the entry point, as MPI error messages do.
#[cold]
pub fn raise(comm: MPI_Comm, class: Class, func: &str, msg: &str) -> c_int {
    let text = format!("{func}: {msg}");
    let Some(errors) = live() else {
        mpixstream_wrappers::say!("mpixstream: {text}");
        return class.standard();
    };
    let code = errors.code(class, &text);
    let target = if comm == MPI_COMM_NULL || !handles::is_comm(comm) { MPI_COMM_WORLD } else { comm };
    Comm(target).call_errhandler(code);
    code
}

/// Makes a local check of a collective's arguments collective: every member of `comm` (an
/// intracommunicator) learns whether any member's check failed, so that all fail together instead of
/// some waiting in a collective the others skipped. On failure each member raises an error on `comm`:
/// the failing member its own message, the others one naming the lowest failing rank, in its class.
/// Costs one `MPI_Allreduce` of an `int`.
pub fn agree(comm: MPI_Comm, func: &str, local: Result<(), (Class, String)>) -> Result<(), c_int> {
    let c = Comm(comm);
    // As before the typed layer: a failed rank or size query leaves 0 (the allreduce reports the comm).
    let rank = c.rank().unwrap_or(0);
    let _ = c.size();
    let width = ALL.len() as c_int;
    // The lowest failing rank, and its class, in one int: rank * width + class index.
    let mine = match &local {
        Ok(()) => c_int::MAX,
        Err((class, _)) => rank * width + Errors::index(*class) as c_int,
    };
    let mut lowest = [c_int::MAX];
    c.allreduce(&[mine], &mut lowest, Op::MIN)?;
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

/// An `MPI_*` return code, turned into a `Result`.
#[inline]
pub fn check(rc: c_int) -> Result<(), c_int> {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// MPICH's text for an error code (`MPI_Error_string`).
pub fn error_string(code: c_int) -> String {
    mpi::errors::error_string(code)
}
