//! Request costs of seeks (by offset and by timestamp) in a 256 MiB segment, bounded
//! sequential streams, and reads across several segments.

use crate::common;

use std::sync::Arc;

use common::{local_store, records, small_config, topic, write_segment};
use futures::TryStreamExt;
use tier_cold::testing::CountingStore;
use tier_cold::{ColdConfig, ColdTier, ExportOutcome};
use tier_core::{ErrorKind, ReadLimit, RecordBatch, Tier, TierExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeks_in_a_256_mib_segment_cost_two_requests_cold_and_one_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counting = CountingStore::new(local_store(dir.path()));
    let tier = ColdTier::with_store(Arc::new(counting.clone()), ColdConfig::default()).expect("tier");
    let t = topic("seek");
    let file = dir.path().join("big.seg");
    // 4096 batches of one 64 KiB record: 256 MiB, one index entry per batch (4096
    // entries, 96 KiB of index: more than the default 64 KiB tail fetch).
    let end = write_segment(&file, &t, 1_000, 4096, 1, 64 * 1024);
    assert_eq!(end, 1_000 + 4096);
    let len = std::fs::metadata(&file).expect("meta").len();
    assert!(len >= 256 << 20, "{len}");
    let outcome = tier.export_segment(&t, &file).await.expect("export");
    assert!(matches!(outcome, ExportOutcome::Uploaded { parts, .. } if parts > 1), "{outcome:?}");

    for offset in [1_000, 3_333, end - 1] {
        tier.clear_index_cache();
        tier.clear_data_cache();
        counting.reset();
        let got = tier.read(&t, offset, offset + 1, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].offset, offset);
        assert_eq!(got[0].key.as_deref(), Some(format!("k{offset}").as_bytes()));
        assert!(counting.counts().total() <= 2, "cold seek to {offset}: {:?}", counting.counts());
        // Index cached, data interval not: one request.
        tier.clear_data_cache();
        counting.reset();
        let got = tier.read(&t, offset, offset + 1, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got[0].offset, offset);
        assert_eq!(counting.counts().total(), 1, "cached seek to {offset}: {:?}", counting.counts());
        // The interval too: none.
        counting.reset();
        let got = tier.read(&t, offset, offset + 1, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got[0].offset, offset);
        assert_eq!(counting.counts().total(), 0, "repeated seek to {offset}: {:?}", counting.counts());
    }
    for (ts, want) in [
        (0, 1_000),
        (1000 + 10 * 2_500, 2_500),
        (1000 + 10 * 2_500 + 1, 2_501),
        (1000 + 10 * (end as i64 - 1), end - 1),
    ] {
        tier.clear_index_cache();
        tier.clear_data_cache();
        counting.reset();
        let got = tier.offset_for_timestamp(&t, ts).await.expect("lookup");
        assert_eq!(got, Some(want), "timestamp {ts}");
        let got = tier.read(&t, want, want + 1, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got[0].offset, want);
        assert!(counting.counts().total() <= 2, "cold timestamp seek + read: {:?}", counting.counts());
        tier.clear_data_cache();
        counting.reset();
        assert_eq!(tier.offset_for_timestamp(&t, ts).await.expect("lookup"), Some(want));
        let got = tier.read(&t, want, want + 1, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got[0].offset, want);
        assert_eq!(counting.counts().total(), 1, "cached timestamp seek + read: {:?}", counting.counts());
    }
    assert_eq!(tier.offset_for_timestamp(&t, i64::MAX).await.expect("lookup"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_stream_never_fetches_more_than_read_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counting = CountingStore::new(local_store(dir.path()));
    let read_buffer = 256 * 1024;
    let mut config = small_config();
    config.read_buffer = read_buffer;
    config.read_ahead = 3;
    let tier = ColdTier::with_store(Arc::new(counting.clone()), config).expect("tier");
    let t = topic("stream");
    // Three segments of ~2 MiB (10 KiB records, 4 per batch).
    let mut base = 0;
    for i in 0..3 {
        let file = dir.path().join(format!("{i}.seg"));
        base = write_segment(&file, &t, base, 50, 4, 10 * 1024);
        tier.export_segment(&t, &file).await.expect("export");
    }
    counting.reset();
    let stream = tier.stream(&t, 7).await.expect("stream");
    let got: Vec<_> = stream.try_collect().await.expect("records");
    assert_eq!(got.len() as u64, base - 7);
    assert!(got.iter().zip(7..).all(|(r, o)| r.offset == o), "dense and in order");
    assert_eq!(got[100], records(107, 1, 10 * 1024)[0].clone());
    let c = counting.counts();
    assert!(c.max_get_bytes <= read_buffer, "largest GET {} > read_buffer {read_buffer}", c.max_get_bytes);
    // Roughly 6 MiB in chunks of up to 256 KiB (plus 3 tail fetches).
    assert!(c.gets >= 24 && c.gets <= 40, "{c:?}");
    assert_eq!(tier.stats().max_get_bytes, c.max_get_bytes);

    let empty: Vec<_> =
        tier.stream(&t, base).await.expect("stream at end").try_collect().await.expect("empty");
    assert!(empty.is_empty());
    let err = tier.stream(&t, base + 1).await.err().expect("past the end");
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stream_holds_the_stream_records_with_the_same_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counting = CountingStore::new(local_store(dir.path()));
    let mut config = small_config();
    config.read_buffer = 64 * 1024;
    config.read_ahead = 2;
    let tier = ColdTier::with_store(Arc::new(counting.clone()), config).expect("tier");
    let t = topic("batches");
    let mut base = 0;
    for i in 0..3 {
        let file = dir.path().join(format!("{i}.seg"));
        base = write_segment(&file, &t, base, 40, 5, 1000);
        tier.export_segment(&t, &file).await.expect("export");
    }
    for from in [0, 7, 200, 201, base - 1] {
        tier.clear_index_cache();
        counting.reset();
        let records: Vec<_> =
            tier.stream(&t, from).await.expect("stream").try_collect().await.expect("records");
        let record_requests = counting.counts().total();
        tier.clear_index_cache();
        counting.reset();
        let batches: Vec<RecordBatch> =
            tier.stream_batches(&t, from).await.expect("stream").try_collect().await.expect("batches");
        assert_eq!(counting.counts().total(), record_requests, "from {from}");
        assert!(batches[0].offset_range().contains(from), "from {from}: {:?}", batches[0]);
        assert!(batches.windows(2).all(|w| w[0].end_offset() == w[1].base_offset()), "contiguous");
        assert_eq!(batches.last().expect("a batch").end_offset(), base);
        let flat: Vec<_> = batches.iter().flat_map(|b| b.records_from(from)).collect();
        assert_eq!(flat, records, "from {from}");
        assert_eq!(records.len() as u64, base - from);
    }
    let empty: Vec<_> = tier.stream_batches(&t, base).await.expect("end").try_collect().await.expect("empty");
    assert!(empty.is_empty());
    let err = tier.stream_batches(&t, base + 1).await.err().expect("past the end");
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
}

#[tokio::test]
async fn bounded_reads_cross_segment_boundaries_and_honour_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = ColdTier::with_store(local_store(dir.path()), small_config()).expect("tier");
    let t = topic("bounded");
    let mut base = 50;
    for i in 0..3 {
        let file = dir.path().join(format!("{i}.seg"));
        base = write_segment(&file, &t, base, 5, 4, 100);
        tier.export_segment(&t, &file).await.expect("export");
    }
    assert_eq!(base, 110);
    let got = tier.read(&t, 65, 95, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(
        got,
        records(65, 30, 100)
            .into_iter()
            .map(|mut r| {
                r.key = Some(format!("k{}", r.offset).into());
                r
            })
            .collect::<Vec<_>>()
    );
    let got =
        tier.read(&t, 66, 200, ReadLimit { max_records: usize::MAX, max_bytes: 350 }).await.expect("read");
    // Each record counts 100 payload bytes + its 3-byte key.
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![66, 67, 68]);
    let got = tier.read(&t, 68, 200, ReadLimit::records(25)).await.expect("read");
    assert_eq!(got.first().map(|r| r.offset), Some(68));
    assert_eq!(got.len(), 25);
}
