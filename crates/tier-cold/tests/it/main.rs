//! The integration tests of this crate, as one binary: linking one binary instead of one
//! per `tests/<name>.rs` file keeps the test build short. nextest names the binary
//! `tier-cold::it` and each test by its module path; `cargo xtask test`'s backends matrix
//! counts the `conformance`, `encryption`, `azure` and `gcs` modules (xtask's
//! `backends.rs`).

#[path = "../common/mod.rs"]
mod common;

mod ambiguous;
mod azure;
mod conformance;
mod encryption;
mod export;
mod faults;
mod gaps;
mod gcs;
mod owners;
mod read_ahead;
mod reads;
mod timestamps;
mod topic_marker;
