//! tierlog's deterministic simulation (`cargo xtask sim`): the real router, WAL and cold
//! tier, driven by a seeded random schedule of appends, reads, background work and
//! compound faults against in-process stand-ins, with a reference model checked after
//! every step. The design, the invariants and the bugs it found are described in
//! `docs/simulation.md`.
//!
//! - [`schedule`]: a deployment and a list of steps, generated from a seed.
//! - [`run`]: runs one schedule in simulated processes (one paused current-thread tokio
//!   runtime per process; a crash drops it) and checks the [`model`].
//! - [`warm`], [`cold`], [`disk`]: the stand-ins and fault injectors.
//! - [`shrink`]: drops steps of a failing schedule while it still fails.
//! - [`REGRESSION_SEEDS`]: seeds that found issue 15's cases on the old code; every run
//!   replays them first.

pub mod cold;
pub mod disk;
pub mod model;
pub mod rng;
pub mod run;
pub mod schedule;
pub mod shrink;
pub mod warm;

pub use model::Violation;
pub use run::{Outcome, Stats, run};
pub use schedule::Schedule;

/// Steps per schedule by default.
pub const DEFAULT_STEPS: u32 = 200;

/// Seeds that found a bug, with the case of issue 15 each showed on 3892a13 (see
/// `docs/simulation.md`, "Bugs found on 3892a13"). Every run replays them first.
pub const REGRESSION_SEEDS: &[(u64, &str)] = &[];
