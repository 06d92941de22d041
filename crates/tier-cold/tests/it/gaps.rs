//! Recorded gaps: a segment that does not continue cold's end is refused until the
//! missing offsets are recorded lost; reads name the recorded gap; the listing keeps it
//! after reopening; expiry removes its marker with the segments before it. On a local
//! directory and on the moto S3 server.

use crate::common;

use std::sync::Arc;

use common::{all_objects, local_store, records, small_config, topic, write_segment};
use futures::StreamExt;
use object_store::ObjectStore;
use tier_cold::{ColdConfig, ColdTier, ExportOutcome};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt};
use tier_testkit::servers::SharedS3;

const GAP_MARKER: &str = "00000000000000000020-00000000000000000030.gap";

fn offsets(records: &[tier_core::Record]) -> Vec<u64> {
    records.iter().map(|r| r.offset).collect()
}

/// Segment `0..20` exported, `30..50` refused, the gap `20..30` recorded, `30..50`
/// exported; reads, lookups, a reopened tier and expiry all see the recorded gap.
async fn gap_then_continue(store: Arc<dyn ObjectStore>, config: ColdConfig, name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic(name);
    let tier = ColdTier::with_store(store.clone(), config.clone()).expect("tier");
    let first = dir.path().join("first.seg");
    let second = dir.path().join("second.seg");
    assert_eq!(write_segment(&first, &t, 0, 4, 5, 50), 20);
    assert_eq!(write_segment(&second, &t, 30, 4, 5, 50), 50);
    tier.export_segment(&t, &first).await.expect("export 0..20");

    let err = tier.export_segment(&t, &second).await.expect_err("not contiguous");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("[30, 50)") && text.contains("[0, 20)") && text.contains("[20, 30)"), "{text}");
    let dir_path = tier.layout().topic_dir(&t);
    assert_eq!(
        all_objects(store.as_ref(), Some(&dir_path)).await.len(),
        3,
        "nothing more was written than the first segment, its marker and its pointer"
    );

    // A gap that does not start where held offsets end is refused too.
    let err = tier.record_gap(&t, OffsetRange::new(25, 30)).await.expect_err("leaves a hole");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = tier.record_gap(&t, OffsetRange::new(15, 30)).await.expect_err("overlaps a segment");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");

    tier.record_gap(&t, OffsetRange::new(20, 30)).await.expect("record the gap");
    tier.record_gap(&t, OffsetRange::new(20, 30)).await.expect("idempotent");
    let objects = all_objects(store.as_ref(), Some(&dir_path)).await;
    let gap_key = format!("{dir_path}/{GAP_MARKER}");
    assert!(objects.contains(&(gap_key.clone(), 0)), "a zero-byte marker: {objects:?}");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 20), "a trailing gap is not held");
    let err = tier.read(&t, 25, 30, ReadLimit::unbounded()).await.expect_err("inside the trailing gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    let outcome = tier.export_segment(&t, &second).await.expect("export after the gap");
    assert!(matches!(outcome, ExportOutcome::Uploaded { .. }), "{outcome:?}");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 50));
    assert_eq!(tier.gaps(&t).await.expect("gaps"), vec![], "the hole is recorded, not missing");
    assert_eq!(tier.recorded_gaps(&t).await.expect("recorded"), vec![OffsetRange::new(20, 30)]);

    check_reads(&tier, name, &gap_key).await;

    // A reopened tier lists the gap again.
    let reopened = ColdTier::with_store(store.clone(), config).expect("tier");
    assert_eq!(reopened.range(&t).await.expect("range"), OffsetRange::new(0, 50));
    assert_eq!(reopened.recorded_gaps(&t).await.expect("recorded"), vec![OffsetRange::new(20, 30)]);
    check_reads(&reopened, name, &gap_key).await;

    // Expiry of the segment before the gap removes its marker too.
    let (deleted, range) = reopened.expire_before(&t, i64::MAX).await.expect("expire");
    assert_eq!(deleted.len(), 1, "never the last segment: {deleted:?}");
    assert_eq!(range, OffsetRange::new(30, 50));
    let objects = all_objects(store.as_ref(), Some(&dir_path)).await;
    assert!(objects.iter().all(|(k, _)| !k.ends_with(".gap")), "{objects:?}");
    assert!(
        !objects.iter().any(|(k, _)| k.ends_with("00000000000000000020.next")),
        "the expired gap's successor pointer is gone: {objects:?}"
    );
    assert_eq!(reopened.recorded_gaps(&t).await.expect("recorded"), vec![]);
    let again = ColdTier::with_store(store, reopened.config().clone()).expect("tier");
    assert_eq!(again.range(&t).await.expect("range"), OffsetRange::new(30, 50));
    let err = again.read(&t, 25, 30, ReadLimit::unbounded()).await.expect_err("expired");
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
}

/// What every reader of the topic `0..20`, gap `20..30`, `30..50` sees.
async fn check_reads(tier: &ColdTier, name: &str, gap_key: &str) {
    let t = topic(name);
    let err = tier.read(&t, 22, 50, ReadLimit::unbounded()).await.expect_err("inside the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let text = err.to_string();
    assert!(text.contains("20..30") && text.contains("lost") && text.contains(gap_key), "{text}");
    let before = tier.read(&t, 10, 50, ReadLimit::unbounded()).await.expect("before the gap");
    assert_eq!(offsets(&before), (10..20).collect::<Vec<_>>(), "stops at the gap");
    let after = tier.read(&t, 30, 50, ReadLimit::unbounded()).await.expect("after the gap");
    assert_eq!(after, records(30, 20, 50));
    assert_eq!(tier.offset_for_timestamp(&t, 1000 + 10 * 25).await.expect("lookup"), Some(30), "crosses it");

    let mut stream = tier.stream(&t, 0).await.expect("stream");
    for offset in 0..20 {
        let record = stream.next().await.expect("a record").expect("before the gap");
        assert_eq!(record.offset, offset);
    }
    let err = stream.next().await.expect("an item").expect_err("the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("20..30"), "{err}");
    let err = tier.stream(&t, 20).await.err().expect("a stream from inside the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let from_30: Vec<_> = tier.stream(&t, 30).await.expect("stream").collect().await;
    assert_eq!(from_30.len(), 20);

    let mut batches = tier.stream_batches(&t, 5).await.expect("batch stream");
    let mut next = 5;
    while next < 20 {
        let batch = batches.next().await.expect("a batch").expect("before the gap");
        next = batch.end_offset();
    }
    assert_eq!(next, 20, "the batches before the gap end at it");
    let err = batches.next().await.expect("an item").expect_err("the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("20..30"), "{err}");
    assert!(batches.next().await.is_none(), "the stream ends after its error");
}

#[tokio::test]
async fn recorded_gap_lets_the_log_continue_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    gap_then_continue(local_store(dir.path()), small_config(), "gaps-local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_gap_lets_the_log_continue_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let store = config.build_store().expect("store");
    gap_then_continue(store, config, "gaps-s3").await;
}

#[tokio::test]
async fn an_empty_topic_takes_over_and_appends_continue_after_a_trailing_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = local_store(dir.path());
    let tier = ColdTier::with_store(store.clone(), small_config()).expect("tier");
    let t = topic("fresh");
    tier.record_gap(&t, OffsetRange::new(0, 10)).await.expect("nothing held: nothing to record");
    assert!(all_objects(store.as_ref(), None).await.is_empty(), "no marker without a segment");
    let seg = dir.path().join("a.seg");
    write_segment(&seg, &t, 10, 2, 5, 20);
    tier.export_segment(&t, &seg).await.expect("takes over at 10");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(10, 20));

    // Appends (the `Tier` path) continue after a recorded trailing gap, not inside it.
    tier.record_gap(&t, OffsetRange::new(20, 25)).await.expect("record");
    let inside = RecordBatch::from_records(22, &records(22, 2, 5)).expect("batch");
    let err = tier.append(&t, inside).await.expect_err("inside the gap");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let beyond = RecordBatch::from_records(26, &records(26, 2, 5)).expect("batch");
    let err = tier.append(&t, beyond).await.expect_err("beyond the gap");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let next = RecordBatch::from_records(25, &records(25, 2, 5)).expect("batch");
    tier.append(&t, next).await.expect("continues after the gap");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(10, 27));
    let got = tier.read(&t, 25, 27, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got, records(25, 2, 5));
    // A segment overlapping recorded-lost offsets is refused.
    let lost = dir.path().join("lost.seg");
    write_segment(&lost, &t, 20, 1, 2, 20);
    let err = tier.export_segment(&t, &lost).await.expect_err("overlaps the recorded gap");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
}

/// A second loss reported from cold's end after a trailing recorded gap (two lost WALs in
/// a row): the offsets already recorded are skipped and only the rest gets a marker, so the
/// segment after the second loss continues the log.
#[tokio::test]
async fn a_gap_overlapping_a_trailing_recorded_gap_records_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = local_store(dir.path());
    let tier = ColdTier::with_store(store.clone(), small_config()).expect("tier");
    let t = topic("twice");
    let first = dir.path().join("first.seg");
    write_segment(&first, &t, 0, 4, 5, 50);
    tier.export_segment(&t, &first).await.expect("export 0..20");
    tier.record_gap(&t, OffsetRange::new(20, 30)).await.expect("the first loss");

    tier.record_gap(&t, OffsetRange::new(20, 1049)).await.expect("the second loss, from cold's end");
    let recorded = vec![OffsetRange::new(20, 30), OffsetRange::new(30, 1049)];
    assert_eq!(tier.recorded_gaps(&t).await.expect("recorded"), recorded);
    tier.record_gap(&t, OffsetRange::new(20, 1049)).await.expect("idempotent");
    tier.record_gap(&t, OffsetRange::new(25, 1049)).await.expect("from inside a recorded gap");
    tier.record_gap(&t, OffsetRange::new(20, 30)).await.expect("the first again");
    let err = tier.record_gap(&t, OffsetRange::new(20, 500)).await.expect_err("ends inside a gap");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("continues at 1049"), "{err}");
    let err = tier.record_gap(&t, OffsetRange::new(10, 1100)).await.expect_err("overlaps a segment");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(tier.recorded_gaps(&t).await.expect("recorded"), recorded, "nothing else recorded");

    let next = dir.path().join("next.seg");
    write_segment(&next, &t, 1049, 2, 5, 50);
    tier.export_segment(&t, &next).await.expect("continues after both gaps");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 1059));
    assert_eq!(tier.gaps(&t).await.expect("gaps"), vec![]);
    let reopened = ColdTier::with_store(store, small_config()).expect("tier");
    assert_eq!(reopened.recorded_gaps(&t).await.expect("recorded"), recorded);
    let err = reopened.read(&t, 500, 1059, ReadLimit::unbounded()).await.expect_err("inside the second gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("30..1049"), "{err}");
}
