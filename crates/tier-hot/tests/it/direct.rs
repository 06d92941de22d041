//! Direct appends (an idle writer's work done in the producer's task): records,
//! readers, subscribers and age rotation see them exactly as queued ones.

use crate::common;

use std::time::Duration;

use common::{append_records, open, topic};
use tier_core::{OffsetRange, ReadLimit, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotConfig, SegmentEvent, WriteStats};

#[tokio::test(start_paused = true)]
async fn sequential_appends_are_written_one_by_one_and_still_rotate_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = HotConfig::new(dir.path()).with_fsync(FsyncPolicy::Never);
    config.segment_age = Duration::from_secs(600);
    let tier = open(config).await;
    let t = topic("direct");
    let mut events = tier.segment_events();
    let mut sub = tier.subscribe(&t, 0).unwrap();
    // The first batch of a segment goes through the writer task (it starts the age
    // clock); the next ones find the writer idle and are written directly.
    let records = append_records(&tier, &t, 0, 40, 4).await;
    assert_eq!(tier.write_stats(&t).unwrap(), WriteStats { batches: 10, writes: 10, fsyncs: 0 });
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 40));
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    for expected in &records {
        let got = tokio::time::timeout(Duration::from_secs(1), sub.next()).await.unwrap().unwrap();
        assert_eq!(&got, expected);
    }

    // Age rotation counts from the segment's first batch, whatever path the later
    // ones took.
    tokio::time::advance(Duration::from_secs(599)).await;
    tokio::task::yield_now().await;
    assert!(tier.sealed_segments(&t).is_empty(), "not old enough yet");
    tokio::time::advance(Duration::from_secs(2)).await;
    let event = tokio::time::timeout(Duration::from_secs(1), events.recv()).await.unwrap().unwrap();
    let SegmentEvent::Sealed(info) = event else { panic!("unexpected {event:?}") };
    assert_eq!(info.range, OffsetRange::new(0, 40));

    // The next segment starts the same way, and reads span both.
    let more = append_records(&tier, &t, 40, 20, 5).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 60));
    let all = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all.len(), 60);
    assert_eq!(&all[40..], &more[..]);
    tokio::time::advance(Duration::from_secs(601)).await;
    let event = tokio::time::timeout(Duration::from_secs(1), events.recv()).await.unwrap().unwrap();
    let SegmentEvent::Sealed(info) = event else { panic!("unexpected {event:?}") };
    assert_eq!(info.range, OffsetRange::new(40, 60), "the second segment aged out too");
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_append_checks_offsets_like_a_queued_one() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(HotConfig::new(dir.path()).with_fsync(FsyncPolicy::Never)).await;
    let t = topic("checks");
    let records = append_records(&tier, &t, 0, 10, 5).await;
    // A gap is refused, an identical retry accepted, a different batch fenced.
    let ahead = tier_testkit::conformance::sample_records(20, 5, 1);
    let err = tier.append(&t, tier_testkit::conformance::batch_of(&ahead)).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::InvalidInput);
    tier.append(&t, tier_testkit::conformance::batch_of(&records[5..])).await.unwrap();
    let other = tier_testkit::conformance::sample_records(5, 5, 99);
    let err = tier.append(&t, tier_testkit::conformance::batch_of(&other)).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::Fenced);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    tier.close().await;
}
