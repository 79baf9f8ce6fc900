//! The calibration profile `bulkmem tune` writes and `auto` follows: for
//! each operation, request shape and size on a ladder, the GB/s every
//! strategy measured on this machine, the winner, its margin over the
//! runner-up, and the choice `auto` makes there.
//!
//! The file is TOML (a subset: `key = value` with strings, integers,
//! floats and booleans, a `[cpu]` table and `[[cell]]` arrays), readable
//! and diffable, parsed here without dependencies:
//!
//! ```toml
//! format = 3
//! bulkmem = "0.1.0"
//! created = 1795000000          # Unix seconds
//! cells = 2                     # a truncated file is detected
//!
//! [cpu]
//! vendor = "AMD"
//! family = 25
//! # ... model, stepping, features, l1d, l2, llc, llc_cpus, cpus
//!
//! [[cell]]
//! op = "copy"
//! shape = "single"              # or "batch-4K", "batch-2M"
//! size = 4096                   # the call's length, or the batch total
//! winner = "avx2"
//! runner_up = "libc"
//! margin = 1.507                # winner / runner-up
//! choice = "avx2"               # what auto uses (see below)
//! gbps = "per-page=38.2 libc=47.6 avx2=71.7"
//! ```
//!
//! `choice` is the winner unless the tuner kept the rules' or the previous
//! size's choice (within a few percent of the winner, fewer bands), a
//! re-check found another candidate better over both passes, or the
//! choice was slower than `per-page` over both (then `per-page`: a profile
//! never makes a size slower than the kernel's own loop).

use super::cover::edge;
use std::fmt::Write as _;

use crate::cpu::{self, Facts};
use crate::strategy::{Hint, Op, Strategy};

use super::toml::{value, Table};
use super::{rules::NT_MIN_RUN, Choice, Request};

/// The profile format this bulkmem reads and writes. Raised also when a
/// kernel changes enough to change which strategy wins somewhere, so that
/// a profile measured against the old kernels is reported outdated rather
/// than followed: 2 since the non-temporal copies read four pages at once
/// (they gained 10-15% over glibc's `memcpy`, which profiles had chosen
/// above 128 MiB); 3 since single calls are measured with a read of the
/// destination after each (a format-2 profile timed the copy alone and
/// chose streaming stores its callers then paid for in DRAM reads).
pub const FORMAT: u32 = 3;

/// The most cells a profile may hold: `bulkmem tune` writes about 90, and
/// building the length bands from a profile runs in every process that
/// uses `auto` (every preloaded one), so a file cannot make that costly.
pub const MAX_CELLS: usize = 4096;

/// Batches whose mean run is below this are measured and looked up as
/// batches of small (4 KiB) extents; the rest as batches of 2 MiB extents.
/// Below it the per-run start-up of a primitive still shows; above it only
/// bandwidth does.
pub const SMALL_EXTENT_MAX: usize = 32 << 10;

/// Which CPU a profile was measured on. Any difference makes a profile
/// foreign: features (after `BULKMEM_DISABLE`), caches and the CPUs that
/// share them all change which primitive wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// [`Vendor::name`](crate::cpu::Vendor::name): "AMD", "Intel" or
    /// "other".
    pub vendor: String,
    /// CPUID display family ([`Facts::family`]).
    pub family: u32,
    /// CPUID display model ([`Facts::model`]).
    pub model: u32,
    /// CPUID stepping.
    pub stepping: u32,
    /// Feature names, space-separated, in `Features::names` order.
    pub features: String,
    /// Bytes of the first CPU's L1 data cache (0: unknown).
    pub l1d: usize,
    /// Bytes of the first CPU's L2 (0: unknown).
    pub l2: usize,
    /// Bytes of one LLC domain (assumed 32 MiB where sysfs does not say).
    pub llc: usize,
    /// CPUs sharing one LLC domain.
    pub llc_cpus: usize,
    /// Online CPUs.
    pub cpus: usize,
}

impl Identity {
    /// The running machine's.
    pub fn this() -> Identity {
        Identity::of(cpu::facts())
    }

    /// The identity of the machine `i` describes (a [`crate::cpu::CpuInfo`]
    /// derefs to its facts).
    pub fn of(i: &Facts) -> Identity {
        Identity {
            vendor: i.vendor.name().to_string(),
            family: i.family,
            model: i.model,
            stepping: i.stepping,
            features: i.features.names().join(" "),
            l1d: i.caches.l1d.unwrap_or(0),
            l2: i.caches.l2.unwrap_or(0),
            llc: i.llc_bytes(),
            llc_cpus: i.llc_cpus(),
            cpus: i.caches.cpus,
        }
    }

    /// A file-name-safe key: vendor, family, model and stepping in clear,
    /// then a hash of everything else.
    pub fn key(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!(
            "{}|{}|{}|{}|{}|{}",
            self.features, self.l1d, self.l2, self.llc, self.llc_cpus, self.cpus
        )
        .bytes()
        {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        format!(
            "{}-{:x}-{:x}-{:x}-{:08x}",
            self.vendor.to_ascii_lowercase(),
            self.family,
            self.model,
            self.stepping,
            h as u32
        )
    }

    /// The first field that differs from `other` (the running CPU's), as
    /// "what differs (this CPU: value)": only `other`'s value is shown, so
    /// a message never quotes a profile file's text.
    pub fn difference(&self, other: &Identity) -> Option<String> {
        let fields: [(&str, String, String); 10] = [
            ("vendor", self.vendor.clone(), other.vendor.clone()),
            (
                "family",
                format!("{:#x}", self.family),
                format!("{:#x}", other.family),
            ),
            (
                "model",
                format!("{:#x}", self.model),
                format!("{:#x}", other.model),
            ),
            (
                "stepping",
                self.stepping.to_string(),
                other.stepping.to_string(),
            ),
            ("features", self.features.clone(), other.features.clone()),
            ("L1d bytes", self.l1d.to_string(), other.l1d.to_string()),
            ("L2 bytes", self.l2.to_string(), other.l2.to_string()),
            ("LLC bytes", self.llc.to_string(), other.llc.to_string()),
            (
                "CPUs per LLC",
                self.llc_cpus.to_string(),
                other.llc_cpus.to_string(),
            ),
            ("online CPUs", self.cpus.to_string(), other.cpus.to_string()),
        ];
        fields
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, _, b)| format!("{what} differs (this CPU: '{b}')"))
    }
}

/// The shape of a request, as the tuner measures it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// One contiguous call, measured hot (the same buffers every call).
    Single,
    /// A batch of runs shorter than [`SMALL_EXTENT_MAX`], measured as
    /// cache-cold 4 KiB extents.
    SmallExtents,
    /// A batch of longer runs, measured as cache-cold 2 MiB extents.
    LargeExtents,
}

impl Shape {
    /// Every shape, in the order the tuner measures and the file lists them.
    pub const ALL: [Shape; 3] = [Shape::Single, Shape::SmallExtents, Shape::LargeExtents];

    /// The shape's name in the profile file: "single", "batch-4K" or
    /// "batch-2M".
    pub fn name(self) -> &'static str {
        match self {
            Shape::Single => "single",
            Shape::SmallExtents => "batch-4K",
            Shape::LargeExtents => "batch-2M",
        }
    }

    /// The extent length the tuner measures this shape with (0: single).
    pub fn extent(self) -> usize {
        match self {
            Shape::Single => 0,
            Shape::SmallExtents => 4 << 10,
            Shape::LargeExtents => 2 << 20,
        }
    }

    /// The shape `req` is looked up as.
    pub fn of(req: &Request) -> Shape {
        if req.runs <= 1 {
            Shape::Single
        } else if req.mean_run() < SMALL_EXTENT_MAX {
            Shape::SmallExtents
        } else {
            Shape::LargeExtents
        }
    }

    fn parse(s: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|sh| sh.name() == s)
    }
}

/// One measured class: an operation, a shape and a size.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The operation measured.
    pub op: Op,
    /// The request shape measured.
    pub shape: Shape,
    /// A single call's length, or a batch's total, in bytes.
    pub size: usize,
    /// The strategy with the highest GB/s (lower quartile of its runs).
    pub winner: Strategy,
    /// The second fastest; `None` when only one strategy was measured.
    pub runner_up: Option<Strategy>,
    /// Winner's GB/s over the runner-up's (1.0 without a runner-up).
    pub margin: f64,
    /// What `auto` uses here with hint `Auto`.
    pub choice: Strategy,
    /// Median GB/s per strategy, in measurement order.
    pub gbps: Vec<(Strategy, f64)>,
}

impl Cell {
    fn best(&self, keep: impl Fn(Strategy) -> bool) -> Option<Strategy> {
        self.gbps
            .iter()
            .filter(|(s, _)| keep(*s))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|c| c.0)
    }

    /// The fastest cache-allocating strategy measured (hint `Reuse`).
    pub fn best_temporal(&self) -> Option<Strategy> {
        self.best(|s| !s.is_non_temporal())
    }

    /// The fastest non-temporal strategy measured (hint `Stream`).
    pub fn best_non_temporal(&self) -> Option<Strategy> {
        self.best(|s| s.is_non_temporal())
    }

    /// The GB/s `s` measured here (lower quartile of its runs).
    pub fn gbps_of(&self, s: Strategy) -> Option<f64> {
        self.gbps.iter().find(|c| c.0 == s).map(|c| c.1)
    }
}

/// A parsed, validated profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The file format version ([`FORMAT`] for every profile that loads).
    pub format: u32,
    /// The bulkmem version that measured it.
    pub bulkmem: String,
    /// Unix seconds.
    pub created: u64,
    /// Measured with `bulkmem tune --quick` (fewer sizes and runs).
    pub quick: bool,
    /// The machine it was measured on; a profile applies only where this
    /// equals [`Identity::this`].
    pub cpu: Identity,
    /// Sorted by (op, shape, size).
    pub cells: Vec<Cell>,
}

impl Profile {
    /// The cells of one operation and shape, ascending by size.
    pub fn cells_of(&self, op: Op, shape: Shape) -> &[Cell] {
        let start = self
            .cells
            .partition_point(|c| key(c) < (op_ix(op), shape, 0));
        let end = self
            .cells
            .partition_point(|c| key(c) < (op_ix(op), shape, usize::MAX));
        &self.cells[start..end.max(start)]
    }

    /// The cell that covers `size`: cells cover the sizes nearest them on a
    /// log scale (boundaries at the power of two at or above the geometric
    /// mean of neighbours), except that a non-temporal choice above a
    /// cache-allocating one covers only its own size and up: guessing wrong at
    /// the cache's edge costs far more by streaming (`cover::edge`).
    pub fn cell_for(&self, op: Op, shape: Shape, size: usize) -> Option<&Cell> {
        let cells = self.cells_of(op, shape);
        // Boundaries ascend with the cells (sizes are distinct and sorted,
        // each boundary lies in (a, b]), so a binary search finds the
        // first one above `size`: bands over N cells build in N log N.
        let (mut lo, mut hi) = (0, cells.len().saturating_sub(1));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if size < edge(&cells[mid], &cells[mid + 1]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        cells.get(lo)
    }

    /// Checks that this CPU (with `features`) runs every strategy every
    /// cell names: a profile that names one it cannot run is refused as a
    /// whole, so `auto` never follows it to an instruction the CPU lacks.
    pub fn check_runs_on(&self, features: &crate::cpu::Features) -> Result<(), String> {
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

    /// What the profile picks for `req`, or `None` when it measured nothing
    /// of that operation and shape.
    pub fn decide(&self, req: &Request) -> Option<Choice> {
        let cell = self.cell_for(req.op, Shape::of(req), req.total)?;
        let c = |strategy, reason| Some(Choice { strategy, reason });
        match req.hint {
            Hint::Auto => c(cell.choice, "tuned: fastest measured here at this size"),
            Hint::Reuse => c(
                cell.best_temporal().unwrap_or(cell.choice),
                "tuned: fastest cache-allocating strategy measured here (hint reuse)",
            ),
            Hint::Stream if req.mean_run() >= NT_MIN_RUN => match cell.best_non_temporal() {
                Some(s) => c(
                    s,
                    "tuned: fastest non-temporal strategy measured here (hint stream)",
                ),
                None => c(
                    cell.choice,
                    "tuned: no non-temporal strategy measured; fastest",
                ),
            },
            Hint::Stream => c(
                cell.best_temporal().unwrap_or(cell.choice),
                "tuned: runs too short to stream; fastest cache-allocating",
            ),
        }
    }

    /// The lengths at which single-call decisions may change.
    pub fn single_edges(&self, op: Op) -> Vec<usize> {
        self.cells_of(op, Shape::Single)
            .windows(2)
            .map(|w| edge(&w[0], &w[1]))
            .collect()
    }

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

    /// Parses and validates a profile's text. The error names the line or
    /// the cell that is wrong.
    pub fn parse(text: &str) -> Result<Profile, String> {
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
        Ok(Profile {
            format,
            bulkmem: top.str("bulkmem")?.to_string(),
            created: top.int("created")?,
            quick: top.bool("quick")?,
            cpu: identity,
            cells: parsed,
        })
    }
}

/// An integer that must fit `T` (a `format = 4294967297` is not format 1).
fn narrow<T: TryFrom<u64>>(n: u64, key: &str) -> Result<T, String> {
    T::try_from(n).map_err(|_| format!("'{key}' is out of range"))
}

fn op_ix(op: Op) -> u8 {
    (op == Op::Clear) as u8
}

fn key(c: &Cell) -> (u8, Shape, usize) {
    (op_ix(c.op), c.shape, c.size)
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

enum Section {
    Top,
    Cpu,
    Cell,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::auto::{Machine, Overrides, Policy};
    use crate::cpu::{Features, Vendor};

    pub(crate) fn identity() -> Identity {
        Identity {
            vendor: "AMD".into(),
            family: 0x19,
            model: 0x1,
            stepping: 1,
            features: "erms fsrm avx2 clzero rep_good".into(),
            l1d: 32 << 10,
            l2: 512 << 10,
            llc: 32 << 20,
            llc_cpus: 2,
            cpus: 2,
        }
    }

    fn c(op: Op, shape: Shape, size: usize, choice: Strategy, gbps: &[(Strategy, f64)]) -> Cell {
        let mut sorted = gbps.to_vec();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
        Cell {
            op,
            shape,
            size,
            winner: sorted[0].0,
            runner_up: sorted.get(1).map(|x| x.0),
            margin: sorted[0].1 / sorted.get(1).map_or(sorted[0].1, |x| x.1),
            choice,
            gbps: gbps.to_vec(),
        }
    }

    /// A hand-written profile: copies use avx2 up to 16K, rep-movsb to 16M,
    /// avx2-nt above; 4K batches stream from 16M; no clear cells.
    pub(crate) fn hand() -> Profile {
        use Shape::*;
        use Strategy::*;
        let m = 1 << 20;
        let mut cells = vec![
            c(
                Op::Copy,
                Single,
                64,
                Avx2,
                &[(PerPage, 5.0), (Avx2, 20.0), (RepMovsb, 8.0)],
            ),
            c(
                Op::Copy,
                Single,
                4096,
                Avx2,
                &[(PerPage, 38.0), (Avx2, 71.0), (Avx2Nt, 13.0)],
            ),
            c(
                Op::Copy,
                Single,
                64 << 10,
                RepMovsb,
                &[(PerPage, 30.0), (RepMovsb, 40.0), (Avx2, 35.0)],
            ),
            c(
                Op::Copy,
                Single,
                16 * m,
                RepMovsb,
                &[(PerPage, 20.0), (RepMovsb, 22.0), (Avx2Nt, 15.0)],
            ),
            c(
                Op::Copy,
                Single,
                256 * m,
                Avx2Nt,
                &[(PerPage, 9.0), (RepMovsb, 14.0), (Avx2Nt, 16.0)],
            ),
            c(
                Op::Copy,
                SmallExtents,
                m,
                Avx2,
                &[(PerPage, 6.0), (Avx2, 7.0), (Avx2Nt, 6.5)],
            ),
            c(
                Op::Copy,
                SmallExtents,
                16 * m,
                Avx2Nt,
                &[(PerPage, 6.0), (Avx2, 6.6), (Avx2Nt, 8.7)],
            ),
        ];
        // Parse sorts; keep the hand-written order scrambled to prove it.
        cells.swap(0, 6);
        let mut p = Profile {
            format: FORMAT,
            bulkmem: "0.1.0".into(),
            created: 1_795_000_000,
            quick: false,
            cpu: identity(),
            cells,
        };
        p.cells.sort_by_key(key);
        p
    }

    fn copy(len: usize, hint: Hint) -> Request {
        Request::single(Op::Copy, len, hint)
    }

    #[test]
    fn round_trip() {
        let p = hand();
        let text = p.to_toml();
        let q = Profile::parse(&text).unwrap();
        // Rates are written with two decimals; these have fewer.
        assert_eq!(q.cells.len(), p.cells.len());
        for (a, b) in p.cells.iter().zip(&q.cells) {
            assert_eq!(
                (a.op, a.shape, a.size, a.winner, a.choice),
                (b.op, b.shape, b.size, b.winner, b.choice)
            );
            assert_eq!(a.gbps, b.gbps);
            assert!((a.margin - b.margin).abs() < 1e-3);
        }
        assert_eq!(q.cpu, p.cpu);
        assert_eq!(Profile::parse(&q.to_toml()).unwrap(), q);
        assert!(text.contains(&format!("key = \"{}\"", identity().key())));
    }

    #[test]
    fn lookup_follows_the_nearest_cell_on_a_log_scale() {
        let p = hand();
        let pick = |len, hint| p.decide(&copy(len, hint)).unwrap().strategy;
        assert_eq!(pick(0, Hint::Auto), Strategy::Avx2);
        assert_eq!(pick(4096, Hint::Auto), Strategy::Avx2);
        // The 4K/64K boundary is their geometric mean, 16K.
        assert_eq!(pick(16383, Hint::Auto), Strategy::Avx2);
        assert_eq!(pick(16384, Hint::Auto), Strategy::RepMovsb);
        // Streaming starts only at the cell measured to stream (256M), not
        // at the 16M/256M geometric mean.
        assert_eq!(pick(64 << 20, Hint::Auto), Strategy::RepMovsb);
        assert_eq!(pick((256 << 20) - 1, Hint::Auto), Strategy::RepMovsb);
        assert_eq!(pick(256 << 20, Hint::Auto), Strategy::Avx2Nt);
        assert_eq!(pick(usize::MAX, Hint::Auto), Strategy::Avx2Nt);
        // Hints pick within the cell.
        assert_eq!(pick(1 << 30, Hint::Reuse), Strategy::RepMovsb);
        assert_eq!(pick(4096, Hint::Stream), Strategy::Avx2Nt);
        assert_eq!(
            pick(512, Hint::Stream),
            Strategy::Avx2,
            "short runs never stream"
        );
        assert_eq!(pick(64, Hint::Stream), Strategy::Avx2);
    }

    #[test]
    fn batches_use_their_shape_and_fall_back_when_unmeasured() {
        let p = hand();
        let b = |extent: usize, count: usize| Request {
            op: Op::Copy,
            total: extent * count,
            runs: count,
            hint: Hint::Auto,
        };
        let pick = |r: Request| p.decide(&r).map(|c| c.strategy);
        assert_eq!(pick(b(4096, 256)), Some(Strategy::Avx2)); // 1 MiB
        assert_eq!(pick(b(4096, 65536)), Some(Strategy::Avx2Nt)); // 256 MiB
        assert_eq!(pick(b(16 << 10, 4096)), Some(Strategy::Avx2Nt));
        assert_eq!(pick(b(2 << 20, 128)), None, "no 2M-extent cells");
        assert_eq!(
            p.decide(&Request::single(Op::Clear, 4096, Hint::Auto)),
            None
        );
    }

    #[test]
    fn the_policy_falls_back_to_the_rules_where_the_profile_is_silent() {
        let m = Machine {
            vendor: Vendor::Amd,
            features: Features {
                erms: true,
                fsrm: true,
                avx2: true,
                clzero: true,
                ..Features::default()
            },
            l1d_bytes: 32 << 10,
            l2_bytes: 512 << 10,
            llc_bytes: 32 << 20,
            llc_cpus: 2,
            x86: true,
        };
        let p = hand();
        let pol = Policy {
            machine: &m,
            profile: Some(&p),
            overrides: &Overrides::NONE,
        };
        let clear = Request::single(Op::Clear, 1 << 30, Hint::Auto);
        assert_eq!(pol.decide(&clear), crate::auto::decide(&m, &clear));
        assert!(pol
            .decide(&copy(4096, Hint::Auto))
            .reason
            .starts_with("tuned"));
        // Overrides come first.
        let forced = Overrides {
            copy: Some(Strategy::Libc),
            ..Overrides::default()
        };
        let pol = Policy {
            overrides: &forced,
            ..pol
        };
        assert_eq!(pol.decide(&copy(4096, Hint::Auto)).strategy, Strategy::Libc);
        assert_eq!(pol.decide(&clear), crate::auto::decide(&m, &clear));
        let nt = Overrides {
            nt_threshold: Some(1 << 20),
            ..Overrides::default()
        };
        let pol = Policy {
            overrides: &nt,
            ..pol
        };
        assert_eq!(
            pol.decide(&copy(2 << 20, Hint::Auto)).strategy,
            Strategy::Avx2Nt
        );
        assert_eq!(
            pol.decide(&copy(512 << 10, Hint::Auto)).strategy,
            Strategy::RepMovsb
        );
        assert_eq!(
            pol.decide(&copy(1 << 30, Hint::Reuse)).strategy,
            Strategy::RepMovsb
        );
    }

    #[test]
    fn policy_bands_agree_with_the_policy() {
        let m = crate::auto::rules::tests::zen5();
        let p = hand();
        let nt = Overrides {
            nt_threshold: Some(3 << 20),
            ..Overrides::default()
        };
        for o in [&Overrides::NONE, &nt] {
            for profile in [None, Some(&p)] {
                let pol = Policy {
                    machine: &m,
                    profile,
                    overrides: o,
                };
                for op in [Op::Copy, Op::Clear] {
                    for &hint in Hint::ALL {
                        let b = pol.bands(op, hint);
                        if profile.is_some() && o.nt_threshold.is_none() && op == Op::Copy {
                            assert!(b.is_table(), "{:?}", b.as_slice());
                        }
                        let mut lens: Vec<usize> =
                            vec![0, 1, 2, 3, 64, usize::MAX, usize::MAX / 2 + 1];
                        lens.extend(
                            (0..64).flat_map(|b| [(1usize << b) - 1, 1 << b, (1 << b) + 1]),
                        );
                        for e in pol.edges(op) {
                            lens.extend([e.saturating_sub(1), e, e + 1]);
                        }
                        for len in lens {
                            let r = Request::single(op, len, hint);
                            assert_eq!(b.lookup(len), pol.decide(&r).strategy, "{op} {hint} {len}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn damaged_profiles_are_refused_with_a_reason() {
        let good = hand().to_toml();
        let cut = &good[..good.len() * 2 / 3];
        let e = Profile::parse(cut).unwrap_err();
        assert!(
            e.contains("truncated") || e.contains("unterminated") || e.contains("missing"),
            "{e}"
        );
        // Cut between cells: the count catches it.
        let between = &good[..good.rfind("[[cell]]").unwrap()];
        assert!(Profile::parse(between).unwrap_err().contains("truncated"));
        assert!(Profile::parse("format = 99\ncells = 0")
            .unwrap_err()
            .contains("format 99"));
        assert!(Profile::parse("\u{0}\u{1}garbage")
            .unwrap_err()
            .contains("line 1"));
        assert!(Profile::parse("").unwrap_err().contains("missing 'format'"));
        let bad = good.replacen("winner = \"avx2\"", "winner = \"clzero\"", 1);
        assert!(Profile::parse(&bad)
            .unwrap_err()
            .contains("not a copy strategy"));
        let bad = good.replacen("size = 4096", "size = \"big\"", 1);
        assert!(Profile::parse(&bad).unwrap_err().contains("integer"));
        let bad = good.replacen("avx2=71.00", "avx2=fast", 1);
        assert!(Profile::parse(&bad).unwrap_err().contains("rate"), "{bad}");
    }

    #[test]
    fn identity_keys_and_differences() {
        let a = identity();
        let mut b = identity();
        assert_eq!(a.key(), b.key());
        assert_eq!(a.difference(&b), None);
        assert!(a.key().starts_with("amd-19-1-1-"), "{}", a.key());
        b.features = "erms avx2".into();
        assert_ne!(a.key(), b.key());
        assert!(a.difference(&b).unwrap().starts_with("features"));
        let mut c = identity();
        c.cpus = 16;
        assert!(a.difference(&c).unwrap().contains("online CPUs"));
        assert!(Identity::this()
            .key()
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-'));
    }
}
