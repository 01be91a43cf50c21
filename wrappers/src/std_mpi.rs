//! The MPI standard ABI as the lean library's MPIX implementation on it (`standard_abi`) calls it: the
//! constants of `mpi_abi.h` it needs, its status layout, a table of the `PMPI_*` functions it uses, typed
//! with the ABI's pointer handles ([`H`]) and looked up once in the program's MPI library
//! (`abi::lookup`), and the typed functions over that table ([`Mpi`]'s methods), the only way it calls
//! it. MPICH's `ffi` and `pmpi` tables (and [`crate::mpi`] over them) are of no use here: their handles
//! are `int`s and their constants MPICH's.
//!
//! `PMPI_*`, not the next `MPI_*`: the hidden communicators and the agreement collectives are ours, and a
//! profiling layer of the program's should not count them. The exception: the point-to-point calls that
//! carry the application's indexed messages on a multiplex communicator's hidden communicators (marked
//! `as "MPI_"`) go through the next `MPI_*` definition, so that the tools library counts them (and
//! attributes them to the multiplex communicator and its index: `multiplex::hidden_of`).
//!
//! The typed functions, as [`crate::mpi`] over MPICH's table: calls return [`MpiResult`] (`Err`: the
//! library's error code, unchanged); our own data are Rust values and slices; the application's buffers,
//! statuses and request slots pass through as its arguments (`crate::app`). One difference: a handle of this ABI is a pointer the library follows
//! (MPICH 5's `libmpi_abi` reads its object's header through it), not an `int` it can check. Every handle
//! passed here is therefore one of: a predefined constant of `mpi_abi.h` (below), a handle the library
//! returned to us (our dups, keyval-free), or a handle the program passed to the MPI or MPIX call being
//! served, which MPI requires to be a valid handle of the library (the program's own call would pass it
//! to the library just the same). Our stream handles (`streams::handle`) are never passed. The one
//! argument for all the calls is made in [`call!`].
use crate::abi;
use crate::app::{AppArg, AppIn};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// A handle of the standard ABI (`MPI_Comm`, `MPI_Datatype`, ...: a pointer), as the program passes it.
pub type H = usize;
pub type Count = i64;

pub use crate::abi::Status;

// Handles (`mpi_abi.h`, identical in MPICH 5.0.2's and Intel MPI 2021's).
pub const COMM_NULL: H = 0x100;
pub const COMM_WORLD: H = abi::MPI_COMM_WORLD;
pub const COMM_SELF: H = 0x102;
pub const INFO_NULL: H = 0x130;
pub const ERRORS_ARE_FATAL: H = 0x141;
pub const ERRORS_ABORT: H = 0x142;
pub const ERRORS_RETURN: H = 0x143;
pub const MESSAGE_NULL: H = 0x128;
pub const MESSAGE_NO_PROC: H = 0x129;
pub const REQUEST_NULL: H = 0x180;
pub const INT: H = 0x209;
pub const BYTE: H = 0x247;
pub const MIN: H = 0x22;
pub const MAX: H = 0x23;

// Classes.
pub const SUCCESS: c_int = 0;
pub const ERR_COUNT: c_int = 2;
pub const ERR_TAG: c_int = 4;
pub const ERR_COMM: c_int = 5;
pub const ERR_RANK: c_int = 6;
pub const ERR_ARG: c_int = 13;
pub const ERR_OTHER: c_int = 16;
pub const ERR_PENDING: c_int = 18;
pub const ERR_IN_STATUS: c_int = 19;
pub const ERR_UNSUPPORTED_OPERATION: c_int = abi::MPI_ERR_UNSUPPORTED_OPERATION;

// Other constants.
pub const ANY_SOURCE: c_int = -1;
pub const ANY_TAG: c_int = -2;
pub const PROC_NULL: c_int = -3;
pub const TAG_UB: c_int = 501;
pub const MAX_ERROR_STRING: usize = 512;
/// `MPI_STATUS_IGNORE` is the null pointer on this ABI.
pub const STATUS_IGNORE: *mut Status = std::ptr::null_mut();

pub type CopyFn = unsafe extern "C" fn(H, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
pub type DeleteFn = unsafe extern "C" fn(H, c_int, *mut c_void, *mut c_void) -> c_int;

/// The table: one field per function, named as the function, looked up as `PMPI_<name>`, or as
/// `<prefix><name>` where the row says `as "<prefix>"`.
macro_rules! table {
    (@prefix) => { "PMPI_" };
    (@prefix $p:literal) => { $p };
    ($($name:ident: fn($($arg:ty),*) $(as $prefix:literal)?;)*) => {
        /// The resolved functions; called only through the typed methods below.
        #[allow(non_snake_case)]
        pub struct Mpi {
            $($name: unsafe extern "C" fn($($arg),*) -> c_int,)*
        }

        fn load() -> Result<Mpi, String> {
            Ok(Mpi {
                $($name: {
                    let name = concat!(table!(@prefix $($prefix)?), stringify!($name), "\0");
                    let name = std::ffi::CStr::from_bytes_with_nul(name.as_bytes()).map_err(|e| e.to_string())?;
                    let f = abi::lookup(name);
                    if f.is_null() {
                        return Err(format!("the MPI library has no {}", name.to_string_lossy()));
                    }
                    // SAFETY: the symbol of that name, whose prototype in mpi_abi.h is this field's.
                    unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> c_int>(f) }
                },)*
            })
        }
    };
}

table! {
    Initialized: fn(*mut c_int);
    Finalized: fn(*mut c_int);
    Query_thread: fn(*mut c_int);
    Comm_dup: fn(H, *mut H);
    Comm_free: fn(*mut H);
    Comm_rank: fn(H, *mut c_int);
    Comm_size: fn(H, *mut c_int);
    Comm_test_inter: fn(H, *mut c_int);
    Comm_create_keyval: fn(Option<CopyFn>, Option<DeleteFn>, *mut c_int, *mut c_void);
    Comm_set_attr: fn(H, c_int, *mut c_void);
    Comm_get_attr: fn(H, c_int, *mut c_void, *mut c_int);
    Comm_delete_attr: fn(H, c_int);
    Comm_call_errhandler: fn(H, c_int);
    Comm_get_errhandler: fn(H, *mut H);
    Comm_set_errhandler: fn(H, H);
    Errhandler_free: fn(*mut H);
    Add_error_code: fn(c_int, *mut c_int);
    Add_error_string: fn(c_int, *const c_char);
    Info_get_string: fn(H, *const c_char, *mut c_int, *mut c_char, *mut c_int);
    Allreduce: fn(*const c_void, *mut c_void, c_int, H, H, H);
    Allgather: fn(*const c_void, c_int, H, *mut c_void, c_int, H, H);
    Iprobe: fn(c_int, c_int, H, *mut c_int, *mut Status);
    Improbe: fn(c_int, c_int, H, *mut c_int, *mut H, *mut Status) as "MPI_";
    Mrecv: fn(*mut c_void, c_int, H, *mut H, *mut Status) as "MPI_";
    Mrecv_c: fn(*mut c_void, Count, H, *mut H, *mut Status) as "MPI_";
    Send: fn(*const c_void, c_int, H, c_int, c_int, H) as "MPI_";
    Send_c: fn(*const c_void, Count, H, c_int, c_int, H) as "MPI_";
    Isend: fn(*const c_void, c_int, H, c_int, c_int, H, *mut H) as "MPI_";
    Isend_c: fn(*const c_void, Count, H, c_int, c_int, H, *mut H) as "MPI_";
    Recv: fn(*mut c_void, c_int, H, c_int, c_int, H, *mut Status) as "MPI_";
    Recv_c: fn(*mut c_void, Count, H, c_int, c_int, H, *mut Status) as "MPI_";
    Irecv: fn(*mut c_void, c_int, H, c_int, c_int, H, *mut H) as "MPI_";
    Irecv_c: fn(*mut c_void, Count, H, c_int, c_int, H, *mut H) as "MPI_";
    Comm_get_name: fn(H, *mut c_char, *mut c_int);
    Type_size_c: fn(H, *mut Count);
    Get_count_c: fn(*const Status, H, *mut Count);
    Gather: fn(*const c_void, c_int, H, *mut c_void, c_int, H, c_int, H);
    Gatherv: fn(*const c_void, c_int, H, *mut c_void, *const c_int, *const c_int, H, c_int, H);
    Abort: fn(H, c_int);
    Get_library_version: fn(*mut c_char, *mut c_int);
}

static MPI: OnceLock<Result<Mpi, String>> = OnceLock::new();

/// The table, or why the program's library cannot serve it (a function missing: not an MPI-4 library).
pub fn mpi() -> Result<&'static Mpi, &'static str> {
    MPI.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

/// The outcome of a call (`Err`: the error code the library returned), and an attribute word the library
/// stores and hands back (never dereferenced by it), as on MPICH's ABI.
pub use crate::mpi::{MpiResult, Opaque};

/// `rc` as a result.
#[inline(always)]
pub fn check(rc: c_int) -> MpiResult {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// A result as the code an entry point returns.
#[inline(always)]
pub fn code(r: MpiResult) -> c_int {
    r.err().unwrap_or(SUCCESS)
}

/// Calls the table's `name` with `args` and gives its return code. Used only in [`Mpi`]'s methods.
macro_rules! call {
    ($m:ident . $name:ident ( $($arg:expr),* $(,)? )) => {{
        let f = $m.$name;
        // SAFETY: `f` is the program's library's `PMPI_<name>` (or `MPI_<name>`), looked up by that name
        // in `load`, with the prototype of `mpi_abi.h` (MPI-5's standard ABI, fixed across libraries).
        // The methods below pass values, handles that are predefined constants, ours from the library, or
        // the program's for the call being served (the module comment: valid handles, as MPI requires),
        // pointers to live Rust values of the prototype's C types, valid for the whole call, and the
        // application's arguments (`crate::app`), each valid as MPI requires of it for the call. The
        // library keeps none of these pointers past the call, except the attribute words and the keyval
        // callbacks, which it stores by value and never dereferences.
        unsafe { f($($arg),*) }
    }};
}

/// An element count in its two forms: the `int` call or the `_c` one, as the program called (the tools
/// library counts the two under their own names).
#[derive(Clone, Copy)]
pub enum N {
    Int(c_int),
    Large(Count),
}

impl N {
    pub fn get(self) -> Count {
        match self {
            N::Int(n) => n as Count,
            N::Large(n) => n,
        }
    }
}

/// The standard ABI's `MPI_MAX_INFO_VAL` + 1: room for any info value and its terminator.
const INFO_VALUE_ROOM: usize = 1025;

impl Mpi {
    /// `MPI_Initialized` (false where the call fails).
    pub fn initialized(&self) -> bool {
        let mut flag = 0;
        call!(self.Initialized(&mut flag));
        flag != 0
    }

    /// `MPI_Finalized` (false where the call fails).
    pub fn finalized(&self) -> bool {
        let mut flag = 0;
        call!(self.Finalized(&mut flag));
        flag != 0
    }

    /// `MPI_Query_thread`: the standard ABI's `MPI_THREAD_*` (0 where the call fails).
    pub fn query_thread(&self) -> c_int {
        let mut level = 0;
        call!(self.Query_thread(&mut level));
        level
    }

    pub fn comm_dup(&self, comm: H) -> MpiResult<H> {
        let mut new = COMM_NULL;
        check(call!(self.Comm_dup(comm, &mut new)))?;
        Ok(new)
    }

    /// `MPI_Comm_free` of a communicator of ours.
    pub fn comm_free(&self, comm: H) -> MpiResult {
        let mut c = comm;
        check(call!(self.Comm_free(&mut c)))
    }

    pub fn comm_rank(&self, comm: H) -> MpiResult<c_int> {
        let mut r = 0;
        check(call!(self.Comm_rank(comm, &mut r)))?;
        Ok(r)
    }

    pub fn comm_size(&self, comm: H) -> MpiResult<c_int> {
        let mut n = 0;
        check(call!(self.Comm_size(comm, &mut n)))?;
        Ok(n)
    }

    /// Whether `comm` is an intercommunicator.
    pub fn comm_test_inter(&self, comm: H) -> MpiResult<bool> {
        let mut flag = 0;
        check(call!(self.Comm_test_inter(comm, &mut flag)))?;
        Ok(flag != 0)
    }

    /// `MPI_Comm_create_keyval` with our callbacks and no extra state.
    pub fn comm_create_keyval(&self, copy: Option<CopyFn>, delete: Option<DeleteFn>) -> MpiResult<c_int> {
        let mut keyval = 0;
        check(call!(self.Comm_create_keyval(copy, delete, &mut keyval, std::ptr::null_mut())))?;
        Ok(keyval)
    }

    /// Sets attribute `keyval` of `comm` to `value`, a word the library stores and hands back to the
    /// keyval's callbacks (it never dereferences it).
    pub fn comm_set_attr(&self, comm: H, keyval: c_int, value: Opaque) -> MpiResult {
        check(call!(self.Comm_set_attr(comm, keyval, value.0)))
    }

    /// Attribute `keyval`'s stored word, `None` where it is not set.
    pub fn comm_get_attr(&self, comm: H, keyval: c_int) -> MpiResult<Option<Opaque>> {
        let mut value: *mut c_void = std::ptr::null_mut();
        let mut flag = 0;
        // `attribute_val` is a `void *` through which the library writes the stored word.
        check(call!(self.Comm_get_attr(comm, keyval, (&mut value as *mut *mut c_void).cast(), &mut flag)))?;
        Ok((flag != 0).then_some(Opaque(value)))
    }

    /// `MPI_TAG_UB` of `comm`, `None` where the library gives none.
    pub fn tag_ub(&self, comm: H) -> Option<c_int> {
        let ub = self.comm_get_attr(comm, TAG_UB).ok()??.0.cast::<c_int>();
        // SAFETY: the value of the predefined attribute `MPI_TAG_UB` is the address of an `int` the
        // library keeps for the life of the communicator (MPI 4.1 §7.1.4), which the caller holds.
        (!ub.is_null()).then(|| unsafe { *ub })
    }

    pub fn comm_delete_attr(&self, comm: H, keyval: c_int) -> MpiResult {
        check(call!(self.Comm_delete_attr(comm, keyval)))
    }

    /// Raises `code` through `comm`'s error handler; gives the call's return.
    pub fn comm_call_errhandler(&self, comm: H, code: c_int) -> c_int {
        call!(self.Comm_call_errhandler(comm, code))
    }

    /// `comm`'s error handler (a new reference: free it with [`Mpi::errhandler_free`]).
    pub fn comm_get_errhandler(&self, comm: H) -> MpiResult<H> {
        let mut h = ERRORS_RETURN;
        check(call!(self.Comm_get_errhandler(comm, &mut h)))?;
        Ok(h)
    }

    pub fn comm_set_errhandler(&self, comm: H, handler: H) -> MpiResult {
        check(call!(self.Comm_set_errhandler(comm, handler)))
    }

    pub fn errhandler_free(&self, handler: H) -> MpiResult {
        let mut h = handler;
        check(call!(self.Errhandler_free(&mut h)))
    }

    /// `MPI_Add_error_code`: a new code of class `class`.
    pub fn add_error_code(&self, class: c_int) -> MpiResult<c_int> {
        let mut c = class;
        check(call!(self.Add_error_code(class, &mut c)))?;
        Ok(c)
    }

    pub fn add_error_string(&self, code: c_int, text: &CStr) -> MpiResult {
        check(call!(self.Add_error_string(code, text.as_ptr())))
    }

    /// `MPI_Info_get_string` of `key`: the value, `None` where the key is not set.
    pub fn info_get_string(&self, info: H, key: &CStr) -> MpiResult<Option<String>> {
        let mut buf = [0 as c_char; INFO_VALUE_ROOM];
        let (mut len, mut flag) = (buf.len() as c_int, 0);
        check(call!(self.Info_get_string(info, key.as_ptr(), &mut len, buf.as_mut_ptr(), &mut flag)))?;
        if flag == 0 {
            return Ok(None);
        }
        // The library wrote a terminated string into `buf` (at most `len` bytes with its terminator).
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// `MPI_Allreduce` of our `int`s.
    pub fn allreduce_ints(&self, send: &[c_int], recv: &mut [c_int], op: H, comm: H) -> MpiResult {
        assert_eq!(send.len(), recv.len(), "allreduce: send and receive lengths differ");
        check(call!(self.Allreduce(send.as_ptr().cast(), recv.as_mut_ptr().cast(), ints(send.len()), INT, op, comm)))
    }

    /// `MPI_Allgather` of our `int`s from every process into `recv` (`send.len()` × size elements).
    pub fn allgather_ints(&self, send: &[c_int], recv: &mut [c_int], comm: H) -> MpiResult {
        let size = self.comm_size(comm)? as usize;
        assert_eq!(send.len() * size, recv.len(), "allgather: receive length is not send length × size");
        let n = ints(send.len());
        check(call!(self.Allgather(send.as_ptr().cast(), n, INT, recv.as_mut_ptr().cast(), n, INT, comm)))
    }

    /// The communicator's name as the library keeps it.
    pub fn comm_get_name(&self, comm: H) -> MpiResult<String> {
        let mut buf = [0 as c_char; 257];
        let mut len = 0;
        check(call!(self.Comm_get_name(comm, buf.as_mut_ptr(), &mut len)))?;
        let bytes: Vec<u8> = buf[..(len.clamp(0, 256) as usize)].iter().map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `MPI_Type_size_c`.
    pub fn type_size(&self, datatype: H) -> MpiResult<Count> {
        let mut size = 0;
        check(call!(self.Type_size_c(datatype, &mut size)))?;
        Ok(size)
    }

    /// `MPI_Get_count_c` of a status the library filled.
    pub fn get_count(&self, status: &Status, datatype: H) -> MpiResult<Count> {
        let mut n = 0;
        check(call!(self.Get_count_c(status, datatype, &mut n)))?;
        Ok(n)
    }

    /// `MPI_Gather` of our `int`s to `root` of `comm` (`recv`, at the root: `send.len()` × size).
    pub fn gather_ints(&self, send: &[c_int], recv: &mut [c_int], root: c_int, comm: H) -> MpiResult {
        let n = ints(send.len());
        if self.comm_rank(comm)? == root {
            let size = self.comm_size(comm)? as usize;
            assert_eq!(send.len() * size, recv.len(), "gather: receive length is not send length × size");
        }
        check(call!(self.Gather(send.as_ptr().cast(), n, INT, recv.as_mut_ptr().cast(), n, INT, root, comm)))
    }

    /// `MPI_Gatherv` of our bytes to `root` of `comm` (at the root: each process's part at its
    /// displacement in `recv`, every part inside it).
    pub fn gatherv_bytes(
        &self,
        send: &[u8],
        recv: &mut [u8],
        lens: &[c_int],
        displs: &[c_int],
        root: c_int,
        comm: H,
    ) -> MpiResult {
        if self.comm_rank(comm)? == root {
            let size = self.comm_size(comm)? as usize;
            assert!(lens.len() == size && displs.len() == size, "gatherv: one length and displacement per process");
            let fits =
                lens.iter().zip(displs).all(|(&l, &d)| l >= 0 && d >= 0 && (d as usize + l as usize) <= recv.len());
            assert!(fits, "gatherv: a part outside the receive buffer");
        }
        check(call!(self.Gatherv(
            send.as_ptr().cast(),
            ints(send.len()),
            BYTE,
            recv.as_mut_ptr().cast(),
            lens.as_ptr(),
            displs.as_ptr(),
            BYTE,
            root,
            comm
        )))
    }

    /// `MPI_Get_library_version` (callable before `MPI_Init`).
    pub fn library_version(&self) -> MpiResult<String> {
        let mut buf = vec![0 as c_char; 8192]; // MPI_MAX_LIBRARY_VERSION_STRING
        let mut len = 0;
        check(call!(self.Get_library_version(buf.as_mut_ptr(), &mut len)))?;
        let bytes: Vec<u8> = buf[..len.clamp(0, 8192) as usize].iter().map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `MPI_Abort`.
    pub fn abort(&self, comm: H, code: c_int) -> c_int {
        call!(self.Abort(comm, code))
    }

    /// `MPI_Iprobe` (status ignored): whether a matching message is there.
    pub fn iprobe(&self, source: c_int, tag: c_int, comm: H) -> MpiResult<bool> {
        let mut flag = 0;
        check(call!(self.Iprobe(source, tag, comm, &mut flag, STATUS_IGNORE)))?;
        Ok(flag != 0)
    }

    /// `MPI_Improbe` (the next `MPI_*`): the matched message, `None` where there is none yet.
    pub fn improbe(&self, source: c_int, tag: c_int, comm: H) -> MpiResult<Option<H>> {
        let (mut found, mut msg) = (0, MESSAGE_NULL);
        let mut status = Status::default();
        check(call!(self.Improbe(source, tag, comm, &mut found, &mut msg, &mut status)))?;
        Ok((found != 0).then_some(msg))
    }

    /// `MPI_Send` or `MPI_Send_c` (the next `MPI_*`) of the application's send buffer.
    pub fn send(&self, buf: AppIn<c_void>, count: N, datatype: H, dest: c_int, tag: c_int, comm: H) -> MpiResult {
        let buf = buf.ptr();
        check(match count {
            N::Int(n) => call!(self.Send(buf, n, datatype, dest, tag, comm)),
            N::Large(n) => call!(self.Send_c(buf, n, datatype, dest, tag, comm)),
        })
    }

    /// `MPI_Isend` or `MPI_Isend_c` (the next `MPI_*`) of the application's send buffer: the request in
    /// its `request`.
    #[allow(clippy::too_many_arguments)]
    pub fn isend(
        &self,
        buf: AppIn<c_void>,
        count: N,
        datatype: H,
        dest: c_int,
        tag: c_int,
        comm: H,
        request: AppArg<H>,
    ) -> MpiResult {
        let (buf, request) = (buf.ptr(), request.ptr());
        check(match count {
            N::Int(n) => call!(self.Isend(buf, n, datatype, dest, tag, comm, request)),
            N::Large(n) => call!(self.Isend_c(buf, n, datatype, dest, tag, comm, request)),
        })
    }

    /// `MPI_Recv` or `MPI_Recv_c` (the next `MPI_*`) into the application's receive buffer and status.
    #[allow(clippy::too_many_arguments)]
    pub fn recv(
        &self,
        buf: AppArg<c_void>,
        count: N,
        datatype: H,
        source: c_int,
        tag: c_int,
        comm: H,
        status: AppArg<Status>,
    ) -> MpiResult {
        let (buf, status) = (buf.ptr(), status.ptr());
        check(match count {
            N::Int(n) => call!(self.Recv(buf, n, datatype, source, tag, comm, status)),
            N::Large(n) => call!(self.Recv_c(buf, n, datatype, source, tag, comm, status)),
        })
    }

    /// `MPI_Irecv` or `MPI_Irecv_c` (the next `MPI_*`) into the application's receive buffer: the request
    /// in its `request`.
    #[allow(clippy::too_many_arguments)]
    pub fn irecv(
        &self,
        buf: AppArg<c_void>,
        count: N,
        datatype: H,
        source: c_int,
        tag: c_int,
        comm: H,
        request: AppArg<H>,
    ) -> MpiResult {
        let (buf, request) = (buf.ptr(), request.ptr());
        check(match count {
            N::Int(n) => call!(self.Irecv(buf, n, datatype, source, tag, comm, request)),
            N::Large(n) => call!(self.Irecv_c(buf, n, datatype, source, tag, comm, request)),
        })
    }

    /// `MPI_Mrecv` or `MPI_Mrecv_c` (the next `MPI_*`) of the matched `message`, as [`Mpi::recv`].
    pub fn mrecv(&self, buf: AppArg<c_void>, count: N, datatype: H, message: H, status: AppArg<Status>) -> MpiResult {
        let (buf, status) = (buf.ptr(), status.ptr());
        let mut msg = message;
        check(match count {
            N::Int(n) => call!(self.Mrecv(buf, n, datatype, &mut msg, status)),
            N::Large(n) => call!(self.Mrecv_c(buf, n, datatype, &mut msg, status)),
        })
    }
}

/// A slice length as MPI's `int` count; our own buffers are far below `c_int::MAX` elements.
fn ints(len: usize) -> c_int {
    c_int::try_from(len).expect("mpixstream's own buffers hold fewer than 2^31 elements")
}
