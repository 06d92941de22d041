//! Compound faults: two faults in a row that can reuse acknowledged offsets,
//! serve never-acknowledged records, or keep the store from opening unless recovery handles them. Fast stand-ins
//! (`MemoryTier` behind `FaultyTier` for warm) beside the real WAL and a real cold tier on
//! a local directory.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{append_range, r, rec};
use futures::StreamExt;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{ErrorKind, StartPosition, Tier, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{ColdBackend, RouterConfig, TieredStore, WarmBackend, WarmFailurePolicy};
use tier_testkit::faults::Op;
use tier_testkit::{FaultyTier, MemoryTier};

const T: &str = "t";

fn name() -> TopicName {
    TopicName::new(T).unwrap()
}

fn hot(dir: &Path, fsync: FsyncPolicy) -> HotConfig {
    let mut hot = HotConfig::new(dir.join("hot")).with_fsync(fsync);
    hot.segment_age = Duration::from_secs(3600);
    hot
}

fn router(policy: WarmFailurePolicy) -> RouterConfig {
    let mut router = RouterConfig::default();
    router.warm_failure_policy = policy;
    router.warm_retry_interval = Duration::from_millis(20);
    router
}

/// A store on `dir` without background tasks (the tests drive them).
async fn open(
    dir: &Path,
    fsync: FsyncPolicy,
    policy: WarmFailurePolicy,
    warm: Option<Arc<dyn WarmBackend>>,
    cold: Option<Arc<dyn ColdBackend>>,
) -> TieredStore {
    let mut b =
        TieredStore::builder().hot(hot(dir, fsync)).router(router(policy)).background(false).topics([name()]);
    if let Some(w) = warm {
        b = b.warm(w);
    }
    if let Some(c) = cold {
        b = b.cold(c);
    }
    b.open().await.unwrap()
}

fn local_cold(dir: &Path) -> Arc<ColdTier> {
    Arc::new(ColdTier::open(ColdConfig::local(dir.join("cold"))).unwrap())
}

fn faulty_warm() -> Arc<FaultyTier<MemoryTier>> {
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    warm
}

/// A store on `dir` (`fsync = never`, `fail`) with `cold`: [0, `exported`) appended and
/// exported, [`exported`, `end`) appended after it; closed cleanly.
async fn exported_then_more(dir: &Path, cold: &Arc<ColdTier>, exported: u64, end: u64) {
    let store = open(dir, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, exported, 10).await;
    store.export_now(T).await.unwrap();
    append_range(&topic, exported, end, 10).await;
    drop(topic);
    store.close().await;
}

/// A store on `dir` (`fsync = always`, `degrade`) with `warm` and `cold`.
async fn open_warm_and_cold(
    dir: &Path,
    warm: &Arc<FaultyTier<MemoryTier>>,
    cold: Arc<dyn ColdBackend>,
) -> TieredStore {
    open(dir, FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold)).await
}

/// The payload served at `offset` (None: nothing within a moment, i.e. not readable).
async fn served_at(store: &TieredStore, offset: u64) -> Option<bytes::Bytes> {
    let topic = store.topic(T).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(offset)).await.unwrap();
    match tokio::time::timeout(Duration::from_millis(300), reader.next()).await {
        Ok(Some(Ok(record))) => {
            assert_eq!(record.offset, offset);
            Some(record.payload)
        }
        Ok(Some(Err(e))) => panic!("reading offset {offset}: {e}"),
        Ok(None) | Err(_) => None,
    }
}

/// Under `fail` warm refuses batch [10, 20); it stays in the WAL, the idle segment
/// rotates and the exporter runs. Only committed offsets may be exported: cold must not
/// receive the refused batch. After a clean close and a lost WAL, the next offset is at
/// least the end of everything any tier holds, and nothing never acknowledged is served.
#[tokio::test]
async fn a_refused_batch_is_never_exported_and_a_lost_wal_continues_after_every_tier() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let cold = local_cold(dir.path());
    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), Some(cold.clone()))
            .await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_fraction(1.0);
    let err = topic.append((10..20).map(rec).collect()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    // The idle segment rotates by age; the exporter uploads what is sealed.
    store.wal().rotate(&name()).await.unwrap();
    store.export_sealed(&name()).await.unwrap();
    assert_eq!(cold.range(&name()).await.unwrap().end, 0, "nothing committed is sealed alone yet");
    assert!(cold.range(&name()).await.unwrap().end <= 10, "the refused batch is not exported");
    drop(topic);
    store.close().await;

    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    warm.clear();
    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), Some(cold.clone()))
            .await;
    let report = store.recover_topic(T).await.unwrap();
    let cold_end = cold.range(&name()).await.unwrap().end;
    assert!(report.next_offset >= cold_end, "{report:?}");
    let topic = store.topic(T).await.unwrap();
    let got = topic.append(vec![rec(500)]).await.unwrap();
    assert!(got.start >= cold_end, "{got} reuses an offset cold holds ({cold_end})");
    assert_eq!(served_at(&store, got.start).await, Some(rec(500).payload));
    store.close().await;
}

/// Cold ahead of a warm tier that lost its newest entry (failover to a
/// lagging replica), and the WAL lost: the topic continues after cold's end.
#[tokio::test]
async fn a_lost_wal_with_warm_behind_cold_continues_after_cold() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let cold = local_cold(dir.path());
    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), Some(cold.clone()))
            .await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 20, 10).await;
    store.export_now(T).await.unwrap();
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 20));
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    // The warm primary failed over to a replica that holds only the first batch.
    let lagging = Arc::new(MemoryTier::new());
    lagging.append(&name(), warm.batches(&name())[0].clone()).await.unwrap();
    assert_eq!(lagging.range(&name()).await.unwrap(), r(0, 10));

    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(lagging), Some(cold.clone()))
            .await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.next_offset, 20, "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(20)]).await.unwrap(), r(20, 21));
    store.close().await;
}

/// `fsync = never`, a checkpoint at 50, acknowledged records up to 100, then a
/// power cut: the WAL keeps only [0, 80). The checkpoint is stale, so the acknowledged end is
/// unknown below the reservation: offsets [80, 100) must not be handed out again, and the
/// range is reported.
#[tokio::test]
async fn a_power_cut_past_a_stale_checkpoint_never_reuses_acknowledged_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 50, 10).await;
    store.checkpoint().await.unwrap();
    append_range(&topic, 50, 100, 10).await;
    let seg = common_active_segment(&dir.path().join("hot"));
    let sizes = batch_ends(&store).await;
    // Crash: nothing of the shutdown runs; then the page cache's unsynced tail is lost.
    store.abort().await;
    drop(topic);
    drop(store);
    let cut = sizes[&80];
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();

    let store = TieredStore::builder()
        .hot(hot(dir.path(), FsyncPolicy::Never))
        .router(router(WarmFailurePolicy::Fail))
        .background(false)
        .boot_id("after-the-power-cut")
        .open()
        .await
        .unwrap();
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.hot, r(0, 80), "{report:?}");
    assert!(report.next_offset >= 100, "acknowledged offsets [80, 100) would be reused: {report:?}");
    assert!(
        report.maybe_lost.iter().chain(&report.lost).any(|l| l.start <= 80 && l.end >= 100),
        "the range is reported: {report:?}"
    );
    let topic = store.topic(T).await.unwrap();
    assert!(topic.append(vec![rec(7)]).await.unwrap().start >= 100);
    store.close().await;
}

/// The active segment of the test topic.
fn common_active_segment(hot_dir: &Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(hot_dir.join(T))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files.pop().unwrap()
}

/// The active segment's file length after each batch, by the offset the batch ends at
/// (read back from the segment: header, then length-prefixed batches).
async fn batch_ends(store: &TieredStore) -> std::collections::HashMap<u64, u64> {
    let seg = common_active_segment(&store.wal().config().data_dir);
    let bytes = std::fs::read(&seg).unwrap();
    let (_, mut at) = tier_core::segment::SegmentHeader::decode(&bytes).unwrap();
    let mut ends = std::collections::HashMap::new();
    while at < bytes.len() {
        let rest = bytes::Bytes::copy_from_slice(&bytes[at..]);
        let Ok(batch) = tier_core::RecordBatch::decode(&rest) else { break };
        at += batch.encoded_len();
        ends.insert(batch.end_offset(), at as u64);
    }
    ends
}

/// Under `fail` with warm's stream empty, warm refuses [0, 10): the producer is told
/// "not acknowledged". After a restart (warm still down) those records must not be
/// served; once warm holds them they are. The same for a batch whose write landed in warm
/// but whose confirmation fell short (a WAIT that timed out).
#[tokio::test]
async fn never_acknowledged_records_are_not_served_after_a_restart() {
    for landed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let warm = faulty_warm();
        let store =
            open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        warm.fail_after_append(landed);
        warm.fail_fraction(1.0);
        let err = topic.append((0..10).map(rec).collect()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(served_at(&store, 0).await, None);
        drop(topic);
        store.close().await;

        warm.fail_after_append(false);
        let store =
            open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        assert_eq!(topic.high_watermark(), 0, "landed in warm: {landed}");
        assert_eq!(served_at(&store, 0).await, None, "served before warm confirmed it (landed: {landed})");
        // Warm is back: the batch is confirmed at its offsets, then readable.
        warm.clear();
        topic.flush().await.unwrap();
        assert_eq!(topic.high_watermark(), 10);
        assert_eq!(served_at(&store, 0).await, Some(rec(0).payload));
        store.close().await;
    }
}

/// `degrade`: warm is down longer than WAL retention takes to delete exported
/// segments. The store opens afterwards and warm is back-filled — from cold, which holds
/// every segment retention deleted — with warm up at the restart, and with warm still down
/// at the restart. (Without cold, retention keeps what warm lacks:
/// `wal_retention_keeps_what_warm_lacks_behind_a_gap`.)
#[tokio::test]
async fn a_degrade_outage_longer_than_retention_does_not_stop_the_store_from_opening() {
    for down_at_restart in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let warm = faulty_warm();
        let cold = local_cold(dir.path());
        let w: Arc<dyn WarmBackend> = warm.clone();
        let store = open(
            dir.path(),
            FsyncPolicy::Never,
            WarmFailurePolicy::Degrade,
            Some(w.clone()),
            Some(cold.clone()),
        )
        .await;
        let topic = store.topic(T).await.unwrap();
        append_range(&topic, 0, 10, 10).await;
        store.wal().rotate(&name()).await.unwrap();
        warm.fail_fraction(1.0);
        append_range(&topic, 10, 20, 10).await;
        store.wal().rotate(&name()).await.unwrap();
        append_range(&topic, 20, 30, 10).await;
        store.wal().rotate(&name()).await.unwrap();
        store.export_sealed(&name()).await.unwrap();
        assert_eq!(cold.range(&name()).await.unwrap(), r(0, 30));
        let later = SystemTime::now() + Duration::from_secs(48 * 3600);
        store.run_retention_now(later).await.unwrap();
        assert_eq!(
            store.wal().range(&name()).await.unwrap(),
            r(30, 30),
            "retention deletes what cold holds, warm's or not"
        );
        drop(topic);
        store.close().await;

        if !down_at_restart {
            warm.clear();
        }
        let store = TieredStore::builder()
            .hot(hot(dir.path(), FsyncPolicy::Never))
            .router(router(WarmFailurePolicy::Degrade))
            .warm(w.clone())
            .cold(cold.clone())
            .background(false)
            .open()
            .await
            .expect("the store opens");
        let topic = store.topic(T).await.unwrap();
        warm.clear();
        topic.flush().await.expect("warm is back-filled");
        assert_eq!(warm.range(&name()).await.unwrap(), r(0, 30));
        assert_eq!(topic.append(vec![rec(30)]).await.unwrap(), r(30, 31));
        store.close().await;
    }
}

/// hot+cold with cold elsewhere, and the whole data directory lost (the WAL and the
/// router's state files beside it): nothing that survived bounds the acknowledged end
/// (cold holds [0, 100) of 150 acknowledged). The store must not silently hand out offset
/// 100 again: appends are refused, naming the decision an operator must take, until
/// `resume_topic` says where to continue; the offsets skipped are reported maybe lost, and
/// the export continues across them.
#[tokio::test]
async fn a_lost_data_directory_never_silently_reuses_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cold = local_cold(dir.path());
    exported_then_more(&data, &cold, 100, 150).await;
    std::fs::remove_dir_all(&data).unwrap();

    let store = open(&data, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    let got = topic.append(vec![rec(1)]).await;
    let err = got.expect_err("an offset cold does not hold may have been acknowledged");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains("resume"), "the error names the decision: {err}");
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "{report:?}");
    assert!(!report.is_clean());
    // Closing writes no state file that would pass for evidence: still fenced after it.
    drop(topic);
    store.close().await;
    let store = open(&data, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(1)]).await.unwrap_err().kind(), ErrorKind::Fenced);
    // Reads of what cold holds still work.
    assert_eq!(served_at(&store, 99).await, Some(rec(99).payload));

    let report = store.resume_topic(T, 150).await.unwrap();
    assert_eq!(report.maybe_lost, vec![r(100, 150)], "{report:?}");
    assert_eq!(report.next_offset, 150);
    assert_eq!(topic.append(vec![rec(150)]).await.unwrap(), r(150, 151));
    assert_eq!(store.export_now(T).await.unwrap().len(), 1, "the export continues after the gap");
    assert_eq!(cold.range(&name()).await.unwrap().end, 151);
    store.close().await;
}

/// In the router: a topic whose WAL continues just below `u64::MAX` (a crafted
/// segment). An append whose records would pass the largest offset is refused as invalid
/// input before anything is numbered or written, and the topic stays usable: a batch that
/// fits still lands, ending exactly at `u64::MAX`.
#[tokio::test]
async fn an_append_past_the_largest_offset_is_refused_and_the_topic_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let base = u64::MAX - 1;
    let header = tier_core::segment::SegmentHeader::new(name(), base, 1_700_000_000_000);
    std::fs::create_dir_all(dir.path().join("hot").join(T)).unwrap();
    let file = dir.path().join("hot").join(T).join(tier_hot::layout::segment_file_name(base));
    std::fs::write(file, header.encode()).unwrap();
    let store = open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, None, None).await;
    let topic = store.topic(T).await.unwrap();
    let err = topic.append((0..5).map(rec).collect()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(topic.append(vec![rec(0)]).await.unwrap(), r(base, u64::MAX));
    assert_eq!(topic.append(vec![rec(1)]).await.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(served_at(&store, base).await, Some(rec(0).payload));
    store.close().await;
}

/// A warm tier back-filled (by an older version) with batches rebuilt
/// from records: one straddles cold's end. After a lost WAL the replay must start exactly at
/// cold's end, or the WAL's first segment overlaps cold and every export is refused.
#[tokio::test]
async fn a_replay_of_a_batch_straddling_colds_end_starts_at_colds_end() {
    let dir = tempfile::tempdir().unwrap();
    let cold = local_cold(dir.path());
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 20, 10).await;
    store.export_now(T).await.unwrap();
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    // Warm holds [0, 30) as batches [0, 15) and [15, 30): [15, 30) straddles cold's end.
    let warm = Arc::new(MemoryTier::new());
    for (from, to) in [(0, 15), (15, 30)] {
        warm.append(&name(), common::stored_batch(from, to)).await.unwrap();
    }

    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm), Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.replayed, Some(r(20, 30)), "{report:?}");
    assert!(report.is_clean(), "{report:?}");
    let exported = store.export_now(T).await.expect("the export continues cold");
    assert_eq!(exported.iter().map(|e| e.range).collect::<Vec<_>>(), vec![r(20, 30)]);
    for o in [19, 20, 29] {
        assert_eq!(served_at(&store, o).await, Some(rec(o).payload), "offset {o}");
    }
    store.close().await;
}

/// Media damage: `fsync = always` and no reboot, but the acknowledged tail after the
/// last checkpoint is damaged (a torn last batch, truncated at open). The WAL cannot vouch
/// for its end once recovery cut it back: [90, 100) must not be handed out again.
#[tokio::test]
async fn a_damaged_tail_past_a_stale_checkpoint_never_reuses_acknowledged_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, None, None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 50, 10).await;
    store.checkpoint().await.unwrap();
    append_range(&topic, 50, 100, 10).await;
    let seg = common_active_segment(&dir.path().join("hot"));
    let ends = batch_ends(&store).await;
    store.abort().await;
    drop(topic);
    drop(store);
    // The last batch loses its last bytes: a CRC failure, truncated as a torn tail.
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(ends[&100] - 5).unwrap();

    let store = open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, None, None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.hot, r(0, 90), "{report:?}");
    assert!(report.next_offset >= 100, "acknowledged offsets [90, 100) would be reused: {report:?}");
    assert!(report.maybe_lost.iter().any(|l| l.start == 90 && l.end >= 100), "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert!(topic.append(vec![rec(7)]).await.unwrap().start >= 100);
    store.close().await;
}

/// Refused batches kept unserved must not hide acknowledged records: after a crash under `fail` with warm up,
/// the batches after the checkpoint are confirmed again while the topic opens, so every
/// acknowledged record is readable at once (the chaos crash rows read right after opening).
#[tokio::test]
async fn acknowledged_records_after_the_checkpoint_are_readable_as_soon_as_the_topic_opens() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 50, 10).await;
    store.checkpoint().await.unwrap();
    append_range(&topic, 50, 100, 10).await;
    store.abort().await;
    drop(topic);
    drop(store);

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.warm_backfill, Some(r(50, 100)), "re-confirmed with warm: {report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.high_watermark(), 100, "every acknowledged record is readable at once");
    assert_eq!(served_at(&store, 99).await, Some(rec(99).payload));
    store.close().await;
}

/// After a lost WAL: warm holds a batch whose `WAIT` fell short (never
/// acknowledged), the store closes cleanly, then the WAL is lost. The replay brings the
/// batch back into the WAL, but it must stay unreadable until warm confirms it.
#[tokio::test]
async fn a_replayed_unconfirmed_batch_is_not_served_after_a_lost_wal() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_after_append(true);
    warm.fail_fraction(1.0);
    assert_eq!(topic.append((10..20).map(rec).collect()).await.unwrap_err().kind(), ErrorKind::Unavailable);
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(0, 20), "the batch landed in warm");
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    warm.fail_after_append(false);
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.replayed, Some(r(0, 20)), "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.high_watermark(), 10, "the unconfirmed batch is not committed: {report:?}");
    assert_eq!(served_at(&store, 10).await, None);
    warm.clear();
    topic.flush().await.unwrap();
    assert_eq!(topic.high_watermark(), 20);
    assert_eq!(served_at(&store, 10).await, Some(rec(10).payload));
    store.close().await;
}

/// Before anything reached cold: the whole data directory is lost while cold
/// holds no segment of the topic yet. Cold's topic marker (written before the first
/// offset was handed out) still says the topic existed, so the topic opens fenced until
/// an operator says where to continue; it does not restart at 0. A topic cold never saw
/// is new and starts at 0.
#[tokio::test]
async fn a_lost_data_directory_before_the_first_export_never_reuses_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cold = local_cold(dir.path());
    let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 50, 10).await;
    drop(topic);
    store.close().await;
    assert!(cold.range(&name()).await.unwrap().is_empty(), "nothing was exported");
    std::fs::remove_dir_all(&data).unwrap();

    let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "cold's marker says the topic existed: {report:?}");
    let topic = store.topic(T).await.unwrap();
    let err = topic.append(vec![rec(0)]).await.expect_err("offset 0 was acknowledged before");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    let fresh = store.topic("fresh").await.unwrap();
    assert_eq!(fresh.append(vec![rec(0)]).await.unwrap(), r(0, 1), "a topic cold never saw is new");
    drop(fresh);

    let report = store.resume_topic(T, 50).await.unwrap();
    assert_eq!(report.maybe_lost, vec![r(0, 50)], "{report:?}");
    assert_eq!(topic.append(vec![rec(50)]).await.unwrap(), r(50, 51));
    assert_eq!(store.export_now(T).await.unwrap().len(), 1);
    assert_eq!(cold.range(&name()).await.unwrap(), r(50, 51));
    drop(topic);
    store.close().await;
}

/// Lost state directory, then a power cut. `fsync = never`: [0, 30) is acknowledged but
/// only in the page cache; the process dies and the state directory (the reservation) is
/// lost; the store reopens in the same boot, where the page cache still holds the WAL.
/// Then the power goes: the WAL loses its unsynced records. The reopened topic must have
/// kept durable evidence at once — its fence at 30 — so the next boot never hands out
/// those offsets again, and the operator's resume reports them.
#[tokio::test]
async fn a_lost_state_directory_then_a_power_cut_never_reuses_acknowledged_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let open_in = |boot: &'static str| {
        TieredStore::builder()
            .hot(hot(dir.path(), FsyncPolicy::Never))
            .router(router(WarmFailurePolicy::Fail))
            .background(false)
            .topics([name()])
            .boot_id(boot)
            .open()
    };
    let store = open_in("boot-1").await.unwrap();
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 30, 10).await;
    let seg = common_active_segment(&dir.path().join("hot"));
    let header_only =
        tier_core::segment::SegmentHeader::decode(&std::fs::read(&seg).unwrap()).unwrap().1 as u64;
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    // The same boot: the page cache kept the WAL, but with no state file nothing says so
    // (or how far acknowledgements went): the topic is fenced at the WAL's end.
    let store = open_in("boot-1").await.unwrap();
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown && report.next_offset == 30, "{report:?}");
    store.abort().await;
    drop(store);
    // The power cut: nothing of the WAL was fsynced.
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(header_only).unwrap();

    // The fence outlives the WAL's tail (its file in the state directory): still fenced,
    // never below 30, until the operator resumes; the skipped range is then reported.
    let store = open_in("boot-2").await.unwrap();
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.hot, r(0, 0), "{report:?}");
    assert!(report.end_unknown, "{report:?}");
    assert!(report.next_offset >= 30, "acknowledged offsets [0, 30) would be reused: {report:?}");
    assert!(
        report.maybe_lost.iter().any(|l| l.start == 0 && l.end >= 30),
        "the range is reported: {report:?}"
    );
    store.resume_topic(T, report.next_offset).await.unwrap();
    store.close().await;
    let store = open_in("boot-2").await.unwrap();
    assert!(!store.recover_topic(T).await.unwrap().end_unknown, "resuming removed the fence");
    store.close().await;
}

/// Two lost WALs in a row with cold (the simulation's seed 5000): the first loss leaves
/// [10, 20) recorded lost in cold *after* its last segment (a trailing gap: cold's range
/// stays [0, 10)); the second, a crash with the WAL lost again, reports [10, 20) lost again
/// and [20, reservation) maybe lost. Every offset range recovery reported must become a gap
/// cold accepts: the export continues after them, and WAL retention catches up.
#[tokio::test]
async fn a_second_lost_wal_after_a_trailing_gap_in_cold_lets_the_export_continue() {
    let dir = tempfile::tempdir().unwrap();
    let cold = local_cold(dir.path());
    exported_then_more(dir.path(), &cold, 10, 20).await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!((report.lost.clone(), report.next_offset), (vec![r(10, 20)], 20), "{report:?}");
    assert_eq!(cold.recorded_gaps(&name()).await.unwrap(), vec![r(10, 20)]);
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 10), "a trailing gap is not held");
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 20, 25, 5).await;
    // Crash, and the WAL is lost again.
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    let next = report.next_offset;
    assert!(next >= 25, "{report:?}");
    let reported: Vec<_> = report.lost.iter().chain(&report.maybe_lost).copied().collect();
    assert!(reported.iter().any(|l| l.start <= 20 && l.end == next), "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(next)]).await.unwrap(), r(next, next + 1));
    let exported = store.export_now(T).await.expect("cold accepts the segment after the lost offsets");
    assert_eq!(exported.iter().map(|e| e.range).collect::<Vec<_>>(), vec![r(next, next + 1)]);
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, next + 1));
    assert_eq!(cold.gaps(&name()).await.unwrap(), vec![], "every hole is recorded lost");
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.run_retention_now(later).await.unwrap();
    assert!(store.wal().sealed_segments(name()).is_empty(), "WAL retention catches up");
    assert_eq!(served_at(&store, next).await, Some(rec(next).payload));
    store.close().await;
}

/// The operator's decision after a lost data directory, under a transient cold fault (the simulation's seed 5044):
/// `resume_topic` must record the skipped offsets in cold before it lifts the fence, so a
/// failed gap-marker PUT answers `Unavailable`, leaves the topic fenced (nothing handed
/// out), and the same call succeeds once cold answers; the export then continues.
#[tokio::test]
async fn a_resume_that_cold_refuses_for_a_moment_can_be_retried() {
    use tier_cold::testing::{Faults, FaultyStore};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = ColdConfig::local(dir.path().join("cold"));
    let faulty = Arc::new(FaultyStore::new(config.build_store().unwrap(), Faults::default()));
    let cold = Arc::new(ColdTier::with_store(faulty.clone(), config).unwrap());
    exported_then_more(&data, &cold, 100, 150).await;
    std::fs::remove_dir_all(&data).unwrap();

    let store = open(&data, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    assert!(store.recover_topic(T).await.unwrap().end_unknown);
    faulty.set_faults(Faults { fail_after_calls: Some(0), ..Faults::default() });
    let err = store.resume_topic(T, 150).await.expect_err("cold refuses every request");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("gap marker") || err.to_string().contains("injected"), "{err}");
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "still fenced: {report:?}");
    assert_eq!(topic.append(vec![rec(1)]).await.unwrap_err().kind(), ErrorKind::Fenced);

    faulty.set_faults(Faults::default());
    let report = store.resume_topic(T, 150).await.expect("the retry succeeds");
    assert_eq!(report.maybe_lost, vec![r(100, 150)], "{report:?}");
    assert!(!report.end_unknown);
    assert_eq!(topic.append(vec![rec(150)]).await.unwrap(), r(150, 151));
    assert_eq!(store.export_now(T).await.unwrap().len(), 1, "the export continues after the gap");
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 151));
    assert_eq!(cold.recorded_gaps(&name()).await.unwrap(), vec![r(100, 150)]);
    let err = store.resume_topic(T, 200).await.expect_err("resumed already");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    store.close().await;
}

/// Under `degrade` a warm tier that cannot take the WAL's batches keeps `flush` failing
/// (the simulation's seed 5042). Exporting to cold does not need warm: `export_now` still
/// stores every committed segment, so cold reaches the commit point.
#[tokio::test]
async fn export_now_reaches_the_commit_point_while_warm_is_behind() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let cold = local_cold(dir.path());
    let store = open(
        dir.path(),
        FsyncPolicy::Never,
        WarmFailurePolicy::Degrade,
        Some(warm.clone()),
        Some(cold.clone()),
    )
    .await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 10, 20, 10).await;
    assert_eq!(topic.high_watermark(), 20, "degrade: acknowledged on the WAL alone");
    assert_eq!(topic.flush().await.unwrap_err().kind(), ErrorKind::Unavailable);
    let exported = store.export_now(T).await.expect("the export does not wait for warm");
    assert_eq!(exported.iter().map(|e| e.range).collect::<Vec<_>>(), vec![r(0, 20)]);
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 20));
    warm.fail_fraction(0.0);
    topic.flush().await.unwrap();
    store.close().await;
}

/// The whole data directory lost after cold recorded a trailing gap (the simulation's
/// seed 5156): cold's segments end at 10 but [10, 20) is recorded lost after them, so
/// its log continues at 20. Recovery must not offer to continue below 20 — an operator
/// resuming at the reported next offset would land inside the recorded gap and cold
/// would refuse every later segment.
#[tokio::test]
async fn a_lost_data_directory_after_a_trailing_gap_in_cold_continues_after_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (data, cold) = data_directory_lost_after_a_trailing_gap_in_cold(dir.path()).await;

    let store = open(&data, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "{report:?}");
    assert!(report.next_offset >= 20, "the offsets cold recorded lost are not offered again: {report:?}");
    resume_append_and_export(&store, &report).await;
}

/// As above, with warm holding records inside cold's recorded gap (never acknowledged: a
/// degraded open skipped those offsets and its `.unacked` file went with the data
/// directory). Recovery replays into the empty WAL only from where cold's log continues —
/// cold never takes records inside its gap, so a WAL holding them would stop the export
/// there for good (the simulation's seed 14012903: export and WAL retention stuck). Nor are
/// they served: before, recovery left them in warm and a read below the WAL's start took
/// them from warm, while cold answered the same offsets as lost once the warm trim had
/// passed them — two reads of one offset answering differently.
#[tokio::test]
async fn a_lost_data_directory_never_replays_or_serves_warms_records_inside_colds_recorded_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (data, cold) = data_directory_lost_after_a_trailing_gap_in_cold(dir.path()).await;
    // Warm holds [0, 14): [10, 14) inside cold's gap.
    let warm = faulty_warm();
    warm.inner().append(&name(), common::stored_batch(0, 10)).await.unwrap();
    warm.inner().append(&name(), common::stored_batch(10, 14)).await.unwrap();

    let store = open_warm_and_cold(&data, &warm, cold.clone()).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.replayed, None, "nothing past cold's continuation to replay: {report:?}");
    assert!(report.next_offset >= 20, "{report:?}");
    // Cold's records below its gap are served; the gap's offsets fail as cold answers them.
    assert!(served_at(&store, 9).await.is_some());
    for offset in [10, 13] {
        assert_eq!(read_error_at(&store, offset).await, Some(ErrorKind::NotFound), "offset {offset}");
    }
    let held = warm.inner().range(&name()).await.unwrap();
    assert!(held.is_empty(), "warm still holds records inside cold's gap: {held}");
    resume_append_and_export(&store, &report).await;
}

/// Resumes the topic at `report`'s next offset when its end is unknown, appends one
/// record there and exports it: cold takes the segment after its recorded gap. Closes
/// the store.
async fn resume_append_and_export(store: &TieredStore, report: &tier_router::RecoveryReport) {
    let at = report.next_offset;
    if report.end_unknown {
        store.resume_topic(T, at).await.unwrap();
    }
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(at)]).await.unwrap(), r(at, at + 1));
    let exported = store.export_now(T).await.expect("cold accepts the segment after its recorded gap");
    assert_eq!(exported.iter().map(|e| e.range).collect::<Vec<_>>(), vec![r(at, at + 1)]);
    drop(topic);
    store.close().await;
}

/// Under `dir`: cold holds [0, 10) and, after a lost WAL, records [10, 20) as a trailing
/// gap; then the whole data directory is lost. Returns the data directory and cold.
async fn data_directory_lost_after_a_trailing_gap_in_cold(dir: &Path) -> (std::path::PathBuf, Arc<ColdTier>) {
    let data = dir.join("data");
    let cold = local_cold(dir);
    exported_then_more(&data, &cold, 10, 20).await;
    std::fs::remove_dir_all(data.join("hot")).unwrap();
    let store = open(&data, FsyncPolicy::Never, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    assert_eq!(store.recover_topic(T).await.unwrap().lost, vec![r(10, 20)]);
    store.close().await;
    assert_eq!(
        (cold.range(&name()).await.unwrap(), cold.recorded_gaps(&name()).await.unwrap()),
        (r(0, 10), vec![r(10, 20)])
    );
    std::fs::remove_dir_all(&data).unwrap();
    (data, cold)
}

/// The kind of error a read at `offset` ends with (None: it served a record).
async fn read_error_at(store: &TieredStore, offset: u64) -> Option<ErrorKind> {
    let topic = store.topic(T).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(offset)).await.unwrap();
    match tokio::time::timeout(Duration::from_millis(300), reader.next()).await {
        Ok(Some(Ok(record))) => {
            eprintln!("offset {offset} served {:?}", record.payload);
            None
        }
        Ok(Some(Err(e))) => Some(e.kind()),
        Ok(None) | Err(_) => panic!("reading offset {offset}: no answer"),
    }
}

/// A batch whose `WAIT` fell short (never acknowledged), then the whole data directory lost
/// (WAL and checkpoint): the replay from warm brings the batch back, but with no checkpoint
/// left only what warm trimmed away (or cold holds) is known committed, so it stays
/// unreadable until warm confirms it. The same with only the state directory lost (the
/// WAL survives) — sim seeds 5022 and 5085.
#[tokio::test]
async fn an_unconfirmed_batch_is_not_served_after_the_checkpoint_is_lost() {
    for lose_wal in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let warm = faulty_warm();
        let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        append_range(&topic, 0, 10, 10).await;
        warm.fail_after_append(true);
        warm.fail_fraction(1.0);
        assert_eq!(
            topic.append((10..20).map(rec).collect()).await.unwrap_err().kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(warm.inner().range(&name()).await.unwrap(), r(0, 20), "the batch landed in warm");
        drop(topic);
        store.close().await;
        if lose_wal {
            std::fs::remove_dir_all(&data).unwrap();
        } else {
            std::fs::remove_dir_all(data.join("router")).unwrap();
        }

        // Warm still does not confirm: nothing of the batch may be served.
        let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        assert_eq!(topic.high_watermark(), 0, "nothing is known committed (lost WAL: {lose_wal})");
        assert_eq!(
            served_at(&store, 10).await,
            None,
            "served before warm confirmed it (lost WAL: {lose_wal})"
        );
        warm.clear();
        topic.flush().await.unwrap();
        assert_eq!(topic.high_watermark(), 20);
        assert_eq!(served_at(&store, 0).await, Some(rec(0).payload));
        assert_eq!(served_at(&store, 19).await, Some(rec(19).payload));
        assert_eq!(topic.append(vec![rec(20)]).await.unwrap(), r(20, 21));
        store.close().await;
    }
}

/// `degrade`, a lost WAL after an unclean stop: recovery replays warm, reports the offsets
/// up to the reservation as maybe lost and records them as a gap in the WAL. Warm holds
/// nothing the WAL lacks, but no tier can give it the skipped offsets: it must still take
/// the batches after the gap (flush succeeds, WAL retention is not held), not refuse them
/// forever — sim seed 5069.
#[tokio::test]
async fn warm_continues_after_offsets_no_tier_holds() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let cold = local_cold(dir.path());
    let store = open(
        dir.path(),
        FsyncPolicy::Always,
        WarmFailurePolicy::Degrade,
        Some(warm.clone()),
        Some(cold.clone()),
    )
    .await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 20, 10).await;
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    let store = open(
        dir.path(),
        FsyncPolicy::Always,
        WarmFailurePolicy::Degrade,
        Some(warm.clone()),
        Some(cold.clone()),
    )
    .await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.replayed, Some(r(0, 20)), "{report:?}");
    let next = report.next_offset;
    assert!(next > 20 && report.maybe_lost == vec![r(20, next)], "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(next)]).await.unwrap(), r(next, next + 1));
    topic.flush().await.expect("warm takes the batch after the gap");
    assert_eq!(warm.range(&name()).await.unwrap(), r(next, next + 1), "warm restarted at the batch");
    // Everything warm held is in the WAL: nothing is lost, and the WAL may be exported and
    // deleted as usual.
    assert_eq!(served_at(&store, 0).await, Some(rec(0).payload));
    assert_eq!(served_at(&store, next).await, Some(rec(next).payload));
    store.export_now(T).await.unwrap();
    assert_eq!(cold.range(&name()).await.unwrap().end, next + 1);
    let far = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.run_retention_now(far).await.unwrap();
    assert!(store.wal().sealed_segments(name()).is_empty(), "retention is not held by warm");
    store.close().await;
}

/// `degrade`, hot+warm, the whole data directory lost: the topic opens fenced (warm cannot
/// vouch for the end) with the WAL replayed from warm; the operator resumes it beyond
/// warm's end. The WAL and warm must both continue there: the next append is acknowledged
/// and reaches warm, and nothing refused is served later — sim seed 5046.
#[tokio::test]
async fn a_resumed_topic_continues_in_the_wal_and_in_warm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let warm = Arc::new(MemoryTier::new());
    let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 20, 10).await;
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(&data).unwrap();

    let store = open(&data, FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "{report:?}");
    let report = store.resume_topic(T, 50).await.unwrap();
    assert_eq!(report.maybe_lost, vec![r(20, 50)], "{report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(50)]).await.unwrap(), r(50, 51), "the WAL continues at 50");
    topic.flush().await.expect("warm continues at 50");
    assert_eq!(served_at(&store, 19).await, Some(rec(19).payload));
    assert_eq!(served_at(&store, 50).await, Some(rec(50).payload));
    store.close().await;
}

/// `degrade`, `fsync = never`: records acknowledged up to 30 (warm holds them all), a power
/// cut keeps only [0, 10) of the WAL, and warm is down when the store reopens. The WAL
/// cannot vouch for its end, so opening from it alone would declare [10, 30) maybe lost —
/// records warm holds — and continue past them, leaving warm unable to take the next batch.
/// The open waits for warm instead (`Unavailable`); once warm answers, recovery replays
/// [10, 30) from it and warm continues — sim seed 5184.
#[tokio::test]
async fn a_power_cut_with_warm_down_waits_for_warms_records() {
    power_cut_with_warm_down(false).await;
}

/// The same with the state directory lost as well (the simulation's seed 30000671): no
/// reservation says how far acknowledgements went, so the WAL cannot vouch for its end
/// either; opening without warm would skip the records only warm holds. The topic opens
/// fenced (nothing bounds what was acknowledged) and is resumed after warm's records.
#[tokio::test]
async fn a_power_cut_and_a_lost_state_directory_with_warm_down_wait_for_warms_records() {
    power_cut_with_warm_down(true).await;
}

async fn power_cut_with_warm_down(lose_state: bool) {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let store =
        open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 30, 10).await;
    let seg = common_active_segment(&dir.path().join("hot"));
    let sizes = batch_ends(&store).await;
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(sizes[&10]).unwrap();
    if lose_state {
        std::fs::remove_dir_all(dir.path().join("router")).unwrap();
    }

    let reopen = |warm: Arc<FaultyTier<MemoryTier>>| {
        let dir = dir.path().to_owned();
        async move {
            TieredStore::builder()
                .hot(hot(&dir, FsyncPolicy::Never))
                .router(router(WarmFailurePolicy::Degrade))
                .background(false)
                .boot_id("after-the-power-cut")
                .warm(warm)
                .topics([name()])
                .open()
                .await
        }
    };
    warm.fail_fraction(1.0);
    let err = reopen(warm.clone()).await.expect_err("the WAL alone cannot say what was acknowledged");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    warm.clear();
    let store = reopen(warm.clone()).await.unwrap();
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.replayed, Some(r(10, 30)), "{report:?}");
    if lose_state {
        assert!(report.end_unknown, "no state file bounds what was acknowledged: {report:?}");
        store.resume_topic(T, 30).await.unwrap();
    }
    let topic = store.topic(T).await.unwrap();
    assert_eq!(served_at(&store, 29).await, Some(rec(29).payload));
    let next = topic.append(vec![rec(100)]).await.unwrap();
    topic.flush().await.expect("warm continues");
    assert_eq!(served_at(&store, next.start).await, Some(rec(100).payload));
    store.close().await;
}

/// `degrade`: warm holds [0, 20); the WAL is lost after a crash, so recovery replays warm
/// and continues past a maybe-lost gap at the returned `next`; [next, next + 10) reaches
/// only the WAL (warm down); clean close, warm back.
async fn warm_behind_a_gap(dir: &Path, warm: &Arc<FaultyTier<MemoryTier>>) -> u64 {
    warm_behind_a_gap_with(dir, warm, None).await
}

/// As [`warm_behind_a_gap`], with `cold` enabled (when given): everything the WAL holds,
/// the gap included, is exported before the clean close.
async fn warm_behind_a_gap_with(
    dir: &Path,
    warm: &Arc<FaultyTier<MemoryTier>>,
    cold: Option<&Arc<ColdTier>>,
) -> u64 {
    let cold_backend = || cold.cloned().map(|c| -> Arc<dyn ColdBackend> { c });
    let open_degrade =
        || open(dir, FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), cold_backend());
    let store = open_degrade().await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 20, 10).await;
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(dir.join("hot")).unwrap();

    let store = open_degrade().await;
    let next = store.recover_topic(T).await.unwrap().next_offset;
    let topic = store.topic(T).await.unwrap();
    warm.fail_fraction(1.0);
    append_range(&topic, next, next + 10, 5).await;
    if cold.is_some() {
        store.export_now(T).await.unwrap();
    }
    drop(topic);
    store.close().await;
    warm.clear();
    next
}

/// As above, but records were acknowledged after the gap while warm was down, and the store
/// restarted before warm got them (recovery's back-fill stops at the gap). Warm restarts at
/// the gap's end and is sent those records from the WAL, so it holds everything after the
/// gap — what a later lost WAL is replayed from.
#[tokio::test]
async fn warm_restarts_at_the_end_of_the_gap_and_gets_the_records_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let next = warm_behind_a_gap(dir.path(), &warm).await;
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(next + 10)]).await.unwrap(), r(next + 10, next + 11));
    topic.flush().await.expect("warm continues after the gap");
    assert_eq!(
        warm.inner().range(&name()).await.unwrap(),
        r(next, next + 11),
        "warm holds what follows the gap"
    );
    store.close().await;
}

/// A lost WAL, then a lost state directory (the simulation's seed 7183; hot only, so
/// nothing outside the data directory survives). After the first loss the topic continues
/// at its reservation, past the offsets that may have been acknowledged; the empty WAL
/// must then record where it starts, durably, or the second loss leaves no evidence and
/// the topic restarts at 0, handing out acknowledged offsets again.
#[tokio::test]
async fn a_lost_wal_then_a_lost_state_directory_never_reuses_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 12, 4).await;
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let first = store.recover_topic(T).await.unwrap();
    assert!(first.next_offset >= 12 && first.maybe_lost == vec![r(0, first.next_offset)], "{first:?}");
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    // The WAL's file says where it continued; with appends not fsynced and no state file
    // left, it cannot say what was acknowledged after that: fenced, at or past it.
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let second = store.recover_topic(T).await.unwrap();
    assert!(second.end_unknown, "{second:?}");
    assert_eq!(second.next_offset, first.next_offset, "the WAL recorded where it continues: {second:?}");
    store.resume_topic(T, second.next_offset).await.unwrap();
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(0)]).await.unwrap().start, first.next_offset);
    drop(topic);
    store.close().await;
}

/// An open that fails half-way must report its losses the next time (the simulation's
/// seed 9015). A lost WAL leaves [5, 19) held by no tier; the first open cannot record
/// the gap in cold (its PUT fails) and fails. Had it already started the WAL at 19, the
/// next open would see an intact WAL ending there and report nothing: the loss was never
/// reported to anyone.
#[tokio::test]
async fn a_failed_open_records_nothing_that_hides_its_losses_from_the_next() {
    use tier_cold::testing::{Faults, FaultyStore};
    let dir = tempfile::tempdir().unwrap();
    let config = ColdConfig::local(dir.path().join("cold"));
    let faulty = Arc::new(FaultyStore::new(config.build_store().unwrap(), Faults::default()));
    let cold = Arc::new(ColdTier::with_store(faulty.clone(), config).unwrap());
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    store.export_now(T).await.unwrap();
    append_range(&topic, 5, 19, 7).await;
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    cold.refresh(&name()).await.unwrap(); // the listing is cached: only the gap's PUT is left to fail
    faulty.set_faults(Faults { fail_after_calls: Some(0), ..Faults::default() });
    let opened = TieredStore::builder()
        .hot(hot(dir.path(), FsyncPolicy::Always))
        .router(router(WarmFailurePolicy::Fail))
        .background(false)
        .cold(cold.clone())
        .open()
        .await
        .unwrap();
    let err = opened.recover_topic(T).await.expect_err("cold refuses the gap marker");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    opened.close().await;

    faulty.set_faults(Faults::default());
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, None, Some(cold.clone())).await;
    let report = store.recover_topic(T).await.unwrap();
    let reported: Vec<_> = report.lost.iter().chain(&report.maybe_lost).copied().collect();
    assert!(reported.iter().any(|l| l.start <= 5 && l.end >= 19), "the loss is reported: {report:?}");
    store.close().await;
}

/// A power cut, then the state directory lost before the store opened again (the
/// simulation's seed 9325, where warm was down so the first open was refused). `fsync =
/// never`: [0, 30) acknowledged, the WAL keeps [0, 10). With no reservation left, the WAL
/// cannot vouch for its end: the topic must not continue at 10.
#[tokio::test]
async fn a_power_cut_then_a_lost_state_directory_fences_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 30, 10).await;
    let seg = common_active_segment(&dir.path().join("hot"));
    let cut = batch_ends(&store).await[&10];
    store.abort().await;
    drop(topic);
    drop(store);
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, None, None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.hot, r(0, 10));
    assert!(report.end_unknown, "nothing bounds what was acknowledged after 10: {report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(10)]).await.unwrap_err().kind(), ErrorKind::Fenced);
    store.resume_topic(T, 30).await.unwrap();
    assert_eq!(topic.append(vec![rec(30)]).await.unwrap(), r(30, 31));
    drop(topic);
    store.close().await;
}

/// WAL retention while warm lags behind a gap (the simulation's seed 11800). As above:
/// warm holds [0, 20), the WAL continues past a reported loss at `next`, and
/// [next, next + 10) reached only the WAL (warm down, `degrade`). After a restart warm's
/// back-fill stops at the gap, so nothing queued says warm lacks [next, next + 10); WAL
/// retention must still keep it until warm is continued — it is the only copy.
#[tokio::test]
async fn wal_retention_keeps_what_warm_lacks_behind_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let next = warm_behind_a_gap(dir.path(), &warm).await;
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.wal().rotate(&name()).await.unwrap();
    store.run_retention_now(later).await.unwrap();
    assert_eq!(served_at(&store, next).await, Some(rec(next).payload), "the WAL kept what warm lacks");
    let topic = store.topic(T).await.unwrap();
    topic.append(vec![rec(next + 10)]).await.unwrap();
    topic.flush().await.expect("warm continues after the gap");
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(next, next + 11));
    drop(topic);
    store.close().await;
}

/// As above, but warm is unreachable when the store opens (the simulation's seed
/// 600064489): the writer learns warm's end only once it answers, and its back-fill stops
/// at the gap. Until warm is continued past it, WAL retention must keep the records after
/// the gap, which only the WAL holds; on the old code the warm floor passed them and
/// retention deleted the WAL's only copy.
#[tokio::test]
async fn wal_retention_keeps_what_warm_lacks_behind_a_gap_when_warm_answers_after_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let next = warm_behind_a_gap(dir.path(), &warm).await;
    warm.fail_fraction(1.0);
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    assert!(store.recover_topic(T).await.unwrap().warm_unreachable);
    warm.clear();
    let topic = store.topic(T).await.unwrap();
    // Warm answers: the writer learns its end ([0, 20), behind the gap) and has nothing
    // it can send it yet.
    topic.flush().await.unwrap();
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.wal().rotate(&name()).await.unwrap();
    store.run_retention_now(later).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(next)).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), reader.next()).await.unwrap().unwrap();
    assert_eq!(
        first.map(|r| r.payload).map_err(|e| e.report().to_string()),
        Ok(rec(next).payload),
        "the WAL kept what warm lacks"
    );
    topic.append(vec![rec(next + 10)]).await.unwrap();
    topic.flush().await.expect("warm continues after the gap");
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(next, next + 11));
    drop(topic);
    store.close().await;
}

/// Warm unreachable from the first append on, across a restart: its stream is empty
/// when it answers, and the records acknowledged before the restart are only in the WAL.
/// An empty stream takes a batch at any offset, so the writer must send it those records
/// first; on the old code it took over at the next batch, the warm floor passed the
/// WAL's records and retention deleted their only copy.
#[tokio::test]
async fn an_empty_warm_that_answers_after_the_open_is_sent_the_records_only_the_wal_holds() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let open_degrade =
        || open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None);
    let store = open_degrade().await;
    warm.fail_fraction(1.0);
    append_range(&store.topic(T).await.unwrap(), 0, 10, 5).await;
    store.close().await;

    let store = open_degrade().await;
    assert!(store.recover_topic(T).await.unwrap().warm_unreachable);
    warm.clear();
    let topic = store.topic(T).await.unwrap();
    topic.flush().await.expect("warm takes the WAL's records");
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(0, 10), "warm holds what the WAL held");
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.wal().rotate(&name()).await.unwrap();
    store.run_retention_now(later).await.unwrap();
    assert_eq!(served_at(&store, 0).await, Some(rec(0).payload));
    drop(topic);
    store.close().await;
}

/// A lost WAL while warm's stream is empty but starts above cold's end (the simulation's
/// seed 20066: warm had been restarted past a gap, dropping records the WAL held then;
/// the WAL is lost later). Nothing holds [0, 8) any more: it is reported lost.
#[tokio::test]
async fn a_lost_wal_below_an_empty_restarted_warm_reports_the_offsets_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 8, 4).await;
    drop(topic);
    store.close().await;
    WarmBackend::restart_at(warm.as_ref(), &name(), 20).await.unwrap();
    assert_eq!(warm.range(&name()).await.unwrap(), r(8, 8), "empty, remembering its end");
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    let reported: Vec<_> = report.lost.iter().chain(&report.maybe_lost).copied().collect();
    assert!(reported.iter().any(|l| l.start == 0 && l.end >= 8), "[0, 8) is held by no tier: {report:?}");
    assert!(report.next_offset >= 8, "{report:?}");
    store.close().await;
}

/// An open that fails after replaying warm into the lost WAL (the simulation's seed
/// 30000943): warm holds [10, 19) only (trimmed), cold [0, 5), so [5, 10) is held by no
/// tier. The replay leaves the WAL holding [10, 19) before cold refuses the gap marker;
/// the next open finds a WAL that holds the topic and would see no loss. The losses a
/// recovery found are kept in the state directory until the topic opens.
#[tokio::test]
async fn a_failed_open_after_a_replay_reports_its_losses_the_next_time() {
    use tier_cold::testing::{Faults, FaultyStore};
    let dir = tempfile::tempdir().unwrap();
    let config = ColdConfig::local(dir.path().join("cold"));
    let faulty = Arc::new(FaultyStore::new(config.build_store().unwrap(), Faults::default()));
    let cold = Arc::new(ColdTier::with_store(faulty.clone(), config).unwrap());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let open_both = || open_warm_and_cold(dir.path(), &warm, cold.clone());
    let store = open_both().await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    store.export_now(T).await.unwrap();
    append_range(&topic, 5, 10, 5).await;
    append_range(&topic, 10, 19, 9).await;
    drop(topic);
    store.close().await;
    WarmBackend::trim_before(warm.as_ref(), &name(), 10).await.unwrap();
    assert_eq!(warm.range(&name()).await.unwrap(), r(10, 19));
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();

    cold.refresh(&name()).await.unwrap();
    faulty.set_faults(Faults { fail_after_calls: Some(0), ..Faults::default() });
    let opened = TieredStore::builder()
        .hot(hot(dir.path(), FsyncPolicy::Always))
        .router(router(WarmFailurePolicy::Degrade))
        .background(false)
        .warm(warm.clone())
        .cold(cold.clone())
        .open()
        .await
        .unwrap();
    assert!(opened.recover_topic(T).await.is_err(), "cold refuses the gap marker");
    opened.close().await;

    faulty.set_faults(Faults::default());
    let store = open_both().await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.lost.iter().any(|l| l.start <= 5 && l.end >= 10), "the loss is reported: {report:?}");
    store.close().await;
    let store = open_both().await;
    assert!(store.recover_topic(T).await.unwrap().is_clean(), "once reported, not again");
    store.close().await;
}

/// `fail`, hot+warm: warm refuses batch [12, 19) (it never lands), then trims the
/// committed [0, 12) away, leaving an empty stream at 12. The state directory is lost, so
/// the topic opens fenced, and the operator resumes it at the WAL's end. The refused
/// batch must not be served until warm confirms it: the commit point never passes warm's
/// end — sim seed 50001453, where the resume moved the commit point to 19 while the
/// back-fill started at 0, below warm's start, and was refused forever.
#[tokio::test]
async fn a_resume_never_serves_a_batch_warm_did_not_confirm() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 12, 12).await;
    warm.fail_fraction(1.0);
    assert_eq!(topic.append((12..19).map(rec).collect()).await.unwrap_err().kind(), ErrorKind::Unavailable);
    warm.clear();
    assert_eq!(warm.inner().trim_before(&name(), 12), r(12, 12), "warm trimmed what was committed");
    drop(topic);
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    let store = open(dir.path(), FsyncPolicy::Never, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "{report:?}");
    store.resume_topic(T, 19).await.unwrap();
    let topic = store.topic(T).await.unwrap();
    let held = warm.inner().range(&name()).await.unwrap();
    assert!(
        topic.high_watermark() <= held.end,
        "commit point {} passes what warm confirmed ({held:?})",
        topic.high_watermark()
    );
    topic.flush().await.expect("warm takes the refused batch from the WAL");
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(12, 19));
    assert_eq!(topic.high_watermark(), 19);
    assert_eq!(served_at(&store, 11).await, Some(rec(11).payload));
    assert_eq!(topic.append(vec![rec(19)]).await.unwrap(), r(19, 20));
    store.close().await;
}

/// `degrade`, hot+warm: the warm tier is opened after a clean close (or after a moment
/// down) never having confirmed topic 't' — the marker in warm is what says the topic
/// existed. [0, 3) is acknowledged while warm refuses every append, then the whole data
/// directory is lost: nothing else bounds the acknowledged end, so the topic must open
/// fenced (its end unknown), not at 0 — sim seeds 11119, 12112, 20591 and 40001220.
#[tokio::test]
async fn a_lost_data_directory_after_acks_warm_never_confirmed_fences_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    warm.fail_fraction(1.0);
    append_range(&topic, 0, 3, 3).await;
    assert_eq!(warm.inner().range(&name()).await.unwrap(), r(0, 0), "warm holds none of them");
    drop(topic);
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();
    warm.clear();

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "the topic reopened as new, reusing acknowledged offsets: {report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(0)]).await.unwrap_err().kind(), ErrorKind::Fenced);
    let report = store.resume_topic(T, 3).await.unwrap();
    assert_eq!(report.maybe_lost, vec![r(0, 3)], "{report:?}");
    assert_eq!(topic.append(vec![rec(3)]).await.unwrap(), r(3, 4));
    store.close().await;
}

/// `degrade`, hot+warm: [10, 20) lands in warm but its `WAIT` falls short (the replicas
/// never confirm it; acknowledged from the WAL). After a clean restart — warm answering at
/// once, or down at open and back later — WAL retention must keep [10, 20) until warm
/// confirms it: the only other copy is on warm's primary, which a failover to a lagging
/// replica takes away — sim seed 40000846, where retention trusted warm's range after the
/// restart. The checkpoint records where warm's confirmed batches ended.
#[tokio::test]
async fn wal_retention_after_a_restart_keeps_what_warm_never_confirmed() {
    for warm_down_at_open in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let warm = faulty_warm();
        let store =
            open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        append_range(&topic, 0, 10, 10).await;
        warm.fail_after_append(true);
        warm.fail_fraction(1.0);
        append_range(&topic, 10, 20, 10).await;
        assert_eq!(warm.inner().range(&name()).await.unwrap(), r(0, 20), "the batch landed in warm");
        drop(topic);
        store.close().await;

        if warm_down_at_open {
            warm.target(&[Op::Append, Op::Range]);
        }
        let store =
            open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
        let topic = store.topic(T).await.unwrap();
        if warm_down_at_open {
            assert!(store.recover_topic(T).await.unwrap().warm_unreachable);
            // Warm answers again, its replicas still silent.
            warm.target(&[Op::Append]);
        }
        assert!(topic.flush().await.is_err(), "warm never confirms (down at open: {warm_down_at_open})");
        store.wal().rotate(&name()).await.unwrap();
        let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
        store.run_retention_now(later).await.unwrap();
        let wal = store.wal().range(&name()).await.unwrap();
        assert!(
            wal.start <= 10,
            "WAL retention deleted what warm never confirmed: WAL {wal:?} (down at open: {warm_down_at_open})"
        );
        warm.clear();
        topic.flush().await.expect("warm confirms once its replicas answer");
        store.run_retention_now(later).await.unwrap();
        assert!(store.wal().sealed_segments(name()).is_empty(), "then retention deletes them");
        drop(topic);
        store.close().await;
    }
}

/// `degrade`, hot+warm: [0, 5) is acknowledged while warm's `WAIT` falls short (warm holds
/// it unconfirmed), then the whole data directory is lost. The topic reopens fenced with
/// [0, 5) replayed from warm and queued to be confirmed again; the operator resumes it at
/// 10. Every queued batch is committed (`degrade`), so the commit point passes the skipped
/// [5, 10): a reader from the latest offset starts at 10 and gets the next record, not the
/// gap's `NotFound` — sim seed 70001527.
#[tokio::test]
async fn after_a_resume_a_live_tail_starts_past_the_skipped_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    warm.fail_after_append(true);
    warm.fail_fraction(1.0);
    append_range(&topic, 0, 5, 5).await;
    drop(topic);
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), None).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown && report.replayed == Some(r(0, 5)), "{report:?}");
    store.resume_topic(T, 10).await.unwrap();
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.high_watermark(), 10, "the commit point passes the skipped offsets");
    let mut tail = topic.reader(StartPosition::Latest).await.unwrap();
    assert_eq!(topic.append(vec![rec(10)]).await.unwrap(), r(10, 11));
    let next = tokio::time::timeout(Duration::from_secs(5), tail.next()).await.unwrap().unwrap().unwrap();
    assert_eq!((next.offset, next.payload), (10, rec(10).payload));
    store.close().await;
}

/// `degrade`, hot+warm+cold: [0, 9) reaches warm, [9, 33) only the WAL (warm down), then
/// the whole data directory is lost. The first recovery after it replays [0, 9) from warm
/// into the WAL and then fails (cold cannot be asked whether it recorded the topic). The
/// next must not take the replayed WAL for local evidence of the end: the topic stays
/// fenced and no acknowledged offset in [9, 33) is handed out again — sim seed 80003588.
#[tokio::test]
async fn a_recovery_that_fails_after_a_replay_leaves_the_topic_fenced() {
    use object_store::memory::InMemory;
    use tier_cold::testing::{Faults, FaultyStore};
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let bucket = FaultyStore::new(Arc::new(InMemory::new()), Faults::default());
    let cold = || Arc::new(ColdTier::with_store(Arc::new(bucket.clone()), ColdConfig::default()).unwrap());
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold()))
            .await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 9, 9).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 9, 33, 8).await;
    drop(topic);
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();
    warm.clear();

    // Cold answers its range (its listing: a LIST and the successor pointer's GET), then
    // fails: the recovery replays warm, then cannot check the topic marker.
    bucket.set_faults(Faults { fail_after_calls: Some(2), ..Faults::default() });
    let failed = TieredStore::builder()
        .hot(hot(dir.path(), FsyncPolicy::Always))
        .router(router(WarmFailurePolicy::Degrade))
        .background(false)
        .topics([name()])
        .warm(warm.clone())
        .cold(cold())
        .open()
        .await;
    let err = failed.expect_err("the open fails while cold cannot be asked");
    assert!(
        err.report().to_string().contains("topic marker"),
        "the recovery failed elsewhere: {}",
        err.report()
    );
    let wal = std::fs::read_dir(dir.path().join("hot").join(T)).unwrap().count();
    assert!(wal > 0, "warm was replayed into the WAL first");
    bucket.set_faults(Faults::default());
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold()))
            .await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown, "the replayed WAL passed for evidence of the end: {report:?}");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(9)]).await.unwrap_err().kind(), ErrorKind::Fenced);
    store.close().await;
}

/// The state both tests below start from (`degrade`, hot+warm+cold over a faulty bucket):
/// cold holds [0, 5), warm [10, 15) (it trimmed [5, 10)), the reservation reaches past 15,
/// the WAL is lost, and a first recovery replays warm into the WAL, then fails recording
/// the gap in cold. Returns the tiers to reopen with (the bucket's faults cleared).
async fn after_a_recovery_failed_on_colds_gap(dir: &Path) -> (Arc<MemoryTier>, impl Fn() -> Arc<ColdTier>) {
    use object_store::memory::InMemory;
    use tier_cold::testing::{Faults, FaultyStore};
    let warm = Arc::new(MemoryTier::new());
    let bucket = FaultyStore::new(Arc::new(InMemory::new()), Faults::default());
    let cold = {
        let bucket = bucket.clone();
        move || Arc::new(ColdTier::with_store(Arc::new(bucket.clone()), ColdConfig::default()).unwrap())
    };
    let store =
        open(dir, FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold())).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    store.export_now(T).await.unwrap();
    append_range(&topic, 5, 15, 5).await;
    assert_eq!(warm.trim_before(&name(), 10), r(10, 15));
    drop(topic);
    store.abort().await;
    drop(store);
    std::fs::remove_dir_all(dir.join("hot")).unwrap();

    // Cold answers its range (a LIST and the successor pointer's GET), then fails.
    bucket.set_faults(Faults { fail_after_calls: Some(2), ..Faults::default() });
    let failed = TieredStore::builder()
        .hot(hot(dir, FsyncPolicy::Always))
        .router(router(WarmFailurePolicy::Degrade))
        .background(false)
        .topics([name()])
        .warm(warm.clone())
        .cold(cold())
        .open()
        .await;
    let err = failed.expect_err("the open fails while cold refuses the gap marker");
    assert!(err.to_string().contains("gap"), "the recovery failed elsewhere: {err}");
    bucket.set_faults(Faults::default());
    (warm, cold)
}

/// `degrade`, hot+warm+cold: cold holds [0, 5), warm [10, 15) (it trimmed [5, 10)), the
/// reservation reaches past 15 and the WAL is lost. The first recovery replays warm into
/// the WAL, finds [5, 10) lost and [15, reservation) maybe lost, then fails recording the
/// gap in cold. The next recovery sees a WAL again — replayed from warm, so it vouches for
/// nothing — and must still continue after the losses the first one found, not at 15 —
/// sim seed 200083186.
#[tokio::test]
async fn the_losses_a_failed_recovery_found_are_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (warm, cold) = after_a_recovery_failed_on_colds_gap(dir.path()).await;

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold()))
            .await;
    let report = store.recover_topic(T).await.unwrap();
    let skipped_end = report.maybe_lost.iter().map(|m| m.end).max().unwrap_or(0);
    assert!(skipped_end > 15, "the maybe-lost offsets were reported: {report:?}");
    assert!(
        report.next_offset >= skipped_end,
        "offsets reported maybe lost are handed out again: {report:?}"
    );
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(99)]).await.unwrap().start, report.next_offset);
    store.close().await;
}

/// `fail`, hot+warm: [0, 9) committed, [9, 30) refused by warm and kept in the WAL, whose
/// end then carries a recorded gap [30, 1000) (as recovery records offsets a power cut may
/// have taken). Once warm confirms [9, 30) after the restart, the commit point passes the
/// gap at once — it holds no record — so a reader from the latest offset starts at 1000
/// and gets the next record, not the gap's `NotFound` — sim seed 200028642.
#[tokio::test]
async fn the_commit_point_passes_a_recorded_gap_it_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let warm = faulty_warm();
    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 9, 9).await;
    warm.fail_fraction(1.0);
    assert_eq!(topic.append((9..30).map(rec).collect()).await.unwrap_err().kind(), ErrorKind::Unavailable);
    drop(topic);
    store.close().await;
    let wal = tier_hot::HotTier::open(hot(dir.path(), FsyncPolicy::Always)).await.unwrap();
    assert_eq!(wal.skip_to(&name(), 1000).await.unwrap(), r(30, 1000));
    wal.close().await;
    warm.clear();

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    topic.flush().await.unwrap();
    assert_eq!(warm.inner().range(&name()).await.unwrap().end, 30, "warm confirmed the refused batch");
    assert_eq!(topic.high_watermark(), 1000, "the commit point stopped at the gap");
    let mut tail = topic.reader(StartPosition::Latest).await.unwrap();
    assert_eq!(topic.append(vec![rec(1000)]).await.unwrap(), r(1000, 1001));
    let next = tokio::time::timeout(Duration::from_secs(5), tail.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(next.offset, 1000);
    store.close().await;
}

/// As above, but the state directory — with the losses the failed recovery kept — is lost
/// before the next recovery. What is left: cold [0, 5), warm and the WAL (replayed from
/// warm) from 10. The offsets in between are held by no tier and must be reported lost,
/// not skipped over in silence — sim seed 300006155.
#[tokio::test]
async fn a_hole_between_cold_and_a_replayed_wal_is_reported_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (warm, cold) = after_a_recovery_failed_on_colds_gap(dir.path()).await;
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Degrade, Some(warm.clone()), Some(cold()))
            .await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.lost.contains(&r(5, 10)), "offsets no tier holds were not reported: {report:?}");
    assert!(report.next_offset >= 15, "{report:?}");
    store.close().await;
}

/// A gap the WAL recorded, [10, 20), over offsets warm still holds (an earlier WAL
/// acknowledged them there; here the tiers are written directly): a read from 0 serves
/// [0, 10) from the WAL, the gap from warm, then the WAL again — not the gap's `NotFound`
/// while warm holds the records — sim seed 400028696.
#[tokio::test]
async fn a_wal_gap_warm_still_holds_is_served_from_warm() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let batch = |from: u64, to: u64| {
        let mut b = tier_core::RecordBatchBuilder::new();
        for o in from..to {
            let r = rec(o);
            b.push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload).unwrap();
        }
        b.build(from).unwrap()
    };
    let wal = tier_hot::HotTier::open(hot(dir.path(), FsyncPolicy::Always)).await.unwrap();
    wal.append(&name(), batch(0, 10)).await.unwrap();
    assert_eq!(wal.skip_to(&name(), 20).await.unwrap(), r(10, 20));
    wal.append(&name(), batch(20, 25)).await.unwrap();
    wal.close().await;
    for (from, to) in [(0, 10), (10, 20), (20, 25)] {
        warm.append(&name(), batch(from, to)).await.unwrap();
    }

    let store =
        open(dir.path(), FsyncPolicy::Always, WarmFailurePolicy::Fail, Some(warm.clone()), None).await;
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.high_watermark(), 25);
    let mut reader = topic.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    let mut served = Vec::new();
    while served.len() < 25 {
        let (source, record) = tokio::time::timeout(Duration::from_secs(5), reader.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap_or_else(|e| panic!("the read failed after {} records: {e}", served.len()));
        assert_eq!(record.payload, rec(record.offset).payload);
        served.push((record.offset, source));
    }
    assert_eq!(served.iter().map(|(o, _)| *o).collect::<Vec<_>>(), (0..25).collect::<Vec<_>>());
    assert!(served[10..20].iter().all(|(_, s)| *s == tier_router::Source::Warm), "{served:?}");
    store.close().await;
}

/// WAL retention with cold behind a held warm floor (the simulation's seeds 800000677,
/// 800031343 and 800078152: hot + warm + cold under `degrade`). As in
/// [`wal_retention_keeps_what_warm_lacks_behind_a_gap`], warm's back-fill stops at a
/// reported loss and the writer holds the warm floor there; but cold now holds everything
/// the WAL does, gap included, and warm's back-fill reads cold. On the old code the hold
/// kept every WAL segment after the gap until the next append, so with no more appends
/// the WAL never came back within retention.
#[tokio::test]
async fn wal_retention_deletes_what_cold_holds_behind_a_held_warm_floor() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let cold = local_cold(dir.path());
    let open_degrade = || open_warm_and_cold(dir.path(), &warm, cold.clone());
    // Recovery replays warm and continues past a maybe-lost gap; [next, next + 10) reaches
    // only the WAL, then cold.
    let next = warm_behind_a_gap_with(dir.path(), &warm, Some(&cold)).await;
    assert!(next > 20, "the WAL continues past the offsets it may have lost");
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, next + 10), "cold holds the gap and what follows");

    // Warm answers; its back-fill stops at the gap and the writer holds the floor at 20.
    let store = open_degrade().await;
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    store.wal().rotate(&name()).await.unwrap();
    store.run_retention_now(later).await.unwrap();
    let wal = store.wal().range(&name()).await.unwrap();
    assert!(
        wal.is_empty() && wal.start == next + 10,
        "retention deletes every sealed segment cold holds, whatever warm lacks: WAL {wal}"
    );
    assert_eq!(served_at(&store, next).await, Some(rec(next).payload), "cold serves what the WAL deleted");
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(next + 10)]).await.unwrap(), r(next + 10, next + 11));
    topic.flush().await.expect("warm continues after the gap, from cold");
    assert_eq!(served_at(&store, next + 10).await, Some(rec(next + 10).payload));
    drop(topic);
    store.close().await;
}

/// A lost data directory where cold holds the topic's first records and warm nothing,
/// not even its marker (a failover to a replica that had none of it): the open must not
/// take the topic for a new one. An open that wrote a commit point of 0 as a new topic's
/// local evidence, then failed recording warm's marker (a `WAIT` that fell short), left a
/// checkpoint that passed for a surviving state directory: the next open continued at
/// cold's end, 6, and handed out the acknowledged [6, 14) the WAL had held again
/// (simulation seed 220092267, generator 13: "offset served with two contents").
#[tokio::test]
async fn a_failed_open_never_leaves_a_lost_topic_a_commit_point_that_passes_for_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let cold = local_cold(dir.path());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let store = open_warm_and_cold(dir.path(), &warm, cold.clone()).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 6, 3).await;
    store.export_now(T).await.unwrap();
    append_range(&topic, 6, 14, 8).await;
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    // Warm fails over to a replica that holds nothing of the topic; recording its marker
    // fails once.
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Marker]);
    warm.fail_next_after(1, 1); // the check for a marker passes, recording one fails
    let b = TieredStore::builder()
        .hot(hot(dir.path(), FsyncPolicy::Always))
        .router(router(WarmFailurePolicy::Degrade))
        .background(false)
        .topics([name()])
        .warm(warm.clone() as Arc<dyn WarmBackend>)
        .cold(cold.clone() as Arc<dyn ColdBackend>);
    let Err(refused) = b.open().await else { panic!("recording warm's marker fails") };
    assert_eq!(refused.kind(), ErrorKind::Unavailable, "{refused}");

    warm.clear();
    let store = open_warm_and_cold(dir.path(), &warm, cold.clone()).await;
    let report = store.recover_topic(T).await.unwrap();
    assert!(
        report.end_unknown,
        "nothing local survived and cold holds the topic: its acknowledged end is unknown: {report:?}"
    );
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(vec![rec(6)]).await.unwrap_err().kind(), ErrorKind::Fenced);
    store.resume_topic(T, 14).await.unwrap();
    assert_eq!(topic.append(vec![rec(14)]).await.unwrap(), r(14, 15));
    drop(topic);
    store.close().await;
}
