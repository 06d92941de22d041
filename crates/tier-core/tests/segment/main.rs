//! Tests of the segment format: golden bytes, the v1 fixture, reads and lookups against
//! a brute-force model, corruption and truncation, recovery, and ranged reads.

// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod corruption;
mod fixture;
mod golden;
mod props;
mod ranged;
mod reader;
mod recovery;
mod resume;
