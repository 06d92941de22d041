//! The router's behavioural suite, run under every deployment: hot; hot+cold (local
//! directory, moto S3, Azurite); hot+warm (Valkey with a replica); hot+warm+cold (local,
//! S3, Azurite); hot+warm and hot+warm+cold (local) with warm on a Valkey Cluster;
//! hot+warm and hot+warm+cold (S3) with warm on a Valkey over TLS only, as an ACL user.
//! The Azure cells start a private Azurite per test (`tier_testkit::servers::Azurite`).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{ColdOn, Deployment, Tiers, append_range, pruned_history, r, rec, slices};
use futures::StreamExt;
use tier_core::{ErrorKind, ReadLimit, StartPosition, TierExt, TopicName};
use tier_router::{NewRecord, Source};

/// What a read from some offset yields: the slices each source served, or a
/// `NotFound` naming the missing offsets.
type Expected = Result<Vec<(Source, tier_core::OffsetRange)>, &'static str>;

/// Builds the seed's "after WAL files have been pruned" layout (scaled: cold [0, 4000),
/// warm [3000, 5000), WAL [4000, 5000) for hot+warm+cold) and checks which tier serves
/// each slice of a read, and timestamp seeks landing in each tier.
async fn stitched_read_after_pruning(mut d: Deployment) {
    let (store, topic) = pruned_history(&mut d, "stitched").await;

    let read = |start: u64| {
        let topic = topic.clone();
        async move { topic.reader_with_source(StartPosition::Offset(start)).await.unwrap() }
    };
    use Source::{Cold, Hot, Warm};
    let expect: Vec<(u64, Expected)> = match d.tiers {
        Tiers::HotWarmCold => vec![
            (2000, Ok(vec![(Cold, r(2000, 3000)), (Warm, r(3000, 4000)), (Hot, r(4000, 5000))])),
            (3500, Ok(vec![(Warm, r(3500, 4000)), (Hot, r(4000, 5000))])),
            (4200, Ok(vec![(Hot, r(4200, 5000))])),
        ],
        Tiers::HotCold => vec![
            (200, Ok(vec![(Cold, r(200, 4000)), (Hot, r(4000, 5000))])),
            (4200, Ok(vec![(Hot, r(4200, 5000))])),
        ],
        Tiers::HotWarm => vec![(2000, Err("[2000, 3000)")), (3500, Ok(vec![(Warm, r(3500, 5000))]))],
        Tiers::Hot => vec![(2000, Err("[2000, 5000)"))],
    };
    for (start, want) in expect {
        let mut stream = read(start).await;
        match want {
            Ok(want) => {
                assert_eq!(slices(&mut stream, start, 5000 - start).await.unwrap(), want, "from {start}")
            }
            Err(missing) => {
                let err = slices(&mut stream, start, 5000 - start).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
                assert!(err.to_string().contains(missing), "{err}");
            }
        }
    }

    // Earliest starts at the oldest offset any tier holds.
    let earliest = match d.tiers {
        Tiers::HotWarmCold | Tiers::HotCold => 0,
        Tiers::HotWarm => 3000,
        Tiers::Hot => 5000,
    };
    let mut stream = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    if earliest < 5000 {
        let got = slices(&mut stream, earliest, 1).await.unwrap();
        assert_eq!(got[0].1.start, earliest);
    }

    // Timestamp seeks: record o has timestamp 1000 + 10 o. Cold, then warm, then the
    // WAL is asked; the first tier that has an answer wins.
    let seeks: Vec<(u64, u64, Source)> = match d.tiers {
        // Cold answers 3500, but warm (preferred over cold) serves it; cold has no
        // record at 4500's time, warm answers, and the WAL serves it.
        Tiers::HotWarmCold => vec![(2500, 2500, Cold), (3500, 3500, Warm), (4500, 4500, Hot)],
        Tiers::HotCold => vec![(2500, 2500, Cold), (4500, 4500, Hot)],
        Tiers::HotWarm => vec![(1000, 3000, Warm), (3500, 3500, Warm), (4500, 4500, Warm)],
        Tiers::Hot => vec![],
    };
    for (at, want_offset, want_source) in seeks {
        let ts = 1000 + 10 * at as i64;
        let mut stream = topic.reader_with_source(StartPosition::Timestamp(ts)).await.unwrap();
        let (source, record) = stream.next().await.unwrap().unwrap();
        assert_eq!((record.offset, source), (want_offset, want_source), "seek to the time of {at}");
    }
    // A time after every record: the next append (read back from the WAL or the live
    // tail, depending on whether the append committed before the first poll).
    let mut stream = topic.reader_with_source(StartPosition::Timestamp(i64::MAX)).await.unwrap();
    append_range(&topic, 5000, 5001, 1).await;
    let got = slices(&mut stream, 5000, 1).await.unwrap();
    assert!(matches!(got[0].0, Source::Live | Source::Hot), "{got:?}");

    // History then the live tail, with nothing lost or repeated at the switch.
    // `slices` checks the offsets are dense: no record lost or repeated.
    let mut stream = topic.reader_with_source(StartPosition::Offset(5000)).await.unwrap();
    assert_eq!(slices(&mut stream, 5000, 1).await.unwrap(), vec![(Source::Hot, r(5000, 5001))]);
    let t2 = topic.clone();
    let producer = tokio::spawn(async move { append_range(&t2, 5001, 5200, 7).await });
    let got = slices(&mut stream, 5001, 199).await.unwrap();
    producer.await.unwrap();
    // History (records committed before the reader caught up) and then only the tail.
    let first_live = got.iter().position(|(s, _)| *s == Source::Live).unwrap_or(got.len());
    assert!(got[..first_live].iter().all(|(s, _)| *s == Source::Hot), "{got:?}");
    assert!(got[first_live..].iter().all(|(s, _)| *s == Source::Live), "{got:?}");
    store.close().await;
}

/// 8 producers × 10k records: every record once, offsets dense, WAL and warm identical.
async fn concurrent_producers(d: Deployment) {
    let store = d.open(&[]).await;
    let topic = store.topic("concurrent").await.unwrap();
    let producers = 8u64;
    let per_producer = 10_000u64;
    let per_batch = 50u64;
    let mut tasks = Vec::new();
    for p in 0..producers {
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            let mut ranges = Vec::new();
            for b in 0..per_producer / per_batch {
                let records = (0..per_batch)
                    .map(|i| NewRecord::new(i as i64, format!("{p}:{}", b * per_batch + i)))
                    .collect();
                ranges.push(topic.append(records).await.expect("append"));
            }
            ranges
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_by_key(|r| r.start);
    let total = producers * per_producer;
    let mut at = 0;
    for range in &all {
        assert_eq!(range.start, at, "offsets are dense and ranges disjoint");
        assert_eq!(range.len(), per_batch);
        at = range.end;
    }
    assert_eq!(at, total);
    assert_eq!(topic.high_watermark(), total);

    // Every record once, each producer's records in order.
    let mut stream = topic.reader(StartPosition::Earliest).await.unwrap();
    let mut next_seq: HashMap<String, u64> = HashMap::new();
    for offset in 0..total {
        let record = stream.next().await.unwrap().unwrap();
        assert_eq!(record.offset, offset);
        let text = std::str::from_utf8(&record.payload).unwrap().to_owned();
        let (p, seq) = text.split_once(':').unwrap();
        let want = next_seq.entry(p.to_owned()).or_insert(0);
        assert_eq!(seq.parse::<u64>().unwrap(), *want, "producer {p} in order, once");
        *want += 1;
    }
    assert_eq!(next_seq.len(), producers as usize);
    assert!(next_seq.values().all(|n| *n == per_producer));

    // The WAL and warm hold the same records.
    if let Some(warm) = store.warm() {
        let name = TopicName::new("concurrent").unwrap();
        assert_eq!(warm.range(&name).await.unwrap(), r(0, total));
        let mut from = 0;
        while from < total {
            let limit = ReadLimit::records(5000);
            let hot = store.wal().read(&name, from, total, limit).await.unwrap();
            let warm = warm.read(&name, from, total, limit).await.unwrap();
            assert_eq!(hot, warm, "WAL and warm differ from offset {from}");
            from += hot.len() as u64;
        }
    }
    store.close().await;
}

/// A restart on the same data directory continues the offsets.
async fn restart_continues_offsets(d: Deployment) {
    let store = d.open(&[]).await;
    let topic = store.topic("restart").await.unwrap();
    append_range(&topic, 0, 100, 10).await;
    store.close().await;
    let store = d.open(&[]).await;
    assert_eq!(store.topics().await, vec![TopicName::new("restart").unwrap()]);
    let report = store.recover_topic("restart").await.unwrap();
    assert_eq!(report.next_offset, 100);
    assert!(report.is_clean(), "{report:?}");
    let topic = store.topic("restart").await.unwrap();
    append_range(&topic, 100, 110, 5).await;
    let mut stream = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    assert_eq!(slices(&mut stream, 0, 110).await.unwrap(), vec![(Source::Hot, r(0, 110))]);
    store.close().await;
}

/// The WAL directory is deleted: every acknowledged record comes back from warm + cold;
/// without warm, the unexported range is reported lost, exactly, and never reused.
async fn wal_lost_recovery(d: Deployment) {
    let store = d.open(&[]).await;
    let topic = store.topic("lost").await.unwrap();
    append_range(&topic, 0, 100, 10).await;
    store.wal().rotate(topic.name()).await.unwrap();
    append_range(&topic, 100, 200, 10).await;
    if d.tiers.cold() {
        assert_eq!(store.export_now("lost").await.unwrap().len(), 2);
    }
    append_range(&topic, 200, 300, 10).await;
    store.close().await;
    std::fs::remove_dir_all(d.hot_dir()).unwrap();

    let store = d.open(&["lost"]).await;
    let report = store.recover_topic("lost").await.unwrap();
    assert_eq!(report.next_offset, 300, "{report:?}");
    let topic = store.topic("lost").await.unwrap();
    let (lost, first_readable) = match d.tiers {
        Tiers::HotWarmCold => {
            assert_eq!(report.replayed, Some(r(200, 300)));
            (vec![], 0)
        }
        Tiers::HotWarm => {
            assert_eq!(report.replayed, Some(r(0, 300)));
            (vec![], 0)
        }
        Tiers::HotCold => (vec![r(200, 300)], 0),
        Tiers::Hot => (vec![r(0, 300)], 300),
    };
    assert_eq!(report.lost, lost, "{report:?}");
    // Offsets continue; nothing is renumbered.
    assert_eq!(topic.append(vec![rec(300)]).await.unwrap(), r(300, 301));
    let mut stream = topic.reader_with_source(StartPosition::Offset(first_readable)).await.unwrap();
    match d.tiers {
        // Warm (untrimmed here) is preferred over cold for [0, 200).
        Tiers::HotWarmCold => assert_eq!(
            slices(&mut stream, 0, 301).await.unwrap(),
            vec![(Source::Warm, r(0, 200)), (Source::Hot, r(200, 301))]
        ),
        Tiers::HotWarm => {
            assert_eq!(slices(&mut stream, 0, 301).await.unwrap(), vec![(Source::Hot, r(0, 301))])
        }
        Tiers::HotCold => {
            let err = slices(&mut stream, 0, 301).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound);
            assert!(err.to_string().contains("[200, 300)"), "{err}");
        }
        Tiers::Hot => {
            assert_eq!(slices(&mut stream, 300, 1).await.unwrap(), vec![(Source::Hot, r(300, 301))])
        }
    }
    store.close().await;
}

/// A consumer of the live tail that falls far behind gets every record once, in order.
async fn live_tail_slow_consumer(mut d: Deployment) {
    d.hot.live_tail_batches = 4;
    d.hot.cache_bytes = 16 * 1024;
    let store = d.open(&[]).await;
    let topic = store.topic("tail").await.unwrap();
    append_range(&topic, 0, 10, 10).await;
    let mut stream = topic.reader_with_source(StartPosition::Latest).await.unwrap();
    let t2 = topic.clone();
    // The producer runs ahead: the consumer reads only after 2000 records are in, far
    // beyond the 4-batch live buffer, so it catches up from disk.
    append_range(&t2, 10, 2010, 5).await;
    let producer = tokio::spawn(async move { append_range(&t2, 2010, 3010, 5).await });
    let got = slices(&mut stream, 10, 3000).await.unwrap();
    producer.await.unwrap();
    assert!(got.iter().all(|(s, _)| *s == Source::Live), "{got:?}");
    store.close().await;
}

/// The background exporter uploads each sealed segment without being asked.
async fn background_exporter(mut d: Deployment) {
    d.router.export_sweep_interval = Duration::from_secs(3600);
    let store = d.try_open(&[], true).await.unwrap();
    let topic = store.topic("bg").await.unwrap();
    append_range(&topic, 0, 50, 10).await;
    store.wal().rotate(topic.name()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if topic.ranges().await.unwrap().cold == Some(r(0, 50)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the exporter did not export [0, 50)");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store.close().await;
}

/// The tests of each deployment, each on a fresh deployment made by `Deployment::$make`.
macro_rules! deployment_tests {
    ($make:ident: $($module:ident => ($tiers:expr, $cold:expr), [$($test:ident),*];)*) => {$(
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(Deployment::$make($tiers, $cold).await).await;
                }
            )*
        }
    )*};
}

deployment_tests! { new:
    hot => (Tiers::Hot, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer
    ];
    hot_cold_local => (Tiers::HotCold, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
    hot_cold_s3 => (Tiers::HotCold, ColdOn::S3), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
    hot_cold_azure => (Tiers::HotCold, ColdOn::Azure), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
    hot_warm => (Tiers::HotWarm, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer
    ];
    hot_warm_cold_local => (Tiers::HotWarmCold, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
    hot_warm_cold_s3 => (Tiers::HotWarmCold, ColdOn::S3), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
    hot_warm_cold_azure => (Tiers::HotWarmCold, ColdOn::Azure), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
}

// Warm on a private Valkey Cluster (three primaries, a replica each).
deployment_tests! { on_cluster:
    hot_warm_cluster => (Tiers::HotWarm, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer
    ];
    hot_warm_cluster_cold_local => (Tiers::HotWarmCold, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
}

// Warm on a private Valkey over TLS only, as a least-privilege ACL user.
deployment_tests! { on_tls:
    hot_warm_tls => (Tiers::HotWarm, ColdOn::Local), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer
    ];
    hot_warm_tls_cold_s3 => (Tiers::HotWarmCold, ColdOn::S3), [
        stitched_read_after_pruning, concurrent_producers, restart_continues_offsets, wal_lost_recovery,
        live_tail_slow_consumer, background_exporter
    ];
}
