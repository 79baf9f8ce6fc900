use super::*;

fn piece(len: usize) -> Extent {
    Extent {
        dst: 0x10_0000 as *mut u8,
        src: 0x20_0000 as *const u8,
        len,
    }
}

fn sl(piece: usize, offset: usize, len: usize, buffer: usize) -> Slice {
    Slice {
        piece,
        offset,
        len,
        buffer,
    }
}

#[test]
fn plan_empty() {
    assert_eq!(plan(&[], 4096, 4), vec![]);
    assert_eq!(plan(&[piece(0), piece(0)], 4096, 4), vec![]);
}

#[test]
fn plan_one_byte() {
    assert_eq!(plan(&[piece(1)], 4096, 4), vec![sl(0, 0, 1, 0)]);
}

#[test]
fn plan_exactly_staging() {
    assert_eq!(plan(&[piece(4096)], 4096, 4), vec![sl(0, 0, 4096, 0)]);
}

#[test]
fn plan_staging_plus_one() {
    assert_eq!(
        plan(&[piece(4097)], 4096, 4),
        vec![sl(0, 0, 4096, 0), sl(0, 4096, 1, 1)]
    );
}

#[test]
fn plan_many_pieces_rotate_buffers_across_pieces() {
    let pieces = [piece(10), piece(0), piece(25), piece(3)];
    assert_eq!(
        plan(&pieces, 8, 3),
        vec![
            sl(0, 0, 8, 0),
            sl(0, 8, 2, 1),
            sl(2, 0, 8, 2),
            sl(2, 8, 8, 0),
            sl(2, 16, 8, 1),
            sl(2, 24, 1, 2),
            sl(3, 0, 3, 0),
        ]
    );
}

#[test]
fn plan_depth_one_uses_one_buffer() {
    let s = plan(&[piece(20), piece(5)], 8, 1);
    assert_eq!(
        s,
        vec![
            sl(0, 0, 8, 0),
            sl(0, 8, 8, 0),
            sl(0, 16, 4, 0),
            sl(1, 0, 5, 0)
        ]
    );
}

#[test]
fn plan_covers_every_byte_once() {
    let lens = [0, 1, 4095, 4096, 4097, 3 * 4096, 3 * 4096 + 7, 100_000];
    let pieces: Vec<Extent> = lens.iter().map(|&l| piece(l)).collect();
    let s = plan(&pieces, 4096, 4);
    for (i, &len) in lens.iter().enumerate() {
        let mut next = 0;
        for x in s.iter().filter(|x| x.piece == i) {
            assert_eq!(x.offset, next);
            assert!(x.len > 0 && x.len <= 4096);
            next += x.len;
        }
        assert_eq!(next, len, "piece {i}");
    }
    for (i, x) in s.iter().enumerate() {
        assert_eq!(x.buffer, i % 4);
    }
}

#[test]
fn sizes_read_naturally() {
    assert_eq!(bytes(32 << 20), "32 MiB");
    assert_eq!(bytes(4096), "4 KiB");
    assert_eq!(bytes(4097), "4097 B");
    assert_eq!(bytes((1 << 20) + 4096), "1028 KiB");
}

/// Whether this machine has a loadable CUDA driver; the tests below
/// check what happens without one, or use the GPU where there is one.
fn libcuda_loadable() -> bool {
    if cfg!(target_feature = "crt-static") {
        return false;
    }
    let flags = libc::RTLD_LAZY | libc::RTLD_LOCAL;
    // SAFETY: a C string literal; a driver that loads stays loaded,
    // as the backend would keep it.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), flags) };
    !h.is_null()
}

#[test]
#[cfg(target_feature = "crt-static")]
fn statically_linked_says_why_without_loading() {
    let e = devices().unwrap_err();
    assert_eq!(e, super::driver::STATIC_BINARY);
}

#[test]
fn without_driver_devices_says_why() {
    if libcuda_loadable() {
        eprintln!("skipped: libcuda.so.1 loads here");
        return;
    }
    let e = devices().unwrap_err();
    assert!(e.contains("libcuda.so.1"), "{e}");
}

#[test]
fn without_driver_open_says_why() {
    if libcuda_loadable() {
        eprintln!("skipped: libcuda.so.1 loads here");
        return;
    }
    let e = open(&GpuOptions::default())
        .err()
        .expect("open without a driver");
    assert!(e.contains("libcuda.so.1"), "{e}");
    match super::super::Offload::gpu(GpuOptions::default()) {
        Err(crate::error::Error::NotSupportedHere { what }) => {
            assert!(what.contains("libcuda.so.1"), "{what}")
        }
        other => panic!("expected NotSupportedHere, got {other:?}"),
    }
}

#[test]
fn with_driver_devices_describe_themselves() {
    if !libcuda_loadable() {
        eprintln!("skipped: no libcuda.so.1 here");
        return;
    }
    let gpus = devices().expect("devices with a driver");
    for g in &gpus {
        eprintln!("{g:?}");
        assert!(!g.name.is_empty());
        assert!(g.memory > 0);
        assert_eq!(g.pci.len(), "0000:00:00".len(), "{}", g.pci);
    }
}

/// Copies through the GPU from two threads (each a fresh thread with no
/// context current), then checks every byte and the error path.
#[test]
fn with_driver_copies_round_trip() {
    if !libcuda_loadable() || devices().map_or(true, |g| g.is_empty()) {
        eprintln!("skipped: no GPU here");
        return;
    }
    let half = 4 << 20;
    let mut m = crate::mapping::Mapping::anonymous(2 * half).unwrap();
    for (i, b) in m.as_mut_slice()[..half].iter_mut().enumerate() {
        *b = (i * 7 + i / 4096) as u8;
    }
    let base = m.as_mut_ptr().expose_provenance();
    let opts = GpuOptions::default().channels(2).depth(3).staging(64 << 10);
    let (backend, channels) = open(&opts).expect("open");
    eprintln!("{}", backend.describe());
    // SAFETY: the mapping is ours and outlives the registration.
    unsafe { backend.register(base, 2 * half) }.expect("register");
    // SAFETY: as above; registering twice must fail, not pin twice.
    let again = unsafe { backend.register(base, 2 * half) }.unwrap_err();
    eprintln!("{again}");
    assert!(again.contains("cuMemHostRegister_v2"), "{again}");
    let lens = [0, 1, 4095, 64 << 10, (64 << 10) + 1, (1 << 20) + 13, 3];
    let mut pieces = Vec::new();
    let mut off = 5; // unaligned on purpose
    for &len in &lens {
        pieces.push(Extent {
            dst: (base + half + off) as *mut u8,
            src: (base + off) as *const u8,
            len,
        });
        off += len + 4099;
    }
    let (first, second) = pieces.split_at(3);
    let (second, first) = (second.to_vec(), first.to_vec());
    let mut chans = channels.into_iter();
    let mut a = chans.next().unwrap();
    let mut b = chans.next().unwrap();
    let t = std::thread::spawn(move || {
        // SAFETY: the pieces lie in the registered mapping, sources in
        // the first half and destinations in the second, disjoint.
        let r = unsafe { b.copy(&second) };
        (r, b)
    });
    // SAFETY: as above, and disjoint from the other thread's pieces.
    unsafe { a.copy(&first) }.expect("copy on this thread");
    let (r, b) = t.join().unwrap();
    r.expect("copy on a fresh thread");
    let s = m.as_slice();
    for p in &pieces {
        let (so, d) = (p.src as usize - base, p.dst as usize - base);
        assert!(s[so..so + p.len] == s[d..d + p.len], "piece {p:?}");
    }
    backend.unregister(base, 2 * half).expect("unregister");
    // The backend may go first: the channels keep the context alive.
    drop(backend);
    drop((a, b));
}
