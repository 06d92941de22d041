//! Hot + warm without cold: the WAL deletes a segment once warm holds it, and warm's
//! copy is then the only one. A failover to a replica behind can take batches warm
//! confirmed; the writer learns of it only at its next batch. WAL retention must not
//! delete what warm no longer holds, whatever the writer last knew: it asks warm at each
//! pass (simulation seeds 9001117, 90006350, 91000153, generator 9: 18 acknowledged
//! records gone with their WAL segment, nothing reported).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(feature = "warm")]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{append_range, r, slices};
use tier_core::{StartPosition, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{Source, TieredStore, WarmBackend};
use tier_testkit::MemoryTier;

const T: &str = "t";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_the_segments_warm_lost_in_a_failover() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let mut hot = HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never);
    hot.segment_age = Duration::from_secs(3600);
    let store = TieredStore::builder()
        .hot(hot)
        .background(false)
        .topics([TopicName::new(T).unwrap()])
        .warm(warm.clone() as Arc<dyn WarmBackend>)
        .open()
        .await
        .unwrap();
    let topic = store.topic(T).await.unwrap();
    let name = topic.name().clone();
    append_range(&topic, 0, 100, 10).await;
    store.wal().rotate(&name).await.unwrap();
    append_range(&topic, 100, 200, 10).await;
    store.wal().rotate(&name).await.unwrap();
    assert_eq!(warm.batches(&name).len(), 20, "warm confirmed every batch");

    // A failover to a replica that never got [150, 200): warm holds [0, 150) now.
    assert_eq!(warm.lose_after(&name, 150), r(0, 150));
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 100)], "the segment holding what warm lost stays");
    assert_eq!(store.wal().range(&name).await.unwrap(), r(100, 200));

    // Every acknowledged record is still readable: [0, 150) from warm, the rest from the WAL.
    let mut reader = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    let served = slices(&mut reader, 0, 200).await.unwrap();
    assert_eq!(served, vec![(Source::Warm, r(0, 100)), (Source::Hot, r(100, 200))]);
    drop(reader);
    drop(topic);
    store.close().await;
}
