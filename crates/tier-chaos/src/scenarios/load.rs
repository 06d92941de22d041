//! Scenario 7, load: 8 producers and 8 consumers over 100 topics of a hot+warm+cold
//! store, with rotation, export, retention and warm trimming running. Every consumer
//! follows its topics from offset 0 into the live tail and checks each record (dense
//! offsets, intact payload, the acknowledged record at each acknowledged offset); the
//! runner's anonymous resident memory is sampled from `/proc/self/status` and must stay
//! flat. With `CHAOS_TRACE_RSS` set, every sample is printed with the WAL segment files
//! mapped at that moment.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{StreamExt, stream::select_all};
use parking_lot::Mutex;
use tier_core::{Offset, StartPosition};
use tier_router::{NewRecord, TieredStore, Topic};

use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config},
    payload::{self, RecordId},
    scenarios::temp_dir,
};

const TOPICS: usize = 100;
const PRODUCERS: usize = 8;
const CONSUMERS: usize = 8;

/// One topic's check, kept small: acknowledgements and reads are matched as they
/// arrive (in either order) and only the unmatched ones are kept, so the checker's own
/// memory stays flat however long the run.
#[derive(Debug, Default)]
struct TopicCheck {
    acked: HashMap<Offset, RecordId>,
    read: HashMap<Offset, RecordId>,
    last_seq: HashMap<u64, u64>,
    matched: u64,
    mismatched: u64,
    duplicated: u64,
}

impl TopicCheck {
    fn on_ack(&mut self, offset: Offset, id: RecordId) {
        match self.read.remove(&offset) {
            Some(read) if read == id => self.matched += 1,
            Some(_) => self.mismatched += 1,
            None => {
                self.acked.insert(offset, id);
            }
        }
    }

    fn on_read(&mut self, offset: Offset, id: RecordId) {
        // One writer appends to a topic sequentially: its sequence numbers only grow.
        if self.last_seq.get(&id.writer).is_some_and(|last| id.seq <= *last) {
            self.duplicated += 1;
        }
        self.last_seq.insert(id.writer, id.seq);
        match self.acked.remove(&offset) {
            Some(acked) if acked == id => self.matched += 1,
            Some(_) => self.mismatched += 1,
            None => {
                self.read.insert(offset, id);
            }
        }
    }
}

/// The per-topic checks and the errors seen.
#[derive(Debug, Default)]
struct Shared {
    topics: Vec<Mutex<TopicCheck>>,
    errors: Mutex<Vec<String>>,
    produced_errors: AtomicU64,
}

/// (`RssAnon`, `RssFile`) of this process in bytes, from `/proc/self/status`: anonymous
/// memory is the heap; file-backed pages are mapped segment files (page cache).
fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next().and_then(|kb| kb.parse::<u64>().ok()))
            .map_or(0, |kb| kb * 1024)
    };
    (field("RssAnon:"), field("RssFile:"))
}

async fn produce(topics: Arc<Vec<Topic>>, writer: u64, stop: Arc<AtomicBool>, shared: Arc<Shared>) {
    let mut seq = 0u64;
    let mut i = writer as usize;
    while !stop.load(Ordering::SeqCst) {
        i = (i + PRODUCERS) % TOPICS;
        let records =
            (seq..seq + 5).map(|s| NewRecord::new(1, payload::encode(RecordId { writer, seq: s }))).collect();
        match topics[i].append(records).await {
            Ok(range) => {
                let mut check = shared.topics[i].lock();
                for (k, o) in (range.start..range.end).enumerate() {
                    check.on_ack(o, RecordId { writer, seq: seq + k as u64 });
                }
            }
            Err(e) => {
                shared.produced_errors.fetch_add(1, Ordering::SeqCst);
                shared.errors.lock().push(format!("append to topic {i}: {e}"));
            }
        }
        seq += 5;
    }
}

async fn consume(topics: Arc<Vec<Topic>>, first: usize, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let mut streams = Vec::new();
    for i in (first..TOPICS).step_by(CONSUMERS) {
        match topics[i].reader(StartPosition::Offset(0)).await {
            Ok(s) => streams.push(s.map(move |r| (i, r)).boxed()),
            Err(e) => shared.errors.lock().push(format!("opening a reader of topic {i}: {e}")),
        }
    }
    let mut next: HashMap<usize, Offset> = HashMap::new();
    let mut all = select_all(streams);
    loop {
        let item = tokio::select! {
            item = all.next() => item,
            () = wait_stop(&stop) => return,
        };
        let Some((i, item)) = item else { return };
        match item {
            Ok(record) => {
                let expected = next.entry(i).or_insert(0);
                if record.offset != *expected {
                    shared
                        .errors
                        .lock()
                        .push(format!("topic {i}: expected offset {expected}, read {}", record.offset));
                }
                *expected = record.offset + 1;
                match payload::decode(&record.payload) {
                    Ok(id) => shared.topics[i].lock().on_read(record.offset, id),
                    Err(e) => shared.errors.lock().push(format!("topic {i} offset {}: {e}", record.offset)),
                }
            }
            Err(e) => {
                shared.errors.lock().push(format!("reading topic {i}: {e}"));
                return;
            }
        }
    }
}

async fn wait_stop(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the load scenario for `duration` under `base`.
pub async fn run(
    servers: &Servers,
    base: &Path,
    duration: Duration,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new("load hot+warm+cold");
    let dir = temp_dir(base, "load-")?;
    let profile = Profile { segment_bytes: 256 << 10, ..Profile::default() };
    let mut config = store_config(
        Deployment::HotWarmCold,
        dir.path(),
        servers,
        &format!("load-{}", seed % 100_000),
        &profile,
    )
    .await?;
    // Bounded per-topic buffers (cache, live tail) fill within the first seconds, so
    // growth after that is a leak rather than buffers filling up.
    config.hot.cache_bytes = 128 << 10;
    config.hot.live_tail_batches = 64;
    // 100 topics rotating by age every 300 ms would seal more segments than moto can
    // take; rotation here is mostly by size.
    config.hot.segment_age = Duration::from_secs(5);
    config.router.retention_interval = Duration::from_millis(500);
    config.router.export_sweep_interval = Duration::from_millis(500);
    let store = TieredStore::open(config).await.map_err(|e| ChaosError::tier("opening", e))?;
    let mut topics = Vec::new();
    for i in 0..TOPICS {
        topics.push(store.topic(&format!("load-{i:03}")).await.map_err(|e| ChaosError::tier("topic", e))?);
    }
    let topics = Arc::new(topics);
    let shared = Arc::new(Shared {
        topics: (0..TOPICS).map(|_| Mutex::new(TopicCheck::default())).collect(),
        ..Shared::default()
    });
    let stop_producers = Arc::new(AtomicBool::new(false));
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS as u64)
        .map(|w| {
            tokio::spawn(produce(Arc::clone(&topics), w, Arc::clone(&stop_producers), Arc::clone(&shared)))
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| {
            tokio::spawn(consume(Arc::clone(&topics), c, Arc::clone(&shared), Arc::clone(&stop_consumers)))
        })
        .collect();
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(500)).await; // the sampling period
        samples.push(rss_bytes());
        if std::env::var_os("CHAOS_TRACE_RSS").is_some() {
            let (anon, file) = rss_bytes();
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
            let seg_maps = maps.lines().filter(|l| l.contains(".seg")).count();
            let deleted = maps.lines().filter(|l| l.contains(".seg") && l.ends_with("(deleted)")).count();
            let mut files: Vec<&str> = maps
                .lines()
                .filter(|l| l.contains(".seg"))
                .filter_map(|l| l.split_whitespace().nth(5))
                .collect();
            files.sort_unstable();
            files.dedup();
            let distinct = files.len();
            println!(
                "rss {:.0}s anon {} MiB file {} MiB; segment mappings {seg_maps} ({distinct} files), deleted {deleted}",
                started.elapsed().as_secs_f64(),
                anon >> 20,
                file >> 20
            );
        }
    }
    stop_producers.store(true, Ordering::SeqCst);
    for p in producers {
        p.await.map_err(|e| ChaosError::Other(format!("producer task: {e}")))?;
    }
    // Consumers catch up to every acknowledged offset (polled with a deadline).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let behind = shared.topics.iter().filter(|t| !t.lock().acked.is_empty()).count();
        if behind == 0 || Instant::now() > deadline || !shared.errors.lock().is_empty() {
            if behind > 0 {
                r.fail(format!(
                    "{behind} topics' consumers did not read every acknowledged record within 30 s"
                ));
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught_up = started.elapsed();
    stop_consumers.store(true, Ordering::SeqCst);
    for c in consumers {
        c.await.map_err(|e| ChaosError::Other(format!("consumer task: {e}")))?;
    }
    store.close().await;
    r.notes.push(format!(
        "{:.1}s of load, consumers caught up at {:.1}s, closed at {:.1}s; {} append errors",
        duration.as_secs_f64(),
        caught_up.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        shared.produced_errors.load(Ordering::SeqCst)
    ));

    for (i, check) in shared.topics.iter().enumerate() {
        let check = check.lock();
        let unread = check.acked.len() as u64;
        r.acked += check.matched + check.mismatched + unread;
        r.lost += check.mismatched + unread;
        r.duplicated += check.duplicated;
        if check.mismatched + unread > 0 && r.failures.len() < 3 {
            r.fail(format!(
                "topic {i}: {} acknowledged offsets held other records, {unread} were never read",
                check.mismatched
            ));
        }
    }
    r.iterations = duration.as_secs();
    let errors = shared.errors.lock();
    for e in errors.iter().take(5) {
        r.fail(e.clone());
    }
    if errors.len() > 5 {
        r.fail(format!("... and {} more errors", errors.len() - 5));
    }
    check_memory(&samples, &mut r);
    Ok(r)
}

/// Memory is flat when the peak anonymous RSS of the last third of the run is within
/// 25 % + 32 MiB of the peak of the first third (after the caches and buffers filled).
fn check_memory(samples: &[(u64, u64)], r: &mut ScenarioResult) {
    let third = samples.len() / 3;
    if third == 0 {
        r.fail("too few RSS samples");
        return;
    }
    let peak = |s: &[(u64, u64)], f: fn(&(u64, u64)) -> u64| s.iter().map(f).max().unwrap_or(0);
    let early = peak(&samples[..third], |s| s.0);
    let late = peak(&samples[samples.len() - third..], |s| s.0);
    let file_early = peak(&samples[..third], |s| s.1);
    let file_late = peak(&samples[samples.len() - third..], |s| s.1);
    let mib = |b: u64| b / (1 << 20);
    r.notes.push(format!(
        "anonymous RSS peak: first third {} MiB, last third {} MiB (file-backed: {} -> {} MiB)",
        mib(early),
        mib(late),
        mib(file_early),
        mib(file_late)
    ));
    if late > early + early / 4 + (32 << 20) {
        r.fail(format!("memory grew from {} MiB to {} MiB", mib(early), mib(late)));
    }
}
