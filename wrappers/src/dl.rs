//! The dynamic linker, safely: symbol lookups in the loaded objects, which file holds an address, and
//! which objects name a symbol.
//! Every lookup is by a NUL-terminated name (`&CStr`) and answers an address or null; nothing here calls
//! what it finds (callers turn an address into a typed function pointer, with their own safety notes).
use std::ffi::{CStr, OsStr};
use std::os::raw::{c_int, c_void};
use std::os::unix::ffi::OsStrExt;

/// A loaded object's handle (`dlopen` with `RTLD_NOLOAD`: never loads one, never unloaded by us).
#[derive(Clone, Copy)]
pub struct Loaded(usize);

/// `name` in the objects after this library in the global scope (`dlsym(RTLD_NEXT)`), or null.
pub fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is a NUL-terminated string that lives across the call; `dlsym` only reads it.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// `name` in the global scope (`dlsym(RTLD_DEFAULT)`: every object loaded with it), or null.
pub fn default_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is a NUL-terminated string that lives across the call; `dlsym` only reads it.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
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

/// Whether a loaded object names any of `names` in its dynamic string table (the names of the symbols it
/// defines and of those it imports), among the objects that hold none of the addresses `defined_at` (the
/// objects that define them, so a hit is an import) and whose file name does not start with `skip_file`.
/// One walk of the loaded objects, however many names.
pub fn named_elsewhere(names: &[&CStr], defined_at: &[usize], skip_file: &[u8]) -> bool {
    let mut scan = Scan { names, defined_at, skip_file, found: false };
    // SAFETY: `visit` takes the `data` word as the `Scan` passed here, which lives (and nothing else
    // touches) until `dl_iterate_phdr` returns; the loader calls `visit` only during this call.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut scan as *mut Scan as *mut c_void) };
    scan.found
}

/// An entry of an object's dynamic section (`Elf64_Dyn`: a tag, then an address or a value).
#[repr(C)]
struct Dyn {
    tag: i64,
    value: u64,
}
const DT_STRTAB: i64 = 5;
const DT_STRSZ: i64 = 10;

struct Scan<'a> {
    names: &'a [&'a CStr],
    defined_at: &'a [usize],
    skip_file: &'a [u8],
    found: bool,
}

/// `dl_iterate_phdr`'s callback: one loaded object.
///
/// # Safety
/// Called by the loader during [`named_elsewhere`] only: `info` describes a loaded object (its program
/// headers and dynamic section mapped and readable, its name NULL or a NUL-terminated path), `data` is
/// that call's `Scan`.
unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
    crate::guard::guard_with("visit", 0, || {
        // SAFETY: `data` is the `Scan` of `named_elsewhere`, alive and ours alone during the call;
        // `info` is the loader's description of one loaded object (this function's contract).
        let (scan, info) = unsafe { (&mut *(data as *mut Scan), &*info) };
        if !info.dlpi_name.is_null() {
            // SAFETY: the loader's `dlpi_name`: non-null, a NUL-terminated path.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
            if name.rsplit(|&b| b == b'/').next().unwrap_or(name).starts_with(scan.skip_file) {
                return 0;
            }
        }
        let base = info.dlpi_addr as usize;
        // SAFETY: the loader's program headers of the object: `dlpi_phnum` entries at `dlpi_phdr`, mapped.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let contains = |addr: usize| {
            headers.iter().any(|h| {
                h.p_type == libc::PT_LOAD && {
                    let start = base + h.p_vaddr as usize;
                    addr >= start && addr < start + h.p_memsz as usize
                }
            })
        };
        if scan.defined_at.iter().any(|&a| contains(a)) {
            return 0;
        }
        let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else { return 0 };
        let (mut strtab, mut strsz) = (0usize, 0usize);
        let mut entry = (base + dynamic.p_vaddr as usize) as *const Dyn;
        // SAFETY: the object's dynamic section, mapped (PT_DYNAMIC lies inside a loaded segment), is an
        // array of `Elf64_Dyn` ended by a DT_NULL entry (tag 0): every entry read here is inside it.
        unsafe {
            while (*entry).tag != 0 {
                match (*entry).tag {
                    DT_STRTAB => strtab = (*entry).value as usize,
                    DT_STRSZ => strsz = (*entry).value as usize,
                    _ => {}
                }
                entry = entry.add(1);
            }
        }
        if strtab == 0 || strsz == 0 {
            return 0;
        }
        // The loader relocates these addresses in place for ordinary objects, not for the vDSO.
        if strtab < base {
            strtab += base;
        }
        // SAFETY: the object's dynamic string table, `strsz` bytes at `strtab` (as its dynamic section
        // says), mapped with the object.
        let table = unsafe { std::slice::from_raw_parts(strtab as *const u8, strsz) };
        // A whole entry: the name preceded by the previous entry's NUL (the table starts with one).
        let names = scan.names;
        let whole = |name: &&CStr| {
            let needle = name.to_bytes_with_nul();
            table.windows(needle.len() + 1).any(|w| w[0] == 0 && &w[1..] == needle)
        };
        if names.iter().any(whole) {
            scan.found = true;
            return 1;
        }
        0
    })
}
