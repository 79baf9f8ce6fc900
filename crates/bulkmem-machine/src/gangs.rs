//! The one loop over a batch's spans, every batch path's: the calling
//! thread's `copy_batch`, the engine's chunks (unchecked and checked) and
//! the checked batches walk their spans with [`walk`]. Where the kernel has
//! a four-extent form (`kernels::gang`), four spans in a row of one length
//! go at once, with the next four's sources requested meanwhile; any other
//! span goes on its own, the next one's source requested first. Why four at
//! once: docs/measurements.md, "Where the 4 KiB time went".

#[cfg(target_arch = "x86_64")]
use crate::kernels::gang::GANG_PREFETCH;
#[cfg(target_arch = "x86_64")]
pub use crate::kernels::gang::{Gang, GANG};
use crate::kernels::prefetch_ahead;
use crate::plan::Span;

/// Four extents at once, where only x86-64 has kernels for them: never
/// made here, so `walk` takes every span alone.
#[cfg(not(target_arch = "x86_64"))]
pub enum Gang {}
/// How many extents a [`Gang`] holds.
#[cfg(not(target_arch = "x86_64"))]
pub const GANG: usize = 4;

/// Walks `spans` in order: `four` for each four in a row that make a
/// [`Gang`] (never where `four` is `None`: the kernel has no four-extent
/// form, or the caller wants one at a time), `one` for every other span,
/// after requesting the next span's first bytes. Neither touches memory
/// itself; the caller's closures copy.
pub fn walk<F: FnMut(&Gang, &[Span; GANG])>(
    spans: impl Iterator<Item = Span>,
    mut one: impl FnMut(&Span),
    four: Option<F>,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(four) = four {
        return in_gangs(spans, one, four);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = four;
    // One at a time, without the gangs' window, whose bookkeeping a kernel
    // with no four-extent form does not need.
    let mut spans = spans.peekable();
    while let Some(s) = spans.next() {
        if let Some(next) = spans.peek() {
            prefetch_ahead(next.src, next.len);
        }
        one(&s);
    }
}

/// [`walk`] with a four-extent form.
#[cfg(target_arch = "x86_64")]
fn in_gangs(
    mut spans: impl Iterator<Item = Span>,
    mut one: impl FnMut(&Span),
    mut four: impl FnMut(&Gang, &[Span; GANG]),
) {
    // The spans not yet copied, in order: this gang and the next.
    let mut window = [Span::EMPTY; 2 * GANG];
    let mut held = 0;
    loop {
        while held < window.len() {
            match spans.next() {
                Some(s) => {
                    window[held] = s;
                    held += 1;
                }
                None => break,
            }
        }
        if held == 0 {
            return;
        }
        let taken = if held >= GANG && fits(&window[..GANG]) {
            let these: [Span; GANG] = core::array::from_fn(|j| window[j]);
            four(&gang(&these, &window[GANG..held]), &these);
            GANG
        } else {
            if held > 1 {
                prefetch_ahead(window[1].src, window[1].len);
            }
            one(&window[0]);
            1
        };
        window.copy_within(taken..held, 0);
        held -= taken;
    }
}

/// The gang of `these`, requesting `next`'s sources if they are a whole
/// next gang.
#[cfg(target_arch = "x86_64")]
fn gang(these: &[Span; GANG], next: &[Span]) -> Gang {
    let requests = if next.len() == GANG {
        next.iter().map(|s| s.len).min().unwrap_or(0)
    } else {
        0
    };
    Gang {
        dst: these.map(|s| s.dst),
        src: these.map(|s| s.src),
        len: these[0].len,
        next: core::array::from_fn(|j| next.get(j).map_or(these[j].src, |s| s.src)),
        requests: requests.min(GANG_PREFETCH).min(these[0].len),
    }
}

/// Whether these spans make a gang: one length, as the loops need it.
#[cfg(target_arch = "x86_64")]
fn fits(spans: &[Span]) -> bool {
    let len = spans[0].len;
    spans.iter().all(|s| s.len == len) && Gang::fits(len, &core::array::from_fn(|j| spans[j].dst))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::plan::Extent;

    fn run(dst: usize, src: usize, len: usize) -> Extent {
        Extent::at(dst, src, len)
    }

    /// What `walk` did: `1` for a span alone, `4` for a gang, with the
    /// runs each covered and the gang's requests.
    fn walked(runs: &[Extent], spans: &[(usize, usize, usize)]) -> Vec<(usize, Vec<usize>, usize)> {
        let log = std::cell::RefCell::new(Vec::new());
        walk(
            spans
                .iter()
                .map(|&(i, from, to)| Span::of(i, runs[i], from, to)),
            |s| log.borrow_mut().push((1, vec![s.run], 0)),
            Some(|g: &Gang, s: &[Span; GANG]| {
                assert!(s.iter().zip(g.dst).all(|(s, d)| s.dst == d));
                assert!(s.iter().zip(g.src).all(|(s, x)| s.src == x));
                log.borrow_mut()
                    .push((4, s.iter().map(|s| s.run).collect(), g.requests))
            }),
        );
        log.into_inner()
    }

    #[test]
    fn four_of_one_length_on_lines_make_a_gang() {
        let page = |i: usize| run(0x10_0000 + i * 4096, 0x90_0000 + i * 4096, 4096);
        let runs: Vec<Extent> = (0..10).map(page).collect();
        let all: Vec<(usize, usize, usize)> = (0..10).map(|i| (i, 0, 4096)).collect();
        // Two gangs (the first requests the second's sources), then two
        // spans alone.
        assert_eq!(
            walked(&runs, &all),
            vec![
                (4, vec![0, 1, 2, 3], 4096),
                (4, vec![4, 5, 6, 7], 0),
                (1, vec![8], 0),
                (1, vec![9], 0),
            ]
        );
        // A span of another length breaks a gang: it goes alone, and the
        // four after it gang.
        let mut odd = all.clone();
        odd[1] = (1, 0, 2048);
        assert_eq!(
            walked(&runs, &odd[..6]),
            vec![(1, vec![0], 0), (1, vec![1], 0), (4, vec![2, 3, 4, 5], 0)]
        );
        // Off a line, or not whole lines: never a gang.
        let mut off = runs.clone();
        off[2].dst = off[2].dst.wrapping_add(32);
        assert!(walked(&off, &all[..4]).iter().all(|w| w.0 == 1));
        let short: Vec<(usize, usize, usize)> = (0..4).map(|i| (i, 0, 4000)).collect();
        assert!(walked(&runs, &short).iter().all(|w| w.0 == 1));
        // Spans starting inside their runs keep their offsets.
        let inner: Vec<(usize, usize, usize)> = (0..4).map(|i| (i, 1024, 2048)).collect();
        assert_eq!(walked(&runs, &inner), vec![(4, vec![0, 1, 2, 3], 0)]);
    }

    #[test]
    fn without_a_four_extent_form_every_span_goes_alone() {
        let page = |i: usize| run(0x10_0000 + i * 4096, 0x90_0000 + i * 4096, 4096);
        let runs: Vec<Extent> = (0..8).map(page).collect();
        let mut alone = Vec::new();
        walk(
            (0..8).map(|i| Span::of(i, runs[i], 0, 4096)),
            |s| alone.push(s.run),
            None::<fn(&Gang, &[Span; GANG])>,
        );
        assert_eq!(alone, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn extents_past_the_largest_gang_go_alone() {
        use crate::kernels::gang::GANG_MAX;
        let at =
            |i: usize, len: usize| run(0x1000_0000 + i * 2 * len, 0x9000_0000 + i * 2 * len, len);
        for (len, gang) in [(GANG_MAX, true), (GANG_MAX + 64, false), (2 << 20, false)] {
            let runs: Vec<Extent> = (0..4).map(|i| at(i, len)).collect();
            let all: Vec<(usize, usize, usize)> = (0..4).map(|i| (i, 0, len)).collect();
            assert_eq!(walked(&runs, &all)[0].0 == 4, gang, "{len}");
        }
    }

    #[test]
    fn requests_stop_at_a_page_and_at_the_gang() {
        let big = |i: usize| run(0x100_0000 + i * 65536, 0x900_0000 + i * 65536, 65536);
        let runs: Vec<Extent> = (0..8).map(big).collect();
        let all: Vec<(usize, usize, usize)> = (0..8).map(|i| (i, 0, 65536)).collect();
        assert_eq!(walked(&runs, &all)[0].2, GANG_PREFETCH);
        // Small extents request no more than themselves.
        let small: Vec<(usize, usize, usize)> = (0..8).map(|i| (i, 0, 1024)).collect();
        assert_eq!(walked(&runs, &small)[0].2, 1024);
    }
}
