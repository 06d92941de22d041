//! A failed fsync on a real kernel ("fsyncgate", see "Failed fsyncs" in `docs/hot.md`).
//!
//! An ext4 file system on a loop device whose backing file sits on a small tmpfs
//! (`tier_testkit::loopfs`): filling
//! the tmpfs makes the loop device's writes of new blocks fail (`ENOSPC`), so ext4's
//! writeback of the WAL's pages fails at the `fdatasync` of an append, and Linux marks
//! those pages clean without writing them. Freeing the space, reopening the WAL (whose
//! own fsync then succeeds: nothing is dirty), appending, and remounting the file system
//! (the page cache is gone) shows whether the WAL vouched for bytes the disk never got.
//!
//! Needs root, loop devices, tmpfs and ext4 (`mount`, `losetup`, `mkfs.ext4`, `dumpe2fs`,
//! `fallocate`).
//! Where the environment refuses one of them the test prints a line starting with
//! `SKIPPED:` saying why and passes; CI runs it as root with loop devices.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{batch, records, small_config, topic, within};
use tier_core::{ErrorKind, Offset, ReadLimit, Record, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_testkit::loopfs::{LoopFs, LoopFsSize};

/// The WAL's configuration: `always`, segments of 1 MiB.
fn config(data_dir: &Path) -> HotConfig {
    let mut config = small_config(data_dir).with_fsync(FsyncPolicy::Always);
    config.segment_bytes = 1 << 20;
    config
}

/// Offsets and payload sizes of `records`, as ranges of equal sizes: what a failed
/// comparison prints of them.
fn summary(records: &[Record]) -> Vec<(Offset, Offset, usize)> {
    let mut runs: Vec<(Offset, Offset, usize)> = Vec::new();
    for r in records {
        match runs.last_mut() {
            Some((_, end, size)) if *end == r.offset && *size == r.payload.len() => *end += 1,
            _ => runs.push((r.offset, r.offset + 1, r.payload.len())),
        }
    }
    runs
}

async fn read_all(tier: &HotTier, t: &tier_core::TopicName) -> Vec<Record> {
    tier.read(t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap()
}

/// Remounts the file system (the page cache is gone), reopens the WAL and checks that it
/// holds exactly `served` followed by `later`: every record served after the reopen, and
/// every acknowledged one, is on the disk.
async fn durable_after_remount(
    fs: &mut LoopFs,
    config: HotConfig,
    t: &tier_core::TopicName,
    served: &[Record],
    later: &[Record],
) {
    fs.remount().unwrap();
    let tier = within("open after the remount", HotTier::open(config)).await.unwrap();
    assert!(tier.damaged().is_empty(), "the topic must open after the remount: {:?}", tier.damaged());
    let got = read_all(&tier, t).await;
    tier.close().await;
    drop(tier);
    let expected: Vec<Record> = served.iter().chain(later).cloned().collect();
    assert!(
        got == expected,
        "every record served after the reopen, and every acknowledged one, is durable:\n got  {:?}\n want {:?}",
        summary(&got),
        summary(&expected)
    );
}

/// The file system, or `None` after printing why the environment refused it.
fn loop_fs(test: &str) -> Option<LoopFs> {
    LoopFs::mount_or_explain(&format!("real_disk::{test}"), LoopFsSize { backing_mib: 40, image_mib: 32 })
}

/// Records [4, 204) are refused (the `fdatasync` of their append fails with `ENOSPC`,
/// the pages are marked clean unwritten); the space is freed and the WAL reopened in the
/// same boot; more records are acknowledged under `fsync = always`; after a remount every
/// acknowledged record is at its offset, and nothing refused was ever served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_never_vouches_for_pages_a_failed_fsync_left_unwritten() {
    let Some(mut fs) = loop_fs("a_wal_never_vouches_for_pages_a_failed_fsync_left_unwritten") else { return };
    let config = config(&fs.path().join("wal"));
    let t = topic("fsyncgate");
    let acked = records(0, 4, 1000);
    let refused = records(4, 200, 1000);

    let tier = within("open", HotTier::open(config.clone())).await.unwrap();
    for chunk in acked.chunks(2) {
        within("an append", tier.append(&t, batch(chunk))).await.unwrap();
    }
    assert!(fs.fill().unwrap() > 0, "the backing store had room to fill");
    let err = within("the append on a full disk", tier.append(&t, batch(&refused)))
        .await
        .expect_err("the loop device cannot write the batch's pages");
    eprintln!("the refused append: {}", err.report());
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
    fs.free().unwrap();
    within("close", tier.close()).await;
    drop(tier);

    // The same boot: whatever the page cache still shows of the refused batch is there.
    let tier = within("reopen", HotTier::open(config.clone())).await.unwrap();
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    let served = read_all(&tier, &t).await;
    let end = served.len() as Offset;
    // Other records than the refused ones (another payload size).
    let later = records(end, 4, 700);
    for chunk in later.chunks(2) {
        within("an append after the reopen", tier.append(&t, batch(chunk))).await.unwrap();
    }
    within("close", tier.close()).await;
    drop(tier);

    durable_after_remount(&mut fs, config, &t, &served, &later).await;
    assert!(
        served == acked,
        "the reopened WAL served exactly what was acknowledged, nothing refused: served {:?}",
        summary(&served)
    );
    let report = err.report().to_string();
    assert!(
        report.contains("fsyncing the WAL") && report.contains("No space left on device"),
        "the writeback failed at the fdatasync, not at the write: {report}"
    );
}

/// Under `fsync = interval` records [4, 204) are acknowledged without an fsync, then the
/// timer's `fdatasync` fails (`ENOSPC`) and its pages are marked clean unwritten. The
/// writer keeps nothing from the reopen: the WAL reopened in the same boot reads what the
/// disk holds (not the page cache), cuts the lost tail and says so
/// (`cut_back_at_open`), and the records acknowledged after the reopen survive a remount
/// at their offsets.
#[tokio::test(start_paused = true)]
async fn a_wal_reopened_after_a_failed_timer_fsync_serves_only_what_the_disk_holds() {
    let Some(mut fs) = loop_fs("a_wal_reopened_after_a_failed_timer_fsync_serves_only_what_the_disk_holds")
    else {
        return;
    };
    let mut config = config(&fs.path().join("wal"));
    config.fsync = FsyncPolicy::Interval(std::time::Duration::from_millis(100));
    let t = topic("fsyncgate-interval");
    let durable = records(0, 4, 1000);
    let lost = records(4, 200, 1000);

    let tier = HotTier::open(config.clone()).await.unwrap();
    tier.append(&t, batch(&durable)).await.unwrap();
    // With the clock paused, time advances once every task is idle and no blocking job
    // runs: the timer's fsync due within this second has completed when the sleep ends.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(tier.write_stats(&t).unwrap().fsyncs, 1, "the timer made the first records durable");
    assert!(fs.fill().unwrap() > 0, "the backing store had room to fill");
    tier.append(&t, batch(&lost)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(tier.write_stats(&t).unwrap().fsyncs, 1, "the timer's next fsync failed");
    let err = tier.append(&t, batch(&records(204, 1, 1000))).await.expect_err("the writer is poisoned");
    eprintln!("the append after the failed timer fsync: {}", err.report());
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
    fs.free().unwrap();
    tier.close().await;
    drop(tier);

    let tier = HotTier::open(config.clone()).await.unwrap();
    assert!(tier.damaged().is_empty(), "{:?}", tier.damaged());
    let served = read_all(&tier, &t).await;
    let cut_back = tier.cut_back_at_open(&t);
    let end = served.len() as Offset;
    let later = records(end, 4, 700);
    tier.append(&t, batch(&later)).await.unwrap();
    tier.close().await;
    drop(tier);

    durable_after_remount(&mut fs, config, &t, &served, &later).await;
    assert!(served == durable, "the reopen served only what the disk holds: served {:?}", summary(&served));
    assert!(cut_back, "the reopen reports that it cut the log back");
    let report = err.report().to_string();
    assert!(
        report.contains("fsyncing the WAL") && report.contains("No space left on device"),
        "the timer's fdatasync failed: {report}"
    );
}

/// Under `fsync = always`, appends of 100 records (~11 KB, so each continues the last,
/// partly filled page of the one before and takes new blocks after it) run on while the
/// backing store fills, until one is refused; the space is freed and the WAL reopened
/// in the same boot. Every append acknowledged before the refusal — the first ones after
/// the fill among them — is at its offset after the reopen, nothing is cut at the open,
/// and after a remount (only what the disk holds is read) the same records are there.
///
/// The disk must not acknowledge a write it did not store: a writeback whose request
/// starts at a block the backing store holds and runs into blocks it cannot allocate
/// must fail as a whole, not report the store's short write as success (see
/// `tier_testkit::loopfs`). Three rounds, each on a fresh file system: where the new
/// blocks land decides whether one request spans both kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_acknowledged_while_the_disk_fills_are_on_the_disk() {
    for round in 0..3 {
        let test = format!("appends_acknowledged_while_the_disk_fills_are_on_the_disk (round {round})");
        let Some(mut fs) = loop_fs(&test) else { return };
        let config = config(&fs.path().join("wal"));
        let t = topic("fills");
        let tier = within("open", HotTier::open(config.clone())).await.unwrap();
        let mut acked: Vec<Record> = Vec::new();
        for _ in 0..8 {
            let recs = records(acked.len() as Offset, 100, 100);
            within("an append", tier.append(&t, batch(&recs))).await.unwrap();
            acked.extend(recs);
        }
        assert!(fs.fill().unwrap() > 0, "the backing store had room to fill");
        let mut refusal = None;
        for _ in 0..64 {
            let recs = records(acked.len() as Offset, 100, 100);
            match within("an append on a filling disk", tier.append(&t, batch(&recs))).await {
                Ok(()) => acked.extend(recs),
                Err(e) => {
                    refusal = Some(e);
                    break;
                }
            }
        }
        let err = refusal.expect("an append fails once the backing store is full");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
        fs.free().unwrap();
        within("close", tier.close()).await;
        drop(tier);

        let tier = within("reopen", HotTier::open(config.clone())).await.unwrap();
        assert!(tier.damaged().is_empty(), "round {round}: {:?}", tier.damaged());
        let served = read_all(&tier, &t).await;
        let cut_back = tier.cut_back_at_open(&t);
        within("close", tier.close()).await;
        drop(tier);
        assert!(
            served == acked && !cut_back,
            "round {round}: the reopened WAL holds every acknowledged record (cut back at the open: \
             {cut_back}):\n served {:?}\n acked  {:?}",
            summary(&served),
            summary(&acked)
        );

        fs.remount().unwrap();
        let tier = within("open after the remount", HotTier::open(config)).await.unwrap();
        let got = read_all(&tier, &t).await;
        tier.close().await;
        drop(tier);
        assert!(
            got == acked,
            "round {round}: after the remount every acknowledged record is on the disk:\n got   {:?}\n acked {:?}",
            summary(&got),
            summary(&acked)
        );
    }
}
