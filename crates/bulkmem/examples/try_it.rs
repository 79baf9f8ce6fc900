use bulkmem::{Engine, Hint};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (src, mut dst) = (vec![1u8; 64 << 20], vec![0u8; 64 << 20]);
    bulkmem::copy(&mut dst, &src); // auto: the primitive for this CPU and size
    bulkmem::copy_hint(&mut dst, &src, Hint::Stream); // write-once data: non-temporal, fenced
    let engine = Engine::new()?; // workers placed across cache domains
    let (a, b) = dst.split_at_mut(32 << 20);
    engine.copy_batch(&mut [(a, &src[..32 << 20]), (b, &src[32 << 20..])])?;
    assert!(dst == src, "the copies differ from the source");
    println!("copied 64 MiB three ways: single call, streamed, engine batch");
    Ok(())
}
