//! I/O faults (feature `fault-injection`, always on for these tests): a failed WAL write,
//! append fsync, background seal fsync or directory fsync poisons the topic's writer —
//! that append and every later one fail `Unavailable` until the tier is reopened —,
//! loses nothing acknowledged, and never leaves a partial batch behind.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::{
    io::ErrorKind as IoKind,
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;
use common::{batch, open, records, small_config, topic, within};
use tier_core::{
    ErrorKind, Offset, OffsetRange, ReadLimit, Record, Tier, TierError, TierExt, TopicName,
    segment::SealedSegment, segment::TRAILER_LEN,
};
use tier_hot::{
    FsyncPolicy, HotConfig, HotTier, RecoveryPolicy, SegmentEvent,
    faults::{self, FaultPoint},
    layout::segment_file_name,
};
use tokio::sync::broadcast::error::TryRecvError;

fn config(dir: &Path, fsync: FsyncPolicy) -> HotConfig {
    let mut config = small_config(dir).with_fsync(fsync);
    config.segment_bytes = 1 << 20;
    config
}

async fn append_all(tier: &HotTier, t: &TopicName, records: &[Record], per_batch: usize) {
    for chunk in records.chunks(per_batch) {
        tier.append(t, batch(chunk)).await.unwrap();
    }
}

async fn read_all(tier: &HotTier, t: &TopicName) -> Vec<Record> {
    tier.read(t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap()
}

/// Offsets and payload sizes of `records`: what a failed comparison prints of them.
fn summary(records: &[Record]) -> Vec<(Offset, usize)> {
    records.iter().map(|r| (r.offset, r.payload.len())).collect()
}

/// Asserts `got == want`, printing offsets and payload sizes instead of whole records.
fn assert_records(got: &[Record], want: &[Record], what: &str) {
    assert!(got == want, "{what}:\n got  {:?}\n want {:?}", summary(got), summary(want));
}

fn assert_unavailable(result: Result<(), TierError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{what}: {err}");
}

/// Starts one append per batch of `per_batch` records, each polled once in offset order
/// (so those that do not finish at once are queued in order), then waits for all.
async fn burst(
    tier: &HotTier,
    t: &TopicName,
    records: &[Record],
    per_batch: usize,
) -> Vec<Result<(), TierError>> {
    let started = tokio::task::unconstrained(async {
        let mut started = Vec::new();
        for chunk in records.chunks(per_batch) {
            let mut append = Box::pin(tier.append(t, batch(chunk)));
            match futures::poll!(append.as_mut()) {
                std::task::Poll::Ready(result) => {
                    started.push(futures::future::Either::Left(async { result }))
                }
                std::task::Poll::Pending => started.push(futures::future::Either::Right(append)),
            }
        }
        started
    })
    .await;
    within("a burst of appends", futures::future::join_all(started)).await
}

/// After a fault poisoned `t`'s writer: a single append and a burst of concurrent ones
/// at the committed end `end` fail `Unavailable`, and readers see exactly `acked`.
async fn assert_poisoned(tier: &HotTier, t: &TopicName, acked: &[Record], end: Offset) {
    let next = records(end, 12, 40);
    assert_unavailable(within("an append", tier.append(t, batch(&next[..3]))).await, "the next append");
    for (i, result) in burst(tier, t, &next, 3).await.into_iter().enumerate() {
        assert_unavailable(result, &format!("append {i} of a burst after the fault"));
    }
    assert_eq!(tier.range(t).await.unwrap(), OffsetRange::new(0, end));
    assert_eq!(read_all(tier, t).await, acked, "reads return everything acknowledged");
}

/// Reopens `config` (with `fault`'s directory disarmed) and checks that `t` holds every
/// acknowledged record, then the failed batches wholly or not at all (`per_batch`
/// records each), and that appends work again. Returns the reopened tier.
async fn reopen_and_check(
    config: HotConfig,
    t: &TopicName,
    acked: &[Record],
    failed: &[Record],
    per_batch: usize,
) -> HotTier {
    faults::clear(&config.data_dir);
    let tier = within("open", HotTier::open(config)).await.unwrap();
    let got = read_all(&tier, t).await;
    assert!(got.len() >= acked.len(), "lost acknowledged records: {} of {}", got.len(), acked.len());
    assert_eq!(got[..acked.len()], acked[..], "acknowledged records survive");
    let extra = &got[acked.len()..];
    assert!(extra.len() <= failed.len(), "records beyond the acknowledged and failed ones: {}", extra.len());
    assert_eq!(extra, &failed[..extra.len()], "anything beyond is the failed batches");
    assert_eq!(extra.len() % per_batch, 0, "a failed batch is wholly there or absent: {}", extra.len());
    let end = got.len() as Offset;
    assert_eq!(tier.range(t).await.unwrap(), OffsetRange::new(0, end));
    let more = records(end, 4, 40);
    within("an append after reopening", tier.append(t, batch(&more))).await.unwrap();
    assert_eq!(tier.read(t, end, u64::MAX, ReadLimit::unbounded()).await.unwrap(), more);
    tier
}

fn segment_path(dir: &Path, t: &TopicName, base: Offset) -> PathBuf {
    dir.join(t.as_str()).join(segment_file_name(base))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

// --- 1. A failed append fsync ---------------------------------------------------------

/// Under `always`, sequential appends after a segment's first go the direct path: the
/// n-th one's fsync fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_fails_the_append_and_poisons_the_writer_direct_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Always);
    let tier = open(config.clone()).await;
    let t = topic("fsync-direct");
    let all = records(0, 24, 100);
    append_all(&tier, &t, &all[..20], 4).await;
    let before = tier.write_stats(&t).unwrap();

    faults::fail_nth(dir.path(), FaultPoint::Fsync, 2, IoKind::Other);
    within("an append", tier.append(&t, batch(&all[20..22]))).await.unwrap();
    let failed = within("an append", tier.append(&t, batch(&all[22..24]))).await;
    assert_unavailable(failed, "the append whose fsync failed");
    assert_eq!(faults::fired(dir.path(), FaultPoint::Fsync), 1);
    let after = tier.write_stats(&t).unwrap();
    assert_eq!(after.fsyncs, before.fsyncs + 1, "only the successful fsync counts: {after:?}");
    assert_eq!(after.batches, before.batches + 1, "the failed batch was not committed: {after:?}");
    assert_eq!(tier.unsynced(&t), Some(OffsetRange::new(22, 24)), "written, not made durable");

    // The fault fired once; the writer stays poisoned by itself.
    assert_poisoned(&tier, &t, &all[..22], 22).await;
    within("close", tier.close()).await;
    reopen_and_check(config, &t, &all[..22], &all[22..24], 2).await.close().await;
}

/// Under `always` the WAL vouches for its end: whatever a reopened WAL serves must be
/// durable. A batch whose fsync failed may sit in the page cache only (a failed writeback
/// marks its pages clean, and no later fsync writes them): the writer cuts it off the file
/// at once, so a crash and a reopen serve exactly what was acknowledged, and a power cut
/// afterwards takes nothing that was served (had the reopen served the batch, its offsets
/// would go to other records after the power cut).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_reopened_under_always_serves_only_what_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Always);
    faults::track_durability(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("unsynced-tail");
    let all = records(0, 6, 100);
    append_all(&tier, &t, &all[..4], 2).await;
    let seg = segment_path(dir.path(), &t, 0);
    let durable = file_len(&seg);
    faults::fail_nth(dir.path(), FaultPoint::Fsync, 1, IoKind::Other);
    assert_unavailable(within("an append", tier.append(&t, batch(&all[4..6]))).await, "the fsync failed");
    assert_eq!(tier.unsynced(&t), Some(OffsetRange::new(4, 6)));
    assert_eq!(file_len(&seg), durable, "the batch whose fsync failed was cut off the file");
    faults::clear(dir.path());
    // A crash: nothing of a clean close runs.
    drop(tier);

    let tier = within("open", HotTier::open(config.clone())).await.unwrap();
    assert_records(&read_all(&tier, &t).await, &all[..4], "the reopened WAL serves what was acknowledged");
    assert!(!tier.cut_back_at_open(&t), "nothing acknowledged was cut");
    // A power cut now takes nothing it serves.
    let cut = faults::power_cut(dir.path());
    assert_eq!(cut.durable_len(&seg), file_len(&seg), "what the reopened WAL serves is durable");
    drop(tier);
    cut.apply().unwrap();
    faults::untrack_durability(dir.path());
    let tier = within("open", HotTier::open(config)).await.unwrap();
    assert_records(&read_all(&tier, &t).await, &all[..4], "what was served survives the power cut");
    tier.close().await;
}

/// Under `always`, records 0..4 acknowledged, then 4..12 refused `Unavailable` by an fsync
/// that fails losing its pages (batches of several pages, so that the lost bytes fill
/// whole pages). Returns the tier, its configuration, the topic, the acknowledged records
/// and the refusal.
async fn refused_by_a_failed_fsync(dir: &Path) -> (HotTier, HotConfig, TopicName, Vec<Record>, TierError) {
    let config = config(dir, FsyncPolicy::Always);
    let tier = open(config.clone()).await;
    let t = topic("fsyncgate");
    let acked = records(0, 4, 2000);
    append_all(&tier, &t, &acked, 2).await;
    let refused = records(4, 8, 2000);
    faults::fail_fsync_losing_pages(dir, 1, IoKind::StorageFull);
    let err = within("an append", tier.append(&t, batch(&refused))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
    (tier, config, t, acked, err)
}

/// A failed fsync as Linux fails it ("fsyncgate"): the pages the writeback could not
/// write are marked clean, the page cache keeps showing them, and every later fsync
/// succeeds without writing them. The WAL must not vouch for them: the append is refused
/// `Unavailable`, and after a crash and a reopen — whose own fsync succeeds — the WAL
/// serves only what the disk holds, so the records acknowledged after the reopen survive
/// the page cache's loss (a reboot) at the offsets they were acknowledged at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_that_loses_its_pages_is_never_vouched_for_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, config, t, acked, err) = refused_by_a_failed_fsync(dir.path()).await;
    assert_eq!(faults::fired(dir.path(), FaultPoint::Fsync), 1);
    faults::clear(dir.path());
    // A crash, and a restart in the same boot: the page cache survives.
    drop(tier);

    let tier = within("open", HotTier::open(config.clone())).await.unwrap();
    let served = read_all(&tier, &t).await;
    assert_records(&served, &acked, "the reopened WAL serves exactly what was acknowledged");
    let end = served.len() as Offset;
    // Other records than the refused ones (another payload size).
    let later = records(end, 3, 1500);
    for chunk in later.chunks(2) {
        within("an append after the reopen", tier.append(&t, batch(chunk))).await.unwrap();
    }
    within("close", tier.close()).await;

    // A reboot: the page cache is gone, and with it whatever the disk never got.
    faults::drop_page_cache(dir.path()).unwrap();
    let tier = within("open", HotTier::open(config)).await.unwrap();
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    let got = read_all(&tier, &t).await;
    let expected: Vec<Record> = acked.iter().chain(&later).cloned().collect();
    assert_records(&got, &expected, "every acknowledged record, at the offset it was acknowledged at");
    tier.close().await;
    assert!(
        err.report().to_string().contains("fsyncing the WAL"),
        "the error names the fsync: {}",
        err.report()
    );
}

/// Under `interval` the timer's fsync fails and loses its pages: the records acknowledged
/// since the last successful fsync carried no durability promise, and a reopen must not
/// start vouching for them: it reads what the disk holds, cuts the lost tail and reports
/// the cut (`cut_back_at_open`, for the router to fence the offsets), so the records
/// acknowledged after the reopen survive a reboot.
#[tokio::test(start_paused = true)]
async fn a_failed_timer_fsync_that_loses_its_pages_is_cut_at_the_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Interval(Duration::from_millis(100)));
    let tier = open(config.clone()).await;
    let t = topic("fsyncgate-interval");
    let first = records(0, 2, 2000);
    tier.append(&t, batch(&first)).await.unwrap();
    // The timer's first fsync (one interval after the open) makes them durable.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(tier.write_stats(&t).unwrap().fsyncs, 1);
    faults::fail_fsync_losing_pages(dir.path(), 1, IoKind::Other);
    let unsynced = records(2, 4, 2000);
    tier.append(&t, batch(&unsynced)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(faults::fired(dir.path(), FaultPoint::Fsync), 1, "the timer's fsync failed");
    faults::clear(dir.path());
    within("close", tier.close()).await;

    let tier = within("open", HotTier::open(config.clone())).await.unwrap();
    assert_records(&read_all(&tier, &t).await, &first, "only what the disk holds is served");
    assert!(tier.cut_back_at_open(&t), "the lost tail is reported");
    let later = records(2, 3, 1500);
    tier.append(&t, batch(&later)).await.unwrap();
    within("close", tier.close()).await;

    faults::drop_page_cache(dir.path()).unwrap();
    let tier = within("open", HotTier::open(config)).await.unwrap();
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    let expected: Vec<Record> = first.iter().chain(&later).cloned().collect();
    assert_records(&read_all(&tier, &t).await, &expected, "every acknowledged record after the reboot");
    tier.close().await;
}

/// The first appends into a new segment are queued to the writer task: a burst of them
/// is group-committed, and the group's fsync fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_group_fsync_fails_every_append_of_the_group_queued_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Always);
    let tier = open(config.clone()).await;
    let t = topic("fsync-group");
    let all = records(0, 60, 100);
    append_all(&tier, &t, &all[..20], 5).await;
    // The new active segment is empty: its first batch goes through the writer task, and
    // the others queue behind it.
    tier.rotate(&t).await.unwrap().unwrap();

    faults::fail_nth(dir.path(), FaultPoint::Fsync, 1, IoKind::Other);
    let results = burst(&tier, &t, &all[20..], 5).await;
    assert_eq!(faults::fired(dir.path(), FaultPoint::Fsync), 1);
    for (i, result) in results.into_iter().enumerate() {
        assert_unavailable(result, &format!("append {i} of the burst"));
    }
    let unsynced = tier.unsynced(&t).expect("the group was written before its fsync failed");
    assert_eq!(unsynced.start, 20, "{unsynced:?}");
    assert_poisoned(&tier, &t, &all[..20], 20).await;
    assert_eq!(tier.sealed_segments(&t).len(), 1, "the earlier seal is unaffected");
    within("close", tier.close()).await;
    reopen_and_check(config, &t, &all[..20], &all[20..], 5).await.close().await;
}

// --- 2. A failed data write -----------------------------------------------------------

/// Appends 3 batches, then makes the next data write fail after writing half its bytes:
/// through the direct path, or the writer task when `queued` (the batch starts a new
/// segment); with a group of at most 4 KiB (copied, one `write`) or a larger one
/// (vectored `writev`).
async fn failed_write(fsync: FsyncPolicy, payload: usize, queued: bool) {
    let what = format!("{fsync:?}, payload {payload}, queued {queued}");
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), fsync);
    let tier = open(config.clone()).await;
    let t = topic("write");
    let all = records(0, 8, payload);
    append_all(&tier, &t, &all[..6], 2).await;
    let active = if queued {
        tier.rotate(&t).await.unwrap().unwrap();
        segment_path(dir.path(), &t, 6)
    } else {
        segment_path(dir.path(), &t, 0)
    };
    let len = file_len(&active);

    faults::fail_nth(dir.path(), FaultPoint::Write, 1, IoKind::StorageFull);
    let failed = within("an append", tier.append(&t, batch(&all[6..8]))).await;
    assert_unavailable(failed, &what);
    assert_eq!(faults::fired(dir.path(), FaultPoint::Write), 1, "{what}");
    assert_eq!(file_len(&active), len, "{what}: the half-written batch was cut off");
    assert_eq!(tier.unsynced(&t), None, "{what}: nothing written stays in the file");

    assert_poisoned(&tier, &t, &all[..6], 6).await;
    assert_eq!(file_len(&active), len, "{what}: a poisoned writer writes nothing");
    within("close", tier.close()).await;
    // Nothing torn is left: even `refuse` opens, and the failed batch is absent.
    let mut refuse = config;
    refuse.recovery = RecoveryPolicy::Refuse;
    let tier = reopen_and_check(refuse, &t, &all[..6], &[], 2).await;
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_cut_back_and_poisons_the_writer_under_never() {
    for (payload, queued) in [(50, false), (50, true), (6000, false), (6000, true)] {
        failed_write(FsyncPolicy::Never, payload, queued).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_cut_back_and_poisons_the_writer_under_always() {
    for (payload, queued) in [(50, false), (50, true), (6000, false), (6000, true)] {
        failed_write(FsyncPolicy::Always, payload, queued).await;
    }
}

// --- 3. A failed background seal fsync ------------------------------------------------

/// Where the batches of the sealed segment file `bytes` end (the footer starts).
fn data_end(bytes: Vec<u8>) -> u64 {
    let len = bytes.len() as u64;
    let seg = SealedSegment::open(Bytes::from(bytes)).unwrap();
    len - seg.trailer().index_len() - TRAILER_LEN as u64
}

/// Rotates under `never` with the seal's `nth` fsync at `point` failing.
async fn failed_seal(point: FaultPoint, nth: u32) {
    let what = format!("{point:?} #{nth}");
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Never);
    let tier = open(config.clone()).await;
    let t = topic("seal");
    let mut events = tier.segment_events();
    let all = records(0, 20, 200);
    append_all(&tier, &t, &all, 5).await;

    faults::fail_nth(dir.path(), point, nth, IoKind::Other);
    let err = within("rotate", tier.rotate(&t)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{what}: {err}");
    assert_eq!(faults::fired(dir.path(), point), 1, "{what}");
    assert!(tier.sealed_segments(&t).is_empty(), "{what}: an unsynced segment is not listed");
    assert_poisoned(&tier, &t, &all, 20).await;
    within("close", tier.close()).await;
    assert!(
        matches!(events.try_recv(), Err(TryRecvError::Empty)),
        "{what}: an unsynced segment is never announced"
    );

    // As if the footer had not reached the disk: reopening seals the segment again.
    let sealed = segment_path(dir.path(), &t, 0);
    let original = std::fs::read(&sealed).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&sealed).unwrap();
    file.set_len(data_end(original.clone())).unwrap();
    drop(file);
    let tier = reopen_and_check(config, &t, &all, &[], 5).await;
    assert_eq!(std::fs::read(&sealed).unwrap(), original, "{what}: the same footer, rewritten");
    let listed = tier.sealed_segments(&t);
    assert_eq!(listed.iter().map(|s| s.range).collect::<Vec<_>>(), [OffsetRange::new(0, 20)], "{what}");
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_seal_fsync_keeps_the_segment_unannounced_and_poisons_the_writer() {
    // The sealed file's fsync, the new active file's (rotation created it unsynced
    // under `never`), the topic directory's.
    for (point, nth) in [(FaultPoint::SealFsync, 1), (FaultPoint::SealFsync, 2), (FaultPoint::DirFsync, 1)] {
        failed_seal(point, nth).await;
    }
}

/// A size rotation's seal fails in the background while appends go on: the batch that
/// triggered the rotation is acknowledged (it went into the new segment, which needs no
/// seal), the first append after the failure is seen — at the latest the rotation that
/// must wait for that seal, as at most 2 run per topic — fails, and so does every later
/// one; nothing from the failed seal on is announced. With two seals in flight the
/// younger one's fsync may run first and meet the failure: the older one then succeeds,
/// and its segment, the first, may be announced (segments are announced in order, so
/// never one after the failed seal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_seal_after_a_size_rotation_poisons_later_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), FsyncPolicy::Never);
    config.segment_bytes = 4096;
    let tier = open(config.clone()).await;
    let t = topic("size");
    let mut events = tier.segment_events();
    // About 5 batches of 2 records per 4 KiB segment: 4 rotations at least.
    let all = records(0, 60, 300);
    faults::fail_nth(dir.path(), FaultPoint::SealFsync, 1, IoKind::Other);
    let mut acked = 0;
    for chunk in all.chunks(2) {
        match within("an append", tier.append(&t, batch(chunk))).await {
            Ok(()) => acked += chunk.len(),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                break;
            }
        }
    }
    assert!(acked < all.len(), "appends fail once the seal failed");
    assert_eq!(faults::fired(dir.path(), FaultPoint::SealFsync), 1, "a size rotation happened");
    assert!(tier.sealed_segments(&t).is_empty());
    assert_poisoned(&tier, &t, &all[..acked], acked as Offset).await;
    within("close", tier.close()).await;
    let mut announced = Vec::new();
    loop {
        match events.try_recv() {
            Ok(SegmentEvent::Sealed(info)) => announced.push(info.range),
            Err(TryRecvError::Empty) => break,
            other => panic!("only seals are announced: {other:?}"),
        }
    }
    assert!(
        announced.is_empty() || (announced.len() == 1 && announced[0].start == 0),
        "at most the first segment, whose seal ran before the failed one, is announced: {announced:?}"
    );
    let tier = reopen_and_check(config, &t, &all[..acked], &[], 2).await;
    let first = tier.sealed_segments(&t)[0].range;
    assert_eq!(first.start, 0);
    assert!(first.end < acked as Offset, "the batch that rotated was acknowledged: {first} {acked}");
    tier.close().await;
}

// --- 4. A failed directory fsync at segment creation ----------------------------------

/// The first append of a topic creates its directory (fsyncing the data directory, #1)
/// and its first segment (fsyncing the topic directory, #2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_directory_fsync_when_a_topic_starts_fails_the_append_and_poisons() {
    for nth in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), FsyncPolicy::Never);
        let tier = open(config.clone()).await;
        let t = topic("new");
        let all = records(0, 4, 40);
        faults::fail_nth(dir.path(), FaultPoint::DirFsync, nth, IoKind::Other);
        let failed = within("an append", tier.append(&t, batch(&all))).await;
        assert_unavailable(failed, &format!("directory fsync #{nth}"));
        assert_eq!(faults::fired(dir.path(), FaultPoint::DirFsync), 1);
        assert_poisoned(&tier, &t, &[], 0).await;
        within("close", tier.close()).await;
        reopen_and_check(config, &t, &[], &all, 4).await.close().await;
    }
}

/// Under `always` a rotation creates the next segment with its file and directory
/// fsyncs before appending into it; a failed directory fsync there fails the rotation
/// (on demand) or the append that triggered it (by size), and poisons the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_directory_fsync_at_rotation_under_always_fails_and_poisons() {
    for by_size in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let t = topic("rotate");
        let all = records(0, 24, 500);
        let mut config = config(dir.path(), FsyncPolicy::Always);
        {
            let tier = open(config.clone()).await;
            append_all(&tier, &t, &all[..20], 4).await;
            tier.close().await;
        }
        if by_size {
            // The next batch does not fit: appending it rotates.
            config.segment_bytes = file_len(&segment_path(dir.path(), &t, 0));
        }
        let tier = open(config.clone()).await;
        faults::fail_nth(dir.path(), FaultPoint::DirFsync, 1, IoKind::Other);
        let failed = if by_size {
            within("an append", tier.append(&t, batch(&all[20..]))).await
        } else {
            within("rotate", tier.rotate(&t)).await.map(|_| ())
        };
        assert_unavailable(failed, &format!("by size {by_size}"));
        assert_eq!(faults::fired(dir.path(), FaultPoint::DirFsync), 1);
        assert!(tier.sealed_segments(&t).is_empty());
        assert_poisoned(&tier, &t, &all[..20], 20).await;
        within("close", tier.close()).await;
        let tier = reopen_and_check(config, &t, &all[..20], &all[20..], 4).await;
        // Reopening finds the sealed segment (its footer was written) and continues.
        assert_eq!(tier.sealed_segments(&t)[0].range, OffsetRange::new(0, 20));
        tier.close().await;
    }
}

/// The hooks are scoped to their data directory: a fault armed for one tier does not
/// touch another tier in the same process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_scoped_to_their_data_directory() {
    let (armed, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(config(armed.path(), FsyncPolicy::Always)).await;
    let b = open(config(other.path(), FsyncPolicy::Always)).await;
    let t = topic("scoped");
    let all = records(0, 8, 40);
    faults::fail_nth(armed.path(), FaultPoint::Fsync, 1, IoKind::Other);
    append_all(&b, &t, &all, 2).await;
    assert_eq!(faults::fired(armed.path(), FaultPoint::Fsync), 0);
    assert_unavailable(a.append(&t, batch(&all[..2])).await, "the armed tier's append");
    assert_eq!(faults::fired(armed.path(), FaultPoint::Fsync), 1);
    assert_eq!(read_all(&b, &t).await, all);
    faults::clear(armed.path());
    assert_eq!(faults::fired(armed.path(), FaultPoint::Fsync), 0, "cleared");
    a.close().await;
    b.close().await;
}

/// Under `interval`, the timer's fsync failing poisons the writer like an append's.
#[tokio::test(start_paused = true)]
async fn a_failed_timer_fsync_poisons_the_writer_under_interval() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), FsyncPolicy::Interval(Duration::from_millis(100)));
    let tier = open(config.clone()).await;
    let t = topic("interval");
    let all = records(0, 50, 40);
    faults::fail_nth(dir.path(), FaultPoint::Fsync, 1, IoKind::Other);
    let mut acked = 0;
    for chunk in all.chunks(5) {
        match within("an append", tier.append(&t, batch(chunk))).await {
            Ok(()) => acked += chunk.len(),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                break;
            }
        }
        // With the clock paused, time advances only when every task is idle and no
        // blocking job (the timer's fsync) runs: the fsync due within this second has
        // completed when the sleep ends. (The timer may also fire during an append, so
        // which append sees the failure first is not fixed.)
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!((5..all.len()).contains(&acked), "the first append is acknowledged, a later one fails: {acked}");
    assert_eq!(faults::fired(dir.path(), FaultPoint::Fsync), 1);
    assert_eq!(tier.write_stats(&t).unwrap().fsyncs, 0, "the failed fsync is not counted");
    assert_poisoned(&tier, &t, &all[..acked], acked as Offset).await;
    within("close", tier.close()).await;
    reopen_and_check(config, &t, &all[..acked], &[], 5).await.close().await;
}

// --- Retention -------------------------------------------------------------------------

/// A deletion whose directory fsync failed leaves the segment listed (the file is
/// already unlinked); the next run finishes it instead of failing on the missing file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_retries_a_deletion_whose_directory_fsync_failed() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(config(dir.path(), FsyncPolicy::Never)).await;
    let t = topic("retention");
    let all = records(0, 20, 40);
    append_all(&tier, &t, &all[..10], 5).await;
    let first = tier.rotate(&t).await.unwrap().unwrap();
    append_all(&tier, &t, &all[10..], 5).await;
    let mut events = tier.segment_events();
    let later = std::time::SystemTime::now() + Duration::from_secs(48 * 3600);

    faults::fail_nth(dir.path(), FaultPoint::DirFsync, 1, IoKind::Other);
    let err = tier.run_retention(later, &|_| true).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(!first.path.exists(), "unlinked before the directory fsync");
    assert_eq!(
        tier.sealed_segments(&t),
        std::slice::from_ref(&first),
        "still listed until the fsync succeeds"
    );
    assert!(matches!(events.try_recv(), Err(TryRecvError::Empty)));

    assert_eq!(tier.run_retention(later, &|_| true).unwrap(), std::slice::from_ref(&first));
    assert!(tier.sealed_segments(&t).is_empty());
    assert_eq!(events.try_recv().unwrap(), SegmentEvent::Deleted(first));
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(10, 20));
    within("an append", tier.append(&t, batch(&records(20, 2, 40)))).await.unwrap();
    tier.close().await;
}

/// A lost data directory fails the next age rotation (its new segment cannot be created)
/// and poisons the writer with the old segment's age deadline already past. The writer
/// task must still see its queue close: `close` returns, and the store can be reopened.
/// (It used to poll the past deadline first on every turn of its biased select, retrying
/// the rotation forever, so `close` never returned.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_poisoned_by_a_failed_age_rotation_still_closes() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let mut config = config(&wal, FsyncPolicy::Never);
    config.segment_age = Duration::from_millis(1);
    let tier = open(config).await;
    let t = topic("aged");
    tier.append(&t, batch(&records(0, 3, 40))).await.unwrap();
    std::fs::remove_dir_all(&wal).unwrap();
    // Appends go on into the open (now unlinked) segment until the age rotation fails
    // and poisons the writer; then they are refused.
    let refused = within("the failed age rotation", async {
        let mut next = 3;
        loop {
            match tier.append(&t, batch(&records(next, 1, 40))).await {
                Ok(()) => next += 1,
                Err(e) => break e,
            }
        }
    })
    .await;
    assert_eq!(refused.kind(), ErrorKind::Unavailable, "{refused}");
    within("closing a poisoned writer", tier.close()).await;
}

/// The switch that puts the trust in a failed fsync back ([`faults::Revert::TrustFailedFsyncs`],
/// for the simulation's proof that it finds this bug class): the same steps as above serve
/// the refused records after the reopen, as the WAL did before it distrusted failed fsyncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reverted_wal_trusts_a_failed_fsync_and_serves_what_it_refused() {
    let dir = tempfile::tempdir().unwrap();
    faults::revert(dir.path(), faults::Revert::TrustFailedFsyncs);
    let (tier, config, t, acked, _) = refused_by_a_failed_fsync(dir.path()).await;
    let refused = records(4, 8, 2000);
    faults::clear(dir.path());
    drop(tier);

    let tier = within("open", HotTier::open(config)).await.unwrap();
    let served = read_all(&tier, &t).await;
    let both: Vec<Record> = acked.iter().chain(&refused).cloned().collect();
    assert_records(&served, &both, "the reverted WAL serves the refused records");
    tier.close().await;
    faults::restore(dir.path());
}
