//! Double buffering with an asynchronous batch: while the caller processes
//! block N in one buffer, the engine copies block N+1 into the other.
//!
//! Run with `cargo run --release -p bulkmem --example double_buffer`.

use std::time::Instant;

use bulkmem::{Engine, Extent, Ticket};

const BLOCK: usize = 8 << 20;
const BLOCKS: usize = 16;

/// The "processing": a checksum that reads every byte of the block.
fn process(block: &[u8]) -> u64 {
    block.chunks_exact(8).fold(0u64, |h, w| {
        (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x100_0000_01B3)
    })
}

/// Starts copying block `n` of `input` into `buf`.
fn fetch<'e>(engine: &'e Engine, input: &[u8], n: usize, buf: &mut [u8]) -> Ticket<'e> {
    let ext = [Extent {
        dst: buf.as_mut_ptr(),
        src: input[n * BLOCK..].as_ptr(),
        len: BLOCK,
    }];
    // SAFETY: `input` and both buffers outlive every ticket (each is waited
    // on before its buffer is read, and all before `main` returns), and the
    // loop below never touches a buffer while a copy into it is in flight.
    unsafe { engine.submit_copy(&ext, None) }.expect("a valid batch")
}

fn main() -> Result<(), bulkmem::Error> {
    let engine = Engine::builder().threads(1).build()?;
    let input: Vec<u8> = (0..BLOCK * BLOCKS)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    let mut bufs = [vec![0u8; BLOCK], vec![0u8; BLOCK]];

    let start = Instant::now();
    let mut sum = 0u64;
    let mut pending = Some(fetch(&engine, &input, 0, &mut bufs[0]));
    for n in 0..BLOCKS {
        // Block n has arrived; start block n+1 into the other buffer.
        pending.take().expect("a copy in flight").wait()?;
        let (now, next) = match n % 2 {
            0 => {
                let (a, b) = bufs.split_at_mut(1);
                (&a[0], &mut b[0])
            }
            _ => {
                let (a, b) = bufs.split_at_mut(1);
                (&b[0], &mut a[0])
            }
        };
        if n + 1 < BLOCKS {
            pending = Some(fetch(&engine, &input, n + 1, next));
        }
        sum ^= process(now).rotate_left(n as u32);
    }
    let took = start.elapsed();

    let direct = input
        .chunks(BLOCK)
        .enumerate()
        .fold(0u64, |s, (n, b)| s ^ process(b).rotate_left(n as u32));
    assert_eq!(sum, direct, "the double-buffered pass saw every block");
    println!(
        "processed {} blocks of {} MiB in {:.1} ms, copying each next block meanwhile (checksum {sum:#x})",
        BLOCKS,
        BLOCK >> 20,
        took.as_secs_f64() * 1e3
    );
    Ok(())
}
