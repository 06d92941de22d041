//! Damaged, missing and unreachable objects: clear errors naming the key; injected
//! failures surface as retryable errors; gaps; expiry.

use crate::common;

use std::sync::Arc;

use futures::StreamExt;

use common::{local_store, small_config, topic};
use tier_cold::testing::{Faults, FaultyStore};
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt, TopicName};

fn batch(base: u64, count: usize, ts: i64) -> RecordBatch {
    let mut recs = common::records(base, count, 50);
    for r in &mut recs {
        r.timestamp = ts;
    }
    RecordBatch::from_records(base, &recs).expect("batch")
}

/// A local tier in `dir` with three one-batch segments 0..4, 4..8, 8..12.
async fn three_segments(dir: &tempfile::TempDir, t: &TopicName) -> ColdTier {
    let tier = ColdTier::with_store(local_store(dir.path()), small_config()).expect("tier");
    for (i, base) in [0u64, 4, 8].into_iter().enumerate() {
        tier.append(t, batch(base, 4, 100 * (i as i64 + 1))).await.expect("append");
    }
    tier
}

fn object_file(
    dir: &tempfile::TempDir,
    tier: &ColdTier,
    t: &TopicName,
    range: OffsetRange,
) -> std::path::PathBuf {
    dir.path().join("store").join(tier.layout().segment_key(t, range).as_ref())
}

#[tokio::test]
async fn a_flipped_byte_is_corruption_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("flip");
    let tier = three_segments(&dir, &t).await;
    let path = object_file(&dir, &tier, &t, OffsetRange::new(4, 8));
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[120] ^= 0x10; // inside the batch, after the segment header
    std::fs::write(&path, bytes).expect("write");
    let first = tier.read(&t, 0, 4, ReadLimit::unbounded()).await.expect("the first segment is intact");
    assert_eq!(first.len(), 4);
    let err = tier.read(&t, 0, 12, ReadLimit::unbounded()).await.expect_err("damaged");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("00000000000000000004-00000000000000000007.seg"), "{err}");
    // A batch stream hands out the intact segment's batch, then the damage as corruption.
    let mut batches = tier.stream_batches(&t, 0).await.expect("stream");
    assert_eq!(
        batches.next().await.expect("a batch").expect("intact").offset_range(),
        OffsetRange::new(0, 4)
    );
    let err = batches.next().await.expect("an item").expect_err("damaged");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("00000000000000000004-00000000000000000007.seg"), "{err}");
}

#[tokio::test]
async fn a_truncated_object_is_corruption_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("trunc");
    let tier = three_segments(&dir, &t).await;
    let path = object_file(&dir, &tier, &t, OffsetRange::new(8, 12));
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() - 10]).expect("truncate");
    tier.refresh(&t).await.expect("refresh");
    let err = tier.read(&t, 8, 12, ReadLimit::unbounded()).await.expect_err("truncated");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("00000000000000000008-00000000000000000011.seg"), "{err}");
}

#[tokio::test]
async fn an_object_deleted_after_listing_is_not_found_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("gone");
    let tier = three_segments(&dir, &t).await;
    std::fs::remove_file(object_file(&dir, &tier, &t, OffsetRange::new(4, 8))).expect("remove");
    let err = tier.read(&t, 4, 12, ReadLimit::unbounded()).await.expect_err("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("00000000000000000004-00000000000000000007.seg"), "{err}");

    // After a refresh the hole is a gap: reported, and reads into it name the offsets.
    assert_eq!(tier.refresh(&t).await.expect("refresh"), OffsetRange::new(0, 12));
    assert_eq!(tier.gaps(&t).await.expect("gaps"), vec![OffsetRange::new(4, 8)]);
    let before = tier.read(&t, 2, 12, ReadLimit::unbounded()).await.expect("records before the gap");
    assert_eq!(before.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![2, 3]);
    let err = tier.read(&t, 4, 12, ReadLimit::unbounded()).await.expect_err("in the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("[4, 8)"), "{err}");
    let err = tier.offset_for_timestamp(&t, 250).await.expect_err("the answer may be in the gap");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn injected_store_failures_surface_as_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("flaky");
    let faulty = FaultyStore::new(local_store(dir.path()), Faults::default());
    let tier = ColdTier::with_store(Arc::new(faulty.clone()), small_config()).expect("tier");
    tier.append(&t, batch(0, 3, 1)).await.expect("healthy append");
    faulty.set_faults(Faults { fail_after_calls: Some(0), ..Faults::default() });
    let err = tier.append(&t, batch(3, 3, 1)).await.expect_err("store down");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_retryable());
    assert_eq!(err.context().topic.as_ref(), Some(&t));
    tier.clear_index_cache();
    let err = tier.read(&t, 0, 3, ReadLimit::unbounded()).await.expect_err("store down");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    // Every other call failing: the metadata GET succeeds (and is cached), the data GET
    // fails; a retry (as the router would run) then needs only the data GET.
    faulty.set_faults(Faults { fail_every: Some(2), ..Faults::default() });
    let mut attempts = 0;
    let got = loop {
        attempts += 1;
        match tier.read(&t, 0, 3, ReadLimit::unbounded()).await {
            Ok(records) => break records,
            Err(e) if e.is_retryable() && attempts < 10 => continue,
            Err(e) => panic!("read kept failing: {e}"),
        }
    };
    assert_eq!((got.len(), attempts), (3, 2));
    faulty.set_faults(Faults::default());
    tier.append(&t, batch(3, 3, 1)).await.expect("append once the store is back");
    assert_eq!(tier.refresh(&t).await.expect("refresh"), OffsetRange::new(0, 6));
    assert_eq!(tier.read(&t, 0, 6, ReadLimit::unbounded()).await.expect("read").len(), 6);
    assert!(faulty.injected() >= 3);
}

#[tokio::test]
async fn expiry_deletes_old_segments_from_the_front_but_never_the_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("expire");
    let tier = three_segments(&dir, &t).await; // max timestamps 100, 200, 300
    let (deleted, range) = tier.expire_before(&t, 201).await.expect("expire");
    assert_eq!(deleted.len(), 2);
    assert_eq!(range, OffsetRange::new(8, 12));
    assert_eq!(tier.refresh(&t).await.expect("refresh"), OffsetRange::new(8, 12));
    let err = tier.read(&t, 0, 12, ReadLimit::unbounded()).await.expect_err("expired");
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    let (deleted, range) = tier.expire_before(&t, i64::MAX).await.expect("expire");
    assert!(deleted.is_empty(), "the last segment stays");
    assert_eq!(range, OffsetRange::new(8, 12));
    assert_eq!(tier.expire(&t, i64::MAX).await.expect("expiry off"), None, "off by default");
}

#[test]
fn config_parses_from_toml_and_never_prints_the_secret() {
    let config: ColdConfig = toml::from_str(
        r#"
        prefix = "archive"
        read_buffer = 2097152
        expiry = "30days"
        [backend]
        kind = "s3"
        bucket = "logs"
        endpoint = "http://127.0.0.1:9000"
        access_key_id = "AKIA"
        secret_access_key = "very-secret-value"
        allow_http = true
        [retry]
        max_retries = 3
        init_backoff = "50ms"
        "#,
    )
    .expect("parse");
    assert_eq!(config.read_buffer, 2 << 20);
    assert_eq!(config.retry.max_retries, 3);
    assert_eq!(config.expiry, Some(std::time::Duration::from_secs(30 * 86_400)));
    assert_eq!(config.part_size, ColdConfig::default().part_size);
    let shown = format!("{config:?}");
    assert!(!shown.contains("very-secret-value"), "{shown}");
    assert!(shown.contains("***"));
    // Neither the config nor a tier built from it (with its S3 client) prints the secret.
    let tier = ColdTier::open(config).expect("S3 client (no request is made)");
    let shown = format!("{tier:?}");
    assert!(!shown.contains("very-secret-value"), "{shown}");
    let empty: ColdConfig = toml::from_str("").expect("empty config");
    assert_eq!(empty, ColdConfig::default());
    let mut bad = ColdConfig::default();
    bad.part_size = 1 << 20;
    assert_eq!(bad.validate().expect_err("small parts").kind(), ErrorKind::InvalidInput);
}
