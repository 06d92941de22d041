//! Helpers shared by tier-cold's test binaries.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use tier_cold::{BackendConfig, ColdConfig, Secret};
use tier_core::segment::{SegmentHeader, SegmentWriter};
use tier_core::{Offset, Record, RecordBatch, TopicName};
use tier_testkit::servers::{Azurite, GcsEmulator, SharedS3};

pub fn topic(name: &str) -> TopicName {
    TopicName::new(name).expect("valid topic name")
}

/// A local object store rooted at `dir/store` (created).
pub fn local_store(dir: &Path) -> Arc<dyn ObjectStore> {
    let root = dir.join("store");
    std::fs::create_dir_all(&root).expect("store dir");
    Arc::new(LocalFileSystem::new_with_prefix(root).expect("local store"))
}

/// Defaults with the smallest multipart settings S3 allows (5 MiB parts above 5 MiB).
pub fn small_config() -> ColdConfig {
    let mut config = ColdConfig::default();
    config.multipart_threshold = 5 << 20;
    config.part_size = 5 << 20;
    config
}

/// A config for the shared moto server and its fresh bucket, with few retries.
pub fn s3_config(s3: &SharedS3) -> ColdConfig {
    let settings = s3.settings();
    let mut config = small_config();
    config.backend = BackendConfig::S3 {
        bucket: s3.bucket().to_string(),
        region: settings.region.clone(),
        endpoint: Some(settings.endpoint.clone()),
        access_key_id: Some(settings.access_key_id.clone()),
        secret_access_key: Some(Secret::new(settings.secret_access_key.clone())),
        allow_http: true,
        encryption: None,
    };
    config.retry.max_retries = 2;
    config
}

/// The container every Azurite test stores into (each test runs its own Azurite).
pub const AZURE_CONTAINER: &str = "tierlog";
/// The bucket every GCS emulator test stores into (each test runs its own emulator).
pub const GCS_BUCKET: &str = "tierlog";

/// A private Azurite with the container [`AZURE_CONTAINER`] created, and a config for it
/// with few retries. Keep the server alive while the config is used.
pub async fn azurite() -> (Azurite, ColdConfig) {
    let server = Azurite::start().await.expect("Azurite for tests");
    server.create_container(AZURE_CONTAINER).await.expect("create container");
    let settings = server.settings();
    let mut config = small_config();
    config.backend = BackendConfig::Azure {
        account: settings.account.clone(),
        container: AZURE_CONTAINER.into(),
        access_key: Some(Secret::new(settings.access_key.clone())),
        endpoint: Some(settings.account_url.clone()),
        allow_http: true,
    };
    config.retry.max_retries = 2;
    (server, config)
}

/// A private GCS emulator (fake-gcs-server) with the bucket [`GCS_BUCKET`] created, and
/// an anonymous config for it with few retries.
pub async fn gcs_emulator() -> (GcsEmulator, ColdConfig) {
    let server = GcsEmulator::start().await.expect("GCS emulator (fake-gcs-server) for tests");
    server.create_bucket(GCS_BUCKET).await.expect("create bucket");
    let mut config = small_config();
    config.backend = BackendConfig::Gcs {
        bucket: GCS_BUCKET.into(),
        service_account_path: None,
        base_url: Some(server.endpoint()),
        anonymous: true,
        allow_http: true,
    };
    config.retry.max_retries = 2;
    (server, config)
}

/// `count` records from `base` whose payloads are `payload_len` bytes (the same shared
/// buffer, so building large segments is cheap) and timestamps `1000 + 10 * offset`.
pub fn records(base: Offset, count: usize, payload_len: usize) -> Vec<Record> {
    let payload = Bytes::from((0..payload_len).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    (0..count as u64)
        .map(|i| {
            let offset = base + i;
            Record {
                offset,
                timestamp: 1000 + 10 * offset as i64,
                key: Some(Bytes::from(format!("k{offset}"))),
                headers: vec![],
                payload: payload.clone(),
            }
        })
        .collect()
}

/// Writes a sealed segment of `topic` at `path` holding `batches` batches of
/// `per_batch` records of `payload_len` bytes from `base`; returns the end offset.
pub fn write_segment(
    path: &Path,
    topic: &TopicName,
    base: Offset,
    batches: usize,
    per_batch: usize,
    payload_len: usize,
) -> Offset {
    let file =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).expect("create segment"));
    let header = SegmentHeader::new(topic.clone(), base, 0);
    let mut writer = SegmentWriter::new(file, &header).expect("segment writer");
    let mut next = base;
    let template = records(0, per_batch, payload_len);
    for _ in 0..batches {
        let recs: Vec<Record> = template
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                offset: next + i as u64,
                timestamp: 1000 + 10 * (next + i as u64) as i64,
                key: Some(Bytes::from(format!("k{}", next + i as u64))),
                ..r.clone()
            })
            .collect();
        let batch = RecordBatch::from_records(next, &recs).expect("batch");
        writer.append(&batch).expect("append");
        next = batch.end_offset();
    }
    writer.seal().expect("seal");
    next
}

/// All objects (recursively) under `prefix` in `store`, sorted.
pub async fn all_objects(
    store: &dyn ObjectStore,
    prefix: Option<&object_store::path::Path>,
) -> Vec<(String, u64)> {
    use futures::TryStreamExt;
    let mut out: Vec<(String, u64)> =
        store.list(prefix).map_ok(|m| (m.location.to_string(), m.size)).try_collect().await.expect("list");
    out.sort();
    out
}

pub fn temp_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}
