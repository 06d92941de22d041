//! [`ColdTier`]: the store, the per-topic manifests, the metadata cache and the counters
//! every operation shares.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parking_lot::Mutex;
use tier_core::segment::{RangeReader, RangedSegment, SegmentMeta, tail_bytes_for_index};
use tier_core::{OffsetRange, TierError, TopicName};

use crate::cache::Lru;
use crate::config::ColdConfig;
use crate::error::{key_ctx, map_store_error, topic_ctx};
use crate::layout::Layout;
use crate::listing::{Listing, SegmentObject};
use crate::stats::{ColdStats, Counters};

/// The per-topic state: the cached listing and the lock that serialises appends.
#[derive(Debug, Default)]
pub(crate) struct TopicState {
    pub(crate) listing: Mutex<Option<Arc<Listing>>>,
    pub(crate) append_lock: tokio::sync::Mutex<()>,
}

/// The cold tier: sealed segments as objects in an [`ObjectStore`], named by offset range
/// (see [`Layout`]), read with ranged requests through each segment's footer index.
///
/// Cheap to share behind an `Arc`; every method takes `&self`. See the crate docs and
/// `docs/cold.md` for the design.
#[derive(Debug)]
pub struct ColdTier {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) config: ColdConfig,
    pub(crate) layout: Layout,
    pub(crate) topics: Mutex<HashMap<TopicName, Arc<TopicState>>>,
    pub(crate) metas: Mutex<Lru<Path, Arc<SegmentMeta>>>,
    pub(crate) counters: Arc<Counters>,
}

impl ColdTier {
    /// A cold tier over the store `config.backend` describes.
    pub fn open(config: ColdConfig) -> Result<Self, TierError> {
        let store = config.build_store()?;
        Self::with_store(store, config)
    }

    /// A cold tier over `store` (any object_store implementation, e.g. a test wrapper);
    /// `config.backend` is ignored.
    pub fn with_store(store: Arc<dyn ObjectStore>, config: ColdConfig) -> Result<Self, TierError> {
        config.validate()?;
        Ok(Self {
            store,
            layout: Layout::new(&config.prefix),
            metas: Mutex::new(Lru::new(config.index_cache_entries)),
            config,
            topics: Mutex::new(HashMap::new()),
            counters: Arc::new(Counters::default()),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ColdConfig {
        &self.config
    }

    /// The object names.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The object store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Request and byte counters since creation.
    pub fn stats(&self) -> ColdStats {
        self.counters.snapshot()
    }

    /// Forgets all cached segment metadata (the next seek in each object costs a tail
    /// request again).
    pub fn clear_index_cache(&self) {
        *self.metas.lock() = Lru::new(self.config.index_cache_entries);
    }

    pub(crate) fn topic_state(&self, topic: &TopicName) -> Arc<TopicState> {
        self.topics.lock().entry(topic.clone()).or_default().clone()
    }

    /// Lists `<prefix>/<topic>/` again (all pages) and replaces the cached manifest.
    /// Returns the offsets from the first segment to the end of the last.
    pub async fn refresh(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        let listing = self.load_listing(topic).await?;
        let range = listing.range();
        *self.topic_state(topic).listing.lock() = Some(listing);
        Ok(range)
    }

    async fn load_listing(&self, topic: &TopicName) -> Result<Arc<Listing>, TierError> {
        let dir = self.layout.topic_dir(topic);
        Counters::add(&self.counters.listings, 1);
        let objects: Vec<_> = self.store.list(Some(&dir)).try_collect().await.map_err(|e| {
            map_store_error(topic_ctx(topic).location(dir.to_string()), "listing segments", e)
        })?;
        let segments = objects
            .into_iter()
            .filter_map(|o| {
                let range = self.layout.parse_key(topic, &o.location)?;
                Some(Arc::new(SegmentObject::new(o.location, range, o.size)))
            })
            .collect();
        Ok(Arc::new(Listing::new(topic, segments)?))
    }

    /// The cached manifest of `topic`, listing the store the first time.
    pub(crate) async fn listing(&self, topic: &TopicName) -> Result<Arc<Listing>, TierError> {
        let state = self.topic_state(topic);
        if let Some(listing) = state.listing.lock().clone() {
            return Ok(listing);
        }
        let listing = self.load_listing(topic).await?;
        let mut slot = state.listing.lock();
        // Another caller may have installed a newer listing (after an export) meanwhile.
        Ok(slot.get_or_insert(listing).clone())
    }

    /// Adds an exported segment to the cached manifest.
    pub(crate) fn note_segment(&self, topic: &TopicName, segment: SegmentObject) -> Result<(), TierError> {
        let state = self.topic_state(topic);
        let mut slot = state.listing.lock();
        if let Some(listing) = slot.as_ref() {
            if listing.segments().iter().any(|s| s.key == segment.key) {
                return Ok(());
            }
            *slot = Some(Arc::new(listing.with(topic, Arc::new(segment))?));
        }
        Ok(())
    }

    /// The offset ranges inside [`range`](tier_core::Tier::range) that no object holds
    /// (from the cached manifest). Empty for a healthy topic.
    pub async fn gaps(&self, topic: &TopicName) -> Result<Vec<OffsetRange>, TierError> {
        Ok(self.listing(topic).await?.gaps())
    }

    /// The segment objects of `topic` in offset order: key, range and size.
    pub async fn segments(&self, topic: &TopicName) -> Result<Vec<(Path, OffsetRange, u64)>, TierError> {
        let listing = self.listing(topic).await?;
        Ok(listing.segments().iter().map(|s| (s.key.clone(), s.range, s.size)).collect())
    }

    pub(crate) fn reader(&self, topic: &TopicName, key: &Path) -> ObjectReader {
        ObjectReader {
            store: self.store.clone(),
            key: key.clone(),
            topic: topic.clone(),
            counters: self.counters.clone(),
        }
    }

    /// The trailer and index of `segment`, from the cache or one tail request (two when
    /// the index does not fit the tail). Checks the object holds the offsets its name says.
    pub(crate) async fn meta(
        &self,
        topic: &TopicName,
        segment: &SegmentObject,
    ) -> Result<Arc<SegmentMeta>, TierError> {
        if let Some(meta) = self.metas.lock().get(&segment.key) {
            Counters::add(&self.counters.meta_cache_hits, 1);
            return Ok(meta);
        }
        Counters::add(&self.counters.meta_cache_misses, 1);
        let tail = self
            .config
            .tail_fetch_bytes
            .max(tail_bytes_for_index(segment.size, self.config.index_interval_bytes));
        let reader = self.reader(topic, &segment.key);
        let ctx = key_ctx(topic, &segment.key);
        let meta = Arc::new(SegmentMeta::fetch(&reader, segment.size, tail, &ctx).await?);
        if meta.offset_range() != segment.range {
            return Err(TierError::corruption(
                ctx,
                format!(
                    "the object is named for offsets {:?} but its trailer says {:?}",
                    segment.range,
                    meta.offset_range()
                ),
            ));
        }
        let _ = segment.max_timestamp.set(meta.trailer().max_timestamp);
        self.metas.lock().insert(segment.key.clone(), meta.clone());
        Ok(meta)
    }

    /// `segment` opened for ranged reads (metadata from the cache or fetched).
    pub(crate) async fn open_segment(
        &self,
        topic: &TopicName,
        segment: &SegmentObject,
    ) -> Result<RangedSegment<ObjectReader>, TierError> {
        let meta = self.meta(topic, segment).await?;
        Ok(RangedSegment::from_meta(self.reader(topic, &segment.key), meta, key_ctx(topic, &segment.key)))
    }
}

/// Ranged GETs of one object, counted in the tier's stats.
#[derive(Debug, Clone)]
pub(crate) struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    key: Path,
    topic: TopicName,
    counters: Arc<Counters>,
}

#[async_trait]
impl RangeReader for ObjectReader {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        let start = range.start;
        let bytes = self.store.get_range(&self.key, range).await.map_err(|e| {
            let ctx = key_ctx(&self.topic, &self.key).location(format!("{}@{start}", self.key));
            map_store_error(ctx, "ranged read", e)
        })?;
        self.counters.note_get(bytes.len() as u64);
        Ok(bytes)
    }
}
