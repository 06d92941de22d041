//! The conformance suite: plain async functions that check a [`Tier`] against the
//! numbered invariants of its contract (in `tier_core::Tier`'s documentation).
//!
//! Every backend's tests call [`run_all`] against a real instance — and, for a tier in
//! the router's warm or cold position, [`warm_backend`] or [`cold_backend`] (the position
//! traits' contracts); each check is also
//! public so a failing one can be run alone. Checks panic on the first violation with a
//! message naming the check and the invariant, e.g.
//! `conformance check read_bounds (invariant 6) failed on memory tier: …`.
//! Each check writes to its own fresh topic (from [`SuiteConfig::fresh_topic`]), so the
//! suite can run against a server other tests share.
//!
//! The suite borrows the tier (`&dyn Tier`), so its concurrency check interleaves
//! readers and a writer as futures of one task rather than spawning tasks.

mod append;
mod data;
mod position;
mod read;

use std::{
    fmt::Debug,
    sync::atomic::{AtomicU64, Ordering},
};

use tier_core::{ErrorKind, Tier, TierError, TopicName};

pub use append::{
    check_append_read_round_trip, check_errors_carry_context, check_first_append_at_nonzero_base,
    check_idempotent_and_fenced_append, check_range_after_appends, check_wrong_base_offset_is_rejected,
};
pub use data::{batch_of, sample_records};
pub use position::{
    check_cold_batches_bounds, check_cold_gap_and_continuation, check_cold_store_segment,
    check_cold_topic_marker, check_warm_append_group, check_warm_batches_from, check_warm_restart_at,
    check_warm_topic_marker, check_warm_trim_before, cold_backend, warm_backend,
};
pub use read::{
    check_concurrent_reads_during_appends, check_read_batches, check_read_bounds, check_read_limits,
    check_reads_span_many_batches, check_timestamp_lookup,
};

/// How the suite should use the tier under test. What the tier promises it reports
/// itself ([`Tier::capabilities`]); the suite checks that promise.
#[derive(Clone, Debug)]
pub struct SuiteConfig {
    /// Largest number of records the suite puts in one batch.
    pub max_batch_records: usize,
    /// How many batches the many-batch read check appends (keep it lower for tiers
    /// where an append is slow, like one object per batch).
    pub many_batches: usize,
    /// Prefix of every topic the suite creates; make it unique per run when the
    /// backend is shared (e.g. `SharedValkey::key_prefix`).
    pub topic_prefix: String,
}

impl SuiteConfig {
    /// 200 many-batch appends, batches of up to 64 records, and topics named
    /// `<topic_prefix><check>-<n>`.
    pub fn new(topic_prefix: impl Into<String>) -> Self {
        Self { max_batch_records: 64, many_batches: 200, topic_prefix: topic_prefix.into() }
    }

    /// A topic no other check of this process has used: `<prefix><name>-<n>`.
    ///
    /// # Panics
    /// If the prefix makes the name invalid (a bug in the caller's setup).
    pub fn fresh_topic(&self, name: &str) -> TopicName {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let full = format!("{}{name}-{n}", self.topic_prefix);
        TopicName::new(&full)
            .unwrap_or_else(|e| panic!("conformance: topic prefix makes an invalid name: {e}"))
    }
}

/// Runs every check, in order, panicking on the first violation.
pub async fn run_all(tier: &dyn Tier, caps: &SuiteConfig) {
    check_append_read_round_trip(tier, caps).await;
    check_range_after_appends(tier, caps).await;
    check_wrong_base_offset_is_rejected(tier, caps).await;
    check_first_append_at_nonzero_base(tier, caps).await;
    check_read_bounds(tier, caps).await;
    check_read_batches(tier, caps).await;
    check_read_limits(tier, caps).await;
    check_reads_span_many_batches(tier, caps).await;
    check_timestamp_lookup(tier, caps).await;
    check_concurrent_reads_during_appends(tier, caps).await;
    check_idempotent_and_fenced_append(tier, caps).await;
    check_errors_carry_context(tier, caps).await;
}

/// One running check: names itself in every failure message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check<'a> {
    name: &'static str,
    tier: &'a dyn Tier,
}

impl<'a> Check<'a> {
    pub(crate) fn new(name: &'static str, tier: &'a dyn Tier) -> Self {
        Self { name, tier }
    }

    pub(crate) fn fail(&self, invariant: u8, message: impl std::fmt::Display) -> ! {
        panic!(
            "conformance check {} (invariant {invariant}) failed on {} tier: {message}",
            self.name,
            self.tier.kind()
        )
    }

    /// The value of an operation that must succeed.
    pub(crate) fn ok<T>(&self, invariant: u8, what: &str, result: Result<T, TierError>) -> T {
        result.unwrap_or_else(|e| self.fail(invariant, format_args!("{what}: unexpected error: {e}")))
    }

    /// The error of an operation that must fail with one of `kinds`.
    pub(crate) fn err<T: Debug>(
        &self,
        invariant: u8,
        what: &str,
        kinds: &[ErrorKind],
        result: Result<T, TierError>,
    ) -> TierError {
        match result {
            Ok(v) => self.fail(invariant, format_args!("{what}: expected a {kinds:?} error, got Ok({v:?})")),
            Err(e) if kinds.contains(&e.kind()) => e,
            Err(e) => self
                .fail(invariant, format_args!("{what}: expected a {kinds:?} error, got {:?}: {e}", e.kind())),
        }
    }

    pub(crate) fn eq<T: PartialEq + Debug>(&self, invariant: u8, what: &str, got: T, want: T) {
        if got != want {
            self.fail(invariant, format_args!("{what}: got {got:?}, want {want:?}"));
        }
    }

    /// Compares records field by field, reporting the first difference.
    pub(crate) fn records(
        &self,
        invariant: u8,
        what: &str,
        got: &[tier_core::Record],
        want: &[tier_core::Record],
    ) {
        if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
            self.fail(
                invariant,
                format_args!("{what}: record {i} differs: got {:?}, want {:?}", got[i], want[i]),
            );
        }
        if got.len() != want.len() {
            let offsets = |r: &[tier_core::Record]| r.first().map(|f| f.offset)..r.last().map(|l| l.offset);
            self.fail(
                invariant,
                format_args!(
                    "{what}: got {} records ({:?}), want {} ({:?})",
                    got.len(),
                    offsets(got),
                    want.len(),
                    offsets(want)
                ),
            );
        }
    }
}
