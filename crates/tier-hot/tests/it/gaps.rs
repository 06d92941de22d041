//! Recorded gaps: `HotTier::skip_to` declaring offsets lost, appends after the gap,
//! reads into and across it, the gap surviving a reopen, unrecorded discontinuities
//! still refused, retention removing the marker, and live-tail subscribers.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::{Duration, SystemTime};

use common::{append_records, open, open_damaged, small_config, topic};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt, TopicName};
use tier_hot::{
    HotConfig, HotTier, SegmentEvent,
    layout::{gap_file_name, segment_file_name},
};

/// A tier whose topic `name` holds 0..30 (one sealed segment 0..20, active 20..30),
/// then skipped to 40; returns the tier and the records written before the gap.
async fn skipped(config: HotConfig, name: &str) -> (HotTier, TopicName, Vec<tier_core::Record>) {
    let tier = open(config).await;
    let t = topic(name);
    let mut before = append_records(&tier, &t, 0, 20, 5).await;
    tier.rotate(&t).await.unwrap().unwrap();
    before.extend(append_records(&tier, &t, 20, 10, 5).await);
    let gap = tier.skip_to(&t, 40).await.unwrap();
    assert_eq!(gap, OffsetRange::new(30, 40));
    (tier, t, before)
}

fn gap_marker(dir: &std::path::Path, t: &str) -> std::path::PathBuf {
    dir.join(t).join(gap_file_name(OffsetRange::new(30, 40)))
}

#[tokio::test]
async fn skip_to_seals_records_the_gap_and_appends_continue_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("skip");
    append_records(&tier, &t, 0, 20, 5).await;
    tier.rotate(&t).await.unwrap().unwrap();
    append_records(&tier, &t, 20, 10, 5).await;
    let mut events = tier.segment_events();

    assert_eq!(tier.skip_to(&t, 40).await.unwrap(), OffsetRange::new(30, 40));
    match events.try_recv().unwrap() {
        SegmentEvent::Sealed(info) => assert_eq!(info.range, OffsetRange::new(20, 30)),
        other => panic!("expected the active segment to be sealed, got {other:?}"),
    }
    assert!(gap_marker(dir.path(), "skip").exists(), "the marker is written");
    assert!(dir.path().join("skip").join(segment_file_name(40)).exists(), "the new active segment");
    assert!(!dir.path().join("skip").join(segment_file_name(30)).exists(), "no leftover at the old end");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 40));

    // The log continues at 40 only.
    let err = tier.append(&t, common::batch(&tier_testkit::conformance::sample_records(30, 1, 1))).await;
    assert_eq!(err.unwrap_err().kind(), ErrorKind::Fenced, "an offset in the gap is never reused");
    let after = append_records(&tier, &t, 40, 10, 5).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 50));
    assert_eq!(tier.read(&t, 40, u64::MAX, ReadLimit::unbounded()).await.unwrap(), after);
    tier.close().await;
}

#[tokio::test]
async fn reads_stop_before_the_gap_and_a_read_inside_it_names_the_lost_range() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, t, before) = skipped(small_config(dir.path()), "reads").await;
    let after = append_records(&tier, &t, 40, 10, 5).await;

    let got = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got, before, "a read across the gap stops before it");
    let got = tier.read(&t, 25, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got, before[25..], "from the active part before the gap too");
    for from in [30, 35, 39] {
        let err = tier.read(&t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("30..40") && msg.contains("lost"), "{msg}");
        assert!(msg.contains(&gap_file_name(OffsetRange::new(30, 40))), "{msg}");
    }
    assert_eq!(tier.read(&t, 40, u64::MAX, ReadLimit::unbounded()).await.unwrap(), after);
    // Timestamps skip the gap: sample records' timestamps grow with their offsets.
    let ts_after = after[0].timestamp;
    assert_eq!(tier.offset_for_timestamp(&t, ts_after).await.unwrap(), Some(40));
    tier.close().await;
}

#[tokio::test]
async fn reopening_keeps_the_gap_and_the_data_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let (tier, t, before) = skipped(config.clone(), "reopen").await;
    let after = append_records(&tier, &t, 40, 10, 5).await;
    tier.close().await;

    let tier = open(config.clone()).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 50));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(30, 40)]);
    assert_eq!(tier.torn_points(&t), vec![], "skipped offsets are no torn point");
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), before);
    assert_eq!(tier.read(&t, 40, u64::MAX, ReadLimit::unbounded()).await.unwrap(), after);
    let err = tier.read(&t, 31, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("30..40"), "{err}");
    let more = append_records(&tier, &t, 50, 5, 5).await;
    tier.close().await;

    // A gap right at the end of the WAL (skipped, nothing appended yet) also survives.
    let tier = open(config.clone()).await;
    assert_eq!(tier.read(&t, 50, u64::MAX, ReadLimit::unbounded()).await.unwrap(), more);
    tier.skip_to(&t, 70).await.unwrap();
    tier.close().await;
    let tier = open(config).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 70));
    assert_eq!(
        tier.read(&t, 60, u64::MAX, ReadLimit::unbounded()).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    append_records(&tier, &t, 70, 5, 5).await;
    assert_eq!(tier.read(&t, 50, u64::MAX, ReadLimit::unbounded()).await.unwrap(), more);
    tier.close().await;
}

#[tokio::test]
async fn an_unrecorded_discontinuity_is_still_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("hole");
    for base in [0u64, 10, 20] {
        append_records(&tier, &t, base, 10, 5).await;
        tier.rotate(&t).await.unwrap().unwrap();
    }
    tier.close().await;
    std::fs::remove_file(dir.path().join("hole").join(segment_file_name(10))).unwrap();
    let err = open_damaged(config.clone(), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("not contiguous"), "{err}");

    // A marker for a different range does not excuse it either.
    let wrong = dir.path().join("hole").join(gap_file_name(OffsetRange::new(10, 19)));
    std::fs::write(&wrong, b"").unwrap();
    let err = open_damaged(config.clone(), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");

    // The exact marker does.
    std::fs::remove_file(&wrong).unwrap();
    std::fs::write(dir.path().join("hole").join(gap_file_name(OffsetRange::new(10, 20))), b"").unwrap();
    let tier = open(config).await;
    assert_eq!(
        tier.read(&t, 12, u64::MAX, ReadLimit::unbounded()).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    tier.close().await;
}

#[tokio::test]
async fn a_marker_bridging_no_segments_is_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("stale");
    append_records(&tier, &t, 0, 10, 5).await;
    tier.close().await;
    // As if skip_to crashed after writing the marker, before the new segment existed.
    let stale = dir.path().join("stale").join(gap_file_name(OffsetRange::new(10, 20)));
    std::fs::write(&stale, b"").unwrap();
    let tier = open(config).await;
    assert!(!stale.exists());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    let more = append_records(&tier, &t, 10, 5, 5).await;
    assert_eq!(tier.read(&t, 10, u64::MAX, ReadLimit::unbounded()).await.unwrap(), more);
    tier.close().await;
}

#[tokio::test]
async fn retention_past_the_gap_removes_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.retention_time = Duration::from_secs(3600);
    let (tier, t, _) = skipped(config.clone(), "retained").await;
    append_records(&tier, &t, 40, 10, 5).await;
    tier.rotate(&t).await.unwrap().unwrap();
    let marker = gap_marker(dir.path(), "retained");
    let later = SystemTime::now() + Duration::from_secs(7200);

    // Only the first segment may go: the gap is still inside the range.
    tier.run_retention(later, &|s| s.range.start == 0).unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(20, 50));
    assert!(marker.exists());
    // The segment before the gap goes: the marker goes with it.
    let deleted = tier.run_retention(later, &|s| s.range.start == 20).unwrap();
    assert_eq!(deleted.len(), 1);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(40, 50));
    assert!(!marker.exists());
    let err = tier.read(&t, 35, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "below the range now: {err}");
    tier.close().await;
    let tier = open(config).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(40, 50));
    tier.close().await;
}

#[tokio::test]
async fn skip_to_below_the_end_is_invalid_and_to_the_end_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("below");
    append_records(&tier, &t, 0, 10, 5).await;
    let err = tier.skip_to(&t, 9).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(tier.skip_to(&t, 10).await.unwrap(), OffsetRange::empty_at(10));
    assert!(tier.sealed_segments(&t).is_empty(), "a no-op seals nothing");
    append_records(&tier, &t, 10, 5, 5).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 15));
    tier.close().await;
}

#[tokio::test]
async fn skip_to_on_an_empty_topic_is_a_take_over_without_marker() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("empty");
    assert_eq!(tier.skip_to(&t, 100).await.unwrap(), OffsetRange::new(0, 100));
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(100));
    let records = append_records(&tier, &t, 100, 5, 5).await;
    tier.close().await;
    let names: Vec<String> = std::fs::read_dir(dir.path().join("empty"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![segment_file_name(100)]);
    let tier = open(config).await;
    assert_eq!(tier.read(&t, 100, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    tier.close().await;
}

#[tokio::test]
async fn live_tail_subscribers_in_the_gap_get_the_error_and_after_it_continue() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("tail");
    append_records(&tier, &t, 0, 10, 5).await;
    // One waiting at the old end (it would otherwise silently miss 10..20), one waiting
    // at the new end.
    let mut at_old_end = tier.subscribe(&t, 10).unwrap();
    let mut at_new_end = tier.subscribe(&t, 20).unwrap();
    tier.skip_to(&t, 20).await.unwrap();
    let after = append_records(&tier, &t, 20, 5, 5).await;

    let err = tokio::time::timeout(Duration::from_secs(10), at_old_end.next()).await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("10..20"), "{err}");
    for want in &after {
        let got = tokio::time::timeout(Duration::from_secs(10), at_new_end.next()).await.unwrap().unwrap();
        assert_eq!(&got, want);
    }
    // A subscriber starting before the gap gets the records, then the error.
    let mut before = tier.subscribe(&t, 5).unwrap();
    for offset in 5..10 {
        assert_eq!(before.next().await.unwrap().offset, offset);
    }
    assert_eq!(before.next().await.unwrap_err().kind(), ErrorKind::NotFound);
    tier.close().await;
}

/// Two gaps in a row with nothing written between them (a reservation skip after a lost
/// WAL, then another after a crash): the empty segment between them is gone at the next
/// open, and the two adjacent markers must still bridge the discontinuity — as one gap.
/// Found by the simulation (seed 782): the open refused "segments are not contiguous".
#[tokio::test]
async fn two_adjacent_gaps_bridge_the_segments_around_them() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, t, _) = skipped(small_config(dir.path()), "twice").await;
    tier.close().await;
    let tier = open(small_config(dir.path())).await;
    assert_eq!(tier.skip_to(&t, 50).await.unwrap(), OffsetRange::new(40, 50));
    append_records(&tier, &t, 50, 5, 5).await;
    tier.close().await;

    let tier = open(small_config(dir.path())).await;
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    assert_eq!(Tier::range(&tier, &t).await.unwrap(), OffsetRange::new(0, 55));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(30, 50)], "one gap");
    let err = tier.read(&t, 35, 55, ReadLimit::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(tier.read(&t, 50, 55, ReadLimit::default()).await.unwrap().len(), 5);
    tier.close().await;
    // And it stays one gap.
    let tier = open(small_config(dir.path())).await;
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(30, 50)]);
    tier.close().await;
}

/// `skip_to` on a topic that holds nothing — not even a segment file — is a take-over:
/// no marker, and a header-only segment at the offset, fsynced, so that a reopen (with
/// nothing else to go by) still continues there.
#[tokio::test]
async fn skipping_a_topic_with_no_file_yet_starts_its_segment_there() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("fresh");
    assert_eq!(tier.skip_to(&t, 1028).await.unwrap(), OffsetRange::new(0, 1028));
    let names: Vec<_> = std::fs::read_dir(dir.path().join("fresh"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![segment_file_name(1028)], "no gap marker, one segment file");
    tier.close().await;
    let tier = open(config).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(1028));
    append_records(&tier, &t, 1028, 3, 3).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(1028, 1031));
    tier.close().await;
}
