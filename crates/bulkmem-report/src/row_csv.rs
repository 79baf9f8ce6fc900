//! `--format csv` of the benches: one line per measured cell with the
//! figures as plain numbers and the units in the column names, for
//! spreadsheets and scripts (the text tables' `median±stdev 1.20x` cells
//! are for people). GB/s is 10^9 bytes per second; sizes are bytes.

use crate::document::Row;
use crate::table::csv_records;

/// A column: its header and the field of a row (empty where it has none).
type Column = (&'static str, fn(&Row) -> String);

/// Extra columns, and whether a row has them.
type Group = (&'static [Column], fn(&Row) -> bool);

fn num(x: impl ToString) -> String {
    x.to_string()
}

fn opt(x: Option<impl ToString>) -> String {
    x.map_or(String::new(), |v| v.to_string())
}

const BASE: &[Column] = &[
    ("op", |r| r.op.into()),
    ("strategy", |r| r.strategy.clone()),
    ("chose", |r| r.chose.clone()),
    ("hint", |r| opt(r.hint.as_ref())),
    ("size_bytes", |r| num(r.size)),
    ("total_bytes", |r| num(r.total)),
    ("regime", |r| r.regime.into()),
    ("threads", |r| num(r.threads)),
    ("runs", |r| num(r.runs)),
    ("gbps_median", |r| num(r.gbps.median)),
    ("gbps_mean", |r| num(r.gbps.mean)),
    ("gbps_stdev", |r| num(r.gbps.stdev)),
    ("gbps_min", |r| num(r.gbps.min)),
    ("gbps_max", |r| num(r.gbps.max)),
    ("speedup", |r| opt(r.speedup)),
    ("baseline", |r| opt(r.baseline.as_ref())),
    ("calls", |r| opt(r.calls)),
];

const BATCH: &[Column] = &[
    ("placement", |r| opt(r.batch.as_ref().map(|b| b.placement))),
    ("layout", |r| opt(r.batch.as_ref().map(|b| b.layout))),
    ("count", |r| opt(r.batch.as_ref().map(|b| b.count))),
    ("cpu_busy", |r| {
        opt(r.batch.as_ref().and_then(|b| b.cpu_busy))
    }),
    ("bound_share", |r| {
        opt(r.batch.as_ref().and_then(|b| b.bound_share))
    }),
    ("bound", |r| opt(r.batch.as_ref().and_then(|b| b.bound))),
    ("cpus", |r| opt(r.batch.as_ref().and_then(|b| b.cpus))),
];

const FILL: &[Column] = &[
    ("element_bytes", |r| opt(r.fill.as_ref().map(|f| f.element))),
    ("patch", |r| opt(r.fill.as_ref().map(|f| f.patch))),
];

const MOVED: &[Column] = &[
    ("move_page", |r| opt(r.moved.as_ref().map(|m| m.page))),
    ("ms_median", |r| opt(r.moved.as_ref().map(|m| m.ms.median))),
    ("ms_stdev", |r| opt(r.moved.as_ref().map(|m| m.ms.stdev))),
];

const MIGRATED: &[Column] = &[
    ("from_node", |r| opt(r.migrated.as_ref().map(|m| m.from))),
    ("to_node", |r| opt(r.migrated.as_ref().map(|m| m.to))),
    ("migrate_page", |r| opt(r.migrated.as_ref().map(|m| m.page))),
];

/// The rows as CSV: the base columns, then the extra columns of each kind
/// of row present.
pub fn csv(rows: &[Row]) -> String {
    let mut cols: Vec<&Column> = BASE.iter().collect();
    let groups: [Group; 4] = [
        (BATCH, |r| r.batch.is_some()),
        (FILL, |r| r.fill.is_some()),
        (MOVED, |r| r.moved.is_some()),
        (MIGRATED, |r| r.migrated.is_some()),
    ];
    for (group, present) in groups {
        if rows.iter().any(present) {
            cols.extend(group);
        }
    }
    let header = cols.iter().map(|c| c.0.to_string()).collect::<Vec<_>>();
    let lines = rows
        .iter()
        .map(|r| cols.iter().map(|c| (c.1)(r)).collect::<Vec<_>>());
    csv_records(std::iter::once(header).chain(lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::FillCell;
    use crate::stats::Stats;

    fn row(strategy: &str, samples: &[f64]) -> Row {
        Row {
            op: "copy",
            strategy: strategy.into(),
            chose: strategy.into(),
            hint: None,
            size: 2 << 20,
            total: 256 << 20,
            regime: "cold",
            threads: 1,
            runs: samples.len(),
            gbps: Stats::or_zero(samples),
            speedup: Some(1.5),
            baseline: Some("libc".into()),
            calls: Some("batch"),
            ..Default::default()
        }
    }

    #[test]
    fn one_line_per_cell_with_numbers() {
        let text = csv(&[row("avx2-nt", &[12.0, 13.0, 11.0]), row("a,b", &[1.0])]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("op,strategy,chose,hint,size_bytes,"),
            "{text}"
        );
        assert!(!lines[0].contains("element_bytes"), "{text}");
        let header: Vec<&str> = lines[0].split(',').collect();
        let f: Vec<&str> = lines[1].split(',').collect();
        let at = |name: &str| f[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(at("size_bytes"), "2097152");
        assert_eq!(at("gbps_median"), "12");
        assert_eq!(at("gbps_min"), "11");
        assert_eq!(at("speedup"), "1.5");
        assert_eq!((at("baseline"), at("calls")), ("libc", "batch"));
        assert_eq!(at("hint"), "");
        assert!(lines[2].starts_with("copy,\"a,b\","), "{text}");
        // A fill row brings its columns, empty on the other rows.
        let mut fill = row("nt", &[2.0]);
        fill.fill = Some(FillCell {
            element: 64,
            patch: true,
        });
        let text = csv(&[row("avx2", &[1.0]), fill]);
        assert!(text
            .lines()
            .next()
            .unwrap()
            .ends_with("speedup,baseline,calls,element_bytes,patch"));
        assert!(
            text.lines().nth(1).unwrap().ends_with("1.5,libc,batch,,"),
            "{text}"
        );
        assert!(
            text.lines()
                .nth(2)
                .unwrap()
                .ends_with("1.5,libc,batch,64,true"),
            "{text}"
        );
    }
}
