//! Which sizes a profile's cell covers: the sizes nearest it on a log
//! scale, except at the cache's edge, where a non-temporal choice covers
//! only what was measured to stream.

use super::Cell;

/// Where the cell of size `a` hands over to the next one, `b`: the power of
/// two at or above their geometric mean (for a power-of-two ladder, `b`
/// itself with x2 steps, the midpoint with x4), so single-call bands start
/// at powers of two and compile to a table (see `Bands`).
fn boundary(a: usize, b: usize) -> usize {
    let mean = ((a as f64) * (b as f64)).sqrt().ceil() as usize;
    mean.checked_next_power_of_two()
        .unwrap_or(mean)
        .min(b)
        .max(a + 1)
}

/// Where cell `a` hands over to the next, `b`: their [`boundary`], but
/// where `b` streams and `a` does not, `b`'s own size. Between the two lies
/// the cache's edge, and the costs of guessing wrong there are far apart:
/// streaming a size that still fits the cache lost 2.3x (a 32 MiB clear
/// read back, between a 16 MiB `libc` cell and a 64 MiB `avx512-nt` one,
/// on an Emerald Rapids VM: 0.43x), allocating one just past it about
/// 1.1x. So no size streams that was not measured to.
pub(super) fn edge(a: &Cell, b: &Cell) -> usize {
    if b.choice.is_non_temporal() && !a.choice.is_non_temporal() {
        b.size
    } else {
        boundary(a.size, b.size)
    }
}
