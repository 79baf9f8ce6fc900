//! A profile in words, for `bulkmem tune` and `bulkmem info`: its choices
//! as bands, each with why it was chosen where it was not simply the
//! fastest.

use super::choose::rules_choice;
use bulkmem::{Op, Strategy};
use bulkmem_policy::auto::{Cell, Profile, Shape};

/// The profile's choices as bands, one line per (op, shape):
/// `copy single     64+ avx2 (1.51x libc) | 16K+ rep-movsb ...`.
pub fn summary(p: &Profile) -> Vec<String> {
    let mut lines = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        for shape in Shape::ALL {
            let cells = p.cells_of(op, shape);
            if cells.is_empty() {
                continue;
            }
            let mut parts: Vec<String> = Vec::new();
            let mut last = None;
            for c in cells {
                if last == Some(c.choice) {
                    continue;
                }
                last = Some(c.choice);
                parts.push(format!(
                    "{}+ {}{}",
                    bulkmem_machine::units::format_bytes(c.size),
                    c.choice,
                    why(c)
                ));
            }
            lines.push(format!("{op} {:<9} {}", shape.name(), parts.join(" | ")));
        }
    }
    lines
}

fn why(c: &Cell) -> String {
    if c.choice == c.winner {
        match c.runner_up {
            Some(r) => format!(" ({:.2}x {r})", c.margin),
            None => String::new(),
        }
    } else if c.choice == rules_choice(c.op, c.shape, c.size) {
        format!(" (rules; {} won by little or not in both passes)", c.winner)
    } else if c.choice == Strategy::PerPage {
        format!(" ({} lost to per-page over both passes)", c.winner)
    } else {
        format!(" ({} won by little or not in both passes)", c.winner)
    }
}
