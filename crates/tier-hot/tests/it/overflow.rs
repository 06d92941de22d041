//! Segments whose offsets would pass `u64::MAX`: recovery reports
//! them as corruption instead of panicking (or wrapping in a release build), and a log
//! may still end exactly at `u64::MAX`.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{small_config, topic};
use tier_core::TierExt;
use tier_core::segment::SegmentHeader;
use tier_core::{ErrorKind, Offset, OffsetRange, ReadLimit, Tier, TierKind};
use tier_hot::{HotTier, RecoveryPolicy, layout::segment_file_name};
use tier_testkit::conformance::{batch_of, sample_records};

const BASE: Offset = u64::MAX - 1;

/// The bytes of a 5-record batch claiming to start at `BASE`: built at 0 and its base
/// offset field (outside the CRC) patched, as a crafted or damaged file would hold it.
fn five_records_at_base() -> Vec<u8> {
    let mut bytes = batch_of(&sample_records(0, 5, 1)).to_bytes().to_vec();
    bytes[..8].copy_from_slice(&BASE.to_le_bytes());
    bytes
}

/// Writes `<dir>/<topic>/<BASE>.seg`: a header at `BASE` followed by `batch`.
fn write_segment(dir: &Path, t: &str, batch: &[u8]) -> std::path::PathBuf {
    let header = SegmentHeader::new(topic(t), BASE, 1_700_000_000_000).with_index_interval_bytes(1024);
    let mut bytes = header.encode();
    bytes.extend_from_slice(batch);
    std::fs::create_dir_all(dir.join(t)).unwrap();
    let path = dir.join(t).join(segment_file_name(BASE));
    std::fs::write(&path, &bytes).unwrap();
    path
}

#[tokio::test]
async fn a_segment_whose_batch_passes_u64_max_is_corruption_not_a_panic() {
    for policy in [RecoveryPolicy::TruncateTornTail, RecoveryPolicy::Refuse] {
        let dir = tempfile::tempdir().unwrap();
        let path = write_segment(dir.path(), "wrap", &five_records_at_base());
        let before = std::fs::read(&path).unwrap();
        let mut config = small_config(dir.path());
        config.recovery = policy;

        // The topic is kept aside as damaged (the others would open and serve).
        let err = common::open_damaged(config, &topic("wrap")).await;
        assert_eq!(err.kind(), ErrorKind::Corruption, "{policy:?}: {err}");
        assert_eq!(err.context().tier, Some(TierKind::Hot), "{err}");
        assert!(err.to_string().contains(&path.display().to_string()), "names the file: {err}");
        assert!(err.to_string().contains("overflow"), "says why: {err}");
        // A complete batch with a valid CRC is not a torn tail: nothing was truncated.
        assert_eq!(std::fs::read(&path).unwrap(), before, "{policy:?}");
    }
}

#[tokio::test]
async fn a_log_may_end_exactly_at_u64_max() {
    let dir = tempfile::tempdir().unwrap();
    // A header at BASE and no batch: an empty segment, which is valid.
    write_segment(dir.path(), "top", &[]);
    let tier = HotTier::open(small_config(dir.path())).await.unwrap();
    let t = topic("top");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(BASE));

    // The one record that still fits is taken: its end is u64::MAX.
    let last = batch_of(&sample_records(0, 1, 1)).try_with_base_offset(BASE).unwrap();
    tier.append(&t, last).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(BASE, u64::MAX));
    let got = tier.read(&t, BASE, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![BASE]);
    tier.close().await;

    // It survives a reopen, which scans the batch again.
    let tier = HotTier::open(small_config(dir.path())).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(BASE, u64::MAX));
    tier.close().await;
}
