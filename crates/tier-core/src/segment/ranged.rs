//! Reading a sealed segment through ranged requests (an object in object storage):
//! one request for the tail (trailer and index), one per index interval of data.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};

use super::collect::{BatchSink, RecordCollector, scan_interval_for_timestamp};
use super::{
    DataRange, HEADER_FIXED_LEN, INDEX_ENTRY_LEN, SegmentBatches, SegmentIndex, TRAILER_LEN, Trailer, invalid,
};
use crate::batch::DecodeError;
use crate::{ErrorContext, Offset, OffsetRange, ReadLimit, Record, TierError, Timestamp};

/// Smallest possible encoded batch: its 40-byte header and one empty 4-byte record.
const MIN_BATCH_LEN: u64 = crate::batch::BATCH_HEADER_LEN as u64 + 4;

/// How many bytes to fetch from the end of a sealed segment of `object_size` bytes,
/// written with `index_interval_bytes`, so that its whole index arrives with the trailer
/// in one request, however small its batches: index entries start at least
/// `max(index_interval_bytes, 44)` bytes apart, so there are at most
/// `1 + object_size / max(index_interval_bytes, 44)` of them.
///
/// With the defaults, a 256 MiB segment needs about 96 KiB, more than
/// [`DEFAULT_TAIL_FETCH_BYTES`](super::DEFAULT_TAIL_FETCH_BYTES): a reader that knows the
/// interval (the cold tier's configuration) passes this to [`RangedSegment::open`] to keep
/// an uncached seek at two requests.
pub fn tail_bytes_for_index(object_size: u64, index_interval_bytes: u32) -> u64 {
    let step = u64::from(index_interval_bytes).max(MIN_BATCH_LEN);
    let entries = 1 + object_size / step;
    (entries * INDEX_ENTRY_LEN as u64 + TRAILER_LEN as u64).min(object_size)
}

/// Ranged reads of one object (or file): the only I/O [`RangedSegment`] needs.
///
/// Dyn-safe; implemented for [`Bytes`] (an object already in memory) and forwarded
/// through `Arc` and references.
#[async_trait]
pub trait RangeReader: Send + Sync {
    /// The bytes `range` of the object. Must return exactly `range.end - range.start`
    /// bytes; [`RangedSegment`] treats anything else as an error.
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError>;
}

#[async_trait]
impl RangeReader for Bytes {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        let len = self.len() as u64;
        if range.start > range.end || range.end > len {
            return Err(TierError::invalid(
                ErrorContext::default(),
                format!("range {range:?} outside an object of {len} bytes"),
            ));
        }
        Ok(self.slice(range.start as usize..range.end as usize))
    }
}

#[async_trait]
impl<T: RangeReader + ?Sized> RangeReader for Arc<T> {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        (**self).read_range(range).await
    }
}

#[async_trait]
impl<T: RangeReader + ?Sized> RangeReader for &T {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        (**self).read_range(range).await
    }
}

/// What a reader learns from the tail of a sealed segment: its trailer and index.
/// Immutable; share it as `Arc<SegmentMeta>` (the cold tier keeps these in a cache so a
/// seek in a known object costs one request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentMeta {
    trailer: Trailer,
    index: SegmentIndex,
}

impl SegmentMeta {
    /// Fetches and decodes the metadata of the sealed segment `reader` reads, which is
    /// `object_size` bytes long: one request for the last `tail_fetch_bytes` (at least
    /// the trailer), and a second for the start of the index only when the index does
    /// not fit in that tail. Errors carry `ctx`, with the byte position added to its
    /// location.
    pub async fn fetch(
        reader: &dyn RangeReader,
        object_size: u64,
        tail_fetch_bytes: u64,
        ctx: &ErrorContext,
    ) -> Result<Self, TierError> {
        let min_len = (HEADER_FIXED_LEN + 1 + TRAILER_LEN) as u64;
        if object_size < min_len {
            return Err(located(
                ctx,
                invalid(0, format!("an object of {object_size} bytes is too small to be a sealed segment")),
            ));
        }
        let tail_len = tail_fetch_bytes.clamp(TRAILER_LEN as u64, object_size);
        let tail_start = object_size - tail_len;
        let tail = fetch_exact(reader, tail_start..object_size, ctx).await?;
        let trailer = Trailer::decode(&tail).map_err(|e| located(ctx, e.shifted(tail_start)))?;
        if trailer.segment_len() != object_size {
            return Err(located(
                ctx,
                invalid(
                    object_size - TRAILER_LEN as u64,
                    format!(
                        "the trailer describes a segment of {} bytes, not {object_size}",
                        trailer.segment_len()
                    ),
                ),
            ));
        }
        let index_range = trailer.index_position..object_size - TRAILER_LEN as u64;
        let index_bytes = if index_range.start >= tail_start {
            tail.slice((index_range.start - tail_start) as usize..(index_range.end - tail_start) as usize)
        } else {
            let head = fetch_exact(reader, index_range.start..tail_start, ctx).await?;
            let mut joined = BytesMut::with_capacity((index_range.end - index_range.start) as usize);
            joined.extend_from_slice(&head);
            joined.extend_from_slice(&tail[..(index_range.end - tail_start) as usize]);
            joined.freeze()
        };
        let index = SegmentIndex::decode(&index_bytes, &trailer)
            .map_err(|e| located(ctx, e.shifted(index_range.start)))?;
        Ok(Self { trailer, index })
    }

    /// The trailer.
    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// The index.
    pub fn index(&self) -> &SegmentIndex {
        &self.index
    }

    /// The offsets the segment holds.
    pub fn offset_range(&self) -> OffsetRange {
        self.trailer.offset_range()
    }
}

/// A sealed segment read through a [`RangeReader`]: lookups answered from the cached
/// [`SegmentMeta`], data fetched one index interval at a time.
#[derive(Debug)]
pub struct RangedSegment<R> {
    reader: R,
    meta: Arc<SegmentMeta>,
    ctx: ErrorContext,
}

impl<R: RangeReader> RangedSegment<R> {
    /// Opens the segment of `object_size` bytes behind `reader`, fetching its metadata
    /// ([`SegmentMeta::fetch`]; `tail_fetch_bytes` is usually
    /// [`DEFAULT_TAIL_FETCH_BYTES`](super::DEFAULT_TAIL_FETCH_BYTES)).
    pub async fn open(reader: R, object_size: u64, tail_fetch_bytes: u64) -> Result<Self, TierError> {
        Self::open_with_context(reader, object_size, tail_fetch_bytes, ErrorContext::default()).await
    }

    /// [`open`](Self::open) with a context (tier, topic, object key as location) that
    /// every error of this segment will carry.
    pub async fn open_with_context(
        reader: R,
        object_size: u64,
        tail_fetch_bytes: u64,
        ctx: ErrorContext,
    ) -> Result<Self, TierError> {
        let meta = SegmentMeta::fetch(&reader, object_size, tail_fetch_bytes, &ctx).await?;
        Ok(Self { reader, meta: Arc::new(meta), ctx })
    }

    /// A segment whose metadata is already known (cached): no request is made.
    pub fn from_meta(reader: R, meta: Arc<SegmentMeta>, ctx: ErrorContext) -> Self {
        Self { reader, meta, ctx }
    }

    /// The metadata, to cache.
    pub fn meta(&self) -> &Arc<SegmentMeta> {
        &self.meta
    }

    /// The offsets the segment holds.
    pub fn offset_range(&self) -> OffsetRange {
        self.meta.offset_range()
    }

    /// The data range holding `offset` (see [`SegmentIndex::locate_offset`]).
    pub fn locate_offset(&self, offset: Offset) -> Option<DataRange> {
        self.meta.index.locate_offset(offset)
    }

    /// The data range holding the answer for `timestamp` (see
    /// [`SegmentIndex::locate_timestamp`]).
    pub fn locate_timestamp(&self, timestamp: Timestamp) -> Option<DataRange> {
        self.meta.index.locate_timestamp(timestamp)
    }

    /// Fetches `range` in one request.
    pub async fn fetch(&self, range: &DataRange) -> Result<Bytes, TierError> {
        fetch_exact(&self.reader, range.bytes.clone(), &self.ctx).await
    }

    /// Decodes the records `from..to` (bounded by `limit`) out of `data`, the fetched
    /// bytes of `range`.
    pub fn decode_records(
        &self,
        range: &DataRange,
        data: Bytes,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        let mut collector = RecordCollector::new(from, to, limit);
        self.decode_into(range, data, &mut collector)?;
        Ok(collector.into_records())
    }

    fn batches(&self, range: &DataRange, data: Bytes) -> Result<SegmentBatches, TierError> {
        if data.len() as u64 != range.len() {
            return Err(located(
                &self.ctx,
                invalid(
                    range.bytes.start,
                    format!("{} bytes given for a range of {}", data.len(), range.len()),
                ),
            ));
        }
        Ok(SegmentBatches::new(
            data,
            range.bytes.start,
            Some(range.first_offset),
            self.meta.trailer.base_offset,
            Some(range.end_offset),
        ))
    }

    /// Decodes the batches of `data`, the fetched bytes of `range`, into `sink` (from
    /// its [`next_offset`](BatchSink::next_offset) on, until it is full). Every batch
    /// handed over has had its CRC and records checked, and its offsets continue the
    /// interval's; batches wholly before the sink's next offset are stepped over
    /// undecoded ([`SegmentBatches::skip_to`](super::SegmentBatches::skip_to)).
    pub fn decode_into(
        &self,
        range: &DataRange,
        data: Bytes,
        sink: &mut impl BatchSink,
    ) -> Result<(), TierError> {
        let mut batches = self.batches(range, data)?;
        batches.skip_to(sink.next_offset());
        for item in batches {
            if sink.is_full() {
                break;
            }
            let (_, batch) = item.map_err(|e| located(&self.ctx, e))?;
            sink.push_batch(&batch);
        }
        Ok(())
    }

    /// Records with offsets in `max(from, start)..min(to, end)`, bounded by `limit`
    /// (as [`SealedSegment::read`](super::SealedSegment::read)): one request per index
    /// interval read, starting with the one holding `from`.
    pub async fn read(&self, from: Offset, to: Offset, limit: ReadLimit) -> Result<Vec<Record>, TierError> {
        let from = from.max(self.meta.trailer.base_offset);
        let mut collector = RecordCollector::new(from, to, limit);
        self.read_into(&mut collector).await?;
        Ok(collector.into_records())
    }

    /// Feeds `sink` this segment's batches from its [`next_offset`](BatchSink::next_offset)
    /// (which must not lie below the segment's base offset) until it is full or the
    /// segment ends: one request per index interval read, starting with the one holding
    /// that offset. Every batch handed over has had its CRC and records checked.
    pub async fn read_into(&self, sink: &mut (impl BatchSink + Send)) -> Result<(), TierError> {
        let index = &self.meta.index;
        let Some(mut i) = index.interval_for_offset(sink.next_offset()) else {
            return Ok(());
        };
        while !sink.is_full()
            && let Some(range) = index.interval(i)
        {
            let data = self.fetch(&range).await?;
            self.decode_into(&range, data, sink)?;
            i += 1;
        }
        Ok(())
    }

    /// Finds, in `data` (the fetched bytes of `range` from
    /// [`locate_timestamp`](Self::locate_timestamp)), the first offset whose running
    /// maximum timestamp is `>= timestamp`.
    pub fn find_timestamp(
        &self,
        range: &DataRange,
        data: Bytes,
        timestamp: Timestamp,
    ) -> Result<Offset, TierError> {
        scan_interval_for_timestamp(
            self.batches(range, data)?,
            timestamp,
            range.max_timestamp_before,
            range.bytes.start,
        )
        .map_err(|e| located(&self.ctx, e))
    }

    /// The first offset whose running maximum timestamp is `>= timestamp`
    /// ([`Tier`](crate::Tier) invariant 7, within this segment), or `None`: at most
    /// one request.
    pub async fn offset_for_timestamp(&self, timestamp: Timestamp) -> Result<Option<Offset>, TierError> {
        let Some(range) = self.locate_timestamp(timestamp) else {
            return Ok(None);
        };
        let data = self.fetch(&range).await?;
        self.find_timestamp(&range, data, timestamp).map(Some)
    }
}

/// Fetches `range`, checking the reader returned exactly that many bytes.
async fn fetch_exact<R: RangeReader + ?Sized>(
    reader: &R,
    range: Range<u64>,
    ctx: &ErrorContext,
) -> Result<Bytes, TierError> {
    let want = range.end - range.start;
    let start = range.start;
    let data = reader.read_range(range).await.map_err(|mut e| {
        let c = e.context_mut();
        if c.location.is_none() {
            c.location = Some(location(ctx, start));
        }
        if c.tier.is_none() {
            c.tier = ctx.tier;
        }
        if c.topic.is_none() {
            c.topic = ctx.topic.clone();
        }
        e
    })?;
    if data.len() as u64 != want {
        // A short answer means the object is shorter than its listing or trailer says.
        return Err(TierError::corruption(
            ErrorContext { location: Some(location(ctx, start)), ..ctx.clone() },
            format!("asked for {want} bytes, the object returned {}", data.len()),
        ));
    }
    Ok(data)
}

fn location(ctx: &ErrorContext, position: u64) -> String {
    format!("{}@{position}", ctx.location.as_deref().unwrap_or("segment"))
}

/// `e` as a [`TierError`] with `ctx` and the error's byte position as location.
fn located(ctx: &ErrorContext, e: DecodeError) -> TierError {
    let ctx = ErrorContext { location: Some(location(ctx, e.position())), ..ctx.clone() };
    e.into_tier_error(ctx)
}
