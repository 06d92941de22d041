//! `tierlog produce`: appends lines of stdin or a file, or synthetic records, in batches,
//! optionally rate-limited.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use tier_core::{Offset, OffsetRange, Timestamp};
use tier_router::{NewRecord, Topic};
use tokio::sync::mpsc;

use crate::cli::ProduceArgs;
use crate::cmd::Ctx;
use crate::units::{format_size, parse_size, rates};
use crate::{exit, store};

/// Lines buffered between the reading thread and the appender.
const LINE_QUEUE: usize = 16 * 1024;

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> Timestamp {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as Timestamp)
}

/// Where the records come from.
enum Input {
    /// Lines read by a thread from stdin or a file.
    Lines(mpsc::Receiver<std::io::Result<Vec<u8>>>),
    /// Synthetic records `next..count` of `size` bytes.
    Synthetic { next: u64, count: u64, size: usize },
}

/// What a produce run did.
#[derive(Debug, Default)]
pub(crate) struct Produced {
    /// Records appended.
    pub(crate) records: u64,
    /// Payload bytes appended.
    pub(crate) bytes: u64,
    /// Offsets assigned.
    pub(crate) range: Option<OffsetRange>,
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ProduceArgs) -> anyhow::Result<u8> {
    let name = store::topic_name(&args.topic)?;
    let size = parse_size(&args.size).map_err(exit::usage)?;
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(exit::usage("--rate must be a positive number of records per second"));
    }
    let input = match args.count {
        Some(count) => Input::Synthetic {
            next: 0,
            count,
            size: usize::try_from(size).map_err(|_| exit::usage("--size is too large"))?,
        },
        None => Input::Lines(spawn_line_reader(args.file.clone())?),
    };
    let store = store::open(ctx.config(), vec![name.clone()], true).await?;
    let started = Instant::now();
    let result = async {
        let topic = store.topic(name.as_str()).await?;
        let bar = ctx.progress.bar(args.count, "producing", "records");
        let produced = produce(&topic, input, &args, &|n| bar.inc(n)).await;
        bar.finish_and_clear();
        anyhow::Ok(produced?)
    }
    .await;
    store.close().await;
    let produced = result?;
    let secs = started.elapsed().as_secs_f64();
    let (rps, mbps) = rates(produced.records, produced.bytes, secs);
    let offsets = produced.range.map_or_else(|| "none".to_owned(), |r| r.to_string());
    println!(
        "produced {} records ({}) to {} at offsets {offsets} in {secs:.2} s: {rps:.0} records/s, {mbps:.2} MB/s",
        produced.records,
        format_size(produced.bytes),
        name
    );
    Ok(exit::OK)
}

/// Reads lines (without their `\n`) on a thread, so a blocked stdin never blocks the
/// runtime.
fn spawn_line_reader(file: Option<PathBuf>) -> anyhow::Result<mpsc::Receiver<std::io::Result<Vec<u8>>>> {
    let source: Box<dyn Read + Send> = match &file {
        Some(path) => Box::new(
            std::fs::File::open(path)
                .with_context(|| format!("cannot open input file {}", path.display()))?,
        ),
        None => Box::new(std::io::stdin()),
    };
    let (tx, rx) = mpsc::channel(LINE_QUEUE);
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 20, source);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    if tx.blocking_send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    Ok(rx)
}

/// The next batch of at most `max` payloads; empty at the end of the input. Lines
/// already read are appended at once rather than waiting for a full batch.
async fn next_batch(input: &mut Input, max: usize) -> anyhow::Result<Vec<Bytes>> {
    let mut batch = Vec::new();
    match input {
        Input::Lines(rx) => {
            let Some(first) = rx.recv().await else { return Ok(batch) };
            batch.push(Bytes::from(first.context("reading input")?));
            while batch.len() < max {
                match rx.try_recv() {
                    Ok(line) => batch.push(Bytes::from(line.context("reading input")?)),
                    Err(_) => break,
                }
            }
        }
        Input::Synthetic { next, count, size } => {
            while batch.len() < max && *next < *count {
                batch.push(synthetic_payload(*next, *size));
                *next += 1;
            }
        }
    }
    Ok(batch)
}

/// Record `i` of a synthetic run: `record-<i> ` padded with `x` to `size` bytes.
pub(crate) fn synthetic_payload(i: u64, size: usize) -> Bytes {
    let mut payload = format!("record-{i} ").into_bytes();
    payload.resize(size, b'x');
    Bytes::from(payload)
}

/// Appends everything `input` yields, in batches of `args.batch` (fewer under a low
/// `--rate`, so the limit is smooth), calling `progress` with each batch's size.
async fn produce(
    topic: &Topic,
    mut input: Input,
    args: &ProduceArgs,
    progress: &dyn Fn(u64),
) -> anyhow::Result<Produced> {
    let mut max = usize::try_from(args.batch).unwrap_or(usize::MAX);
    if let Some(rate) = args.rate {
        max = max.min(((rate / 10.0).ceil() as usize).max(1));
    }
    let key = args.key.clone().map(Bytes::from);
    let started = tokio::time::Instant::now();
    let mut produced = Produced::default();
    let mut first: Option<Offset> = None;
    loop {
        let payloads = next_batch(&mut input, max).await?;
        if payloads.is_empty() {
            break;
        }
        let count = payloads.len() as u64;
        let bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
        let now = now_ms();
        let records = payloads
            .into_iter()
            .map(|payload| NewRecord { timestamp: now, key: key.clone(), headers: Vec::new(), payload })
            .collect();
        let range = append(topic, records).await?;
        first.get_or_insert(range.start);
        produced.range = Some(OffsetRange::new(first.unwrap_or(range.start), range.end));
        produced.records += count;
        produced.bytes += bytes;
        progress(count);
        if let Some(rate) = args.rate {
            let due = started + Duration::from_secs_f64(produced.records as f64 / rate);
            tokio::time::sleep_until(due).await;
        }
    }
    Ok(produced)
}

/// Appends `records` (the library counts the append metrics).
pub(crate) async fn append(topic: &Topic, records: Vec<NewRecord>) -> anyhow::Result<OffsetRange> {
    topic.append(records).await.with_context(|| format!("appending to {}", topic.name()))
}
