//! The topic marker: evidence that a topic exists while cold holds none of its segments.
//! It is not a segment (listing and reads ignore it), recording is idempotent, and expiry
//! keeps it. On a local directory and on the moto S3 server.

use crate::common;

use std::sync::Arc;

use common::{all_objects, local_store, small_config, topic, write_segment};
use object_store::ObjectStore;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{OffsetRange, Tier};
use tier_testkit::servers::SharedS3;

async fn marker_outlives_segments(store: Arc<dyn ObjectStore>, config: ColdConfig, name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic(name);
    let tier = ColdTier::with_store(store.clone(), config.clone()).expect("tier");
    assert!(!tier.topic_recorded(&t).await.expect("head"), "a topic never recorded");
    tier.record_topic(&t).await.expect("record");
    tier.record_topic(&t).await.expect("recording again is success");
    assert!(tier.topic_recorded(&t).await.expect("head"));
    assert!(!tier.topic_recorded(&topic(&format!("{name}-other"))).await.expect("head"), "per topic");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0), "the marker holds no offsets");

    for (file, base) in [("a.seg", 0), ("b.seg", 20)] {
        let seg = dir.path().join(file);
        assert_eq!(write_segment(&seg, &t, base, 4, 5, 50), base + 20);
        tier.export_segment(&t, &seg).await.expect("export");
    }
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 40));
    let keys = all_objects(store.as_ref(), Some(&tier.layout().topic_dir(&t))).await;
    assert!(keys.iter().any(|(k, _)| k.ends_with("/topic")), "{keys:?}");

    let (deleted, _) = tier.expire_before(&t, i64::MAX).await.expect("expire");
    assert_eq!(deleted.len(), 1, "the older segment expired (the last one is always kept)");
    let fresh = ColdTier::with_store(store, config).expect("tier");
    assert!(fresh.topic_recorded(&t).await.expect("head"), "expiry keeps the marker");
}

#[tokio::test]
async fn the_topic_marker_outlives_every_segment_on_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    marker_outlives_segments(local_store(dir.path()), small_config(), "marker-local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_topic_marker_outlives_every_segment_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let config = common::s3_config(&s3);
    let store = config.build_store().expect("store");
    marker_outlives_segments(store, config, "marker-s3").await;
}
