//! The cold tier of a simulated deployment: the real [`ColdTier`] over an in-memory object
//! store (`object_store::memory::InMemory`) behind tier-cold's [`FaultyStore`], which
//! injects request failures and latency and, from generator 8, what real object stores
//! do besides: answers lost after the store acted, writes refused before it did, and
//! listings that lag writes (see `docs/simulation.md`, "Object-store faults"). The
//! in-memory store outlives every simulated process (it is the bucket); each process opens
//! a fresh `ColdTier` over it, whose first listing of the topic a lag can reach.
//!
//! The second shape of cold backend the simulation drives is tier-router's
//! [`PagedCold`](tier_router::PagedCold) over the same tier: its sequential reads are paged
//! through `Tier::read_batches` with tier-router's helpers, as a custom cold tier with nothing
//! better does (a wrapper of that shape that relied on default trait bodies once left WAL gaps
//! unrecorded in cold and wedged the export: regression seed 30899).

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tier_cold::testing::{Faults, FaultyStore};
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{Offset, OffsetRange, TierError};

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

    /// Flips one byte of one segment object of `topic` (chosen by `rng`). Returns the
    /// offsets the object holds, or `None` when the bucket holds no segment of it.
    pub async fn damage(&self, topic: &str, rng: &mut Rng) -> Option<OffsetRange> {
        let prefix = format!("{topic}/");
        let keys: Vec<Path> = self
            .keys()
            .await
            .into_iter()
            .filter(|k| k.as_ref().ends_with(".seg") && k.as_ref().starts_with(&prefix))
            .collect();
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
