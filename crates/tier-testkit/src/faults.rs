//! [`FaultyTier`]: a wrapper that forwards every [`Tier`] method to an inner tier and
//! injects `Unavailable` failures and latency on command.
//!
//! Faults are set at runtime through atomics, so a test can flip them while other tasks
//! use the tier. Random failures use a seeded generator: the same seed and the same call
//! order give the same failures. [`hold`](FaultyTier::hold) makes every call on a topic
//! wait until [`release`](FaultyTier::release)d — a slow backend for one topic, with a
//! signal ([`wait_held`](FaultyTier::wait_held)) instead of a sleep.
//! [`fail_topic`](FaultyTier::fail_topic) makes every call on one topic fail while the
//! others' go through: one topic's backend unreachable.

use std::{
    sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering},
    time::Duration,
};

use async_trait::async_trait;
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};

/// A [`Tier`] method, to choose which calls faults apply to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`Tier::range`].
    Range,
    /// [`Tier::append`].
    Append,
    /// [`Tier::read_batches`], and so every read: [`TierExt::read`](tier_core::TierExt::read)
    /// is built on it (one call or more per record read).
    Read,
    /// [`Tier::offset_for_timestamp`].
    OffsetForTimestamp,
    /// The topic marker (`WarmBackend::record_topic` and `topic_recorded`). Not among
    /// the methods faults apply to by default: only when [`target`](FaultyTier::target)ed.
    Marker,
}

/// The [`Op`]s faults apply to by default: the [`Tier`] methods.
const DEFAULT_TARGETS: u8 = 0x0f;

impl Op {
    fn bit(self) -> u8 {
        match self {
            Op::Range => 1,
            Op::Append => 2,
            Op::Read => 4,
            Op::OffsetForTimestamp => 8,
            Op::Marker => 16,
        }
    }
}

/// Parts per million, the resolution of [`FaultyTier::fail_fraction`].
const PPM: u32 = 1_000_000;

/// Wraps a tier and injects faults; see the [module docs](self).
#[derive(Debug)]
pub struct FaultyTier<T> {
    inner: T,
    /// Calls still to fail outright.
    fail_next: AtomicU64,
    /// Targeted calls still to let through before `fail_next` applies.
    pass_first: AtomicU64,
    /// Probability of failing a call, in parts per million.
    fail_ppm: AtomicU32,
    /// Failed appends are first forwarded to the inner tier (the write lands; the
    /// caller sees `Unavailable`, like a timed-out network write).
    fail_after_append: AtomicBool,
    /// Bit set of [`Op`]s the faults apply to.
    targets: AtomicU8,
    latency_us: AtomicU64,
    rng: AtomicU64,
    calls: AtomicU64,
    injected: AtomicU64,
    /// The held topics and the calls waiting on them.
    gate: tokio::sync::watch::Sender<(Vec<TopicName>, usize)>,
    /// Topics every call on which fails.
    failing: parking_lot::Mutex<Vec<TopicName>>,
}

impl<T: Tier> FaultyTier<T> {
    /// Wraps `inner` with no fault set and random seed 0.
    pub fn new(inner: T) -> Self {
        Self::with_seed(inner, 0)
    }

    /// Wraps `inner`; [`fail_fraction`](Self::fail_fraction) draws from a generator
    /// seeded with `seed`.
    pub fn with_seed(inner: T, seed: u64) -> Self {
        Self {
            inner,
            fail_next: AtomicU64::new(0),
            pass_first: AtomicU64::new(0),
            fail_ppm: AtomicU32::new(0),
            fail_after_append: AtomicBool::new(false),
            targets: AtomicU8::new(DEFAULT_TARGETS),
            latency_us: AtomicU64::new(0),
            rng: AtomicU64::new(seed),
            calls: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            gate: tokio::sync::watch::Sender::new((Vec::new(), 0)),
            failing: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// The wrapped tier.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Unwraps the inner tier.
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// Fails the next `n` targeted calls with `Unavailable` (replacing any count left).
    pub fn fail_next(&self, n: u64) {
        self.fail_next_after(0, n);
    }

    /// Lets the next `pass` targeted calls through, then fails the `n` after them with
    /// `Unavailable` (replacing any counts left): a fault aimed at one call of several
    /// already on their way.
    pub fn fail_next_after(&self, pass: u64, n: u64) {
        self.pass_first.store(pass, Ordering::SeqCst);
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// Fails each targeted call with probability `fraction` (clamped to `0.0..=1.0`,
    /// resolution one in a million).
    pub fn fail_fraction(&self, fraction: f64) {
        let ppm = (fraction.clamp(0.0, 1.0) * f64::from(PPM)).round() as u32;
        self.fail_ppm.store(ppm, Ordering::SeqCst);
    }

    /// When `true`, a failed append is forwarded to the inner tier first, so the batch
    /// lands although the caller sees `Unavailable` (invariant 4's "cannot tell" case).
    pub fn fail_after_append(&self, on: bool) {
        self.fail_after_append.store(on, Ordering::SeqCst);
    }

    /// Delays every targeted call by `latency` before forwarding it.
    pub fn set_latency(&self, latency: Duration) {
        self.latency_us.store(latency.as_micros().try_into().unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Restricts faults and latency to `ops` (the [`Tier`] methods by default).
    pub fn target(&self, ops: &[Op]) {
        let bits = ops.iter().fold(0, |acc, op| acc | op.bit());
        self.targets.store(bits, Ordering::SeqCst);
    }

    /// Fails every call on `topic` with `Unavailable` (whatever the targets) until
    /// [`clear`](Self::clear).
    pub fn fail_topic(&self, topic: &TopicName) {
        self.failing.lock().push(topic.clone());
    }

    /// Removes every fault and the latency, and targets the [`Tier`] methods again.
    pub fn clear(&self) {
        self.failing.lock().clear();
        self.fail_next.store(0, Ordering::SeqCst);
        self.pass_first.store(0, Ordering::SeqCst);
        self.fail_ppm.store(0, Ordering::SeqCst);
        self.fail_after_append.store(false, Ordering::SeqCst);
        self.latency_us.store(0, Ordering::SeqCst);
        self.targets.store(DEFAULT_TARGETS, Ordering::SeqCst);
    }

    /// Makes every call on `topic` wait (before any fault applies) until
    /// [`release`](Self::release).
    pub fn hold(&self, topic: &TopicName) {
        self.gate.send_modify(|(held, _)| held.push(topic.clone()));
    }

    /// Lets the calls on `topic` go on, the waiting ones included.
    pub fn release(&self, topic: &TopicName) {
        self.gate.send_modify(|(held, _)| held.retain(|t| t != topic));
    }

    /// Waits until at least `calls` calls are waiting on held topics.
    pub async fn wait_held(&self, calls: usize) {
        let _ = self.gate.subscribe().wait_for(|(_, waiting)| *waiting >= calls).await;
    }

    /// Waits while `topic` is held; then true when the call fails: its topic is failing,
    /// or [`before`](Self::before) says so.
    pub(crate) async fn held_or_failing(&self, topic: &TopicName, op: Op) -> bool {
        let mut gate = self.gate.subscribe();
        if gate.borrow().0.contains(topic) {
            self.gate.send_modify(|(_, waiting)| *waiting += 1);
            let _ = gate.wait_for(|(held, _)| !held.contains(topic)).await;
            self.gate.send_modify(|(_, waiting)| *waiting -= 1);
        }
        if self.failing.lock().contains(topic) {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.injected.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        self.before(op).await
    }

    /// Calls made through the wrapper so far (all methods but `kind`).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Failures injected so far.
    pub fn injected_failures(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Applies latency, then decides whether this call fails.
    async fn before(&self, op: Op) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.targets.load(Ordering::SeqCst) & op.bit() == 0 {
            return false;
        }
        let latency = self.latency_us.load(Ordering::SeqCst);
        if latency > 0 {
            // The injected fault itself, not synchronisation.
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        let passed =
            self.pass_first.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if passed {
            return false;
        }
        let counted =
            self.fail_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let fail = counted || {
            let ppm = self.fail_ppm.load(Ordering::SeqCst);
            ppm > 0 && (self.next_random() % u64::from(PPM)) < u64::from(ppm)
        };
        if fail {
            self.injected.fetch_add(1, Ordering::SeqCst);
        }
        fail
    }

    /// splitmix64 over an atomic state: deterministic for a given seed and call order.
    fn next_random(&self) -> u64 {
        let state =
            self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::SeqCst).wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn injected_error(&self, topic: &TopicName, op: Op) -> TierError {
        TierError::unavailable(
            ErrorContext::tier(self.inner.kind()).topic(topic),
            format!("fault injected by FaultyTier into {op:?}"),
        )
    }
}

#[async_trait]
impl<T: Tier> Tier for FaultyTier<T> {
    fn kind(&self) -> TierKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        self.inner.capabilities()
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        if self.held_or_failing(topic, Op::Range).await {
            return Err(self.injected_error(topic, Op::Range));
        }
        self.inner.range(topic).await
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        if self.held_or_failing(topic, Op::Append).await {
            if self.fail_after_append.load(Ordering::SeqCst) {
                // The write's own outcome is hidden from the caller, as a lost reply would.
                let _ = self.inner.append(topic, batch).await;
            }
            let mut err = self.injected_error(topic, Op::Append);
            err.context_mut().offset = Some(base);
            return Err(err);
        }
        self.inner.append(topic, batch).await
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        if self.held_or_failing(topic, Op::Read).await {
            let mut err = self.injected_error(topic, Op::Read);
            err.context_mut().offset = Some(from);
            return Err(err);
        }
        self.inner.read_batches(topic, from, to, max_bytes).await
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        if self.held_or_failing(topic, Op::OffsetForTimestamp).await {
            return Err(self.injected_error(topic, Op::OffsetForTimestamp));
        }
        self.inner.offset_for_timestamp(topic, timestamp).await
    }
}
