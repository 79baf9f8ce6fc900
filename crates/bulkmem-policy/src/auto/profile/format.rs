//! The profile's text: written as TOML, and read back into its tables
//! (the top level, `[cpu]`, each `[[cell]]`). Reading knows the file's
//! layout and nothing of what the values mean; `validation.rs` decides
//! that, so no value is checked in two places.

use std::fmt::Write as _;

use super::super::toml::{value, Table};
use super::{Profile, MAX_CELLS};

impl Profile {
    /// The profile as TOML.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# bulkmem calibration profile, written by `bulkmem tune`; `auto` follows it\n\
             # on this CPU only. Delete it, or set BULKMEM_PROFILE=off, to use the\n\
             # built-in rules. See docs/design.md (\"Calibration\")."
        );
        let _ = writeln!(s, "format = {}", self.format);
        let _ = writeln!(s, "bulkmem = \"{}\"", self.bulkmem);
        let _ = writeln!(s, "created = {}", self.created);
        let _ = writeln!(s, "quick = {}", self.quick);
        let _ = writeln!(s, "cells = {}", self.cells.len());
        if let Some(shape) = self.nt_copy_shape {
            let _ = writeln!(s, "nt_copy_shape = \"{}\"", shape.name());
        }
        let c = &self.cpu;
        let _ = writeln!(s, "\n[cpu]\nkey = \"{}\"", c.key());
        let _ = writeln!(s, "vendor = \"{}\"", c.vendor);
        let _ = writeln!(
            s,
            "family = {}\nmodel = {}\nstepping = {}",
            c.family, c.model, c.stepping
        );
        let _ = writeln!(s, "features = \"{}\"", c.features);
        let _ = writeln!(s, "l1d = {}\nl2 = {}\nllc = {}", c.l1d, c.l2, c.llc);
        let _ = writeln!(s, "llc_cpus = {}\ncpus = {}", c.llc_cpus, c.cpus);
        for cell in &self.cells {
            let _ = writeln!(s, "\n[[cell]]");
            let _ = writeln!(s, "op = \"{}\"", cell.op);
            let _ = writeln!(s, "shape = \"{}\"", cell.shape.name());
            let _ = writeln!(s, "size = {}", cell.size);
            let _ = writeln!(s, "winner = \"{}\"", cell.winner);
            if let Some(r) = cell.runner_up {
                let _ = writeln!(s, "runner_up = \"{r}\"");
            }
            let _ = writeln!(s, "margin = {:.3}", cell.margin);
            let _ = writeln!(s, "choice = \"{}\"", cell.choice);
            let gbps: Vec<String> = cell
                .gbps
                .iter()
                .map(|(st, g)| format!("{st}={g:.2}"))
                .collect();
            let _ = writeln!(s, "gbps = \"{}\"", gbps.join(" "));
        }
        s
    }
}

/// A profile's text as tables, before anything in them is checked.
pub(super) struct Tables<'a> {
    /// The top-level keys (`format`, `cells`, ...).
    pub(super) top: Table<'a>,
    /// The `[cpu]` table.
    pub(super) cpu: Table<'a>,
    /// One table per `[[cell]]`, in file order.
    pub(super) cells: Vec<Table<'a>>,
}

/// Splits the text into its tables. The cell count is bounded here, while
/// reading, so a file of absurdly many cells is refused before they are
/// all parsed.
pub(super) fn tables(text: &str) -> Result<Tables<'_>, String> {
    let mut top = Table::default();
    let mut cpu = Table::default();
    let mut cells: Vec<Table> = Vec::new();
    let mut section = Section::Top;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", n + 1);
        match line {
            "[cpu]" => section = Section::Cpu,
            "[[cell]]" => {
                if cells.len() == MAX_CELLS {
                    return Err(at(format!("more than {MAX_CELLS} cells")));
                }
                cells.push(Table::default());
                section = Section::Cell;
            }
            _ if line.starts_with('[') => return Err(at("unknown table header".into())),
            _ => {
                let (k, v) = line
                    .split_once('=')
                    .ok_or_else(|| at("expected key = value".into()))?;
                let v = value(v).map_err(at)?;
                let t = match section {
                    Section::Top => &mut top,
                    Section::Cpu => &mut cpu,
                    Section::Cell => cells.last_mut().expect("a cell section has a cell"),
                };
                t.0.push((k.trim(), v));
            }
        }
    }
    Ok(Tables { top, cpu, cells })
}

enum Section {
    Top,
    Cpu,
    Cell,
}
