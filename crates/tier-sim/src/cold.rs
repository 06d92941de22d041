//! The cold tier of a simulated deployment: the real [`ColdTier`] over an in-memory object
//! store (`object_store::memory::InMemory`) behind tier-cold's [`FaultyStore`], which
//! injects request failures and latency. The in-memory store outlives every simulated
//! process (it is the bucket); each process opens a fresh `ColdTier` over it.
//!
//! [`DefaultsCold`] is the second shape of cold backend the simulation drives: a wrapper
//! that forwards only the required [`Tier`] methods and `store_segment`, leaving
//! `record_gap`, `records_from` and `record_batches_from` to [`ColdBackend`]'s default
//! bodies — the shape of the CLI's metered wrapper (`tierlog/src/metered.rs`, private to
//! the binary) and of any third-party backend that relies on the defaults.

use std::path::Path as FsPath;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tier_cold::testing::{Faults, FaultyStore};
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{
    Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tier_router::ColdBackend;

use crate::rng::Rng;

/// The bucket and its fault wrapper.
#[derive(Debug)]
pub struct Bucket {
    /// The objects.
    pub memory: Arc<InMemory>,
    /// The fault wrapper every `ColdTier` of the run goes through.
    pub faulty: FaultyStore,
}

impl Bucket {
    /// An empty bucket, no fault.
    pub fn new() -> Self {
        let memory = Arc::new(InMemory::new());
        let faulty = FaultyStore::new(Arc::clone(&memory) as Arc<dyn ObjectStore>, Faults::default());
        Self { memory, faulty }
    }

    /// A fresh cold tier over the bucket (a new process's view: empty caches).
    pub fn tier(&self) -> Result<ColdTier, TierError> {
        ColdTier::with_store(Arc::new(self.faulty.clone()), ColdConfig::default())
    }

    /// A cold tier straight over the objects, bypassing the fault wrapper: what the
    /// simulation inspects with (so that inspecting neither fails nor shifts the
    /// wrapper's call count).
    pub fn inspector(&self) -> Result<ColdTier, TierError> {
        ColdTier::with_store(Arc::clone(&self.memory) as Arc<dyn ObjectStore>, ColdConfig::default())
    }

    /// Every object key in the bucket, sorted.
    pub async fn keys(&self) -> Vec<Path> {
        let mut keys: Vec<Path> =
            self.memory.list(None).filter_map(|m| async move { m.ok().map(|m| m.location) }).collect().await;
        keys.sort();
        keys
    }

    /// Flips one byte of one segment object (chosen by `rng`). Returns the offsets the
    /// object holds, or `None` when the bucket holds no segment.
    pub async fn damage(&self, rng: &mut Rng) -> Option<OffsetRange> {
        let keys: Vec<Path> =
            self.keys().await.into_iter().filter(|k| k.as_ref().ends_with(".seg")).collect();
        if keys.is_empty() {
            return None;
        }
        let key = rng.pick(&keys).clone();
        let bytes = self.memory.get(&key).await.ok()?.bytes().await.ok()?;
        if bytes.is_empty() {
            return None;
        }
        let mut bytes = bytes.to_vec();
        let at = usize::try_from(rng.below(bytes.len() as u64)).unwrap_or(0);
        bytes[at] ^= 1 << rng.below(8);
        self.memory.put(&key, PutPayload::from(Bytes::from(bytes))).await.ok()?;
        parse_segment_key(&key)
    }
}

impl Default for Bucket {
    fn default() -> Self {
        Self::new()
    }
}

/// The file name of the segment object holding `range` (`<base:020>-<last:020>.seg`).
pub fn object_name(range: OffsetRange) -> String {
    format!("{:020}-{:020}.seg", range.start, range.end.saturating_sub(1))
}

/// The offsets of a segment object named `<base:020>-<last:020>.seg` (`last` inclusive).
fn parse_segment_key(key: &Path) -> Option<OffsetRange> {
    let name = key.filename()?.strip_suffix(".seg")?;
    let (base, last) = name.split_once('-')?;
    let (base, last): (Offset, Offset) = (base.parse().ok()?, last.parse().ok()?);
    (base <= last).then(|| OffsetRange::new(base, last.saturating_add(1)))
}

/// A wrapper cold backend in the shape of a custom tier with nothing better: its
/// sequential reads are built on its `Tier` methods with tier-router's helpers
/// (`paged_records`, `rebuilt_batches`), it forwards `store_segment` and `record_gap`. On
/// 3892a13 the position traits had default bodies and this wrapper forwarded only
/// `store_segment`, which is how case 4 was reached; a wrapper can no longer forget one.
#[derive(Debug)]
pub struct DefaultsCold(pub ColdTier);

#[async_trait]
impl Tier for DefaultsCold {
    fn kind(&self) -> TierKind {
        self.0.kind()
    }
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.0.range(topic).await
    }
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        self.0.append(topic, batch).await
    }
    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        self.0.read(topic, from, to, limit).await
    }
    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(topic, timestamp).await
    }
}

#[async_trait]
impl ColdBackend for DefaultsCold {
    fn records_from(
        self: std::sync::Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> futures::stream::BoxStream<'static, Result<Record, TierError>> {
        tier_router::paged_records(self, topic, from, to)
    }

    fn record_batches_from(
        self: std::sync::Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> futures::stream::BoxStream<'static, Result<RecordBatch, TierError>> {
        let kind = self.kind();
        tier_router::rebuilt_batches(kind, topic, tier_router::paged_records(self, topic, from, to), from)
    }

    async fn store_segment(&self, topic: &TopicName, path: &FsPath) -> Result<OffsetRange, TierError> {
        ColdBackend::store_segment(&self.0, topic, path).await
    }

    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        ColdBackend::record_gap(&self.0, topic, range).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        ColdBackend::record_topic(&self.0, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        ColdBackend::topic_recorded(&self.0, topic).await
    }

    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        ColdBackend::continuation(&self.0, topic).await
    }
}
