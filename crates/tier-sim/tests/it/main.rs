//! The integration tests of this crate, as one binary: linking one binary instead of one
//! per `tests/<name>.rs` file keeps the test build short (`docs/testing.md`).

mod conformance;
mod disk;
mod markers;
mod regressions;
mod replay;
mod warm;
