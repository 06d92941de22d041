//! Workload 11: a server soak. `tierlog-server` in this process over a hot + cold store
//! (cold on a local directory), with small, short-lived segments so that rotation, export
//! and WAL retention run all along; 50 producer clients and 50 follower clients over
//! loopback HTTP on 100 topics — each producer appends to two topics in turn, each
//! follower follows two (one stream each) from the earliest offset into the live tail —
//! for 5 minutes (20 s with `--quick`). It reports errors, records acknowledged and
//! delivered, and the process's resident memory once warmed up, at its highest and at
//! the end.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Result;
use bytes::Bytes;
use futures::StreamExt;
use tier_cold::{BackendConfig, ColdConfig};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{RouterConfig, StoreConfig, TieredStore};
use tierlog_client::{Client, Record, SERVER_CLOCK, Start};
use tierlog_server::{Server, ServerConfig};

use crate::{Settings, report::Row, util::vm_rss_kib};

const SOAK: &str = "11 server soak";
const PRODUCERS: usize = 50;
const FOLLOWERS: usize = 50;
const TOPICS: usize = 100;
/// Records per append and payload bytes per record.
const BATCH: usize = 10;
const PAYLOAD: usize = 256;
/// Appends per second per producer (both its topics together).
const APPENDS_PER_SEC: u64 = 20;

/// Per topic: the end of what producers had acknowledged, and what followers received.
#[derive(Default)]
struct Counts {
    acked_end: AtomicU64,
    delivered: AtomicU64,
}

fn topic_name(i: usize) -> String {
    format!("soak-{i:03}")
}

/// One batch for topic `t`'s append number `n`: the payload names both, so a follower can
/// check it received the record appended at that offset.
fn batch(t: usize, first_offset: u64) -> Vec<Record> {
    (0..BATCH as u64)
        .map(|i| Record {
            timestamp: SERVER_CLOCK,
            payload: payload(t, first_offset + i),
            ..Record::default()
        })
        .collect()
}

fn payload(t: usize, offset: u64) -> Bytes {
    let mut p = format!("{t}:{offset}:").into_bytes();
    p.resize(PAYLOAD, b'x');
    Bytes::from(p)
}

pub(crate) async fn server_soak(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let duration = if settings.quick { Duration::from_secs(20) } else { Duration::from_secs(300) };
    let case = tempfile::tempdir_in(dir)?;
    let mut hot = HotConfig::new(case.path().join("wal")).with_fsync(FsyncPolicy::Never);
    hot.segment_bytes = 256 << 10;
    hot.segment_age = Duration::from_secs(2);
    hot.retention_time = Duration::from_secs(5);
    hot.cache_bytes = 16 << 20;
    let mut router = RouterConfig::default();
    router.export_sweep_interval = Duration::from_secs(1);
    router.retention_interval = Duration::from_secs(1);
    let cold = ColdConfig::new(BackendConfig::Local { path: case.path().join("cold") });
    let store = TieredStore::open(
        StoreConfig::hot_only(case.path().join("wal")).with_hot(hot).with_cold(cold).with_router(router),
    )
    .await?;
    let server = Server::new(store.clone(), &ServerConfig::default(), None)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = server.shutdown_handle();
    let serving = tokio::spawn(server.serve(listener));

    let counts: Arc<Vec<Counts>> = Arc::new((0..TOPICS).map(|_| Counts::default()).collect());
    let errors = Arc::new(AtomicU64::new(0));
    let mismatches = Arc::new(AtomicU64::new(0));
    // Each topic's first batch, so that followers find every topic.
    let setup = Client::new(&url)?;
    for t in 0..TOPICS {
        let answer = setup.append_binary(&topic_name(t), &batch(t, 0)).await?;
        counts[t].acked_end.store(answer.end, Ordering::Relaxed);
    }

    let start = Instant::now();
    let deadline = start + duration;
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let (client, counts, errors) = (Client::new(&url)?, Arc::clone(&counts), Arc::clone(&errors));
        producers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let t = 2 * p + (n % 2) as usize;
                let at = counts[t].acked_end.load(Ordering::Relaxed);
                match client.append_binary(&topic_name(t), &batch(t, at)).await {
                    Ok(answer) if answer.start == at => {
                        counts[t].acked_end.store(answer.end, Ordering::Relaxed)
                    }
                    // Each topic has one producer: any other start is a fault.
                    Ok(_) | Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
                let due = start + Duration::from_secs_f64(n as f64 / APPENDS_PER_SEC as f64);
                tokio::time::sleep_until(due.into()).await;
            }
        }));
    }
    let mut followers = Vec::new();
    for f in 0..FOLLOWERS {
        let client = Client::new(&url)?;
        for t in [2 * f, 2 * f + 1] {
            let (client, counts, errors, mismatches) =
                (client.clone(), Arc::clone(&counts), Arc::clone(&errors), Arc::clone(&mismatches));
            followers.push(tokio::spawn(async move {
                let mut stream = match client.read(&topic_name(t), Start::Earliest).await {
                    Ok(s) => s,
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                };
                let mut next = 0u64;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(r) => {
                            if r.offset != next || r.payload != payload(t, r.offset) {
                                mismatches.fetch_add(1, Ordering::Relaxed);
                            }
                            next = r.offset + 1;
                            counts[t].delivered.store(next, Ordering::Relaxed);
                        }
                        // The drain at the end ends every follow with an error item.
                        Err(_) => return,
                    }
                }
            }));
        }
    }

    // Memory: sampled once a second; "start" once a tenth of the run has passed.
    let mut rss_start = 0;
    let mut rss_max = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = vm_rss_kib()?;
        rss_max = rss_max.max(rss);
        if rss_start == 0 && start.elapsed() >= duration / 10 {
            rss_start = rss;
        }
    }
    for p in producers {
        p.await?;
    }
    let rss_end = vm_rss_kib()?;
    // Followers catch up to what was acknowledged (bounded), then the server drains.
    let caught_up = |counts: &[Counts]| {
        counts.iter().all(|c| c.delivered.load(Ordering::Relaxed) >= c.acked_end.load(Ordering::Relaxed))
    };
    let wait_until = Instant::now() + Duration::from_secs(60);
    while !caught_up(&counts) && Instant::now() < wait_until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let acked: u64 = counts.iter().map(|c| c.acked_end.load(Ordering::Relaxed)).sum();
    let delivered: u64 = counts
        .iter()
        .map(|c| c.delivered.load(Ordering::Relaxed).min(c.acked_end.load(Ordering::Relaxed)))
        .sum();
    // Rotation, export and retention ran: cold holds a prefix of each topic, and the WAL
    // no longer starts at 0.
    let infos = setup.topics().await?;
    let in_cold: u64 = infos.iter().filter_map(|i| i.cold.map(|c| c.end - c.start)).sum();
    let pruned = infos.iter().filter(|i| i.hot.start > 0).count();
    shutdown.shutdown();
    for f in followers {
        f.await?;
    }
    serving.await??;
    store.close().await;
    let secs = start.elapsed().as_secs_f64();

    let errors = errors.load(Ordering::Relaxed);
    let mismatches = mismatches.load(Ordering::Relaxed);
    let every = errors == 0 && mismatches == 0 && delivered == acked && infos.len() == TOPICS;
    let flat = rss_end <= rss_start + rss_start / 5;
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(vec![
        Row::new(SOAK, format!("{PRODUCERS} producers + {FOLLOWERS} followers, {TOPICS} topics, {} s", duration.as_secs()))
            .target_checked("zero errors, every acknowledged record delivered in order", every)
            .detail(format!(
                "{acked} records acknowledged ({:.0}/s), {delivered} delivered; {errors} errors, {mismatches} out of order or wrong bytes; {} topics, {in_cold} records in cold, {pruned} topics' WAL pruned by retention; {secs:.0} s",
                acked as f64 / duration.as_secs_f64(),
                infos.len()
            )),
        Row::new(SOAK, "resident memory (VmRSS)")
            .target_checked("flat: end <= 1.2x the start", flat)
            .detail(format!(
                "{:.1} MiB after {} s, {:.1} MiB at the end, {:.1} MiB at most",
                mib(rss_start),
                (duration / 10).as_secs(),
                mib(rss_end),
                mib(rss_max)
            )),
    ])
}
