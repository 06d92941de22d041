//! [`ColdTier`]: the store, the per-topic manifests, the metadata and data-interval
//! caches and the counters every operation shares.

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
use crate::layout::{Layout, ObjectName, TimeBounds};
use crate::listing::{Listing, RecordedGap, SegmentObject};
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
    pub(crate) data: Arc<DataCache>,
    pub(crate) counters: Arc<Counters>,
}

/// Recently fetched data intervals of seeks and bounded reads, keyed by object key, object
/// size and byte range, bounded by `data_cache_bytes`. Objects are immutable, so an entry
/// never goes stale; the size in the key guards against an object replaced by hand.
pub(crate) type DataCache = Mutex<Lru<(Path, u64, u64, u64), Bytes>>;

fn data_cache_capacity(config: &ColdConfig) -> usize {
    usize::try_from(config.data_cache_bytes).unwrap_or(usize::MAX)
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
            data: Arc::new(Mutex::new(Lru::new(data_cache_capacity(&config)))),
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

    /// Forgets all cached data intervals (the next seek fetches its interval again).
    pub fn clear_data_cache(&self) {
        self.data.lock().clear();
    }

    pub(crate) fn topic_state(&self, topic: &TopicName) -> Arc<TopicState> {
        self.topics.lock().entry(topic.clone()).or_default().clone()
    }

    /// Lists `<prefix>/<topic>/` again (all pages), completes the listing by following
    /// the successor pointers from its end (objects a lagging LIST does not show yet,
    /// see [`Layout::pointer_key`]) and replaces the cached manifest. Returns the offsets
    /// from the first segment to the end of the last.
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
        let mut found = Vec::new();
        let mut recorded = Vec::new();
        // Time bounds by range; `None` when two markers of one range disagree.
        let mut markers: HashMap<OffsetRange, Option<TimeBounds>> = HashMap::new();
        for o in objects {
            match self.layout.parse_object(topic, &o.location) {
                Some(ObjectName::Segment(range)) => found.push((o.location, range, o.size)),
                Some(ObjectName::TimeMarker(range, bounds)) => {
                    markers
                        .entry(range)
                        .and_modify(|known| {
                            if *known != Some(bounds) {
                                *known = None;
                            }
                        })
                        .or_insert(Some(bounds));
                }
                Some(ObjectName::Gap(range)) => recorded.push(RecordedGap { range, key: o.location }),
                None => {}
            }
        }
        // A marker without its segment (orphan) is ignored: nothing looks it up.
        let segments = found
            .into_iter()
            .map(|(key, range, size)| {
                let bounds = markers.get(&range).copied().flatten();
                Arc::new(SegmentObject::with_bounds(key, range, size, bounds))
            })
            .collect();
        let listing = Listing::new(topic, segments, recorded)?;
        Ok(Arc::new(self.follow_pointers(topic, listing).await?))
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

    /// Adds an exported segment to the cached manifest (or records that its time marker
    /// now exists).
    pub(crate) fn note_segment(&self, topic: &TopicName, segment: SegmentObject) -> Result<(), TierError> {
        let state = self.topic_state(topic);
        let mut slot = state.listing.lock();
        if let Some(listing) = slot.as_ref() {
            if let Some(known) = listing.segments().iter().find(|s| s.key == segment.key) {
                if segment.marked && !known.marked {
                    *slot = Some(Arc::new(listing.replacing(Arc::new(segment))));
                }
                return Ok(());
            }
            *slot = Some(Arc::new(listing.with(topic, Arc::new(segment))?));
        }
        Ok(())
    }

    /// Adds a recorded gap to the cached manifest.
    pub(crate) fn note_gap(&self, topic: &TopicName, gap: RecordedGap) {
        let state = self.topic_state(topic);
        let mut slot = state.listing.lock();
        if let Some(listing) = slot.as_ref() {
            *slot = Some(Arc::new(listing.with_gap(gap)));
        }
    }

    /// The offset ranges inside [`range`](tier_core::Tier::range) that no object holds
    /// and no recorded gap covers (from the cached manifest): objects missing by
    /// accident. Empty for a healthy topic, also one with recorded gaps (see
    /// [`recorded_gaps`](Self::recorded_gaps)).
    pub async fn gaps(&self, topic: &TopicName) -> Result<Vec<OffsetRange>, TierError> {
        Ok(self.listing(topic).await?.gaps())
    }

    /// The segment objects of `topic` in offset order: key, range and size.
    pub async fn segments(&self, topic: &TopicName) -> Result<Vec<(Path, OffsetRange, u64)>, TierError> {
        let listing = self.listing(topic).await?;
        Ok(listing.segments().iter().map(|s| (s.key.clone(), s.range, s.size)).collect())
    }

    /// Ranged GETs of `segment`, through the data cache when `cached`.
    pub(crate) fn reader(&self, topic: &TopicName, segment: &SegmentObject, cached: bool) -> ObjectReader {
        ObjectReader {
            store: self.store.clone(),
            key: segment.key.clone(),
            size: segment.size,
            topic: topic.clone(),
            counters: self.counters.clone(),
            cache: cached.then(|| self.data.clone()),
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
        let reader = self.reader(topic, segment, false);
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
        let trailer = meta.trailer();
        let bounds = TimeBounds { min: trailer.min_timestamp, max: trailer.max_timestamp };
        let known = *segment.bounds.get_or_init(|| bounds);
        if known != bounds {
            return Err(TierError::corruption(
                ctx,
                format!(
                    "the segment's time marker says timestamps {}..={} but its trailer says {}..={}",
                    known.min, known.max, bounds.min, bounds.max
                ),
            ));
        }
        self.metas.lock().insert(segment.key.clone(), meta.clone());
        Ok(meta)
    }

    /// `segment` opened for seeks and bounded reads (metadata from the cache or
    /// fetched; data intervals through the data cache).
    pub(crate) async fn open_segment(
        &self,
        topic: &TopicName,
        segment: &SegmentObject,
    ) -> Result<RangedSegment<ObjectReader>, TierError> {
        self.open_segment_with(topic, segment, true).await
    }

    /// `segment` opened for a sequential stream: its data bypasses the data cache, so a
    /// long catch-up neither evicts the seeks' intervals nor holds more memory.
    pub(crate) async fn open_segment_uncached(
        &self,
        topic: &TopicName,
        segment: &SegmentObject,
    ) -> Result<RangedSegment<ObjectReader>, TierError> {
        self.open_segment_with(topic, segment, false).await
    }

    async fn open_segment_with(
        &self,
        topic: &TopicName,
        segment: &SegmentObject,
        cached: bool,
    ) -> Result<RangedSegment<ObjectReader>, TierError> {
        let meta = self.meta(topic, segment).await?;
        let reader = self.reader(topic, segment, cached);
        Ok(RangedSegment::from_meta(reader, meta, key_ctx(topic, &segment.key)))
    }
}

/// Ranged GETs of one object, counted in the tier's stats, optionally through the data
/// cache.
#[derive(Debug, Clone)]
pub(crate) struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    key: Path,
    size: u64,
    topic: TopicName,
    counters: Arc<Counters>,
    cache: Option<Arc<DataCache>>,
}

#[async_trait]
impl RangeReader for ObjectReader {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        let start = range.start;
        let cache_key = (self.key.clone(), self.size, range.start, range.end);
        if let Some(cache) = &self.cache {
            if let Some(bytes) = cache.lock().get(&cache_key) {
                Counters::add(&self.counters.data_cache_hits, 1);
                return Ok(bytes);
            }
            Counters::add(&self.counters.data_cache_misses, 1);
        }
        let bytes = self.store.get_range(&self.key, range).await.map_err(|e| {
            let ctx = key_ctx(&self.topic, &self.key).location(format!("{}@{start}", self.key));
            map_store_error(ctx, "ranged read", e)
        })?;
        self.counters.note_get(bytes.len() as u64);
        if let Some(cache) = &self.cache {
            // Only whole answers are kept (a short read is an error the caller reports).
            if bytes.len() as u64 == cache_key.3 - cache_key.2 {
                cache.lock().insert_weighted(cache_key, bytes.clone(), bytes.len());
            }
        }
        Ok(bytes)
    }
}
