//! Seals off the append path: a rotation's fsync runs in the background, the segment is
//! announced and listed only after it, `close` waits for it, and recovery re-seals a
//! segment whose seal a crash cut short.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use bytes::Bytes;
use common::{append_records, open, open_damaged, small_config, topic};
use tier_core::{
    ErrorKind, OffsetRange, ReadLimit, Tier, TierExt, segment::SealedSegment, segment::TRAILER_LEN,
};
use tier_hot::{FsyncPolicy, HotConfig, SegmentEvent, SegmentInfo, layout::gap_file_name};

fn never(dir: &std::path::Path) -> HotConfig {
    small_config(dir).with_fsync(FsyncPolicy::Never)
}

/// Three sealed segments of 20 records each (batches of 5) and 5 records in the active
/// one, written under `never`; the tier is closed. Returns the sealed segments.
async fn three_segments(config: HotConfig, name: &str) -> Vec<SegmentInfo> {
    let tier = open(config).await;
    let t = topic(name);
    for i in 0..3 {
        append_records(&tier, &t, i * 20, 20, 5).await;
        tier.rotate(&t).await.unwrap().unwrap();
    }
    append_records(&tier, &t, 60, 5, 5).await;
    let sealed = tier.sealed_segments(&t);
    assert_eq!(sealed.len(), 3);
    tier.close().await;
    sealed
}

/// Where the batches of the sealed segment file `bytes` end (the footer starts).
fn data_end(bytes: Vec<u8>) -> u64 {
    let len = bytes.len() as u64;
    let seg = SealedSegment::open(Bytes::from(bytes)).unwrap();
    len - seg.trailer().index_len() - TRAILER_LEN as u64
}

fn cut(path: &std::path::Path, len: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
}

#[tokio::test]
async fn size_rotation_announces_every_seal_by_close_and_lists_only_synced_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = never(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("bg");
    let mut events = tier.segment_events();
    let records = append_records(&tier, &t, 0, 400, 5).await;
    // Every listed segment is complete on disk (a valid footer), contiguous from 0.
    let listed = tier.sealed_segments(&t);
    let mut next = 0;
    for s in &listed {
        assert_eq!(s.range.start, next);
        next = s.range.end;
        SealedSegment::open(Bytes::from(std::fs::read(&s.path).unwrap())).unwrap();
    }
    // Reads cover everything, including segments whose seal may still be running.
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    tier.close().await;

    // close waited for every background seal: each rotation was announced, in order.
    let segment_files = std::fs::read_dir(dir.path().join("bg"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "seg"))
        .count();
    assert!(segment_files >= 4, "400 records of up to 4 KiB rotate 64 KiB segments");
    let mut announced = Vec::new();
    while let Ok(event) = events.try_recv() {
        let SegmentEvent::Sealed(info) = event else { panic!("unexpected {event:?}") };
        announced.push(info);
    }
    assert_eq!(announced.len(), segment_files - 1, "{announced:?}");
    assert!(announced.windows(2).all(|w| w[0].range.end == w[1].range.start));
    assert_eq!(announced[..listed.len()], listed[..]);

    let tier = open(config).await;
    assert_eq!(
        tier.sealed_segments(&t).iter().map(|s| s.range).collect::<Vec<_>>(),
        announced.iter().map(|s| s.range).collect::<Vec<_>>()
    );
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    tier.close().await;
}

#[tokio::test]
async fn a_middle_segment_without_its_footer_is_sealed_again_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = never(dir.path());
    let sealed = three_segments(config.clone(), "nofooter").await;
    let middle = &sealed[1];
    let original = std::fs::read(&middle.path).unwrap();
    cut(&middle.path, data_end(original.clone()));

    let tier = open(config).await;
    let t = topic("nofooter");
    let reopened = tier.sealed_segments(&t);
    assert_eq!(
        reopened.iter().map(|s| s.range).collect::<Vec<_>>(),
        sealed.iter().map(|s| s.range).collect::<Vec<_>>()
    );
    // The footer was rebuilt from the data: the same bytes as the original seal wrote.
    assert_eq!(std::fs::read(&middle.path).unwrap(), original);
    let all = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..65).collect::<Vec<_>>());
    tier.close().await;
}

#[tokio::test]
async fn a_middle_segment_with_a_torn_footer_is_truncated_and_sealed_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = never(dir.path());
    let sealed = three_segments(config.clone(), "torn").await;
    let middle = &sealed[1];
    let original = std::fs::read(&middle.path).unwrap();
    cut(&middle.path, original.len() as u64 - 10);

    let tier = open(config.clone()).await;
    let t = topic("torn");
    assert_eq!(tier.sealed_segments(&t).len(), 3);
    assert_eq!(std::fs::read(&middle.path).unwrap(), original);
    let got = tier.read(&t, 20, 40, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), (20..40).collect::<Vec<_>>());
    tier.close().await;

    // Under `refuse`, a torn footer is a torn tail: open fails naming the file.
    cut(&middle.path, original.len() as u64 - 10);
    let mut refuse = config;
    refuse.recovery = tier_hot::RecoveryPolicy::Refuse;
    let err = open_damaged(refuse, &topic("torn")).await;
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains(&middle.path.display().to_string()), "{err}");
}

#[tokio::test]
async fn records_lost_from_a_middle_segment_are_a_torn_point_recorded_as_a_gap_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = never(dir.path());
    let sealed = three_segments(config.clone(), "lost").await;
    let middle = &sealed[1];
    assert_eq!(middle.range, OffsetRange::new(20, 40));
    // The footer and the last byte of the last batch (offsets 35..40) never reached disk.
    let cut_at = data_end(std::fs::read(&middle.path).unwrap()) - 1;
    cut(&middle.path, cut_at);
    let topic_dir = dir.path().join("lost");
    let marker = topic_dir.join(gap_file_name(OffsetRange::new(35, 40)));

    // `refuse`: the torn point is corruption, and nothing is changed.
    let mut refuse = config.clone();
    refuse.recovery = tier_hot::RecoveryPolicy::Refuse;
    let err = open_damaged(refuse, &topic("lost")).await;
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let msg = err.to_string();
    assert!(msg.contains(&middle.path.display().to_string()), "{msg}");
    assert_eq!(std::fs::metadata(&middle.path).unwrap().len(), cut_at);
    assert!(!marker.exists());

    // `truncate_torn_tail`: the segment is re-sealed shorter and 35..40 recorded as lost
    // (a durable marker), the segments after it kept.
    let tier = open(config.clone()).await;
    let t = topic("lost");
    assert!(marker.exists(), "recovery wrote the gap marker");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 65));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(35, 40)]);
    let sealed_now = tier.sealed_segments(&t);
    assert_eq!(sealed_now[1].range, OffsetRange::new(20, 35));
    let before = tier.read(&t, 20, 40, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(before.iter().map(|r| r.offset).collect::<Vec<_>>(), (20..35).collect::<Vec<_>>());
    let err = tier.read(&t, 36, 40, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let after = tier.read(&t, 40, 65, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(after.iter().map(|r| r.offset).collect::<Vec<_>>(), (40..65).collect::<Vec<_>>());
    tier.close().await;

    // Reopening finds the recorded gap (even under `refuse`).
    let mut refuse = config;
    refuse.recovery = tier_hot::RecoveryPolicy::Refuse;
    let tier = open(refuse).await;
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(35, 40)]);
    tier.close().await;
}

#[tokio::test]
async fn a_hole_after_an_intact_segment_is_corruption_unless_a_gap_marker_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = never(dir.path());
    let sealed = three_segments(config.clone(), "hole").await;
    // The middle file is gone: its neighbours are intact, so this is no torn point.
    std::fs::remove_file(&sealed[1].path).unwrap();
    let err = open_damaged(config.clone(), &topic("hole")).await;
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let msg = err.to_string();
    assert!(msg.contains("ends at offset 20") && msg.contains("starts at 40"), "{msg}");

    // A recorded gap covering exactly 20..40 makes it a known loss.
    std::fs::File::create(dir.path().join("hole").join(gap_file_name(OffsetRange::new(20, 40)))).unwrap();
    let tier = open(config).await;
    let t = topic("hole");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 65));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(20, 40)]);
    tier.close().await;
}
