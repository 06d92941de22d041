//! The integration tests of this crate that need no test binary of their own, as one
//! binary: each module was a `tests/<name>.rs` target, and linking one binary instead of
//! one per file keeps the test build short. The tests that keep their own binary (their
//! binary's name is what `cargo xtask test` reports them under, or it installs a global
//! allocator) stay beside this directory.

#[path = "../common/mod.rs"]
mod common;

mod confirm;
mod faults;
mod group;
mod lost_entries;
mod owner;
mod replicas;
mod warm;
