//! The C interface of bulkmem (`include/bulkmem.h`): libbulkmem.so.0 and
//! libbulkmem.a. Every function is documented in the header; this crate
//! only checks C arguments, calls the Rust library, and maps its errors to
//! negative errnos ([`status`]). No panic unwinds into C.

#![allow(clippy::missing_safety_doc)] // the contracts are in bulkmem.h

mod batch;
#[cfg(target_arch = "x86_64")]
mod compact;
mod exports;
mod ext;
mod fill;
mod messages;
mod mover;
mod numa;
mod single;
mod sized;
mod status;
mod structs;
mod ticket;
mod version;
