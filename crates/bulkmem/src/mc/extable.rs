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

/// How many entries of `table` fall in each routine, in the order of
/// `routines` (name, entry address). A routine runs up to the next one's
/// start, the last up to `text_end`. Panics on an entry whose range or
/// fixup is not inside a single routine: that entry was attached to the
/// wrong labels.
#[cfg(test)]
pub(super) fn per_routine(
    table: &[[usize; 3]],
    routines: &[(&'static str, usize)],
    text_end: usize,
) -> Vec<(&'static str, usize)> {
    let mut sorted = routines.to_vec();
    sorted.sort_by_key(|&(_, at)| at);
    let mut counts: Vec<(&'static str, usize)> = routines.iter().map(|&(n, _)| (n, 0)).collect();
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
    }
    counts
}
