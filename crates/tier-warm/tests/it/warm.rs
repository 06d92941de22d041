//! The warm tier against a real Valkey primary with one replica (WAIT 1).

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::{batch, raw_client, shared_tier, topic};
use fred::prelude::{StreamsInterface, Value};
use futures::TryStreamExt;
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt, TierKind};
use tier_testkit::servers::SharedValkey;
use tier_warm::{Mode, Secret, WarmConfig, WarmTier};

/// Another tier on the same server and prefix, with no cached ranges.
async fn fresh_tier(valkey: &SharedValkey) -> WarmTier {
    WarmTier::connect(common::config(valkey.primary_url(), valkey.key_prefix()))
        .await
        .expect("second tier connects")
}

#[tokio::test]
async fn append_then_read_back_exactly() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("basic");
    assert_eq!(tier.kind(), TierKind::Warm);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(0));
    let b0 = batch(0, 5, "a");
    let b1 = batch(5, 3, "b");
    tier.append(&t, b0.clone()).await.unwrap();
    tier.append(&t, b1.clone()).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 8));

    let expected: Vec<_> = b0.records().chain(b1.records()).collect();
    let all = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all, expected);
    // From the middle of a batch, across the batch boundary, bounded by `to`.
    let mid = tier.read(&t, 3, 7, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(mid, expected[3..7].to_vec());
    // Bounded by count.
    let two = tier.read(&t, 4, u64::MAX, ReadLimit::records(2)).await.unwrap();
    assert_eq!(two, expected[4..6].to_vec());
    // At the end: empty. Past it: Trimmed.
    assert!(tier.read(&t, 8, u64::MAX, ReadLimit::unbounded()).await.unwrap().is_empty());
    let err = tier.read(&t, 9, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");

    // A second tier instance (no cache) sees the same range from the server.
    assert_eq!(fresh_tier(&valkey).await.range(&t).await.unwrap(), OffsetRange::new(0, 8));
}

#[tokio::test]
async fn stream_layout_is_one_entry_per_batch_with_base_offset_id() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("layout");
    let b = batch(0, 4, "x");
    tier.append(&t, b.clone()).await.unwrap();
    tier.append(&t, batch(4, 1, "y")).await.unwrap();
    let raw = raw_client(valkey.primary_url()).await;
    let key = format!("{}layout", valkey.key_prefix());
    let entries: Vec<(String, Vec<(String, Bytes)>)> =
        raw.xrange(key.as_str(), "-", "+", None).await.unwrap();
    let ids: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(ids, ["0-1", "4-1"]);
    assert_eq!(entries[0].1.len(), 1);
    assert_eq!(entries[0].1[0].0, "b");
    assert_eq!(entries[0].1[0].1, b.to_bytes());
}

#[tokio::test]
async fn append_position_rules() {
    let (_valkey, tier) = shared_tier().await;
    let t = topic("position");
    // An empty topic accepts any base offset: a fresh tier taking over a log.
    tier.append(&t, batch(100, 10, "a")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(100, 110));
    // A gap is refused and writes nothing.
    let err = tier.append(&t, batch(111, 1, "gap")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Below the range start (not held): refused too.
    let err = tier.append(&t, batch(50, 1, "low")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(100, 110));
    tier.append(&t, batch(110, 1, "next")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(100, 111));
}

#[tokio::test]
async fn identical_retry_succeeds_and_conflicting_append_is_fenced() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("idempotent");
    let b0 = batch(0, 3, "orig");
    tier.append(&t, b0.clone()).await.unwrap();
    tier.append(&t, batch(3, 2, "orig")).await.unwrap();
    // The same batch again: Ok, stored once.
    tier.append(&t, b0.clone()).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5));

    // A different batch at the same base: Fenced, the stored entry unchanged.
    let err = tier.append(&t, batch(0, 3, "other")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains("0-1"), "{err}");
    // A batch starting inside a stored one: Fenced as well.
    let err = tier.append(&t, batch(1, 2, "inside")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");

    let records = tier.read(&t, 0, 3, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records, b0.records().collect::<Vec<_>>());

    // Another writer (a second tier with a stale view) retrying and conflicting.
    let other = fresh_tier(&valkey).await;
    other.append(&t, batch(3, 2, "orig")).await.unwrap();
    let err = other.append(&t, batch(3, 2, "changed")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    let raw = raw_client(valkey.primary_url()).await;
    let len: u64 = raw.xlen(format!("{}idempotent", valkey.key_prefix())).await.unwrap();
    assert_eq!(len, 2);
}

#[tokio::test]
async fn trim_keeps_the_batch_containing_the_offset() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("trim");
    for i in 0..10 {
        tier.append(&t, batch(i * 10, 10, "t")).await.unwrap();
    }
    // 35 lies in the batch 30..40: batches 0, 10, 20 go.
    assert_eq!(tier.trim_before(&t, 35).await.unwrap(), 3);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(30, 100));
    // A fresh view of the server agrees.
    assert_eq!(fresh_tier(&valkey).await.range(&t).await.unwrap(), OffsetRange::new(30, 100));
    let err = tier.read(&t, 29, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
    let records = tier.read(&t, 30, 45, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (30..45).collect::<Vec<_>>());
    // Trimming at a batch boundary removes exactly the batches below it.
    assert_eq!(tier.trim_before(&t, 50).await.unwrap(), 2);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(50, 100));
    // Trimming below the start removes nothing.
    assert_eq!(tier.trim_before(&t, 10).await.unwrap(), 0);
    // Trimming past the end keeps the newest batch, so the end stays known.
    assert_eq!(tier.trim_before(&t, 1000).await.unwrap(), 4);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(90, 100));
    tier.append(&t, batch(100, 1, "after")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(90, 101));
}

/// `restart_at` empties the stream so that it takes its next batch past offsets no tier
/// holds any more (the router's way to continue warm past a reported loss); the next batch
/// is written and read back, also by a tier with no cached range, and a restart below what
/// the stream holds is refused.
#[tokio::test]
async fn restart_at_lets_the_stream_continue_past_a_gap() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("restart");
    for i in 0..3 {
        tier.append(&t, batch(i * 10, 10, "r")).await.unwrap();
    }
    let err = tier.restart_at(&t, 25).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 30));
    // Offsets [30, 1000) are held by no tier: the stream continues at 1000.
    let err = tier.append(&t, batch(1000, 5, "after")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(tier.restart_at(&t, 1000).await.unwrap(), 3);
    assert!(tier.range(&t).await.unwrap().is_empty());
    tier.append(&t, batch(1000, 5, "after")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(1000, 1005));
    let fresh = fresh_tier(&valkey).await;
    assert_eq!(fresh.range(&t).await.unwrap(), OffsetRange::new(1000, 1005));
    let records = fresh.read(&t, 1000, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (1000..1005).collect::<Vec<_>>());
    let replayed: Vec<RecordBatch> = fresh.recovery_stream(&t, 0).try_collect().await.unwrap();
    assert_eq!(replayed, vec![batch(1000, 5, "after")]);
    // The same from a tier whose range is not cached: a restart, then the next batch.
    fresh.append(&t, batch(1005, 5, "more")).await.unwrap();
    assert_eq!(fresh_tier(&valkey).await.restart_at(&t, 2000).await.unwrap(), 2);
    tier.append(&t, batch(2000, 1, "again")).await.unwrap();
    assert_eq!(fresh_tier(&valkey).await.range(&t).await.unwrap(), OffsetRange::new(2000, 2001));
}

#[tokio::test]
async fn pages_through_100k_records_in_bounded_reads() {
    let (valkey, _) = shared_tier().await;
    let mut config = common::config(valkey.primary_url(), valkey.key_prefix());
    config.page_size = 7;
    config.wait_replicas = 0;
    let tier = WarmTier::connect(config).await.unwrap();
    let t = topic("paging");
    for i in 0..1000u64 {
        tier.append(&t, batch(i * 100, 100, "p")).await.unwrap();
    }
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 100_000));
    let mut next = 0u64;
    let mut reads = 0;
    while next < 100_000 {
        let records = tier.read(&t, next, u64::MAX, ReadLimit::records(999)).await.unwrap();
        assert!(!records.is_empty() && records.len() <= 999);
        for r in &records {
            assert_eq!(r.offset, next);
            assert_eq!(r.timestamp, 1000 + next as i64);
            assert_eq!(r.payload, format!("p-{next}").as_bytes());
            next += 1;
        }
        reads += 1;
    }
    assert_eq!(reads, 100_000usize.div_ceil(999));
    assert!(tier.read(&t, 100_000, u64::MAX, ReadLimit::unbounded()).await.unwrap().is_empty());
    // A byte limit: payloads "p-NNNNN" of 7 bytes plus keys on even offsets.
    let bounded =
        tier.read(&t, 50_000, u64::MAX, ReadLimit { max_records: usize::MAX, max_bytes: 100 }).await.unwrap();
    assert!(!bounded.is_empty());
    let bytes: usize = bounded
        .iter()
        .map(|r| {
            r.payload.len()
                + r.key.as_ref().map_or(0, |k| k.len())
                + r.headers.iter().map(|h| h.name.len() + h.value.len()).sum::<usize>()
        })
        .sum();
    assert!(bytes <= 100, "{bytes}");

    // Recovery replays every batch from the one containing the offset.
    let replayed: Vec<RecordBatch> = tier.recovery_stream(&t, 99_950).try_collect().await.unwrap();
    assert_eq!(replayed.iter().map(|b| b.base_offset()).collect::<Vec<_>>(), vec![99_900]);
    let replayed: Vec<RecordBatch> = tier.recovery_stream(&t, 0).try_collect().await.unwrap();
    assert_eq!(replayed.len(), 1000);
    assert!(replayed.windows(2).all(|w| w[0].end_offset() == w[1].base_offset()));
    assert_eq!(replayed[500], batch(50_000, 100, "p"));
}

#[tokio::test]
async fn offset_for_timestamp_uses_the_running_maximum() {
    let (_valkey, tier) = shared_tier().await;
    let t = topic("time");
    assert_eq!(tier.offset_for_timestamp(&t, 0).await.unwrap(), None);
    // Timestamps 1000 + offset for 0..20, then a batch with out-of-order times.
    tier.append(&t, batch(0, 10, "a")).await.unwrap();
    tier.append(&t, batch(10, 10, "b")).await.unwrap();
    let mut builder = tier_core::RecordBatchBuilder::new();
    for ts in [5000, 1500, 6000] {
        builder.push(ts, None, &[], b"x").unwrap();
    }
    tier.append(&t, builder.build(20).unwrap()).await.unwrap();
    assert_eq!(tier.offset_for_timestamp(&t, i64::MIN).await.unwrap(), Some(0));
    assert_eq!(tier.offset_for_timestamp(&t, 1013).await.unwrap(), Some(13));
    // 1500 is first reached by the running max at offset 20 (ts 5000), not at 21.
    assert_eq!(tier.offset_for_timestamp(&t, 1500).await.unwrap(), Some(20));
    assert_eq!(tier.offset_for_timestamp(&t, 5500).await.unwrap(), Some(22));
    assert_eq!(tier.offset_for_timestamp(&t, 6001).await.unwrap(), None);
}

#[tokio::test]
async fn garbage_entry_is_reported_as_corruption_naming_key_and_id() {
    let (valkey, tier) = shared_tier().await;
    let t = topic("garbage");
    tier.append(&t, batch(0, 5, "ok")).await.unwrap();
    let raw = raw_client(valkey.primary_url()).await;
    let key = format!("{}garbage", valkey.key_prefix());
    let _: Value = raw
        .xadd(key.as_str(), false, None::<()>, "5-1", vec![("b", Bytes::from_static(b"not a batch"))])
        .await
        .unwrap();

    // The good batch still reads.
    assert_eq!(tier.read(&t, 0, 5, ReadLimit::unbounded()).await.unwrap().len(), 5);
    for from in [3, 5] {
        let err = tier.read(&t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&key) && msg.contains("5-1"), "{msg}");
    }
    let err = tier.recovery_stream(&t, 0).try_collect::<Vec<_>>().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");

    // A valid batch whose ID does not match its base offset, and a gap.
    let t2 = topic("misplaced");
    let key2 = format!("{}misplaced", valkey.key_prefix());
    tier.append(&t2, batch(0, 5, "ok")).await.unwrap();
    let _: Value = raw
        .xadd(key2.as_str(), false, None::<()>, "9-1", vec![("b", batch(9, 1, "gap").to_bytes())])
        .await
        .unwrap();
    let err = tier.read(&t2, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("9-1") && err.to_string().contains(&key2), "{err}");
}

#[test]
fn config_debug_never_shows_passwords() {
    let mut config = WarmConfig::standalone("rediss://alice:url-pass-123@cache.example:6380/0");
    config.password = Some(Secret::new("hunter2-secret"));
    config.username = Some("alice".into());
    let debug = format!("{config:?}");
    assert!(!debug.contains("hunter2-secret"), "{debug}");
    assert!(!debug.contains("url-pass-123"), "{debug}");
    assert!(debug.contains("alice") && debug.contains("cache.example:6380"), "{debug}");
    assert_eq!(format!("{}", Secret::new("s3cr3t")), "***");
    assert_eq!(format!("{:?}", Secret::new("s3cr3t")), "\"***\"");
}

#[test]
fn config_loads_from_toml_with_defaults() {
    let config: WarmConfig = toml::from_str("").unwrap();
    assert_eq!(config, WarmConfig::default());
    assert_eq!(config.key_prefix, "tierlog:");
    assert_eq!(config.wait_replicas, 1);
    assert_eq!(config.wait_timeout, Duration::from_millis(100));
    let config: WarmConfig = toml::from_str(
        r#"
        urls = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
        mode = { sentinel = { service_name = "tierlog" } }
        password = "pw"
        wait_replicas = 2
        wait_timeout = "250ms"
        command_timeout = "3s"
        page_size = 16
        [reconnect]
        max_attempts = 5
        "#,
    )
    .unwrap();
    assert_eq!(config.mode, Mode::Sentinel { service_name: "tierlog".into() });
    assert_eq!(config.password.as_ref().map(Secret::expose), Some("pw"));
    assert_eq!(config.wait_timeout, Duration::from_millis(250));
    assert_eq!(config.command_timeout, Duration::from_secs(3));
    assert_eq!(config.reconnect.max_attempts, 5);
    assert_eq!(config.reconnect.min_backoff, Duration::from_millis(100));
    // Round trip through TOML keeps everything.
    let text = toml::to_string(&config).unwrap();
    assert_eq!(toml::from_str::<WarmConfig>(&text).unwrap(), config);
    assert!(toml::from_str::<WarmConfig>("bogus = 1").is_err());
}
