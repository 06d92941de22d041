//! Warm outages under both failure policies: deterministic failures with `FaultyTier`
//! around `MemoryTier`, and a real Valkey primary stopped and restarted.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{append_range, r, rec, slices, warm_config};
use futures::{FutureExt, StreamExt};
use tier_core::{ErrorKind, ReadLimit, StartPosition, Tier, TierExt, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{RouterConfig, Source, TieredStore, Topic, WarmBackend, WarmFailurePolicy};
use tier_testkit::faults::Op;
use tier_testkit::servers::ValkeyPair;
use tier_testkit::{FaultyTier, MemoryTier};
use tier_warm::WarmTier;

fn hot(dir: &tempfile::TempDir) -> HotConfig {
    HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never)
}

fn router(policy: WarmFailurePolicy) -> RouterConfig {
    let mut router = RouterConfig::default();
    router.warm_failure_policy = policy;
    router.warm_retry_interval = Duration::from_millis(50);
    router
}

async fn open(
    dir: &tempfile::TempDir,
    warm: Arc<dyn WarmBackend>,
    policy: WarmFailurePolicy,
) -> (TieredStore, Topic) {
    let store = TieredStore::builder()
        .hot(hot(dir))
        .warm(warm)
        .router(router(policy))
        .background(false)
        .open()
        .await
        .unwrap();
    let topic = store.topic("t").await.unwrap();
    (store, topic)
}

/// WAL and warm hold the same records in `range`.
async fn assert_identical(store: &TieredStore, warm: &dyn Tier, range: tier_core::OffsetRange) {
    let name = TopicName::new("t").unwrap();
    let hot = store.wal().read(&name, range.start, range.end, ReadLimit::unbounded()).await.unwrap();
    let warm = warm.read(&name, range.start, range.end, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(hot.len() as u64, range.len());
    assert_eq!(hot, warm);
}

#[tokio::test]
async fn fail_policy_refuses_and_never_serves_unconfirmed_records() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Fail).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    let mut reader = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    assert_eq!(slices(&mut reader, 0, 10).await.unwrap(), vec![(Source::Hot, r(0, 10))]);

    // Warm is down: it refuses [10, 20) and every retry.
    warm.fail_fraction(1.0);
    let err = topic.append((10..20).map(rec).collect()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("[10, 20)"), "{err}");
    assert_eq!(topic.high_watermark(), 10, "not committed");
    assert_eq!(store.wal().range(&name).await.unwrap(), r(0, 20), "the WAL holds the batch");
    assert_eq!(warm.range(&name).await.unwrap(), r(0, 10));
    // Not readable: neither from history nor the live tail.
    assert!(reader.next().now_or_never().is_none());
    let mut fresh = topic.reader(StartPosition::Offset(10)).await.unwrap();
    assert!(fresh.next().now_or_never().is_none());

    // While the batch is unconfirmed, later appends are refused without using offsets.
    let err = topic.append(vec![rec(99)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("earlier batch"), "{err}");
    assert_eq!(store.wal().range(&name).await.unwrap(), r(0, 20), "no offset consumed");
    warm.clear();

    // Warm is back: the pending batch goes first, keeping its offsets; nothing renumbered.
    assert_eq!(topic.append((20..30).map(rec).collect()).await.unwrap(), r(20, 30));
    assert_eq!(topic.high_watermark(), 30);
    assert_eq!(slices(&mut reader, 10, 20).await.unwrap()[0].1.start, 10);
    assert_identical(&store, warm.as_ref(), r(0, 30)).await;
    store.close().await;
}

#[tokio::test]
async fn fail_policy_retries_an_ambiguous_warm_write_identically() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Fail).await;
    append_range(&topic, 0, 5, 5).await;
    // The write lands in warm but the caller is told it failed (a timed-out write).
    warm.fail_after_append(true);
    warm.fail_next(1);
    assert_eq!(topic.append((5..10).map(rec).collect()).await.unwrap_err().kind(), ErrorKind::Unavailable);
    warm.clear();
    assert_eq!(topic.append((10..15).map(rec).collect()).await.unwrap(), r(10, 15));
    topic.flush().await.unwrap();
    assert_identical(&store, warm.as_ref(), r(0, 15)).await;
    store.close().await;
}

#[tokio::test]
async fn degrade_policy_acknowledges_on_the_wal_and_backfills_warm_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 10, 100, 9).await;
    assert_eq!(topic.high_watermark(), 100, "acknowledged on the WAL alone");
    assert_eq!(warm.range(&name).await.unwrap(), r(0, 10));
    let mut reader = topic.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    assert_eq!(slices(&mut reader, 0, 100).await.unwrap(), vec![(Source::Hot, r(0, 100))]);
    assert_eq!(topic.flush().await.unwrap_err().kind(), ErrorKind::Unavailable);

    warm.clear();
    topic.flush().await.unwrap();
    assert_eq!(warm.range(&name).await.unwrap(), r(0, 100));
    assert_identical(&store, warm.as_ref(), r(0, 100)).await;
    append_range(&topic, 100, 110, 10).await;
    assert_identical(&store, warm.as_ref(), r(0, 110)).await;
    store.close().await;
}

/// Polls `flush` until warm holds everything (the server needs a moment after restart).
async fn flush_eventually(topic: &Topic) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match topic.flush().await {
            Ok(()) => return,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "warm never caught up: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn valkey_store(
    dir: &tempfile::TempDir,
    pair: &ValkeyPair,
    policy: WarmFailurePolicy,
) -> (TieredStore, Topic, Arc<WarmTier>) {
    let prefix = format!("router-{policy:?}-");
    let warm = Arc::new(WarmTier::connect(warm_config(&pair.primary_url(), &prefix)).await.unwrap());
    let (store, topic) = open(dir, warm.clone(), policy).await;
    (store, topic, warm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_valkey_outage_under_both_policies() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey pair (install valkey-server)");

    // Fail: the producer gets Unavailable while the primary is down; after it returns
    // (empty), the pending batch is written first with its original offsets.
    let dir = tempfile::tempdir().unwrap();
    let (store, topic, warm) = valkey_store(&dir, &pair, WarmFailurePolicy::Fail).await;
    append_range(&topic, 0, 10, 10).await;
    pair.stop_primary().await;
    let err = topic.append((10..20).map(rec).collect()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(topic.high_watermark(), 10);
    pair.restart_primary().await.unwrap();
    flush_eventually(&topic).await;
    assert_eq!(topic.high_watermark(), 20);
    assert_eq!(topic.append((20..30).map(rec).collect()).await.unwrap(), r(20, 30));
    // The restarted primary lost [0, 10); from the pending batch on, warm matches the WAL.
    assert_identical(&store, warm.as_ref(), r(10, 30)).await;
    store.close().await;

    // Degrade: acknowledged during the outage, back-filled after it.
    let dir = tempfile::tempdir().unwrap();
    let (store, topic, warm) = valkey_store(&dir, &pair, WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    let base = topic.high_watermark();
    assert_eq!(base, 0);
    pair.stop_primary().await;
    append_range(&topic, 0, 40, 10).await;
    assert_eq!(topic.high_watermark(), 40);
    pair.restart_primary().await.unwrap();
    flush_eventually(&topic).await;
    assert_eq!(warm.range(&name).await.unwrap().end, 40);
    assert_identical(&store, warm.as_ref(), r(0, 40)).await;
    store.close().await;
}

#[tokio::test]
async fn a_restart_queues_for_warm_what_the_wal_holds_beyond_it() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 10, 20, 5).await;
    // Closing with warm still down leaves [10, 20) in the WAL only.
    store.close().await;
    assert_eq!(warm.range(&name).await.unwrap(), r(0, 10));

    // Restart under `fail` with warm still down: [10, 20) is queued for warm. It was
    // acknowledged and readable under `degrade`, and a commit is never taken back, so it
    // stays readable; new appends wait until warm holds it.
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Fail).await;
    let report = store.recover_topic("t").await.unwrap();
    assert_eq!(report.warm_backfill, Some(r(10, 20)), "{report:?}");
    assert_eq!(report.next_offset, 20);
    assert_eq!(topic.high_watermark(), 20);
    assert_eq!(topic.append(vec![rec(20)]).await.unwrap_err().kind(), ErrorKind::Unavailable);
    warm.clear();
    topic.flush().await.unwrap();
    assert_eq!(topic.high_watermark(), 20);
    assert_identical(&store, warm.as_ref(), r(0, 20)).await;
    assert_eq!(topic.append(vec![rec(20)]).await.unwrap(), r(20, 21));
    store.close().await;
}

/// Opens a store over the WAL in `dir` with `warm` and `policy`, recovering topic `t`.
async fn try_reopen(
    dir: &tempfile::TempDir,
    warm: Arc<dyn WarmBackend>,
    policy: WarmFailurePolicy,
) -> Result<TieredStore, tier_core::TierError> {
    TieredStore::builder().hot(hot(dir)).warm(warm).router(router(policy)).background(false).open().await
}

#[tokio::test]
async fn an_unreachable_warm_at_open_degrades_or_fails_by_policy() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Range, Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 10, 20, 5).await;
    store.close().await;
    assert_eq!(warm.inner().range(&name).await.unwrap(), r(0, 10));

    // `fail`: opening fails, naming warm.
    let err = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Fail).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("warm"), "{err}");

    // `degrade`: the topic opens from the WAL with warm's end unknown.
    let store = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    assert!(report.warm_unreachable, "{report:?}");
    assert_eq!(report.warm, None);
    assert_eq!(report.next_offset, 20);
    let topic = store.topic("t").await.unwrap();
    assert_eq!(topic.high_watermark(), 20);
    append_range(&topic, 20, 30, 10).await;
    let mut reader = topic.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    assert_eq!(slices(&mut reader, 0, 30).await.unwrap(), vec![(Source::Hot, r(0, 30))]);
    assert_eq!(topic.flush().await.unwrap_err().kind(), ErrorKind::Unavailable);

    // Meanwhile WAL retention keeps every segment: the back-fill will read them.
    store.wal().rotate(&name).await.unwrap();
    let later = ten_years_on();
    assert_eq!(store.run_retention_now(later).await.unwrap(), vec![], "warm's end is still unknown");

    // Warm answers again: the back-fill starts at its actual end (10) and catches up.
    warm.clear();
    topic.flush().await.unwrap();
    assert_eq!(warm.range(&name).await.unwrap(), r(0, 30));
    assert_identical(&store, warm.as_ref(), r(0, 30)).await;
    append_range(&topic, 30, 40, 10).await;
    assert_identical(&store, warm.as_ref(), r(0, 40)).await;
    store.wal().rotate(&name).await.unwrap();
    assert!(
        !store.run_retention_now(later).await.unwrap().is_empty(),
        "once warm's end is known, retention runs"
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_valkey_stopped_before_open_and_started_after() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey pair (install valkey-server)");
    let dir = tempfile::tempdir().unwrap();
    let (store, topic, _) = valkey_store(&dir, &pair, WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    store.close().await;

    // Fresh clients (no cached ranges), then the primary goes down before the stores open.
    let connect = || WarmTier::connect(warm_config(&pair.primary_url(), "router-Degrade-"));
    let for_fail: Arc<WarmTier> = Arc::new(connect().await.unwrap());
    let warm: Arc<WarmTier> = Arc::new(connect().await.unwrap());
    pair.stop_primary().await;

    let err = try_reopen(&dir, for_fail, WarmFailurePolicy::Fail).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("warm"), "{err}");

    let store = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    assert!(report.warm_unreachable, "{report:?}");
    assert_eq!(report.next_offset, 10);
    let topic = store.topic("t").await.unwrap();
    append_range(&topic, 10, 30, 10).await;
    assert_eq!(topic.high_watermark(), 30);

    // The primary comes back (empty): warm takes over from the first batch it lacks.
    pair.restart_primary().await.unwrap();
    flush_eventually(&topic).await;
    assert_eq!(warm.range(&name).await.unwrap(), r(10, 30));
    assert_identical(&store, warm.as_ref(), r(10, 30)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_from_config_with_valkey_down_degrades_or_fails_by_policy() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey pair (install valkey-server)");
    pair.stop_primary().await;
    let dir = tempfile::tempdir().unwrap();
    let config = |policy| {
        tier_router::StoreConfig::default()
            .with_hot(hot(&dir))
            .with_warm(warm_config(&pair.primary_url(), "router-config-"))
            .with_router(router(policy))
    };
    let t = TopicName::new("t").unwrap();

    let err =
        TieredStore::open_recovering(config(WarmFailurePolicy::Fail), vec![t.clone()]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("warm"), "{err}");

    // A topic the WAL already knows opens degraded while Valkey is down.
    let store = TieredStore::builder().hot(hot(&dir)).background(false).open().await.unwrap();
    append_range(&store.topic("t").await.unwrap(), 0, 10, 10).await;
    store.close().await;
    let store =
        TieredStore::open_recovering(config(WarmFailurePolicy::Degrade), vec![t.clone()]).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    assert!(report.warm_unreachable, "{report:?}");
    let topic = store.topic("t").await.unwrap();
    append_range(&topic, 10, 20, 10).await;
    assert_eq!(topic.high_watermark(), 20);

    // Valkey answers, its stream empty: warm is sent the WAL's records from the start
    // (as recovery would with Valkey up) — [0, 10) were only ever in the WAL.
    pair.restart_primary().await.unwrap();
    flush_eventually(&topic).await;
    let warm = store.warm().unwrap().clone();
    assert_eq!(warm.range(&t).await.unwrap(), r(0, 20));
    assert_identical(&store, warm.as_ref(), r(0, 20)).await;
    store.close().await;
}

/// A Valkey that has never had a replica, with `warm.wait_replicas = 1`: no append could
/// be confirmed, so under `fail` the store does not open and says what to set in one
/// line; under `degrade` it opens (with a warning) and acknowledges from the WAL (a new
/// topic is still refused: its marker must be confirmed, `docs/router.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_from_config_against_a_valkey_without_replicas_fails_or_degrades_by_policy() {
    let single = ValkeyPair::start_primary_only().await.expect("a Valkey primary (install valkey-server)");
    let dir = tempfile::tempdir().unwrap();
    let config = |policy| {
        tier_router::StoreConfig::default()
            .with_hot(hot(&dir))
            .with_warm(warm_config(&single.primary_url(), "router-alone-"))
            .with_router(router(policy))
    };

    let err = TieredStore::open(config(WarmFailurePolicy::Fail)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let message = err.report().to_string();
    assert!(message.contains("has no replica and has had none"), "{message}");
    assert!(message.contains("set `warm.wait_replicas = 0` in tierlog.toml"), "{message}");
    assert!(!dir.path().join("hot").exists(), "nothing was created: {message}");

    // A topic the WAL already knows opens degraded and takes appends.
    let store = TieredStore::builder().hot(hot(&dir)).background(false).open().await.unwrap();
    append_range(&store.topic("t").await.unwrap(), 0, 10, 10).await;
    store.close().await;
    let store = TieredStore::open(config(WarmFailurePolicy::Degrade)).await.unwrap();
    let topic = store.topic("t").await.unwrap();
    append_range(&topic, 10, 20, 10).await;
    assert_eq!(topic.high_watermark(), 20);
    store.close().await;
}

/// Under `degrade` warm may hold a batch the WAL never stored — the process died between
/// warm's write and the WAL's, or the WAL refused it — which was never acknowledged.
/// Reopened while warm is unreachable, the WAL cannot say where warm ends: every offset up
/// to the durable reservation may be taken there. The topic continues at the reservation,
/// never at the WAL's end, and once warm answers it is restarted past the skipped offsets:
/// no offset is ever served with two contents.
#[test]
fn a_degraded_open_never_reuses_offsets_warm_may_hold() {
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Range, Op::Append]);
    let name = TopicName::new("t").unwrap();
    crash_after_warm_took_a_batch_the_wal_did_not(&hot(&dir), &warm);

    let rt = runtime();
    rt.block_on(async {
        // Reopened while warm is unreachable: the topic continues at the reservation.
        warm.fail_fraction(1.0);
        let store = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
        let report = store.recover_topic("t").await.unwrap();
        assert!(report.warm_unreachable, "{report:?}");
        let skipped = report.skipped.expect("offsets skipped");
        assert_eq!(skipped.start, 10, "{report:?}");
        assert!(skipped.end >= 15, "warm may hold offsets up to the reservation: {report:?}");
        assert_eq!(report.next_offset, skipped.end);
        assert!(report.is_clean(), "nothing acknowledged is missing: {report:?}");
        assert!(dir.path().join("router/t.unacked").exists(), "kept until warm holds none of them");
        assert!(dir.path().join("hot/t/unacked").exists(), "in the WAL's directory too");
        let topic = store.topic("t").await.unwrap();
        let fresh = topic.append((0..3).map(|i| rec(100 + i)).collect()).await.unwrap();
        assert_eq!(fresh.start, skipped.end, "offsets warm may hold are not reused");

        // Warm answers again; whether or not the writer has noticed yet, a read of the
        // skipped offsets never takes warm's records there: the WAL's gap is the answer.
        warm.clear();
        let mut reader = topic.reader(StartPosition::Earliest).await.unwrap();
        for o in 0..10 {
            let record = reader.next().await.unwrap().unwrap();
            assert_eq!((record.offset, record.payload), (o, rec(o).payload));
        }
        let gap = reader.next().await.unwrap().expect_err("the skipped offsets hold no record");
        assert_eq!(gap.kind(), ErrorKind::NotFound, "{gap}");
        assert!(gap.to_string().contains(&format!("{}..{}", skipped.start, skipped.end)), "{gap}");
        assert!(gap.to_string().contains("a degraded open skipped them"), "not called lost: {gap}");

        // Warm is restarted past the skipped offsets and takes the batch.
        flush_eventually(&topic).await;
        let held = warm.inner().range(&name).await.unwrap();
        assert_eq!(held, fresh, "warm no longer holds the never-acknowledged batch");
        assert_identical(&store, warm.as_ref(), fresh).await;
        assert!(!dir.path().join("router/t.unacked").exists(), "nothing left to remember");
        assert!(!dir.path().join("hot/t/unacked").exists(), "nothing left to remember");

        // Read after the gap: the acknowledged records, each once.
        let reader = topic.reader(StartPosition::Offset(skipped.end)).await.unwrap();
        let after: Vec<_> = reader.take(3).map(|r| r.unwrap()).map(|r| (r.offset, r.payload)).collect().await;
        let want: Vec<_> = (0..3).map(|i| (fresh.start + i, rec(100 + i).payload)).collect();
        assert_eq!(after, want);
        store.close().await;
    });
}

/// A first life of topic `t` (hot+`warm`, `degrade`) ended by a crash — its runtime
/// dropped: nothing of a clean close runs — after warm took a never-acknowledged batch at
/// [10, 15) and before the WAL did ([0, 10) acknowledged).
fn crash_after_warm_took_a_batch_the_wal_did_not(hot: &HotConfig, warm: &Arc<FaultyTier<MemoryTier>>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (store, topic) = rt.block_on(async {
        let store = open_with(hot, warm).await.unwrap();
        let topic = store.topic("t").await.unwrap();
        append_range(&topic, 0, 10, 10).await;
        warm.inner().append(topic.name(), never_acknowledged_at(10)).await.unwrap();
        (store, topic)
    });
    drop(rt);
    drop(topic);
    drop(store);
}

/// As above, and the router's state directory is lost too: no reservation says how far
/// warm may hold batches past the WAL's end (each batch goes to warm and the WAL at once),
/// so with warm unreachable the topic does not open — continuing at the WAL's end would
/// hand out offsets warm holds other records at. Once warm answers, recovery replays them.
/// (Found by the simulation, seed 14005661.)
#[test]
fn a_degraded_open_is_refused_when_no_reservation_bounds_what_warm_may_hold() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Range, Op::Append]);
    // Under `fsync = always`, with no state file, the WAL vouches for its own end.
    let hot = hot(&dir).with_fsync(FsyncPolicy::Always);
    crash_after_warm_took_a_batch_the_wal_did_not(&hot, &warm);
    std::fs::remove_dir_all(dir.path().join("router")).expect("the state directory");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        warm.fail_fraction(1.0);
        let err = open_with(&hot, &warm).await.expect_err("warm is needed");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(err.report().to_string().contains("no reservation"), "{}", err.report());

        warm.clear();
        let store = open_with(&hot, &warm).await.unwrap();
        let report = store.recover_topic("t").await.unwrap();
        assert_eq!(report.replayed, Some(r(10, 15)), "{report:?}");
        let topic = store.topic("t").await.unwrap();
        assert!(topic.append(vec![rec(99)]).await.unwrap().start >= 15, "offsets warm holds are not reused");
        store.close().await;
    });
}

/// As in [`a_degraded_open_never_reuses_offsets_warm_may_hold`], and the process dies
/// before warm answers again; then the router's state directory is lost (the `.unacked`
/// file with it) and the store reopens with warm up. The WAL's `unacked` marker still names
/// the skipped offsets: warm is restarted past them, and a read there answers `NotFound`
/// naming them, as before the loss — never warm's never-acknowledged records (before the
/// marker: offsets 10..15 served from warm).
#[test]
fn skipped_offsets_stay_unserved_from_warm_after_the_state_directory_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Range, Op::Append]);
    let name = TopicName::new("t").unwrap();
    // Under `fsync = always`, with no state file, the WAL vouches for its own end.
    let hot = hot(&dir).with_fsync(FsyncPolicy::Always);
    crash_after_warm_took_a_batch_the_wal_did_not(&hot, &warm);

    // Reopened while warm is unreachable: the offsets warm may hold are skipped; one batch
    // is acknowledged after them; the process dies before warm answers.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (skipped, fresh) = rt.block_on(async {
        warm.fail_fraction(1.0);
        let store = open_with(&hot, &warm).await.unwrap();
        let skipped = store.recover_topic("t").await.unwrap().skipped.expect("offsets skipped");
        let topic = store.topic("t").await.unwrap();
        let fresh = topic.append((0..3).map(|i| rec(100 + i)).collect()).await.unwrap();
        (skipped, fresh)
    });
    drop(rt);
    assert_eq!((skipped.start, fresh.start), (10, skipped.end));
    std::fs::remove_dir_all(dir.path().join("router")).expect("the state directory");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        warm.clear();
        let store = open_with(&hot, &warm).await.unwrap();
        let report = store.recover_topic("t").await.unwrap();
        assert!(report.is_clean(), "nothing acknowledged is missing: {report:?}");
        let topic = store.topic("t").await.unwrap();
        for from in [StartPosition::Earliest, StartPosition::Offset(10), StartPosition::Offset(12)] {
            let mut reader = topic.reader(from).await.unwrap();
            let mut served = Vec::new();
            let gap = loop {
                match reader.next().await.expect("a record or the gap") {
                    Ok(record) => served.push(record.offset),
                    Err(e) => break e,
                }
            };
            assert!(served.iter().all(|o| *o < 10), "{from:?}: served {served:?} inside the skipped offsets");
            assert_eq!(gap.kind(), ErrorKind::NotFound, "{gap}");
            assert!(
                gap.to_string().contains(&format!("{}..{}", skipped.start, skipped.end)),
                "{from:?}: {gap}"
            );
        }
        // Warm holds none of the never-acknowledged records; the acknowledged batch after
        // the gap reads back.
        let held = warm.inner().range(&name).await.unwrap();
        assert!(held.start >= skipped.end || held.is_empty(), "warm still holds {held:?}");
        let after: Vec<_> = topic
            .reader(StartPosition::Offset(skipped.end))
            .await
            .unwrap()
            .take(3)
            .map(|r| r.unwrap())
            .map(|r| (r.offset, r.payload))
            .collect()
            .await;
        let want: Vec<_> = (0..3).map(|i| (fresh.start + i, rec(100 + i).payload)).collect();
        assert_eq!(after, want);
        store.close().await;
    });
}

/// The store over `hot` and `warm` under `degrade`, without background tasks.
async fn open_with(
    hot: &HotConfig,
    warm: &Arc<FaultyTier<MemoryTier>>,
) -> Result<TieredStore, tier_core::TierError> {
    TieredStore::builder()
        .hot(hot.clone())
        .warm(warm.clone())
        .router(router(WarmFailurePolicy::Degrade))
        .background(false)
        .open()
        .await
}

/// Warm's back-fill at recovery stops where no tier holds the offsets — here a range
/// recovery declared maybe lost (a reservation from another boot, `fsync = never`), which
/// the WAL records as its gap. Warm, an empty stream, takes the next batch after the gap;
/// WAL retention then deletes what warm holds: the gap holds no record warm could lack, so
/// it keeps no segment after it. (Found by the simulation, seed 14003001: a segment kept
/// for good.)
#[tokio::test]
async fn a_warm_backfill_stopped_at_the_wals_gap_keeps_no_segment_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    store.close().await;
    // Warm restarted past what it held (an empty stream at 10); the reservation says
    // offsets up to 1000 were handed out, in a boot that is not this one.
    warm.inner().restart_at(&name, 10).await.unwrap();
    std::fs::write(dir.path().join("router/t.reserved"), "1000 another-boot lazy\n").unwrap();

    let store = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    assert_eq!((report.maybe_lost.clone(), report.next_offset), (vec![r(10, 1000)], 1000), "{report:?}");
    let topic = store.topic("t").await.unwrap();
    append_range(&topic, 1000, 1010, 10).await;
    topic.flush().await.unwrap();
    assert_eq!(warm.inner().range(&name).await.unwrap(), r(1000, 1010));
    store.wal().rotate(&name).await.unwrap();
    let later = ten_years_on();
    store.run_retention_now(later).await.unwrap();
    assert_eq!(
        store.wal().sealed_segments(&name),
        vec![],
        "warm holds everything the WAL holds: retention deletes every sealed segment"
    );
    store.close().await;
}

/// A lost WAL is replayed from warm at the next open; if that open fails half-way (here the
/// WAL refuses the replay's second batch), the next recovery finds a WAL holding part of
/// the topic and, under `fsync = always`, would trust it to vouch for its end — handing out
/// again offsets acknowledged on the lost WAL alone (under `degrade`, while warm was down).
/// The first recovery keeps the offsets up to the reservation as maybe lost before it
/// replays.
#[test]
fn a_replay_into_a_lost_wal_that_fails_half_way_never_reuses_acknowledged_offsets() {
    replay_into_a_lost_wal_fails_half_way(false);
}

/// As above, and the router's state directory — where that recovery kept the offsets up
/// to the reservation as maybe lost — is lost too before the next open: the WAL's own
/// directory says it was being rebuilt and how far records may have been acknowledged
/// (`HotTier::mark_rebuilt`), so its end is still not taken for the acknowledged end.
/// (Found by the simulation, seed 13006174.)
#[test]
fn a_wal_rebuilt_in_part_never_vouches_for_its_end_even_without_the_state_directory() {
    replay_into_a_lost_wal_fails_half_way(true);
}

/// The scenario of the two tests above; `lose_state`: the state directory is lost after
/// the failed open.
fn replay_into_a_lost_wal_fails_half_way(lose_state: bool) {
    use tier_hot::faults::{self, FaultPoint};
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hot = HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Always);
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    let open = |hot: HotConfig, warm: Arc<FaultyTier<MemoryTier>>| async move {
        TieredStore::builder()
            .hot(hot)
            .warm(warm)
            .router(router(WarmFailurePolicy::Degrade))
            .background(false)
            .open()
            .await
    };

    // Two batches in both tiers, then [10, 13) acknowledged on the WAL alone (warm down).
    let rt = runtime();
    let (store, topic) = rt.block_on(async {
        let store = open(hot.clone(), warm.clone()).await.unwrap();
        let topic = store.topic("t").await.unwrap();
        append_range(&topic, 0, 10, 5).await;
        warm.fail_fraction(1.0);
        assert_eq!(topic.append((10..13).map(rec).collect()).await.unwrap(), r(10, 13));
        (store, topic)
    });
    // The disk is lost and the process dies; warm answers again.
    drop(rt);
    drop(topic);
    drop(store);
    std::fs::remove_dir_all(&hot.data_dir).unwrap();
    warm.clear();

    let rt = runtime();
    rt.block_on(async {
        // The open replays [0, 5), then the WAL refuses [5, 10): the open fails.
        faults::fail_nth(&hot.data_dir, FaultPoint::Write, 2, std::io::ErrorKind::Other);
        let store = open(hot.clone(), warm.clone()).await.unwrap();
        let failed = store.recover_topic("t").await.expect_err("the open of the topic fails");
        let fired = faults::fired(&hot.data_dir, FaultPoint::Write);
        faults::clear(&hot.data_dir);
        assert_eq!(fired, 1, "the replay's second write failed: {failed}");
        assert_eq!(
            store.wal().range(&TopicName::new("t").unwrap()).await.unwrap(),
            r(0, 5),
            "replayed in part"
        );
        store.close().await;
        if lose_state {
            std::fs::remove_dir_all(dir.path().join("router")).expect("the state directory beside the WAL's");
        }

        let store = open(hot.clone(), warm.clone()).await.unwrap();
        let report = store.recover_topic("t").await.unwrap();
        assert!(report.next_offset >= 13, "[10, 13) were acknowledged: {report:?}");
        assert!(
            report.maybe_lost.iter().any(|m| m.start <= 10 && 13 <= m.end),
            "the offsets acknowledged on the lost WAL alone are reported: {report:?}"
        );
        let topic = store.topic("t").await.unwrap();
        assert!(topic.append(vec![rec(99)]).await.unwrap().start >= 13);
        store.close().await;
    });
}

/// Warm may still hold never-acknowledged records in offsets a degraded open skipped (it
/// could not be restarted past them: the WAL was lost) and acknowledged records after them
/// (it took the next batch where the junk ended). Replaying warm into a lost WAL skips the
/// former — the WAL records them as a gap — and replays the latter: stopping at the
/// skipped offsets would leave acknowledged records in warm alone, and the WAL continuing
/// past them.
#[tokio::test]
async fn a_replay_into_a_lost_wal_skips_what_a_degraded_open_skipped_and_replays_what_follows() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let (store, report) = lost_wal_after_a_degraded_open(&dir, &warm).await;
    let name = TopicName::new("t").unwrap();
    assert!(report.is_clean(), "nothing acknowledged is missing: {report:?}");
    assert_eq!(report.next_offset, 18, "{report:?}");
    assert_eq!(store.wal().gaps(&name), vec![r(10, 15)], "the skipped offsets are the WAL's gap");
    let replayed = store.wal().read(&name, 15, 18, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(
        replayed.iter().map(|r| r.payload.clone()).collect::<Vec<_>>(),
        (15..18).map(|o| rec(o).payload).collect::<Vec<_>>()
    );
    let topic = store.topic("t").await.unwrap();
    let reader = topic.reader(StartPosition::Offset(15)).await.unwrap();
    let after: Vec<_> = reader.take(3).map(|r| r.unwrap().offset).collect().await;
    assert_eq!(after, vec![15, 16, 17]);
    store.close().await;
}

/// After [`lost_wal_after_a_degraded_open`] warm still holds the never-acknowledged batch
/// (it cannot be restarted past it: it holds acknowledged records after it). Once WAL
/// retention has deleted the segments warm holds, warm serves the reads below the WAL's
/// start — but never its records in the skipped offsets: a read there fails naming them,
/// and a read after them goes on with the acknowledged records.
#[tokio::test]
async fn reads_below_the_wal_never_take_warms_records_in_skipped_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let (store, _) = lost_wal_after_a_degraded_open(&dir, &warm).await;
    let name = TopicName::new("t").unwrap();
    let topic = store.topic("t").await.unwrap();
    append_range(&topic, 18, 20, 2).await;
    topic.flush().await.unwrap();
    store.wal().rotate(&name).await.unwrap();
    let later = ten_years_on();
    store.run_retention_now(later).await.unwrap();
    assert_eq!(store.wal().range(&name).await.unwrap().start, 20, "warm holds everything the WAL held");
    assert_eq!(warm.inner().range(&name).await.unwrap(), r(0, 20), "with the never-acknowledged batch");

    for batches in [false, true] {
        let read = |from| read_to(&topic, from, 20, batches);
        let (got, err) = read(0).await;
        let want: Vec<_> = (0..10).map(|o| (o, rec(o).payload)).collect();
        assert_eq!(got, want, "batches: {batches}");
        let err = err.expect("the skipped offsets hold no acknowledged record");
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(err.to_string().contains("10..15"), "names the skipped offsets: {err}");
        assert!(err.to_string().contains("continues at 15"), "says where to go on: {err}");
        let (got, err) = read(15).await;
        assert!(err.is_none(), "{err:?}");
        let want: Vec<_> = (15..20).map(|o| (o, rec(o).payload)).collect();
        assert_eq!(got, want, "batches: {batches}");
    }
    // A seek by timestamp past the acknowledged [0, 10) (`rec` stamps offset o at 1000 +
    // 10 o) lands on 15, not on the never-acknowledged records warm holds at 10.
    let mut reader = topic.reader(StartPosition::Timestamp(1095)).await.unwrap();
    let first = reader.next().await.unwrap().unwrap();
    assert_eq!((first.offset, first.payload), (15, rec(15).payload));
    store.close().await;
}

/// The records of `topic` from `from` up to `to` (through its batch reader when
/// `batches`), and the error that ended the read before `to`, if one did.
async fn read_to(
    topic: &Topic,
    from: u64,
    to: u64,
    batches: bool,
) -> (Vec<(u64, bytes::Bytes)>, Option<tier_core::TierError>) {
    let mut got = Vec::new();
    let mut records = if batches {
        let reader = topic.batch_reader(StartPosition::Offset(from)).await.unwrap();
        reader.map(|b| b.map(|b| b.records().map(|r| (r.offset, r.payload)).collect::<Vec<_>>())).boxed()
    } else {
        let reader = topic.reader(StartPosition::Offset(from)).await.unwrap();
        reader.map(|r| r.map(|r| vec![(r.offset, r.payload)])).boxed()
    };
    while got.last().is_none_or(|(o, _)| o + 1 < to) {
        match records.next().await.expect("a followed read does not end") {
            Ok(more) => got.extend(more),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// As an earlier degraded open left it — `[10, 15)` skipped, warm holding a
/// never-acknowledged batch there, then `[15, 18)` acknowledged and taken by warm where
/// the junk ended — the WAL is lost, and the store reopens with warm answering. Returns
/// the store and its recovery report of topic `t`.
async fn lost_wal_after_a_degraded_open(
    dir: &tempfile::TempDir,
    warm: &Arc<FaultyTier<MemoryTier>>,
) -> (TieredStore, tier_router::RecoveryReport) {
    let (store, topic) = open(dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    let name = topic.name().clone();
    append_range(&topic, 0, 10, 10).await;
    store.close().await;
    warm.inner().append(&name, never_acknowledged_at(10)).await.unwrap();
    append_range_to(warm, 15, 18).await;
    std::fs::write(dir.path().join("router/t.unacked"), "10 15\n").unwrap();
    std::fs::write(dir.path().join("router/t.end"), "18").unwrap();
    std::fs::write(dir.path().join("router/t.reserved"), "18 unknown lazy\n").unwrap();
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    let store = try_reopen(dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    (store, report)
}

/// A WAL that ends before the checkpointed commit point lost its tail (every committed
/// batch was in it): it cannot vouch for its end, and warm may hold the acknowledged
/// records it lost. Under `degrade` the topic does not open without warm — opening would
/// report records warm holds as lost and skip past them.
#[tokio::test]
async fn a_wal_ending_before_the_checkpoint_does_not_open_without_warm() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Range, Op::Append]);
    let (store, topic) = open(&dir, warm.clone(), WarmFailurePolicy::Degrade).await;
    append_range(&topic, 0, 10, 10).await;
    store.close().await;
    // As after the WAL lost [10, 14), which warm holds.
    append_range_to(&warm, 10, 14).await;
    std::fs::write(dir.path().join("router/t.end"), "14").unwrap();

    warm.fail_fraction(1.0);
    let err = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.expect_err("warm is needed");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.report().to_string().contains("ends before the last checkpoint"), "{}", err.report());

    // Warm answers: the WAL is completed from it, nothing is lost.
    warm.clear();
    let store = try_reopen(&dir, warm.clone(), WarmFailurePolicy::Degrade).await.unwrap();
    let report = store.recover_topic("t").await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.next_offset, 14);
    assert_eq!(report.replayed, Some(r(10, 14)));
    store.close().await;
}

/// Five records `never acknowledged` (stamped 2000..2005) in one batch at `base`: what
/// warm took of a batch the WAL never stored.
fn never_acknowledged_at(base: u64) -> tier_core::RecordBatch {
    let mut batch = tier_core::RecordBatchBuilder::new();
    for i in 0..5 {
        batch.push(2000 + i, None, &[], b"never acknowledged").unwrap();
    }
    batch.build(base).unwrap()
}

/// A time past every segment's age: WAL retention may delete whatever it is allowed to.
fn ten_years_on() -> std::time::SystemTime {
    std::time::SystemTime::now() + Duration::from_secs(10 * 365 * 24 * 3600)
}

/// Appends records `from..to` (as `rec` makes them) straight to warm's inner tier.
async fn append_range_to(warm: &FaultyTier<MemoryTier>, from: u64, to: u64) {
    warm.inner().append(&TopicName::new("t").unwrap(), common::stored_batch(from, to)).await.unwrap();
}
