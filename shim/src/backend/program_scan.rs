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

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::guard_with("visit", 0, || unsafe {
        let scan = &mut *(data as *mut Scan);
        let info = &*info;
        let base = info.dlpi_addr as usize;
        let headers = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
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
        while (*entry).tag != 0 {
            match (*entry).tag {
                DT_STRTAB => strtab = (*entry).value as usize,
                DT_STRSZ => strsz = (*entry).value as usize,
                _ => {}
            }
            entry = entry.add(1);
        }
        if strtab == 0 || strsz == 0 {
            return 0;
        }
        // The loader relocates these addresses in place for ordinary objects, not for the vDSO.
        if strtab < base {
            strtab += base;
        }
        let table = std::slice::from_raw_parts(strtab as *const u8, strsz);
        // A whole entry: the name preceded by the previous entry's NUL (the table starts with one).
        if table.windows(scan.needle.len() + 1).any(|w| w[0] == 0 && &w[1..] == scan.needle) {
            scan.found = true;
            return 1;
        }
        0
    })
}

/// The tools library (`libmpixstream_tools.so`) forwards every MPI call, so it names them all.
unsafe fn is_tools_library(info: &libc::dl_phdr_info) -> bool {
    if info.dlpi_name.is_null() {
        return false;
    }
    let name = CStr::from_ptr(info.dlpi_name).to_bytes();
    let file = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    file.starts_with(b"libmpixstream")
}
