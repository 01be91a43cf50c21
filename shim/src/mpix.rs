//! The MPIX stream API (same prototypes and ABI as native MPICH 5), on every backend.
use crate::comms::{CommRecord, Origin, Route};
use crate::errors::{self, raise, Class};
use crate::hex;
use crate::info::info_value;
use crate::runtime::Runtime;
use crate::runtime::{mpix_entry, standard_entry};
use crate::streams::{Driver, LookupError, StreamTable};
use mpixstream_wrappers::abi;
use mpixstream_wrappers::app::{AppArg, CallScope};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles;
use mpixstream_wrappers::mpi::request::AsyncThing;
use mpixstream_wrappers::mpi::{Comm, Info, Opaque, Stream};
use mpixstream_wrappers::pmpi::pmpi;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;

/// Looks up a live stream or raises the matching error (`MPIX_ERR_STREAM`) on `comm`.
pub(crate) fn stream_or_raise<'a>(
    rt: &'a Runtime,
    handle: MPIX_Stream,
    comm: MPI_Comm,
    func: &str,
) -> Result<(usize, &'a crate::streams::StreamSlot), c_int> {
    rt.streams.lookup(handle).map_err(|e: LookupError| raise(comm, Class::Stream, func, &e.describe(handle)))
}

/// The error text for a stream whose endpoint another driver holds.
pub(crate) fn driven_elsewhere(stream: MPIX_Stream, who: Driver) -> String {
    format!(
        "stream 0x{:08x} is driven by {} right now; two threads must never drive one stream's endpoint at once \
         (a stream is a serial execution context)",
        stream as u32,
        who.describe()
    )
}

/// The stream's `type` info value, if any.
fn info_type(info: MPI_Info) -> Result<Option<String>, c_int> {
    if info == MPI_INFO_NULL {
        return Ok(None);
    }
    info_value(Info(info), c"type")
}

/// # Safety
/// `stream` is NULL or the application's stream variable, valid for a write (a handle's width on the
/// program's ABI).
#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_create(info: WideHandle, stream: *mut MPIX_Stream) -> c_int {
    // Handles by value are register-wide (`ffi::WideHandle`): pointers on the standard ABI, MPICH's
    // `int`s otherwise; output handles are written at the program's ABI's width.
    if abi::standard() {
        // SAFETY: the application's own arguments, as it passed them (this function's contract).
        return standard_entry("MPIX_Stream_create", || unsafe {
            let scope = CallScope::new();
            crate::standard_abi::mpix::stream_create(info, AppArg::new(&scope, stream.cast()))
        });
    }
    let info = info as MPI_Info;
    mpix_entry("MPIX_Stream_create", |rt| {
        const F: &str = "MPIX_Stream_create";
        if stream.is_null() {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the stream argument is a null pointer");
        }
        // A non-empty `type` asks for a queue-backed stream (crate::enqueue).
        let queue = match info_type(info) {
            Err(code) => return code,
            Ok(None) => None,
            Ok(Some(t)) if t.is_empty() => None,
            Ok(Some(t)) => match crate::enqueue::parse_info(rt, info, &t) {
                Ok(spec) => Some(spec),
                Err((class, msg)) => return raise(MPI_COMM_WORLD, class, F, &msg),
            },
        };
        let Some(index) = rt.streams.allocate() else {
            return raise(
                MPI_COMM_WORLD,
                Class::Other,
                F,
                &format!(
                    "out of streams: all {} streams of the explicit pool are in use \
                     (raise MPIXSTREAM_STREAMS; on the native backend it sets MPIR_CVAR_CH4_RESERVE_VCIS)",
                    rt.streams.capacity()
                ),
            );
        };
        if let Err(e) = rt.create_endpoint(index) {
            rt.streams.release(index);
            return raise(MPI_COMM_WORLD, Class::Other, F, &e);
        }
        if let Some(spec) = queue {
            // The engine thread is the stream's one driver for the stream's whole life.
            let slot = rt.streams.slot(index);
            let claimed = slot.take_driver(Driver::Engine).is_ok();
            if let Err(e) = crate::enqueue::attach_queue(rt, index, spec) {
                if claimed {
                    slot.release_driver(Driver::Engine);
                }
                let _ = rt.backend.free_stream(slot.native());
                rt.streams.release(index);
                return raise(MPI_COMM_WORLD, Class::Other, F, &e);
            }
        }
        // SAFETY: the application's output variable, non-null (checked above), valid for a write.
        unsafe { *stream = StreamTable::handle(index) };
        MPI_SUCCESS
    })
}

/// # Safety
/// `stream` is NULL or the application's stream variable, valid for reads and a write.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_free(stream: *mut MPIX_Stream) -> c_int {
    if abi::standard() {
        // SAFETY: the application's own argument, as it passed it (this function's contract).
        return standard_entry("MPIX_Stream_free", || unsafe {
            let scope = CallScope::new();
            crate::standard_abi::mpix::stream_free(AppArg::new(&scope, stream.cast()))
        });
    }
    mpix_entry("MPIX_Stream_free", |rt| {
        const F: &str = "MPIX_Stream_free";
        // SAFETY: the application's stream variable (or NULL), valid for reads and a write, and used by
        // nothing else during the call (this function's contract).
        let Some(stream) = (unsafe { stream.as_mut() }) else {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the stream argument is a null pointer");
        };
        // Communicators freed where MPICH ran our callbacks in another call may still hold the stream
        // until their deferred destruction runs (`crate::deferred`): it runs now.
        crate::deferred::settle(rt);
        let (index, slot) = match stream_or_raise(rt, *stream, MPI_COMM_WORLD, F) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let pending = slot.pending.load(Ordering::Acquire);
        if pending > 0 {
            return raise(
                MPI_COMM_WORLD,
                Class::Pending,
                F,
                &format!(
                    "stream 0x{:08x} has {pending} operation(s) pending (enqueued and not complete, or \
                     requests not waited for with MPIX_Wait_enqueue)",
                    *stream as u32
                ),
            );
        }
        let comms = slot.comms.load(Ordering::Acquire);
        if comms > 0 {
            return raise(
                MPI_COMM_WORLD,
                Class::Other,
                F,
                &format!(
                    "stream 0x{:08x} is still attached to {comms} communicator(s); free them first",
                    *stream as u32
                ),
            );
        }
        if slot.progress.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            return raise(
                MPI_COMM_WORLD,
                Class::Other,
                F,
                &format!(
                    "a progress thread is running on stream 0x{:08x}; call MPIX_Stop_progress_thread first",
                    *stream as u32
                ),
            );
        }
        if let Err((class, e)) = crate::enqueue::detach_queue(index) {
            return raise(MPI_COMM_WORLD, class, F, &e);
        }
        slot.release_driver(Driver::Engine);
        // An orphan of a freed communicator may still poll this endpoint (a routed buffered message):
        // MPICH hands the VCI to the next stream created, so it goes back only once none needs it.
        slot.endpoint().until_reusable(|| crate::helper::help(rt, false));
        if let Err(e) = rt.backend.free_stream(slot.native()) {
            return raise(MPI_COMM_WORLD, Class::Other, F, &e);
        }
        rt.streams.release(index);
        *stream = MPIX_STREAM_NULL;
        MPI_SUCCESS
    })
}

/// # Safety
/// `newcomm` is NULL or the application's communicator variable, valid for a write.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_comm_create(
    comm: WideHandle,
    stream: WideHandle,
    newcomm: *mut MPI_Comm,
) -> c_int {
    if abi::standard() {
        // SAFETY: the application's own arguments, as it passed them (this function's contract).
        return standard_entry("MPIX_Stream_comm_create", || unsafe {
            let scope = CallScope::new();
            crate::standard_abi::mpix::stream_comm_create(comm, stream, AppArg::new(&scope, newcomm.cast()))
        });
    }
    let (comm, stream) = (comm as MPI_Comm, stream as MPIX_Stream);
    mpix_entry("MPIX_Stream_comm_create", |rt| {
        const F: &str = "MPIX_Stream_comm_create";
        if comm == MPI_COMM_NULL {
            return raise(MPI_COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
        }
        // The same on every member, so a local verdict is a common one.
        let inter = match Comm(comm).is_inter() {
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
        // Collectives over `comm` from here on: inside its stream's endpoint, where it has one.
        let _claim = crate::native_fixes::native_streams::native_stream_of(comm).map(|s| s.claim());
        // Arguments that only this process can judge: checked, then agreed on by every member.
        let local = if newcomm.is_null() {
            Err((Class::Arg, "the newcomm argument is a null pointer".to_string()))
        } else if stream == MPIX_STREAM_NULL {
            Ok(None)
        } else {
            rt.streams.lookup(stream).map(|(i, _)| Some(i)).map_err(|e| (Class::Stream, e.describe(stream)))
        };
        let index = match errors::agree(comm, F, local.as_ref().map(|_| ()).map_err(|e| e.clone())) {
            Ok(()) => local.unwrap_or(None),
            Err(code) => return code,
        };
        let native = index.map_or(MPIX_STREAM_NULL, |i| rt.streams.slot(i).native());
        let made = match rt.backend.stream_comm(Comm(comm), Stream(native)) {
            Ok(made) => made.raw(),
            Err(rc) => return rc,
        };
        // SAFETY: the application's output variable, non-null (agreed above), valid for a write.
        unsafe { *newcomm = made };
        // A record on every member, with its stream or none: every member knows the communicator is a
        // stream communicator, and plans a constructor of it alike (`ctor_plan`).
        rt.attach_record(made, CommRecord { stream: index, origin: Origin::User, base: None, collectives: Route::Comm })
    })
}

/// # Safety
/// `stream` is NULL or the application's stream variable, valid for a write.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Comm_get_stream(comm: WideHandle, idx: c_int, stream: *mut MPIX_Stream) -> c_int {
    if abi::standard() {
        // SAFETY: the application's own arguments, as it passed them (this function's contract).
        return standard_entry("MPIX_Comm_get_stream", || unsafe {
            let scope = CallScope::new();
            crate::standard_abi::mpix::comm_get_stream(comm, idx, AppArg::new(&scope, stream.cast()))
        });
    }
    let comm = comm as MPI_Comm;
    mpix_entry("MPIX_Comm_get_stream", |rt| {
        const F: &str = "MPIX_Comm_get_stream";
        if stream.is_null() {
            return raise(comm, Class::Arg, F, "the stream argument is a null pointer");
        }
        if comm == MPI_COMM_NULL {
            return raise(MPI_COMM_WORLD, Class::Comm, F, "the communicator is MPI_COMM_NULL");
        }
        if !handles::is_comm(comm) {
            return raise(
                MPI_COMM_WORLD,
                Class::Comm,
                F,
                &format!("0x{:08x} is not a communicator handle", comm as u32),
            );
        }
        if let Some(mx) = crate::multiplex::registry::lookup(comm) {
            let scope = CallScope::new();
            // SAFETY: the application's output variable, non-null (checked above), valid for a write.
            return crate::multiplex::get_stream(mx, idx, unsafe { AppArg::new(&scope, stream) });
        }
        let entry = rt.comms.get(comm);
        if entry.is_none() {
            // Not one of ours: let MPICH judge the handle (a freed communicator is MPI_ERR_COMM,
            // raised by MPICH through the handler that applies).
            if let Err(rc) = Comm(comm).is_inter() {
                return rc;
            }
        }
        // A communicator without a stream has one local stream, MPIX_STREAM_NULL (conventional behaviour).
        if idx != 0 {
            return raise(
                comm,
                Class::Arg,
                F,
                &format!("index {idx} is out of range: the communicator has 1 local stream (index 0)"),
            );
        }
        let handle = entry.and_then(|e| e.stream).map_or(MPIX_STREAM_NULL, StreamTable::handle);
        // SAFETY: the application's output variable, non-null (checked above), valid for a write.
        unsafe { *stream = handle };
        MPI_SUCCESS
    })
}

/// # Safety
/// None beyond MPI's: the stream is a handle (on the standard ABI, the program's pointer-wide one).
#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_progress(stream: WideHandle) -> c_int {
    if abi::standard() {
        return standard_entry("MPIX_Stream_progress", || crate::standard_abi::mpix::stream_progress(stream));
    }
    let stream = stream as MPIX_Stream;
    mpix_entry("MPIX_Stream_progress", |rt| {
        if stream == MPIX_STREAM_NULL {
            return rt.progress(MPIX_STREAM_NULL);
        }
        const F: &str = "MPIX_Stream_progress";
        match stream_or_raise(rt, stream, MPI_COMM_WORLD, F) {
            // A queue-backed stream is driven by its engine thread alone (explicit VCIs have no lock).
            Ok((i, _)) if crate::enqueue::drives(i) => MPI_SUCCESS,
            // A thread of ours registered as its driver turns it; an application thread must not too
            // (the API's rule: one driver per stream).
            Ok((_, slot)) => match slot.driver() {
                Some(who) => raise(MPI_COMM_WORLD, Class::Other, F, &driven_elsewhere(stream, who)),
                None => {
                    let _claim = slot.claim();
                    rt.progress(slot.native())
                }
            },
            Err(code) => code,
        }
    })
}

#[no_mangle]
pub extern "C" fn MPIX_Start_progress_thread(stream: MPIX_Stream) -> c_int {
    mpix_entry("MPIX_Start_progress_thread", |rt| {
        const F: &str = "MPIX_Start_progress_thread";
        if !rt.thread_multiple() {
            return raise(
                MPI_COMM_WORLD,
                Class::Other,
                F,
                "a progress thread needs MPI_THREAD_MULTIPLE; initialise with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
            );
        }
        let (holder, slot) = if stream == MPIX_STREAM_NULL {
            (&rt.global_progress, None)
        } else {
            match stream_or_raise(rt, stream, MPI_COMM_WORLD, F) {
                Ok((i, _)) if crate::enqueue::drives(i) => {
                    return raise(
                        MPI_COMM_WORLD,
                        Class::Other,
                        F,
                        "the stream is queue-backed: its enqueue engine thread already drives its progress",
                    )
                }
                Ok((_, slot)) => (&slot.progress, Some(slot)),
                Err(code) => return code,
            }
        };
        let mut guard = holder.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_some() {
            return raise(MPI_COMM_WORLD, Class::Other, F, "a progress thread is already running on this stream");
        }
        if let Some(slot) = slot {
            if let Err(who) = slot.take_driver(Driver::ProgressThread) {
                return raise(MPI_COMM_WORLD, Class::Other, F, &driven_elsewhere(stream, who));
            }
        }
        match crate::progress::start(rt, slot) {
            Ok(t) => {
                *guard = Some(t);
                MPI_SUCCESS
            }
            Err(e) => {
                if let Some(slot) = slot {
                    slot.release_driver(Driver::ProgressThread);
                }
                raise(MPI_COMM_WORLD, Class::Other, F, &format!("cannot start a thread: {e}"))
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn MPIX_Stop_progress_thread(stream: MPIX_Stream) -> c_int {
    mpix_entry("MPIX_Stop_progress_thread", |rt| {
        const F: &str = "MPIX_Stop_progress_thread";
        let (holder, slot) = if stream == MPIX_STREAM_NULL {
            (&rt.global_progress, None)
        } else {
            match stream_or_raise(rt, stream, MPI_COMM_WORLD, F) {
                Ok((_, slot)) => (&slot.progress, Some(slot)),
                Err(code) => return code,
            }
        };
        let thread = holder.lock().unwrap_or_else(|e| e.into_inner()).take();
        match thread {
            Some(t) => {
                t.stop();
                if let Some(slot) = slot {
                    slot.release_driver(Driver::ProgressThread);
                }
                MPI_SUCCESS
            }
            None => raise(MPI_COMM_WORLD, Class::Other, F, "no progress thread is running on this stream"),
        }
    })
}

/// # Safety
/// `key` is NULL or a NUL-terminated string; `value` is NULL or `value_size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Info_set_hex(
    info: MPI_Info,
    key: *const c_char,
    value: *const c_void,
    value_size: c_int,
) -> c_int {
    mpix_entry("MPIX_Info_set_hex", |rt| {
        const F: &str = "MPIX_Info_set_hex";
        let _ = rt;
        if key.is_null() {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the key is a null pointer");
        }
        if value_size < 0 {
            return raise(MPI_COMM_WORLD, Class::Count, F, &format!("value_size {value_size} is negative"));
        }
        if value.is_null() && value_size > 0 {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the value is a null pointer");
        }
        let bytes = if value_size == 0 {
            &[][..]
        } else {
            // SAFETY: the application's value, `value_size` bytes (non-null and non-negative, checked
            // above), readable during the call (this function's contract).
            unsafe { std::slice::from_raw_parts(value as *const u8, value_size as usize) }
        };
        let text = hex::encode(bytes);
        if text.len() > MPI_MAX_INFO_VAL {
            return raise(
                MPI_COMM_WORLD,
                Class::InfoValue,
                F,
                &format!(
                    "a {value_size}-byte value encodes to {} characters, more than MPI_MAX_INFO_VAL ({MPI_MAX_INFO_VAL})",
                    text.len()
                ),
            );
        }
        let c = std::ffi::CString::new(text).unwrap_or_default();
        // SAFETY: the application's key, non-null (checked above) and NUL-terminated (this function's
        // contract).
        let key = unsafe { CStr::from_ptr(key) };
        Info(info).set(key, &c).err().unwrap_or(MPI_SUCCESS)
    })
}

/// Ours (native MPICH has none): decodes a value written by `MPIX_Info_set_hex` into exactly
/// `value_size` bytes. `*flag` is 0 when the key is absent.
///
/// # Safety
/// `key` is NULL or a NUL-terminated string; `value` is NULL or `value_size` writable bytes; `flag` is
/// NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Info_get_hex(
    info: MPI_Info,
    key: *const c_char,
    value: *mut c_void,
    value_size: c_int,
    flag: *mut c_int,
) -> c_int {
    mpix_entry("MPIX_Info_get_hex", |rt| {
        const F: &str = "MPIX_Info_get_hex";
        let _ = rt;
        // SAFETY: the application's flag variable (or NULL), valid for a write (this function's contract).
        let (false, Some(flag)) = (key.is_null(), unsafe { flag.as_mut() }) else {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the key or flag argument is a null pointer");
        };
        if value_size < 0 {
            return raise(MPI_COMM_WORLD, Class::Count, F, &format!("value_size {value_size} is negative"));
        }
        if value.is_null() && value_size > 0 {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the value is a null pointer");
        }
        // SAFETY: the application's key, non-null (checked above) and NUL-terminated (this function's
        // contract).
        let key = unsafe { CStr::from_ptr(key) };
        let text = match info_value(Info(info), key) {
            Err(code) => return code,
            Ok(None) => {
                *flag = 0;
                return MPI_SUCCESS;
            }
            Ok(Some(t)) => t,
        };
        // Straight into the caller's buffer: nothing of value_size is allocated here.
        let out = if value_size == 0 {
            &mut [][..]
        } else {
            // SAFETY: the application's buffer, `value_size` bytes (non-null and non-negative, checked
            // above), writable and used by nothing else during the call (this function's contract).
            unsafe { std::slice::from_raw_parts_mut(value as *mut u8, value_size as usize) }
        };
        match hex::decode_into(&text, out) {
            Ok(()) => {
                *flag = 1;
                MPI_SUCCESS
            }
            Err(e) => {
                let key = key.to_string_lossy();
                raise(MPI_COMM_WORLD, Class::InfoValue, F, &format!("info key \"{key}\" = \"{text}\": {e}"))
            }
        }
    })
}

/// The native stream MPICH's asynchronous things run on for our `stream` (`MPIX_Async_start`,
/// `MPIX_Async_spawn`, MPICH >= 4.3). Our stream handles look like MPICH's (`0xbc000000 | i`) but
/// are not: passed through unchanged they would name MPICH's direct stream `i`, another object. So the
/// handle is translated on the native backend and refused where there is no native stream behind it.
fn async_stream(rt: &Runtime, stream: MPIX_Stream, func: &str) -> Result<MPIX_Stream, c_int> {
    if stream == MPIX_STREAM_NULL {
        return Ok(MPIX_STREAM_NULL);
    }
    let (index, slot) = stream_or_raise(rt, stream, MPI_COMM_WORLD, func)?;
    if rt.backend != crate::backend::Backend::Native {
        return Err(raise(
            MPI_COMM_WORLD,
            Class::Other,
            func,
            &format!(
                "stream 0x{:08x} is a stream of the serial backend, with no MPICH stream behind it; \
                 MPICH's asynchronous things run here on MPIX_STREAM_NULL only",
                stream as u32
            ),
        ));
    }
    if crate::enqueue::drives(index) {
        return Err(raise(
            MPI_COMM_WORLD,
            Class::Other,
            func,
            &format!(
                "stream 0x{:08x} is queue-backed: its enqueue engine thread alone drives its endpoint",
                stream as u32
            ),
        ));
    }
    Ok(slot.native())
}

fn no_async(func: &str) -> c_int {
    raise(
        MPI_COMM_WORLD,
        Class::Other,
        func,
        "the loaded MPICH has no asynchronous things (MPIX_Async_start and MPIX_Async_spawn: MPICH >= 4.3)",
    )
}

/// MPICH's `MPIX_Async_start`, with our stream handle translated (see [`async_stream`]).
///
/// # Safety
/// As MPICH's: `poll_fn` is called with `extra_state` (the application's, never dereferenced here).
#[no_mangle]
pub unsafe extern "C" fn MPIX_Async_start(
    poll_fn: Option<MPIX_Async_poll_function>,
    extra_state: *mut c_void,
    stream: MPIX_Stream,
) -> c_int {
    const F: &str = "MPIX_Async_start";
    mpix_entry(F, |rt| {
        let native = match async_stream(rt, stream, F) {
            Ok(native) => native,
            Err(code) => return code,
        };
        if !AsyncThing::supported() {
            return no_async(F);
        }
        let Some(poll_fn) = poll_fn else {
            // A null poll function: MPICH's to judge, as the application's own call.
            // SAFETY: MPICH's `MPIX_Async_start` (present: checked above) with the application's own
            // arguments, its stream handle translated.
            return unsafe { pmpi().PMPIX_Async_start.map_or(MPI_ERR_INTERN, |f| f(None, extra_state, native)) };
        };
        AsyncThing::start(poll_fn, Opaque(extra_state), Stream(native)).err().unwrap_or(MPI_SUCCESS)
    })
}

/// MPICH's `MPIX_Async_spawn`, with our stream handle translated (see [`async_stream`]).
///
/// # Safety
/// As MPICH's: `async_thing` is the one MPICH passed the calling poll function; `poll_fn` is called
/// with `extra_state` (never dereferenced here).
#[no_mangle]
pub unsafe extern "C" fn MPIX_Async_spawn(
    async_thing: MPIX_Async_thing,
    poll_fn: Option<MPIX_Async_poll_function>,
    extra_state: *mut c_void,
    stream: MPIX_Stream,
) -> c_int {
    const F: &str = "MPIX_Async_spawn";
    mpix_entry(F, |rt| {
        let native = match async_stream(rt, stream, F) {
            Ok(native) => native,
            Err(code) => return code,
        };
        if pmpi().PMPIX_Async_spawn.is_none() {
            return no_async(F);
        }
        // A null poll function is MPICH's to judge, as the application's own call.
        // SAFETY: MPICH's `MPIX_Async_spawn` (present: checked above) with the application's own
        // arguments (`async_thing`, a pointer MPICH dereferences, is the one MPICH passed the calling poll
        // function: the caller's contract), its stream handle translated.
        unsafe { pmpi().PMPIX_Async_spawn.map_or(MPI_ERR_INTERN, |f| f(async_thing, poll_fn, extra_state, native)) }
    })
}
