//! Workload 10, server loopback: `tierlog-server` serving a hot-only store (fsync never)
//! in this process on 127.0.0.1, driven by `tierlog-client`.
//!
//! - Append: 1 KiB x 100-record batches through the client's binary append, one batch in
//!   flight, against `Topic::append` of the same batches in process on the same
//!   deployment; rounds alternate, best of each kept.
//! - Live tail: single 100 B records appended through the client at a fixed rate, a
//!   follower (the client's `read` from the first offset, following); latency from just
//!   before the append is sent to the follower holding the record.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use bytes::Bytes;
use futures::StreamExt;
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{NewRecord, TieredStore};
use tierlog_client::{Client, Record, SERVER_CLOCK, Start};
use tierlog_server::{Server, ServerConfig, ShutdownHandle};

use crate::{
    Settings,
    report::Row,
    tail,
    util::{self, BASE_TS},
};

const WORKLOAD: &str = "10 server loopback";

/// Record size and records per batch of the append case.
const SIZE: usize = 1024;
const BATCH: usize = 100;

/// A hot-only store (fsync never, no background work) under `dir`.
async fn store(dir: &Path) -> Result<TieredStore> {
    Ok(TieredStore::builder()
        .hot(HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Never))
        .background(false)
        .open()
        .await?)
}

/// A server over `store` on 127.0.0.1 (a free port): its URL, the drain handle and the
/// serving task.
async fn serve(store: &TieredStore) -> Result<(String, ShutdownHandle, tokio::task::JoinHandle<Result<()>>)> {
    let server = Server::new(store.clone(), &ServerConfig::default(), None)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = server.shutdown_handle();
    Ok((url, shutdown, tokio::spawn(server.serve(listener))))
}

/// Drains the server, then closes the store.
async fn stop(
    store: TieredStore,
    shutdown: ShutdownHandle,
    serving: tokio::task::JoinHandle<Result<()>>,
) -> Result<()> {
    shutdown.shutdown();
    serving.await.context("the serving task")??;
    store.close().await;
    Ok(())
}

/// Seconds `batches` appends of 1 KiB x 100 take through the client.
async fn append_over_loopback(dir: &Path, batches: u64, payload: &Bytes) -> Result<f64> {
    let store = store(dir).await?;
    let (url, shutdown, serving) = serve(&store).await?;
    let client = Client::new(&url)?;
    let records: Vec<Record> = (0..BATCH)
        .map(|_| Record {
            offset: 0,
            timestamp: SERVER_CLOCK,
            key: None,
            headers: Vec::new(),
            payload: payload.clone(),
        })
        .collect();
    // The first batch creates the topic and opens the connection; not timed.
    client.append_binary("bench", &records).await?;
    let started = Instant::now();
    for _ in 0..batches {
        client.append_binary("bench", &records).await?;
    }
    let secs = util::secs(started.elapsed());
    drop(client);
    stop(store, shutdown, serving).await?;
    Ok(secs)
}

/// Seconds `batches` appends of 1 KiB x 100 take through `Topic::append` in process.
async fn append_in_process(dir: &Path, batches: u64, payload: &Bytes) -> Result<f64> {
    let store = store(dir).await?;
    let topic = store.topic("bench").await?;
    let batch = |i: u64| -> Vec<NewRecord> {
        (0..BATCH as u64)
            .map(|j| NewRecord::new(BASE_TS + (i * BATCH as u64 + j) as i64, payload.clone()))
            .collect()
    };
    topic.append(batch(0)).await?;
    let started = Instant::now();
    for i in 1..=batches {
        topic.append(batch(i)).await?;
    }
    let secs = util::secs(started.elapsed());
    store.close().await;
    Ok(secs)
}

/// The append row: client over loopback against `Topic::append` in process.
pub(crate) async fn append(settings: &Settings, dir: &Path) -> Result<Row> {
    let payload = Bytes::from(util::payload(SIZE));
    let batches = (settings.append_bytes / (SIZE * BATCH) as u64).max(10);
    let (mut server, mut inproc) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..settings.rounds {
        let case = tempfile::tempdir_in(dir)?;
        inproc = inproc.min(append_in_process(&case.path().join("inproc"), batches, &payload).await?);
        server = server.min(append_over_loopback(&case.path().join("server"), batches, &payload).await?);
    }
    let records = batches * BATCH as u64;
    let bytes = records * SIZE as u64;
    Ok(Row::new(WORKLOAD, "append, 1 KiB x100, fsync=never, client binary append vs Topic::append")
        .throughput(records, bytes, server, Some(inproc))
        .target_at_least(0.8, ">= 0.8x in-process append")
        .detail(format!(
            "{batches} batches one at a time; baseline = Topic::append in process on the same deployment (hot only); best of {}",
            settings.rounds
        )))
}

/// The live-tail row: p99 from just before a client append to a following client
/// holding the record.
pub(crate) async fn live_tail(settings: &Settings, dir: &Path) -> Result<Row> {
    let case = tempfile::tempdir_in(dir)?;
    let store = store(case.path()).await?;
    let (url, shutdown, serving) = serve(&store).await?;
    let client = Client::new(&url)?;
    let record = |i: u64| Record {
        offset: 0,
        timestamp: BASE_TS + i as i64,
        key: None,
        headers: Vec::new(),
        payload: Bytes::from(util::payload(100)),
    };
    // Offset 0 creates the topic; the follower starts after it.
    client.append_binary("tail", &[record(0)]).await?;
    let count = settings.tail_records;
    let mut follow = client.read("tail", Start::Offset(1)).await?;
    let consumer = tokio::spawn(async move {
        let mut received = Vec::with_capacity(count as usize);
        while (received.len() as u64) < count {
            let r = follow.next().await.context("the follow stream ended")??;
            anyhow::ensure!(r.offset == received.len() as u64 + 1, "follower skipped to {}", r.offset);
            received.push(Instant::now());
        }
        Ok::<_, anyhow::Error>(received)
    });
    let rate = settings.tail_rate;
    let start = tokio::time::Instant::now();
    let mut sent = Vec::with_capacity(count as usize);
    for i in 0..count {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate as f64)).await;
        sent.push(Instant::now());
        client.append_binary("tail", &[record(i + 1)]).await?;
    }
    let received = tokio::time::timeout(Duration::from_secs(60), consumer)
        .await
        .context("the follower did not receive every record in 60 s")???;
    drop(client);
    stop(store, shutdown, serving).await?;
    let (ms, _) = tail::latencies(&sent, &received);
    let p99 = util::percentile(&ms, 99.0);
    Ok(Row::new(WORKLOAD, "live tail, 100 B x1, fsync=never, client append -> client follower")
        .target_checked("p99 <= 1 ms", p99 <= 1.0)
        .detail(format!(
            "{} records at {rate}/s: p50 {:.3} ms, p99 {p99:.3} ms, p999 {:.3} ms, max {:.3} ms (from just before the append is sent)",
            ms.len(),
            util::percentile(&ms, 50.0),
            util::percentile(&ms, 99.9),
            ms.last().copied().unwrap_or(f64::NAN),
        )))
}
