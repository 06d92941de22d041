//! Retention by time and by size, oldest first, honouring the predicate.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::{
    cell::RefCell,
    time::{Duration, SystemTime},
};

use common::{append_records, open, small_config, topic};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierError, TierExt};
use tier_hot::{HotConfig, HotTier, SegmentEvent, SegmentInfo};

/// A tier with `segments` sealed segments of 20 records each plus 5 records in the
/// active segment.
async fn tier_with_segments(config: HotConfig, name: &str, segments: u64) -> (HotTier, Vec<SegmentInfo>) {
    let tier = open(config).await;
    let t = topic(name);
    for i in 0..segments {
        append_records(&tier, &t, i * 20, 20, 5).await;
        tier.rotate(&t).await.unwrap().unwrap();
    }
    append_records(&tier, &t, segments * 20, 5, 5).await;
    let sealed = tier.sealed_segments(&t);
    assert_eq!(sealed.len() as u64, segments);
    (tier, sealed)
}

#[tokio::test]
async fn time_retention_deletes_old_segments_oldest_first_and_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.retention_time = Duration::from_secs(3600);
    let (tier, sealed) = tier_with_segments(config, "timed", 4).await;
    let t = topic("timed");
    let mut events = tier.segment_events();

    // Not old enough: nothing is even asked about.
    let asked = RefCell::new(Vec::new());
    let ask = |s: &SegmentInfo| {
        asked.borrow_mut().push(s.range);
        true
    };
    let now = sealed[0].sealed_at + Duration::from_secs(3599);
    assert!(tier.run_retention(now, &ask).unwrap().is_empty());
    assert!(asked.borrow().is_empty());

    // Old enough, but the predicate refuses the second: the first goes, nothing after.
    let later = SystemTime::now() + Duration::from_secs(7200);
    let refuse_second = |s: &SegmentInfo| {
        asked.borrow_mut().push(s.range);
        s.range.start == 0
    };
    let deleted = tier.run_retention(later, &refuse_second).unwrap();
    assert_eq!(deleted, vec![sealed[0].clone()]);
    assert_eq!(*asked.borrow(), vec![sealed[0].range, sealed[1].range], "stops at the first refusal");
    assert!(!sealed[0].path.exists());
    assert!(sealed[1].path.exists());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(20, 85));
    assert!(matches!(events.try_recv().unwrap(), SegmentEvent::Deleted(info) if info == sealed[0]));
    let err = tier.read(&t, 19, 30, ReadLimit::unbounded()).await.unwrap_err();
    assert!(matches!(err, TierError::Trimmed { held, .. } if held == OffsetRange::new(20, 85)), "{err}");

    // Everything allowed: every sealed segment goes, never the active one.
    let deleted = tier.run_retention(later, &|_| true).unwrap();
    assert_eq!(deleted, sealed[1..].to_vec());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(80, 85));
    assert_eq!(tier.read(&t, 80, 90, ReadLimit::unbounded()).await.unwrap().len(), 5);
    tier.close().await;
}

#[tokio::test]
async fn size_retention_deletes_only_while_the_topic_is_too_big() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, sealed) = tier_with_segments(small_config(dir.path()), "sized", 5).await;
    let t = topic("sized");
    tier.close().await;
    let total: u64 = sealed.iter().map(|s| s.bytes).sum();
    // Room for all but about two and a half sealed segments.
    let limit = total - sealed[0].bytes - sealed[1].bytes - sealed[2].bytes / 2;
    let mut config = small_config(dir.path());
    config.retention_bytes = limit;
    let tier = open(config).await;
    let now = SystemTime::now();
    let deleted = tier.run_retention(now, &|_| true).unwrap();
    let ranges: Vec<OffsetRange> = deleted.iter().map(|s| s.range).collect();
    assert_eq!(ranges, vec![sealed[0].range, sealed[1].range, sealed[2].range]);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(60, 105));
    assert!(tier.run_retention(now, &|_| true).unwrap().is_empty(), "now within the limit");
    let err = tier.read(&t, 0, 1, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    tier.close().await;
}

#[tokio::test]
async fn a_refusing_predicate_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.retention_bytes = 0;
    config.retention_time = Duration::ZERO;
    let (tier, sealed) = tier_with_segments(config, "kept", 3).await;
    let far = SystemTime::now() + Duration::from_secs(1 << 30);
    assert!(tier.run_retention(far, &|_| false).unwrap().is_empty());
    assert_eq!(tier.sealed_segments(&topic("kept")), sealed);
    assert_eq!(tier.range(&topic("kept")).await.unwrap(), OffsetRange::new(0, 65));
    tier.close().await;
}

/// Whether this process maps the file at `path` (Linux: `/proc/self/maps`).
fn mapped(path: &std::path::Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| l.contains(path.to_str().unwrap()))
}

/// A read that stops at a batch it has verified leaves that batch for the read that
/// continues there; once retention deletes its segment, nothing may keep the segment
/// mapped (an unlinked file still mapped keeps its disk space).
#[tokio::test]
async fn a_batch_split_between_reads_does_not_keep_a_deleted_segment_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(&std::fs::canonicalize(dir.path()).unwrap());
    config.cache_bytes = 0;
    config.retention_time = Duration::from_secs(3600);
    let (tier, sealed) = tier_with_segments(config, "split", 2).await;
    let t = topic("split");
    // Batches of 5 records: a one-byte batch read hands out the first and leaves the
    // second, read and verified, for the read continuing there.
    let first = tier.read_batches(&t, 0, 100, 1).await.unwrap();
    assert_eq!(first.iter().map(|b| b.offset_range()).collect::<Vec<_>>(), vec![OffsetRange::new(0, 5)]);
    drop(first);
    assert!(mapped(&sealed[0].path), "a sealed segment is read through its mapping");

    let later = SystemTime::now() + Duration::from_secs(7200);
    let deleted = tier.run_retention(later, &|s| s.range.start == 0).unwrap();
    assert_eq!(deleted, vec![sealed[0].clone()]);
    assert!(!mapped(&sealed[0].path), "the deleted segment is still mapped");
    assert!(mapped(&sealed[1].path));
    tier.close().await;
}
