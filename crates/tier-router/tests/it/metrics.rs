//! The library records its metrics where the work happens (`docs/metrics.md`): appends,
//! reads by serving part and the requests to warm and cold, seeks, exports, warm's
//! `WAIT`s and WAL deletions — the background deleter's included — seen by a recorder
//! the test installs on its thread (a `current_thread` runtime: every task of the store
//! runs there).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{ColdOn, Deployment, Tiers, append_range, pruned_history, slices};
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use parking_lot::Mutex;
use tier_core::StartPosition;
use tier_router::Source;
use tier_router::metrics::{
    APPEND_BYTES, APPEND_ERRORS, APPEND_RECORDS, APPEND_SECONDS, DELETED_BYTES, DELETED_SEGMENTS,
    EXPORT_BYTES, EXPORT_LAG, EXPORT_SEGMENTS, READ_BYTES, READ_RECORDS, SEEK_BYTES, SEEK_REQUESTS,
    SEEK_SECONDS, TIER_READS, WARM_WAIT,
};
use tokio::sync::watch;

/// One metric's value: a counter's total, a gauge's value, or a histogram's samples.
#[derive(Debug, Default)]
struct Value {
    total: AtomicU64,
    gauge: Mutex<f64>,
    samples: Mutex<Vec<f64>>,
    changed: Option<watch::Sender<()>>,
}

impl Value {
    fn notify(&self) {
        if let Some(tx) = &self.changed {
            tx.send_replace(());
        }
    }
}

impl CounterFn for Value {
    fn increment(&self, n: u64) {
        self.total.fetch_add(n, Ordering::SeqCst);
        self.notify();
    }
    fn absolute(&self, n: u64) {
        self.total.fetch_max(n, Ordering::SeqCst);
        self.notify();
    }
}

impl GaugeFn for Value {
    fn increment(&self, v: f64) {
        *self.gauge.lock() += v;
    }
    fn decrement(&self, v: f64) {
        *self.gauge.lock() -= v;
    }
    fn set(&self, v: f64) {
        *self.gauge.lock() = v;
    }
}

impl HistogramFn for Value {
    fn record(&self, v: f64) {
        self.samples.lock().push(v);
    }
}

/// A recorder keeping every metric by its name and labels (`name{k=v,…}`).
#[derive(Debug)]
struct TestRecorder {
    values: Mutex<HashMap<String, Arc<Value>>>,
    changed: watch::Sender<()>,
}

fn key_text(key: &Key) -> String {
    let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
    if labels.is_empty() { key.name().to_owned() } else { format!("{}{{{}}}", key.name(), labels.join(",")) }
}

impl TestRecorder {
    fn new() -> Self {
        Self { values: Mutex::new(HashMap::new()), changed: watch::channel(()).0 }
    }

    fn value(&self, key: &str) -> Arc<Value> {
        let changed = Some(self.changed.clone());
        Arc::clone(
            self.values
                .lock()
                .entry(key.to_owned())
                .or_insert_with(|| Arc::new(Value { changed, ..Value::default() })),
        )
    }

    /// A counter's total (0 when never recorded).
    fn counter(&self, key: &str) -> u64 {
        self.values.lock().get(key).map_or(0, |v| v.total.load(Ordering::SeqCst))
    }

    fn gauge(&self, key: &str) -> Option<f64> {
        self.values.lock().get(key).map(|v| *v.gauge.lock())
    }

    fn samples(&self, key: &str) -> usize {
        self.values.lock().get(key).map_or(0, |v| v.samples.lock().len())
    }

    /// Waits until `cond` holds, re-checking at every counter change.
    async fn until(&self, what: &str, cond: impl Fn(&Self) -> bool) {
        let mut rx = self.changed.subscribe();
        let wait = async {
            while !cond(self) {
                rx.changed().await.expect("the recorder lives");
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("{what} was never recorded"));
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.value(&key_text(key)))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.value(&key_text(key)))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.value(&key_text(key)))
    }
}

fn tier(name: &str, tier: &str) -> String {
    format!("{name}{{tier={tier}}}")
}

/// Appends, exports, trims warm and prunes the WAL (the layout of `pruned_history`: cold
/// [0, 4000), warm [3000, 5000), WAL [4000, 5000)), then reads from 2000 across all
/// three tiers: each step is counted where it happens.
#[tokio::test(flavor = "current_thread")]
async fn appends_reads_exports_and_retention_are_counted_by_the_library() {
    let recorder = TestRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut d = Deployment::new(Tiers::HotWarmCold, ColdOn::Local).await;
    let (store, topic) = pruned_history(&mut d, "metered").await;

    // 50 appends of 100 records ("r0" … "r4999").
    assert_eq!(recorder.counter(APPEND_RECORDS), 5000);
    let payload: u64 = (0..5000u64).map(|i| format!("r{i}").len() as u64).sum();
    assert_eq!(recorder.counter(APPEND_BYTES), payload);
    assert_eq!(recorder.samples(APPEND_SECONDS), 50);
    assert_eq!(recorder.counter(APPEND_ERRORS), 0);
    assert!(topic.append(Vec::new()).await.is_err(), "an empty append is refused");
    assert_eq!(recorder.counter(APPEND_ERRORS), 1);
    // Warm confirmed every batch (XADD + WAIT).
    assert_eq!(recorder.counter(&format!("{WARM_WAIT}{{outcome=ok}}")), 50);
    // Two segments stored in cold, then retention deleted them from the WAL.
    assert_eq!(recorder.counter(EXPORT_SEGMENTS), 2);
    assert!(recorder.counter(EXPORT_BYTES) > payload * 4 / 5, "{}", recorder.counter(EXPORT_BYTES));
    assert_eq!(recorder.counter(DELETED_SEGMENTS), 2);
    assert!(recorder.counter(DELETED_BYTES) > 0);
    assert_eq!(recorder.gauge(&format!("{EXPORT_LAG}{{topic=metered}}")), Some(1000.0));

    let mut reader = topic.reader_with_source(StartPosition::Offset(2000)).await.unwrap();
    let served = slices(&mut reader, 2000, 3000).await.unwrap();
    assert_eq!(served.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [Source::Cold, Source::Warm, Source::Hot]);
    for (label, records) in [("cold", 1000), ("warm", 1000), ("hot", 1000)] {
        assert_eq!(recorder.counter(&tier(READ_RECORDS, label)), records, "{label}");
        assert!(recorder.counter(&tier(READ_BYTES, label)) >= 1000 * 4, "{label}");
    }
    assert!(recorder.counter(&tier(TIER_READS, "cold")) >= 1);
    assert!(recorder.counter(&tier(TIER_READS, "warm")) >= 1);
    assert_eq!(recorder.counter(&format!("{SEEK_REQUESTS}{{by=offset}}")), 1);
    assert_eq!(recorder.samples(SEEK_SECONDS), 1);
    // The first record came from cold: its index and first data interval were fetched.
    assert!(recorder.counter(SEEK_BYTES) > 0);

    // The batch reader counts the same way.
    let mut batches = topic.batch_reader(StartPosition::Earliest).await.unwrap();
    let first = futures::StreamExt::next(&mut batches).await.unwrap().unwrap();
    assert_eq!(first.source, Source::Cold);
    assert_eq!(recorder.counter(&format!("{SEEK_REQUESTS}{{by=earliest}}")), 1);
    assert_eq!(recorder.counter(&tier(READ_RECORDS, "cold")), 1000 + first.offsets().len());
    assert_eq!(recorder.samples(SEEK_SECONDS), 2);
    store.close().await;
}

/// The background deleter's rounds are counted: a store opened with its background
/// tasks deletes WAL segments beyond `retention_bytes` by itself.
#[tokio::test(flavor = "current_thread")]
async fn the_background_deleter_is_counted() {
    let recorder = TestRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.hot.segment_bytes = 4096;
    d.hot.retention_bytes = 8192;
    d.router.retention_interval = Duration::from_millis(10);
    let store = d.try_open(&[], true).await.unwrap();
    let topic = store.topic("pruned").await.unwrap();
    append_range(&topic, 0, 2000, 100).await;
    recorder.until("a background deletion", |r| r.counter(DELETED_SEGMENTS) > 0).await;
    assert!(recorder.counter(DELETED_BYTES) >= 4096 * recorder.counter(DELETED_SEGMENTS) / 2);
    store.close().await;
}
