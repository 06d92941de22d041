//! The integration tests of this crate, as one binary: linking one binary instead of one
//! per `tests/<name>.rs` file keeps the test build short. nextest names the binary
//! `tier-warm::it` and each test by its module path; `cargo xtask test`'s backends matrix
//! counts the `conformance`, `sentinel`, `cluster` and `tls` modules (xtask's
//! `backends.rs`).

#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod confirm;
mod conformance;
mod faults;
mod group;
mod lost_entries;
mod owner;
mod replicas;
mod sentinel;
mod tls;
mod warm;
