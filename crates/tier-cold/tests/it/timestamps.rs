//! Timestamp seeks through time markers: on a fresh tier over 24 segments,
//! `offset_for_timestamp` + `read` costs at most 2 requests with nothing cached and 1
//! with the segment's index cached; a segment whose marker is missing falls back to its
//! trailer; orphan markers are ignored; expiry removes markers with their segments. On a
//! local directory and on the moto S3 server.
//!
//! Requests are counted by `CountingStore` after `refresh` (the LIST is not counted,
//! as in the offset-seek test of `reads.rs`, whose tier already holds its listing).

use crate::common;

use std::sync::Arc;

use common::{all_objects, local_store, small_config, topic, write_segment};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tier_cold::layout::TimeBounds;
use tier_cold::testing::CountingStore;
use tier_cold::{ColdConfig, ColdTier, ExportOutcome};
use tier_core::{OffsetRange, ReadLimit, Tier, TierExt, Timestamp, TopicName};
use tier_testkit::servers::SharedS3;

const SEGMENTS: u64 = 24;
/// 8 batches of 5 records of 4 KiB: 160 KiB per segment, three 64 KiB index intervals.
const PER_SEGMENT: u64 = 40;

/// Records carry `1000 + 10 * offset` (see `common::records`).
fn ts(offset: u64) -> Timestamp {
    1000 + 10 * offset as Timestamp
}

fn bounds_of(segment: u64) -> TimeBounds {
    TimeBounds { min: ts(segment * PER_SEGMENT), max: ts((segment + 1) * PER_SEGMENT - 1) }
}

fn range_of(segment: u64) -> OffsetRange {
    OffsetRange::new(segment * PER_SEGMENT, (segment + 1) * PER_SEGMENT)
}

/// A tier that has never seen the topic, with its listing loaded and the counter reset.
async fn fresh(counting: &CountingStore, config: &ColdConfig, t: &TopicName) -> ColdTier {
    let tier = ColdTier::with_store(Arc::new(counting.clone()), config.clone()).expect("tier");
    assert_eq!(tier.refresh(t).await.expect("refresh").end, SEGMENTS * PER_SEGMENT);
    counting.reset();
    tier
}

/// `offset_for_timestamp(ts(offset))` then a one-record `read` there: the record found
/// and the requests both made.
async fn seek(tier: &ColdTier, counting: &CountingStore, t: &TopicName, offset: u64) -> u64 {
    counting.reset();
    let found = tier.offset_for_timestamp(t, ts(offset)).await.expect("lookup");
    assert_eq!(found, Some(offset), "timestamp of {offset}");
    let got = tier.read(t, offset, offset + 1, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].offset, got[0].timestamp), (offset, ts(offset)));
    counting.counts().total()
}

async fn timestamp_seeks(base: Arc<dyn ObjectStore>, config: ColdConfig, name: &str) {
    let t = topic(name);
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = ColdTier::with_store(base.clone(), config.clone()).expect("tier");
    let mut files = Vec::new();
    for s in 0..SEGMENTS {
        let file = dir.path().join(format!("{s}.seg"));
        let end = write_segment(&file, &t, s * PER_SEGMENT, 8, 5, 4096);
        assert_eq!(end, (s + 1) * PER_SEGMENT);
        writer.export_segment(&t, &file).await.expect("export");
        files.push(file);
    }
    let counting = CountingStore::new(base.clone());
    let late = 21 * PER_SEGMENT + 33; // in the last index interval of segment 21

    // Nothing cached: the segment's tail (trailer + index) and one data interval.
    let tier = fresh(&counting, &config, &t).await;
    assert_eq!(seek(&tier, &counting, &t, late).await, 2, "uncached timestamp seek + read");
    // The same again: everything cached.
    assert_eq!(seek(&tier, &counting, &t, late).await, 0, "repeated seek");
    // Index cached, data interval not: one request.
    tier.clear_data_cache();
    assert_eq!(seek(&tier, &counting, &t, late).await, 1, "index-cached timestamp seek + read");
    // Another interval of the same segment: one request.
    assert_eq!(seek(&tier, &counting, &t, 21 * PER_SEGMENT + 1).await, 1, "other interval");
    assert!(tier.stats().data_cache_hits >= 2, "{:?}", tier.stats());

    // A segment without its marker (crash between the two PUTs, or an older writer):
    // the lookup reads that segment's trailer instead, and still answers.
    let marker = writer.layout().marker_key(&t, range_of(20), bounds_of(20));
    base.head(&marker).await.expect("the export wrote the marker");
    base.delete(&marker).await.expect("delete marker");
    let tier = fresh(&counting, &config, &t).await;
    assert_eq!(seek(&tier, &counting, &t, late).await, 3, "one trailer read for the marker-less segment");
    // Re-exporting the segment restores the marker.
    let again = ColdTier::with_store(base.clone(), config.clone()).expect("tier");
    let outcome = again.export_segment(&t, &files[20]).await.expect("re-export");
    assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{outcome:?}");
    base.head(&marker).await.expect("marker restored");
    let tier = fresh(&counting, &config, &t).await;
    assert_eq!(seek(&tier, &counting, &t, late).await, 2, "marker back");

    // Orphan markers (no segment) are ignored, whatever they claim.
    for (range, bounds) in [
        (
            OffsetRange::new(SEGMENTS * PER_SEGMENT, SEGMENTS * PER_SEGMENT + 10),
            TimeBounds { min: 0, max: 1 },
        ),
        (OffsetRange::new(5_000, 5_001), TimeBounds { min: i64::MIN, max: i64::MAX }),
    ] {
        let key = writer.layout().marker_key(&t, range, bounds);
        base.put(&key, PutPayload::new()).await.expect("put orphan");
    }
    let tier = fresh(&counting, &config, &t).await;
    assert_eq!(tier.gaps(&t).await.expect("gaps"), vec![]);
    assert_eq!(tier.segments(&t).await.expect("segments").len(), SEGMENTS as usize);
    assert_eq!(seek(&tier, &counting, &t, late).await, 2, "orphans change nothing");
    assert_eq!(tier.offset_for_timestamp(&t, ts(SEGMENTS * PER_SEGMENT)).await.expect("lookup"), None);

    // Expiry: the first three segments' records are older than the cutoff. Their
    // newest timestamps come from the markers (no GET); segment, marker and successor
    // pointer all go.
    counting.reset();
    let (deleted, range) = tier.expire_before(&t, ts(3 * PER_SEGMENT)).await.expect("expire");
    assert_eq!(deleted.len(), 3, "{deleted:?}");
    assert_eq!(range, OffsetRange::new(3 * PER_SEGMENT, SEGMENTS * PER_SEGMENT));
    let c = counting.counts();
    assert_eq!((c.gets + c.get_ranges, c.deletes), (0, 9), "{c:?}");
    let left = all_objects(base.as_ref(), Some(&writer.layout().topic_dir(&t))).await;
    for s in 0..3 {
        let prefix = format!("{:020}-", s * PER_SEGMENT);
        assert!(!left.iter().any(|(k, _)| k.contains(&prefix)), "segment {s} left behind: {left:?}");
    }
    let markers = left.iter().filter(|(k, _)| k.contains(".ts-")).count();
    assert_eq!(markers, (SEGMENTS - 3) as usize + 2, "21 segments' markers and the 2 orphans: {left:?}");
    let tier = fresh(&counting, &config, &t).await;
    assert_eq!(tier.range(&t).await.expect("range"), range);
    assert_eq!(tier.offset_for_timestamp(&t, 0).await.expect("lookup"), Some(3 * PER_SEGMENT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_seeks_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    timestamp_seeks(local_store(dir.path()), small_config(), "ts-local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_seeks_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let store = config.build_store().expect("store");
    timestamp_seeks(store, config, "ts-s3").await;
}

/// A marker whose bounds disagree with its segment's trailer is caught when the trailer
/// is read, as corruption naming the segment.
#[tokio::test]
async fn a_lying_marker_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = local_store(dir.path());
    let t = topic("liar");
    let writer = ColdTier::with_store(base.clone(), small_config()).expect("tier");
    let file = dir.path().join("0.seg");
    write_segment(&file, &t, 0, 8, 5, 4096);
    writer.export_segment(&t, &file).await.expect("export");
    let honest = writer.layout().marker_key(&t, range_of(0), bounds_of(0));
    base.delete(&honest).await.expect("delete");
    let lie = TimeBounds { min: bounds_of(0).min, max: bounds_of(0).max + 1 };
    base.put(&writer.layout().marker_key(&t, range_of(0), lie), PutPayload::new()).await.expect("put");
    let tier = ColdTier::with_store(base, small_config()).expect("tier");
    let err = tier.read(&t, 0, 1, ReadLimit::unbounded()).await.expect_err("lying marker");
    assert_eq!(err.kind(), tier_core::ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("time marker"), "{err}");
}

/// A sequential stream does not go through the data cache: neither its hits nor its
/// misses move, and a seek's cached interval survives it.
#[tokio::test]
async fn streams_bypass_the_data_cache() {
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let counting = CountingStore::new(local_store(dir.path()));
    let tier = ColdTier::with_store(Arc::new(counting.clone()), small_config()).expect("tier");
    let t = topic("bypass");
    let mut base = 0;
    for s in 0..3 {
        let file = dir.path().join(format!("{s}.seg"));
        base = write_segment(&file, &t, base, 8, 5, 4096);
        tier.export_segment(&t, &file).await.expect("export");
    }
    tier.read(&t, 5, 6, ReadLimit::unbounded()).await.expect("seek");
    let before = tier.stats();
    let all: Vec<_> = tier.stream(&t, 0).await.expect("stream").try_collect().await.expect("records");
    assert_eq!(all.len() as u64, base);
    let after = tier.stats();
    assert_eq!(
        (after.data_cache_hits, after.data_cache_misses),
        (before.data_cache_hits, before.data_cache_misses)
    );
    assert!(after.get_requests > before.get_requests, "the stream fetched its data");
    counting.reset();
    tier.read(&t, 5, 6, ReadLimit::unbounded()).await.expect("seek again");
    assert_eq!(counting.counts().total(), 0, "the seek's interval is still cached");
}
