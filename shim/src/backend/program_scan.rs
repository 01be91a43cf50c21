//! Whether the program can create a stream at all: does any object loaded at `MPI_Init` (the program
//! and its libraries, MPICH and mpixstream aside) name `MPIX_Stream_create` in its dynamic string
//! table? A program that never names it cannot make a stream (every stream starts there), so under the
//! `implicit` policy the reserved pool, whose shared memory MPICH sets up at `MPI_Init` whether it is used
//! or not, is not asked for (docs/policy.md, "Reserved pool").
//!
//! The string table holds the names of both the symbols an object defines and those it imports; we skip
//! the objects that define it (MPICH's library and ours), so a hit is an import. What the scan cannot
//! see: a library `dlopen`ed after `MPI_Init`, or a symbol fetched with `dlsym` — such a program still
//! works, on the serial backend (every stream on MPICH's implicit endpoint), and the banner says so.
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

/// Does a loaded object other than MPICH's (the one holding `mpi_code`) and ours import `name`?
pub fn program_imports(name: &CStr, mpi_code: usize) -> bool {
    let mut scan = Scan { needle: name.to_bytes_with_nul(), mpi_code, ours: own_address(), found: false };
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
    needle: &'a [u8],
    mpi_code: usize,
    ours: usize,
    found: bool,
}

fn own_address() -> usize {
    own_address as fn() -> usize as usize
}

/// `dl_iterate_phdr`'s callback: one loaded object.
///
/// # Safety
/// Called by the loader during [`program_imports`] only: `info` describes a loaded object (its program
/// headers and dynamic section mapped and readable), `data` is that call's `Scan`.
unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::guard_with("visit", 0, || {
        // SAFETY: `data` is the `Scan` of `program_imports`, alive and ours alone during the call;
        // `info` is the loader's description of one loaded object (this function's contract).
        let (scan, info) = unsafe { (&mut *(data as *mut Scan), &*info) };
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
        if contains(scan.mpi_code) || contains(scan.ours) || is_tools_library(info) {
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
        if table.windows(scan.needle.len() + 1).any(|w| w[0] == 0 && &w[1..] == scan.needle) {
            scan.found = true;
            return 1;
        }
        0
    })
}

/// The tools library (`libmpixstream_tools.so`) forwards every MPI call, so it names them all.
/// `info` is the loader's (its `dlpi_name` NULL or a NUL-terminated path).
fn is_tools_library(info: &libc::dl_phdr_info) -> bool {
    if info.dlpi_name.is_null() {
        return false;
    }
    // SAFETY: the loader's `dlpi_name` of a loaded object: non-null, a NUL-terminated path.
    let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
    let file = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    file.starts_with(b"libmpixstream")
}
