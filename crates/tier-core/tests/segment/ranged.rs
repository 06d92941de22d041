//! Ranged reads: request counts and bytes read for seeks in a large segment, metadata
//! caching, and errors carrying their location.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use tier_core::segment::{
    DEFAULT_TAIL_FETCH_BYTES, RangeReader, RangedSegment, SealedSegment, SegmentHeader, SegmentWriter,
    TRAILER_LEN, tail_bytes_for_index,
};
use tier_core::{ErrorContext, ErrorKind, ReadLimit, RecordBatchBuilder, TierError, TierKind};

use crate::common;

/// An in-memory object that counts requests and bytes served.
#[derive(Debug)]
struct Counting {
    data: Bytes,
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl Counting {
    fn new(data: Bytes) -> Arc<Self> {
        Arc::new(Self { data, requests: AtomicU64::new(0), bytes: AtomicU64::new(0) })
    }
    fn take(&self) -> (u64, u64) {
        (self.requests.swap(0, Ordering::SeqCst), self.bytes.swap(0, Ordering::SeqCst))
    }
}

#[async_trait]
impl RangeReader for Counting {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(range.end - range.start, Ordering::SeqCst);
        self.data.read_range(range).await
    }
}

const RECORDS_PER_BATCH: u64 = 4;
const RECORD_LEN: usize = 256 << 10;

/// A 256 MiB segment: 256 batches of 4 records of 256 KiB; record `o` has timestamp
/// `10 * o` and its payload is filled with `o as u8`.
fn big_segment() -> Bytes {
    let header = SegmentHeader::new(common::topic(), 0, 0);
    let mut w = SegmentWriter::new(Vec::with_capacity(257 << 20), &header).unwrap();
    for b in 0..256u64 {
        let mut builder = RecordBatchBuilder::with_capacity(RECORDS_PER_BATCH as usize * (RECORD_LEN + 64));
        for j in 0..RECORDS_PER_BATCH {
            let o = b * RECORDS_PER_BATCH + j;
            builder.push(10 * o as i64, None, &[], &vec![o as u8; RECORD_LEN]).unwrap();
        }
        w.append(&builder.build(b * RECORDS_PER_BATCH).unwrap()).unwrap();
    }
    Bytes::from(w.seal().unwrap())
}

#[tokio::test]
async fn a_seek_in_a_256_mib_segment_costs_two_requests_then_one_with_cached_metadata() {
    let data = big_segment();
    assert!(data.len() >= 256 << 20);
    let max_batch = RECORDS_PER_BATCH * (RECORD_LEN as u64 + 8) + 40;
    let bound = 64 * 1024 + max_batch + DEFAULT_TAIL_FETCH_BYTES;
    let reader = Counting::new(data.clone());
    let size = data.len() as u64;

    // Seek by offset, uncached: tail + one data range.
    let seg = RangedSegment::open(reader.clone(), size, DEFAULT_TAIL_FETCH_BYTES).await.unwrap();
    assert_eq!(seg.meta().index().entries().len(), 256);
    let records = seg.read(777, 779, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![777, 778]);
    assert!(records[0].payload.iter().all(|&b| b == (777 % 256) as u8));
    let (requests, bytes) = reader.take();
    assert_eq!(requests, 2);
    assert!(bytes < bound, "read {bytes} bytes, bound {bound}");

    // Seek by timestamp, uncached.
    let seg = RangedSegment::open(reader.clone(), size, DEFAULT_TAIL_FETCH_BYTES).await.unwrap();
    assert_eq!(seg.offset_for_timestamp(5_555).await.unwrap(), Some(556));
    let (requests, bytes) = reader.take();
    assert_eq!(requests, 2);
    assert!(bytes < bound, "read {bytes} bytes, bound {bound}");

    // Cached metadata: one request per seek.
    let meta = seg.meta().clone();
    let cached = RangedSegment::from_meta(reader.clone(), meta.clone(), ErrorContext::default());
    assert_eq!(cached.offset_for_timestamp(10 * 1000).await.unwrap(), Some(1000));
    assert_eq!(reader.take().0, 1);
    let range = cached.locate_offset(123).unwrap();
    let fetched = cached.fetch(&range).await.unwrap();
    let got = cached.decode_records(&range, fetched, 123, 124, ReadLimit::unbounded()).unwrap();
    assert_eq!(got[0].offset, 123);
    let (requests, bytes) = reader.take();
    assert_eq!(requests, 1);
    assert!(bytes <= max_batch + 64 * 1024);
    // Past the last record: no request at all.
    assert_eq!(cached.offset_for_timestamp(10 * 1024).await.unwrap(), None);
    assert_eq!(reader.take().0, 0);
}

#[tokio::test]
async fn an_index_larger_than_the_tail_takes_a_second_request() {
    let (bytes, model) = common::sample();
    let sealed = SealedSegment::open(bytes.clone()).unwrap();
    let reader = Counting::new(bytes.clone());
    let size = bytes.len() as u64;
    let seg = RangedSegment::open(reader.clone(), size, TRAILER_LEN as u64 + 10).await.unwrap();
    assert_eq!(reader.take().0, 2);
    assert_eq!(seg.meta().index(), sealed.index());
    assert_eq!(seg.meta().trailer(), sealed.trailer());
    let seg = RangedSegment::open(reader.clone(), size, size * 2).await.unwrap();
    assert_eq!(reader.take(), (1, size));
    assert_eq!(seg.read(0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), model);
}

/// A reader returning one byte too few.
#[derive(Debug)]
struct Short(Bytes);

#[async_trait]
impl RangeReader for Short {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        Ok(self.0.slice(range.start as usize..range.end as usize - 1))
    }
}

#[tokio::test]
async fn errors_name_the_object_and_byte_position() {
    let (bytes, _) = common::sample();
    let ctx = ErrorContext::tier(TierKind::Cold).topic(&common::topic()).location("bucket/orders/seg-100");
    let size = bytes.len() as u64;

    let err =
        RangedSegment::open_with_context(Short(bytes.clone()), size, 4096, ctx.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("bucket/orders/seg-100@0"), "{err}");

    // A corrupt batch: the error names the object and the batch's position.
    let sealed = SealedSegment::open(bytes.clone()).unwrap();
    let entry = sealed.index().entries()[1];
    let mut bad = bytes.to_vec();
    bad[entry.position as usize + 20] ^= 4;
    let seg = RangedSegment::open_with_context(Bytes::from(bad), size, 4096, ctx.clone()).await.unwrap();
    let err = seg.read(entry.offset, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert_eq!(err.context().tier, Some(TierKind::Cold));
    assert!(err.to_string().contains(&format!("bucket/orders/seg-100@{}", entry.position)), "{err}");

    // Not a segment at all.
    let err = RangedSegment::open(Bytes::from(vec![7u8; 500]), 500, 4096).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let err = RangedSegment::open(Bytes::from(vec![7u8; 5]), 5, 4096).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
}

#[tokio::test]
async fn tail_bytes_for_index_brings_the_whole_index_in_one_request() {
    // Many small batches (each about 60 bytes) with a 100-byte interval: an index far
    // larger than a small tail.
    let header = SegmentHeader::new(common::topic(), 0, 0).with_index_interval_bytes(100);
    let mut w = SegmentWriter::new(Vec::new(), &header).unwrap();
    for o in 0..2000u64 {
        w.append(&common::batch(o, &[(o as i64, None, vec![], vec![1; 15])])).unwrap();
    }
    let data = Bytes::from(w.seal().unwrap());
    let size = data.len() as u64;
    let sealed = SealedSegment::open(data.clone()).unwrap();
    let index_len = sealed.trailer().index_len();
    assert!(index_len > 20_000, "{index_len}");
    let tail = tail_bytes_for_index(size, 100);
    assert!(tail >= index_len + TRAILER_LEN as u64 && tail < size / 2, "tail {tail}, index {index_len}");
    let reader = Counting::new(data);
    let seg = RangedSegment::open(reader.clone(), size, tail).await.unwrap();
    assert_eq!(reader.take().0, 1);
    assert_eq!(seg.offset_for_timestamp(1234).await.unwrap(), Some(1234));
    assert_eq!(reader.take().0, 1);
    RangedSegment::open(reader.clone(), size, index_len).await.unwrap();
    assert_eq!(reader.take().0, 2);
    // Never more than the object.
    assert_eq!(tail_bytes_for_index(100, 0), 100);
    assert_eq!(tail_bytes_for_index(500, 0), (1 + 500 / 44) * 24 + 88);
}
