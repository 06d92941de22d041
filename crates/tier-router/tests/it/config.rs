//! `StoreConfig` from TOML: defaults, unknown fields, validation naming the field, and
//! opening a store from a configuration.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use std::time::Duration;

use tier_core::{ErrorKind, StartPosition};
use tier_router::{NewRecord, RouterConfig, StoreConfig, TieredStore, WarmFailurePolicy};

#[test]
fn an_empty_document_is_a_hot_only_store_with_the_seed_defaults() {
    let config: StoreConfig = toml::from_str("").unwrap();
    assert_eq!(config, StoreConfig::default());
    assert!(config.warm.is_none() && config.cold.is_none());
    assert_eq!(config.hot.retention_time, Duration::from_secs(24 * 3600));
    assert_eq!(config.hot.retention_bytes, 10 << 30);
    let router = &config.router;
    assert_eq!(router.max_cached_closed_segments, 5);
    assert_eq!(router.warm_failure_policy, WarmFailurePolicy::Fail);
    config.validate().unwrap();

    let with_warm: StoreConfig = toml::from_str("[warm]\n").unwrap();
    let warm = with_warm.warm.unwrap();
    assert_eq!(warm.wait_replicas, 1);
    assert_eq!(warm.wait_timeout, Duration::from_millis(100));
}

#[test]
fn every_table_parses_and_unknown_fields_are_rejected() {
    let text = r#"
        [hot]
        data_dir = "/tmp/x/hot"
        [warm]
        urls = ["redis://127.0.0.1:7000"]
        [cold.backend]
        kind = "local"
        path = "/tmp/x/cold"
        [router]
        warm_failure_policy = "degrade"
        max_cached_closed_segments = 3
        retention_interval = "10s"
        export_retry = { initial = "50ms", max = "5s" }
    "#;
    let config: StoreConfig = toml::from_str(text).unwrap();
    assert_eq!(config.router.warm_failure_policy, WarmFailurePolicy::Degrade);
    assert_eq!(config.router.max_cached_closed_segments, 3);
    assert_eq!(config.router.retention_interval, Duration::from_secs(10));
    assert_eq!(config.router.export_retry.max, Duration::from_secs(5));
    assert!(config.cold.is_some());
    config.validate().unwrap();

    let err = toml::from_str::<StoreConfig>("[router]\nmax_cached_segments = 3\n").unwrap_err();
    assert!(err.to_string().contains("max_cached_segments"), "{err}");
    let err = toml::from_str::<StoreConfig>("[tepid]\n").unwrap_err();
    assert!(err.to_string().contains("tepid"), "{err}");
}

#[test]
fn validation_names_the_field() {
    // The defaults with one field changed.
    let changed = |change: fn(&mut RouterConfig)| {
        let mut router = RouterConfig::default();
        change(&mut router);
        router
    };
    let cases = [
        (changed(|r| r.max_cached_closed_segments = 0), "router.max_cached_closed_segments must be >= 1"),
        (changed(|r| r.retention_interval = Duration::ZERO), "router.retention_interval"),
        (changed(|r| r.max_group_bytes = 0), "router.max_group_bytes"),
        (changed(|r| r.read_batch_records = 0), "router.read_batch_records"),
    ];
    for (router, want) in cases {
        let err = StoreConfig::default().with_router(router).validate().unwrap_err();
        assert!(err.to_string().starts_with(want), "{err}");
    }
    let mut config = StoreConfig::default();
    config.router.export_retry.max = Duration::from_millis(1);
    assert_eq!(config.validate().unwrap_err().field, "router.export_retry.max");
}

#[tokio::test]
async fn a_store_opens_from_a_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[hot]\ndata_dir = {:?}\n[cold.backend]\nkind = \"local\"\npath = {:?}\n",
        dir.path().join("hot"),
        dir.path().join("cold")
    );
    let config: StoreConfig = toml::from_str(&text).unwrap();
    let store = TieredStore::open(config).await.unwrap();
    let topic = store.topic("configured").await.unwrap();
    let range = topic.append(vec![NewRecord::new(1, "a"), NewRecord::new(2, "b")]).await.unwrap();
    assert_eq!((range.start, range.end), (0, 2));
    // The background exporter (on by default) may store the segment first; either way
    // cold holds it once export_now returns.
    let exported = store.export_now("configured").await.unwrap();
    assert!(exported.iter().all(|e| (e.range.start, e.range.end) == (0, 2)), "{exported:?}");
    assert_eq!(topic.ranges().await.unwrap().cold.map(|c| c.end), Some(2));
    let _ = topic.reader(StartPosition::Earliest).await.unwrap();
    assert_eq!(store.topic("bad/name").await.unwrap_err().kind(), ErrorKind::InvalidInput);
    store.close().await;
    assert_eq!(topic.append(vec![NewRecord::new(3, "c")]).await.unwrap_err().kind(), ErrorKind::Closed);

    let mut router = RouterConfig::default();
    router.max_cached_closed_segments = 0;
    let bad = StoreConfig::hot_only(dir.path().join("hot2")).with_router(router);
    let err = TieredStore::open(bad).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.report().to_string().contains("router.max_cached_closed_segments"), "{}", err.report());
}

/// Opening from a configuration probes the cold tier (one listing, no retries): an
/// unreachable S3 is one `Unavailable` naming it at once, even with no topic to recover.
#[tokio::test]
async fn an_unreachable_cold_tier_fails_the_open_from_a_configuration_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config: StoreConfig = toml::from_str(&format!(
        "[hot]\ndata_dir = {:?}\n[cold]\nbackend = {{ kind = \"s3\", bucket = \"b\", endpoint = \
         \"http://127.0.0.1:1\", allow_http = true, access_key_id = \"a\", secret_access_key = \"s\" }}\n",
        dir.path().join("hot")
    ))
    .unwrap();
    let err = TieredStore::open(config).await.expect_err("cold is unreachable");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("S3 bucket b at http://127.0.0.1:1"), "{err}");
}
