//! Exporting sealed segment files: single and multipart uploads, idempotency, fencing,
//! recovery after an upload that failed midway, and the manifest built from listings.

use crate::common;

use std::sync::Arc;

use common::{all_objects, local_store, records, small_config, topic, write_segment};
use object_store::ObjectStoreExt;
use tier_cold::testing::{CountingStore, Faults, FaultyStore};
use tier_cold::{ColdTier, ExportOutcome};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt};
use tier_testkit::servers::SharedS3;

#[tokio::test]
async fn small_segment_is_one_put_and_a_second_export_is_already_present() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = CountingStore::new(local_store(dir.path()));
    let tier = ColdTier::with_store(Arc::new(store.clone()), small_config()).expect("tier");
    let t = topic("orders");
    let file = dir.path().join("a.seg");
    let end = write_segment(&file, &t, 100, 10, 5, 100);
    let outcome = tier.export_segment(&t, &file).await.expect("export");
    let key = "orders/00000000000000000100-00000000000000000149.seg";
    match &outcome {
        ExportOutcome::Uploaded { key: k, range, parts, bytes } => {
            assert_eq!(k.as_ref(), key);
            assert_eq!(*range, OffsetRange::new(100, end));
            assert_eq!(*parts, 0, "a small segment is a single PUT");
            assert_eq!(*bytes, std::fs::metadata(&file).expect("meta").len());
        }
        other => panic!("expected Uploaded, got {other:?}"),
    }
    assert_eq!(store.counts().puts, 3, "the segment, its successor pointer, then its time marker");
    assert_eq!(store.counts().multipart_starts, 0);
    let objects = all_objects(tier.store().as_ref(), None).await;
    assert_eq!(objects.len(), 3, "{objects:?}");
    assert_eq!(
        objects[0],
        ("orders/00000000000000000000.next".to_string(), key.len() as u64 - "orders/".len() as u64),
        "the pointer from 0 (the topic's first object) holds the segment's file name"
    );
    let pointer = tier.store().get(&"orders/00000000000000000000.next".into()).await.expect("get");
    assert_eq!(pointer.bytes().await.expect("bytes").as_ref(), &key.as_bytes()["orders/".len()..]);
    assert_eq!(objects[1].0, key, "the segment sorts next");
    assert_eq!(
        objects[2],
        (
            "orders/00000000000000000100-00000000000000000149.ts-80000000000007d0-80000000000009ba"
                .to_string(),
            0
        ),
        "a zero-byte marker with timestamps 2000 and 2490"
    );
    let stored = tier.store().get(&outcome.key().clone()).await.expect("get").bytes().await.expect("bytes");
    assert_eq!(stored.as_ref(), std::fs::read(&file).expect("read").as_slice(), "uploaded byte for byte");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(100, 150));

    let again = tier.export_segment(&t, &file).await.expect("re-export");
    assert!(matches!(again, ExportOutcome::AlreadyPresent { .. }), "{again:?}");
    assert_eq!(store.counts().puts, 3, "no second copy, and the pointer and marker are known");
    let got = tier.read(&t, 120, 125, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got, records(120, 5, 100));
}

#[tokio::test]
async fn a_different_segment_at_the_same_name_or_overlapping_is_fenced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = ColdTier::with_store(local_store(dir.path()), small_config()).expect("tier");
    let t = topic("fence");
    let a = dir.path().join("a.seg");
    write_segment(&a, &t, 0, 4, 5, 100);
    tier.export_segment(&t, &a).await.expect("export a");
    // Same offsets, different payload size: a different object at the same name.
    let b = dir.path().join("b.seg");
    write_segment(&b, &t, 0, 4, 5, 101);
    let err = tier.export_segment(&t, &b).await.expect_err("different content");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(
        err.to_string().contains("00000000000000000000-00000000000000000019.seg"),
        "names the key: {err}"
    );
    // Overlapping offsets under another name.
    let c = dir.path().join("c.seg");
    write_segment(&c, &t, 10, 4, 5, 100);
    let err = tier.export_segment(&t, &c).await.expect_err("overlap");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    // Another topic's segment.
    let err = tier.export_segment(&topic("other"), &a).await.expect_err("wrong topic");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(
        all_objects(tier.store().as_ref(), None).await.len(),
        3,
        "nothing but the first segment, its pointer and its marker was written"
    );
}

#[tokio::test]
async fn large_segment_is_a_multipart_upload_streamed_in_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = CountingStore::new(local_store(dir.path()));
    let tier = ColdTier::with_store(Arc::new(store.clone()), small_config()).expect("tier");
    let t = topic("big");
    let file = dir.path().join("big.seg");
    write_segment(&file, &t, 0, 24, 4, 128 * 1024); // 24 batches of 512 KiB: 12 MiB
    let len = std::fs::metadata(&file).expect("meta").len();
    let outcome = tier.export_segment(&t, &file).await.expect("export");
    let want_parts = len.div_ceil(5 << 20);
    assert!(matches!(outcome, ExportOutcome::Uploaded { parts, .. } if parts == want_parts), "{outcome:?}");
    let c = store.counts();
    assert_eq!(
        (c.multipart_starts, c.parts, c.multipart_completes, c.puts),
        (1, want_parts, 1, 2),
        "one multipart upload, then two PUTs: the successor pointer and the time marker"
    );
    let stored = tier.store().get(outcome.key()).await.expect("get").bytes().await.expect("bytes");
    assert_eq!(stored.as_ref(), std::fs::read(&file).expect("read").as_slice());
    assert!(matches!(
        tier.export_segment(&t, &file).await.expect("again"),
        ExportOutcome::AlreadyPresent { .. }
    ));
}

/// An upload that fails after two parts (and whose abort fails too, as when the process
/// dies) is followed by an export with the healthy store: exactly one, correct object.
async fn crash_mid_upload_then_reexport(
    base: Arc<dyn object_store::ObjectStore>,
    config: tier_cold::ColdConfig,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("crash");
    let file = dir.path().join("seg");
    write_segment(&file, &t, 0, 32, 4, 128 * 1024); // 16 MiB: 4 parts of 5 MiB
    let faulty = FaultyStore::new(
        base.clone(),
        Faults { fail_parts_after: Some(2), fail_aborts: true, ..Faults::default() },
    );
    let crashed = ColdTier::with_store(Arc::new(faulty.clone()), config.clone()).expect("tier");
    let err = crashed.export_segment(&t, &file).await.expect_err("the upload fails midway");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(faulty.injected() >= 1);
    assert!(crashed.stats().multipart_aborts >= 1, "the failed upload was aborted");
    let dir_path = crashed.layout().topic_dir(&t);
    assert_eq!(all_objects(base.as_ref(), Some(&dir_path)).await, vec![], "no object from the failed upload");

    let healthy = ColdTier::with_store(base.clone(), config).expect("tier");
    let outcome = healthy.export_segment(&t, &file).await.expect("re-export");
    assert!(matches!(outcome, ExportOutcome::Uploaded { .. }), "{outcome:?}");
    let objects = all_objects(base.as_ref(), Some(&dir_path)).await;
    assert_eq!(objects.len(), 3, "exactly one segment, its marker and its pointer: {objects:?}");
    assert!(objects[1].0.contains(".ts-") && objects[1].1 == 0, "{objects:?}");
    assert!(objects[2].0.ends_with("00000000000000000000.next"), "{objects:?}");
    let stored = base.get(outcome.key()).await.expect("get").bytes().await.expect("bytes");
    assert_eq!(stored.as_ref(), std::fs::read(&file).expect("read").as_slice());
    let again = healthy.export_segment(&t, &file).await.expect("third export");
    assert!(matches!(again, ExportOutcome::AlreadyPresent { .. }), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reexport_after_a_crash_mid_upload_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    crash_mid_upload_then_reexport(local_store(dir.path()), small_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reexport_after_a_crash_mid_upload_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let store = config.build_store().expect("store");
    crash_mid_upload_then_reexport(store, config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_segments_are_listed_across_pages_on_s3() {
    use futures::StreamExt;
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let tier = ColdTier::open(config).expect("tier");
    let t = topic("many");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("one.seg");
    write_segment(&file, &t, 0, 1, 1, 10);
    let bytes = bytes::Bytes::from(std::fs::read(&file).expect("read"));
    // 1100 objects (S3 lists 1000 per page); only the first holds real data, which
    // is all this test reads: the rest only need names.
    let n = 1100u64;
    futures::stream::iter(0..n)
        .map(|i| {
            let key = tier.layout().segment_key(&t, OffsetRange::new(i, i + 1));
            let store = tier.store().clone();
            let bytes = bytes.clone();
            async move { store.put(&key, bytes.into()).await.expect("put") }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    assert_eq!(tier.refresh(&t).await.expect("refresh"), OffsetRange::new(0, n));
    assert_eq!(tier.gaps(&t).await.expect("gaps"), vec![]);
    assert_eq!(tier.segments(&t).await.expect("segments").len(), n as usize);
    let got = tier.read(&t, 0, 1, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got.len(), 1);
}

/// Two tiers that both believe the topic is empty append at offset 0: the conditional
/// PUT lets only the first write; the second gets `Ok` for the identical batch and
/// `Fenced` for a different one.
async fn second_writer_is_fenced_by_the_conditional_put(make: impl Fn() -> ColdTier) {
    let t = topic("writers");
    let (a, b, c) = (make(), make(), make());
    for tier in [&a, &b, &c] {
        assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0));
    }
    let mine = RecordBatch::from_records(0, &records(0, 3, 10)).expect("batch");
    let theirs = RecordBatch::from_records(0, &records(0, 3, 11)).expect("batch");
    a.append(&t, mine.clone()).await.expect("first writer");
    b.append(&t, mine).await.expect("identical batch from a second writer");
    let err = c.append(&t, theirs).await.expect_err("different batch");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert_eq!(c.refresh(&t).await.expect("refresh"), OffsetRange::new(0, 3));
    assert_eq!(c.read(&t, 0, 3, ReadLimit::unbounded()).await.expect("read"), records(0, 3, 10));
}

#[tokio::test]
async fn second_writer_is_fenced_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = local_store(dir.path());
    second_writer_is_fenced_by_the_conditional_put(|| {
        ColdTier::with_store(store.clone(), small_config()).expect("tier")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_writer_is_fenced_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    second_writer_is_fenced_by_the_conditional_put(|| ColdTier::open(config.clone()).expect("tier")).await;
}

/// The re-export check compares the whole object's CRC-32C (streamed in `read_buffer`
/// GETs) with the file's: an object of the same length and trailer but one flipped data
/// byte is `Fenced`; an identical one is `AlreadyPresent`.
async fn reexport_compares_the_whole_content(
    store: Arc<dyn object_store::ObjectStore>,
    mut config: tier_cold::ColdConfig,
) {
    config.read_buffer = 4096;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("crc");
    let file = dir.path().join("a.seg");
    write_segment(&file, &t, 0, 8, 5, 500);
    let data = std::fs::read(&file).expect("read");
    let len = data.len() as u64;
    assert!(len > 4 * 4096, "several chunks: {len}");
    let tier = ColdTier::with_store(store.clone(), config.clone()).expect("tier");
    let outcome = tier.export_segment(&t, &file).await.expect("export");
    let key = outcome.key().clone();

    let fresh = ColdTier::with_store(store.clone(), config.clone()).expect("tier");
    let again = fresh.export_segment(&t, &file).await.expect("identical");
    assert!(matches!(again, ExportOutcome::AlreadyPresent { .. }), "{again:?}");
    let stats = fresh.stats();
    assert!(stats.max_get_bytes <= 4096, "bounded GETs: {stats:?}");
    assert!(stats.get_bytes >= len, "the whole object was read: {stats:?}");

    // Same length and trailer, one byte of a record payload flipped.
    let mut damaged = data.clone();
    let at = data.len() / 2;
    damaged[at] ^= 0x01;
    assert_eq!(damaged[damaged.len() - 88..], data[data.len() - 88..], "the trailer is unchanged");
    store.put(&key, bytes::Bytes::from(damaged).into()).await.expect("overwrite");
    let fresh = ColdTier::with_store(store, config).expect("tier");
    let err = fresh.export_segment(&t, &file).await.expect_err("different content");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains(key.as_ref()), "names the key: {err}");
    assert!(err.to_string().contains("CRC-32C"), "{err}");
}

#[tokio::test]
async fn reexport_compares_the_whole_content_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    reexport_compares_the_whole_content(local_store(dir.path()), small_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reexport_compares_the_whole_content_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let store = config.build_store().expect("store");
    reexport_compares_the_whole_content(store, config).await;
}
