//! `bulkmem info`: what bulkmem sees on this machine and what `auto` would
//! do with it.
//!
//! Gathering the facts is `facts.rs` (where the rules start streaming,
//! `streams.rs`), the text form `text.rs`; the JSON form is the facts
//! serialised.

mod facts;
mod streams;
mod text;

pub use text::text;

/// Sizes `info` shows `auto`'s choice for, as single calls.
const SIZES: &[usize] = &[64, 4096, 64 << 10, 2 << 20, 32 << 20, 256 << 20, 1 << 30];

pub fn json() -> String {
    serde_json::to_string_pretty(&facts::gather()).expect("info serialises")
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub fn cmd(a: InfoArgs) -> Result<(), bulkmem_bench::cli::Failure> {
    if a.json {
        bulkmem_bench::out::print(&(json() + "\n"))
    } else {
        bulkmem_bench::out::print(&text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem::Strategy;

    #[test]
    fn json_lists_every_strategy_and_a_batch_choice() {
        let v: serde_json::Value = serde_json::from_str(&json()).unwrap();
        let n = v["strategies"].as_array().unwrap().len();
        assert_eq!(n, Strategy::COPY.len() + Strategy::CLEAR.len());
        let batch = v["auto"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["runs"] == 128);
        assert!(batch);
        assert!(v["machine"]["llc_bytes"].as_u64().unwrap() > 0);
    }

    #[test]
    fn text_names_the_cpu_and_every_strategy() {
        let t = text();
        assert!(t.contains("cpu:") && t.contains("auto would choose"), "{t}");
        for s in Strategy::COPY.iter().chain(Strategy::CLEAR) {
            assert!(t.contains(s.name()), "{} missing", s.name());
        }
    }
}
