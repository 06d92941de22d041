//! One writer per topic, batches encoded once: the appends that meet in
//! one group commit reach the WAL and warm as their producers encoded them — numbered, each
//! its own batch, never decoded and merged into one — and each producer is answered with
//! its own offsets.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{ColdOn, Deployment, Tiers};
use futures::{StreamExt, TryStreamExt};
use tier_core::position::WarmBackend;
use tier_core::{OffsetRange, RecordBatch, RecordBatchBuilder, Tier, TopicName};
use tier_hot::HotTier;
use tier_router::NewRecord;
use tier_testkit::{FaultyTier, MemoryTier};

/// Longest wait for what must happen (a hang detector, not synchronisation).
const WAIT: Duration = Duration::from_secs(20);

/// A producer's batch of `n` records whose payloads start with `tag`.
fn builder(tag: &str, n: usize) -> RecordBatchBuilder {
    let mut b = RecordBatchBuilder::new();
    for i in 0..n {
        b.push(1_700_000_000_000 + i as i64, Some(tag.as_bytes()), &[], format!("{tag}-{i}").as_bytes())
            .unwrap();
    }
    b
}

/// The encoding the producer of `builder(tag, n)` made (the router numbers it only).
fn encoded(tag: &str, n: usize) -> RecordBatch {
    builder(tag, n).build(0).unwrap()
}

/// The batches `batches` hold from offset 0: each its own batch, in order, with the
/// producers' encodings at the offsets the producers were answered.
fn assert_as_produced(what: &str, batches: &[RecordBatch], expected: &[(u64, &str, usize)]) {
    let got: Vec<(u64, u32)> = batches.iter().map(|b| (b.base_offset(), b.record_count())).collect();
    let want: Vec<(u64, u32)> = expected.iter().map(|&(at, _, n)| (at, n as u32)).collect();
    assert_eq!(got, want, "{what}: one batch per producer's batch, at its offsets");
    for (batch, &(_, tag, n)) in batches.iter().zip(expected) {
        assert_eq!(
            batch.body(),
            encoded(tag, n).body(),
            "{what}: batch {tag} is stored as its producer encoded it"
        );
    }
}

#[tokio::test]
async fn appends_meeting_in_one_group_are_stored_as_their_producers_encoded_them() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    let store = d.open(&[]).await;
    let name = TopicName::new("grouped").unwrap();
    let topic = store.topic(&name).await.unwrap();

    // A's warm write is held, so the writer is busy with A while B and C queue behind it:
    // they meet in the next group.
    warm.hold(&name);
    let a = tokio::spawn({
        let topic = topic.clone();
        async move { topic.append_batch(builder("a", 3)).await }
    });
    tokio::time::timeout(WAIT, warm.wait_held(1)).await.expect("A's warm write is waiting");
    let mut b = Box::pin(topic.append_batch(builder("b", 2)));
    let mut c = Box::pin(topic.append_batch(builder("c", 4)));
    // Polled once, each append is queued to the writer and waits for its answer.
    assert!(futures::poll!(&mut b).is_pending());
    assert!(futures::poll!(&mut c).is_pending());
    warm.release(&name);

    assert_eq!(a.await.unwrap().unwrap(), OffsetRange::new(0, 3));
    let (b, c) = tokio::time::timeout(WAIT, futures::future::join(b, c)).await.expect("B and C are answered");
    assert_eq!(b.unwrap(), OffsetRange::new(3, 5), "B is answered its own offsets");
    assert_eq!(c.unwrap(), OffsetRange::new(5, 9), "C is answered its own offsets");
    let expected = [(0, "a", 3), (3, "b", 2), (5, "c", 4)];

    let in_warm: Vec<RecordBatch> = warm.inner().batches_from(&name, 0).try_collect().await.unwrap();
    assert_as_produced("warm", &in_warm, &expected);
    // The consumer's batches: the same batches, read through the store.
    let reader = topic.batch_reader(tier_core::StartPosition::Earliest).await.unwrap();
    let read: Vec<RecordBatch> =
        tokio::time::timeout(WAIT, reader.take(3).map(|b| b.unwrap().batch).collect())
            .await
            .expect("the three batches are read");
    assert_as_produced("the store's batch reader", &read, &expected);
    store.close().await;

    let hot = HotTier::open(d.hot.clone()).await.unwrap();
    let in_wal = hot.read_batches(&name, 0, 9, usize::MAX).await.unwrap();
    assert_as_produced("WAL", &in_wal, &expected);
    hot.close().await;
}

/// `enqueue_batch` (what the server's append streams use): batches enqueued one after
/// another get offsets in that order, whatever order their answers are awaited in, and one
/// whose answer is never awaited is appended all the same.
#[tokio::test]
async fn enqueued_batches_keep_their_order_whatever_order_they_are_awaited_in() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    let store = d.open(&[]).await;
    let name = TopicName::new("enqueued").unwrap();
    let topic = store.topic(&name).await.unwrap();

    // The first batch's warm write is held: the others queue behind it, in one group or
    // several, while their answers are awaited last to first.
    warm.hold(&name);
    let tags = ["a", "b", "c", "d", "e", "f"];
    let mut pending = Vec::new();
    for (i, tag) in tags.iter().enumerate() {
        pending.push(topic.enqueue_batch(builder(tag, i + 1)).await.unwrap());
        if i == 0 {
            tokio::time::timeout(WAIT, warm.wait_held(1)).await.expect("A's warm write is waiting");
        }
    }
    // C's answer is never awaited.
    drop(pending.remove(2));
    warm.release(&name);
    let mut answers = Vec::new();
    while let Some(p) = pending.pop() {
        answers.push(tokio::time::timeout(WAIT, p).await.expect("answered").unwrap());
    }
    answers.reverse();
    let expected = [(0, "a", 1), (1, "b", 2), (3, "c", 3), (6, "d", 4), (10, "e", 5), (15, "f", 6)];
    let without_c: Vec<OffsetRange> = expected
        .iter()
        .filter(|(_, tag, _)| *tag != "c")
        .map(|&(at, _, n)| OffsetRange::new(at, at + n as u64))
        .collect();
    assert_eq!(answers, without_c, "each batch is answered the offsets of its place in the queue");
    let reader = topic.batch_reader(tier_core::StartPosition::Earliest).await.unwrap();
    let read: Vec<RecordBatch> =
        tokio::time::timeout(WAIT, reader.take(tags.len()).map(|b| b.unwrap().batch).collect())
            .await
            .expect("the six batches are read");
    assert_as_produced("the store's batch reader", &read, &expected);
    store.close().await;
}

/// A rotation inside a group seals a segment holding batches the writer commits only
/// once warm confirms them: the exporter, which skips what is not committed, exports it
/// as soon as the commit point passes it — not at the next sweep (an hour here).
#[tokio::test]
async fn a_segment_sealed_inside_a_group_is_exported_once_the_group_commits() {
    let mut d = Deployment::new(Tiers::HotWarmCold, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    // Every warm write takes a while, so B and C queue behind X and the seal of the
    // segment holding B finishes before warm confirms B.
    warm.set_latency(Duration::from_millis(300));
    d.warm = Some(warm.clone());
    // One batch of ~3 KiB per segment.
    d.hot.segment_bytes = 4096;
    d.router.export_sweep_interval = Duration::from_secs(3600);
    let store = d.try_open(&[], true).await.unwrap();
    let name = TopicName::new("sealed-mid-group").unwrap();
    let topic = store.topic(&name).await.unwrap();
    let calls_before = warm.calls();
    let big = |tag: &str| {
        let mut b = RecordBatchBuilder::new();
        b.push(1_700_000_000_000, None, &[], tag.repeat(3000).as_bytes()).unwrap();
        b
    };

    let x = tokio::spawn({
        let topic = topic.clone();
        let batch = big("x");
        async move { topic.append_batch(batch).await }
    });
    // Wait until X is with warm (its latency running), then queue B and C behind it.
    tokio::time::timeout(WAIT, async {
        while warm.calls() == calls_before {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("X reaches warm");
    let mut b = Box::pin(topic.append_batch(big("b")));
    let mut c = Box::pin(topic.append_batch(big("c")));
    assert!(futures::poll!(&mut b).is_pending());
    assert!(futures::poll!(&mut c).is_pending());
    assert_eq!(x.await.unwrap().unwrap(), OffsetRange::new(0, 1));
    let (b, c) = tokio::time::timeout(WAIT, futures::future::join(b, c)).await.expect("B and C are answered");
    assert_eq!((b.unwrap(), c.unwrap()), (OffsetRange::new(1, 2), OffsetRange::new(2, 3)));

    // [X] and [B] are sealed (C's accept rotated B's segment, inside the group); both
    // reach cold without a sweep.
    let cold = store.cold().unwrap().clone();
    tokio::time::timeout(WAIT, async {
        loop {
            if cold.range(&name).await.unwrap().end >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the segment sealed inside the group is exported once the group commits");
    store.close().await;
}

/// The answers to A, B and C when the disk is lost under a running store of `d` (warm
/// `warm`) on `topic_name`: after a small first batch, A (~1.5 KiB) is appended with its
/// warm write held, the WAL's directory is removed, and B and C (~1.5 KiB each) queue
/// behind A, so they meet in one group. The WAL's open segment (unlinked, still open)
/// takes B, but the segment C needs cannot be created. `before_release` arms warm's faults
/// for the calls after A's. Returns the store (open) and the three answers.
async fn group_meeting_a_lost_disk(
    d: &mut Deployment,
    warm: &Arc<FaultyTier<MemoryTier>>,
    topic_name: &str,
    before_release: impl FnOnce(&FaultyTier<MemoryTier>),
) -> (tier_router::TieredStore, [Result<OffsetRange, tier_core::TierError>; 3]) {
    d.warm = Some(warm.clone());
    // A small batch and two of ~1.5 KiB fit a segment; a third starts a new one.
    d.hot.segment_bytes = 4096;
    let store = d.open(&[]).await;
    let name = TopicName::new(topic_name).unwrap();
    let topic = store.topic(&name).await.unwrap();
    let batch = |tag: &str| {
        let mut b = RecordBatchBuilder::new();
        b.push(1_700_000_000_000, None, &[], tag.repeat(1500).as_bytes()).unwrap();
        b
    };
    // The first segment exists (its creation fsyncs the directory) before the disk goes.
    topic.append_batch(builder("z", 1)).await.unwrap();
    warm.hold(&name);
    let a = tokio::spawn({
        let topic = topic.clone();
        let batch = batch("a");
        async move { topic.append_batch(batch).await }
    });
    tokio::time::timeout(WAIT, warm.wait_held(1)).await.expect("A's warm write is waiting");
    std::fs::remove_dir_all(d.hot_dir()).unwrap();
    let mut b = Box::pin(topic.append_batch(batch("b")));
    let mut c = Box::pin(topic.append_batch(batch("c")));
    assert!(futures::poll!(&mut b).is_pending());
    assert!(futures::poll!(&mut c).is_pending());
    before_release(warm);
    warm.release(&name);
    let a = a.await.unwrap();
    let (b, c) = tokio::time::timeout(WAIT, futures::future::join(b, c)).await.expect("B and C are answered");
    (store, [a, b, c])
}

/// A group the WAL takes only in part (the disk failed at a rotation inside it): each
/// producer is answered by where its own batch is. The batch the WAL stored before the
/// failure is committed — the commit point passes it, a restart serves it and recovery
/// counts it as acknowledged — so its producer is told its offsets, not an error; only
/// the batch the WAL refused is refused. (Found by the lost-disk chaos scenario: a
/// committed batch answered with an error, then reported lost beyond the acknowledged
/// end.)
#[tokio::test]
async fn a_group_the_wal_takes_in_part_acknowledges_the_batches_it_committed() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let (store, [a, b, c]) = group_meeting_a_lost_disk(&mut d, &warm, "partial-group", |_| {}).await;

    assert_eq!(a.unwrap(), OffsetRange::new(1, 2));
    let topic = store.topic("partial-group").await.unwrap();
    assert_eq!(
        topic.ranges().await.unwrap().committed,
        3,
        "the commit point passes B, which the WAL and warm hold"
    );
    assert_eq!(b.unwrap(), OffsetRange::new(2, 3), "B is committed: its producer is told its offsets");
    let c = c.expect_err("the WAL could not store C");
    assert!(c.to_string().contains("[3, 4)"), "C's refusal names C's offsets: {c}");
    store.close().await;
}

/// Under `degrade`, a batch the WAL refused (a rotation inside its group failed) that warm
/// took without confirming it (a `WAIT` that fell short, a lost reply) is not "not
/// written": recovery replays warm into the WAL and commits it. Its producer is told that
/// it may be committed, and the store that reopens serves it at the offsets named. (Found
/// by the simulation once its running disk loss appended.)
#[tokio::test]
async fn a_batch_the_wal_refused_that_warm_may_hold_is_not_called_unwritten() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.router.warm_failure_policy = tier_router::WarmFailurePolicy::Degrade;
    // A and B reach warm; C lands there but its answer is an error.
    let (store, [a, b, c]) = group_meeting_a_lost_disk(&mut d, &warm, "maybe-in-warm", |warm| {
        warm.fail_after_append(true);
        warm.fail_next_after(2, 1);
    })
    .await;

    assert_eq!(a.unwrap(), OffsetRange::new(1, 2));
    assert_eq!(b.unwrap(), OffsetRange::new(2, 3));
    let c = c.expect_err("the WAL could not store C");
    assert_eq!(c.may_commit(), Some(OffsetRange::new(3, 4)), "the outcome is unknown: {c}");
    let c = c.to_string();
    assert!(!c.contains("not written"), "C may be committed from warm, so it is not 'not written': {c}");
    assert!(c.contains("warm may hold them at offsets [3, 4)"), "{c}");
    store.close().await;

    // What the producer was told: recovery commits C from warm at 3.
    warm.clear();
    let store = d.open(&[]).await;
    let topic = store.topic("maybe-in-warm").await.unwrap();
    let reader = topic.reader(tier_core::StartPosition::Offset(3)).await.unwrap();
    let records: Vec<tier_core::Record> =
        tokio::time::timeout(WAIT, reader.take(1).try_collect()).await.expect("C is read").unwrap();
    assert_eq!(records[0].payload.as_ref(), "c".repeat(1500).as_bytes());
    store.close().await;
}

/// A batch the WAL wrote but could not fsync (`fsync = always`) is refused, and its outcome
/// is unknown: the WAL cuts it off the file at once (a failed fsync may leave it in the
/// page cache only, see `docs/hot.md`, "Failed fsyncs"), yet a crash before the cut is
/// durable may leave whatever of it reached the disk. Its producer must not be told "not
/// written … offsets go to the next records written".
#[tokio::test]
async fn a_batch_whose_wal_fsync_failed_is_not_called_unwritten() {
    use tier_hot::faults::{self, FaultPoint};
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.fsync = tier_hot::FsyncPolicy::Always;
    let store = d.open(&[]).await;
    let topic = store.topic("fsync-failed").await.unwrap();
    topic.append_batch(builder("first", 2)).await.unwrap();
    faults::fail_nth(&d.hot_dir(), FaultPoint::Fsync, 1, std::io::ErrorKind::Other);
    let refused = topic.append_batch(builder("unsynced", 3)).await.expect_err("the fsync failed");
    assert_eq!(refused.may_commit(), Some(OffsetRange::new(2, 5)), "the outcome is unknown: {refused}");
    // Appends after it are refused unwritten until the store reopens.
    let after = topic.append_batch(builder("after", 1)).await.expect_err("the WAL is failing");
    assert_eq!(after.may_commit(), None, "{}", after.report());
    faults::clear(&d.hot_dir());
    let refused = refused.to_string();
    assert!(!refused.contains("not written"), "the WAL wrote the records: {refused}");
    assert!(refused.contains("[2, 5)"), "{refused}");
    store.close().await;

    // Reopened in the same boot, the store does not serve the refused batch: it was cut off.
    let store = d.open(&[]).await;
    let topic = store.topic("fsync-failed").await.unwrap();
    let next = topic.append_batch(builder("next", 1)).await.unwrap();
    let reader = topic.reader(tier_core::StartPosition::Offset(2)).await.unwrap();
    let records: Vec<tier_core::Record> =
        tokio::time::timeout(WAIT, reader.take(1).try_collect()).await.expect("read").unwrap();
    assert_eq!((next, records[0].payload.as_ref()), (OffsetRange::new(2, 3), &b"next-0"[..]));
    store.close().await;
}

/// A batch no tier stored (hot only: the WAL could not create the segment it needed, its
/// directory gone) is "not written": its error names no offsets it may be committed at —
/// appending it again cannot store it twice.
#[tokio::test]
async fn a_batch_no_tier_stored_may_not_be_committed() {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.segment_bytes = 4096;
    let store = d.open(&[]).await;
    let topic = store.topic("unwritten").await.unwrap();
    let big = |tag: &str| {
        let mut b = RecordBatchBuilder::new();
        b.push(1_700_000_000_000, None, &[], tag.repeat(1500).as_bytes()).unwrap();
        b
    };
    topic.append_batch(builder("z", 1)).await.unwrap();
    std::fs::remove_dir_all(d.hot_dir()).unwrap();
    // The open segment (unlinked, still open) takes two; the third needs a new one.
    assert_eq!(topic.append_batch(big("a")).await.unwrap(), OffsetRange::new(1, 2));
    assert_eq!(topic.append_batch(big("b")).await.unwrap(), OffsetRange::new(2, 3));
    let c = topic.append_batch(big("c")).await.expect_err("no segment for C");
    assert!(c.to_string().contains("not written"), "{c}");
    assert_eq!(c.may_commit(), None, "{c}");
    store.close().await;
}

/// `NewRecord::batch_capacity` is what `Topic::append` builds its batch in: never less
/// than the batch's encoding, whatever the records hold (keys, headers, the widest
/// timestamp deltas), so the buffer never grows record by record.
#[test]
fn batch_capacity_is_never_less_than_the_encoded_batch() {
    let records = [
        NewRecord::new(0, vec![1u8; 3]),
        NewRecord::new(i64::MIN, Vec::new()).with_key(vec![2u8; 300]),
        NewRecord::new(i64::MAX, vec![5u8; 1 << 16])
            .with_header(vec![3u8; 200], vec![4u8; 70_000])
            .with_header(Vec::new(), Vec::new()),
        NewRecord::new(7, Vec::new()).with_key(Vec::new()),
    ];
    for n in 1..=records.len() {
        let mut builder = RecordBatchBuilder::new();
        for r in &records[..n] {
            builder.push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload).unwrap();
        }
        let capacity = NewRecord::batch_capacity(&records[..n]);
        assert!(capacity >= builder.encoded_len(), "{capacity} < {} for {n} records", builder.encoded_len());
        assert!(capacity <= builder.encoded_len() + 40 * n, "a loose bound wastes memory: {capacity}");
    }
}

/// An append that finds the writer idle is committed in the producer's task; when that
/// has to wait (here warm's write is held) it finishes in a task of its own: a producer
/// that stops waiting neither loses the batch's place nor leaves the writer half-way, and
/// the appends after it, direct or queued, follow it.
#[tokio::test]
async fn an_append_whose_producer_stops_waiting_still_commits_in_order() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    let store = d.open(&[]).await;
    let name = TopicName::new("dropped").unwrap();
    let topic = store.topic(&name).await.unwrap();

    warm.hold(&name);
    {
        let mut first = Box::pin(topic.append_batch(builder("a", 2)));
        tokio::time::timeout(WAIT, async {
            tokio::select! {
                biased;
                _ = first.as_mut() => panic!("A is answered while warm holds its write"),
                () = warm.wait_held(1) => {}
            }
        })
        .await
        .expect("A's warm write is waiting");
        // A's producer stops waiting.
    }
    let second = topic.enqueue_batch(builder("b", 3)).await.unwrap();
    warm.release(&name);
    assert_eq!(
        tokio::time::timeout(WAIT, second).await.expect("answered").unwrap(),
        OffsetRange::new(2, 5),
        "B follows A, whose place was kept"
    );
    let third = tokio::time::timeout(WAIT, topic.append_batch(builder("c", 1))).await.expect("answered");
    assert_eq!(third.unwrap(), OffsetRange::new(5, 6), "an append on an idle writer follows B");
    let reader = topic.batch_reader(tier_core::StartPosition::Earliest).await.unwrap();
    let read: Vec<RecordBatch> =
        tokio::time::timeout(WAIT, reader.take(3).map(|b| b.unwrap().batch).collect())
            .await
            .expect("the three batches are read");
    assert_as_produced("the store's batch reader", &read, &[(0, "a", 2), (2, "b", 3), (5, "c", 1)]);
    store.close().await;
}
