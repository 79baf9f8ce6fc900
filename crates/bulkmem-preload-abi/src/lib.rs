//! What the preload's two stages share: the interface between them
//! ([`abi`]: the tables each gives the other, the per-thread state, the
//! names and constants), and the C library's declarations and direct
//! system calls ([`sys`]) the loader makes without the `libc` crate and
//! the engine makes too (the small ones `#[inline]`, as they were inlined
//! when each stage compiled its own copy). `no_std`, without
//! dependencies: the loader is a `no_std` library built with
//! `-C panic=abort`, and compiles this crate the same way
//! (crates/bulkmem-preload-engine/build.rs).

#![no_std]

pub mod abi;
pub mod sys;
