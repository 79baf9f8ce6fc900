//! Environment overrides, in the spirit of glibc's tunables and Intel DTO's
//! variables, read once per process:
//!
//! * `BULKMEM_STRATEGY=NAME` forces `auto` to `NAME` for every operation
//!   that strategy implements (`avx2-nt` copies and clears;
//!   `rep-movsb` only copies). Per operation:
//!   `BULKMEM_STRATEGY=copy:rep-movsb,clear:clzero`.
//! * `BULKMEM_NT_THRESHOLD=BYTES` (suffixes K, M, G: powers of 1024): with
//!   hint `Auto`, a request whose batch total is at least this streams
//!   (non-temporal stores), anything smaller stays in the cache. `0` always
//!   streams. The profile or the rules still pick which primitive.
//! * `BULKMEM_PROFILE=FILE|off`: see [`super::load`].
//!
//! A name or value that cannot be used is never silently ignored: it is
//! printed once on stderr (`bulkmem: warning: ...`), listed in
//! [`Overrides::warnings`] (and `bulkmem info`), and otherwise ignored.

use std::sync::OnceLock;

use crate::machine::cpu::{self, Features};
use crate::strategy::{Op, Strategy};

/// The validated overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The strategy every copy is forced to (`BULKMEM_STRATEGY`); `None`:
    /// `auto` chooses. Only a strategy that copies and that this CPU can
    /// run ends up here.
    pub copy: Option<Strategy>,
    /// As `copy`, for clears.
    pub clear: Option<Strategy>,
    /// `BULKMEM_NT_THRESHOLD` in bytes: with hint `Auto`, batch totals at
    /// or above it stream, smaller ones stay in the cache. `None`: the
    /// profile or the rules decide.
    pub nt_threshold: Option<usize>,
    /// One line per unusable setting, naming the variable and the value.
    pub warnings: Vec<String>,
}

impl Overrides {
    /// No overrides.
    pub const NONE: Overrides = Overrides {
        copy: None,
        clear: None,
        nt_threshold: None,
        warnings: Vec::new(),
    };

    /// This process's, from the environment, once; warnings are printed on
    /// stderr the first time.
    pub fn from_env() -> &'static Overrides {
        static ENV: OnceLock<Overrides> = OnceLock::new();
        ENV.get_or_init(|| {
            let get = crate::machine::environment::var;
            let o = Overrides::parse(
                get("BULKMEM_STRATEGY").as_deref(),
                get("BULKMEM_NT_THRESHOLD").as_deref(),
                cpu::features(),
            );
            for w in &o.warnings {
                crate::machine::environment::warn(w);
            }
            o
        })
    }

    /// The overrides `strategy` and `nt_threshold` (the variables' values,
    /// if set) mean on a CPU with `features`.
    pub fn parse(
        strategy: Option<&str>,
        nt_threshold: Option<&str>,
        features: &Features,
    ) -> Overrides {
        let mut o = Overrides::default();
        if let Some(v) = strategy {
            o.parse_strategy(v, features);
        }
        if let Some(v) = nt_threshold {
            match crate::units::parse_bytes(v) {
                Ok(n) => o.nt_threshold = Some(n),
                Err(why) => o
                    .warnings
                    .push(format!("BULKMEM_NT_THRESHOLD: {why}; ignored")),
            }
        }
        o
    }

    fn parse_strategy(&mut self, value: &str, features: &Features) {
        let items: Vec<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.is_empty() {
            self.warnings
                .push("BULKMEM_STRATEGY is set but empty; ignored".to_string());
        }
        for item in items {
            let (ops, name) = match item.split_once(':') {
                Some((op, name)) => match op.trim().to_ascii_lowercase().as_str() {
                    "copy" => (&[Op::Copy][..], name),
                    "clear" => (&[Op::Clear][..], name),
                    other => {
                        self.warnings.push(format!(
                            "BULKMEM_STRATEGY: unknown operation '{other}' in '{item}' (expected copy: or clear:); ignored"
                        ));
                        continue;
                    }
                },
                None => (&[Op::Copy, Op::Clear][..], item),
            };
            let s: Strategy = match name.parse() {
                Ok(s) => s,
                Err(e) => {
                    self.warnings
                        .push(format!("BULKMEM_STRATEGY: {e}; ignored"));
                    continue;
                }
            };
            if s == Strategy::Auto {
                continue;
            }
            if let Some(needs) = s.missing_feature(features) {
                self.warnings.push(format!(
                    "BULKMEM_STRATEGY: {s} needs {needs}, which this CPU lacks; ignored"
                ));
                continue;
            }
            let mut used = false;
            for &op in ops {
                if s.supports(op) {
                    *self.slot(op) = Some(s);
                    used = true;
                }
            }
            if !used {
                let op = ops[0];
                self.warnings
                    .push(format!("BULKMEM_STRATEGY: {s} cannot {op}; ignored"));
            }
        }
    }

    fn slot(&mut self, op: Op) -> &mut Option<Strategy> {
        match op {
            Op::Copy => &mut self.copy,
            Op::Clear => &mut self.clear,
        }
    }

    /// The strategy forced for `op`, if any.
    #[inline]
    pub fn forced(&self, op: Op) -> Option<Strategy> {
        match op {
            Op::Copy => self.copy,
            Op::Clear => self.clear,
        }
    }

    /// Whether anything is overridden.
    pub fn any(&self) -> bool {
        self.copy.is_some() || self.clear.is_some() || self.nt_threshold.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avx2() -> Features {
        Features {
            avx2: true,
            ..Features::default()
        }
    }

    #[test]
    fn one_name_forces_every_op_it_implements() {
        let o = Overrides::parse(Some("avx2-nt"), None, &avx2());
        assert_eq!(
            (o.copy, o.clear),
            (Some(Strategy::Avx2Nt), Some(Strategy::Avx2Nt))
        );
        assert!(o.warnings.is_empty());
        let o = Overrides::parse(Some("rep-movsb"), None, &avx2());
        assert_eq!((o.copy, o.clear), (Some(Strategy::RepMovsb), None));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn per_op_forms() {
        let o = Overrides::parse(Some("copy:libc, clear:rep-stosq"), None, &avx2());
        assert_eq!(
            (o.copy, o.clear),
            (Some(Strategy::Libc), Some(Strategy::RepStosq))
        );
        let o = Overrides::parse(Some("clear:rep-movsb"), None, &avx2());
        assert_eq!(o.clear, None);
        assert!(o.warnings[0].contains("cannot clear"), "{:?}", o.warnings);
    }

    #[test]
    fn bad_settings_warn_and_are_ignored() {
        let o = Overrides::parse(Some("avx3"), Some("lots"), &avx2());
        assert_eq!(
            o,
            Overrides {
                warnings: o.warnings.clone(),
                ..Overrides::default()
            }
        );
        assert_eq!(o.warnings.len(), 2);
        assert!(o.warnings[0].contains("avx3") && o.warnings[0].contains("avx2-nt"));
        assert!(o.warnings[1].contains("BULKMEM_NT_THRESHOLD") && o.warnings[1].contains("lots"));
        let o = Overrides::parse(Some("clzero"), None, &avx2());
        assert_eq!(o.clear, None);
        assert!(o.warnings[0].contains("needs clzero"), "{:?}", o.warnings);
        let o = Overrides::parse(Some("move:avx2"), None, &avx2());
        assert!(o.warnings[0].contains("'move'"), "{:?}", o.warnings);
        assert!(!Overrides::parse(Some(" "), None, &avx2())
            .warnings
            .is_empty());
    }

    #[test]
    fn thresholds_take_suffixes() {
        let t = |s| Overrides::parse(None, Some(s), &avx2()).nt_threshold;
        assert_eq!(t("4096"), Some(4096));
        assert_eq!(t("512K"), Some(512 << 10));
        assert_eq!(t("64m"), Some(64 << 20));
        assert_eq!(t("1GiB"), Some(1 << 30));
        assert_eq!(t("0"), Some(0));
        assert_eq!(t("-1"), None);
        assert_eq!(t("12Q"), None);
        assert_eq!(t("99999999999999999999G"), None);
    }
}
