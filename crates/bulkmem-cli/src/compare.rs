//! `bulkmem compare A.json B.json`: the command's side (flags, where the
//! output goes, the exit status); reading the documents and judging their
//! cells is the output crate's (`bulkmem_report::compare`).

use std::path::{Path, PathBuf};

use clap::ValueEnum as _;

use bulkmem_report::compare::{fails, outcome, render, warnings, Doc, FailOn};

use bulkmem_bench::cli::{runtime, usage, Failure};
use bulkmem_bench::out;
use bulkmem_report::table::Format;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline document (`--json` of any `bulkmem bench`).
    pub a: PathBuf,
    /// The document compared with it; ratios are B/A.
    pub b: PathBuf,
    /// The smallest change worth calling (`3%` or `0.03`): a cell is
    /// faster or slower only when its median B/A moved at least this far
    /// and the test is significant after the correction for the number of
    /// cells; smaller changes are never called, however consistent.
    #[arg(long, default_value = "3%", value_parser = parse_threshold)]
    pub threshold: f64,
    /// Table format: aligned text, Markdown, or CSV (one line per cell,
    /// numbers only).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write every cell's figures and verdict as JSON to FILE (`-`
    /// for stdout; the tables then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 when a cell changed significantly in that direction (for
    /// CI); without it, the exit status says only whether the comparison ran.
    #[arg(long, value_enum, value_name = "CHANGE")]
    pub fail_on: Option<FailOn>,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a threshold like 2% or 0.02"))?;
    let v = v / scale;
    // A bare `2` most likely means 2%, not 200%: refuse rather than guess.
    if !(0.0..1.0).contains(&v) {
        return Err(format!(
            "threshold '{s}' is outside 0%..100%; write 2% or 0.02"
        ));
    }
    Ok(v)
}

pub fn cmd(args: CompareArgs) -> Result<(), Failure> {
    // A file that is not a bench document is bad input, as a missing one
    // is (exit 2): nothing was compared, so there is no result to fail.
    let a = Doc::load(&args.a).map_err(usage)?;
    let b = Doc::load(&args.b).map_err(usage)?;
    for w in warnings(&a, &b) {
        eprintln!("bulkmem: warning: {w}");
    }
    bulkmem_bench::cli::check_outputs(args.json.as_deref(), None)?;
    let o = outcome(&a, &b, args.threshold);
    let text = render(&o, args.format);
    if let Some(path) = args.json.as_deref() {
        let json = serde_json::to_string_pretty(&o).expect("plain data serializes") + "\n";
        if path == Path::new("-") {
            // The JSON owns stdout; the tables are a courtesy on stderr.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            out::write_bytes(json.as_bytes()).map_err(out::failed)?;
        } else {
            out::print(&text)?;
            bulkmem_report::write_file::write_file(path, json.as_bytes())
                .map_err(|e| runtime(format!("cannot write {}: {e}", path.display())))?;
        }
    } else {
        out::print(&text)?;
    }
    match args.fail_on {
        Some(f) if fails(&o, f) => Err(runtime(format!(
            "--fail-on {}: {} faster, {} slower",
            f.to_possible_value()
                .expect("no skipped variants")
                .get_name(),
            o.faster,
            o.slower
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_as_percent_or_fraction() {
        assert_eq!(parse_threshold("2%"), Ok(0.02));
        assert_eq!(parse_threshold("0.05"), Ok(0.05));
        assert_eq!(parse_threshold("0%"), Ok(0.0));
        assert!(parse_threshold("2").is_err());
        assert!(parse_threshold("fast").is_err());
        assert!(parse_threshold("-1%").unwrap_err().contains("outside"));
    }

    #[test]
    fn the_default_gate_is_three_percent() {
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            args: CompareArgs,
        }
        let args = <Cmd as clap::Parser>::try_parse_from(["compare", "a", "b"])
            .unwrap()
            .args;
        assert_eq!(args.threshold, 0.03);
    }
}
