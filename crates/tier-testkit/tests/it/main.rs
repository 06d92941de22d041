//! The integration tests of this crate that need no test binary of their own, as one
//! binary: each module was a `tests/<name>.rs` target, and linking one binary instead of
//! one per file keeps the test build short. The tests that keep their own binary (their
//! binary's name is what `cargo xtask test` reports them under, or it installs a global
//! allocator) stay beside this directory.

mod faults;
mod memory;
mod position;
mod servers;
