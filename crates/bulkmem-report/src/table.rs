//! The one table builder every report uses: a title, a header, rows of
//! cells and notes, rendered as aligned text (split into column blocks
//! that fit a width, for cover letters), Markdown or CSV.

use std::fmt::Write as _;

use crate::stats::{Stats, NOISY};

/// How tables are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Aligned columns.
    #[default]
    Text,
    /// GitHub-flavoured Markdown tables.
    Md,
    /// Comma-separated values: the benches and `compare` write one line per
    /// cell, numbers only; other tables, one header line per table.
    Csv,
}

/// One table: the first column names the row, the others are right-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

/// Columns between cells in text tables.
const GAP: usize = 2;

impl Table {
    pub fn new(title: impl Into<String>, header: Vec<String>) -> Table {
        Table {
            title: title.into(),
            header,
            ..Table::default()
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table in `format`; text tables wider than `width` columns are cut
    /// into blocks of columns, each repeating the first column.
    pub fn render(&self, format: Format, width: usize) -> String {
        match format {
            Format::Text => self.text(width),
            Format::Md => self.markdown(),
            Format::Csv => self.csv(),
        }
    }

    fn widths(&self) -> Vec<usize> {
        let n = self.header.len();
        (0..n)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .chain(std::iter::once(&self.header[c]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    fn text(&self, width: usize) -> String {
        let w = self.widths();
        let mut out = String::from("\n");
        out.push_str(&wrap(&self.title, width));
        if w.is_empty() {
            return out;
        }
        // Blocks of value columns that fit beside the name column.
        let mut blocks: Vec<Vec<usize>> = vec![Vec::new()];
        let mut used = w[0];
        for (c, &cw) in w.iter().enumerate().skip(1) {
            let last = blocks.last_mut().expect("one block");
            if !last.is_empty() && used + GAP + cw > width {
                blocks.push(Vec::new());
                used = w[0];
            }
            blocks.last_mut().expect("one block").push(c);
            used += GAP + cw;
        }
        for (b, cols) in blocks.iter().enumerate() {
            if b > 0 {
                out.push('\n');
            }
            let line = |cells: &dyn Fn(usize) -> String| {
                let mut l = format!("{:<w0$}", cells(0), w0 = w[0]);
                for &c in cols {
                    let _ = write!(l, "{:>cw$}", cells(c), cw = w[c] + GAP);
                }
                l.trim_end().to_string() + "\n"
            };
            out.push_str(&line(&|c| self.header[c].clone()));
            for r in &self.rows {
                out.push_str(&line(&|c| r.get(c).cloned().unwrap_or_default()));
            }
        }
        for n in &self.notes {
            out.push_str(&wrap(n, width));
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!("\n**{}**\n\n", self.title);
        let esc = |s: &str| s.replace('|', "\\|");
        let line = |cells: &[String]| {
            let v: Vec<String> = cells.iter().map(|c| esc(c)).collect();
            format!("| {} |\n", v.join(" | "))
        };
        out.push_str(&line(&self.header));
        let rule: Vec<&str> = (0..self.header.len())
            .map(|c| if c == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "| {} |", rule.join(" | "));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        for n in &self.notes {
            let _ = writeln!(out, "\n{n}");
        }
        out
    }

    fn csv(&self) -> String {
        let mut out = format!("# {}\n", self.title);
        out.push_str(&csv_records(
            std::iter::once(&self.header).chain(&self.rows),
        ));
        out
    }
}

/// CSV lines (RFC 4180: a field quoted only where it must be), each ended
/// by `\n`. Records may differ in length, as a table's short rows do.
pub fn csv_records<R, F>(records: impl IntoIterator<Item = R>) -> String
where
    R: IntoIterator<Item = F>,
    F: AsRef<[u8]>,
{
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    for r in records {
        w.write_record(r).expect("writing to memory cannot fail");
    }
    let bytes = w.into_inner().expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("UTF-8 fields make UTF-8 lines")
}

/// One CSV line of `fields`, ended by `\n`.
pub fn csv_record<F: AsRef<[u8]>>(fields: impl IntoIterator<Item = F>) -> String {
    csv_records([fields])
}

/// Under the tables: which GB the rates are in, since the sizes beside
/// them (4K, 2M) are powers of two.
pub const GB_NOTE: &str = "GB/s = 10^9 bytes/s; sizes K, M, G = 2^10, 2^20, 2^30 bytes";

/// `text` broken at spaces into lines of at most `width` columns (a word
/// longer than that keeps its own line, and words are never split at their
/// hyphens: `per-page` is one name), continuation lines indented.
fn wrap(text: &str, width: usize) -> String {
    let options = textwrap::Options::new(width)
        .subsequent_indent("  ")
        .break_words(false)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        .wrap_algorithm(textwrap::WrapAlgorithm::FirstFit);
    let mut out = textwrap::fill(text, options);
    out.push('\n');
    out
}

/// A measured cell: `median±stdev` and, if given, the speed-up; `~` marks
/// a cell whose stdev exceeds [`NOISY`] of its median.
pub fn cell(s: &Stats, speedup: Option<f64>) -> String {
    let noisy = if s.is_noisy() { "~" } else { "" };
    let value = format!("{noisy}{}±{}", fixed(s.median), fixed(s.stdev));
    match speedup {
        Some(x) => format!("{value} {x:.2}x"),
        None => value,
    }
}

/// Three significant digits for rates from 0.001 to 10000.
pub fn fixed(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        a if a >= 0.01 || a == 0.0 => format!("{x:.2}"),
        _ => format!("{x:.3}"),
    }
}

/// The note under a table with noisy cells, if any cell is.
pub fn noise_note<'a>(stats: impl IntoIterator<Item = &'a Stats>) -> Option<String> {
    let noisy = stats.into_iter().filter(|s| s.is_noisy()).count();
    (noisy > 0).then(|| {
        format!(
            "~ {noisy} noisy cell(s): stdev above {:.0}% of the median; more --runs or an idle machine",
            NOISY * 100.0
        )
    })
}

/// `tables` as aligned text, wide enough never to split (the default
/// report and tests read whole tables), then [`GB_NOTE`].
pub fn text(tables: &[Table]) -> String {
    let mut out: String = tables
        .iter()
        .map(|t| t.render(Format::Text, usize::MAX))
        .collect();
    out.push_str(&format!("\n{GB_NOTE}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(
            "copy, hot",
            ["strategy", "4K", "2M", "256M"].map(String::from).to_vec(),
        );
        t.row(
            ["per-page", "10.0±0.10", "11.0±0.20", "9.00±0.10"]
                .map(String::from)
                .to_vec(),
        );
        t.row(
            [
                "avx2-nt",
                "12.0±0.10 1.20x",
                "13.0±0.20 1.18x",
                "15.0±0.30 1.67x",
            ]
            .map(String::from)
            .to_vec(),
        );
        t.notes.push("a note".into());
        t
    }

    #[test]
    fn titles_wrap_at_spaces_only() {
        let t = Table::new("copy per-page median±stdev of 7 runs", Vec::new());
        assert_eq!(
            t.render(Format::Text, 15),
            "\ncopy per-page\n  median±stdev\n  of 7 runs\n"
        );
    }

    #[test]
    fn text_aligns_and_splits_to_the_width() {
        let wide = sample().render(Format::Text, 200);
        let lines: Vec<&str> = wide.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 5, "{wide}");
        assert!(
            lines[1].starts_with("strategy") && lines[1].ends_with("256M"),
            "{wide}"
        );
        let mut t = sample();
        t.title = "copy, hot (same buffers every call; 1 thread): GB/s median of 7 runs".into();
        let narrow = t.render(Format::Text, 40);
        assert!(narrow.lines().all(|l| l.chars().count() <= 40), "{narrow}");
        assert!(
            narrow.contains("copy, hot") && narrow.contains("7 runs"),
            "{narrow}"
        );
        // Every block repeats the row names.
        assert_eq!(narrow.matches("avx2-nt").count(), 3, "{narrow}");
        assert!(
            narrow.contains("1.67x") && narrow.contains("a note"),
            "{narrow}"
        );
    }

    #[test]
    fn markdown_and_csv_keep_every_cell() {
        let md = sample().render(Format::Md, 80);
        assert!(md.contains("| strategy | 4K | 2M | 256M |"), "{md}");
        assert!(md.contains("| --- | ---: | ---: | ---: |"), "{md}");
        let mut t = sample();
        t.row(vec!["a,b".into(), "x\"y".into()]);
        let csv = t.render(Format::Csv, 80);
        assert!(
            csv.starts_with("# copy, hot\nstrategy,4K,2M,256M\n"),
            "{csv}"
        );
        assert!(csv.contains("\"a,b\",\"x\"\"y\""), "{csv}");
    }

    #[test]
    fn cells_show_spread_and_mark_noise() {
        let quiet = Stats::of(&[10.0, 10.1, 9.9]).unwrap();
        assert_eq!(cell(&quiet, Some(1.5)), "10.0±0.10 1.50x");
        let noisy = Stats::of(&[10.0, 13.0, 7.0]).unwrap();
        assert!(cell(&noisy, None).starts_with('~'));
        assert!(noise_note([&quiet]).is_none());
        assert!(noise_note([&quiet, &noisy])
            .unwrap()
            .starts_with("~ 1 noisy"));
        assert_eq!(fixed(2200.0), "2200");
        assert_eq!(fixed(0.004), "0.004");
    }
}
