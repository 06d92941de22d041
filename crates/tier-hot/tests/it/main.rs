//! The integration tests of this crate that need no test binary of their own, as one
//! binary: each module was a `tests/<name>.rs` target, and linking one binary instead of
//! one per file keeps the test build short. The tests that keep their own binary (their
//! binary's name is what `cargo xtask test` reports them under, or it installs a global
//! allocator) stay beside this directory.

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
