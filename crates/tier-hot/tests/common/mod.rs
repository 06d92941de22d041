//! Helpers shared by the hot tier's tests.
// Test helpers outside #[test] functions unwrap too.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::Path;

use tier_core::{Offset, Record, RecordBatch, TopicName};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_testkit::conformance::{batch_of, sample_records};

/// A config for `dir` with small segments and an index entry every 1 KiB.
pub fn small_config(dir: &Path) -> HotConfig {
    let mut config = HotConfig::new(dir).with_fsync(FsyncPolicy::Always);
    config.segment_bytes = 64 * 1024;
    config.index_interval_bytes = 1024;
    config
}

pub fn topic(name: &str) -> TopicName {
    TopicName::new(name).unwrap()
}

pub async fn open(config: HotConfig) -> HotTier {
    HotTier::open(config).await.unwrap()
}

/// Appends `count` records from `base` in batches of `per_batch`; returns them.
pub async fn append_records(
    tier: &HotTier,
    topic: &TopicName,
    base: Offset,
    count: usize,
    per_batch: usize,
) -> Vec<Record> {
    use tier_core::Tier;
    let records = sample_records(base, count, 42);
    for chunk in records.chunks(per_batch) {
        tier.append(topic, batch_of(chunk)).await.unwrap();
    }
    records
}

pub fn batch(records: &[Record]) -> RecordBatch {
    batch_of(records)
}

/// Opens `config`, which must find `topic` (and only it) damaged; checks that the
/// topic's operations answer its error, closes the tier and returns the error.
pub async fn open_damaged(config: HotConfig, topic: &TopicName) -> tier_core::TierError {
    use tier_core::Tier;
    let tier = HotTier::open(config).await.expect("a damaged topic does not fail the open");
    let mut damaged = tier.damaged();
    assert_eq!(damaged.iter().map(|(t, _)| t).collect::<Vec<_>>(), vec![topic], "{damaged:?}");
    assert!(!tier.topics().contains(topic), "a damaged topic is not served");
    let answer = tier.range(topic).await.expect_err("a damaged topic answers its error");
    assert_eq!(answer.kind(), damaged[0].1.kind(), "{answer}");
    assert_eq!(answer.to_string(), damaged[0].1.to_string());
    tier.close().await;
    damaged.remove(0).1
}

/// Fails the test instead of hanging when `fut` is wedged.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} is wedged"))
}

/// `count` records from `base`, each with a `payload`-byte payload.
pub fn records(base: Offset, count: usize, payload: usize) -> Vec<Record> {
    (0..count as u64)
        .map(|i| {
            let offset = base + i;
            let mut body = bytes::BytesMut::from(format!("record {offset} ").as_bytes());
            body.resize(payload.max(body.len()), (offset % 251) as u8);
            Record {
                offset,
                timestamp: 1000 + offset as i64,
                key: Some(bytes::Bytes::from(format!("k{offset}"))),
                headers: Vec::new(),
                payload: body.freeze(),
            }
        })
        .collect()
}
