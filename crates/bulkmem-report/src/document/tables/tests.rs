use super::super::tests::{over_libc, r, sample};
use super::super::{Remeasured, RemeasuredRow};
use super::*;
use crate::stats::Stats;
use crate::table::text;

#[test]
fn tables_show_every_cell_and_the_choice() {
    let t = text(&tables_over(
        &sample(),
        &["avx512 (needs avx512f)".into()],
        "per-page",
        "built-in",
    ));
    assert!(t.contains("copy, cold"), "{t}");
    assert!(t.contains("x = over per-page"), "{t}");
    assert!(t.contains("1.60x") && t.contains("1.55x"), "{t}");
    assert!(t.contains("auto chose") && t.contains("avx2-nt"), "{t}");
    // auto 7.5 against avx2-nt's 8.0 at 4K; 9.3 against 9.0 at 2M.
    let line = t
        .lines()
        .find(|l| l.contains("auto/best"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains("0.94x avx2-nt") && line.contains("1.03x avx2-nt"),
        "{line}"
    );
    assert!(t.contains("4K") && t.contains("2M"), "{t}");
    assert!(t.contains("not run (this CPU lacks them): avx512"), "{t}");
}

#[test]
fn auto_below_the_best_within_the_runs_noise_is_marked() {
    let with = |strategy: &str, size: usize, samples: &[f64]| Row {
        gbps: Stats::or_zero(samples),
        ..r(strategy, "hot", size, 0.0)
    };
    let best = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 10.0];
    // 4K: 0.93x in every round, told apart. 2M: 0.93x in the median
    // round, but rounds from 0.80x to 1.10x. 32M: auto ahead.
    let steady: Vec<f64> = best.iter().map(|b| b * 0.93).collect();
    let swinging: Vec<f64> = [0.80, 1.10, 0.93, 0.85, 1.02, 0.93, 0.95]
        .iter()
        .zip(best)
        .map(|(r, b)| r * b)
        .collect();
    let ahead: Vec<f64> = best.iter().map(|b| b * 1.02).collect();
    let mut rows = Vec::new();
    for (size, auto) in [(4096, &steady), (2 << 20, &swinging), (32 << 20, &ahead)] {
        rows.push(with("avx2", size, &best));
        rows.push(with("auto", size, auto));
    }
    let t = text(&tables_over(&rows, &[], "avx2", "tuned"));
    let line = t.lines().find(|l| l.contains("auto/best")).unwrap();
    assert!(line.contains(" 0.93x avx2"), "{line}");
    assert!(line.contains("~0.93x avx2"), "{line}");
    assert!(line.contains(" 1.02x avx2"), "{line}");
    assert!(t.contains("~ on auto/best (1): auto measured below"), "{t}");
    // A run whose auto/best cells are all told apart says nothing.
    let t = text(&tables_over(&rows[..2], &[], "avx2", "tuned"));
    assert!(!t.contains("~ on auto/best"), "{t}");
    assert!(!t.contains("* on auto/best"), "{t}");
    // 4K measured again: its own rounds' figure, marked, the run's in
    // the note.
    rows[1].remeasured = Some(Remeasured {
        runs: 2,
        rows: vec![
            RemeasuredRow {
                strategy: "auto".into(),
                gbps: Stats::or_zero(&[9.9, 10.1]),
            },
            RemeasuredRow {
                strategy: "avx2".into(),
                gbps: Stats::or_zero(&[10.0, 10.0]),
            },
        ],
    });
    let t = text(&tables_over(&rows, &[], "avx2", "tuned"));
    let line = t.lines().find(|l| l.contains("auto/best")).unwrap();
    assert!(line.contains(" 1.00x avx2*"), "{line}");
    assert!(!line.contains(" 0.93x avx2 "), "{line}");
    assert!(
        t.contains("* on auto/best (1): measured again") && t.contains("in 2 rounds"),
        "{t}"
    );
    assert!(t.contains("own figure: 4K 0.93x avx2"), "{t}");
}

#[test]
fn ratios_over_libc_say_so_and_name_batched_rows() {
    let v = over_libc("each");
    assert_eq!(v[2].baseline.as_deref(), Some("libc"));
    let t = text(&tables_over(&v, &[], "libc", "built-in"));
    assert!(t.contains("x = over libc"), "{t}");
    // auto 7.5 over libc 6.0 at 4K.
    assert!(t.contains("1.25x"), "{t}");
    assert!(t.contains("auto (") && t.contains(") [batch]"), "{t}");
    assert!(t.contains("the others a call per extent"), "{t}");
    assert!(!t.contains("per-page [batch]"), "{t}");
    assert!(!t.contains("no ratios"), "{t}");
    let t = text(&tables_over(&v, &[], "avx512", "built-in"));
    assert!(t.contains("no ratios: this run has no `avx512` row"), "{t}");
    // Every row batched: said once in the title, no row marked.
    let t = text(&tables_over(&over_libc("batch"), &[], "libc", "built-in"));
    assert!(t.contains("every row one call a batch"), "{t}");
    assert!(!t.contains("[batch]"), "{t}");
}

#[test]
fn the_summary_names_cells_where_auto_trails_with_why_and_what_to_do() {
    // auto at 0.5x of a streaming row, every round: told apart.
    let mut v = vec![
        r("per-page", "cold", 4096, 5.0),
        r("avx512-nt", "cold", 4096, 20.0),
        r("auto", "cold", 4096, 10.0),
        r("per-page", "cold", 2 << 20, 6.0),
        r("avx2-nt", "cold", 2 << 20, 9.0),
        r("auto", "cold", 2 << 20, 9.3),
    ];
    v[2].chose = "avx2".into();
    v[5].chose = "avx2-nt".into();
    for row in &mut v {
        let m = row.gbps.median;
        row.gbps = Stats::of(&[m, m * 1.01, m * 0.99, m, m * 1.02]).unwrap();
    }
    crate::document::add_speedups(&mut v);
    let s = summary(&v).join("\n");
    assert!(
        s.contains("auto trails the best row by more than 10% at cold 4K 0.50x (chose avx2, avx512-nt won)"),
        "{s}"
    );
    assert!(!s.contains("cold 2M 0."), "the 2M cell is within 10%: {s}");
    assert!(
        s.contains("hint stream") && s.contains("bulkmem tune"),
        "{s}"
    );
    assert!(!s.contains("hint reuse"), "{s}");
    // Nothing trailing: no such lines.
    assert!(!summary(&sample()).join("\n").contains("trails"));
}

#[test]
fn summary_names_winners_and_auto_range() {
    let s = summary(&sample());
    assert_eq!(s.len(), 1);
    assert!(s[0].contains("cold 4K avx2-nt 1.60x,"), "{}", s[0]);
    assert!(
        s[0].contains("cold 2M avx2-nt 1.50x (auto 1.55x)"),
        "{}",
        s[0]
    );
    assert!(s[0].contains("auto 1.50x-1.55x over per-page"), "{}", s[0]);
    assert!(s[0].contains("lowest: cold 4K"), "{}", s[0]);
    // Over libc, with per-page's range beside it.
    let s = summary(&over_libc("batch"));
    assert!(
        s[0].contains("auto 1.20x-1.25x over libc (lowest: cold 2M)"),
        "{}",
        s[0]
    );
    assert!(s[0].ends_with(", 1.50x-1.55x over per-page"), "{}", s[0]);
}
