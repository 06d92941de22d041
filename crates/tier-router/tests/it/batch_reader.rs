//! `Topic::batch_reader` under every deployment — hot; hot+cold (moto S3); hot+warm
//! (Valkey with a replica); hot+warm+cold (Valkey and moto S3): the same records and
//! serving tiers as the record reader across cold, warm, the WAL and the live tail,
//! starts inside a batch, and a gap between tiers.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::pin::pin;
use std::time::Duration;

use common::{ColdOn, Deployment, Tiers, append_range, check, pruned_history, r};
use futures::stream::BoxStream;
use futures::{StreamExt, poll};
use tier_core::{ErrorKind, Offset, OffsetRange, Record, StartPosition, TierError, TopicName};
use tier_router::{ReadBatch, Source, Topic};

const WAIT: Duration = Duration::from_secs(20);

/// Items of a batch reader until one ends at or beyond `until`, or the error that ended
/// the stream. Checks the reader's guarantees on the way: the first `from` is `start`,
/// each `from` is the previous batch's end and lies inside its batch.
async fn batches_until(
    stream: &mut BoxStream<'static, Result<ReadBatch, TierError>>,
    start: Offset,
    until: Offset,
) -> (Vec<ReadBatch>, Option<TierError>) {
    let mut items: Vec<ReadBatch> = Vec::new();
    let mut next = start;
    while next < until {
        let item = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the batch reader yields within 20 s")
            .expect("the batch reader does not end");
        let item = match item {
            Ok(item) => item,
            Err(e) => return (items, Some(e)),
        };
        assert_eq!(item.from, next, "each item continues where the previous batch ended");
        let batch = &item.batch;
        assert!(batch.base_offset() <= item.from && item.from < batch.end_offset(), "{item:?}");
        next = batch.end_offset();
        items.push(item);
    }
    (items, None)
}

/// The records the items deliver, with the source of each.
fn flatten(items: &[ReadBatch]) -> Vec<(Source, Record)> {
    items.iter().flat_map(|item| item.records().map(move |r| (item.source, r))).collect()
}

/// `count` records of the record reader from `start` (or the error that ended it, with
/// the records before it).
async fn records(
    topic: &Topic,
    start: StartPosition,
    count: u64,
) -> (Vec<(Source, Record)>, Option<TierError>) {
    let mut stream = topic.reader_with_source(start).await.unwrap();
    let mut out = Vec::new();
    for _ in 0..count {
        match tokio::time::timeout(WAIT, stream.next()).await.expect("the reader yields").expect("no end") {
            Ok(item) => out.push(item),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// The runs of offsets each source served.
fn runs(records: &[(Source, Record)]) -> Vec<(Source, OffsetRange)> {
    let mut out: Vec<(Source, OffsetRange)> = Vec::new();
    for (source, record) in records {
        match out.last_mut() {
            Some((s, range)) if s == source && range.end == record.offset => range.end += 1,
            _ => out.push((*source, r(record.offset, record.offset + 1))),
        }
    }
    out
}

/// History across cold [0, 4000), warm [3000, 5000) and the WAL [4000, 5000) (the
/// tiers each deployment has), then the live tail: the batch reader delivers exactly
/// the record reader's records, from the same tiers, and batches appended after it
/// reached the commit point arrive from the live tail. Then starts inside a batch in
/// each tier.
async fn batches_match_records(mut d: Deployment) {
    let (store, topic) = pruned_history(&mut d, "batches").await;
    use Source::{Cold, Hot, Live, Warm};
    let (earliest, want): (u64, Vec<(Source, OffsetRange)>) = match d.tiers {
        Tiers::HotWarmCold => (0, vec![(Cold, r(0, 3000)), (Warm, r(3000, 4000)), (Hot, r(4000, 5000))]),
        Tiers::HotCold => (0, vec![(Cold, r(0, 4000)), (Hot, r(4000, 5000))]),
        Tiers::HotWarm => (3000, vec![(Warm, r(3000, 5000))]),
        Tiers::Hot => (5000, vec![]),
    };
    let mut stream = topic.batch_reader(StartPosition::Earliest).await.unwrap();
    let (items, err) = batches_until(&mut stream, earliest, 5000).await;
    assert!(err.is_none(), "{err:?}");
    let from_batches = flatten(&items);
    let (from_records, err) = records(&topic, StartPosition::Earliest, 5000 - earliest).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(runs(&from_batches), want);
    assert_eq!(from_batches, from_records, "the batch reader delivers the record reader's records");
    from_batches.iter().for_each(|(_, record)| check(record));

    // At the commit point: the first poll waits for the high watermark.
    {
        let mut next = pin!(stream.next());
        assert!(poll!(next.as_mut()).is_pending(), "the reader waits at the commit point");
        append_range(&topic, 5000, 5050, 7).await;
        let first = tokio::time::timeout(WAIT, next).await.expect("the live batch arrives").unwrap().unwrap();
        assert_eq!((first.source, first.from, first.batch.base_offset()), (Live, 5000, 5000));
        let (rest, err) = batches_until(&mut stream, first.batch.end_offset(), 5050).await;
        assert!(err.is_none(), "{err:?}");
        let live: Vec<_> = std::iter::once(first).chain(rest).collect();
        let (records_live, err) = records(&topic, StartPosition::Offset(5000), 50).await;
        assert!(err.is_none(), "{err:?}");
        let batches_live = flatten(&live);
        assert_eq!(runs(&batches_live), vec![(Live, r(5000, 5050))]);
        let strip = |v: &[(Source, Record)]| v.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>();
        assert_eq!(strip(&batches_live), strip(&records_live));
    }

    // Starts inside a batch (batches of 100 before 5000, of 7 after): the first item
    // delivers from the start offset on, from the tier the record reader uses.
    let starts: &[u64] = match d.tiers {
        Tiers::HotWarmCold => &[2050, 3550, 4250, 5010],
        Tiers::HotCold => &[2050, 4250, 5010],
        Tiers::HotWarm => &[3550, 4250, 5010],
        Tiers::Hot => &[5010],
    };
    for &start in starts {
        let mut stream = topic.batch_reader(StartPosition::Offset(start)).await.unwrap();
        let (items, err) = batches_until(&mut stream, start, 5050).await;
        assert!(err.is_none(), "from {start}: {err:?}");
        assert_eq!(items[0].from, start);
        assert!(items[0].batch.base_offset() < start, "{start} is inside the first batch: {:?}", items[0]);
        assert_eq!(items[0].records().next().map(|r| r.offset), Some(start));
        let (want, err) = records(&topic, StartPosition::Offset(start), 5050 - start).await;
        assert!(err.is_none(), "{err:?}");
        assert_eq!(flatten(&items), want, "from {start}: same records from the same tiers");
    }
    store.close().await;
}

/// The WAL is lost after cold took [0, 200) and warm was trimmed to [250, 300): the
/// offsets between what the tiers hold end the batch reader with `NotFound` naming
/// them, after the same records as the record reader.
async fn gap_ends_with_not_found(d: Deployment) {
    let store = d.open(&[]).await;
    let topic = store.topic("gap").await.unwrap();
    let name = TopicName::new("gap").unwrap();
    append_range(&topic, 0, 100, 10).await;
    store.wal().rotate(&name).await.unwrap();
    append_range(&topic, 100, 200, 10).await;
    store.wal().rotate(&name).await.unwrap();
    if d.tiers.cold() {
        assert_eq!(store.export_now("gap").await.unwrap().len(), 2);
    }
    append_range(&topic, 200, 300, 10).await;
    if let Some(warm) = &d.warm {
        warm.trim_before(&name, 250).await.unwrap();
        assert_eq!(warm.range(&name).await.unwrap(), r(250, 300));
    }
    store.close().await;
    std::fs::remove_dir_all(d.hot_dir()).unwrap();

    let store = d.open(&["gap"]).await;
    let topic = store.topic("gap").await.unwrap();
    assert_eq!(topic.high_watermark(), 300);
    let (start, missing) = match d.tiers {
        Tiers::HotWarmCold => (0, "[200, 250)"),
        Tiers::HotCold => (0, "[200, 300)"),
        Tiers::HotWarm => (100, "[100, 250)"),
        Tiers::Hot => (100, "[100, 300)"),
    };
    let mut stream = topic.batch_reader(StartPosition::Offset(start)).await.unwrap();
    let (items, err) = batches_until(&mut stream, start, 300).await;
    let err = err.expect("the gap ends the stream");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains(missing), "{err}");
    let (want, record_err) = records(&topic, StartPosition::Offset(start), 300 - start).await;
    assert_eq!(flatten(&items), want);
    if d.tiers.cold() {
        assert_eq!(runs(&want), vec![(Source::Cold, r(0, 200))]);
    }
    assert_eq!(
        record_err.map(|e| e.to_string()),
        Some(err.to_string()),
        "the same error as the record reader"
    );
    assert!(stream.next().await.is_none(), "the stream ends after the error");
    store.close().await;
}

/// Hot+cold: retention removes the WAL segment holding the batches a reader waiting at
/// the commit point is about to read; it continues from cold, then from the WAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_reader_overtaken_by_retention_continues_from_history() {
    let d = Deployment::new(Tiers::HotCold, ColdOn::S3).await;
    let store = d.open(&[]).await;
    let topic = store.topic("overtaken").await.unwrap();
    let name = topic.name().clone();
    append_range(&topic, 0, 100, 10).await;
    let mut stream = topic.batch_reader(StartPosition::Latest).await.unwrap();
    let items = {
        let mut next = pin!(stream.next());
        assert!(poll!(next.as_mut()).is_pending(), "the reader waits at the commit point");
        append_range(&topic, 100, 200, 10).await;
        store.wal().rotate(&name).await.unwrap();
        assert_eq!(store.export_now("overtaken").await.unwrap().len(), 1);
        append_range(&topic, 200, 210, 10).await;
        let later = std::time::SystemTime::now() + Duration::from_secs(48 * 3600);
        store.run_retention_now(later).await.unwrap();
        assert_eq!(topic.ranges().await.unwrap().hot, r(200, 210));
        let first = tokio::time::timeout(WAIT, next).await.expect("the reader wakes").unwrap().unwrap();
        assert_eq!(first.from, 100);
        first
    };
    let (rest, err) = batches_until(&mut stream, items.batch.end_offset(), 210).await;
    assert!(err.is_none(), "{err:?}");
    let all: Vec<ReadBatch> = std::iter::once(items).chain(rest).collect();
    let records = flatten(&all);
    records.iter().for_each(|(_, record)| check(record));
    assert_eq!(runs(&records), vec![(Source::Cold, r(100, 200)), (Source::Hot, r(200, 210))]);
    store.close().await;
}

macro_rules! deployment_tests {
    ($($module:ident => ($tiers:expr, $cold:expr);)*) => {$(
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn batches_match_records() {
                super::batches_match_records(Deployment::new($tiers, $cold).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gap_ends_with_not_found() {
                super::gap_ends_with_not_found(Deployment::new($tiers, $cold).await).await;
            }
        }
    )*};
}

deployment_tests! {
    hot => (Tiers::Hot, ColdOn::Local);
    hot_cold_s3 => (Tiers::HotCold, ColdOn::S3);
    hot_warm => (Tiers::HotWarm, ColdOn::Local);
    hot_warm_cold_s3 => (Tiers::HotWarmCold, ColdOn::S3);
}
