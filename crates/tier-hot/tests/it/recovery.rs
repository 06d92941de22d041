//! Recovery on open: torn tails at random positions, reopen continuing offsets (also
//! after retention emptied the topic), corrupt sealed segments and the refuse policy.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::{fs::OpenOptions, io::Write, time::SystemTime};

use common::{append_records, batch, open, open_damaged, small_config, topic};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierError, TierExt};
use tier_hot::{HotConfig, RecoveryPolicy, layout::segment_file_name};
use tier_testkit::conformance::sample_records;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// The boundaries (end offsets and end byte positions) of the batches of the active
/// segment, as written: header then batches back to back.
fn active_path(dir: &std::path::Path, t: &str, base: u64) -> std::path::PathBuf {
    dir.join(t).join(segment_file_name(base))
}

#[test]
fn truncating_the_active_file_anywhere_keeps_exactly_the_whole_batches_before_the_cut() {
    let rt = runtime();
    let mut runner = TestRunner::new_with_rng(
        Config { cases: 24, ..Config::default() },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    runner
        .run(&(0.0f64..1.0), |fraction| {
            rt.block_on(async {
                let dir = tempfile::tempdir().unwrap();
                let config = HotConfig::new(dir.path());
                let tier = open(config.clone()).await;
                let t = topic("torn");
                // Batches of 1..=4 records; remember where each ends in the file.
                let records = sample_records(0, 40, 3);
                let path = active_path(dir.path(), "torn", 0);
                let mut ends = vec![(0u64, std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0))];
                let mut at = 0;
                for size in [1usize, 4, 2, 3].iter().cycle() {
                    if at >= records.len() {
                        break;
                    }
                    let chunk = &records[at..(at + size).min(records.len())];
                    tier.append(&t, batch(chunk)).await.unwrap();
                    at += chunk.len();
                    ends.push((at as u64, std::fs::metadata(&path).unwrap().len()));
                }
                tier.close().await;
                let header_len = ends[1].1 - batch(&records[..1]).encoded_len() as u64;
                ends[0].1 = header_len;
                let full = ends.last().unwrap().1;
                let cut = header_len + ((full - header_len) as f64 * fraction) as u64;
                OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();

                let tier = open(config).await;
                let kept = ends.iter().rev().find(|(_, end)| *end <= cut).unwrap().0;
                assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, kept), "cut at {cut}");
                let got = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
                assert_eq!(got, records[..kept as usize]);
                assert_eq!(
                    std::fs::metadata(&path).unwrap().len(),
                    ends.iter().find(|e| e.0 == kept).unwrap().1
                );
                // The next append continues exactly after the last valid record.
                let more = sample_records(kept, 2, 9);
                tier.append(&t, batch(&more)).await.unwrap();
                let again = tier.read(&t, kept, u64::MAX, ReadLimit::unbounded()).await.unwrap();
                assert_eq!(again, more);
                let err = tier.append(&t, batch(&sample_records(kept + 5, 1, 9))).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::InvalidInput);
                tier.close().await;
            });
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn garbage_after_the_last_batch_is_truncated_or_refused_by_policy() {
    let dir = tempfile::tempdir().unwrap();
    let config = HotConfig::new(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("garbage");
    let records = append_records(&tier, &t, 0, 5, 5).await;
    tier.close().await;
    let path = active_path(dir.path(), "garbage", 0);
    let good_len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new().append(true).open(&path).unwrap().write_all(&[0xAB; 37]).unwrap();

    let mut refuse = config.clone();
    refuse.recovery = RecoveryPolicy::Refuse;
    let err = open_damaged(refuse, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let location = err.context().location.clone().unwrap();
    let (file, position) = location.rsplit_once('@').unwrap();
    assert_eq!(file, path.display().to_string(), "{err}");
    let position: u64 = position.parse().unwrap();
    assert!((good_len..good_len + 37).contains(&position), "the position is in the garbage: {err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len + 37, "refuse leaves the file alone");

    let tier = open(config).await;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
    assert_eq!(tier.read(&t, 0, 10, ReadLimit::unbounded()).await.unwrap(), records);
    tier.close().await;
}

#[tokio::test]
async fn reopen_continues_offsets_also_after_retention_deleted_every_sealed_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("continue");
    let records = append_records(&tier, &t, 0, 300, 10).await;
    tier.rotate(&t).await.unwrap();
    tier.close().await;

    let tier = open(config.clone()).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 300));
    assert_eq!(tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap(), records);
    let far_future = SystemTime::now() + std::time::Duration::from_secs(100 * 24 * 3600);
    let deleted = tier.run_retention(far_future, &|_| true).unwrap();
    assert!(deleted.len() >= 2, "{deleted:?}");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(300));
    tier.close().await;

    let tier = open(config).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(300), "offsets never reset");
    let err = tier.read(&t, 0, 10, ReadLimit::unbounded()).await.unwrap_err();
    assert!(matches!(err, TierError::Trimmed { held, .. } if held == OffsetRange::empty_at(300)));
    let more = append_records(&tier, &t, 300, 3, 3).await;
    assert_eq!(tier.read(&t, 300, 400, ReadLimit::unbounded()).await.unwrap(), more);
    tier.close().await;
}

#[tokio::test]
async fn an_empty_topic_taking_over_at_a_larger_offset_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("takeover");
    append_records(&tier, &t, 0, 20, 10).await;
    tier.rotate(&t).await.unwrap();
    tier.run_retention(SystemTime::now() + std::time::Duration::from_secs(1 << 30), &|_| true).unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(20));
    let rec = append_records(&tier, &t, 500, 4, 4).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(500, 504));
    tier.close().await;
    let tier = open(config).await;
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(500, 504));
    assert_eq!(tier.read(&t, 500, 600, ReadLimit::unbounded()).await.unwrap(), rec);
    tier.close().await;
}

#[tokio::test]
async fn a_corrupt_sealed_segment_is_corruption_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("corrupt");
    append_records(&tier, &t, 0, 100, 10).await;
    let sealed = tier.rotate(&t).await.unwrap().unwrap();
    tier.close().await;

    // A flipped byte in a batch: opening checks only the footer, reading finds it.
    let mut bytes = std::fs::read(&sealed.path).unwrap();
    let data_byte = 500;
    bytes[data_byte] ^= 0xFF;
    std::fs::write(&sealed.path, &bytes).unwrap();
    let tier = open(config.clone()).await;
    let err = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let location = err.context().location.clone().unwrap();
    assert!(location.starts_with(&format!("{}@", sealed.path.display())), "{err}");
    assert_eq!(err.context().topic.as_ref(), Some(&t));
    tier.close().await;

    // A flipped byte in the trailer: opening fails, naming the file.
    bytes[data_byte] ^= 0xFF;
    let last = bytes.len() - 20;
    bytes[last] ^= 0xFF;
    std::fs::write(&sealed.path, &bytes).unwrap();
    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(&sealed.path.display().to_string()), "{err}");
}

#[tokio::test]
async fn a_gap_between_segment_files_is_corruption_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let tier = open(config.clone()).await;
    let t = topic("gap");
    append_records(&tier, &t, 0, 10, 5).await;
    let first = tier.rotate(&t).await.unwrap().unwrap();
    append_records(&tier, &t, 10, 10, 5).await;
    let second = tier.rotate(&t).await.unwrap().unwrap();
    append_records(&tier, &t, 20, 10, 5).await;
    tier.rotate(&t).await.unwrap().unwrap();
    tier.close().await;
    std::fs::remove_file(&second.path).unwrap();

    let err = open_damaged(config, &t).await;
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let msg = err.to_string();
    assert!(msg.contains(&first.path.display().to_string()) && msg.contains("starts at 20"), "{msg}");
}

#[tokio::test]
async fn a_second_open_of_the_same_data_dir_is_fenced_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let first = tier_hot::HotTier::open(tier_hot::HotConfig::new(dir.path())).await.unwrap();
    let err = tier_hot::HotTier::open(tier_hot::HotConfig::new(dir.path())).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains("in use by another tierlog process"), "{err}");
    first.close().await;
    drop(first);
    let again = tier_hot::HotTier::open(tier_hot::HotConfig::new(dir.path())).await.unwrap();
    again.close().await;
}
