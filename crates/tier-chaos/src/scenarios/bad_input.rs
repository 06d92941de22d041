//! Scenario 6, bad input: invalid topic names (path traversal, NUL, overlong), an
//! oversized record, malformed and contradictory configuration, offsets outside a
//! tier's range, wrong Valkey credentials and a missing S3 bucket. Each must be a clear
//! error that writes nothing, while the store keeps serving a healthy topic.

use std::{path::Path, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::StreamExt;
use tier_cold::{BackendConfig, ColdConfig, ColdTier, Secret};
use tier_core::{ErrorKind, ReadLimit, StartPosition, TierError, TopicName, batch::MAX_BATCH_LEN};
use tier_hot::HotConfig;
use tier_router::{NewRecord, StoreConfig, TieredStore};
use tier_warm::WarmConfig;

use crate::{ChaosError, ScenarioResult, deploy::Servers, payload, scenarios::temp_dir};

const GOOD: &str = "chaos-good";

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Appends one record to the healthy topic and reads everything back; `Err` says why
/// the store stopped serving it.
async fn serve_good(store: &TieredStore, seq: &mut u64) -> Result<(), String> {
    let topic = store.topic(GOOD).await.map_err(|e| e.to_string())?;
    let id = payload::RecordId { writer: 1, seq: *seq };
    let range =
        topic.append(vec![NewRecord::new(1, payload::encode(id))]).await.map_err(|e| e.to_string())?;
    *seq += 1;
    let mut reader = topic.reader(StartPosition::Offset(0)).await.map_err(|e| e.to_string())?;
    for expected in 0..range.end {
        let record = reader.next().await.ok_or("reader ended")?.map_err(|e| e.to_string())?;
        let got = payload::decode(&record.payload).map_err(|e| e.to_string())?;
        if record.offset != expected || got.seq != expected {
            return Err(format!("offset {expected} holds {got:?} at {}", record.offset));
        }
    }
    Ok(())
}

fn expect_kind(
    r: &mut ScenarioResult,
    what: &str,
    outcome: Result<impl std::fmt::Debug, TierError>,
    kind: ErrorKind,
) {
    r.iterations += 1;
    match outcome {
        Err(e) if e.kind() == kind => {}
        Err(e) => r.fail(format!("{what}: expected {kind:?}, got {:?}: {e}", e.kind())),
        Ok(v) => r.fail(format!("{what}: accepted ({v:?})")),
    }
}

/// Runs the bad-input scenario under `base` with the run's servers.
pub async fn run(servers: &Servers, base: &Path) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new("bad-input hot+cold");
    let dir = temp_dir(base, "bad-")?;
    let hot_dir = dir.path().join("hot");
    let config = StoreConfig::default()
        .with_hot(HotConfig::new(&hot_dir))
        .with_cold(ColdConfig::local(dir.path().join("cold")));
    let store = TieredStore::open(config.clone()).await.map_err(|e| ChaosError::tier("opening", e))?;
    let mut seq = 0;
    if let Err(e) = serve_good(&store, &mut seq).await {
        return Err(ChaosError::Other(format!("the healthy topic does not work to begin with: {e}")));
    }
    let before = listing(&hot_dir);
    let outside = listing(dir.path());

    // Topic names.
    let overlong = "x".repeat(300);
    for name in ["../escape", "a/b", "a\0b", overlong.as_str(), "", ".", "..", "/abs"] {
        expect_kind(
            &mut r,
            &format!("topic name {name:?}"),
            store.topic(name).await.map(|_| ()),
            ErrorKind::InvalidInput,
        );
    }
    if listing(&hot_dir) != before || listing(dir.path()) != outside {
        r.fail("an invalid topic name created a file or directory");
    }

    // An oversized record.
    let good = store.topic(GOOD).await.map_err(|e| ChaosError::tier("opening the topic", e))?;
    let end_before = good.high_watermark();
    let huge = NewRecord::new(1, Bytes::from(vec![7u8; MAX_BATCH_LEN + 1]));
    expect_kind(
        &mut r,
        "a record larger than MAX_BATCH_LEN",
        good.append(vec![huge]).await,
        ErrorKind::InvalidInput,
    );
    if good.high_watermark() != end_before {
        r.fail("the oversized record moved the commit point");
    }

    // Offsets outside the WAL's range.
    let name = TopicName::new(GOOD).map_err(|e| ChaosError::tier("topic name", e))?;
    let end = good.high_watermark();
    let beyond = store.wal().read(&name, end + 10, end + 20, ReadLimit::unbounded()).await;
    expect_kind(&mut r, "a WAL read beyond the end", beyond, ErrorKind::Trimmed);

    // Configuration.
    let bad_dir = dir.path().join("never");
    let mut configs: Vec<(&str, StoreConfig)> = Vec::new();
    let mut c = StoreConfig::hot_only(bad_dir.join("hot"));
    c.hot.segment_bytes = 0;
    configs.push(("hot.segment_bytes = 0", c));
    let mut c = StoreConfig::hot_only(bad_dir.join("hot"));
    c.router.max_cached_closed_segments = 0;
    configs.push(("router.max_cached_closed_segments = 0", c));
    let mut c = StoreConfig::hot_only(bad_dir.join("hot"));
    c.router.export_retry.max = Duration::from_millis(1);
    c.router.export_retry.initial = Duration::from_secs(1);
    configs.push(("export_retry.max < initial", c));
    let mut c = StoreConfig::hot_only(bad_dir.join("hot"));
    let mut cold = ColdConfig::local(bad_dir.join("cold"));
    cold.part_size = 1;
    c.cold = Some(cold);
    configs.push(("cold.part_size = 1", c));
    for (what, c) in configs {
        expect_kind(&mut r, what, TieredStore::open(c).await.map(|_| ()), ErrorKind::InvalidInput);
    }
    if bad_dir.exists() {
        r.fail("an invalid configuration created its data directory");
    }
    for (what, text) in [
        ("a string for a number", "[hot]\nsegment_bytes = \"big\"\n"),
        ("an unknown field", "[router]\nbogus = 1\n"),
        ("an unknown policy", "[router]\nwarm_failure_policy = \"maybe\"\n"),
        ("broken TOML", "[hot\n"),
    ] {
        r.iterations += 1;
        if let Ok(c) = toml::from_str::<StoreConfig>(text) {
            r.fail(format!("config with {what} parsed: {c:?}"));
        }
    }

    // Wrong Valkey credentials; a bucket that does not exist.
    let mut warm = WarmConfig::standalone(servers.valkey.primary_url());
    // The test server has no password; a user it does not know fails AUTH all the same.
    warm.username = Some("chaos-nobody".into());
    warm.password = Some(tier_warm::Secret::new("wrong-password"));
    warm.connect_timeout = Duration::from_secs(2);
    let c = StoreConfig::hot_only(dir.path().join("w/hot")).with_warm(warm);
    timed(&mut r, "wrong Valkey credentials", TieredStore::open_recovering(c, vec![name.clone()])).await;
    let s3 = servers.s3.settings();
    let mut cold = ColdConfig::new(BackendConfig::S3 {
        bucket: "chaos-no-such-bucket".into(),
        region: s3.region.clone(),
        endpoint: Some(s3.endpoint.clone()),
        access_key_id: Some(s3.access_key_id.clone()),
        secret_access_key: Some(Secret::new(s3.secret_access_key.clone())),
        allow_http: true,
        encryption: None,
    });
    cold.retry.max_retries = 1;
    let cold_tier = ColdTier::open(cold).map_err(|e| ChaosError::tier("building the S3 cold tier", e))?;
    let open = TieredStore::builder()
        .hot(HotConfig::new(dir.path().join("s/hot")))
        .cold(Arc::new(cold_tier))
        .topics([name.clone()])
        .open();
    timed(&mut r, "a missing S3 bucket", open).await;

    // The healthy topic still works after all of that.
    r.iterations += 1;
    if let Err(e) = serve_good(&store, &mut seq).await {
        r.fail(format!("the healthy topic stopped working: {e}"));
    }
    r.acked = seq;
    store.close().await;
    r.notes.push(
        "moto accepts any S3 credentials, so a missing bucket stands in for wrong S3 credentials".into(),
    );
    Ok(r)
}

/// `open` must fail within 20 s with any clear error.
async fn timed(
    r: &mut ScenarioResult,
    what: &str,
    open: impl std::future::Future<Output = Result<TieredStore, TierError>>,
) {
    r.iterations += 1;
    match tokio::time::timeout(Duration::from_secs(20), open).await {
        Err(_) => r.fail(format!("{what}: opening hung for 20 s instead of failing")),
        Ok(Ok(store)) => {
            store.close().await;
            r.fail(format!("{what}: the store opened"));
        }
        Ok(Err(e)) => r.notes.push(format!("{what}: {:?}: {}", e.kind(), first_line(&e.to_string()))),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).chars().take(200).collect()
}
