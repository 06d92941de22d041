//! `HotTier::read_batches`: whole verified batches instead of records, from the record
//! cache, sealed segments and the active segment, under the same range, gap and damage
//! rules as `TierExt::read`, which is built on it.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{append_records, open, topic};
use tier_core::batch::BatchPrefix;
use tier_core::segment::SegmentHeader;
use tier_core::{ErrorKind, Offset, Record, RecordBatch, Tier, TopicName};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};

/// Small segments and index intervals; `cache_bytes` 0 sends every read to the files.
fn config(dir: &std::path::Path, cache_bytes: u64) -> HotConfig {
    let mut config = HotConfig::new(dir).with_fsync(FsyncPolicy::Never);
    config.segment_bytes = 16 * 1024;
    config.index_interval_bytes = 1024;
    config.cache_bytes = cache_bytes;
    config
}

/// The records `from..` that the batches read from `from` on (in steps of at most
/// `max_bytes`) hold, checking each answer's shape on the way.
async fn records_via_batches(tier: &HotTier, t: &TopicName, from: Offset, max_bytes: usize) -> Vec<Record> {
    let end = tier.range(t).await.unwrap().end;
    let (mut next, mut out) = (from, Vec::new());
    while next < end {
        let batches = tier.read_batches(t, next, end, max_bytes).await.unwrap();
        let first = batches.first().unwrap_or_else(|| panic!("nothing at {next} before {end}"));
        assert!(first.offset_range().contains(next), "the first batch {first:?} holds {next}");
        for pair in batches.windows(2) {
            assert_eq!(pair[0].end_offset(), pair[1].base_offset(), "batches are contiguous");
        }
        let size: usize = batches.iter().map(RecordBatch::encoded_len).sum();
        assert!(batches.len() == 1 || size <= max_bytes, "{size} bytes over {max_bytes} at {next}");
        for b in &batches {
            out.extend(b.records_from(next));
        }
        next = batches.last().unwrap().end_offset();
    }
    out
}

#[tokio::test]
async fn batches_hold_what_was_written_from_every_offset_on_disk_and_in_the_cache() {
    for cache_bytes in [0, 64 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let t = topic("batches");
        let tier = open(config(dir.path(), cache_bytes)).await;
        let written = append_records(&tier, &t, 0, 300, 7).await;
        assert!(tier.sealed_segments(&t).len() >= 2, "sealed segments and an active one");
        for from in 0..written.len() as u64 {
            for max_bytes in [1, 3000, usize::MAX] {
                let got = records_via_batches(&tier, &t, from, max_bytes).await;
                assert_eq!(
                    got,
                    written[from as usize..],
                    "from {from}, max {max_bytes}, cache {cache_bytes}"
                );
            }
        }
        tier.close().await;
    }
}

#[tokio::test]
async fn to_and_max_bytes_bound_the_answer_and_the_first_batch_always_comes() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("bounds");
    let tier = open(config(dir.path(), 0)).await;
    append_records(&tier, &t, 0, 50, 5).await;
    let bases = |b: &[RecordBatch]| b.iter().map(RecordBatch::base_offset).collect::<Vec<_>>();

    // `to` stops before the batch starting at it, and a batch reaching past it comes whole.
    assert_eq!(bases(&tier.read_batches(&t, 0, 10, usize::MAX).await.unwrap()), vec![0, 5]);
    assert_eq!(bases(&tier.read_batches(&t, 3, 11, usize::MAX).await.unwrap()), vec![0, 5, 10]);
    // One byte of room still returns the batch holding `from`; three batches' room, three.
    assert_eq!(bases(&tier.read_batches(&t, 12, 50, 1).await.unwrap()), vec![10]);
    let all = tier.read_batches(&t, 0, 50, usize::MAX).await.unwrap();
    assert_eq!(bases(&all), (0..50).step_by(5).collect::<Vec<_>>());
    let three: usize = all[4..7].iter().map(RecordBatch::encoded_len).sum();
    assert_eq!(bases(&tier.read_batches(&t, 20, 50, three).await.unwrap()), vec![20, 25, 30]);
    assert_eq!(bases(&tier.read_batches(&t, 20, 50, three - 1).await.unwrap()), vec![20, 25]);
    // The end of the range is empty; past it, or an unknown topic past 0, is Trimmed.
    assert!(tier.read_batches(&t, 50, 60, usize::MAX).await.unwrap().is_empty());
    assert!(tier.read_batches(&t, 7, 7, usize::MAX).await.unwrap().is_empty());
    let err = tier.read_batches(&t, 51, 60, usize::MAX).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
    assert!(tier.read_batches(&topic("none"), 0, 10, 1).await.unwrap().is_empty());
    let err = tier.read_batches(&topic("none"), 3, 10, 1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
    tier.close().await;
}

#[tokio::test]
async fn a_damaged_batch_is_corruption_not_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("damaged");
    let mut config = config(dir.path(), 0);
    config.segment_bytes = 1 << 20;
    let tier = open(config.clone()).await;
    let written = append_records(&tier, &t, 0, 40, 10).await;
    let sealed = tier.rotate(&t).await.unwrap().unwrap();
    tier.close().await;

    // Flip the last byte of the second batch (a payload byte: its CRC no longer matches).
    let mut bytes = std::fs::read(&sealed.path).unwrap();
    let (_, header_len) = SegmentHeader::decode(&bytes).unwrap();
    let first = BatchPrefix::parse(&bytes[header_len..]).unwrap().encoded_len;
    let second = BatchPrefix::parse(&bytes[header_len + first..]).unwrap().encoded_len;
    bytes[header_len + first + second - 1] ^= 0x20;
    std::fs::write(&sealed.path, &bytes).unwrap();

    let tier = open(config).await;
    let after = tier.read_batches(&t, 20, 40, usize::MAX).await.unwrap();
    let records: Vec<Record> = after.iter().flat_map(RecordBatch::records).collect();
    assert_eq!(records, written[20..], "batches after the damage are read");
    for from in [0, 10, 15] {
        let err = tier.read_batches(&t, from, 40, usize::MAX).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corruption, "from {from}: {err}");
        let location = err.context().location.clone().unwrap();
        assert!(location.starts_with(&format!("{}@", sealed.path.display())), "{err}");
    }
    tier.close().await;
}
