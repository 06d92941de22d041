//! Test support for tierlog tiers.
//!
//! - [`servers`]: finds, starts and stops real Valkey and S3 (moto) servers for tests.
//! - [`memory`]: [`MemoryTier`], an in-memory [`Tier`](tier_core::Tier) and the
//!   router's fast test double.
//! - [`conformance`]: the suite every `Tier` implementation runs to prove it honours
//!   the trait's contract.
//! - [`faults`]: [`FaultyTier`], a wrapper that injects failures and latency.
//! - [`loopfs`]: [`LoopFs`](loopfs::LoopFs), a real ext4 file system on a loop device
//!   whose backing store can fill up, for real disk-failure tests.

pub mod conformance;
pub mod faults;
pub mod loopfs;
pub mod memory;
mod position;
pub mod servers;

pub use conformance::{SuiteConfig, run_all};
pub use faults::FaultyTier;
pub use memory::MemoryTier;
