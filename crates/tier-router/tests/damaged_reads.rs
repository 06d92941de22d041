//! Reads across damaged bytes (issue 15, case 10): the record and batch readers never
//! fail for damage in bytes they do not need (cold's read-ahead past the hand-off to the
//! WAL). Hot+cold on a local directory and on moto S3; the cold tier as itself (its own
//! read-ahead) and behind a wrapper that keeps `ColdBackend`'s default `records_from` /
//! `record_batches_from`.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use common::{ColdOn, Deployment, Tiers, append_range, check, r};
use futures::StreamExt;
use tier_core::segment::SealedSegment;
use tier_core::{
    Offset, OffsetRange, ReadLimit, Record, RecordBatch, StartPosition, Tier, TierError, TierKind, Timestamp,
    TopicName,
};
use tier_router::{ColdBackend, Source, TieredStore, Topic};

const TOPIC: &str = "damaged";
const WAIT: Duration = Duration::from_secs(20);

/// A cold backend that forwards the [`Tier`] methods and `store_segment` to the tier it
/// wraps and leaves the sequential reads to `ColdBackend`'s defaults (as a custom cold
/// tier, or the CLI's metrics wrapper, does).
#[derive(Debug)]
struct Defaults(Arc<dyn ColdBackend>);

#[async_trait]
impl Tier for Defaults {
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
impl ColdBackend for Defaults {
    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        self.0.store_segment(topic, path).await
    }
}

/// Flips one byte inside the records of the batch starting at `base` in the sealed
/// segment file at `path`, so that the batch's CRC fails (header, index and trailer
/// stay intact).
fn damage_batch(path: &Path, base: Offset) {
    let mut bytes = std::fs::read(path).unwrap();
    let segment = SealedSegment::open(Bytes::from(bytes.clone())).unwrap();
    let (position, batch) =
        segment.batches().map(Result::unwrap).find(|(_, b)| b.base_offset() == base).unwrap();
    let at = usize::try_from(position).unwrap() + batch.encoded_len() - 3;
    bytes[at] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

/// The offsets each source served, in runs, after checking every record's content and
/// that the offsets are dense from `from` (each delivered exactly once).
fn runs(from: Offset, records: &[(Source, Record)]) -> Vec<(Source, OffsetRange)> {
    let mut out: Vec<(Source, OffsetRange)> = Vec::new();
    for (i, (source, record)) in records.iter().enumerate() {
        assert_eq!(record.offset, from + i as u64, "offsets are dense, each delivered once");
        check(record);
        match out.last_mut() {
            Some((s, run)) if s == source && run.end == record.offset => run.end += 1,
            _ => out.push((*source, r(record.offset, record.offset + 1))),
        }
    }
    out
}

/// The record reader's records from `from` below `until`, or the error that ended it
/// with the records before it.
async fn read_records(
    topic: &Topic,
    from: Offset,
    until: Offset,
) -> (Vec<(Source, Record)>, Option<TierError>) {
    let mut stream = topic.reader_with_source(StartPosition::Offset(from)).await.unwrap();
    let mut out = Vec::new();
    while out.last().map_or(from, |(_, r): &(Source, Record)| r.offset + 1) < until {
        match tokio::time::timeout(WAIT, stream.next()).await.expect("the reader yields").expect("no end") {
            Ok(item) => out.push(item),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// The batch reader's records from `from` below `until` (each item's records from its
/// `from`), or the error that ended it with the records before it.
async fn read_batches(
    topic: &Topic,
    from: Offset,
    until: Offset,
) -> (Vec<(Source, Record)>, Option<TierError>) {
    let mut stream = topic.batch_reader(StartPosition::Offset(from)).await.unwrap();
    let mut out = Vec::new();
    let mut next = from;
    while next < until {
        match tokio::time::timeout(WAIT, stream.next()).await.expect("the reader yields").expect("no end") {
            Ok(item) => {
                assert_eq!(item.from, next, "each item continues where the previous one ended");
                next = item.batch.end_offset();
                out.extend(item.records().map(|r| (item.source, r)));
            }
            Err(e) => return (out, Some(e)),
        }
    }
    out.retain(|(_, r)| r.offset < until);
    (out, None)
}

/// Both readers from `from` deliver every record below `until` exactly once, served in
/// the runs `want`.
async fn both_readers_serve(topic: &Topic, from: Offset, until: Offset, want: &[(Source, OffsetRange)]) {
    let (records, err) = read_records(topic, from, until).await;
    assert!(err.is_none(), "record reader from {from}: {err:?} after {} records", records.len());
    assert_eq!(runs(from, &records), want, "record reader from {from}");
    let (records, err) = read_batches(topic, from, until).await;
    assert!(err.is_none(), "batch reader from {from}: {err:?} after {} records", records.len());
    assert_eq!(runs(from, &records), want, "batch reader from {from}");
}

/// Cold holds [0, 800) as one object, exported from a scratch WAL with one byte of its
/// batch [600, 610) damaged; the store's WAL holds [500, 1000) (its segment [0, 500)
/// deleted by retention, as cold holds it), so readers hand off from cold to the WAL at
/// 500 and never need cold's damaged bytes.
async fn damage_past_the_hand_off(
    cold_on: ColdOn,
    default_streams: bool,
) -> (Deployment, TieredStore, Topic) {
    let mut d = Deployment::new(Tiers::HotCold, cold_on).await;
    if default_streams {
        let cold = d.cold.take().unwrap();
        d.cold = Some(Arc::new(Defaults(cold)));
    }
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 500, 10).await;
    store.hot().rotate(&name).await.unwrap().unwrap();
    append_range(&topic, 500, 1000, 10).await;

    let scratch = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let scratch_store = scratch.open(&[TOPIC]).await;
    append_range(&scratch_store.topic(TOPIC).await.unwrap(), 0, 800, 10).await;
    let segment = scratch_store.hot().rotate(&name).await.unwrap().unwrap();
    damage_batch(&segment.path, 600);
    let cold = store.cold().unwrap();
    assert_eq!(cold.store_segment(&name, &segment.path).await.unwrap(), r(0, 800));
    scratch_store.close().await;

    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 500)]);
    let ranges = topic.ranges().await.unwrap();
    assert_eq!((ranges.hot, ranges.cold, ranges.committed), (r(500, 1000), Some(r(0, 800)), 1000));
    (d, store, topic)
}

async fn read_ahead_past_the_hand_off(cold_on: ColdOn, default_streams: bool) {
    let (_d, store, topic) = damage_past_the_hand_off(cold_on, default_streams).await;
    both_readers_serve(&topic, 499, 1000, &[(Source::Cold, r(499, 500)), (Source::Hot, r(500, 1000))]).await;
    both_readers_serve(&topic, 0, 1000, &[(Source::Cold, r(0, 500)), (Source::Hot, r(500, 1000))]).await;
    store.close().await;
}

#[tokio::test]
async fn local_cold_read_ahead_past_the_hand_off_never_fails_a_read() {
    read_ahead_past_the_hand_off(ColdOn::Local, false).await;
}

#[tokio::test]
async fn s3_cold_read_ahead_past_the_hand_off_never_fails_a_read() {
    read_ahead_past_the_hand_off(ColdOn::S3, false).await;
}

#[tokio::test]
async fn default_cold_streams_past_the_hand_off_never_fail_a_read() {
    read_ahead_past_the_hand_off(ColdOn::Local, true).await;
}
