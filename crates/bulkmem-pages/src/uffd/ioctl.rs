//! The userfaultfd ABI of `<linux/userfaultfd.h>`: constants, structures
//! and ioctl numbers. They are written out here because the system headers
//! (and the `libc` crate) of many distributions predate `UFFDIO_MOVE`.

pub(crate) const UFFD_API: u64 = 0xAA;
pub(crate) const UFFD_USER_MODE_ONLY: libc::c_int = 1;
pub(crate) const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;
pub(crate) const UFFD_FEATURE_POISON: u64 = 1 << 14;
pub(crate) const UFFD_FEATURE_MOVE: u64 = 1 << 16;
pub(crate) const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
pub(crate) const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1 << 0;
/// Don't wake threads waiting on a fault in the destination.
pub(crate) const UFFDIO_MOVE_MODE_DONTWAKE: u64 = 1 << 0;
/// Skip source holes instead of failing with `ENOENT`.
pub(crate) const UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES: u64 = 1 << 1;
/// The bit of `UffdioRegister::ioctls` saying `UFFDIO_MOVE` is allowed on
/// the registered range.
pub(crate) const IOCTL_BIT_MOVE: u64 = 1 << 0x05;
/// The bit saying `UFFDIO_ZEROPAGE` is allowed on the registered range.
pub(crate) const IOCTL_BIT_ZEROPAGE: u64 = 1 << 0x04;

const fn iowr(nr: u64, size: usize) -> libc::c_ulong {
    ((3 << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr) as libc::c_ulong
}

const fn ior(nr: u64, size: usize) -> libc::c_ulong {
    ((2 << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr) as libc::c_ulong
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioApi {
    pub api: u64,
    pub features: u64,
    pub ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct UffdioRange {
    pub start: u64,
    pub len: u64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioRegister {
    pub range: UffdioRange,
    pub mode: u64,
    pub ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioCopy {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    pub copy: i64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioMove {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    pub moved: i64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioZeropage {
    pub range: UffdioRange,
    pub mode: u64,
    pub zeropage: i64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct UffdioPoison {
    pub range: UffdioRange,
    pub mode: u64,
    pub updated: i64,
}

pub(crate) const UFFDIO_API_IOCTL: libc::c_ulong = iowr(0x3F, std::mem::size_of::<UffdioApi>());
pub(crate) const UFFDIO_REGISTER: libc::c_ulong = iowr(0x00, std::mem::size_of::<UffdioRegister>());
pub(crate) const UFFDIO_UNREGISTER: libc::c_ulong = ior(0x01, std::mem::size_of::<UffdioRange>());
pub(crate) const UFFDIO_COPY: libc::c_ulong = iowr(0x03, std::mem::size_of::<UffdioCopy>());
pub(crate) const UFFDIO_ZEROPAGE: libc::c_ulong = iowr(0x04, std::mem::size_of::<UffdioZeropage>());
pub(crate) const UFFDIO_MOVE: libc::c_ulong = iowr(0x05, std::mem::size_of::<UffdioMove>());
pub(crate) const UFFDIO_POISON: libc::c_ulong = iowr(0x08, std::mem::size_of::<UffdioPoison>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // Values from <linux/userfaultfd.h> on x86_64.
        assert_eq!(UFFDIO_API_IOCTL, 0xC018_AA3F);
        assert_eq!(UFFDIO_REGISTER, 0xC020_AA00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_AA01);
        assert_eq!(UFFDIO_COPY, 0xC028_AA03);
        assert_eq!(UFFDIO_ZEROPAGE, 0xC020_AA04);
        assert_eq!(UFFDIO_MOVE, 0xC028_AA05);
        assert_eq!(UFFDIO_POISON, 0xC020_AA08);
    }
}
