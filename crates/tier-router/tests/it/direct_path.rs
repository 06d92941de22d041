//! Awaited appends committed in the producers' own tasks (`Topic::append_batch`, see
//! `docs/router.md`, "Write path"): which batches meet in a group depends only on which
//! producers arrived, never on whether an earlier commit has finished (that depends on when
//! a blocking job ran, and would make the simulation's replays inexact); and a producer
//! that stops waiting leaves no commit half done — its batch is committed whole, or, when
//! no commit took it yet, not at all.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use crate::common;

use std::time::Duration;

use common::{ColdOn, Deployment, Tiers, r};
use futures::StreamExt;
use tier_core::{OffsetRange, RecordBatch, RecordBatchBuilder, StartPosition, TierError, TopicName};
use tier_hot::FsyncPolicy;
use tier_hot::faults::{self, FaultPoint};
use tier_router::{TieredStore, Topic};

/// Longest wait for what must happen (a hang detector, not synchronisation).
const WAIT: Duration = Duration::from_secs(20);

/// A producer's batch of `n` records whose payloads start with `tag`.
fn builder(tag: &str, n: usize) -> RecordBatchBuilder {
    let mut b = RecordBatchBuilder::new();
    for i in 0..n {
        b.push(1_700_000_000_000 + i as i64, None, &[], format!("{tag}-{i}").as_bytes()).unwrap();
    }
    b
}

/// The committed batches of `topic` from the start: (base offset, first payload, records).
async fn committed(topic: &Topic, batches: usize) -> Vec<(u64, String, usize)> {
    let reader = topic.batch_reader(StartPosition::Earliest).await.unwrap();
    let read: Vec<RecordBatch> =
        tokio::time::timeout(WAIT, reader.take(batches).map(|b| b.unwrap().batch).collect())
            .await
            .expect("the committed batches are read");
    read.iter()
        .map(|b| {
            let first = b.records().next().unwrap();
            (b.base_offset(), String::from_utf8_lossy(&first.payload).into_owned(), b.record_count() as usize)
        })
        .collect()
}

fn batch(base: u64, tag: &str, n: usize) -> (u64, String, usize) {
    (base, format!("{tag}-0"), n)
}

/// Group writes of the WAL for `topic` so far.
fn wal_writes(store: &TieredStore, topic: &str) -> u64 {
    store.wal().write_stats(topic).map_or(0, |s| s.writes)
}

/// Two appends polled together meet in one group — one WAL write — whether the writer was
/// idle when they arrived or still committing an earlier batch (held in its fsync): a
/// producer never decides from whether another's commit has finished.
#[tokio::test]
async fn appends_polled_together_meet_in_one_group_whether_or_not_an_earlier_commit_finished() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Always;
    let store = d.open(&[]).await;
    let name = "together";
    let topic = store.topic(name).await.unwrap();
    assert_eq!(topic.append_batch(builder("a", 2)).await.unwrap(), r(0, 2));

    // The writer idle: B and C arrive together.
    let before = wal_writes(&store, name);
    let (b, c) = tokio::time::timeout(WAIT, async {
        futures::join!(topic.append_batch(builder("b", 3)), topic.append_batch(builder("c", 1)))
    })
    .await
    .expect("answered");
    assert_eq!((b.unwrap(), c.unwrap()), (r(2, 5), r(5, 6)));
    assert_eq!(wal_writes(&store, name) - before, 1, "B and C arrived together: one group, one WAL write");

    // The writer busy: D's commit waits in its fsync while E and F arrive together.
    let hot = d.hot_dir();
    faults::hold(&hot, FaultPoint::Fsync);
    let before = wal_writes(&store, name);
    let mut first = Box::pin(topic.append_batch(builder("d", 1)));
    let held = tokio::task::spawn_blocking(move || faults::wait_held(&hot, FaultPoint::Fsync));
    tokio::time::timeout(WAIT, async {
        tokio::select! {
            biased;
            _ = first.as_mut() => panic!("D is answered while its fsync is held"),
            waited = held => waited.unwrap(),
        }
    })
    .await
    .expect("D's fsync is reached");
    // D's producer keeps polling it (its commit runs in its task) while E and F arrive.
    let mut all = Box::pin(async {
        let together = async {
            futures::join!(topic.append_batch(builder("e", 2)), topic.append_batch(builder("f", 1)))
        };
        futures::join!(first, together)
    });
    assert!(futures::poll!(all.as_mut()).is_pending(), "D waits in its fsync, E and F for D's commit");
    faults::release(&d.hot_dir(), FaultPoint::Fsync);
    let (d_range, (e, f)) = tokio::time::timeout(WAIT, all).await.expect("answered");
    let d_range = d_range.unwrap();
    assert_eq!((d_range, e.unwrap(), f.unwrap()), (r(6, 7), r(7, 9), r(9, 10)));
    assert_eq!(
        wal_writes(&store, name) - before,
        2,
        "D alone, then E and F together, as when the writer was idle"
    );
    store.close().await;
}

/// A producer that stops waiting while its batch's commit waits for the WAL's fsync: the
/// commit is finished by a task of its own (the writer's lock held until then), so the
/// batch is committed whole, the next append gets the next offsets, and a reopened store
/// holds the same batches.
#[tokio::test]
async fn an_append_dropped_during_its_wal_fsync_is_committed_whole() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Always;
    let store = d.open(&[]).await;
    let name = TopicName::new("dropped-in-fsync").unwrap();
    let topic = store.topic(&name).await.unwrap();
    assert_eq!(topic.append_batch(builder("a", 2)).await.unwrap(), r(0, 2));

    let hot = d.hot_dir();
    faults::hold(&hot, FaultPoint::Fsync);
    {
        let mut dropped = Box::pin(topic.append_batch(builder("b", 3)));
        let held = tokio::task::spawn_blocking(move || faults::wait_held(&hot, FaultPoint::Fsync));
        tokio::time::timeout(WAIT, async {
            tokio::select! {
                biased;
                _ = dropped.as_mut() => panic!("B is answered while its fsync is held"),
                waited = held => waited.unwrap(),
            }
        })
        .await
        .expect("B's fsync is reached");
        // B's producer stops waiting, its commit in the middle of the WAL's fsync.
    }
    faults::release(&d.hot_dir(), FaultPoint::Fsync);
    let next = tokio::time::timeout(WAIT, topic.append_batch(builder("c", 1))).await.expect("answered");
    assert_eq!(next.unwrap(), r(5, 6), "C follows B, committed whole");
    assert_eq!(topic.high_watermark(), 6);
    let expected = vec![batch(0, "a", 2), batch(2, "b", 3), batch(5, "c", 1)];
    assert_eq!(committed(&topic, 3).await, expected);
    store.close().await;

    let store = d.open(&[]).await;
    let topic = store.topic(&name).await.unwrap();
    assert_eq!(committed(&topic, 3).await, expected, "the reopened store holds the same batches");
    assert_eq!(topic.append_batch(builder("d", 1)).await.unwrap(), r(6, 7));
    store.close().await;
}

/// A producer that stops waiting before any commit took its batch (it had only arrived):
/// the batch is not appended — it holds no offsets, and no later commit takes it.
#[tokio::test]
async fn an_append_dropped_before_a_commit_took_it_is_not_appended() {
    let d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let topic = store.topic("dropped-on-arrival").await.unwrap();
    {
        let mut dropped = Box::pin(topic.append_batch(builder("x", 2)));
        // Arrived; it lets the producers polled beside it arrive before any takes a group.
        assert!(futures::poll!(dropped.as_mut()).is_pending());
    }
    let next = tokio::time::timeout(WAIT, topic.append_batch(builder("y", 1))).await.expect("answered");
    assert_eq!(next.unwrap(), OffsetRange::new(0, 1), "the dropped batch holds no offsets");
    assert_eq!(topic.high_watermark(), 1);
    assert_eq!(committed(&topic, 1).await, vec![batch(0, "y", 1)]);
    assert_eq!(store.wal().range("dropped-on-arrival").await.unwrap(), r(0, 1), "the WAL holds only Y");
    store.close().await;
}

/// Polls `fut` until it waits for something other than its own task (an append arrives,
/// then lets the producers polled beside it arrive, then waits for its answer or its turn
/// to commit): a few polls, each of which may wake the task at once.
async fn poll_until_waiting<F: std::future::Future + Unpin>(fut: &mut F) {
    for _ in 0..4 {
        assert!(futures::poll!(&mut *fut).is_pending(), "the append waits for the commit ahead of it");
    }
}

/// A producer's append, boxed.
type Append<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<OffsetRange, TierError>> + Send + 'a>>;

/// On a fresh topic with fsync `always`: A is committed at 0; D's commit then waits in its
/// fsync (held) while E (2 records) and F (1) arrive behind it and wait; the fsync is
/// released and D answered at [1, 2). Returns E and F, not polled since.
async fn arriving_behind_a_held_commit<'a>(d: &Deployment, topic: &'a Topic) -> (Append<'a>, Append<'a>) {
    assert_eq!(topic.append_batch(builder("a", 1)).await.unwrap(), r(0, 1));
    let hot = d.hot_dir();
    faults::hold(&hot, FaultPoint::Fsync);
    let mut first = Box::pin(topic.append_batch(builder("d", 1)));
    let held = tokio::task::spawn_blocking(move || faults::wait_held(&hot, FaultPoint::Fsync));
    tokio::time::timeout(WAIT, async {
        tokio::select! {
            biased;
            _ = first.as_mut() => panic!("D is answered while its fsync is held"),
            waited = held => waited.unwrap(),
        }
    })
    .await
    .expect("D's fsync is reached");
    let mut e: Append<'a> = Box::pin(topic.append_batch(builder("e", 2)));
    let mut f: Append<'a> = Box::pin(topic.append_batch(builder("f", 1)));
    poll_until_waiting(&mut e).await;
    poll_until_waiting(&mut f).await;
    faults::release(&d.hot_dir(), FaultPoint::Fsync);
    assert_eq!(tokio::time::timeout(WAIT, first).await.expect("D is answered").unwrap(), r(1, 2));
    (e, f)
}

/// A producer whose batch another producer's commit took has nothing left to do with the
/// writer: held without being polled once its answer is there (its task busy elsewhere),
/// it does not hold up the commits after it. D's commit waits in its fsync while E and F
/// arrive; E then commits E and F; F is never polled again, and G is still committed.
#[tokio::test]
async fn an_answered_producer_not_polled_does_not_hold_up_the_next_commit() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Always;
    let store = d.open(&[]).await;
    let topic = store.topic("answered-unpolled").await.unwrap();
    let (e, f) = arriving_behind_a_held_commit(&d, &topic).await;
    assert_eq!(tokio::time::timeout(WAIT, e).await.expect("E is answered").unwrap(), r(2, 4));
    assert_eq!(topic.high_watermark(), 5, "E's commit took F's batch too");

    // F's answer is there; F is not polled. G arrives and is committed all the same.
    let g = tokio::time::timeout(WAIT, topic.append_batch(builder("g", 1)))
        .await
        .expect("G is committed while F, answered, is not polled");
    assert_eq!(g.unwrap(), r(5, 6));
    assert_eq!(tokio::time::timeout(WAIT, f).await.expect("F is answered").unwrap(), r(4, 5));
    let expected =
        vec![batch(0, "a", 1), batch(1, "d", 1), batch(2, "e", 2), batch(4, "f", 1), batch(5, "g", 1)];
    assert_eq!(committed(&topic, 5).await, expected);
    store.close().await;
}

/// The producer whose turn it is to commit next stops waiting before it started: its
/// batch is not appended, and the turn passes to the next batch waiting, which is
/// committed at the next offsets.
#[tokio::test]
async fn a_producer_that_stops_waiting_on_its_turn_to_commit_passes_it_on() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Always;
    let store = d.open(&[]).await;
    let topic = store.topic("turn-passed-on").await.unwrap();
    let (e, f) = arriving_behind_a_held_commit(&d, &topic).await;
    // E's turn came with D's end; E stops waiting without having been polled since.
    drop(e);
    assert_eq!(tokio::time::timeout(WAIT, f).await.expect("F is answered").unwrap(), r(2, 3));
    assert_eq!(topic.append_batch(builder("g", 1)).await.unwrap(), r(3, 4));
    let expected = vec![batch(0, "a", 1), batch(1, "d", 1), batch(2, "f", 1), batch(3, "g", 1)];
    assert_eq!(committed(&topic, 4).await, expected);
    store.close().await;
}

/// Without an fsync, a lone append on an idle writer is committed in the producer's own
/// poll, with no await (`Writer::commit_now`); appends polled together still meet in one
/// group — one WAL write — as under `always`: the producer looks only after every append
/// of its pass arrived.
#[tokio::test]
async fn without_fsync_a_lone_append_commits_at_once_and_a_join_still_meets_in_one_group() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Never;
    let store = d.open(&[]).await;
    let name = "never-together";
    let topic = store.topic(name).await.unwrap();
    // The topic's first append creates its segment through the WAL's writer task, which
    // may still hold the WAL writer's lock when the answer arrives; the second one waits
    // for that lock and leaves the WAL's writer idle.
    assert_eq!(topic.append_batch(builder("a", 1)).await.unwrap(), r(0, 1));
    assert_eq!(topic.append_batch(builder("a2", 1)).await.unwrap(), r(1, 2));

    let before = wal_writes(&store, name);
    let mut lone = std::pin::pin!(topic.append_batch(builder("b", 1)));
    assert!(futures::poll!(lone.as_mut()).is_pending(), "the producer lets its pass's appends arrive first");
    match futures::poll!(lone.as_mut()) {
        std::task::Poll::Ready(range) => assert_eq!(range.unwrap(), r(2, 3)),
        std::task::Poll::Pending => panic!("a lone append on an idle writer waits for nothing"),
    }
    assert_eq!(wal_writes(&store, name) - before, 1);
    assert_eq!(topic.high_watermark(), 3, "the commit point moved with the answer");

    let before = wal_writes(&store, name);
    let (c, e) = tokio::time::timeout(WAIT, async {
        futures::join!(topic.append_batch(builder("c", 3)), topic.append_batch(builder("e", 1)))
    })
    .await
    .expect("answered");
    assert_eq!((c.unwrap(), e.unwrap()), (r(3, 6), r(6, 7)));
    assert_eq!(wal_writes(&store, name) - before, 1, "C and E arrived together: one group, one WAL write");
    assert_eq!(
        committed(&topic, 5).await,
        vec![batch(0, "a", 1), batch(1, "a2", 1), batch(2, "b", 1), batch(3, "c", 3), batch(6, "e", 1)]
    );
    store.close().await;
}

/// A lone append whose WAL write fails, committed at once: its producer is refused, the
/// batch stays pending (later appends are refused behind it), and nothing of it is served
/// or renumbered — a reopened store continues at its base.
#[tokio::test]
async fn a_lone_append_whose_wal_write_fails_is_refused_and_kept_pending() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = FsyncPolicy::Never;
    let store = d.open(&[]).await;
    let topic = store.topic("write-failed").await.unwrap();
    assert_eq!(topic.append_batch(builder("first", 2)).await.unwrap(), r(0, 2));
    faults::fail_nth(&d.hot_dir(), FaultPoint::Write, 1, std::io::ErrorKind::Other);
    let refused = topic.append_batch(builder("failed", 3)).await.expect_err("the write failed");
    assert_eq!(refused.kind(), tier_core::ErrorKind::Unavailable, "{}", refused.report());
    assert_eq!(topic.high_watermark(), 2, "nothing of it is committed");
    let after = topic.append_batch(builder("after", 1)).await.expect_err("the failed batch is pending");
    assert!(after.to_string().contains("pending from offset 2"), "{}", after.report());
    faults::clear(&d.hot_dir());
    store.close().await;

    let store = d.open(&[]).await;
    let topic = store.topic("write-failed").await.unwrap();
    assert_eq!(topic.append_batch(builder("next", 1)).await.unwrap(), r(2, 3));
    assert_eq!(committed(&topic, 2).await, vec![batch(0, "first", 2), batch(2, "next", 1)]);
    store.close().await;
}
