//! The injected wall clock (`HotConfig::clock`): segment creation and seal times come
//! from it, and a clock going backwards neither fails a seal nor makes retention delete
//! a young segment.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{append_records, open, small_config, topic};
use tier_core::clock::{Clock, ManualClock, SharedClock, unix_millis};
use tier_core::segment::SegmentHeader;
use tier_core::{Tier, TierExt};

/// Decades from the real time, so that a time read from the system clock instead of the
/// injected one cannot pass for it.
fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000)
}

#[tokio::test]
async fn creation_and_seal_times_come_from_the_injected_clock_even_going_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start()));
    let mut config = small_config(dir.path());
    config.clock = SharedClock::from(Arc::clone(&clock));
    let tier = open(config).await;
    let t = topic("clocked");

    // The first append creates the segment at `start`; it is sealed 5 minutes later.
    append_records(&tier, &t, 0, 10, 5).await;
    clock.advance(Duration::from_secs(300));
    let first = tier.rotate(&t).await.unwrap().unwrap();
    assert_eq!(first.sealed_at, start() + Duration::from_secs(300), "the seal time is the clock's");
    let header = SegmentHeader::decode(&std::fs::read(&first.path).unwrap()).unwrap().0;
    assert_eq!(header.created_at, unix_millis(start()), "the creation time is the clock's");

    // The clock goes back a day: the next segment (created at the rotation, 5 minutes
    // after `start`) seals "before" the first one, without a complaint.
    clock.rewind(Duration::from_secs(24 * 3600));
    append_records(&tier, &t, 10, 10, 5).await;
    let second = tier.rotate(&t).await.unwrap().unwrap();
    let back = start() + Duration::from_secs(300) - Duration::from_secs(24 * 3600);
    assert_eq!(second.sealed_at, back);
    let header = SegmentHeader::decode(&std::fs::read(&second.path).unwrap()).unwrap().0;
    assert_eq!(header.created_at, unix_millis(start() + Duration::from_secs(300)));

    // Segments stay in offset order, and the timestamp index (record timestamps, not
    // the clock) still answers.
    let sealed = tier.sealed_segments(&t);
    assert_eq!(sealed.iter().map(|s| s.range.start).collect::<Vec<_>>(), vec![0, 10]);
    let records = tier.read(&t, 0, 20, tier_core::ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.len(), 20);
    for r in [&records[3], &records[15]] {
        assert_eq!(tier.offset_for_timestamp(&t, r.timestamp).await.unwrap(), Some(r.offset));
    }
    tier.close().await;
}

/// A sealed segment found on disk at open keeps the seal time the clock gave it (the
/// seal records it as the file's modification time), not the file system's time of the
/// last write, so retention by age after a reopen follows the same clock.
#[tokio::test]
async fn a_reopened_segment_keeps_the_seal_time_of_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start()));
    let mut config = small_config(dir.path());
    config.clock = SharedClock::from(Arc::clone(&clock));
    let tier = open(config.clone()).await;
    let t = topic("reopened");
    append_records(&tier, &t, 0, 10, 5).await;
    clock.advance(Duration::from_secs(300));
    let sealed = tier.rotate(&t).await.unwrap().unwrap();
    append_records(&tier, &t, 10, 5, 5).await;
    tier.close().await;

    clock.advance(Duration::from_secs(7 * 24 * 3600));
    let tier = open(config).await;
    let found = tier.sealed_segments(&t);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].sealed_at, start() + Duration::from_secs(300), "the seal time survives the reopen");
    assert_eq!(found[0].sealed_at, sealed.sealed_at);
    tier.close().await;
}

#[tokio::test]
async fn retention_by_age_deletes_nothing_young_when_the_clock_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start()));
    let mut config = small_config(dir.path());
    config.clock = SharedClock::from(Arc::clone(&clock));
    config.retention_time = Duration::from_secs(3600);
    let tier = open(config).await;
    let t = topic("aging");
    append_records(&tier, &t, 0, 10, 5).await;
    let sealed = tier.rotate(&t).await.unwrap().unwrap();
    append_records(&tier, &t, 10, 5, 5).await;

    // Back two days: the segment was sealed "in the future", so it is young.
    clock.rewind(Duration::from_secs(2 * 24 * 3600));
    assert_eq!(tier.run_retention(clock.now(), &|_| true).unwrap(), vec![]);
    // Forwards again, short of the retention time: still kept.
    clock.set(start() + Duration::from_secs(3599));
    assert_eq!(tier.run_retention(clock.now(), &|_| true).unwrap(), vec![]);
    assert_eq!(tier.sealed_segments(&t), vec![sealed.clone()]);

    // Past the retention time: deleted.
    clock.set(start() + Duration::from_secs(3600));
    assert_eq!(tier.run_retention(clock.now(), &|_| true).unwrap(), vec![sealed.clone()]);
    assert!(!sealed.path.exists());
    assert_eq!(tier.range(&t).await.unwrap(), tier_core::OffsetRange::new(10, 15));
    tier.close().await;
}
