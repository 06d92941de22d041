//! The integration tests of this crate, as one binary: linking one binary instead of one
//! per `tests/<name>.rs` file keeps the test build short (`docs/testing.md`).
//! `tests/memory.rs` keeps a binary of its own: it installs a global allocator.

#[path = "../common/mod.rs"]
mod common;

mod clock;
mod concurrency;
mod config;
mod conformance;
mod cut_evidence;
mod direct;
mod durability;
mod fsync;
mod gaps;
mod group;
mod io_faults;
mod isolation;
mod overflow;
mod power_cut;
mod read_batches;
mod read_resume;
mod real_disk;
mod recovery;
mod retention;
mod rotation;
mod seal;
mod tail;
mod torn_pages;
