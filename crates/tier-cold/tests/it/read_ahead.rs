//! Sequential streams over a damaged batch: a stream given an end never fetches or
//! decodes what lies at or past it (so damage there cannot fail it), and within one
//! ranged GET the batches before a damaged one are handed out before its error.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use common::{local_store, small_config, temp_file, topic, write_segment};
use tier_cold::ColdTier;
use tier_cold::testing::CountingStore;
use tier_core::segment::SealedSegment;
use tier_core::{ErrorKind, Offset, OffsetRange, TopicName};

/// Flips one byte inside the records of the batch starting at `base` in the sealed
/// segment file at `path`, so that the batch's CRC fails.
fn damage_batch(path: &Path, base: Offset) {
    let mut bytes = std::fs::read(path).expect("read the segment");
    let segment = SealedSegment::open(Bytes::from(bytes.clone())).expect("a sealed segment");
    let (position, batch) = segment
        .batches()
        .map(|b| b.expect("intact before the damage"))
        .find(|(_, b)| b.base_offset() == base)
        .expect("the batch");
    let at = usize::try_from(position).expect("position") + batch.encoded_len() - 3;
    bytes[at] ^= 0x5a;
    std::fs::write(path, bytes).expect("write the segment");
}

/// A local tier (counting requests) holding [0, 100) in batches of 10 with the batch
/// [60, 70) damaged, then an intact [100, 200).
async fn damaged_then_intact(dir: &tempfile::TempDir, t: &TopicName) -> (Arc<ColdTier>, CountingStore) {
    let store = CountingStore::new(local_store(dir.path()));
    let tier = Arc::new(ColdTier::with_store(Arc::new(store.clone()), small_config()).expect("tier"));
    let first = temp_file(dir, "first.seg");
    assert_eq!(write_segment(&first, t, 0, 10, 10, 50), 100);
    damage_batch(&first, 60);
    tier.export_segment(t, &first).await.expect("export the damaged segment");
    let second = temp_file(dir, "second.seg");
    assert_eq!(write_segment(&second, t, 100, 10, 10, 50), 200);
    tier.export_segment(t, &second).await.expect("export the intact segment");
    (tier, store)
}

/// The GETs of a bounded stream of `from..to` (intact), with no metadata cached.
async fn gets(tier: &Arc<ColdTier>, store: &CountingStore, t: &TopicName, from: Offset, to: Offset) -> u64 {
    tier.clear_index_cache();
    store.reset();
    let stream = Arc::clone(tier).stream_owned(t, from, to).await.expect("stream");
    let records: Vec<_> = stream.try_collect().await.expect("intact");
    assert_eq!(records.len() as u64, to - from);
    store.counts().gets
}

#[tokio::test]
async fn a_stream_ending_before_the_damage_never_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("bounded");
    let (tier, store) = damaged_then_intact(&dir, &t).await;

    let records: Vec<_> =
        Arc::clone(&tier).stream_owned(&t, 5, 60).await.expect("stream").try_collect().await.expect("intact");
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (5..60).collect::<Vec<_>>());
    let batches: Vec<_> = Arc::clone(&tier)
        .stream_batches_owned(&t, 5, 60)
        .await
        .expect("stream")
        .try_collect()
        .await
        .expect("intact");
    let ranges: Vec<_> = batches.iter().map(|b| b.offset_range()).collect();
    assert_eq!(ranges, (0..60).step_by(10).map(|b| OffsetRange::new(b, b + 10)).collect::<Vec<_>>());

    // A stream ending inside the first segment never reaches the second: it makes as
    // many GETs (metadata, one chunk) as a stream of the second segment alone.
    let (first_only, second_only) =
        (gets(&tier, &store, &t, 0, 50).await, gets(&tier, &store, &t, 100, 200).await);
    assert!(first_only > 0);
    assert_eq!(first_only, second_only, "no request for the segment after the stream's end");
}

#[tokio::test]
async fn a_stream_hands_out_the_batches_before_a_damaged_one_then_the_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("partial");
    let (tier, _store) = damaged_then_intact(&dir, &t).await;

    let items: Vec<_> = tier.stream(&t, 5).await.expect("stream").collect().await;
    let offsets: Vec<_> = items.iter().map_while(|i| i.as_ref().ok().map(|r| r.offset)).collect();
    assert_eq!(offsets, (5..60).collect::<Vec<_>>(), "the intact records before the damage");
    assert_eq!(items.len(), 56, "the stream ends after the error");
    let err = items.last().expect("an item").as_ref().expect_err("the damage");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");

    let items: Vec<_> = tier.stream_batches(&t, 0).await.expect("stream").collect().await;
    assert_eq!(items.len(), 7, "six intact batches, then the error: {items:?}");
    assert_eq!(items[5].as_ref().expect("intact").offset_range(), OffsetRange::new(50, 60));
    assert_eq!(items[6].as_ref().expect_err("the damage").kind(), ErrorKind::Corruption);
}
