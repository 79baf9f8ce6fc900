//! The user-space exception table: which instructions may fault on the
//! caller's memory, and where execution resumes when they do.
//!
//! Each routine file assembles a table of `[start, end) -> fixup` entries,
//! three `i32`s per entry, each the distance from the field itself to its
//! label (Linux's relative `_ASM_EXTABLE` layout: position-independent, no
//! load-time relocation, readable from a signal handler without locks).
//! Entries are emitted beside the instructions they cover, by a macro that
//! appends to the file's table section; the table's start and end symbols
//! live in the subsections before and after the entries', so they bracket
//! every entry however the source is ordered. [`search`] scans the whole
//! table and does not rely on the entries being sorted.

/// What a checked routine's fixup stores for the caller. `repr(C)` because
/// the assembly writes it: `addr` at 0, `code_lsb` at 8, `side` at 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawFault {
    /// `si_addr` of the signal.
    pub addr: usize,
    /// `si_code` in the low 32 bits, `si_addr_lsb` in bits 32-47 and the
    /// signal number (SIGBUS or SIGSEGV) in bits 48-63, as the handler
    /// packs them into one register.
    pub code_lsb: u64,
    /// 0: the routine cannot tell, 1: its load faulted, 2: its store did.
    pub side: u64,
}

impl RawFault {
    /// The packed `code_lsb` word the handler hands a fixup.
    pub fn pack(signal: i32, code: i32, addr_lsb: u16) -> u64 {
        (code as u32 as u64) | (u64::from(addr_lsb) << 32) | ((signal as u16 as u64) << 48)
    }

    pub fn code(&self) -> i32 {
        self.code_lsb as u32 as i32
    }

    pub fn addr_lsb(&self) -> u8 {
        (self.code_lsb >> 32) as u16 as u8
    }

    pub fn signal(&self) -> i32 {
        i32::from((self.code_lsb >> 48) as u16)
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

/// The entries of `[start, end)` as absolute `[from, to, fixup]` addresses.
///
/// # Safety
/// As for [`search`].
#[cfg(test)]
pub(super) unsafe fn entries(start: *const i32, end: *const i32) -> Vec<[usize; 3]> {
    let mut out = Vec::new();
    let mut e = start;
    while e < end {
        // SAFETY: as in `search`.
        out.push(unsafe { [field(e), field(e.add(1)), field(e.add(2))] });
        // SAFETY: as in `search`.
        e = unsafe { e.add(3) };
    }
    out
}

/// Checks one file's table against its routines, given as (name, entry
/// address, expected entry count) for every routine of the file: each
/// entry's range and fixup lie inside a single routine (a routine runs up
/// to the next one's start, the last up to `text_end`), each routine has
/// the expected number of entries, and `fixup` finds every entry at both
/// ends of its range. Panics on the first violation: an entry attached to
/// the wrong labels, or one lost, would let a fault it should cover kill
/// the process.
#[cfg(test)]
pub(super) fn check(
    table: &[[usize; 3]],
    routines: &[(&'static str, usize, usize)],
    text_end: usize,
    fixup: fn(usize) -> Option<usize>,
) {
    let mut sorted: Vec<(&str, usize)> = routines.iter().map(|&(n, at, _)| (n, at)).collect();
    sorted.sort_by_key(|&(_, at)| at);
    let mut counts: Vec<(&str, usize)> = routines.iter().map(|&(n, _, _)| (n, 0)).collect();
    for &[from, to, fix] in table {
        let i = sorted
            .iter()
            .rposition(|&(_, at)| at <= from)
            .unwrap_or_else(|| panic!("entry {from:#x} before every routine"));
        let (name, lo) = sorted[i];
        let hi = sorted.get(i + 1).map_or(text_end, |&(_, at)| at);
        assert!(
            from < to && to <= hi,
            "{name}: range {from:#x}..{to:#x} leaves it"
        );
        assert!((lo..hi).contains(&fix), "{name}: fixup {fix:#x} outside it");
        counts.iter_mut().find(|(n, _)| *n == name).unwrap().1 += 1;
        assert_eq!(fixup(from), Some(fix), "{name}: entry at {from:#x}");
        assert_eq!(fixup(to - 1), Some(fix), "{name}: entry ending {to:#x}");
    }
    let want: Vec<(&str, usize)> = routines.iter().map(|&(n, _, c)| (n, c)).collect();
    assert_eq!(counts, want, "exception-table entries per routine");
}
