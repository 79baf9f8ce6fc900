//! What a process pays for bulkmem's lazy initialisation: the first
//! `bulkmem::copy` of a process (4 KiB unless told otherwise) against the
//! second, in microseconds. The first call learns the CPU (CPUID, the online
//! CPUs, the profile); it reads no topology (see `cpu::facts`).
//!
//!     cargo run --release -p bulkmem --example first_copy [bytes]
//!
//! Prints `first_us second_us`; run it many times (each run is one fresh
//! process) and take the median.

use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    let src = vec![0x5au8; n];
    let mut dst = vec![0u8; n];
    let mut again = vec![0u8; n];
    let t = Instant::now();
    bulkmem::copy(&mut dst, &src);
    let first = t.elapsed();
    let t = Instant::now();
    bulkmem::copy(&mut again, &src);
    let second = t.elapsed();
    assert!(dst == src && again == src, "the copy is wrong");
    println!(
        "{:.1} {:.1}",
        first.as_secs_f64() * 1e6,
        second.as_secs_f64() * 1e6
    );
}
