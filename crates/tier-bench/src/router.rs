//! Workload 1 through the router: what a broker calls (`TieredStore` / `Topic` on the
//! hot-only deployment: no warm, no cold, background tasks on) beside `HotTier` alone on
//! the same records, in the same run. The row's ratio is router ÷ tier; the raw `write`
//! baseline of the same bytes is in the detail.
//!
//! Cases, all 1 KiB records:
//! - batched: one producer, 100 records per awaited `Topic::append_batch` (tier:
//!   `HotTier::append` of the same batch);
//! - single, sequential: one producer, one record per awaited call, with p50/p99 per
//!   append for both;
//! - single, concurrent: 8 and 64 producer tasks each awaiting one record per call,
//!   against the tier's sequential single-record throughput;
//! - single, in flight: one producer keeping up to [`WINDOW`] single-record appends in
//!   flight with `Topic::enqueue_batch` (offsets in enqueue order), against the same.

use std::{
    collections::VecDeque,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use futures::TryStreamExt;
use tier_core::{RecordBatchBuilder, StartPosition, Tier};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_router::{TieredStore, Topic};

use crate::{
    Settings,
    report::Row,
    util::{self, BASE_TS, secs},
};

const APPEND: &str = "1 hot append";
/// The p99 append-return -> receive target of the router's live tail, ms.
const TAIL_P99_MS: f64 = 0.060;
/// Record size of every router case.
const SIZE: usize = 1024;
/// Appends one in-flight producer keeps queued.
pub(crate) const WINDOW: usize = 256;
/// Concurrent single-record producers (the single producer is the sequential case).
const PRODUCERS: [usize; 2] = [8, 64];

fn fsync_label(f: FsyncPolicy) -> &'static str {
    if f == FsyncPolicy::Always { "always" } else { "never" }
}

/// A hot-only store (background tasks on, as deployed) in a fresh directory under `dir`.
pub(crate) async fn store(dir: &Path, fsync: FsyncPolicy) -> Result<(tempfile::TempDir, TieredStore)> {
    let case = tempfile::tempdir_in(dir)?;
    let store =
        TieredStore::builder().hot(HotConfig::new(case.path().join("hot")).with_fsync(fsync)).open().await?;
    Ok((case, store))
}

/// A builder of `count` records of `payload`, timestamps from offset `base`.
fn records(payload: &[u8], count: usize, base: u64) -> Result<RecordBatchBuilder> {
    util::builder(payload, count, base)
}

/// What one timed run measured: appends, seconds and per-append latencies (ms, sorted;
/// empty when not taken).
#[derive(Debug, Default, Clone)]
struct Run {
    appends: u64,
    secs: f64,
    lat_ms: Vec<f64>,
}

impl Run {
    fn p(&self, q: f64) -> f64 {
        util::percentile(&self.lat_ms, q)
    }
}

/// `HotTier::append` of `per`-record batches built afresh each time (as the router's
/// producers build theirs), one producer, up to `max` appends or `budget`.
async fn tier_seq(
    dir: &Path,
    fsync: FsyncPolicy,
    payload: &[u8],
    per: usize,
    max: u64,
    budget: Duration,
) -> Result<Run> {
    let case = tempfile::tempdir_in(dir)?;
    let tier = HotTier::open(HotConfig::new(case.path().join("hot")).with_fsync(fsync)).await?;
    let topic = util::topic("append")?;
    // Topic creation (directory, first segment) is not append time, as for the router.
    tier.append(&topic, util::batch(payload, per, 0)?).await?;
    let mut lat = Vec::with_capacity(max.min(1 << 20) as usize);
    let start = Instant::now();
    let mut n = 0u64;
    while n < max && start.elapsed() < budget {
        let base = (n + 1) * per as u64;
        let batch = records(payload, per, base)?.build(base)?;
        let t = Instant::now();
        tier.append(&topic, batch).await?;
        lat.push(secs(t.elapsed()) * 1e3);
        n += 1;
    }
    let took = secs(start.elapsed());
    tier.close().await;
    lat.sort_by(f64::total_cmp);
    Ok(Run { appends: n, secs: took, lat_ms: lat })
}

/// `Topic::append_batch` of `per`-record batches built afresh each time (as a producer
/// does), one producer, up to `max` appends or `budget`.
async fn router_seq(
    dir: &Path,
    fsync: FsyncPolicy,
    payload: &[u8],
    per: usize,
    max: u64,
    budget: Duration,
) -> Result<Run> {
    let (_case, store) = store(dir, fsync).await?;
    let topic = store.topic("append").await?;
    // Topic creation (directory, first segment, first reservation) is not append time.
    topic.append_batch(records(payload, per, 0)?).await?;
    let mut lat = Vec::with_capacity(max.min(1 << 20) as usize);
    let start = Instant::now();
    let mut n = 0u64;
    while n < max && start.elapsed() < budget {
        let builder = records(payload, per, (n + 1) * per as u64)?;
        let t = Instant::now();
        topic.append_batch(builder).await?;
        lat.push(secs(t.elapsed()) * 1e3);
        n += 1;
    }
    let took = secs(start.elapsed());
    store.close().await;
    lat.sort_by(f64::total_cmp);
    Ok(Run { appends: n, secs: took, lat_ms: lat })
}

/// `producers` tasks each awaiting `per`-record `Topic::append_batch` calls, `total`
/// appends in all.
async fn router_concurrent(
    dir: &Path,
    fsync: FsyncPolicy,
    payload: &[u8],
    per: usize,
    producers: usize,
    total: u64,
) -> Result<Run> {
    let (_case, store) = store(dir, fsync).await?;
    let topic = store.topic("append").await?;
    topic.append_batch(records(payload, per, 0)?).await?;
    let each = (total / producers as u64).max(1);
    let payload: Arc<[u8]> = payload.into();
    let start = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|_| {
            let (topic, payload) = (topic.clone(), Arc::clone(&payload));
            tokio::spawn(async move {
                for i in 0..each {
                    topic.append_batch(records(&payload, per, i * per as u64)?).await?;
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let took = secs(start.elapsed());
    store.close().await;
    Ok(Run { appends: each * producers as u64, secs: took, lat_ms: Vec::new() })
}

/// One producer keeping up to [`WINDOW`] single-record appends in flight through
/// `Topic::enqueue_batch`, `total` appends; checks the offsets follow enqueue order.
async fn router_in_flight(dir: &Path, fsync: FsyncPolicy, payload: &[u8], total: u64) -> Result<Run> {
    let (_case, store) = store(dir, fsync).await?;
    let topic = store.topic("append").await?;
    topic.append_batch(records(payload, 1, 0)?).await?;
    let start = Instant::now();
    let mut window = VecDeque::with_capacity(WINDOW);
    let mut expect = 1u64;
    let check = |got: tier_core::OffsetRange, expect: &mut u64| -> Result<()> {
        anyhow::ensure!(got.start == *expect, "an in-flight append got {got}, expected offset {expect}");
        *expect = got.end;
        Ok(())
    };
    for i in 0..total {
        if window.len() == WINDOW
            && let Some(oldest) = window.pop_front()
        {
            check(oldest_await(oldest).await?, &mut expect)?;
        }
        window.push_back(topic.enqueue_batch(records(payload, 1, i)?).await?);
    }
    while let Some(oldest) = window.pop_front() {
        check(oldest_await(oldest).await?, &mut expect)?;
    }
    let took = secs(start.elapsed());
    store.close().await;
    Ok(Run { appends: total, secs: took, lat_ms: Vec::new() })
}

async fn oldest_await(p: tier_router::PendingAppend) -> Result<tier_core::OffsetRange> {
    Ok(p.await?)
}

/// Workload 1's router rows (see the module documentation).
pub(crate) async fn append(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let payload = util::payload(SIZE);
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Always] {
        let f = fsync_label(fsync);
        // Batched: the tier's first run sets the count; then router and tier alternate.
        let per = 100usize;
        let template = util::batch(&payload, per, 0)?;
        let max = (settings.append_bytes / (SIZE * per) as u64).max(1);
        let mut tier = tier_seq(dir, fsync, &payload, per, max, settings.case_budget).await?;
        let n = tier.appends;
        let mut router = router_seq(dir, fsync, &payload, per, n, Duration::MAX).await?;
        for _ in 1..settings.rounds {
            let t = tier_seq(dir, fsync, &payload, per, n, Duration::MAX).await?;
            if t.secs < tier.secs {
                tier = t;
            }
            let r = router_seq(dir, fsync, &payload, per, n, Duration::MAX).await?;
            if r.secs < router.secs {
                router = r;
            }
        }
        let raw = crate::hot::raw_append(dir, fsync, &template, n)?;
        let recs = n * per as u64;
        rows.push(
            Row::new(APPEND, format!("router 1 KiB x100 fsync={f}"))
                .throughput(recs, recs * SIZE as u64, router.secs, Some(tier.secs))
                .target_at_least(0.9, ">= 0.9x HotTier alone")
                .detail(format!(
                    "Topic::append_batch on a hot-only TieredStore vs HotTier::append alone ({:.0} rec/s); \
                     {n} batches, best of {}; router vs raw write: {:.2}x; per append p50/p99: router \
                     {:.3}/{:.3} ms, tier {:.3}/{:.3} ms",
                    recs as f64 / tier.secs.max(1e-9),
                    settings.rounds,
                    raw / router.secs.max(1e-9),
                    router.p(50.0),
                    router.p(99.0),
                    tier.p(50.0),
                    tier.p(99.0),
                )),
        );

        // Single records, one producer awaiting each.
        let max = (settings.append_bytes / SIZE as u64).max(1);
        let mut tier = tier_seq(dir, fsync, &payload, 1, max, settings.case_budget).await?;
        let n = tier.appends;
        let mut router = router_seq(dir, fsync, &payload, 1, n, Duration::MAX).await?;
        for _ in 1..settings.rounds {
            let t = tier_seq(dir, fsync, &payload, 1, n, Duration::MAX).await?;
            if t.secs < tier.secs {
                tier = t;
            }
            let r = router_seq(dir, fsync, &payload, 1, n, Duration::MAX).await?;
            if r.secs < router.secs {
                router = r;
            }
        }
        let tier_rate = n as f64 / tier.secs.max(1e-9);
        rows.push(
            Row::new(APPEND, format!("router 1 KiB x1 fsync={f}, 1 producer awaiting each"))
                .throughput(n, n * SIZE as u64, router.secs, Some(tier.secs))
                .target_at_least(0.9, ">= 0.9x HotTier single-record")
                .detail(format!(
                    "Topic::append_batch of one record vs HotTier::append alone ({tier_rate:.0} rec/s); {n} \
                     appends, best of {}; per append p50/p99: router {:.3}/{:.3} ms, tier {:.3}/{:.3} ms",
                    settings.rounds,
                    router.p(50.0),
                    router.p(99.0),
                    tier.p(50.0),
                    tier.p(99.0),
                )),
        );

        // Concurrent single-record producers and one producer with appends in flight,
        // against the tier's sequential single-record run above.
        let total = n.max(1000);
        let tier_secs_for = |appends: u64| appends as f64 / tier_rate.max(1e-9);
        for producers in PRODUCERS {
            let r = router_concurrent(dir, fsync, &payload, 1, producers, total).await?;
            rows.push(
                Row::new(APPEND, format!("router 1 KiB x1 fsync={f}, {producers} producers awaiting each"))
                    .throughput(r.appends, r.appends * SIZE as u64, r.secs, Some(tier_secs_for(r.appends)))
                    .target_at_least(0.9, ">= 0.9x HotTier single-record")
                    .detail(format!(
                        "{producers} tasks, each awaiting Topic::append_batch of one record; {} appends; \
                         baseline: HotTier::append of one record, one producer ({tier_rate:.0} rec/s)",
                        r.appends
                    )),
            );
        }
        let r = router_in_flight(dir, fsync, &payload, total).await?;
        rows.push(
            Row::new(APPEND, format!("router 1 KiB x1 fsync={f}, 1 producer, {WINDOW} in flight"))
                .throughput(r.appends, r.appends * SIZE as u64, r.secs, Some(tier_secs_for(r.appends)))
                .target_at_least(0.9, ">= 0.9x HotTier single-record")
                .detail(format!(
                    "Topic::enqueue_batch of one record, up to {WINDOW} answers outstanding, offsets checked in \
                     order; {} appends; baseline: HotTier::append of one record, one producer ({tier_rate:.0} rec/s)",
                    r.appends
                )),
        );
    }
    Ok(rows)
}

/// One case of `tier-bench router-case`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OneCase {
    /// Records per append.
    pub(crate) per: usize,
    /// Appends in all.
    pub(crate) count: u64,
    /// fsync `always` (else `never`).
    pub(crate) always: bool,
    /// `HotTier` alone instead of the router.
    pub(crate) tier: bool,
    /// Producer tasks awaiting their appends (router only).
    pub(crate) producers: usize,
}

/// One case on its own (`tier-bench router-case`, for profiling): a line with the
/// appends per second and, for one producer, p50/p99 per append.
pub(crate) async fn one_case(dir: &Path, case: OneCase) -> Result<String> {
    let OneCase { per, count, always, tier, producers } = case;
    anyhow::ensure!(producers >= 1, "--producers must be at least 1");
    anyhow::ensure!(!tier || producers == 1, "--producers applies to the router only");
    let fsync = if always { FsyncPolicy::Always } else { FsyncPolicy::Never };
    let payload = util::payload(SIZE);
    let run = if tier {
        tier_seq(dir, fsync, &payload, per, count, Duration::MAX).await?
    } else if producers > 1 {
        router_concurrent(dir, fsync, &payload, per, producers, count).await?
    } else {
        router_seq(dir, fsync, &payload, per, count, Duration::MAX).await?
    };
    let latency = if run.lat_ms.is_empty() {
        format!("{producers} producers")
    } else {
        format!("p50 {:.3} ms, p99 {:.3} ms", run.p(50.0), run.p(99.0))
    };
    Ok(format!(
        "{} {per} x 1 KiB fsync={}: {:.0} appends/s, {:.0} rec/s, {latency}",
        if tier { "HotTier" } else { "router" },
        fsync_label(fsync),
        run.appends as f64 / run.secs.max(1e-9),
        (run.appends * per as u64) as f64 / run.secs.max(1e-9),
    ))
}

/// Workload 6 through the router, hot only: `Topic::append` of single 100 B records
/// (fsync never) at the tail rate and a `Topic::reader(Latest)` consumer opened first.
pub(crate) async fn tail_latest(settings: &Settings, dir: &Path) -> Result<Row> {
    let rate = settings.tail_rate;
    let (_case, store) = store(dir, FsyncPolicy::Never).await?;
    let topic: Topic = store.topic("tail").await?;
    let count = settings.tail_records;
    let mut reader = topic.reader(StartPosition::Latest).await?;
    let consumer = tokio::spawn(async move {
        let mut received = Vec::with_capacity(count as usize);
        while (received.len() as u64) < count {
            let r = reader.try_next().await?.ok_or_else(|| anyhow::anyhow!("reader ended"))?;
            anyhow::ensure!(r.offset == received.len() as u64, "reader skipped to {}", r.offset);
            received.push(Instant::now());
        }
        Ok::<_, anyhow::Error>(received)
    });
    let payload = bytes::Bytes::from(util::payload(100));
    let returned = crate::tail::paced(count, rate, |i| {
        let topic = topic.clone();
        let record = tier_router::NewRecord::new(BASE_TS + i as i64, payload.clone());
        async move {
            topic.append(vec![record]).await?;
            Ok(())
        }
    })
    .await?;
    let received = consumer.await??;
    store.close().await;
    Ok(crate::tail::row(
        "router hot only, reader(Latest), 100 B x1, fsync=never",
        rate,
        &returned,
        &received,
        TAIL_P99_MS,
    ))
}
