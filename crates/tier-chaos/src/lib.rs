//! tierlog's reliability runner (`cargo xtask chaos`): scenarios that inject faults into
//! real processes and servers — SIGKILLed producers, a deleted WAL directory, flipped and
//! truncated bytes, bad input — and check that every acknowledged record survives exactly
//! once, at its offset, with its payload.
//!
//! - [`payload`]: self-describing record payloads (writer, sequence, CRC).
//! - [`ack`]: the acknowledgement log a producer prints.
//! - [`process`]: spawning, killing and stopping the `chaos-producer` binary.
//! - [`deploy`]: the four deployments, their servers and store configuration.
//! - [`verify`]: reading a topic back and checking it against the acknowledgements.
//! - [`scenarios`]: the scenarios themselves.
//! - [`runner`]: runs a whole plan (quick or full) and collects [`ScenarioResult`]s.
//!
//! The guarantees and the run that shows each are written in `docs/reliability.md`.

// Tooling: scenarios wait for real processes and servers, in real time.
#![allow(clippy::disallowed_methods)]

pub mod ack;
pub mod deploy;
mod error;
pub mod payload;
pub mod process;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenarios;
pub mod verify;

pub use error::ChaosError;
pub use report::{ScenarioResult, render_table};
