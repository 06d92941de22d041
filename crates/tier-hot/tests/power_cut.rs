//! A power cut under `fsync = interval` while a background seal's fsync is still pending
//! and the next segment's data is already durable: the sealed segment comes back short
//! (its footer, maybe its last batches, never reached the disk) with durable segments
//! after it. Recovery treats that as a torn point — the lost offsets are recorded as a
//! gap, the durable segments after it stay, no offset is reused — under
//! `truncate_torn_tail`, and refuses the topic (`Corruption`) under `refuse`.
//!
//! The state is produced with tier-hot's `fault-injection` tools, without sleeps: the
//! seal's fsync is held, the active segment's fsync (at close) completes, and the files
//! are cut back to what was fsynced (`faults::power_cut`).

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{batch, open_damaged, records, small_config, topic, within};
use tier_core::{ErrorKind, Offset, OffsetRange, ReadLimit, Record, Tier, TierExt, TopicName};
use tier_hot::{
    FsyncPolicy, HotConfig, HotTier, RecoveryPolicy,
    faults::{self, FaultPoint, PowerCut},
    layout::{gap_file_name, segment_file_name},
};

/// 64 KiB segments; the timer fsync never fires during a test (its first tick is an
/// hour after the writer's start), so only `close` fsyncs the active segment.
fn interval(dir: &Path) -> HotConfig {
    small_config(dir).with_fsync(FsyncPolicy::Interval(Duration::from_secs(3600)))
}

/// A batch far over half a segment: every such batch starts a segment of its own.
fn big(base: Offset) -> Vec<Record> {
    records(base, 10, 8 * 1024)
}

fn seg(dir: &Path, t: &str, base: Offset) -> PathBuf {
    dir.join(t).join(segment_file_name(base))
}

/// With the background seal of the segment before it held (not fsynced), closes `tier`
/// — which fsyncs the active segment `active` — and takes the power cut once that fsync
/// is done; then lets the seal go and the close finish, and cuts the files back.
async fn power_cut_with_the_seal_pending(tier: HotTier, dir: &Path, active: PathBuf) -> PowerCut {
    let data_dir = dir.to_owned();
    within(
        "the seal reaching its fsync",
        tokio::task::spawn_blocking(move || {
            faults::wait_held(&data_dir, FaultPoint::SealFsync);
        }),
    )
    .await
    .unwrap();
    let closing = tokio::spawn(async move { tier.close().await });
    let len = std::fs::metadata(&active).unwrap().len();
    within(
        "the active segment's fsync at close",
        tokio::task::spawn_blocking(move || {
            faults::wait_durable(&active, len);
        }),
    )
    .await
    .unwrap();
    let cut = faults::power_cut(dir);
    faults::release(dir, FaultPoint::SealFsync);
    within("close", closing).await.unwrap();
    cut.apply().unwrap();
    cut
}

/// Segment 0 holds records 0..5 durably and 5..10 only in the page cache; rotation seals
/// it (fsync held) and the next segment's records 10..20 are fsynced; power cut.
async fn short_middle_segment(dir: &Path, t: &TopicName) -> PowerCut {
    let config = interval(dir);
    faults::track_durability(dir);
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(t, batch(&records(0, 5, 100))).await.unwrap();
    tier.close().await; // fsyncs 0..5
    faults::hold(dir, FaultPoint::SealFsync);
    let tier = HotTier::open(config).await.unwrap();
    tier.append(t, batch(&records(5, 5, 100))).await.unwrap();
    tier.append(t, batch(&big(10))).await.unwrap(); // rotates: segment 0's seal is held
    let cut = power_cut_with_the_seal_pending(tier, dir, seg(dir, t.as_str(), 10)).await;
    let first = seg(dir, t.as_str(), 0);
    let len = std::fs::metadata(&first).unwrap().len();
    assert_eq!(len, cut.durable_len(&first), "segment 0 lost its unsynced tail");
    assert!(len > 0 && cut.durable_len(&seg(dir, t.as_str(), 10)) > 0, "both files hold durable batches");
    cut
}

async fn read_offsets(tier: &HotTier, t: &TopicName, from: Offset) -> Vec<Offset> {
    let got = tier.read(t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    got.iter().map(|r| r.offset).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_middle_segment_after_a_power_cut_is_a_torn_point_recorded_as_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let _cut = short_middle_segment(dir.path(), &t).await;
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("cut"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };

    let config = interval(dir.path());
    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 20));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(5, 10)], "the lost offsets are recorded");
    assert!(files().contains(&gap_file_name(OffsetRange::new(5, 10))), "{:?}", files());
    assert_eq!(read_offsets(&tier, &t, 0).await, (0..5).collect::<Vec<_>>(), "dense up to the gap");
    let err = tier.read(&t, 7, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("5..10"), "{err}");
    assert_eq!(read_offsets(&tier, &t, 10).await, (10..20).collect::<Vec<_>>(), "the durable segment stays");
    let sealed: Vec<_> = tier.sealed_segments(&t).iter().map(|s| s.range).collect();
    assert_eq!(sealed, vec![OffsetRange::new(0, 5)]);
    // No offset is reused: the log continues after the durable data.
    let reuse = tier.append(&t, batch(&records(5, 1, 10))).await.unwrap_err();
    assert_eq!(reuse.kind(), ErrorKind::Fenced, "{reuse}");
    tier.append(&t, batch(&records(20, 5, 100))).await.unwrap();
    tier.close().await;

    // Reopening keeps the gap and writes no other marker.
    let before = files();
    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 25));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(5, 10)]);
    tier.close().await;
    assert_eq!(files(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_refuse_a_short_middle_segment_after_a_power_cut_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    short_middle_segment(dir.path(), &t).await;
    let mut refuse = interval(dir.path());
    refuse.recovery = RecoveryPolicy::Refuse;
    let err = open_damaged(refuse, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("not contiguous"), "{err}");
    assert!(!dir.path().join("cut").join(gap_file_name(OffsetRange::new(5, 10))).exists());
}

/// Segment 0 (0..10) is sealed and durable; segment 10's data (10..20) is not (its seal
/// is held), while segment 20's (20..30) is fsynced; power cut. `empty` then also loses
/// the header that segment 10's creation wrote.
async fn middle_segment_with_no_durable_batch(empty: bool) {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let config = interval(dir.path());
    faults::track_durability(dir.path());
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&big(0))).await.unwrap();
    tier.rotate(&t).await.unwrap().unwrap(); // sealed and fsynced, segment 10's header too
    faults::hold(dir.path(), FaultPoint::SealFsync);
    tier.append(&t, batch(&big(10))).await.unwrap();
    tier.append(&t, batch(&big(20))).await.unwrap(); // rotates: segment 10's seal is held
    let cut = power_cut_with_the_seal_pending(tier, dir.path(), seg(dir.path(), "cut", 20)).await;
    let middle = seg(dir.path(), "cut", 10);
    assert!(cut.durable_len(&middle) > 0, "segment 10's header was fsynced by the first seal");
    if empty {
        std::fs::OpenOptions::new().write(true).open(&middle).unwrap().set_len(0).unwrap();
    }

    let tier = HotTier::open(config).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 30));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(10, 20)]);
    assert!(!middle.exists(), "the segment without a batch is removed");
    assert_eq!(read_offsets(&tier, &t, 0).await, (0..10).collect::<Vec<_>>());
    assert_eq!(read_offsets(&tier, &t, 20).await, (20..30).collect::<Vec<_>>());
    let err = tier.read(&t, 15, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_middle_segment_holding_only_its_header_after_a_power_cut_is_a_torn_point() {
    middle_segment_with_no_durable_batch(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_middle_segment_after_a_power_cut_is_a_torn_point() {
    middle_segment_with_no_durable_batch(true).await;
}
