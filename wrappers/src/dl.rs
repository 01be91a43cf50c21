//! The dynamic linker, safely: symbol lookups in the loaded objects, and which file holds an address.
//! Every lookup is by a NUL-terminated name (`&CStr`) and answers an address or null; nothing here calls
//! what it finds (callers turn an address into a typed function pointer, with their own safety notes).
use std::ffi::{CStr, OsStr};
use std::os::raw::c_void;
use std::os::unix::ffi::OsStrExt;

/// A loaded object's handle (`dlopen` with `RTLD_NOLOAD`: never loads one, never unloaded by us).
#[derive(Clone, Copy)]
pub struct Loaded(usize);

/// `name` in the objects after this library in the global scope (`dlsym(RTLD_NEXT)`), or null.
pub fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is a NUL-terminated string that lives across the call; `dlsym` only reads it.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// The object already loaded under `soname` (also privately, `RTLD_LOCAL`), without loading anything.
pub fn loaded(soname: &CStr) -> Option<Loaded> {
    // SAFETY: a NUL-terminated name; RTLD_NOLOAD makes `dlopen` a lookup that runs no constructor.
    let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    (!handle.is_null()).then_some(Loaded(handle as usize))
}

impl Loaded {
    /// `name` in this object, or null.
    pub fn symbol(self, name: &CStr) -> *mut c_void {
        // SAFETY: the handle came from `dlopen` and is never closed (RTLD_NOLOAD took a reference that
        // we keep for the process's life); `name` is NUL-terminated and lives across the call.
        unsafe { libc::dlsym(self.0 as *mut c_void, name.as_ptr()) }
    }
}

/// The file (symbolic links resolved) that defines the code at address `addr` in this process
/// (an address, not a pointer: `dladdr` only looks it up).
pub fn library_path_of(addr: usize) -> Option<String> {
    // SAFETY: `Dl_info` is plain old data (pointers and integers); all zeros is a valid value of it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` only compares `addr` with the loaded objects' ranges and fills `info`, a live local.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: `dli_fname` is non-null and, per dladdr(3), the NUL-terminated path of a loaded object,
    // valid while that object stays loaded; we copy it out at once.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = std::path::Path::new(OsStr::from_bytes(name.to_bytes()));
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Some(resolved.to_string_lossy().into_owned())
}
