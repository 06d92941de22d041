//! One damaged topic is kept aside at open; every other topic opens and serves.

// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::{append_records, open, small_config, topic};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierError, TierExt};
use tier_hot::HotTier;
use tier_testkit::conformance::{batch_of, sample_records};

/// Asserts that `err` is the damaged topic's answer: `Corruption` naming `path`.
fn assert_damaged(err: &TierError, path: &std::path::Path, what: &str) {
    assert_eq!(err.kind(), ErrorKind::Corruption, "{what}: {err}");
    let location = err.context().location.clone().unwrap_or_default();
    assert!(
        location.starts_with(&format!("{}@", path.display())),
        "{what} names the file and position: {err}"
    );
    assert!(err.to_string().contains("not opened"), "{what}: {err}");
}

#[tokio::test]
async fn a_damaged_sealed_segment_isolates_its_topic_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let (a, b) = (topic("a"), topic("b"));
    let mut sealed_a = Vec::new();
    for base in [0u64, 10, 20] {
        append_records(&tier, &a, base, 10, 5).await;
        sealed_a.push(tier.rotate(&a).await.unwrap().unwrap());
    }
    let b_records = append_records(&tier, &b, 0, 30, 5).await;
    tier.rotate(&b).await.unwrap().unwrap();
    tier.close().await;

    // One flipped byte in the footer of a's middle sealed segment.
    let damaged = &sealed_a[1].path;
    let original = std::fs::read(damaged).unwrap();
    let mut bytes = original.clone();
    let at = bytes.len() - 20;
    bytes[at] ^= 0xFF;
    std::fs::write(damaged, &bytes).unwrap();
    let listing = |topic: &str| {
        let mut files: Vec<_> = std::fs::read_dir(dir.path().join(topic))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.metadata().unwrap().len())
            })
            .collect();
        files.sort();
        files
    };
    let a_files = listing("a");

    let tier = HotTier::open(config.clone()).await.expect("one damaged topic does not fail the open");
    assert_eq!(tier.topics(), vec![b.clone()], "only the healthy topic is served");
    let damaged_list = tier.damaged();
    assert_eq!(damaged_list.len(), 1, "{damaged_list:?}");
    assert_eq!(damaged_list[0].0, a);
    assert_damaged(&damaged_list[0].1, damaged, "damaged()");

    // b serves reads and appends.
    assert_eq!(tier.range(&b).await.unwrap(), OffsetRange::new(0, 30));
    assert_eq!(tier.read(&b, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), b_records);
    let more = append_records(&tier, &b, 30, 5, 5).await;
    assert_eq!(tier.read(&b, 30, u64::MAX, ReadLimit::unbounded()).await.unwrap(), more);
    assert!(tier.rotate(&b).await.unwrap().is_some());

    // a answers its corruption to everything, and never looks like an empty topic.
    assert_damaged(&tier.range(&a).await.unwrap_err(), damaged, "range");
    let append = tier.append(&a, batch_of(&sample_records(0, 1, 9))).await.unwrap_err();
    assert_damaged(&append, damaged, "an append at 0");
    let append = tier.append(&a, batch_of(&sample_records(30, 1, 9))).await.unwrap_err();
    assert_damaged(&append, damaged, "an append at the old end");
    for from in [0, 15, 29, 100] {
        let read = tier.read(&a, from, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
        assert_damaged(&read, damaged, "read");
        let batches = tier.read_batches(&a, from, u64::MAX, usize::MAX).await.unwrap_err();
        assert_damaged(&batches, damaged, "read_batches");
    }
    let by_time = tier.offset_for_timestamp(&a, 0).await.unwrap_err();
    assert_damaged(&by_time, damaged, "offset_for_timestamp");
    assert_damaged(&tier.rotate(&a).await.unwrap_err(), damaged, "rotate");
    assert_damaged(&tier.skip_to(&a, 100).await.unwrap_err(), damaged, "skip_to");
    assert_damaged(&tier.subscribe(&a, 0).err().unwrap(), damaged, "subscribe");
    assert!(tier.sealed_segments(&a).is_empty());
    assert_eq!(tier.write_stats(&a), None);

    // Retention runs for b only and leaves a's files as they were.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(365 * 24 * 3600);
    let deleted = tier.run_retention(later, &|_| true).unwrap();
    assert!(!deleted.is_empty() && deleted.iter().all(|s| s.topic == b), "{deleted:?}");
    tier.close().await;
    assert_eq!(listing("a"), a_files, "nothing touched the damaged topic's files");

    // Repaired, the topic opens again with every record.
    std::fs::write(damaged, &original).unwrap();
    let tier = open(config).await;
    assert!(tier.damaged().is_empty());
    assert_eq!(tier.range(&a).await.unwrap(), OffsetRange::new(0, 30));
    let mut sub = tier.subscribe(&a, 29).unwrap();
    assert_eq!(sub.next().await.unwrap().offset, 29);
    tier.close().await;
}

/// A topic whose WAL another owner's log superseded is discarded whole: its files go,
/// the other topics keep theirs, and the next append starts the topic afresh at the offset
/// it names. The owner epoch marker survives a reopen and goes with the discard.
#[tokio::test]
async fn a_discarded_topic_loses_its_files_and_its_owner_epoch_and_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let (a, b) = (topic("a"), topic("b"));
    append_records(&tier, &a, 0, 40, 4).await;
    append_records(&tier, &b, 0, 10, 5).await;
    tier.record_owner_epoch(&a, 7).unwrap();
    tier.close().await;

    let tier = open(config.clone()).await;
    assert_eq!(tier.owner_epoch(&a).unwrap(), Some(7), "the epoch survives a reopen");
    assert_eq!(tier.owner_epoch(&b).unwrap(), None);
    assert_eq!(tier.range(&a).await.unwrap(), OffsetRange::new(0, 40));
    tier.discard_topic(&a).await.unwrap();
    assert!(!dir.path().join("a").exists(), "the topic's directory is gone");
    assert_eq!(tier.owner_epoch(&a).unwrap(), None);
    assert_eq!(tier.range(&b).await.unwrap(), OffsetRange::new(0, 10), "the other topic keeps its log");
    let fresh = batch_of(&sample_records(3, 2, 42));
    tier.append(&a, fresh).await.expect("the next append starts it afresh");
    assert_eq!(tier.range(&a).await.unwrap(), OffsetRange::new(3, 5));
    tier.close().await;

    let tier = open(config).await;
    assert_eq!(tier.range(&a).await.unwrap(), OffsetRange::new(3, 5));
    assert!(
        std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".discarded"))
    );
    tier.close().await;
}
