//! Rotation by size, by age (also on an idle topic) and on demand, with the events it
//! emits and reads across the segments it makes.

use crate::common;

use std::time::Duration;

use common::{append_records, open, small_config, topic};
use tier_core::{OffsetRange, ReadLimit, Tier, TierExt};
use tier_hot::{HotConfig, SegmentEvent, layout::segment_file_name};

#[tokio::test]
async fn size_rotation_keeps_segments_under_the_limit_and_reads_span_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("sized");
    let mut events = tier.segment_events();
    let records = append_records(&tier, &t, 0, 600, 5).await;

    let sealed = tier.sealed_segments(&t);
    assert!(sealed.len() >= 3, "600 records of up to 4 KiB rotate 64 KiB segments: {sealed:?}");
    let mut next = 0;
    for s in &sealed {
        assert_eq!(s.range.start, next, "sealed segments are contiguous");
        next = s.range.end;
        assert_eq!(s.path, dir.path().join("sized").join(segment_file_name(s.range.start)));
        assert_eq!(std::fs::metadata(&s.path).unwrap().len(), s.bytes);
        // Data stays within segment_bytes (the footer comes on top).
        assert!(s.bytes < config.segment_bytes + 4096, "{s:?}");
        match events.try_recv().unwrap() {
            SegmentEvent::Sealed(info) => assert_eq!(&info, s),
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 600));
    let all = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all, records);
    // A read starting inside a middle segment, crossing into the next ones.
    let from = sealed[1].range.start + 3;
    let got = tier.read(&t, from, from + 200, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got, records[from as usize..from as usize + 200]);
    tier.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_topic_rotates_by_age_without_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = HotConfig::new(dir.path());
    config.segment_age = Duration::from_secs(600);
    let tier = open(config).await;
    let t = topic("aged");
    let mut events = tier.segment_events();
    append_records(&tier, &t, 0, 10, 10).await;

    tokio::time::advance(Duration::from_secs(599)).await;
    tokio::task::yield_now().await;
    assert!(tier.sealed_segments(&t).is_empty(), "not old enough yet");

    tokio::time::advance(Duration::from_secs(2)).await;
    let event = tokio::time::timeout(Duration::from_secs(1), events.recv()).await.unwrap().unwrap();
    let SegmentEvent::Sealed(info) = event else { panic!("unexpected {event:?}") };
    assert_eq!(info.range, OffsetRange::new(0, 10));
    assert_eq!(tier.sealed_segments(&t), vec![info]);

    // The new active segment is empty: no further rotation however long it idles.
    tokio::time::advance(Duration::from_secs(3600)).await;
    tokio::task::yield_now().await;
    assert_eq!(tier.sealed_segments(&t).len(), 1);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 10));
    append_records(&tier, &t, 10, 5, 5).await;
    assert_eq!(tier.read(&t, 8, 20, ReadLimit::unbounded()).await.unwrap().len(), 7);
    tier.close().await;
}

#[tokio::test]
async fn rotate_on_demand_seals_only_a_segment_with_records() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(HotConfig::new(dir.path())).await;
    let t = topic("manual");
    assert_eq!(tier.rotate(&t).await.unwrap(), None, "unknown topic");
    let records = append_records(&tier, &t, 0, 7, 3).await;
    let info = tier.rotate(&t).await.unwrap().expect("a segment with records is sealed");
    assert_eq!(info.range, OffsetRange::new(0, 7));
    assert_eq!((info.min_timestamp, info.max_timestamp), (1000, 1060));
    assert_eq!(tier.rotate(&t).await.unwrap(), None, "the new active segment is empty");
    assert_eq!(tier.read(&t, 0, 7, ReadLimit::unbounded()).await.unwrap(), records);
    assert_eq!(tier.offset_for_timestamp(&t, 1031).await.unwrap(), Some(4));
    tier.close().await;
}
