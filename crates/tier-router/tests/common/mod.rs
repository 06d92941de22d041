//! Deployments (which tiers, on which servers) and helpers shared by the router's tests.
#![allow(dead_code, unreachable_pub)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tempfile::TempDir;
use tier_cold::{BackendConfig, ColdConfig, ColdTier, Secret};
use tier_core::{OffsetRange, Record, TierError, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{ColdBackend, NewRecord, RouterConfig, Source, TieredStore, Topic, WarmBackend};
use tier_testkit::servers::{Azurite, SharedS3, SharedValkey, TlsOptions, ValkeyCluster, ValkeyTls};
use tier_warm::{Mode, WarmConfig, WarmTier};

/// Which tiers a deployment enables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiers {
    Hot,
    HotCold,
    HotWarm,
    HotWarmCold,
}

impl Tiers {
    pub fn warm(self) -> bool {
        matches!(self, Tiers::HotWarm | Tiers::HotWarmCold)
    }
    pub fn cold(self) -> bool {
        matches!(self, Tiers::HotCold | Tiers::HotWarmCold)
    }
}

/// Where the cold tier stores objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdOn {
    Local,
    S3,
    /// A private Azurite (Azure Blob emulator) started for the deployment.
    Azure,
}

/// A store's tiers on real servers, with its own data directory. Re-opening the store
/// keeps the same warm and cold backends (same servers, same keys and bucket).
pub struct Deployment {
    pub tiers: Tiers,
    pub dir: TempDir,
    pub warm: Option<Arc<dyn WarmBackend>>,
    pub cold: Option<Arc<dyn ColdBackend>>,
    pub router: RouterConfig,
    pub hot: HotConfig,
    _valkey: Option<SharedValkey>,
    _cluster: Option<ValkeyCluster>,
    _tls: Option<ValkeyTls>,
    _s3: Option<SharedS3>,
    _azurite: Option<Azurite>,
}

/// Warm settings for tests: WAIT 1 replica within 200 ms, short timeouts.
pub fn warm_config(url: &str, key_prefix: &str) -> WarmConfig {
    let mut config = WarmConfig::standalone(url);
    config.key_prefix = key_prefix.to_owned();
    config.wait_replicas = 1;
    config.wait_timeout = Duration::from_millis(200);
    config.command_timeout = Duration::from_secs(1);
    config.connect_timeout = Duration::from_secs(1);
    config.reconnect.min_backoff = Duration::from_millis(20);
    config.reconnect.max_backoff = Duration::from_millis(200);
    config
}

pub fn s3_cold_config(s3: &SharedS3) -> ColdConfig {
    let settings = s3.settings();
    let mut config = ColdConfig::new(BackendConfig::S3 {
        bucket: s3.bucket().to_string(),
        region: settings.region.clone(),
        endpoint: Some(settings.endpoint.clone()),
        access_key_id: Some(settings.access_key_id.clone()),
        secret_access_key: Some(Secret::new(settings.secret_access_key.clone())),
        allow_http: true,
        encryption: None,
    });
    config.retry.max_retries = 2;
    config
}

/// The container the Azure deployments store into.
pub const AZURE_CONTAINER: &str = "suite";

/// A cold config for container [`AZURE_CONTAINER`] (created here) of `azurite`'s
/// development account.
pub async fn azure_cold_config(azurite: &Azurite) -> ColdConfig {
    azurite.create_container(AZURE_CONTAINER).await.expect("create the Azurite container");
    let settings = azurite.settings();
    let mut config = ColdConfig::new(BackendConfig::Azure {
        account: settings.account.clone(),
        container: AZURE_CONTAINER.into(),
        access_key: Some(Secret::new(settings.access_key.clone())),
        endpoint: Some(settings.account_url.clone()),
        allow_http: true,
    });
    config.retry.max_retries = 2;
    config
}

impl Deployment {
    pub async fn new(tiers: Tiers, cold_on: ColdOn) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut valkey = None;
        let mut s3 = None;
        let mut azurite = None;
        let warm: Option<Arc<dyn WarmBackend>> = if tiers.warm() {
            let server = SharedValkey::get().await.expect("a Valkey server (install valkey-server)");
            let tier = WarmTier::connect(warm_config(server.primary_url(), server.key_prefix()))
                .await
                .expect("connect to Valkey");
            valkey = Some(server);
            Some(Arc::new(tier))
        } else {
            None
        };
        let cold: Option<Arc<dyn ColdBackend>> = if tiers.cold() {
            let config = match cold_on {
                ColdOn::Local => ColdConfig::local(dir.path().join("cold")),
                ColdOn::S3 => {
                    let server =
                        SharedS3::get().await.expect("a moto S3 server (pip install 'moto[server]')");
                    let config = s3_cold_config(&server);
                    s3 = Some(server);
                    config
                }
                ColdOn::Azure => {
                    let server = Azurite::start()
                        .await
                        .expect("Azurite (`cargo xtask deps` installs it into target/azurite)");
                    let config = azure_cold_config(&server).await;
                    azurite = Some(server);
                    config
                }
            };
            Some(Arc::new(ColdTier::open(config).expect("cold tier")))
        } else {
            None
        };
        let mut hot = HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never);
        hot.segment_age = Duration::from_secs(3600);
        Self {
            tiers,
            dir,
            warm,
            cold,
            router: RouterConfig::default(),
            hot,
            _valkey: valkey,
            _cluster: None,
            _tls: None,
            _s3: s3,
            _azurite: azurite,
        }
    }

    /// [`new`](Self::new) with warm on a private Valkey Cluster (three primaries, a
    /// replica each) in cluster mode instead of the shared server.
    pub async fn on_cluster(tiers: Tiers, cold_on: ColdOn) -> Self {
        assert!(tiers.warm(), "a cluster deployment has a warm tier");
        let without_warm = if tiers.cold() { Tiers::HotCold } else { Tiers::Hot };
        let mut d = Self::new(without_warm, cold_on).await;
        let cluster = ValkeyCluster::start().await.expect("a Valkey Cluster (install valkey-server)");
        let urls = cluster.urls();
        let mut config = warm_config(&urls[0], "suite:");
        config.urls = urls;
        config.mode = Mode::Cluster;
        let tier = WarmTier::connect(config).await.expect("connect to the Valkey Cluster");
        d.tiers = tiers;
        d.warm = Some(Arc::new(tier));
        d._cluster = Some(cluster);
        d
    }

    /// [`new`](Self::new) with warm on a private Valkey that speaks TLS only (a primary
    /// and a replica, certificates from a CA the harness makes, client certificates
    /// required), logged into as an ACL user holding exactly the documented commands
    /// (`tier_warm::ACL_COMMANDS`) on the deployment's keys.
    pub async fn on_tls(tiers: Tiers, cold_on: ColdOn) -> Self {
        const USER: &str = "suite";
        const PASSWORD: &str = "suite-pa55word";
        assert!(tiers.warm(), "a TLS deployment has a warm tier");
        let without_warm = if tiers.cold() { Tiers::HotCold } else { Tiers::Hot };
        let mut d = Self::new(without_warm, cold_on).await;
        let valkey = ValkeyTls::start(TlsOptions::new().auth_clients(true).replica(true))
            .await
            .expect("a Valkey over TLS (install valkey-server)");
        valkey
            .set_acl_user(USER, PASSWORD, "suite:*", tier_warm::ACL_COMMANDS)
            .await
            .expect("the harness creates the ACL user");
        let mut config = warm_config(&valkey.url(), "suite:");
        let files = valkey.files();
        config.tls_ca_file = Some(files.ca.clone());
        config.tls_cert_file = Some(files.client_cert.clone());
        config.tls_key_file = Some(files.client_key.clone());
        config.username = Some(USER.to_owned());
        config.password = Some(Secret::new(PASSWORD));
        // TLS handshakes and replication over TLS, on two cores shared with the rest of the
        // test run, can take a `WAIT` past the shared deployments' 200 ms; no suite test
        // stops the replica, so a longer bound never slows one.
        config.wait_timeout = Duration::from_secs(5);
        config.command_timeout = Duration::from_secs(5);
        config.connect_timeout = Duration::from_secs(5);
        let tier = WarmTier::connect(config).await.expect("connect to Valkey over TLS as the ACL user");
        d.tiers = tiers;
        d.warm = Some(Arc::new(tier));
        d._tls = Some(valkey);
        d
    }

    /// The WAL directory.
    pub fn hot_dir(&self) -> PathBuf {
        self.hot.data_dir.clone()
    }

    /// Opens the store without background tasks (tests drive them), recovering `topics`.
    pub async fn open(&self, topics: &[&str]) -> TieredStore {
        self.try_open(topics, false).await.expect("open the store")
    }

    pub async fn try_open(&self, topics: &[&str], background: bool) -> Result<TieredStore, TierError> {
        let mut builder = TieredStore::builder()
            .hot(self.hot.clone())
            .router(self.router.clone())
            .background(background)
            .topics(topics.iter().map(|t| TopicName::new(t).expect("topic name")));
        if let Some(w) = &self.warm {
            builder = builder.warm(Arc::clone(w));
        }
        if let Some(c) = &self.cold {
            builder = builder.cold(Arc::clone(c));
        }
        builder.open().await
    }
}

/// Record number `offset` of a single-producer test: payload `r<offset>`, timestamp
/// `1000 + 10 * offset`, a key on even offsets.
pub fn rec(offset: u64) -> NewRecord {
    let r = NewRecord::new(1000 + 10 * offset as i64, format!("r{offset}"));
    if offset.is_multiple_of(2) { r.with_key(format!("k{offset}")) } else { r }
}

/// Records `from..to` as [`rec`] builds them, in one batch starting at `from`: what a
/// tier holds once the router appended them (for writing a tier's state by hand).
pub fn stored_batch(from: u64, to: u64) -> tier_core::RecordBatch {
    let records: Vec<Record> = (from..to)
        .map(|o| {
            let r = rec(o);
            Record { offset: o, timestamp: r.timestamp, key: r.key, headers: r.headers, payload: r.payload }
        })
        .collect();
    tier_core::RecordBatch::from_records(from, &records).expect("a batch")
}

/// Checks `record` is record number `record.offset` as [`rec`] built it.
pub fn check(record: &Record) {
    let want = rec(record.offset);
    assert_eq!(record.payload, want.payload, "payload of offset {}", record.offset);
    assert_eq!(record.timestamp, want.timestamp, "timestamp of offset {}", record.offset);
    assert_eq!(record.key, want.key, "key of offset {}", record.offset);
}

/// Appends records `from..to` in batches of `per_batch`, asserting the offsets assigned.
pub async fn append_range(topic: &Topic, from: u64, to: u64, per_batch: u64) {
    let mut at = from;
    while at < to {
        let end = (at + per_batch).min(to);
        let range = topic.append((at..end).map(rec).collect()).await.expect("append");
        assert_eq!(range, OffsetRange::new(at, end));
        at = end;
    }
}

/// Reads `count` records from `stream`, checks their content and offsets (dense from
/// `from`), and returns the runs of offsets each source served.
pub async fn slices(
    stream: &mut BoxStream<'static, Result<(Source, Record), TierError>>,
    from: u64,
    count: u64,
) -> Result<Vec<(Source, OffsetRange)>, TierError> {
    let mut out: Vec<(Source, OffsetRange)> = Vec::new();
    for i in 0..count {
        let (source, record) = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("the reader yields within 20 s")
            .expect("the reader does not end")?;
        assert_eq!(record.offset, from + i, "offsets are dense");
        check(&record);
        match out.last_mut() {
            Some((s, r)) if *s == source && r.end == record.offset => r.end += 1,
            _ => out.push((source, OffsetRange::new(record.offset, record.offset + 1))),
        }
    }
    Ok(out)
}

/// Builds the seed's "after WAL files have been pruned" layout, scaled, in a new store on
/// `d` (background off, `max_cached_closed_segments = 2`): topic `topic_name` holds records
/// `0..5000` ([`rec`]) in batches of 100 and segments [0, 3000), [3000, 4000),
/// [4000, 5000); cold (exported) [0, 4000), warm (trimmed) [3000, 5000), and the WAL
/// after retention [4000, 5000) with cold, nothing without. Asserts those ranges.
pub async fn pruned_history(d: &mut Deployment, topic_name: &str) -> (TieredStore, Topic) {
    d.router.max_cached_closed_segments = 2;
    let store = d.open(&[]).await;
    let topic = store.topic(topic_name).await.expect("open the topic");
    let name = topic.name().clone();
    append_range(&topic, 0, 3000, 100).await;
    store.wal().rotate(&name).await.expect("rotate");
    append_range(&topic, 3000, 4000, 100).await;
    store.wal().rotate(&name).await.expect("rotate");
    if d.tiers.cold() {
        let exported = store.export_now(topic_name).await.expect("export");
        let ranges: Vec<_> = exported.iter().map(|e| e.range).collect();
        assert_eq!(ranges, vec![r(0, 3000), r(3000, 4000)]);
        // Idempotent: nothing left to export.
        assert!(store.export_now(topic_name).await.expect("export").is_empty());
    }
    append_range(&topic, 4000, 5000, 100).await;
    store.wal().rotate(&name).await.expect("rotate");
    let trimmed = store.trim_warm_now().await.expect("trim warm");
    if d.tiers.warm() {
        assert_eq!(trimmed, vec![(name.clone(), 3000)]);
    }
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> =
        store.run_retention_now(later).await.expect("retention").iter().map(|s| s.range).collect();
    let ranges = topic.ranges().await.expect("ranges");
    assert_eq!(ranges.committed, 5000);
    match d.tiers {
        Tiers::HotWarmCold | Tiers::HotCold => {
            // Cold holds [0, 4000): the segment [4000, 5000) must stay in the WAL.
            assert_eq!(deleted, vec![r(0, 3000), r(3000, 4000)]);
            assert_eq!(ranges.hot, r(4000, 5000));
            assert_eq!(ranges.cold, Some(r(0, 4000)));
        }
        Tiers::HotWarm | Tiers::Hot => {
            assert_eq!(deleted, vec![r(0, 3000), r(3000, 4000), r(4000, 5000)]);
            assert_eq!(ranges.hot, r(5000, 5000));
        }
    }
    if d.tiers.warm() {
        assert_eq!(ranges.warm, Some(r(3000, 5000)));
    }
    (store, topic)
}

pub fn r(start: u64, end: u64) -> OffsetRange {
    OffsetRange::new(start, end)
}

pub fn bytes(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}
