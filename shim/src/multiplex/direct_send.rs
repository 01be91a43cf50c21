//! The entry point of `MPIX_Stream_isend`: on x86-64, where every argument is valid, a jump into
//! MPICH's `MPI_Isend` on the pair's hidden communicator.
//!
//! The checked Rust entry (`p2p::isend_checked`) costs a call frame of its own around MPICH's call:
//! its nine arguments put three on the stack and `MPI_Isend`'s seven one, so the compiler cannot turn
//! that call into a jump, and it keeps a frame to raise MPICH's errors through the user's
//! communicator afterwards. Measured with `benches/multiplex_send_cost.sh` (MPICH 5.0.2), that entry
//! was 1.11 to 1.14 times `MPI_Isend` on a stream communicator; a jump with no checks at all, 1.03.
//! This entry makes the same checks as `p2p::fast_send_route` (a live multiplex communicator in the
//! registry's table, a request pointer, count and tag in range, both indices below `S`, a route in the
//! send table), then moves the request into the seventh argument's slot (the incoming argument area
//! belongs to the callee), sets the hidden tag and communicator and jumps: MPICH returns straight to
//! the application. Anything else jumps to `p2p::isend_checked` with the arguments untouched.
//!
//! The jump is taken only while the user's error handler on the communicator lets MPICH's return code
//! through unchanged (`MPI_ERRORS_RETURN`, or `MPI_ERRORS_ARE_FATAL`/`MPI_ERRORS_ABORT`, which the
//! hidden communicators then carry themselves: `errors::hidden_errhandler`); under a handler function
//! of the user's own, `isend_checked` calls it. On other targets `isend_checked` is exported as
//! `MPIX_Stream_isend` itself (`p2p.rs`).
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What the entry reads besides the registry's record fields `comm` and `freed` (fixed layout: the
/// entry addresses the fields by offset).
#[repr(C)]
pub struct DirectSend {
    /// The communicator's send table (`Multiplex::send_routes`, which never moves), and its length
    /// (0: no table, a communicator too large for one).
    routes: *const u64,
    routes_len: u64,
    /// `S`, the largest count of any process.
    width: u64,
    /// MPICH's `MPI_Isend` (set by the first `enable`).
    isend: AtomicUsize,
    /// `Multiplex::max_tag`, compared unsigned (a negative tag is beyond it).
    max_tag: u32,
    /// The user's error handler lets MPICH's return code through (see the module comment).
    enabled: AtomicBool,
}

// The table and the function pointer are read-only once the record is published.
unsafe impl Send for DirectSend {}
unsafe impl Sync for DirectSend {}

impl DirectSend {
    /// Disabled until `enable`.
    pub fn new(routes: &[u64], width: c_int, max_tag: c_int) -> DirectSend {
        DirectSend {
            routes: routes.as_ptr(),
            routes_len: routes.len() as u64,
            width: width.max(0) as u64,
            isend: AtomicUsize::new(0),
            max_tag: max_tag.max(0) as u32,
            enabled: AtomicBool::new(false),
        }
    }

    /// By `Multiplex::follow_user_errhandler`, at creation and at every `MPI_Comm_set_errhandler` of
    /// the communicator.
    pub fn enable(&self, on: bool) {
        if on {
            self.isend.store(pmpi().PMPI_Isend as usize, Ordering::Release);
        }
        self.enabled.store(on, Ordering::Release);
    }
}

#[cfg(target_arch = "x86_64")]
mod entry {
    use super::super::p2p::isend_checked;
    use super::super::registry::{TABLE, TABLE_BITS};
    use super::super::Multiplex;
    use super::DirectSend;
    use std::mem::offset_of;
    use std::os::raw::c_int;

    /// System V arguments: `rdi` buf, `esi` count, `edx` datatype, `ecx` dest, `r8d` tag, `r9d` comm;
    /// on the stack above the return address: `[rsp+8]` source index, `[rsp+16]` destination index,
    /// `[rsp+24]` request. Scratch: `rax`, `r10`, `r11` only, so the arguments reach
    /// `isend_checked` intact. The route's arithmetic is `p2p::fast_send_route`'s: entry
    /// `(dest * S + di) * S + si`, all unsigned and 64-bit (a negative rank or index is past the end).
    ///
    /// The C prototype is `MPIX_Stream_isend`'s (`include/mpix_stream.h`); the Rust signature declares
    /// none of it, as nothing in Rust calls this.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn MPIX_Stream_isend() -> c_int {
        core::arch::naked_asm!(
            "mov r10, qword ptr [rsp + 24]",
            "test r10, r10",
            "jz 2f",
            // The registry's slot of the handle (`registry::slot`), and its record.
            "mov eax, r9d",
            "shr eax, {shift}",
            "xor eax, r9d",
            "and eax, {mask}",
            "lea r11, [rip + {table}]",
            "mov r11, qword ptr [r11 + 8*rax]",
            "test r11, r11",
            "jz 2f",
            "cmp r9d, dword ptr [r11 + {comm}]",
            "jne 2f",
            "cmp byte ptr [r11 + {freed}], 0",
            "jne 2f",
            "cmp byte ptr [r11 + {enabled}], 0",
            "je 2f",
            "test esi, esi",
            "js 2f",
            "cmp r8d, dword ptr [r11 + {max_tag}]",
            "ja 2f",
            // r10 = (dest * S + di) * S + si, each index below S.
            "mov eax, dword ptr [rsp + 16]",
            "cmp rax, qword ptr [r11 + {width}]",
            "jae 2f",
            "mov r10d, ecx",
            "imul r10, qword ptr [r11 + {width}]",
            "add r10, rax",
            "imul r10, qword ptr [r11 + {width}]",
            "mov eax, dword ptr [rsp + 8]",
            "cmp rax, qword ptr [r11 + {width}]",
            "jae 2f",
            "add r10, rax",
            "cmp r10, qword ptr [r11 + {routes_len}]",
            "jae 2f",
            "mov rax, qword ptr [r11 + {routes}]",
            "mov rax, qword ptr [rax + 8*r10]",
            "test rax, rax",
            "jz 2f",
            // Committed. The route word: the hidden communicator in the low half, bit 32 set where
            // the source index travels in the tag (`Route::packed`): tag * S + si.
            "bt rax, 32",
            "jnc 3f",
            "imul r8d, dword ptr [r11 + {width}]",
            "add r8d, dword ptr [rsp + 8]",
            "3:",
            "mov r9d, eax",
            "mov r10, qword ptr [rsp + 24]",
            "mov qword ptr [rsp + 8], r10",
            "jmp qword ptr [r11 + {isend}]",
            "2:",
            "jmp {checked}",
            shift = const TABLE_BITS,
            mask = const (1u32 << TABLE_BITS) - 1,
            table = sym TABLE,
            comm = const offset_of!(Multiplex, comm),
            freed = const offset_of!(Multiplex, freed),
            enabled = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, enabled),
            max_tag = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, max_tag),
            width = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, width),
            routes_len = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, routes_len),
            routes = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, routes),
            isend = const offset_of!(Multiplex, direct) + offset_of!(DirectSend, isend),
            checked = sym isend_checked,
        )
    }
}
