//! Reads that start inside an index interval or a batch, as a sequential consumer makes
//! them: sealed and active segments, every start offset, and damage before the start.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{append_records, open, topic};
use tier_core::TierExt;
use tier_core::batch::BatchPrefix;
use tier_core::segment::SegmentHeader;
use tier_core::{ErrorKind, ReadLimit, Record, Tier, TopicName};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};

/// One index interval per segment (so reads walk from the segment's first batch) and no
/// record cache (so every read goes to the files).
fn config(dir: &std::path::Path) -> HotConfig {
    let mut config = HotConfig::new(dir).with_fsync(FsyncPolicy::Never);
    config.index_interval_bytes = 1 << 20;
    config.cache_bytes = 0;
    config
}

async fn read_in_steps(tier: &HotTier, t: &TopicName, max_records: usize) -> Vec<Record> {
    let end = tier.range(t).await.unwrap().end;
    let limit = ReadLimit { max_records, ..ReadLimit::default() };
    let (mut next, mut out) = (0, Vec::new());
    while next < end {
        let records = tier.read(t, next, end, limit).await.unwrap();
        assert!(!records.is_empty() && records.len() <= max_records, "at {next}");
        next = records.last().unwrap().offset + 1;
        out.extend(records);
    }
    out
}

#[tokio::test]
async fn reads_from_every_offset_of_sealed_and_active_segments_match_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("resume");
    let tier = open(config(dir.path())).await;
    let mut written = append_records(&tier, &t, 0, 120, 10).await;
    tier.rotate(&t).await.unwrap().unwrap();
    written.extend(append_records(&tier, &t, 120, 57, 10).await);
    tier.close().await;

    let tier = open(config(dir.path())).await;
    assert_eq!(tier.sealed_segments(&t).len(), 1);
    for max_records in [1, 3, 7, 10, 25] {
        assert_eq!(read_in_steps(&tier, &t, max_records).await, written, "steps of {max_records}");
    }
    for from in 0..written.len() as u64 {
        let got = tier.read(&t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap();
        assert_eq!(got, written[from as usize..], "from {from}");
        // A short read elsewhere in between, so the next one cannot reuse its batch.
        let one =
            tier.read(&t, (from * 7) % 177, u64::MAX, ReadLimit { max_records: 1, ..ReadLimit::default() });
        assert_eq!(one.await.unwrap().len(), 1);
    }
    tier.close().await;
}

#[tokio::test]
async fn a_damaged_batch_before_the_start_is_not_read_and_reading_it_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("damaged");
    let tier = open(config(dir.path())).await;
    let written = append_records(&tier, &t, 0, 40, 10).await;
    let sealed = tier.rotate(&t).await.unwrap().unwrap();
    tier.close().await;

    // Flip the last byte of the first batch (a payload byte: its CRC no longer matches).
    let mut bytes = std::fs::read(&sealed.path).unwrap();
    let (_, header_len) = SegmentHeader::decode(&bytes).unwrap();
    let first = BatchPrefix::parse(&bytes[header_len..]).unwrap();
    bytes[header_len + first.encoded_len - 1] ^= 0x20;
    std::fs::write(&sealed.path, &bytes).unwrap();

    let tier = open(config(dir.path())).await;
    let got = tier.read(&t, 10, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got, written[10..]);
    let err = tier.read(&t, 3, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let location = err.context().location.clone().unwrap();
    assert!(location.starts_with(&format!("{}@", sealed.path.display())), "{err}");
    tier.close().await;
}
