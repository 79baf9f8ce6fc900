use super::*;
use Strategy::*;

/// Rules that pick a strategy no test cell measures: never kept.
const NONE: Prior = &|_, _, _| RepStosq;
/// Rules that pick rep-movsb everywhere.
const MOVSB: Prior = &|_, _, _| RepMovsb;

fn m(size: usize, gbps: &[(Strategy, f64)]) -> Measured {
    Measured {
        op: Op::Copy,
        shape: Shape::Single,
        size,
        gbps: gbps.to_vec(),
    }
}

#[test]
fn winners_margins_and_kept_choices() {
    let cells = choose(
        &[
            m(64, &[(PerPage, 5.0), (Avx2, 20.0), (Libc, 10.0)]),
            // Libc wins by 2% (and less with its neighbours): keep avx2.
            m(128, &[(PerPage, 5.0), (Avx2, 19.6), (Libc, 20.0)]),
            // Libc wins by 30% here and after: switch.
            m(256, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
            m(512, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
        ],
        NONE,
    );
    assert_eq!(cells.len(), 4);
    assert_eq!((cells[0].winner, cells[0].choice), (Avx2, Avx2));
    assert_eq!(cells[0].runner_up, Some(Libc));
    assert!((cells[0].margin - 2.0).abs() < 1e-9);
    assert_eq!((cells[1].winner, cells[1].choice), (Libc, Avx2));
    assert_eq!((cells[2].winner, cells[2].choice), (Libc, Libc));
    assert_eq!(cells[3].choice, Libc);
    // A new (op, shape) starts afresh.
    let mut other = m(64, &[(PerPage, 1.0), (Libc, 2.0)]);
    other.op = Op::Clear;
    let cells = choose(&[m(64, &[(Avx2, 2.0), (Libc, 1.99)]), other], NONE);
    assert_eq!(cells[1].choice, Libc);
}

#[test]
fn one_noisy_cell_does_not_flip_its_band() {
    let steady = [(PerPage, 40.0), (Avx2, 46.0), (Libc, 45.0)];
    let cells = choose(
        &[
            m(32 << 10, &steady),
            // The measurement that chose per-page at 64K on a Zen 3 VM.
            m(64 << 10, &[(PerPage, 41.96), (Avx2, 41.32), (Libc, 27.48)]),
            m(128 << 10, &steady),
        ],
        NONE,
    );
    assert_eq!(cells[1].winner, PerPage, "the raw winner stays on record");
    assert_eq!(cells[1].choice, Avx2);
    // A real edge (two cells in a row) still moves the band.
    let cells = choose(
        &[
            m(1, &steady),
            m(2, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
            m(4, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
        ],
        NONE,
    );
    assert_eq!(cells[2].choice, PerPage);
}

#[test]
fn the_rules_stay_unless_the_measurement_departs_clearly_and_again() {
    // A near-tie (portable ahead by 2%): the rules' rep-movsb stays.
    let tie = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 25.1)];
    let cells = choose(&[m(1, &tie), m(2, &tie), m(4, &tie)], MOVSB);
    assert!(cells
        .iter()
        .all(|c| c.choice == RepMovsb && c.winner == Portable));
    // A clear win departs...
    let clear = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 30.0)];
    let mut cells = choose(&[m(1, &clear), m(2, &clear)], MOVSB);
    assert!(cells.iter().all(|c| c.choice == Portable));
    // ...and reverts where the re-check does not confirm it.
    let again = [
        m(1, &[(PerPage, 29.0), (RepMovsb, 32.0), (Portable, 21.0)]),
        m(2, &[(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 29.0)]),
    ];
    assert_eq!(recheck(&mut cells, &again, MOVSB), 1);
    assert_eq!((cells[0].choice, cells[1].choice), (RepMovsb, Portable));
}

#[test]
fn a_choice_slower_than_per_page_over_both_passes_becomes_per_page() {
    let mut cells = choose(
        &[
            m(64, &[(PerPage, 5.0), (Avx2, 5.2)]),
            m(128, &[(PerPage, 5.0), (Avx2, 9.0)]),
        ],
        NONE,
    );
    let n = recheck(
        &mut cells,
        &[
            // 1.04x, then 0.93x: slower over both.
            m(64, &[(PerPage, 5.4), (Avx2, 5.0)]),
            m(128, &[(PerPage, 5.0), (Avx2, 9.1)]),
        ],
        NONE,
    );
    assert_eq!(n, 1);
    assert_eq!(cells[0].choice, PerPage);
    assert_eq!(
        cells[0].winner, Avx2,
        "the first measurement's winner stays on record"
    );
    assert_eq!(cells[1].choice, Avx2);
}

#[test]
fn a_third_pass_settles_a_re_check_that_overturned_the_first() {
    /// Rules that stream: avx2-nt everywhere.
    const NT: Prior = &|_, _, _| Avx2Nt;
    let first = [m(
        32 << 20,
        &[(PerPage, 8.0), (RepMovsq, 13.9), (Avx2Nt, 14.0)],
    )];
    // The re-check alone puts rep movsq 1.11x ahead: it takes the cell.
    let again = [m(
        32 << 20,
        &[(PerPage, 8.0), (RepMovsq, 14.0), (Avx2Nt, 12.6)],
    )];
    let mut cells = choose(&first, NT);
    assert_eq!(cells[0].choice, Avx2Nt);
    assert_eq!(recheck(&mut cells, &again, NT), 1);
    assert_eq!(cells[0].choice, RepMovsq);
    // A third pass like the first: avx2-nt won two of three, and stays
    // (the first pass's choice is restored before it is applied).
    let mut cells = choose(&first, NT);
    let third = [m(
        32 << 20,
        &[(PerPage, 8.0), (RepMovsq, 12.3), (Avx2Nt, 14.0)],
    )];
    assert_eq!(settle_dispute(&mut cells, &again, &third, NT), 0);
    assert_eq!(cells[0].choice, Avx2Nt);
    // A third pass like the re-check confirms it: rep movsq.
    let third = [m(
        32 << 20,
        &[(PerPage, 8.0), (RepMovsq, 14.1), (Avx2Nt, 12.5)],
    )];
    assert_eq!(settle_dispute(&mut cells, &again, &third, NT), 1);
    assert_eq!(cells[0].choice, RepMovsq);
    // A cell the third pass did not measure is left alone.
    let mut cells = choose(&first, NT);
    assert_eq!(settle_dispute(&mut cells, &again, &[], NT), 0);
    assert_eq!(cells[0].choice, Avx2Nt);
}

fn clear(size: usize, gbps: &[(Strategy, f64)]) -> Measured {
    Measured {
        op: Op::Clear,
        ..m(size, gbps)
    }
}

#[test]
fn one_slow_recheck_does_not_demote_a_clear_winner_to_per_page() {
    // The 16 MiB clear cell of a tune on an Emerald Rapids VM.
    let first = [(PerPage, 16.68), (RepStosb, 21.07), (Libc, 22.45)];
    let mut cells = choose(&[clear(16 << 20, &first)], NONE);
    assert_eq!(cells[0].choice, Libc);
    let again = [clear(
        16 << 20,
        &[(PerPage, 20.0), (RepStosb, 20.5), (Libc, 19.6)],
    )];
    recheck(&mut cells, &again, NONE);
    assert_eq!(cells[0].choice, Libc, "{:?}", cells[0]);
}

#[test]
fn a_choice_that_trails_in_both_passes_gives_way() {
    // Neighbours kept avx512 at 64 KiB; both passes put it 10% behind.
    let kept = [(PerPage, 42.0), (RepStosb, 45.0), (Avx512, 40.3)];
    let near = [(PerPage, 40.0), (RepStosb, 42.0), (Avx512, 46.0)];
    const AVX512: Prior = &|_, _, _| Avx512;
    let mut cells = choose(
        &[
            clear(32 << 10, &near),
            clear(64 << 10, &kept),
            clear(128 << 10, &near),
        ],
        AVX512,
    );
    assert_eq!(cells[1].choice, Avx512, "smoothing keeps the rules' choice");
    assert_eq!(
        candidates(&cells[1], Avx512, false),
        vec![PerPage, Avx512, RepStosb],
        "the first pass's two fastest are re-checked"
    );
    let again = [clear(
        64 << 10,
        &[(PerPage, 43.0), (RepStosb, 46.0), (Avx512, 41.4)],
    )];
    assert_eq!(recheck(&mut cells[1..2], &again, AVX512), 1);
    assert_eq!(cells[1].choice, RepStosb);
    // A win in the re-check does not make up for 0.90x in the first
    // pass: a candidate scores by its worse pass.
    let mut cells = choose(&[clear(64 << 10, &kept)], AVX512);
    cells[0].choice = Avx512;
    let again = [clear(
        64 << 10,
        &[(PerPage, 43.0), (RepStosb, 44.0), (Avx512, 46.0)],
    )];
    recheck(&mut cells, &again, AVX512);
    assert_eq!(cells[0].choice, RepStosb);
}

#[test]
fn ties_of_the_whole_use_are_broken_by_the_call_alone() {
    // Consumed, avx2 and avx512 are within noise in both passes;
    // libc is 15% behind in the re-check (0.91x on average, under
    // NEAR_TOP); per-page is far behind.
    let first = [(PerPage, 20.0), (Libc, 29.0), (Avx2, 30.0), (Avx512, 29.6)];
    let mut cells = choose(&[m(4096, &first)], NONE);
    assert_eq!(cells[0].choice, Avx2);
    let again = m(
        4096,
        &[(PerPage, 21.0), (Libc, 25.5), (Avx2, 29.5), (Avx512, 30.0)],
    );
    recheck(&mut cells, std::slice::from_ref(&again), NONE);
    assert_eq!(cells[0].choice, Avx2);
    let t = ties(&cells[0], &again, None);
    assert_eq!(t, vec![Avx2, Avx512], "the choice first, libc out");
    // Alone, avx512 is 1.3x: it takes the cell.
    let mut c = cells[0].clone();
    assert!(break_tie(&mut c, &m(4096, &[(Avx2, 50.0), (Avx512, 65.0)])));
    assert_eq!(c.choice, Avx512);
    // Both leave the destination in the cache: 2% ahead alone is
    // enough (either is right between equals).
    let mut c = cells[0].clone();
    assert!(break_tie(&mut c, &m(4096, &[(Avx2, 50.0), (Avx512, 51.0)])));
    assert_eq!(c.choice, Avx512);
    let mut c = cells[0].clone();
    assert!(!break_tie(
        &mut c,
        &m(4096, &[(Avx2, 50.0), (Avx512, 49.0)])
    ));
    assert_eq!(c.choice, Avx2);
}

#[test]
fn kernels_near_the_top_on_both_sides_are_steady() {
    // A full tune's hot 1, 2 and 4 MiB clears once read (Zen 3 VM):
    // avx2 led both neighbours, and one dip put it at 0.39x between.
    let cells = choose(
        &[
            m(
                1 << 20,
                &[
                    (PerPage, 21.2),
                    (RepStosb, 24.1),
                    (Avx2, 24.2),
                    (Avx2Nt, 9.3),
                ],
            ),
            m(
                2 << 20,
                &[
                    (PerPage, 21.7),
                    (RepStosb, 25.3),
                    (Avx2, 9.7),
                    (Avx2Nt, 10.2),
                ],
            ),
            m(
                4 << 20,
                &[
                    (PerPage, 22.9),
                    (RepStosb, 26.5),
                    (Avx2, 26.0),
                    (Avx2Nt, 9.1),
                ],
            ),
        ],
        NONE,
    );
    assert_eq!(steady_near_top(&cells[0], &cells[2]), vec![RepStosb, Avx2]);
    let c = &cells[1];
    let picked = candidates(c, RepStosq, true);
    assert!(
        !picked.contains(&Avx2),
        "the first pass alone leaves it out"
    );
    // Near the top on one side only is not steady.
    assert_eq!(steady_near_top(&cells[0], &cells[1]), vec![RepStosb]);
}

#[test]
fn a_streaming_kernel_displaces_a_cached_choice_alone_only_by_more_than_keep() {
    let cell = |choice| Cell {
        choice,
        ..choose(&[m(4096, &[(Avx2, 30.0), (Avx2Nt, 29.5)])], NONE)[0].clone()
    };
    for (choice, other) in [(Avx2, Avx2Nt), (Avx2Nt, Avx2)] {
        let mut c = cell(choice);
        assert!(
            !break_tie(&mut c, &m(4096, &[(choice, 50.0), (other, 51.0)])),
            "{other} 2% ahead of {choice}"
        );
        assert!(break_tie(
            &mut c,
            &m(4096, &[(choice, 50.0), (other, 52.0)])
        ));
        assert_eq!(c.choice, other);
    }
    // Two streaming kernels are equals in what they leave behind.
    let mut c = cell(Avx2Nt);
    assert!(break_tie(
        &mut c,
        &m(4096, &[(Avx2Nt, 50.0), (Avx512Nt, 51.0)])
    ));
    assert_eq!(c.choice, Avx512Nt);
}

#[test]
fn a_tie_break_within_its_own_noise_keeps_the_choice() {
    // A memory-bound 32 MiB clear (Xeon, CPUID model 0xa7): four
    // kernels level alone, the rules' `rep-stosb` the choice.
    let clear = |gbps: &[(Strategy, f64)]| Measured {
        op: Op::Clear,
        ..m(32 << 20, gbps)
    };
    let mut c = choose(&[clear(&[(RepStosb, 14.77), (Avx512, 14.61)])], NONE)[0].clone();
    assert_eq!(c.choice, RepStosb);
    let alone = |avx512| clear(&[(RepStosb, 14.60), (RepStosq, 14.60), (Avx512, avx512)]);
    assert!(!break_tie(&mut c, &alone(14.70)), "0.7% ahead is noise");
    assert_eq!(c.choice, RepStosb);
    assert!(break_tie(&mut c, &alone(14.80)), "1.4% ahead takes it");
    assert_eq!(c.choice, Avx512);
}

#[test]
fn cache_allocating_kernels_tie_within_near_top_streaming_ones_within_keep() {
    // A quick tune's 4 KiB copy (Zen 3 VM): `rep movsb` on top in both
    // passes, `avx2` and `avx2-nt` each 0.933x of it on average, never
    // under 0.90x.
    let first = [
        (PerPage, 20.0),
        (RepMovsb, 30.0),
        (Avx2, 29.0),
        (Avx2Nt, 29.0),
    ];
    let mut cells = choose(&[m(4096, &first)], NONE);
    assert_eq!(cells[0].choice, RepMovsb);
    let again = m(
        4096,
        &[
            (PerPage, 20.0),
            (RepMovsb, 30.0),
            (Avx2, 27.0),
            (Avx2Nt, 27.0),
        ],
    );
    recheck(&mut cells, std::slice::from_ref(&again), NONE);
    assert_eq!(cells[0].choice, RepMovsb);
    assert_eq!(
        ties(&cells[0], &again, None),
        vec![RepMovsb, Avx2],
        "both allocate: the call alone decides; streaming stays out"
    );
    // Below NEAR_TOP on average, allocating kernels do not tie either.
    let far = m(
        4096,
        &[
            (PerPage, 20.0),
            (RepMovsb, 30.0),
            (Avx2, 26.0),
            (Avx2Nt, 26.0),
        ],
    );
    assert!(ties(&cells[0], &far, None).is_empty());
}

#[test]
fn small_cells_dispute_any_disagreement_large_ones_only_streaming_swaps() {
    // A full tune's hot 2 MiB clear (Zen 3 VM): `avx2` at 0.64x of
    // `libc` in the first pass, 0.99x of it in the re-check.
    let first = [
        (PerPage, 21.66),
        (RepStosq, 24.89),
        (Libc, 26.25),
        (Avx2, 16.87),
    ];
    let mut c = choose(&[clear(2 << 20, &first)], NONE)[0].clone();
    assert_eq!(c.choice, Libc);
    let again = clear(2 << 20, &[(PerPage, 21.0), (Libc, 26.0), (Avx2, 25.8)]);
    assert_eq!(disputed(&c, Libc, &again, true), vec![PerPage, Libc, Avx2]);
    assert!(disputed(&c, Libc, &again, false).is_empty(), "large: agree");
    // Avx2 trailing in both: the passes agree.
    let behind = clear(2 << 20, &[(PerPage, 21.0), (Libc, 26.0), (Avx2, 20.0)]);
    assert!(disputed(&c, Libc, &behind, true).is_empty());
    // A swap to streaming is disputed at any size; a temporal swap
    // only where small.
    c.choice = Avx2Nt;
    assert_eq!(
        disputed(&c, Libc, &behind, false),
        vec![PerPage, Libc, Avx2Nt]
    );
    c.choice = RepStosq;
    assert!(disputed(&c, Libc, &behind, false).is_empty());
    assert_eq!(
        disputed(&c, Libc, &behind, true),
        vec![PerPage, Libc, RepStosq]
    );
}

#[test]
fn a_third_pass_outvotes_one_dip_in_a_tie() {
    // A full tune's hot 2 MiB clear (Zen 3 VM): `avx2` at 0.65x of
    // `rep stosq` in the first pass, level or ahead after.
    let c = Cell {
        op: Op::Clear,
        shape: Shape::Single,
        size: 2 << 20,
        winner: RepStosq,
        runner_up: Some(RepStosb),
        margin: 25.73 / 24.38,
        choice: RepStosq,
        gbps: vec![
            (PerPage, 20.37),
            (RepStosq, 25.73),
            (RepStosb, 24.38),
            (Avx2, 16.76),
        ],
    };
    let pass = |g: &[(Strategy, f64)]| Measured {
        op: Op::Clear,
        ..m(2 << 20, g)
    };
    let again = pass(&[
        (PerPage, 21.0),
        (RepStosq, 26.0),
        (RepStosb, 25.0),
        (Avx2, 26.5),
    ]);
    let third = pass(&[(PerPage, 21.0), (RepStosq, 26.0), (Avx2, 26.4)]);
    assert_eq!(
        ties(&c, &again, None),
        vec![RepStosq, RepStosb],
        "the lower of two: avx2 out"
    );
    assert_eq!(
        ties(&c, &again, Some(&third)),
        vec![RepStosq, RepStosb, Avx2],
        "the middle of three: avx2 in; rep stosb, not in the third pass, on two"
    );
}

#[test]
fn where_a_tie_can_follow_every_near_top_strategy_is_rechecked() {
    // The Zen 3 VM's hot 1 MiB clear, once read: `avx2` third at
    // 0.957x of `libc`, `portable` at 0.75x.
    let first = [
        (PerPage, 24.77),
        (RepStosq, 27.20),
        (RepStosb, 26.89),
        (Libc, 28.19),
        (Avx2, 26.97),
        (Avx2Nt, 9.45),
        (Clzero, 9.05),
        (Portable, 21.06),
    ];
    let mut cells = choose(&[m(1 << 20, &first)], NONE);
    cells[0].op = Op::Clear;
    assert_eq!(cells[0].choice, Libc);
    assert_eq!(
        candidates(&cells[0], RepStosb, false),
        vec![PerPage, Libc, RepStosb, RepStosq],
        "without a tie-break: the first pass's two fastest"
    );
    assert_eq!(
        candidates(&cells[0], RepStosb, true),
        vec![PerPage, Libc, RepStosb, RepStosq, Avx2],
        "with one: everything within NEAR_TOP"
    );
    // The top two are re-checked however far the second trails.
    let far = [(PerPage, 10.0), (Avx2, 30.0), (Libc, 20.0)];
    let cells = choose(&[m(1 << 20, &far)], NONE);
    assert_eq!(candidates(&cells[0], Avx2, true), vec![PerPage, Avx2, Libc]);
}

#[test]
fn a_candidate_level_with_the_choice_on_average_is_tied() {
    // The Zen 3 VM's hot 64 KiB clear, once read: `avx2` led the first
    // pass by 5.5%, neighbours kept `rep stosq`, and the re-check put
    // `avx2` over 8% behind (here 9%). Its lower-of-two trails by more
    // than KEEP, yet on average it is within KEEP of the choice and no
    // pass put it past TIE_FLOOR: a tie, for the call alone to break.
    let first = vec![
        (PerPage, 25.14),
        (RepStosq, 29.44),
        (RepStosb, 28.16),
        (Avx2, 31.05),
    ];
    let c = Cell {
        op: Op::Clear,
        shape: Shape::Single,
        size: 64 << 10,
        winner: Avx2,
        runner_up: Some(RepStosq),
        margin: 31.05 / 29.44,
        choice: RepStosq,
        gbps: first,
    };
    let again = |avx2: f64| {
        let mut a = m(
            64 << 10,
            &[
                (PerPage, 25.0),
                (RepStosq, 30.5),
                (RepStosb, 29.0),
                (Avx2, avx2),
            ],
        );
        a.op = Op::Clear;
        a
    };
    // rep-stosb trails the choice by 5% in both: tied too, as all
    // three leave the destination in the cache (within NEAR_TOP).
    assert_eq!(ties(&c, &again(27.8), None), vec![RepStosq, RepStosb, Avx2]);
    // 5% ahead, then 20% behind: a pass put it under TIE_FLOOR.
    let t = ties(&c, &again(24.0), None);
    assert_eq!(t, vec![RepStosq, RepStosb], "avx2 out");
    // A quick tune's 4 KiB copy: `rep movsb` 0.94x the best in both
    // passes, `avx2` 0.86x, then the best: 2% behind on average.
    let c = Cell {
        op: Op::Copy,
        shape: Shape::Single,
        size: 4096,
        winner: Libc,
        runner_up: Some(RepMovsb),
        margin: 41.96 / 39.62,
        choice: RepMovsb,
        gbps: vec![
            (PerPage, 33.27),
            (RepMovsq, 35.71),
            (RepMovsb, 39.62),
            (Libc, 41.96),
            (Avx2, 35.96),
        ],
    };
    let again = m(
        4096,
        &[
            (PerPage, 35.46),
            (Avx2, 41.53),
            (Libc, 31.16),
            (RepMovsb, 39.15),
        ],
    );
    assert_eq!(
        ties(&c, &again, None),
        vec![RepMovsb, Avx2],
        "libc fell to 0.75x"
    );
    // Past TIE_FLOOR in a pass is out however the average reads:
    // `avx2` 0.80x the best, then 1.18x the choice (even on average).
    let mut c = c;
    c.gbps[4].1 = 0.80 * 41.96;
    let again = m(4096, &[(PerPage, 35.0), (Avx2, 50.0), (RepMovsb, 42.5)]);
    assert!(ties(&c, &again, None).is_empty());
}

#[test]
fn a_clear_whole_use_winner_has_no_tie_to_break() {
    // A streamed copy 2x faster alone loses half its rate once read:
    // the consumed measurement decides, alone is never asked.
    let consumed = [(PerPage, 9.0), (RepMovsb, 10.0), (Avx512Nt, 5.0)];
    let mut cells = choose(&[m(2 << 20, &consumed)], NONE);
    let again = m(
        2 << 20,
        &[(PerPage, 9.2), (RepMovsb, 10.1), (Avx512Nt, 5.2)],
    );
    recheck(&mut cells, std::slice::from_ref(&again), NONE);
    assert_eq!(cells[0].choice, RepMovsb);
    assert!(ties(&cells[0], &again, None).is_empty());
    // Per-page can be one of the ties; libc, within KEEP of the top
    // but slower than per-page over both passes, is not.
    let mut cells = choose(
        &[m(64, &[(PerPage, 10.0), (Avx2, 10.1), (Libc, 9.9)])],
        NONE,
    );
    let again = m(64, &[(PerPage, 10.0), (Avx2, 10.2), (Libc, 9.8)]);
    recheck(&mut cells, std::slice::from_ref(&again), NONE);
    assert_eq!(cells[0].choice, Avx2);
    assert_eq!(ties(&cells[0], &again, None), vec![Avx2, PerPage]);
}
