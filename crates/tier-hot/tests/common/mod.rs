//! Helpers shared by the hot tier's tests.
// Test helpers outside #[test] functions unwrap too.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::Path;

use tier_core::{Offset, Record, RecordBatch, TopicName};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_testkit::conformance::{batch_of, sample_records};

/// A config for `dir` with small segments and an index entry every 1 KiB.
pub fn small_config(dir: &Path) -> HotConfig {
    HotConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        fsync: FsyncPolicy::Always,
        ..HotConfig::new(dir)
    }
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
