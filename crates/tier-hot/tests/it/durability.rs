//! Durability tracking (feature `fault-injection`): what a simulated power cut may cut
//! back to. Under `always` every acknowledged append is recorded durable; under `never`
//! no append is until a seal fsyncs the sealed file; the next active segment the seal also
//! fsyncs is not recorded (appends race with that fsync).

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{append_records, open, small_config, topic};
use tier_hot::{FsyncPolicy, faults, layout::segment_file_name};

fn len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[tokio::test]
async fn always_records_every_acknowledged_append_as_durable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("hot");
    faults::track_durability(&data);
    let tier = open(small_config(&data)).await;
    let t = topic("t");
    append_records(&tier, &t, 0, 10, 5).await;
    let active = data.join("t").join(segment_file_name(0));
    let durable = faults::durable_lengths(&data);
    assert_eq!(durable.get(&active), Some(&len(&active)), "{durable:?}");
    tier.close().await;
    faults::untrack_durability(&data);
    assert!(faults::durable_lengths(&data).is_empty());
}

#[tokio::test]
async fn never_records_only_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("hot");
    faults::track_durability(&data);
    let tier = open(small_config(&data).with_fsync(FsyncPolicy::Never)).await;
    let t = topic("t");
    append_records(&tier, &t, 0, 10, 5).await;
    let first = data.join("t").join(segment_file_name(0));
    // At most the header, fsynced when the topic's first segment was created.
    let header = faults::durable_lengths(&data).get(&first).copied().unwrap_or(0);
    assert!(header < len(&first), "no append is fsynced under `never` ({header} of {} bytes)", len(&first));
    tier.rotate(&t).await.unwrap();
    append_records(&tier, &t, 10, 4, 4).await;
    let durable = faults::durable_lengths(&data);
    assert_eq!(durable.get(&first), Some(&len(&first)), "the sealed file is durable whole: {durable:?}");
    let next = data.join("t").join(segment_file_name(10));
    // The seal's fsync of the next segment records only its header: the appends into it
    // race with that fsync.
    let header_len =
        tier_core::segment::SegmentHeader::decode(&std::fs::read(&next).unwrap()).unwrap().1 as u64;
    assert_eq!(durable.get(&next), Some(&header_len), "only the next segment's header: {durable:?}");
    assert!(header_len < len(&next), "appends followed the header");
    tier.close().await;
    faults::untrack_durability(&data);
}
