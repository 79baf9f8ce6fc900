//! What makes a profile's tables a profile `auto` may follow: this
//! format, every cell present, values in range, strategy names real ones
//! of the cell's operation, no cell twice; and, on the machine that loads
//! it, nothing this CPU cannot run. Messages name the key and what is
//! wrong, never the file's text: a profile may be anyone's file.

use super::super::toml::Table;
use super::format::{tables, Tables};
use super::lookup::key;
use super::{Cell, Identity, Profile, Shape, FORMAT};
use crate::strategy::{Op, Strategy};

impl Profile {
    /// Parses and validates a profile's text. The error names the line or
    /// the cell that is wrong.
    pub fn parse(text: &str) -> Result<Profile, String> {
        profile(tables(text)?)
    }
}

/// The profile the tables describe, or why they describe none.
fn profile(tables: Tables<'_>) -> Result<Profile, String> {
    let Tables { top, cpu, cells } = tables;
    let format = narrow::<u32>(top.int("format")?, "format")?;
    if format != FORMAT {
        return Err(format!(
            "format {format}, this bulkmem reads format {FORMAT}"
        ));
    }
    let count = narrow::<usize>(top.int("cells")?, "cells")?;
    if cells.len() != count {
        return Err(format!(
            "{} of its {count} cells present (truncated?)",
            cells.len()
        ));
    }
    let identity = Identity {
        vendor: cpu.str("vendor")?.to_string(),
        family: narrow(cpu.int("family")?, "family")?,
        model: narrow(cpu.int("model")?, "model")?,
        stepping: narrow(cpu.int("stepping")?, "stepping")?,
        features: cpu.str("features")?.to_string(),
        l1d: narrow(cpu.int("l1d")?, "l1d")?,
        l2: narrow(cpu.int("l2")?, "l2")?,
        llc: narrow(cpu.int("llc")?, "llc")?,
        llc_cpus: narrow(cpu.int("llc_cpus")?, "llc_cpus")?,
        cpus: narrow(cpu.int("cpus")?, "cpus")?,
    };
    let mut parsed = Vec::with_capacity(cells.len());
    for (i, t) in cells.iter().enumerate() {
        parsed.push(cell(t).map_err(|e| format!("cell {}: {e}", i + 1))?);
    }
    parsed.sort_by_key(key);
    if let Some(w) = parsed.windows(2).find(|w| key(&w[0]) == key(&w[1])) {
        return Err(format!(
            "two cells for {} {} {}",
            w[0].op,
            w[0].shape.name(),
            w[0].size
        ));
    }
    let nt_copy_shape = if top.has("nt_copy_shape") {
        let name = top.str("nt_copy_shape")?;
        let shape = crate::kernels::NtCopyShape::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or("'nt_copy_shape' names no shape of this bulkmem")?;
        Some(shape)
    } else {
        None
    };
    Ok(Profile {
        format,
        bulkmem: top.str("bulkmem")?.to_string(),
        created: top.int("created")?,
        quick: top.bool("quick")?,
        cpu: identity,
        cells: parsed,
        nt_copy_shape,
    })
}

impl Profile {
    /// Checks that this CPU (with `features`) runs every strategy every
    /// cell names: a profile that names one it cannot run is refused as a
    /// whole, so `auto` never follows it to an instruction the CPU lacks.
    pub fn check_runs_on(&self, features: &crate::machine::cpu::Features) -> Result<(), String> {
        for c in &self.cells {
            let named = [c.winner, c.choice]
                .into_iter()
                .chain(c.runner_up)
                .chain(c.gbps.iter().map(|g| g.0));
            for s in named {
                if let Some(needs) = s.missing_feature(features) {
                    return Err(format!(
                        "cell {} {} {}: {s} needs {needs}, which this CPU lacks",
                        c.op,
                        c.shape.name(),
                        c.size
                    ));
                }
            }
        }
        Ok(())
    }
}

/// An integer that must fit `T` (a `format = 4294967297` is not format 1).
fn narrow<T: TryFrom<u64>>(n: u64, key: &str) -> Result<T, String> {
    T::try_from(n).map_err(|_| format!("'{key}' is out of range"))
}

fn cell(t: &Table) -> Result<Cell, String> {
    // Messages name the key and what is wrong, never the file's text.
    let op: Op = t
        .str("op")?
        .parse()
        .map_err(|_| "op is not copy or clear".to_string())?;
    let shape = Shape::parse(t.str("shape")?).ok_or_else(|| "unknown shape".to_string())?;
    let known = |k: &str, name: &str| -> Result<Strategy, String> {
        let s: Strategy = name
            .parse()
            .map_err(|_| format!("{k}: unknown strategy name"))?;
        if s == Strategy::Auto || !s.supports(op) {
            return Err(format!("{k}: {s} is not a {op} strategy"));
        }
        Ok(s)
    };
    let strategy = |k: &str| known(k, t.str(k)?);
    let mut gbps = Vec::new();
    for item in t.str("gbps")?.split_whitespace() {
        let (name, g) = item
            .split_once('=')
            .ok_or_else(|| "gbps: expected name=GB/s items".to_string())?;
        let s = known("gbps", name)?;
        let g: f64 = g
            .parse()
            .ok()
            .filter(|g: &f64| g.is_finite() && *g >= 0.0)
            .ok_or_else(|| "gbps: a rate that is not a non-negative number".to_string())?;
        gbps.push((s, g));
    }
    Ok(Cell {
        op,
        shape,
        size: narrow(t.int("size")?, "size")?,
        winner: strategy("winner")?,
        runner_up: t
            .has("runner_up")
            .then(|| strategy("runner_up"))
            .transpose()?,
        margin: t.float("margin")?,
        choice: strategy("choice")?,
        gbps,
    })
}
