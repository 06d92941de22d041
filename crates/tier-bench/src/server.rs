//! Workload 10, server loopback: `tierlog-server` serving a hot-only store in this
//! process on 127.0.0.1, driven by `tierlog-client`.
//!
//! - Append: 1 KiB x 100-record batches through the client — one POST per batch
//!   (`append_binary`), one append stream the tasks share (`append_stream`), and with
//!   eight in flight a stream per task — against `Topic::append` of the same batches in
//!   process on the same deployment, one batch in flight and eight; rounds alternate,
//!   best of each kept. Two deployments: `hot.fsync = "never"`, where the store's own
//!   work is a copy into the page cache and the transport's cost shows in full, and the
//!   default, `"always"` (every acknowledged batch fsynced, group commit), which is what
//!   `tierlog serve` runs unless told otherwise. Servers that read each batch and answer
//!   without storing it give the floors: the HTTP round trip of the POST, and the append
//!   stream's connection, alone.
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

/// A hot-only store (no background work) under `dir`, fsyncing as `fsync` says.
async fn store(dir: &Path, fsync: FsyncPolicy) -> Result<TieredStore> {
    Ok(TieredStore::builder()
        .hot(HotConfig::new(dir.join("hot")).with_fsync(fsync))
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

/// The 1 KiB x 100 batch of the append cases, as the client frames it.
fn client_batch(payload: &Bytes) -> Vec<Record> {
    (0..BATCH)
        .map(|_| Record {
            offset: 0,
            timestamp: SERVER_CLOCK,
            key: None,
            headers: Vec::new(),
            payload: payload.clone(),
        })
        .collect()
}

/// Seconds `batches` appends of `records` take through `client`, `in_flight` at a time
/// (that many tasks, each appending its share one batch after another). The tasks run
/// on the runtime's workers, as a program's would.
async fn client_appends(client: &Client, records: &[Record], batches: u64, in_flight: u64) -> Result<f64> {
    let (client, records): (Client, std::sync::Arc<[Record]>) = (client.clone(), records.into());
    timed_tasks(batches, in_flight, move |_| {
        let (client, records) = (client.clone(), records.clone());
        async move {
            client.append_binary("bench", &records).await?;
            Ok(())
        }
    })
    .await
}

/// Seconds `in_flight` tasks take to make `batches` appends in all (each its share, one
/// after another; `append(task)` makes one for the task numbered `task`). The tasks run
/// on the runtime's workers, as a program's would.
async fn timed_tasks<F, Fut>(batches: u64, in_flight: u64, append: F) -> Result<f64>
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let started = Instant::now();
    let tasks: Vec<_> = (0..in_flight)
        .map(|task| {
            let append = append.clone();
            tokio::spawn(async move {
                for _ in 0..batches / in_flight {
                    append(task).await?;
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(util::secs(started.elapsed()))
}

/// How the client appends in a loopback case.
#[derive(Clone, Copy)]
enum Transport {
    /// One `POST` per batch.
    Post,
    /// Append streams.
    Stream(Streams),
}

/// Seconds `batches` appends of 1 KiB x 100 take through the client over `transport`,
/// `in_flight` tasks each appending its share one batch after another.
async fn append_over_loopback(dir: &Path, case: &Case<'_>, transport: Transport) -> Result<f64> {
    let Case { fsync, batches, in_flight, payload } = *case;
    let store = store(dir, fsync).await?;
    let (url, shutdown, serving) = serve(&store).await?;
    let client = Client::new(&url)?;
    let secs = match transport {
        Transport::Post => {
            let records = client_batch(payload);
            // The first batch creates the topic and opens the connection; not timed.
            client.append_binary("bench", &records).await?;
            client_appends(&client, &records, batches, in_flight).await?
        }
        Transport::Stream(streams) => stream_appends(&client, streams, payload, batches, in_flight).await?,
    };
    drop(client);
    stop(store, shutdown, serving).await?;
    Ok(secs)
}

/// Seconds `batches` appends of 1 KiB x 100 take through a server that reads each body
/// and answers without decoding or storing it: the HTTP round trip over loopback alone
/// (one batch in flight).
async fn append_to_null_server(batches: u64, payload: &Bytes) -> Result<f64> {
    let app = axum::Router::new().route(
        "/v1/topics/{topic}/records",
        axum::routing::post(|body: Bytes| async move {
            axum::Json(tierlog_client::AppendResponse { start: 0, end: body.len() as u64 })
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let client = Client::new(&format!("http://{}", listener.local_addr()?))?;
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });
    let records = client_batch(payload);
    client.append_binary("bench", &records).await?;
    let secs = client_appends(&client, &records, batches, 1).await;
    serving.abort();
    secs
}

/// A server that answers an append stream's batches without decoding their records or
/// storing them: the stream's floor (the connection and the client alone).
async fn null_stream_session(io: hyper::upgrade::Upgraded) -> std::io::Result<()> {
    use tierlog_api::frame::{Decoder, Frame, encode_appended, encode_magic};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut io = hyper_util::rt::TokioIo::new(io);
    let (mut decoder, mut input, mut out) = (Decoder::new(), bytes::BytesMut::new(), bytes::BytesMut::new());
    encode_magic(&mut out);
    let mut next = 0;
    loop {
        input.reserve(128 << 10);
        if io.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        decoder.push_bytes(input.split().freeze());
        while let Some(frame) = decoder.next_frame().map_err(std::io::Error::other)? {
            if frame == Frame::End {
                encode_appended(&mut out, next, next + BATCH as u64);
                next += BATCH as u64;
            }
        }
        if !out.is_empty() {
            io.write_all(&out).await?;
            out.clear();
        }
    }
}

/// Seconds `batches` appends of 1 KiB x 100 take through one append stream to a server
/// that stores nothing ([`null_stream_session`]), `in_flight` tasks sharing it.
async fn append_to_null_stream(batches: u64, in_flight: u64, payload: &Bytes) -> Result<f64> {
    let app = axum::Router::new().route(
        "/v1/topics/{topic}/append-stream",
        axum::routing::post(|mut request: axum::extract::Request| async move {
            let upgrade = hyper::upgrade::on(&mut request);
            tokio::spawn(async move {
                if let Ok(io) = upgrade.await {
                    let _ = null_stream_session(io).await;
                }
            });
            axum::response::Response::builder()
                .status(axum::http::StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", tierlog_api::APPEND_STREAM_PROTOCOL)
                .body(axum::body::Body::empty())
                .expect("a valid response")
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let client = Client::new(&format!("http://{}", listener.local_addr()?))?;
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });
    let secs = stream_appends(&client, Streams::Shared, payload, batches, in_flight).await;
    serving.abort();
    secs
}

/// How the tasks of a stream case append: over one stream they share (as `tierlog
/// produce --server` does), or each over a stream of its own (as separate producers do).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Streams {
    Shared,
    PerTask,
}

/// Seconds `batches` appends of 1 KiB x 100 take through append streams of `client` (the
/// first batch of each, which creates the topic, not timed), `in_flight` tasks each
/// appending its share one batch after another.
async fn stream_appends(
    client: &Client,
    streams: Streams,
    payload: &Bytes,
    batches: u64,
    in_flight: u64,
) -> Result<f64> {
    let records: std::sync::Arc<[Record]> = client_batch(payload).into();
    let count = if streams == Streams::PerTask { in_flight } else { 1 };
    let mut opened = Vec::new();
    for _ in 0..count {
        let stream = client.append_stream("bench").await?;
        stream.append(&records).await?;
        opened.push(stream);
    }
    let opened: std::sync::Arc<[_]> = opened.into();
    timed_tasks(batches, in_flight, move |task| {
        let which = usize::try_from(task % count).expect("a task number fits a usize");
        let (stream, records) = (opened[which].clone(), records.clone());
        async move {
            stream.append(&records).await?;
            Ok(())
        }
    })
    .await
}

/// Seconds `batches` appends of 1 KiB x 100 take through `Topic::append` in process,
/// `in_flight` tasks appending at a time.
async fn append_in_process(dir: &Path, case: &Case<'_>) -> Result<f64> {
    let Case { fsync, batches, in_flight, payload } = *case;
    let store = store(dir, fsync).await?;
    let topic = store.topic("bench").await?;
    let batch = |payload: &Bytes| -> Vec<NewRecord> {
        (0..BATCH as u64).map(|j| NewRecord::new(BASE_TS + j as i64, payload.clone())).collect()
    };
    topic.append(batch(payload)).await?;
    let payload = payload.clone();
    let secs = timed_tasks(batches, in_flight, move |_| {
        let (topic, payload) = (topic.clone(), payload.clone());
        async move {
            topic.append(batch(&payload)).await?;
            Ok(())
        }
    })
    .await?;
    store.close().await;
    Ok(secs)
}

/// Batches in flight in the pipelined append case.
const PIPELINED: u64 = 8;

/// The deployments of the append rows, with their names in the rows: `never` first (the
/// hardest for the ratio: the store's work is a copy into the page cache), then the
/// default, `always`, what `tierlog serve` runs unless told otherwise.
const DEPLOYMENTS: [(FsyncPolicy, &str); 2] =
    [(FsyncPolicy::Never, "never"), (FsyncPolicy::Always, "always")];

/// One append case: the deployment, how many batches, how many in flight, the payload.
#[derive(Clone, Copy)]
struct Case<'a> {
    fsync: FsyncPolicy,
    batches: u64,
    in_flight: u64,
    payload: &'a Bytes,
}

/// Best-of-rounds seconds of one deployment's append cases at one depth.
#[derive(Clone, Copy)]
struct Best {
    inproc: f64,
    post: f64,
    stream: f64,
    /// With more than one in flight: a stream per task.
    per_task: f64,
}

/// Runs one deployment's append cases at one depth, `rounds` times interleaved.
async fn append_cases(settings: &Settings, dir: &Path, case: &Case<'_>) -> Result<Best> {
    let mut best =
        Best { inproc: f64::INFINITY, post: f64::INFINITY, stream: f64::INFINITY, per_task: f64::INFINITY };
    // Each case in a directory of its own, removed after it (its dirty pages dropped,
    // not written back), the file system's dirty pages written back before it.
    let fresh = || -> Result<tempfile::TempDir> {
        let case = tempfile::tempdir_in(dir)?;
        util::settle(dir)?;
        Ok(case)
    };
    for _ in 0..settings.rounds {
        best.inproc = best.inproc.min(append_in_process(fresh()?.path(), case).await?);
        best.post = best.post.min(append_over_loopback(fresh()?.path(), case, Transport::Post).await?);
        best.stream = best
            .stream
            .min(append_over_loopback(fresh()?.path(), case, Transport::Stream(Streams::Shared)).await?);
        if case.in_flight > 1 {
            best.per_task = best
                .per_task
                .min(append_over_loopback(fresh()?.path(), case, Transport::Stream(Streams::PerTask)).await?);
        }
    }
    Ok(best)
}

/// The append rows: client over loopback against `Topic::append` in process, one batch
/// in flight and [`PIPELINED`], on each of [`DEPLOYMENTS`], with the round trips to
/// servers that store nothing as the floors.
pub(crate) async fn append(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let payload = Bytes::from(util::payload(SIZE));
    let batches = (settings.append_bytes / (SIZE * BATCH) as u64).max(PIPELINED).next_multiple_of(PIPELINED);
    let records = batches * BATCH as u64;
    let bytes = records * SIZE as u64;
    let per_batch = |secs: f64| secs * 1e6 / batches as f64;
    // The floors do not depend on the deployment.
    let (mut null, mut null_stream) = (f64::INFINITY, [f64::INFINITY; 2]);
    for _ in 0..settings.rounds {
        null = null.min(append_to_null_server(batches, &payload).await?);
        for (floor, in_flight) in null_stream.iter_mut().zip([1, PIPELINED]) {
            *floor = floor.min(append_to_null_stream(batches, in_flight, &payload).await?);
        }
    }
    let mut rows = Vec::new();
    for (fsync, fsync_name) in DEPLOYMENTS {
        for (depth, in_flight) in [1, PIPELINED].into_iter().enumerate() {
            let case = Case { fsync, batches, in_flight, payload: &payload };
            let best = append_cases(settings, dir, &case).await?;
            let common = format!(
                "{batches} batches, {in_flight} in flight (as many tasks, each appending one batch after another; the in-process baseline the same); \
                 baseline = Topic::append in process on the same deployment (hot only, fsync={fsync_name}): {:.0} us per batch; best of {}",
                per_batch(best.inproc),
                settings.rounds,
            );
            let row = |what: &str, secs: f64, detail: String| {
                Row::new(
                    WORKLOAD,
                    format!("append, 1 KiB x100, {in_flight} in flight, fsync={fsync_name}, {what} vs Topic::append"),
                )
                .throughput(records, bytes, secs, Some(best.inproc))
                .target_at_least(0.8, ">= 0.8x in-process append")
                .detail(format!("{common}; {detail}"))
            };
            let mut post =
                format!("one POST per batch: {:.0} us per batch over loopback", per_batch(best.post));
            if in_flight == 1 {
                post.push_str(&format!(
                    "; floor: a server that stores nothing takes {:.0} us per batch",
                    per_batch(null)
                ));
            }
            rows.push(row("client binary append", best.post, post));
            rows.push(row(
                "client append stream",
                best.stream,
                format!(
                    "the tasks share one append stream (one connection, batches answered in order): {:.0} us per batch \
                     over loopback; floor: the same stream to a server that stores nothing takes {:.0} us per batch",
                    per_batch(best.stream),
                    per_batch(null_stream[depth]),
                ),
            ));
            if in_flight > 1 {
                rows.push(row(
                    "client append stream per task",
                    best.per_task,
                    format!(
                        "each task appends over an append stream of its own ({in_flight} connections): {:.0} us per batch over loopback",
                        per_batch(best.per_task),
                    ),
                ));
            }
        }
    }
    Ok(rows)
}

/// The live-tail row: p99 from just before a client append to a following client
/// holding the record.
pub(crate) async fn live_tail(settings: &Settings, dir: &Path) -> Result<Row> {
    let case = tempfile::tempdir_in(dir)?;
    let store = store(case.path(), FsyncPolicy::Never).await?;
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
    // The producer runs on the runtime's workers, as a program's would.
    let producer = tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut sent = Vec::with_capacity(count as usize);
        for i in 0..count {
            tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate as f64)).await;
            sent.push(Instant::now());
            client.append_binary("tail", &[record(i + 1)]).await?;
        }
        Ok::<_, anyhow::Error>((sent, client))
    });
    let (sent, client) = producer.await??;
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
