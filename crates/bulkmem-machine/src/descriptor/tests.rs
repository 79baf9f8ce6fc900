// Every store that bypasses the cache is fenced, checked in the machine
// code of each row's kernels (and the fills and checked routines).
#[cfg(target_arch = "x86_64")]
mod fences;

use super::*;

#[test]
fn the_op_lists_hold_exactly_the_rows_with_those_kernels() {
    for d in ROWS {
        for op in [Op::Copy, Op::Clear] {
            let (list, checked): (&[Strategy], &[Strategy]) = match op {
                Op::Copy => (&COPY, &CHECKED_COPY),
                Op::Clear => (&CLEAR, &CHECKED_CLEAR),
            };
            assert_eq!(
                list.contains(&d.strategy),
                d.implements(op),
                "{} {op}",
                d.name
            );
            assert_eq!(
                checked.contains(&d.strategy),
                d.checked(op),
                "{} {op}",
                d.name
            );
        }
    }
    assert_eq!(ALL.len(), ROWS.len());
}

#[test]
fn stand_ins_end_in_a_checked_routine_every_x86_64_runs() {
    for d in ROWS {
        for op in [Op::Copy, Op::Clear] {
            let list = d.stand_ins(op);
            let last = *list.last().unwrap_or_else(|| panic!("{} {op}", d.name));
            assert!(row(last).checked(op), "{} {op}: {last}", d.name);
            assert!(row(last).needs.is_empty(), "{} {op}", d.name);
            for s in list {
                assert!(row(*s).checked(op), "{} {op}: {s} is not checked", d.name);
            }
        }
    }
}

#[test]
fn non_temporal_rows_have_unfenced_kernels() {
    for d in ROWS {
        let kernels = [
            d.copy
                .as_ref()
                .map(|k| k.fenced as usize != k.unfenced as usize),
            d.clear
                .as_ref()
                .map(|k| k.fenced as usize != k.unfenced as usize),
        ];
        for differs in kernels.into_iter().flatten() {
            assert_eq!(differs, d.non_temporal, "{}", d.name);
        }
    }
}
