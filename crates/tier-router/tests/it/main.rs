//! The integration tests of this crate that need no test binary of their own, as one
//! binary: each module was a `tests/<name>.rs` target, and linking one binary instead of
//! one per file keeps the test build short. The tests that keep their own binary (their
//! binary's name is what `cargo xtask test` reports them under, or it installs a global
//! allocator) stay beside this directory.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod backends;
mod batch_reader;
mod clock;
mod compound;
mod config;
mod conformance;
mod cut_evidence;
mod damaged_reads;
mod direct_path;
mod errors;
mod existing_topic;
mod maintenance;
mod metrics;
mod ownership;
mod process_kill;
mod state_dir;
mod topic_isolation;
mod torn_point;
mod wal_damage;
mod warm_failures;
mod warm_went_back;
mod write_path;
