use super::*;

#[test]
fn cooling_flushes_only_what_can_still_be_cached() {
    let buf = [0u8; 100];
    let bufs = [&buf[..40], &buf[40..70], &buf[70..]];
    let lens = |touched, reach| {
        last_touched(touched, reach, bufs)
            .map(|b| (b.as_ptr() as usize - buf.as_ptr() as usize, b.len()))
            .collect::<Vec<_>>()
    };
    // Less than the reach touched: everything.
    assert_eq!(lens(100, 200), [(0, 40), (40, 30), (70, 30)]);
    assert_eq!(lens(100, 100), [(0, 40), (40, 30), (70, 30)]);
    // More: the last `reach` bytes, from inside a buffer or on its edge.
    assert_eq!(lens(100, 45), [(55, 15), (70, 30)]);
    assert_eq!(lens(100, 30), [(70, 30)]);
    assert_eq!(lens(100, 1), [(99, 1)]);
}

#[test]
fn shuffles_are_permutations_that_scatter() {
    let mut v = shuffled(1000, 7);
    let adjacent = v.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(adjacent < 20, "{adjacent} neighbours stayed adjacent");
    v.sort_unstable();
    assert_eq!(v, (0..1000).collect::<Vec<_>>());
    assert_eq!(shuffled(0, 1), Vec::<usize>::new());
}

#[test]
fn scattered_extents_cover_each_slot_once_paired_out_of_order() {
    let (size, count) = (64, 100);
    let src: Vec<u8> = (0..size * count).map(|i| (i / size) as u8).collect();
    let mut dst = vec![0u8; size * (count + 3)];
    let base = dst.as_ptr() as usize;
    let pairs = scattered_pairs(&mut dst, &src, size, count);
    assert_eq!(pairs.len(), count);
    let mut d: Vec<usize> = pairs
        .iter()
        .map(|(d, _)| (d.as_ptr() as usize - base) / size)
        .collect();
    let s: Vec<usize> = pairs.iter().map(|(_, s)| s[0] as usize).collect();
    assert!(pairs
        .iter()
        .all(|(d, s)| d.len() == size && s.len() == size));
    assert_ne!(d, s, "sources must not follow their destinations");
    let mut s_sorted = s.clone();
    s_sorted.sort_unstable();
    d.sort_unstable();
    // Every slot once, none past `count` (the arena holds 3 more).
    assert_eq!(d, (0..count).collect::<Vec<_>>());
    assert_eq!(s_sorted, (0..count).collect::<Vec<_>>());
    // A source arena smaller than the batch bounds it.
    assert_eq!(
        scattered_pairs(&mut dst, &src[..size * 10], size, count).len(),
        10
    );
    assert_eq!(scattered(&mut dst, size, count).len(), count);
}

#[test]
fn read_once_reads_every_byte_at_every_alignment() {
    let mut buf: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    assert_eq!(read_once(&buf[5..5]), 0);
    for start in 0..17 {
        for end in [start + 1, start + 63, start + 64, start + 200, 300] {
            let before = read_once(&buf[start..end]);
            for i in start..end {
                buf[i] ^= 0x10;
                assert_ne!(
                    read_once(&buf[start..end]),
                    before,
                    "{start}..{end} byte {i}"
                );
                buf[i] ^= 0x10;
            }
        }
    }
}

#[test]
fn cpu_time_advances_with_work_and_eviction_covers_twice_the_llc() {
    let start = cpu_time();
    let wall = std::time::Instant::now();
    let mut x = 0u64;
    while cpu_time() == start && wall.elapsed() < Duration::from_secs(10) {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    assert!(cpu_time() > start, "10 s of spinning used no CPU time");
    assert_eq!(eviction_bytes(0), 64 << 20);
    assert_eq!(eviction_bytes(100 << 20), 200 << 20);
    assert_eq!(eviction_bytes(usize::MAX), usize::MAX);
}

#[test]
fn timed_runs_every_worker_once_on_its_cpu() {
    let cpu = bulkmem_machine::machine::placement::current_cpu();
    for n in [1, 3] {
        let mut workers: Vec<Vec<usize>> = vec![Vec::new(); n];
        timed_on(&mut workers, &[cpu], |w| w.push(w.len()));
        assert!(workers.iter().all(|w| w == &[0]), "{workers:?}");
    }
}

#[test]
fn runs_are_lengthened_by_whole_factors_only() {
    let ms = Duration::from_millis;
    assert_eq!(reps_lasting(1000, ms(1), ms(10)), 10_000);
    assert_eq!(reps_lasting(1000, ms(3), ms(10)), 4000, "rounded up");
    assert_eq!(reps_lasting(7, ms(40), ms(10)), 7, "never shortened");
    assert_eq!(reps_lasting(2, Duration::from_nanos(1), ms(10)), 128);
    assert_eq!(reps_lasting(2, Duration::ZERO, ms(10)), 128);
    assert_eq!(reps_lasting(5, ms(1), Duration::ZERO), 5);
}

#[test]
fn rounds_interleave_cells_after_the_warmup() {
    let mut order = Vec::new();
    let samples = interleave(2, 3, 1, Order::Fixed, |i| {
        order.push(i);
        Ok::<_, ()>((order.len() * 10 + i) as f64)
    })
    .unwrap();
    assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
    // Warm-up figures (10, 21) are dropped.
    assert_eq!(samples, [vec![30.0, 50.0, 70.0], vec![41.0, 61.0, 81.0]]);
    let err = interleave(1, 2, 0, Order::Fixed, |_| Err("bad"));
    assert_eq!(err.unwrap_err(), "bad");
}

#[test]
fn rotated_rounds_put_every_cell_in_every_position() {
    let mut order = Vec::new();
    let samples = interleave(3, 6, 1, Order::Rotated, |i| {
        order.push(i);
        Ok::<_, ()>(order.len() as f64)
    })
    .unwrap();
    // The warm-up in order, then rounds starting at 0, 1, 2, 0, 1, 2.
    let rounds: Vec<&[usize]> = order[3..].chunks(3).collect();
    assert_eq!(order[..3], [0, 1, 2]);
    assert_eq!(rounds[..3], [&[0, 1, 2][..], &[1, 2, 0], &[2, 0, 1]]);
    for pos in 0..3 {
        for cell in 0..3 {
            let times = rounds.iter().filter(|r| r[pos] == cell).count();
            assert_eq!(times, 2, "cell {cell} at position {pos}");
        }
    }
    // Sample r of each cell is from round r: cell 0 ran 4th, 9th, 11th.
    assert_eq!(samples[0][..3], [4.0, 9.0, 11.0]);
}

#[test]
fn patterns_differ_word_by_word_and_buffers_are_filled() {
    let mut a = vec![0u8; 4096];
    pattern(&mut a);
    let words: std::collections::HashSet<&[u8]> = a.chunks(8).collect();
    assert_eq!(words.len(), 512, "every word of a page differs");
    let m = prefaulted(8192, false, 7).unwrap();
    assert!(m.as_slice().iter().all(|&b| b == 7));
    evict(&m);
}
