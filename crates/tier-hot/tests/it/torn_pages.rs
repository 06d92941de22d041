//! What a power cut leaves when the disk persisted a file's pages out of order:
//!
//! - a *hole before written pages*: writeback (range-cyclic, a disk's write cache)
//!   persists dirty pages in any order, so an unwritten page (read back as zeros) can sit
//!   before pages that reached the disk. In bytes no fsync covered — under
//!   `never`/`interval` anywhere in the active segment, under `always` only inside the
//!   last group's write — that is a torn tail: recovery truncates at the first invalid
//!   batch. Where the bytes after the hole cannot all be one unsynced write (`always`,
//!   more than a group's worth of intact data), or the invalid bytes hold no zeroed
//!   sector (a flipped byte), it stays damage (`Corruption`).
//! - a *torn creation*: a file system may persist a new file's length before its blocks
//!   (ext4 `data=writeback`), so a segment a rotation created reads back as zeros. As
//!   the last file, or after a segment whose seal was cut short, that is a segment none
//!   of whose header was durable: recreated (last) or removed as a torn point (middle).
//!   A zeroed header anywhere else, a wrong non-zero magic or another topic's header
//!   stay `Corruption`.
//!
//! The files are written by a tier and then changed as the power cut would have left
//! them; `faults::track_durability` tells which bytes an fsync covered. The rules are in
//! `docs/hot.md` ("Recovery", steps 1 and 2, and "Torn tails, holes and torn creations").

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{batch, open_damaged, records, small_config, topic, within};
use tier_core::{
    ErrorKind, Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierExt, TopicName,
    segment::SegmentHeader,
};
use tier_hot::{
    FsyncPolicy, HotConfig, HotTier, RecoveryPolicy, WriteStats,
    faults::{self, FaultPoint},
    layout::segment_file_name,
};

const PAGE: u64 = 4096;

fn seg(dir: &Path, t: &str, base: Offset) -> PathBuf {
    dir.join(t).join(segment_file_name(base))
}

/// 64 KiB segments; the timer fsync never fires during a test (its first tick is an
/// hour after the writer's start), so only `close` fsyncs the active segment.
fn interval(dir: &Path) -> HotConfig {
    small_config(dir).with_fsync(FsyncPolicy::Interval(Duration::from_secs(3600)))
}

fn with(mut config: HotConfig, fsync: FsyncPolicy) -> HotConfig {
    config.fsync = fsync;
    config
}

fn refusing(mut config: HotConfig) -> HotConfig {
    config.recovery = RecoveryPolicy::Refuse;
    config
}

/// Zeroes `range` of the file at `path`: what pages that never reached the disk read as.
fn zero(path: &Path, range: std::ops::Range<u64>) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[range.start as usize..range.end as usize].fill(0);
    std::fs::write(path, bytes).unwrap();
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// `count` batches of `per` records with `payload`-byte payloads, from `base`.
fn batches(base: Offset, count: usize, per: usize, payload: usize) -> Vec<RecordBatch> {
    records(base, count * per, payload).chunks(per).map(batch).collect()
}

/// Appends `batches` one by one; returns each one's end offset and end position in the
/// file at `path`.
async fn append_each(
    tier: &HotTier,
    t: &TopicName,
    path: &Path,
    batches: &[RecordBatch],
) -> Vec<(Offset, u64)> {
    let mut ends = Vec::new();
    for b in batches {
        tier.append(t, b.clone()).await.unwrap();
        ends.push((b.end_offset(), len(path)));
    }
    ends
}

async fn read_all(tier: &HotTier, t: &TopicName, from: Offset) -> Vec<Record> {
    tier.read(t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap()
}

/// A hole in the unsynced part of topic `t`'s active segment (segment 0), before intact
/// batches.
struct Hole {
    path: PathBuf,
    /// Every record written, in order.
    records: Vec<Record>,
    /// Records up to this offset were fsynced (acknowledged under `always`).
    durable_end: Offset,
    /// The zeroed page.
    page: std::ops::Range<u64>,
    /// Where the log must end: the base offset of the first batch the page touches, and
    /// that batch's position.
    kept: Offset,
    kept_len: u64,
}

/// Zeroes the first whole page above the length the cut found durable, checks that
/// whole batches follow it, and says where the log must end.
fn punch_hole(path: PathBuf, records: Vec<Record>, ends: &[(Offset, u64)], durable: u64) -> Hole {
    let durable_end = ends.iter().rev().find(|(_, end)| *end <= durable).unwrap().0;
    let start = durable.next_multiple_of(PAGE);
    let page = start..start + PAGE;
    let after = ends.iter().filter(|(_, end)| *end > page.end).count();
    assert!(after >= 3 && ends.iter().any(|(_, end)| *end == len(&path)), "intact batches after the hole");
    let (kept, kept_len) = *ends.iter().rev().find(|(_, end)| *end <= start).unwrap();
    assert!(kept >= durable_end, "the hole is above everything fsynced");
    zero(&path, page.clone());
    Hole { path, records, durable_end, page, kept, kept_len }
}

/// Under `never`/`interval`: records 0..10 fsynced by a close, 10..110 (about 13 KiB)
/// appended after it and never fsynced; the power is cut, then the page above the
/// durable length is zeroed.
async fn hole_without_fsync(dir: &Path, config: &HotConfig, t: &TopicName) -> Hole {
    faults::track_durability(dir);
    let path = seg(dir, t.as_str(), 0);
    let synced = batches(0, 2, 5, 100);
    let unsynced = batches(10, 20, 5, 100);
    let tier = HotTier::open(config.clone()).await.unwrap();
    let mut ends = append_each(&tier, t, &path, &synced).await;
    tier.close().await; // fsyncs the active segment
    let tier = HotTier::open(config.clone()).await.unwrap();
    ends.extend(append_each(&tier, t, &path, &unsynced).await);
    let cut = faults::power_cut(dir);
    tier.close().await; // its fsync is after the cut
    let durable = cut.durable_len(&path);
    assert_eq!(durable, ends[1].1, "the close fsynced records 0..10");
    punch_hole(path, records(0, 110, 100), &ends, durable)
}

/// Opens `config`, which must find `t` cut back to `hole.kept`: every record before it
/// served, the file truncated there, the next append continuing there.
async fn opens_cut_at_the_hole(config: HotConfig, t: &TopicName, hole: &Hole) {
    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(
        tier.range(t).await.unwrap(),
        OffsetRange::new(0, hole.kept),
        "ends at the first invalid batch"
    );
    assert_eq!(read_all(&tier, t, 0).await, hole.records[..hole.kept as usize], "every record before it");
    assert!(hole.kept >= hole.durable_end, "every fsynced record is served");
    assert_eq!(len(&hole.path), hole.kept_len, "truncated at the first invalid batch");
    assert!(tier.cut_back_at_open(t), "the open cut the log back");
    let more = records(hole.kept, 3, 10);
    tier.append(t, batch(&more)).await.unwrap();
    assert_eq!(read_all(&tier, t, hole.kept).await, more, "appends continue at that offset");
    tier.close().await;

    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.range(t).await.unwrap(), OffsetRange::new(0, hole.kept + 3));
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_interval_a_hole_before_written_pages_above_the_last_fsync_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = interval(dir.path());
    let hole = hole_without_fsync(dir.path(), &config, &t).await;
    opens_cut_at_the_hole(config, &t, &hole).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_never_a_hole_before_written_pages_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = with(small_config(dir.path()), FsyncPolicy::Never);
    let hole = hole_without_fsync(dir.path(), &config, &t).await;
    opens_cut_at_the_hole(config, &t, &hole).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_refuse_a_hole_before_written_pages_is_corruption_and_the_file_stays() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = interval(dir.path());
    let hole = hole_without_fsync(dir.path(), &config, &t).await;
    let before = len(&hole.path);
    let err = open_damaged(refusing(config), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let location = err.context().location.clone().unwrap();
    let (file, position) = location.rsplit_once('@').unwrap();
    assert_eq!(file, hole.path.display().to_string(), "{err}");
    let position: u64 = position.parse().unwrap();
    assert!((hole.kept_len..hole.page.end).contains(&position), "at the first invalid batch: {err}");
    assert_eq!(len(&hole.path), before, "refuse leaves the file alone");
}

/// Under `always`: records 0..10 appended one batch at a time (each fsynced), then
/// 10..110 as one group (`append_group`: one write, one fsync); the power is cut while
/// the group's fsync is held, before it ran. The page above the durable length, inside
/// the group's write, is zeroed.
async fn hole_in_the_last_write(dir: &Path, config: &HotConfig, t: &TopicName) -> Hole {
    faults::track_durability(dir);
    let path = seg(dir, t.as_str(), 0);
    let synced = batches(0, 2, 5, 100);
    let group = batches(10, 20, 5, 100);
    let tier = HotTier::open(config.clone()).await.unwrap();
    let mut ends = append_each(&tier, t, &path, &synced).await;
    faults::hold(dir, FaultPoint::Fsync);
    let (topic, batches) = (t.clone(), group.clone());
    let appending = tokio::spawn(async move {
        let answer = tier.append_group(&topic, batches).await;
        (tier, answer)
    });
    let data_dir = dir.to_owned();
    within(
        "the group's fsync",
        tokio::task::spawn_blocking(move || faults::wait_held(&data_dir, FaultPoint::Fsync)),
    )
    .await
    .unwrap();
    let mut at = ends[1].1;
    for b in &group {
        at += b.encoded_len() as u64;
        ends.push((b.end_offset(), at));
    }
    assert_eq!(at, len(&path), "the group's bytes are written, as one write");
    let cut = faults::power_cut(dir);
    faults::release(dir, FaultPoint::Fsync);
    let (tier, (held, result)) = within("the group", appending).await.unwrap();
    assert_eq!((held, result.map_err(|e| e.to_string())), (20, Ok(())));
    tier.close().await;
    let durable = cut.durable_len(&path);
    assert_eq!(durable, ends[1].1, "records 0..10 were fsynced, the group was not yet");
    punch_hole(path, records(0, 110, 100), &ends, durable)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_hole_inside_the_last_unsynced_write_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = small_config(dir.path());
    let hole = hole_in_the_last_write(dir.path(), &config, &t).await;
    opens_cut_at_the_hole(config, &t, &hole).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_refuse_a_hole_inside_the_last_write_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = small_config(dir.path());
    let hole = hole_in_the_last_write(dir.path(), &config, &t).await;
    let before = len(&hole.path);
    let err = open_damaged(refusing(config), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert_eq!(len(&hole.path), before, "refuse leaves the file alone");
}

/// The largest write of more than one batch (see `docs/hot.md`, "Appends, fsync
/// policies and group commit").
const MAX_GROUP_BYTES: u64 = 4 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_hole_followed_by_more_than_one_writes_worth_of_intact_data_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let mut config = small_config(dir.path());
    config.segment_bytes = 16 << 20;
    let path = seg(dir.path(), "holes", 0);
    let tier = HotTier::open(config.clone()).await.unwrap();
    let ends = append_each(&tier, &t, &path, &batches(0, 1, 5, 100)).await;
    // 20 batches of 256 KiB, each its own write and fsync: 5 MiB.
    let big = batches(5, 20, 1, 256 << 10);
    append_each(&tier, &t, &path, &big).await;
    tier.close().await;
    let first_big = ends[0].1;
    assert!(first_big < PAGE && len(&path) - first_big > MAX_GROUP_BYTES + (256 << 10));
    zero(&path, PAGE..2 * PAGE); // inside the first 256 KiB batch, fsynced long ago
    let before = len(&path);

    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("not a torn tail"), "{err}");
    let location = err.context().location.clone().unwrap();
    assert_eq!(location, format!("{}@{first_big}", path.display()), "{err}");
    assert_eq!(len(&path), before, "damage leaves the file alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_batches_is_written_in_writes_of_at_most_4_mib() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("group");
    let mut config = small_config(dir.path());
    config.segment_bytes = 64 << 20;
    let tier = HotTier::open(config).await.unwrap();
    tier.append(&t, batch(&records(0, 1, 10))).await.unwrap();
    let before = tier.write_stats(&t).unwrap();
    // Four batches of 1.5 MiB: two fit in 4 MiB, three do not.
    let group = batches(1, 4, 1, 3 << 19);
    let (held, result) = tier.append_group(&t, group.clone()).await;
    assert_eq!((held, result.map_err(|e| e.to_string())), (4, Ok(())));
    let now = tier.write_stats(&t).unwrap();
    let delta = WriteStats {
        batches: now.batches - before.batches,
        writes: now.writes - before.writes,
        fsyncs: now.fsyncs - before.fsyncs,
    };
    assert_eq!(
        delta,
        WriteStats { batches: 4, writes: 2, fsyncs: 2 },
        "each write is fsynced before the next"
    );
    assert_eq!(tier.read_batches(&t, 1, 5, usize::MAX).await.unwrap(), group);
    tier.close().await;
}

/// Segment 0 (records 0..10) sealed and durable, then segment 10 — the last file —
/// holding records 10..30 (`with_data`, about 11 KiB) or nothing; closed.
async fn rotated(dir: &Path, config: &HotConfig, t: &TopicName, with_data: bool) -> (Vec<Record>, PathBuf) {
    let tier = HotTier::open(config.clone()).await.unwrap();
    let first = records(0, 10, 100);
    tier.append(t, batch(&first)).await.unwrap();
    tier.rotate(t).await.unwrap().unwrap();
    if with_data {
        for b in batches(10, 20, 1, 500) {
            tier.append(t, b).await.unwrap();
        }
    }
    tier.close().await;
    (first, seg(dir, t.as_str(), 10))
}

/// Opens `config`, which must find `t` holding `sealed` (segment 0) and its last file
/// recreated empty at offset 10; appends continue there.
async fn opens_with_the_last_file_recreated(config: HotConfig, t: &TopicName, sealed: &[Record]) {
    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(t).await.unwrap(), OffsetRange::new(0, 10));
    assert_eq!(read_all(&tier, t, 0).await, sealed, "the sealed segment is served");
    let listed: Vec<_> = tier.sealed_segments(t).iter().map(|s| s.range).collect();
    assert_eq!(listed, vec![OffsetRange::new(0, 10)]);
    let more = records(10, 4, 10);
    tier.append(t, batch(&more)).await.unwrap();
    assert_eq!(read_all(&tier, t, 10).await, more);
    tier.close().await;
    let tier = HotTier::open(config).await.unwrap();
    assert_eq!(tier.range(t).await.unwrap(), OffsetRange::new(0, 14));
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_interval_a_rotated_segment_that_reads_as_zeros_is_a_torn_creation() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (sealed, last) = rotated(dir.path(), &config, &t, true).await;
    let size = len(&last);
    assert!(size > 2 * PAGE);
    zero(&last, 0..size); // the length reached the disk, the blocks did not
    opens_with_the_last_file_recreated(config, &t, &sealed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_interval_a_rotated_segment_with_a_zeroed_header_page_is_a_torn_creation() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (sealed, last) = rotated(dir.path(), &config, &t, true).await;
    zero(&last, 0..PAGE); // later pages reached the disk, the header's did not
    opens_with_the_last_file_recreated(config, &t, &sealed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_zero_header_of_the_last_file_is_a_torn_creation() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (sealed, last) = rotated(dir.path(), &config, &t, false).await;
    let header_len = len(&last);
    zero(&last, 20..header_len); // magic, version, flags, interval intact
    opens_with_the_last_file_recreated(config, &t, &sealed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_new_segment_whose_header_never_reached_the_disk_is_a_torn_creation() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = small_config(dir.path());
    let (sealed, last) = rotated(dir.path(), &config, &t, false).await;
    let header_len = len(&last);
    zero(&last, 0..header_len); // a crash between the creation's write and its fsync
    opens_with_the_last_file_recreated(config, &t, &sealed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_refuse_a_rotated_segment_that_reads_as_zeros_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (_, last) = rotated(dir.path(), &config, &t, true).await;
    zero(&last, 0..len(&last));
    let err = open_damaged(refusing(config), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&last.display().to_string()), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_zeroed_header_before_fsynced_batches_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = small_config(dir.path());
    let (_, last) = rotated(dir.path(), &config, &t, true).await;
    // The creation fsynced the header before any append into the file.
    zero(&last, 0..PAGE);
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&last.display().to_string()), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_magic_or_another_topics_header_in_the_last_file_stays_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (_, last) = rotated(dir.path(), &config, &t, false).await;
    let header = std::fs::read(&last).unwrap();

    let mut bad_magic = header.clone();
    bad_magic[0] = b'X';
    bad_magic[20..].fill(0);
    std::fs::write(&last, &bad_magic).unwrap();
    let err = open_damaged(config.clone(), &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("magic"), "{err}");

    let other = SegmentHeader::new(topic("other"), 10, 0).encode();
    std::fs::write(&last, &other).unwrap();
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("other"), "{err}");
}

/// Segments 0 (0..10) and 10 (10..20) sealed, 20 (20..30) active; closed. `cut_short`
/// then drops segment 0's last byte (its trailer magic: a seal cut short), and segment
/// 10 is zeroed whole.
async fn zeroed_middle_segment(dir: &Path, config: &HotConfig, t: &TopicName, cut_short: bool) -> PathBuf {
    let tier = HotTier::open(config.clone()).await.unwrap();
    for base in [0, 10] {
        tier.append(t, batch(&records(base, 10, 100))).await.unwrap();
        tier.rotate(t).await.unwrap().unwrap();
    }
    tier.append(t, batch(&records(20, 10, 100))).await.unwrap();
    tier.close().await;
    if cut_short {
        let first = seg(dir, t.as_str(), 0);
        let f = std::fs::OpenOptions::new().write(true).open(&first).unwrap();
        f.set_len(len(&first) - 1).unwrap();
    }
    let middle = seg(dir, t.as_str(), 10);
    zero(&middle, 0..len(&middle));
    middle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zeroed_segment_after_a_seal_cut_short_is_a_torn_point() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let middle = zeroed_middle_segment(dir.path(), &config, &t, true).await;
    let tier = HotTier::open(config).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic opens: {:?}", tier.damaged());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 30));
    assert_eq!(tier.gaps(&t), vec![OffsetRange::new(10, 20)], "its offsets are recorded as lost");
    assert!(!middle.exists(), "the segment none of whose header was durable is removed");
    assert_eq!(read_all(&tier, &t, 0).await, records(0, 10, 100));
    assert_eq!(read_all(&tier, &t, 20).await, records(20, 10, 100));
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zeroed_segment_after_a_durable_seal_stays_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let middle = zeroed_middle_segment(dir.path(), &config, &t, false).await;
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&middle.display().to_string()), "{err}");
    assert!(middle.exists(), "damage is left as found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_always_a_zeroed_middle_segment_stays_corruption_even_after_a_seal_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    // Under `always` every segment's header was fsynced when it was created.
    let config = small_config(dir.path());
    let middle = zeroed_middle_segment(dir.path(), &config, &t, true).await;
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&middle.display().to_string()), "{err}");
    assert!(middle.exists(), "damage is left as found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_before_intact_batches_stays_damage_under_every_fsync_policy() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::Interval(Duration::from_secs(3600)), FsyncPolicy::Never] {
        let dir = tempfile::tempdir().unwrap();
        let t = topic("flip");
        let config = with(small_config(dir.path()), fsync);
        let path = seg(dir.path(), "flip", 0);
        let tier = HotTier::open(config.clone()).await.unwrap();
        let ends = append_each(&tier, &t, &path, &batches(0, 10, 5, 100)).await;
        tier.close().await;
        // Not zeros: no page that failed to reach the disk reads like this.
        let at = ends[2].1;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at as usize + 40] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();

        let err = open_damaged(config, &t).await;
        assert_eq!(err.kind(), ErrorKind::Corruption, "{fsync:?}: {err}");
        assert!(err.to_string().contains("not a torn tail"), "{fsync:?}: {err}");
        assert_eq!(err.context().location.clone().unwrap(), format!("{}@{at}", path.display()));
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{fsync:?}: damage is left as found");
    }
}

/// The switch that puts the old reading of holes and unwritten headers back
/// ([`faults::Revert::HolesAreDamage`], for the simulation's proof that it finds this bug
/// class): a hole before written pages, and a rotated segment that reads as zeros, make
/// the topic refused as damaged, as they did before the fsync policy told them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reverted_wal_refuses_holes_and_unwritten_headers_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("holes");
    let config = with(small_config(dir.path()), FsyncPolicy::Never);
    hole_without_fsync(dir.path(), &config, &t).await;
    faults::revert(dir.path(), faults::Revert::HolesAreDamage);
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    faults::restore(dir.path());

    let dir = tempfile::tempdir().unwrap();
    let t = topic("zeros");
    let config = interval(dir.path());
    let (_, last) = rotated(dir.path(), &config, &t, true).await;
    zero(&last, 0..len(&last));
    faults::revert(dir.path(), faults::Revert::HolesAreDamage);
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("magic"), "{err}");
    faults::restore(dir.path());
}
