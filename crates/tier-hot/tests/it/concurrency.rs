//! Concurrent producers (group commit) and readers during appends and rotation.

use crate::common;

use std::sync::Arc;

use common::{batch, open, small_config, topic};
use tier_core::{OffsetRange, ReadLimit, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_testkit::conformance::sample_records;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_appends_are_group_committed_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(HotConfig::new(dir.path())).await;
    let t = topic("group");
    let records = sample_records(0, 400, 1);
    // Poll every append once, in order, so all are queued (in offset order) while the
    // writer is busy with the first group; then wait for all of them. Unconstrained, so
    // tokio's cooperative budget cannot make a queueing poll return early.
    let pending = tokio::task::unconstrained(async {
        let mut pending = Vec::new();
        for chunk in records.chunks(2) {
            let mut append = Box::pin(tier.append(&t, batch(chunk)));
            match futures::poll!(append.as_mut()) {
                std::task::Poll::Ready(result) => result.unwrap(),
                std::task::Poll::Pending => pending.push(append),
            }
        }
        pending
    })
    .await;
    assert!(pending.len() > 100, "appends were queued, not done one by one");
    for result in futures::future::join_all(pending).await {
        result.unwrap();
    }
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 400));
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    let stats = tier.write_stats(&t).unwrap();
    assert_eq!(stats.batches, 200);
    assert_eq!(stats.fsyncs, stats.writes, "policy always: one fsync per group write");
    assert!(stats.writes * 4 < stats.batches, "queued appends shared writes and fsyncs: {stats:?}");
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_a_growing_prefix_during_appends_and_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path()).with_fsync(FsyncPolicy::Never);
    config.cache_bytes = 4096;
    let tier = Arc::new(open(config).await);
    let t = topic("busy");
    let records = Arc::new(sample_records(0, 900, 2));
    let writer = {
        let (tier, t, records) = (Arc::clone(&tier), t.clone(), Arc::clone(&records));
        tokio::spawn(async move {
            for (i, chunk) in records.chunks(3).enumerate() {
                tier.append(&t, batch(chunk)).await.unwrap();
                if i % 25 == 24 {
                    tier.rotate(&t).await.unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|id| {
            let (tier, t, records) = (Arc::clone(&tier), t.clone(), Arc::clone(&records));
            tokio::spawn(async move {
                let mut seen = 0;
                let mut reads = 0;
                while seen < records.len() {
                    let from = (seen / 2) as u64;
                    let got = tier.read(&t, from, u64::MAX, ReadLimit::unbounded()).await.unwrap();
                    let end = from as usize + got.len();
                    assert_eq!(got, records[from as usize..end], "reader {id} read {reads}");
                    assert!(
                        end.is_multiple_of(3) || end == records.len(),
                        "reader {id}: {end} is a batch boundary"
                    );
                    assert!(end >= seen, "reader {id}: went back from {seen} to {end}");
                    if let Some(last) = got.last() {
                        let ts = tier.offset_for_timestamp(&t, last.timestamp).await.unwrap();
                        assert_eq!(ts, Some(last.offset));
                    }
                    seen = end;
                    reads += 1;
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    writer.await.unwrap();
    for r in readers {
        r.await.unwrap();
    }
    assert!(tier.sealed_segments(&t).len() >= 10);
    tier.close().await;
}
