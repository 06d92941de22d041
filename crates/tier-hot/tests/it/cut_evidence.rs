//! The evidence that opening the WAL cut a topic's log back outlives the open that made
//! the cut: a cut drops bytes, and what they held can only be judged by the router's
//! recovery (against its reservation and the other tiers). If that recovery fails (warm
//! unreachable, a crash) the next open finds a shorter log that looks whole; unless the
//! cut is remembered, the router takes the WAL's end as exact and hands the cut offsets
//! out again, or never reports them. The WAL keeps a durable `cut` marker, written before
//! the first byte is dropped, until the router says it recorded the cut
//! (`HotTier::cut_recorded`).

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{batch, records, small_config, topic};
use tier_core::{Offset, OffsetRange, Tier, TopicName};
use tier_hot::{FsyncPolicy, HotConfig, HotTier, layout::segment_file_name};

fn seg(dir: &Path, t: &TopicName, base: Offset) -> PathBuf {
    dir.join(t.as_str()).join(segment_file_name(base))
}

fn never(dir: &Path) -> HotConfig {
    small_config(dir).with_fsync(FsyncPolicy::Never)
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Records 0..10 closed cleanly, then 10..20 appended and the file cut inside them (the
/// power cut of an unsynced tail under `never`).
async fn torn_tail(dir: &Path, t: &TopicName) {
    let tier = HotTier::open(never(dir)).await.unwrap();
    tier.append(t, batch(&records(0, 10, 100))).await.unwrap();
    tier.close().await;
    let path = seg(dir, t, 0);
    let durable = len(&path);
    let tier = HotTier::open(never(dir)).await.unwrap();
    tier.append(t, batch(&records(10, 10, 100))).await.unwrap();
    tier.close().await;
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(durable + 40).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_made_at_open_is_reported_by_every_open_until_it_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("t");
    torn_tail(dir.path(), &t).await;

    let tier = HotTier::open(never(dir.path())).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    assert!(tier.cut_back_at_open(&t), "the open cut the torn tail");
    // The router's recovery fails here (say warm is unreachable): nothing records the cut.
    tier.close().await;

    let tier = HotTier::open(never(dir.path())).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    assert!(tier.cut_back_at_open(&t), "the cut is reported until the router records it");
    tier.cut_recorded(&t).unwrap();
    assert!(!tier.cut_back_at_open(&t), "recorded: no longer reported");
    tier.close().await;

    let tier = HotTier::open(never(dir.path())).await.unwrap();
    assert!(!tier.cut_back_at_open(&t), "a recorded cut is not reported again");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    tier.close().await;
}

/// A first segment that lost every batch (a power cut left its header alone) is removed,
/// and the topic starts at the next segment: the offsets it held are gone, which is a
/// cut like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_segment_that_lost_every_batch_is_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    let t = topic("t");
    let tier = HotTier::open(never(dir.path())).await.unwrap();
    let created = len(&{
        tier.append(&t, batch(&records(0, 1, 10))).await.unwrap();
        seg(dir.path(), &t, 0)
    });
    tier.append(&t, batch(&records(1, 9, 100))).await.unwrap();
    tier.rotate(&t).await.unwrap();
    tier.append(&t, batch(&records(10, 5, 100))).await.unwrap();
    tier.close().await;
    // The header alone: the length the file had before its first batch.
    let header = created - u64::try_from(batch(&records(0, 1, 10)).encoded_len()).unwrap();
    std::fs::OpenOptions::new().write(true).open(seg(dir.path(), &t, 0)).unwrap().set_len(header).unwrap();

    let tier = HotTier::open(never(dir.path())).await.unwrap();
    assert_eq!(
        tier.range(&t).await.unwrap(),
        OffsetRange::new(10, 15),
        "the topic starts at the next segment"
    );
    assert!(tier.cut_back_at_open(&t), "offsets 0..10 went with the first segment's batches");
    tier.close().await;
    let tier = HotTier::open(never(dir.path())).await.unwrap();
    assert!(tier.cut_back_at_open(&t), "and the next open still says so");
    tier.close().await;
}
