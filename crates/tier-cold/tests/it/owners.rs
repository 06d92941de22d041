//! Two exporters of one topic (an ownership move: the old owner's WAL copy rotated at other
//! points than the new owner's) write different segmentations of the same offsets under
//! different keys. Cold stays listable and readable: the listing keeps one chain of objects
//! that tiles the offsets and treats the objects it covers as redundant copies.

use crate::common;

use common::{local_store, records, small_config, topic, write_segment};
use tier_cold::ColdTier;
use tier_core::{OffsetRange, ReadLimit, Tier, TierExt, TopicName};
use tier_testkit::servers::SharedS3;

const PER_BATCH: usize = 10;
const PAYLOAD: usize = 16;

/// Exports the sealed segment of offsets `[base, end)` through `tier`.
async fn export(tier: &ColdTier, t: &TopicName, dir: &std::path::Path, base: u64, end: u64) {
    let path = dir.join(format!("{base}-{end}.seg"));
    let batches = ((end - base) as usize).div_ceil(PER_BATCH);
    assert_eq!(write_segment(&path, t, base, batches, PER_BATCH, PAYLOAD), end);
    tier.export_segment(t, &path).await.unwrap_or_else(|e| panic!("exporting [{base}, {end}): {e}"));
}

/// A fresh tier (nothing cached) lists `[0, end)` and reads every record back.
async fn reads_back(make: &impl Fn() -> ColdTier, t: &TopicName, end: u64) {
    let fresh = make();
    let range = fresh.range(t).await.unwrap_or_else(|e| panic!("listing after two exporters: {e}"));
    assert_eq!(range, OffsetRange::new(0, end));
    let got = fresh.read(t, 0, end, ReadLimit::unbounded()).await.expect("read from 0");
    assert_eq!(got, records(0, end as usize, PAYLOAD));
    // A read starting inside an object that another exporter's object also holds.
    let got = fresh.read(t, 120, end, ReadLimit::unbounded()).await.expect("read from 120");
    assert_eq!(got, records(120, (end - 120) as usize, PAYLOAD));
}

async fn two_exporters_with_different_segmentations(make: impl Fn() -> ColdTier) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("moved");
    let (old_owner, new_owner) = (make(), make());
    // Both have listed the topic (empty) before either exported: their manifests are stale.
    for tier in [&old_owner, &new_owner] {
        assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0));
    }
    export(&old_owner, &t, dir.path(), 0, 100).await;
    export(&old_owner, &t, dir.path(), 100, 200).await;
    export(&new_owner, &t, dir.path(), 0, 150).await;
    reads_back(&make, &t, 200).await;
    // Each keeps exporting after its own objects.
    export(&new_owner, &t, dir.path(), 150, 250).await;
    reads_back(&make, &t, 250).await;
    export(&old_owner, &t, dir.path(), 200, 300).await;
    reads_back(&make, &t, 300).await;
    // A tier that lists everything refuses a segment overlapping what it holds.
    let fresh = make();
    let path = dir.path().join("late.seg");
    write_segment(&path, &t, 250, 10, PER_BATCH, PAYLOAD);
    let err = fresh.export_segment(&t, &path).await.expect_err("overlaps objects that are listed");
    assert_eq!(err.kind(), tier_core::ErrorKind::Fenced, "{err}");
    // Expiry deletes the redundant copies of what it expires too: left behind, they could
    // not be tiled with what remains.
    let (deleted, range) = fresh.expire_before(&t, 3000).await.expect("expire [0, 200)");
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    assert_eq!(range, OffsetRange::new(200, 300));
    let after = make();
    assert_eq!(after.range(&t).await.expect("listing after expiry"), OffsetRange::new(200, 300));
    let got = after.read(&t, 200, 300, ReadLimit::unbounded()).await.expect("read after expiry");
    assert_eq!(got, records(200, 100, PAYLOAD));
}

#[tokio::test]
async fn two_exporters_with_different_segmentations_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = local_store(dir.path());
    two_exporters_with_different_segmentations(|| {
        ColdTier::with_store(store.clone(), small_config()).expect("tier")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_exporters_with_different_segmentations_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    two_exporters_with_different_segmentations(|| ColdTier::open(config.clone()).expect("tier")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_exporters_with_different_segmentations_on_azurite() {
    let (_server, config) = common::azurite().await;
    two_exporters_with_different_segmentations(|| ColdTier::open(config.clone()).expect("tier")).await;
}
