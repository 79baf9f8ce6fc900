//! Where a checked copy or clear stopped: the [`Fault`] its exact run
//! reports (see `exact`), with the side, offset and signal.

use std::fmt;

/// Which side of a copy faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Reading the source.
    Source,
    /// Writing the destination.
    Destination,
}

/// Where a checked copy or clear stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Fault {
    /// Whether reading the source or writing the destination faulted.
    pub side: Side,
    /// The first byte not copied (or zeroed): everything before it is
    /// done. Bytes after it are either untouched or already hold their
    /// copy (the interleaved non-temporal copies run streams up to three
    /// pages ahead); never anything else.
    pub offset: usize,
    /// The faulting address the kernel reported (`si_addr`).
    pub addr: usize,
    /// The signal: `SIGBUS` (a poisoned page, a file mapping past the end
    /// of its file) or `SIGSEGV` (an unmapped or protected page).
    pub signal: i32,
    /// The signal's `si_code`: for SIGBUS `BUS_ADRERR` (2) past the end of
    /// a file, `BUS_MCEERR_AR` (4) for a poisoned page; for SIGSEGV
    /// `SEGV_MAPERR` (1) unmapped, `SEGV_ACCERR` (2) protected.
    pub code: i32,
    /// `si_addr_lsb`: log2 of the poisoned granule (12 for one 4 KiB page)
    /// for the `BUS_MCEERR_*` codes, 0 otherwise.
    pub addr_lsb: u8,
}

impl Fault {
    /// The signal's name: `SIGBUS` or `SIGSEGV`.
    pub fn signal_name(&self) -> &'static str {
        match self.signal {
            libc::SIGBUS => "SIGBUS",
            libc::SIGSEGV => "SIGSEGV",
            _ => "signal",
        }
    }

    /// The `si_code` as its C name.
    pub fn code_name(&self) -> &'static str {
        match (self.signal, self.code) {
            // The libc crate has no SEGV_* constants: <asm-generic/siginfo.h>.
            (libc::SIGSEGV, 1) => "SEGV_MAPERR",
            (libc::SIGSEGV, 2) => "SEGV_ACCERR",
            (libc::SIGSEGV, 0x80) => "SI_KERNEL (a general protection fault)",
            (libc::SIGSEGV, _) => "unknown si_code",
            (_, libc::BUS_ADRALN) => "BUS_ADRALN",
            (_, libc::BUS_ADRERR) => "BUS_ADRERR",
            (_, libc::BUS_OBJERR) => "BUS_OBJERR",
            (_, libc::BUS_MCEERR_AR) => "BUS_MCEERR_AR",
            (_, libc::BUS_MCEERR_AO) => "BUS_MCEERR_AO",
            _ => "unknown si_code",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Source => "reading the source",
            Side::Destination => "writing the destination",
        };
        write!(
            f,
            "{} {side} at offset {} (address {:#x}, {})",
            self.signal_name(),
            self.offset,
            self.addr,
            self.code_name()
        )
    }
}

impl std::error::Error for Fault {}
