//! `HotTier::append_group`: the entry of a topic's only writer (the router's), which
//! writes a group of batches in the caller's task with one write (one fsync under
//! `always`), each batch decided as a separate append would be.

use crate::common;

use common::{batch, open, records, small_config, topic, within};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotTier, WriteStats};

/// `count` batches of `per` records (100-byte payloads) from `base`.
fn batches(base: u64, count: usize, per: usize) -> Vec<RecordBatch> {
    let all = records(base, count * per, 100);
    all.chunks(per).map(batch).collect()
}

async fn stats_delta(tier: &HotTier, t: &tier_core::TopicName, before: WriteStats) -> WriteStats {
    let now = tier.write_stats(t).expect("the topic has write stats");
    WriteStats {
        batches: now.batches - before.batches,
        writes: now.writes - before.writes,
        fsyncs: now.fsyncs - before.fsyncs,
    }
}

#[tokio::test]
async fn a_group_is_one_write_and_one_fsync_and_every_batch_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("group");
    // The topic's first segment exists before the group, as in the router's steady state.
    tier.append(&t, batches(0, 1, 5).remove(0)).await.unwrap();
    let before = tier.write_stats(&t).unwrap();
    let mut sub = tier.subscribe(&t, 5).unwrap();

    let group = batches(5, 3, 4);
    let (held, result) = tier.append_group(&t, group.clone()).await;
    assert_eq!((held, result.map_err(|e| e.to_string())), (3, Ok(())));
    assert_eq!(
        stats_delta(&tier, &t, before).await,
        WriteStats { batches: 3, writes: 1, fsyncs: 1 },
        "three batches, one write, one fsync"
    );
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 17));
    let stored = tier.read_batches(&t, 5, 17, usize::MAX).await.unwrap();
    assert_eq!(stored, group, "each batch stored as given");
    for expected in records(5, 12, 100) {
        let got = within("the live tail", sub.next()).await.unwrap();
        assert_eq!(got, expected);
    }
    tier.close().await;

    // Durable: a reopened tier holds the group.
    let tier = open(small_config(dir.path())).await;
    assert_eq!(tier.read_batches(&t, 5, 17, usize::MAX).await.unwrap(), group);
    tier.close().await;
}

#[tokio::test]
async fn a_group_is_checked_batch_by_batch_like_separate_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.fsync = FsyncPolicy::Never;
    let tier = open(config).await;
    let t = topic("checks");
    let first = batches(0, 2, 5);
    assert_eq!(tier.append_group(&t, first.clone()).await.0, 2);

    // An identical retry of what is held, then new batches: all held, only the new written.
    let next = batches(10, 2, 5);
    let retry: Vec<RecordBatch> = first.iter().cloned().chain(next.iter().cloned()).collect();
    let (held, result) = tier.append_group(&t, retry).await;
    assert_eq!((held, result.is_ok()), (4, true));
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 20));

    // A different batch where one is held: Fenced, nothing counted as held.
    let other = batch(&records(15, 5, 7));
    let (held, result) = tier.append_group(&t, vec![other]).await;
    assert_eq!(held, 0);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Fenced);

    // A batch past the end: InvalidInput after the ones before it are held.
    let ok = batches(20, 1, 5);
    let gap = batches(30, 1, 5);
    let (held, result) = tier.append_group(&t, ok.into_iter().chain(gap).collect()).await;
    assert_eq!(held, 1);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 25));

    // A batch whose records would pass u64::MAX is refused before anything is written,
    // the batches before it are held.
    let ok = batches(25, 1, 5);
    let past = batch(&records(0, 2, 10)).with_base_offset(u64::MAX - 1);
    let (held, result) = tier.append_group(&t, ok.into_iter().chain([past]).collect()).await;
    assert_eq!(held, 1);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 30));
    let all = tier.read(&t, 0, 30, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all.len(), 30);
    // An empty group is nothing, and creates no topic.
    assert_eq!(tier.append_group(&topic("none"), Vec::new()).await.0, 0);
    assert!(!tier.topics().contains(&topic("none")));
    tier.close().await;
}

#[tokio::test]
async fn a_group_larger_than_a_segment_rotates_in_between() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.segment_bytes = 4096;
    let tier = open(config).await;
    let t = topic("rotating");
    // 24 batches of 4 records with 100-byte payloads (about 490 bytes each): about
    // 11.5 KiB, over three segments of 4 KiB.
    let group = batches(0, 24, 4);
    let (held, result) = tier.append_group(&t, group.clone()).await;
    assert_eq!((held, result.is_ok()), (24, true));
    // Seals finish in the background; `rotate` seals the last segment and waits for all.
    tier.rotate(&t).await.unwrap();
    let ranges: Vec<_> = tier.sealed_segments(&t).iter().map(|s| s.range).collect();
    assert!(ranges.len() >= 3, "{ranges:?}");
    assert_eq!((ranges[0].start, ranges[ranges.len() - 1].end), (0, 96), "{ranges:?}");
    assert!(ranges.windows(2).all(|w| w[0].end == w[1].start), "{ranges:?}");
    assert_eq!(tier.read_batches(&t, 0, 96, usize::MAX).await.unwrap(), group);
    tier.close().await;
}

/// A group that starts a segment starts its age clock: the writer task, which rotates by
/// age, learns of it although the group never passed through it.
#[tokio::test(start_paused = true)]
async fn a_segment_a_group_starts_is_rotated_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.segment_age = std::time::Duration::from_secs(5);
    let tier = open(config).await;
    let mut events = tier.segment_events();
    let t = topic("aging");
    let (held, result) = tier.append_group(&t, batches(0, 3, 4)).await;
    assert_eq!((held, result.is_ok()), (3, true));
    // Simulated time: the deadline passes at once unless nothing waits for it.
    let sealed = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            if let Ok(tier_hot::SegmentEvent::Sealed(info)) = events.recv().await {
                break info;
            }
        }
    })
    .await
    .expect("the segment the group started was rotated by age");
    assert_eq!(sealed.range, OffsetRange::new(0, 12));
    // The writer task rotated that one itself; the next segment is started by a group
    // again, while the task already waits with no deadline.
    let (held, result) = tier.append_group(&t, batches(12, 2, 4)).await;
    assert_eq!((held, result.is_ok()), (2, true));
    let sealed = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            if let Ok(tier_hot::SegmentEvent::Sealed(info)) = events.recv().await {
                break info;
            }
        }
    })
    .await
    .expect("the next segment a group started was rotated by age too");
    assert_eq!(sealed.range, OffsetRange::new(12, 20));
    tier.close().await;
}
