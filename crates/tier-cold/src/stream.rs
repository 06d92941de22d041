//! Long sequential reads: whole index intervals fetched in ranged GETs of up to
//! `read_buffer` bytes, `read_ahead` of them in flight. Streams bypass the data cache of
//! seeks: their memory is the read-ahead alone.

use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use tier_core::segment::{BatchCollector, DataRange, RangedSegment};
use tier_core::{Offset, Record, RecordBatch, TierError, TopicName};

use crate::ColdTier;
use crate::cold::ObjectReader;
use crate::error::topic_ctx;
use crate::gap::{gap_error, recorded_gap_error};
use crate::listing::Listing;

/// One ranged GET of a stream: consecutive index intervals of one segment.
struct Chunk {
    segment: Arc<RangedSegment<ObjectReader>>,
    intervals: Vec<DataRange>,
}

impl Chunk {
    fn bytes(&self) -> std::ops::Range<u64> {
        let start = self.intervals.first().map_or(0, |r| r.bytes.start);
        let end = self.intervals.last().map_or(0, |r| r.bytes.end);
        start..end
    }

    /// Fetches the chunk in one request and decodes its batches holding `from..`.
    async fn load(self, from: Offset) -> Result<Vec<RecordBatch>, TierError> {
        let range = self.bytes();
        let whole = DataRange {
            bytes: range.clone(),
            first_offset: self.intervals.first().map_or(0, |r| r.first_offset),
            end_offset: self.intervals.last().map_or(0, |r| r.end_offset),
            max_timestamp_before: i64::MIN,
        };
        let data = self.segment.fetch(&whole).await?;
        let mut out = BatchCollector::new(from, Offset::MAX, usize::MAX);
        for interval in &self.intervals {
            let slice = data.slice(
                (interval.bytes.start - range.start) as usize..(interval.bytes.end - range.start) as usize,
            );
            self.segment.decode_into(interval, slice, &mut out)?;
        }
        Ok(out.into_batches())
    }
}

/// Splits the intervals of `segment` from the one holding `from` into chunks of at most
/// `read_buffer` bytes (a chunk holds at least one interval).
fn chunks_of(segment: Arc<RangedSegment<ObjectReader>>, from: Offset, read_buffer: u64) -> Vec<Chunk> {
    let index = segment.meta().index().clone();
    let Some(first) = index.interval_for_offset(from.max(segment.offset_range().start)) else {
        return Vec::new();
    };
    let mut chunks = Vec::new();
    let mut current: Vec<DataRange> = Vec::new();
    let mut size = 0;
    let mut i = first;
    while let Some(range) = index.interval(i) {
        if !current.is_empty() && size + range.len() > read_buffer {
            chunks.push(Chunk { segment: segment.clone(), intervals: std::mem::take(&mut current) });
            size = 0;
        }
        size += range.len();
        current.push(range);
        i += 1;
    }
    if !current.is_empty() {
        chunks.push(Chunk { segment, intervals: current });
    }
    chunks
}

impl ColdTier {
    /// Every record of `topic` from `from` to the end of the manifest as it is now, for
    /// long sequential reads (catch-up): data is fetched in ranged GETs of whole index
    /// intervals of at most `read_buffer` bytes (one interval when it alone is larger),
    /// with `read_ahead` requests in flight, so memory stays bounded by about
    /// `read_ahead × read_buffer` however long the history. Segment metadata is fetched
    /// (or taken from the cache) as the stream reaches each segment.
    ///
    /// `from` outside the held range is `Trimmed`; reaching a gap in the manifest yields
    /// a `NotFound` error naming the missing offsets (or, for a recorded gap, the lost
    /// range and its marker), after the records before it; `from` inside a recorded gap
    /// is that error at once.
    pub async fn stream(
        &self,
        topic: &TopicName,
        from: Offset,
    ) -> Result<BoxStream<'_, Result<Record, TierError>>, TierError> {
        stream_via(self, topic, from).await
    }

    /// The verified batches of `topic` holding `from..` to the end of the manifest as it
    /// is now: [`stream`](Self::stream) without building a [`Record`] per record, for
    /// callers that pass batches on (the first batch may start before `from`;
    /// [`RecordBatch::records_from`] steps over its records before `from`). Same
    /// requests, memory bound and errors as `stream`; every batch has had its CRC and
    /// records checked.
    pub async fn stream_batches(
        &self,
        topic: &TopicName,
        from: Offset,
    ) -> Result<BoxStream<'_, Result<RecordBatch, TierError>>, TierError> {
        let chunks = chunks_via(self, topic, from).await?;
        Ok(chunks.map_ok(|batches| stream::iter(batches.into_iter().map(Ok))).try_flatten().boxed())
    }

    /// [`stream`](Self::stream) for a tier held in an `Arc`: the stream owns a handle
    /// on the tier, so it can outlive the caller's borrow (the router's reader keeps
    /// one open across calls).
    pub async fn stream_owned(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
    ) -> Result<BoxStream<'static, Result<Record, TierError>>, TierError> {
        stream_via(self, topic, from).await
    }

    /// [`stream_batches`](Self::stream_batches) for a tier held in an `Arc`: the stream
    /// owns a handle on the tier, so it can outlive the caller's borrow (the router's
    /// batch reader keeps one open across calls).
    pub async fn stream_batches_owned(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
    ) -> Result<BoxStream<'static, Result<RecordBatch, TierError>>, TierError> {
        let chunks = chunks_via(self, topic, from).await?;
        Ok(chunks.map_ok(|batches| stream::iter(batches.into_iter().map(Ok))).try_flatten().boxed())
    }
}

/// The body of [`ColdTier::stream`], over any shareable handle on the tier (`&ColdTier`
/// or `Arc<ColdTier>`): the records of the chunks' batches from `from` on.
async fn stream_via<'a, H>(
    tier: H,
    topic: &TopicName,
    from: Offset,
) -> Result<BoxStream<'a, Result<Record, TierError>>, TierError>
where
    H: std::ops::Deref<Target = ColdTier> + Clone + Send + Sync + 'a,
{
    let chunks = chunks_via(tier, topic, from).await?;
    let records = chunks
        .map_ok(move |batches| {
            let records: Vec<Record> = batches.iter().flat_map(|b| b.records_from(from)).collect();
            stream::iter(records.into_iter().map(Ok))
        })
        .try_flatten();
    Ok(records.boxed())
}

/// The batches of each chunk from the one holding `from` to the end of the manifest,
/// `read_ahead` chunks fetched at a time; the stream ends after its first error.
async fn chunks_via<'a, H>(
    tier: H,
    topic: &TopicName,
    from: Offset,
) -> Result<BoxStream<'a, Result<Vec<RecordBatch>, TierError>>, TierError>
where
    H: std::ops::Deref<Target = ColdTier> + Clone + Send + Sync + 'a,
{
    let listing: Arc<Listing> = tier.listing(topic).await?;
    let held = listing.range();
    if let Some(gap) = listing.recorded_gap_at(from) {
        return Err(recorded_gap_error(topic, from, gap));
    }
    if from < held.start || from > held.end {
        return Err(TierError::trimmed(topic_ctx(topic).offset(from), from, held));
    }
    let first = match listing.find(from) {
        Ok(i) => i,
        Err(_) if from == held.end => return Ok(stream::empty().boxed()),
        Err(after) => return Err(gap_error(topic, &listing, from, after)),
    };
    let read_buffer = tier.config.read_buffer;
    let read_ahead = tier.config.read_ahead;
    let topic = topic.clone();
    let segments = stream::iter(first..listing.segments().len()).then(move |i| {
        let listing = listing.clone();
        let topic = topic.clone();
        let tier = tier.clone();
        async move {
            let segment = &listing.segments()[i];
            if i > first && listing.segments()[i - 1].range.end != segment.range.start {
                let missing = listing.segments()[i - 1].range.end;
                return Err(gap_error(&topic, &listing, missing, i));
            }
            let ranged = Arc::new(tier.open_segment_uncached(&topic, segment).await?);
            Ok::<_, TierError>(stream::iter(chunks_of(ranged, from, read_buffer).into_iter().map(Ok)))
        }
    });
    // An error of the segment walk (a gap, metadata that cannot be read) travels through
    // the read-ahead as one more "chunk", so it comes after the records before it; the
    // stream ends after the first error.
    let chunks = segments
        .try_flatten()
        .map(move |chunk: Result<Chunk, TierError>| async move { chunk?.load(from).await })
        .buffered(read_ahead)
        .scan(false, |failed, item| {
            let item = (!*failed).then_some(item);
            *failed = item.as_ref().is_some_and(Result::is_err);
            futures::future::ready(item)
        });
    Ok(chunks.boxed())
}
