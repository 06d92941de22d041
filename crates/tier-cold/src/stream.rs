//! Long sequential reads: whole index intervals fetched in ranged GETs of up to
//! `read_buffer` bytes, `read_ahead` of them in flight. Streams bypass the data cache of
//! seeks: their memory is the read-ahead alone.
//!
//! A stream may be given an end offset: it then never fetches or decodes an interval
//! starting at or past it, so damage or a failing request beyond the part a reader uses
//! (e.g. past the router's hand-off to the WAL) cannot fail the read. Within a chunk,
//! the batches before a damaged one are handed out before the error.

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

    /// Fetches the chunk in one request and decodes its batches holding `from..to`
    /// (none after the one reaching `to`): the batches, then the error that stopped the
    /// decoding, if any, so the intact batches before damage are not lost.
    async fn load(self, from: Offset, to: Offset) -> Vec<Result<RecordBatch, TierError>> {
        let range = self.bytes();
        let whole = DataRange {
            bytes: range.clone(),
            first_offset: self.intervals.first().map_or(0, |r| r.first_offset),
            end_offset: self.intervals.last().map_or(0, |r| r.end_offset),
            max_timestamp_before: i64::MIN,
        };
        let data = match self.segment.fetch(&whole).await {
            Ok(data) => data,
            Err(e) => return vec![Err(e)],
        };
        let mut out = BatchCollector::new(from, to, usize::MAX);
        let mut failure = None;
        for interval in &self.intervals {
            let slice = data.slice(
                (interval.bytes.start - range.start) as usize..(interval.bytes.end - range.start) as usize,
            );
            if let Err(e) = self.segment.decode_into(interval, slice, &mut out) {
                failure = Some(e);
                break;
            }
        }
        out.into_batches().into_iter().map(Ok).chain(failure.map(Err)).collect()
    }
}

/// Splits the intervals of `segment` from the one holding `from` up to the last one
/// starting before `to` into chunks of at most `read_buffer` bytes (a chunk holds at
/// least one interval).
fn chunks_of(
    segment: Arc<RangedSegment<ObjectReader>>,
    from: Offset,
    to: Offset,
    read_buffer: u64,
) -> Vec<Chunk> {
    let index = segment.meta().index().clone();
    let Some(first) = index.interval_for_offset(from.max(segment.offset_range().start)) else {
        return Vec::new();
    };
    let mut chunks = Vec::new();
    let mut current: Vec<DataRange> = Vec::new();
    let mut size = 0;
    let mut i = first;
    while let Some(range) = index.interval(i).filter(|r| r.first_offset < to) {
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
    /// is that error at once. A damaged batch yields its `Corruption` error after the
    /// records before it. The stream ends after its first error.
    pub async fn stream(
        &self,
        topic: &TopicName,
        from: Offset,
    ) -> Result<BoxStream<'_, Result<Record, TierError>>, TierError> {
        records_via(self, topic, from, Offset::MAX).await
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
        batches_via(self, topic, from, Offset::MAX).await
    }

    /// [`stream`](Self::stream) of the records `from..to` (or to the end of the
    /// manifest, if sooner), for a tier held in an `Arc`: the stream owns a handle on
    /// the tier, so it can outlive the caller's borrow (the router's reader keeps one
    /// open across calls). No interval starting at or after `to` is fetched or decoded,
    /// so nothing there (damage, a failing request) can fail the stream.
    pub async fn stream_owned(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> Result<BoxStream<'static, Result<Record, TierError>>, TierError> {
        records_via(self, topic, from, to).await
    }

    /// [`stream_batches`](Self::stream_batches) of the batches holding `from..to` (or to
    /// the end of the manifest, if sooner; the last batch may end after `to`), for a
    /// tier held in an `Arc`: the stream owns a handle on the tier, so it can outlive
    /// the caller's borrow (the router's batch reader keeps one open across calls). As
    /// with [`stream_owned`](Self::stream_owned), nothing past `to` is fetched.
    pub async fn stream_batches_owned(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> Result<BoxStream<'static, Result<RecordBatch, TierError>>, TierError> {
        batches_via(self, topic, from, to).await
    }
}

/// The body of [`ColdTier::stream`], over any shareable handle on the tier (`&ColdTier`
/// or `Arc<ColdTier>`): the records `from..to` of the batches.
async fn records_via<'a, H>(
    tier: H,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> Result<BoxStream<'a, Result<Record, TierError>>, TierError>
where
    H: std::ops::Deref<Target = ColdTier> + Clone + Send + Sync + 'a,
{
    let batches = batches_via(tier, topic, from, to).await?;
    let records = batches
        .map_ok(move |batch| {
            let records: Vec<Record> = batch.records_from(from).take_while(|r| r.offset < to).collect();
            stream::iter(records.into_iter().map(Ok))
        })
        .try_flatten();
    Ok(records.boxed())
}

/// The batches holding `from..to` (or to the end of the manifest), from the chunks of
/// each segment, `read_ahead` chunks fetched at a time; segments and intervals starting
/// at or after `to` are never reached. The stream ends after its first error.
async fn batches_via<'a, H>(
    tier: H,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> Result<BoxStream<'a, Result<RecordBatch, TierError>>, TierError>
where
    H: std::ops::Deref<Target = ColdTier> + Clone + Send + Sync + 'a,
{
    crate::metrics::read_request();
    let listing: Arc<Listing> = tier.listing(topic).await?;
    let held = listing.range();
    if let Some(gap) = listing.recorded_gap_at(from) {
        return Err(recorded_gap_error(topic, from, gap));
    }
    if from < held.start || from > held.end {
        return Err(TierError::trimmed(topic_ctx(topic).offset(from), from, held));
    }
    if from >= to {
        return Ok(stream::empty().boxed());
    }
    let first = match listing.find(from) {
        Ok(i) => i,
        Err(_) if from == held.end => return Ok(stream::empty().boxed()),
        Err(after) => return Err(gap_error(topic, &listing, from, after)),
    };
    // The segments from the one holding `from` to the last one starting before `to`.
    let end = first + listing.segments()[first..].partition_point(|s| s.range.start < to);
    let read_buffer = tier.config.read_buffer;
    let read_ahead = tier.config.read_ahead;
    let topic = topic.clone();
    let segments = stream::iter(first..end).then(move |i| {
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
            Ok::<_, TierError>(stream::iter(chunks_of(ranged, from, to, read_buffer).into_iter().map(Ok)))
        }
    });
    // An error of the segment walk (a gap, metadata that cannot be read) travels through
    // the read-ahead as one more "chunk", so it comes after the batches before it; the
    // stream ends after the first error.
    let batches = segments
        .try_flatten()
        .map(move |chunk: Result<Chunk, TierError>| async move {
            match chunk {
                Ok(chunk) => chunk.load(from, to).await,
                Err(e) => vec![Err(e)],
            }
        })
        .buffered(read_ahead)
        .flat_map(stream::iter)
        .scan(false, |failed, item| {
            let item = (!*failed).then_some(item);
            *failed = item.as_ref().is_some_and(Result::is_err);
            futures::future::ready(item)
        });
    Ok(batches.boxed())
}
