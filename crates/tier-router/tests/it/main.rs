//! The integration tests of this crate, as one binary: linking one binary instead of one
//! per `tests/<name>.rs` file keeps the test build short. nextest names the binary
//! `tier-router::it` and each test by its module path; `cargo xtask test` reads the
//! behavioural suite's deployments from `suite::<deployment>::<test>`, and its backends
//! matrix from the `suite`, `sentinel` and `sentinel_behind` modules (xtask's
//! `backends.rs`).

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
mod own_claims;
mod ownership;
mod process_kill;
mod sentinel;
mod sentinel_behind;
mod state_dir;
mod suite;
mod topic_isolation;
mod torn_point;
mod wal_damage;
mod warm_failures;
mod warm_went_back;
mod write_path;
