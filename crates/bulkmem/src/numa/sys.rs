//! The raw NUMA system calls (no libnuma: the library depends on libc
//! only), and the constants glibc's headers do not carry.

use std::io;

/// `move_pages` / `mbind` flags (include/uapi/linux/mempolicy.h).
pub const MPOL_MF_MOVE: i32 = 1 << 1;
pub const MPOL_MF_MOVE_ALL: i32 = 1 << 2;

/// Bits in the node masks passed to the kernel.
const MASK_BITS: usize = 1024;
pub type NodeMask = [u64; MASK_BITS / 64];

pub fn mask_of(node: usize) -> io::Result<NodeMask> {
    if node >= MASK_BITS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut m = [0u64; MASK_BITS / 64];
    m[node / 64] |= 1 << (node % 64);
    Ok(m)
}

/// `move_pages(pid, count, pages, nodes, status, flags)`: returns the
/// number of pages not migrated (status then says why per page).
///
/// # Safety
/// `pages` and `status` hold `pages.len()` entries; `nodes`, when given,
/// as many. The addresses are only looked up by the kernel, never
/// dereferenced here.
pub unsafe fn move_pages(
    pid: i32,
    pages: &[*mut libc::c_void],
    nodes: Option<&[i32]>,
    status: &mut [i32],
    flags: i32,
) -> io::Result<usize> {
    debug_assert_eq!(pages.len(), status.len());
    let nodes_ptr = nodes.map_or(core::ptr::null(), |n| n.as_ptr());
    // SAFETY: the arrays are valid for `pages.len()` entries (the
    // caller's contract); move_pages only reads pages/nodes and writes
    // status.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            flags as libc::c_long,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// `mbind(addr, len, mode, nodemask, maxnode, flags)`.
///
/// # Safety
/// `[addr, addr + len)` is a mapping the caller owns; changing its policy
/// affects only where its future pages are allocated.
pub unsafe fn mbind(
    addr: *mut u8,
    len: usize,
    mode: i32,
    mask: &NodeMask,
    flags: u32,
) -> io::Result<()> {
    // SAFETY: the mask holds MASK_BITS bits; the range is the caller's.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len as libc::c_ulong,
            mode as libc::c_long,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong,
            flags as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
