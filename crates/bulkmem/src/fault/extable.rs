//! The user-space exception table: which instructions may fault on the
//! caller's memory, and where execution resumes when they do.
//!
//! Each routine file assembles a table of `[start, end) -> fixup` entries,
//! three `i32`s per entry, each the distance from the field itself to its
//! label (Linux's relative `_ASM_EXTABLE` layout: position-independent, no
//! load-time relocation, readable from a signal handler without locks).

/// What a checked routine's fixup stores for the caller. `repr(C)` because
/// the assembly writes it: `addr` at 0, `code_lsb` at 8, `side` at 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawFault {
    /// `si_addr` of the SIGBUS.
    pub addr: usize,
    /// `si_code` in the low 32 bits, `si_addr_lsb` above them.
    pub code_lsb: u64,
    /// 0: the routine cannot tell, 1: its load faulted, 2: its store did.
    pub side: u64,
}

impl RawFault {
    pub fn code(&self) -> i32 {
        self.code_lsb as u32 as i32
    }

    pub fn addr_lsb(&self) -> u8 {
        (self.code_lsb >> 32) as u8
    }
}

/// The fixup address for `rip` in the table `[start, end)`, if any.
/// Async-signal-safe: reads static memory only.
///
/// # Safety
/// `[start, end)` holds whole entries of three relative `i32`s.
pub unsafe fn search(start: *const i32, end: *const i32, rip: usize) -> Option<usize> {
    let mut e = start;
    while e < end {
        // SAFETY: e points at a whole entry inside the table (the caller's
        // contract, advanced three fields at a time).
        let (from, to, fix) = unsafe { (field(e), field(e.add(1)), field(e.add(2))) };
        if (from..to).contains(&rip) {
            return Some(fix);
        }
        // SAFETY: stays within the table or lands exactly on its end.
        e = unsafe { e.add(3) };
    }
    None
}

/// The absolute address a relative field names.
///
/// # Safety
/// `f` points to a readable `i32`.
unsafe fn field(f: *const i32) -> usize {
    // SAFETY: forwarded contract.
    let rel = unsafe { f.read() } as isize;
    (f as usize).wrapping_add_signed(rel)
}
