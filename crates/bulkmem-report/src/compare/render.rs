//! The tables of `bulkmem compare`: aligned text, Markdown and CSV.

use std::fmt::Write as _;

use super::Outcome;
use crate::table::{csv_record, fixed, Format, Table, GB_NOTE};

/// Text tables are narrow (five columns); this only bounds pathological labels.
const WIDTH: usize = 120;

/// The comparison's tables in `format`, with the counts and the geometric
/// mean under them.
pub fn render(o: &Outcome, format: Format) -> String {
    if format == Format::Csv {
        return csv(o);
    }
    let mut out = String::new();
    let mut t = Table::new(
        format!("GB/s, median±stdev: A = {}, B = {}", o.a, o.b),
        ["cell", "A", "B", "B/A", "verdict"]
            .map(String::from)
            .to_vec(),
    );
    for c in &o.cells {
        t.row(vec![
            c.cell.clone(),
            format!("{}±{}", fixed(c.a.median), fixed(c.a.stdev)),
            format!("{}±{}", fixed(c.b.median), fixed(c.b.stdev)),
            c.ratio.map_or("-".into(), |r| format!("{r:.3}x")),
            c.verdict.mark().into(),
        ]);
    }
    let tested = o.cells.iter().filter(|c| c.p_holm.is_some()).count();
    t.notes.push(format!(
        "faster/slower: Welch's t-test on the samples, significant at 5% for all {tested} tested cell(s) together (Holm), with a between-run drift of {}% counted, and a change of at least {}%; ~ no change; ? fewer than 2 samples; {GB_NOTE}",
        percent(o.drift),
        percent(o.threshold)
    ));
    out.push_str(&t.render(format, WIDTH));
    for (cells, name) in [(&o.only_in_a, &o.a), (&o.only_in_b, &o.b)] {
        if cells.is_empty() {
            continue;
        }
        let mut t = Table::new(format!("only in {name}"), vec!["cell".into()]);
        for c in cells {
            t.row(vec![c.clone()]);
        }
        out.push_str(&t.render(format, WIDTH));
    }
    let geo = o.geomean.map_or("-".into(), |g| format!("{g:.3}x"));
    let mut line = format!(
        "{} faster, {} slower, {} unchanged",
        o.faster, o.slower, o.unchanged
    );
    if o.cannot_tell > 0 {
        let _ = write!(line, ", {} cannot tell", o.cannot_tell);
    }
    let logs = o
        .cells
        .iter()
        .filter(|c| c.ratio.is_some_and(|r| r > 0.0 && r.is_finite()))
        .count();
    let _ = write!(
        line,
        "; geometric mean of B/A {geo} over {logs} matched cell(s)"
    );
    if !o.only_in_a.is_empty() || !o.only_in_b.is_empty() {
        let _ = write!(
            line,
            "; {} only in A, {} only in B",
            o.only_in_a.len(),
            o.only_in_b.len()
        );
    }
    let _ = writeln!(out, "\n{line}");
    out
}

/// One line per cell, numbers only (GB/s = 10^9 bytes/s), cells found in
/// one document only with empty figures: for spreadsheets and scripts.
fn csv(o: &Outcome) -> String {
    let mut out = csv_record([
        "cell",
        "a_median_gbps",
        "a_stdev_gbps",
        "a_runs",
        "b_median_gbps",
        "b_stdev_gbps",
        "b_runs",
        "ratio_b_over_a",
        "verdict",
    ]);
    for c in &o.cells {
        let ratio = c.ratio.map_or(String::new(), |r| r.to_string());
        out.push_str(&csv_record([
            c.cell.clone(),
            c.a.median.to_string(),
            c.a.stdev.to_string(),
            c.a.runs.to_string(),
            c.b.median.to_string(),
            c.b.stdev.to_string(),
            c.b.runs.to_string(),
            ratio,
            c.verdict.name().to_string(),
        ]));
    }
    for (cells, which) in [(&o.only_in_a, "only-a"), (&o.only_in_b, "only-b")] {
        for c in cells {
            let mut fields = vec![c.as_str()];
            fields.extend([""; 7]);
            fields.push(which);
            out.push_str(&csv_record(fields));
        }
    }
    out
}

/// `0.02` as `2`, `0.025` as `2.5`: the threshold as the user wrote it.
pub fn percent(x: f64) -> String {
    let s = format!("{:.2}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
