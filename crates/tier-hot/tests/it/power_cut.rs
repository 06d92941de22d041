//! A power cut under `fsync = interval`/`never` while a background seal's fsync is still
//! pending and the next segment's data is already durable: the sealed segment comes back
//! short (its footer, maybe its last batches, never reached the disk) with durable
//! segments after it — or with its size and not its data (ext4 `data=writeback`: the
//! header, then zeros), or with pages before its written trailer unwritten. Recovery
//! treats that as a torn point — the segment truncated after its last valid batch and
//! sealed again, or removed when no batch of it is left; the lost offsets recorded as a
//! gap, the durable segments after it kept, no offset reused — under
//! `truncate_torn_tail`, and refuses the topic (`Corruption`) under `refuse`, and under
//! `always` where the batches were fsynced before the seal. The first segment lost that
//! way is removed and the topic starts at the next one.
//!
//! The state is produced with tier-hot's `fault-injection` tools, without sleeps: the
//! seal's fsync is held, the active segment's fsync (at close) completes, and the files
//! are cut back to what was fsynced (`faults::power_cut`).

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

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
    let cut = seal_pending_at_the_cut(tier, dir, active).await;
    cut.apply().unwrap();
    cut
}

/// [`power_cut_with_the_seal_pending`] without cutting the files back: they hold what
/// the page cache held (the seal's footer written), for a test to shape what the disk
/// kept.
async fn seal_pending_at_the_cut(tier: HotTier, dir: &Path, active: PathBuf) -> PowerCut {
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
    assert_eq!(tier.torn_points(&t), vec![OffsetRange::new(5, 10)], "as a torn point");
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
    tier.cut_recorded(&t).unwrap();
    tier.close().await;

    // Reopening keeps the gap, still known as a torn point once the cut is recorded (a
    // later open cuts nothing), and writes no other marker.
    let before = files();
    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 25));
    assert!(!tier.cut_back_at_open(&t), "nothing was cut at this open");
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(5, 10)]);
    assert_eq!(tier.torn_points(&t), vec![OffsetRange::new(5, 10)], "the marker says it is a torn point");
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

/// What the disk kept of a middle segment whose seal a power cut found pending, none of
/// its batches durable (only its header, fsynced by the seal before it).
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// Its durable length: the header alone.
    Header,
    /// Nothing: the header's creation write lost too.
    Empty,
    /// Its size, without the data (ext4 `data=writeback`): the header, then zeros to the
    /// length the seal wrote.
    SizeWithoutData,
}

/// Segment 0 (0..10) is sealed and durable; segment 10's data (10..20) is not (its seal
/// is held), while segment 20's (20..30) is fsynced; power cut, segment 10 left as
/// `kept` says. The topic must open with the torn point recorded.
async fn middle_segment_with_no_durable_batch(kept: Kept) {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let config = interval(dir.path());
    let middle = cut_middle_segment_with_no_durable_batch(dir.path(), &t, kept).await;

    let tier = HotTier::open(config).await.unwrap();
    assert!(tier.damaged().is_empty(), "{kept:?}: the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 30));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(10, 20)], "{kept:?}");
    assert!(!middle.exists(), "{kept:?}: the segment without a batch is removed");
    assert!(tier.cut_back_at_open(&t), "{kept:?}: the open cut the log back");
    assert_eq!(read_offsets(&tier, &t, 0).await, (0..10).collect::<Vec<_>>());
    assert_eq!(read_offsets(&tier, &t, 20).await, (20..30).collect::<Vec<_>>());
    let err = tier.read(&t, 15, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    tier.close().await;
}

/// The files of [`middle_segment_with_no_durable_batch`], written under `interval`;
/// returns segment 10's path.
async fn cut_middle_segment_with_no_durable_batch(dir: &Path, t: &TopicName, kept: Kept) -> PathBuf {
    faults::track_durability(dir);
    let tier = HotTier::open(interval(dir)).await.unwrap();
    tier.append(t, batch(&big(0))).await.unwrap();
    tier.rotate(t).await.unwrap().unwrap(); // sealed and fsynced, segment 10's header too
    faults::hold(dir, FaultPoint::SealFsync);
    tier.append(t, batch(&big(10))).await.unwrap();
    tier.append(t, batch(&big(20))).await.unwrap(); // rotates: segment 10's seal is held
    let cut = seal_pending_at_the_cut(tier, dir, seg(dir, t.as_str(), 20)).await;
    let middle = seg(dir, t.as_str(), 10);
    let sealed_len = len(&middle);
    cut.apply().unwrap();
    assert!(cut.durable_len(&middle) > 0, "segment 10's header was fsynced by the first seal");
    assert_eq!(len(&middle), cut.durable_len(&middle));
    let size = match kept {
        Kept::Header => cut.durable_len(&middle),
        Kept::Empty => 0,
        Kept::SizeWithoutData => sealed_len,
    };
    // Zeros past the durable length, for `SizeWithoutData`.
    std::fs::OpenOptions::new().write(true).open(&middle).unwrap().set_len(size).unwrap();
    middle
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_middle_segment_holding_only_its_header_after_a_power_cut_is_a_torn_point() {
    middle_segment_with_no_durable_batch(Kept::Header).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_middle_segment_after_a_power_cut_is_a_torn_point() {
    middle_segment_with_no_durable_batch(Kept::Empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_middle_segment_whose_size_reached_the_disk_without_its_data_is_a_torn_point() {
    middle_segment_with_no_durable_batch(Kept::SizeWithoutData).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_or_refuse_a_middle_segment_of_zeros_after_its_header_stays_corruption() {
    let always = |dir: &Path| interval(dir).with_fsync(FsyncPolicy::Always);
    let refuse = |dir: &Path| {
        let mut config = interval(dir);
        config.recovery = RecoveryPolicy::Refuse;
        config
    };
    for (name, config) in [("always", always as fn(&Path) -> HotConfig), ("refuse", refuse)] {
        let dir = tempfile::tempdir().unwrap();
        let t = topic("cut");
        let middle = cut_middle_segment_with_no_durable_batch(dir.path(), &t, Kept::SizeWithoutData).await;
        let before = std::fs::read(&middle).unwrap();
        // Under `always` the seal found segment 10's batches fsynced; `refuse` truncates
        // nothing.
        let err = open_damaged(config(dir.path()), &t).await;
        assert_eq!(err.kind(), ErrorKind::Corruption, "{name}: {err}");
        assert!(err.to_string().contains(&middle.display().to_string()), "{name}: {err}");
        assert_eq!(std::fs::read(&middle).unwrap(), before, "{name}: damage is left as found");
    }
}

/// Under `never`: segment 0 holds records 0..5, fsynced only in its header (its
/// creation); the rotation to segment 5 holds its seal; segment 5's records 5..15 are
/// fsynced at close; power cut. Segment 0 comes back with its size and none of its data:
/// the header, then zeros.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_segment_whose_size_reached_the_disk_without_its_data_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let config = interval(dir.path()).with_fsync(FsyncPolicy::Never);
    faults::track_durability(dir.path());
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&records(0, 5, 100))).await.unwrap();
    faults::hold(dir.path(), FaultPoint::SealFsync);
    tier.append(&t, batch(&big(5))).await.unwrap(); // rotates: segment 0's seal is held
    let cut = seal_pending_at_the_cut(tier, dir.path(), seg(dir.path(), "cut", 5)).await;
    let first = seg(dir.path(), "cut", 0);
    let sealed_len = len(&first);
    cut.apply().unwrap();
    let header_len = cut.durable_len(&first);
    assert!(header_len > 0 && header_len < 100, "only the header was fsynced: {header_len}");
    std::fs::OpenOptions::new().write(true).open(&first).unwrap().set_len(sealed_len).unwrap();

    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert!(!first.exists(), "the segment without a batch is removed");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(5, 15), "starts at the next segment");
    assert!(tier.cut_back_at_open(&t), "the open cut the log back");
    assert_eq!(read_offsets(&tier, &t, 5).await, (5..15).collect::<Vec<_>>());
    tier.append(&t, batch(&records(15, 1, 10))).await.unwrap();
    tier.close().await;
}

/// Records `count` of `payload` bytes from `base` in one batch whose end lies `before`
/// bytes before a page boundary, appended to a file now `at` bytes long.
fn batch_ending_before_a_page(base: Offset, at: u64, before: u64) -> tier_core::RecordBatch {
    let overhead = batch(&records(base, 1, 100)).encoded_len() as u64 - 100;
    let end = (at + overhead + 200).next_multiple_of(PAGE) - before;
    // The record's length fields grow with the payload: adjust until it fits exactly.
    let mut payload = end - at - overhead;
    for _ in 0..4 {
        let b = batch(&records(base, 1, payload as usize));
        let got = at + b.encoded_len() as u64;
        if got == end {
            return b;
        }
        payload = payload + end - got;
    }
    panic!("no batch ends at byte {end}")
}

const PAGE: u64 = 4096;

/// Segment 0 (0..10) is sealed and durable. Segment 10 holds records 10..15 in its first
/// page, 15..21 in the pages after it, and its data ends 40 bytes before a page boundary,
/// so its footer spans two pages; its seal is held when it rotates, segment 21 (21..31)
/// is fsynced; power cut. What the disk kept of segment 10 past its durable header: its
/// size, its first page and its last page (the trailer's), every page between read as
/// zeros — the data after record 14 and the footer's first part lost, its trailer
/// written.
async fn middle_segment_with_a_hole_before_its_trailer(
    dir: &Path,
    config: &HotConfig,
    t: &TopicName,
) -> PathBuf {
    faults::track_durability(dir);
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(t, batch(&big(0))).await.unwrap();
    tier.rotate(t).await.unwrap().unwrap(); // sealed and fsynced, segment 10's header too
    faults::hold(dir, FaultPoint::SealFsync);
    let middle = seg(dir, t.as_str(), 10);
    tier.append(t, batch(&records(10, 5, 100))).await.unwrap();
    tier.append(t, batch(&records(15, 5, 1000))).await.unwrap();
    tier.append(t, batch_ending_before_a_page(20, len(&middle), 40)).await.unwrap();
    let data_end = len(&middle);
    assert!(data_end > PAGE && data_end % PAGE == PAGE - 40);
    tier.append(t, batch(&big(21))).await.unwrap(); // rotates: segment 10's seal is held
    let cut = seal_pending_at_the_cut(tier, dir, seg(dir, t.as_str(), 21)).await;
    let sealed = std::fs::read(&middle).unwrap();
    assert!(sealed.len() as u64 > data_end.next_multiple_of(PAGE), "the footer spans two pages");
    cut.apply().unwrap();
    let durable = cut.durable_len(&middle);
    assert!(durable > 0 && durable < 100, "only segment 10's header was fsynced: {durable}");
    let mut kept = sealed.clone();
    let last_page = (sealed.len() as u64 - 1) / PAGE * PAGE;
    kept[PAGE as usize..last_page as usize].fill(0);
    std::fs::write(&middle, &kept).unwrap();
    middle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_never_a_sealed_segment_with_pages_lost_before_its_trailer_is_sealed_again_at_a_torn_point() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Interval(Duration::from_secs(3600))] {
        let dir = tempfile::tempdir().unwrap();
        let t = topic("cut");
        let config = interval(dir.path()).with_fsync(fsync);
        let middle = middle_segment_with_a_hole_before_its_trailer(dir.path(), &config, &t).await;

        let tier = HotTier::open(config.clone()).await.unwrap();
        assert!(tier.damaged().is_empty(), "{fsync:?}: the topic opens: {:?}", tier.damaged());
        assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 31));
        assert_eq!(tier.gaps(&t), vec![OffsetRange::new(15, 21)], "{fsync:?}: the lost offsets are recorded");
        let sealed: Vec<_> = tier.sealed_segments(&t).iter().map(|s| s.range).collect();
        assert_eq!(sealed, vec![OffsetRange::new(0, 10), OffsetRange::new(10, 15)], "{fsync:?}");
        assert!(len(&middle) < PAGE, "{fsync:?}: truncated after its last valid batch and sealed again");
        assert!(tier.cut_back_at_open(&t), "{fsync:?}");
        assert_eq!(read_offsets(&tier, &t, 0).await, (0..15).collect::<Vec<_>>(), "{fsync:?}");
        assert_eq!(read_offsets(&tier, &t, 21).await, (21..31).collect::<Vec<_>>(), "{fsync:?}");
        tier.close().await;
        let tier = HotTier::open(config).await.unwrap();
        assert_eq!(tier.gaps(&t), vec![OffsetRange::new(15, 21)], "{fsync:?}: reopening keeps the gap");
        tier.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_sealed_segment_with_pages_zeroed_before_its_trailer_stays_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let middle = middle_segment_with_a_hole_before_its_trailer(dir.path(), &interval(dir.path()), &t).await;
    let before = std::fs::read(&middle).unwrap();
    // Under `always` every batch of a sealed segment was fsynced before its seal.
    let always = interval(dir.path()).with_fsync(FsyncPolicy::Always);
    let err = open_damaged(always, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&middle.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&middle).unwrap(), before, "damage is left as found");
}

/// Under `interval`: segment 0 holds records 0..5 in its first page, 5..13 in the pages
/// after it; the rotation to segment 13 writes its footer and holds its seal; power cut
/// before any fsync but the header's. What the disk kept: segment 0 with its first and
/// last pages (the footer whole, a valid trailer) and its second page unwritten (zeros);
/// segment 13, never fsynced, gone. Returns segment 0's path.
async fn sealed_last_file_with_a_hole_under_its_footer(dir: &Path, t: &TopicName) -> PathBuf {
    faults::track_durability(dir);
    let tier = HotTier::open(interval(dir)).await.unwrap();
    tier.append(t, batch(&records(0, 5, 100))).await.unwrap();
    tier.append(t, batch(&records(5, 5, 1000))).await.unwrap();
    tier.append(t, batch(&records(10, 3, 1000))).await.unwrap();
    let first = seg(dir, t.as_str(), 0);
    let data_end = len(&first);
    assert!(data_end > 2 * PAGE, "the data reaches a third page: {data_end}");
    faults::hold(dir, FaultPoint::SealFsync);
    tier.append(t, batch(&big(13))).await.unwrap(); // rotates: segment 0's seal is held
    let data_dir = dir.to_owned();
    within(
        "the seal reaching its fsync",
        tokio::task::spawn_blocking(move || faults::wait_held(&data_dir, FaultPoint::SealFsync)),
    )
    .await
    .unwrap();
    let cut = faults::power_cut(dir);
    faults::release(dir, FaultPoint::SealFsync);
    tier.close().await; // its fsyncs are after the cut
    let sealed = std::fs::read(&first).unwrap();
    cut.apply().unwrap();
    let next = seg(dir, t.as_str(), 13);
    assert_eq!(cut.durable_len(&next), 0, "segment 13 was never fsynced");
    std::fs::remove_file(&next).unwrap();
    let durable = cut.durable_len(&first);
    assert!(durable > 0 && durable < PAGE, "only segment 0's header was fsynced: {durable}");
    let mut kept = sealed;
    kept[PAGE as usize..2 * PAGE as usize].fill(0);
    std::fs::write(&first, &kept).unwrap();
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_file_sealed_without_its_data_pages_reaching_the_disk_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let first = sealed_last_file_with_a_hole_under_its_footer(dir.path(), &t).await;
    let config = interval(dir.path());
    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5), "ends at the first invalid batch");
    assert!(tier.sealed_segments(&t).is_empty(), "the footer is cut with the torn tail");
    assert!(len(&first) < PAGE, "truncated after its last valid batch");
    assert!(tier.cut_back_at_open(&t), "the open cut the log back");
    assert_eq!(read_offsets(&tier, &t, 0).await, (0..5).collect::<Vec<_>>());
    tier.append(&t, batch(&records(5, 2, 10))).await.unwrap();
    tier.close().await;
    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 7));
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_last_file_sealed_over_a_zeroed_data_page_stays_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("cut");
    let first = sealed_last_file_with_a_hole_under_its_footer(dir.path(), &t).await;
    let before = std::fs::read(&first).unwrap();
    // Under `always` the seal found every batch fsynced.
    let err = open_damaged(interval(dir.path()).with_fsync(FsyncPolicy::Always), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&first.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&first).unwrap(), before, "damage is left as found");
}

/// A rotation wrote segment 0's footer and a power cut came before its seal's fsync:
/// writeback persisted the footer's pages and not a page of the unsynced batch before
/// them. The file opens as sealed (its footer is whole), yet a data page reads as never
/// written: under `never`/`interval` the last sealed segment is scanned at open (its seal
/// may not have been durable), the hole is a torn tail, and the segment is sealed again
/// at it — a torn point — instead of serving a batch that fails its checks (simulation
/// seed 66000829: the damaged segment was exported to cold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_segment_whose_footer_reached_the_disk_before_its_data_is_a_torn_point() {
    let dir = tempfile::tempdir().unwrap();
    let (dir, t) = (dir.path(), topic("t"));
    let config = interval(dir);
    faults::track_durability(dir);
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&records(0, 5, 100))).await.unwrap();
    tier.close().await; // fsyncs 0..5
    faults::hold(dir, FaultPoint::SealFsync);
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&records(5, 5, 2000))).await.unwrap();
    tier.append(&t, batch(&big(10))).await.unwrap(); // rotates: segment 0's seal is held
    let cut = seal_pending_at_the_cut(tier, dir, seg(dir, t.as_str(), 10)).await;
    let first = seg(dir, t.as_str(), 0);
    let durable = cut.durable_len(&first);
    let page = durable.div_ceil(4096) * 4096;
    assert!(page + 4096 + 512 < len(&first), "a whole page of 5..10 lies before the footer");
    // The page after the durable bytes never reached the disk; the footer's did.
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[page as usize..(page + 4096) as usize].fill(0);
    std::fs::write(&first, &bytes).unwrap();
    cut.restore_seal_records().unwrap();

    let tier = HotTier::open(config).await.unwrap();
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(5, 10)], "the unsynced batch is a torn point");
    assert!(tier.cut_back_at_open(&t));
    assert_eq!(read_offsets(&tier, &t, 0).await, (0..5).collect::<Vec<_>>());
    assert_eq!(read_offsets(&tier, &t, 10).await, (10..20).collect::<Vec<_>>());
    tier.close().await;
}

/// A clean close records the newest sealed segments as durable (their seals finished),
/// and the next open trusts them as it trusts older ones: it does not read their
/// batches. Without that record (a crash, or a close that could not write it) the seals
/// that may have been in flight are checked, as above. Shown with a page of zeros in the
/// last sealed segment: trusted, it opens as sealed and the damage is a read's checksum
/// failure; checked, it is cut at the hole (a torn point).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_close_records_the_newest_seals_as_durable_and_the_next_open_trusts_them() {
    let dir = tempfile::tempdir().unwrap();
    let (dir, t) = (dir.path(), topic("t"));
    let config = interval(dir);
    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&records(0, 5, 2000))).await.unwrap();
    tier.append(&t, batch(&big(5))).await.unwrap();
    tier.append(&t, batch(&big(15))).await.unwrap();
    tier.rotate(&t).await.unwrap();
    tier.append(&t, batch(&records(25, 1, 100))).await.unwrap();
    let sealed: Vec<(Offset, u64)> =
        tier.sealed_segments(&t).iter().map(|s| (s.range.start, s.bytes)).collect();
    assert_eq!(sealed.iter().map(|s| s.0).collect::<Vec<_>>(), vec![0, 5, 15]);
    tier.close().await;
    let record = dir.join("t").join(tier_hot::layout::DURABLE_SEALS_FILE);
    let text = std::fs::read_to_string(&record).unwrap();
    let want: String = sealed[1..].iter().map(|(base, bytes)| format!("{base} {bytes}\n")).collect();
    assert_eq!(text, want, "the two newest sealed segments, each with its size");

    let last = seg(dir, "t", 15);
    let mut bytes = std::fs::read(&last).unwrap();
    bytes[4096..8192].fill(0);
    std::fs::write(&last, &bytes).unwrap();
    let tier = HotTier::open(config.clone()).await.unwrap();
    assert_eq!(tier.gaps(&t), vec![], "trusted: not read at open");
    assert!(!tier.cut_back_at_open(&t));
    let err = tier.read(&t, 15, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    tier.close().await;

    std::fs::remove_file(&record).unwrap();
    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(15, 25)], "checked: the hole is a torn point");
    assert!(tier.cut_back_at_open(&t));
    assert_eq!(read_offsets(&tier, &t, 25).await, vec![25]);
    tier.close().await;
}
