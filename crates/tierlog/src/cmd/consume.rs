//! `tierlog consume`: reads a topic from any start position, stitched across the tiers,
//! as raw payload lines or JSON lines, to stdout or a file.

use std::io::{BufWriter, ErrorKind, Write};
use std::time::Instant;

use anyhow::{Context, anyhow};
use base64::Engine;
use futures::StreamExt;
use metrics::{Counter, counter, histogram};
use serde_json::{Value, json};
use tier_core::{Offset, Record, StartPosition, Timestamp};
use tier_router::{Source, TieredStore, Topic};

use crate::cli::{ConsumeArgs, Output};
use crate::cmd::Ctx;
use crate::metrics::{READ_BYTES, READ_RECORDS, SEEK_BYTES, SEEK_REQUESTS, SEEK_SECONDS};
use crate::{exit, store};

/// Where `--from` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FromArg {
    /// A start position of the log.
    At(StartPosition),
    /// `-N`: the last N committed records (as of when the read starts).
    Last(u64),
}

/// Parses `--from`: `earliest`, `latest`, an offset, or `-N` for the last N records.
pub(crate) fn parse_from(text: &str) -> anyhow::Result<FromArg> {
    let bad = || exit::usage(format!("invalid --from {text:?}: expected earliest, latest, an offset or -N"));
    match text {
        "earliest" => Ok(FromArg::At(StartPosition::Earliest)),
        "latest" => Ok(FromArg::At(StartPosition::Latest)),
        _ => match text.strip_prefix('-') {
            Some(n) => n.parse::<u64>().map(FromArg::Last).map_err(|_| bad()),
            None => text.parse::<Offset>().map(|o| FromArg::At(StartPosition::Offset(o))).map_err(|_| bad()),
        },
    }
}

/// Parses `--at`: milliseconds since the epoch, or an RFC 3339 time.
pub(crate) fn parse_time(text: &str) -> anyhow::Result<Timestamp> {
    if let Ok(ms) = text.parse::<Timestamp>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(text).map_err(|e| {
        exit::usage(format!(
            "invalid --at {text:?}: {e} (expected RFC 3339 like 2024-05-01T12:00:00Z or ms since the epoch)"
        ))
    })?;
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| exit::usage(format!("--at {text:?} is before 1970")))?;
    Timestamp::try_from(ms.as_millis())
        .map_err(|_| exit::usage(format!("--at {text:?} is too far in the future")))
}

/// The metric label of a source.
pub(crate) fn source_label(source: Source) -> &'static str {
    match source {
        Source::Cold => "cold",
        Source::Warm => "warm",
        Source::Hot => "hot",
        Source::Live => "live",
    }
}

/// Per-source read counters, looked up once.
pub(crate) struct ReadCounters([(Counter, Counter); 4]);

impl ReadCounters {
    /// Handles of `tierlog_read_records_total` / `_bytes_total` for each source.
    pub(crate) fn new() -> Self {
        let pair = |s: Source| {
            let label = source_label(s);
            (counter!(READ_RECORDS, "tier" => label), counter!(READ_BYTES, "tier" => label))
        };
        Self([pair(Source::Cold), pair(Source::Warm), pair(Source::Hot), pair(Source::Live)])
    }

    /// Counts one record served by `source`.
    pub(crate) fn record(&self, source: Source, record: &Record) {
        let i = match source {
            Source::Cold => 0,
            Source::Warm => 1,
            Source::Hot => 2,
            Source::Live => 3,
        };
        self.0[i].0.increment(1);
        self.0[i].1.increment(record.payload.len() as u64);
    }
}

/// Bytes as a JSON string when they are UTF-8, else `{"base64": "..."}`.
fn bytes_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::String(s.to_owned()),
        Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

/// One record as a JSON object.
pub(crate) fn record_json(record: &Record) -> Value {
    json!({
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": record.key.as_deref().map(bytes_json),
        "headers": record.headers.iter().map(|h| json!({"name": bytes_json(&h.name), "value": bytes_json(&h.value)})).collect::<Vec<_>>(),
        "payload": bytes_json(&record.payload),
    })
}

fn write_record(out: &mut dyn Write, format: Output, record: &Record) -> std::io::Result<()> {
    match format {
        Output::Raw => {
            out.write_all(&record.payload)?;
            out.write_all(b"\n")
        }
        Output::Json => {
            serde_json::to_writer(&mut *out, &record_json(record))?;
            out.write_all(b"\n")
        }
    }
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ConsumeArgs) -> anyhow::Result<u8> {
    let name = store::topic_name(&args.topic)?;
    let start = match &args.at {
        Some(at) => FromArg::At(StartPosition::Timestamp(parse_time(at)?)),
        None => parse_from(&args.from)?,
    };
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    };
    let opened = store::open(ctx.config(), vec![name.clone()], false).await?;
    let result = consume(ctx, &opened, &args, start, out.as_mut()).await;
    store::close(opened).await;
    let count = match result {
        Ok(n) => n,
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == ErrorKind::BrokenPipe) => {
            return Ok(exit::OK);
        }
        Err(e) => return Err(e),
    };
    match out.flush() {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => return Ok(exit::OK),
        other => other.context("writing output")?,
    }
    if let Some(path) = &args.out {
        println!("consumed {count} records from {name} into {}", path.display());
    }
    Ok(exit::OK)
}

async fn consume(
    ctx: &Ctx,
    opened: &store::Opened,
    args: &ConsumeArgs,
    start: FromArg,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    let topic = opened.store.topic(&args.topic).await?;
    let end = topic.high_watermark();
    let start = match start {
        FromArg::At(start) => start,
        FromArg::Last(n) => StartPosition::Offset(end.saturating_sub(n)),
    };
    crate::cmd::status::record_export_lag(&topic).await;
    if let StartPosition::Offset(o) = start
        && o > end
    {
        return Err(anyhow!(
            "offset {o} is beyond the end of topic {} (the next offset is {end})",
            topic.name()
        ));
    }
    let by = match start {
        StartPosition::Earliest => "earliest",
        StartPosition::Latest => "latest",
        StartPosition::Offset(_) => "offset",
        StartPosition::Timestamp(_) => "timestamp",
    };
    counter!(SEEK_REQUESTS, "by" => by).increment(1);
    let seek_started = Instant::now();
    let seek_bytes_before = store::cold_get_bytes(opened.cold.as_ref());
    // Without --follow the read ends at `end`: resolve the start offset first, so that a
    // start at or past the end reads nothing instead of waiting for new records.
    let (start, from) = if args.follow {
        (start, None)
    } else {
        let from = resolve_start(&opened.store, &topic, start, end).await?;
        (StartPosition::Offset(from), Some(from))
    };
    if from.is_some_and(|f| f >= end) {
        return Ok(0);
    }
    let mut reader = topic.reader_with_source(start).await?;
    let max = args.max.unwrap_or(u64::MAX);
    let total = from.map(|f| (end - f).min(max));
    let bar = ctx.progress.bar(total, "consuming", "records");
    if args.out.is_none() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let counters = ReadCounters::new();
    let mut count = 0u64;
    let mut first = true;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    while count < max {
        let item = if args.follow {
            tokio::select! {
                item = reader.next() => item,
                _ = &mut ctrl_c => break,
            }
        } else {
            reader.next().await
        };
        let Some(item) = item else { break };
        let (source, record) = item.with_context(|| format!("reading {}", topic.name()))?;
        if !args.follow && record.offset >= end {
            break;
        }
        if first {
            first = false;
            histogram!(SEEK_SECONDS).record(seek_started.elapsed().as_secs_f64());
            counter!(SEEK_BYTES).increment(store::cold_get_bytes(opened.cold.as_ref()) - seek_bytes_before);
        }
        counters.record(source, &record);
        write_record(out, args.output, &record)?;
        count += 1;
        bar.inc(1);
        if !args.follow && record.offset + 1 >= end {
            break;
        }
        if args.follow {
            out.flush()?;
        }
    }
    bar.finish_and_clear();
    Ok(count)
}

/// The offset a reader from `start` begins at, the way the router resolves it: the
/// oldest offset any tier holds, the commit point, or the first offset at or after a
/// time (asking cold, then warm, then the WAL).
async fn resolve_start(
    store: &TieredStore,
    topic: &Topic,
    start: StartPosition,
    end: Offset,
) -> anyhow::Result<Offset> {
    Ok(match start {
        StartPosition::Offset(o) => o,
        StartPosition::Latest => end,
        StartPosition::Earliest => {
            let r = topic.ranges().await?;
            [Some(r.hot), r.warm, r.cold]
                .into_iter()
                .flatten()
                .filter(|r| !r.is_empty())
                .map(|r| r.start)
                .min()
                .unwrap_or(end)
                .min(end)
        }
        StartPosition::Timestamp(t) => {
            let name = topic.name();
            let mut found = None;
            if let Some(cold) = store.cold() {
                found = cold.offset_for_timestamp(name, t).await?;
            }
            if found.is_none()
                && let Some(warm) = store.warm()
            {
                found = warm.offset_for_timestamp(name, t).await?;
            }
            if found.is_none() {
                found = store.wal().offset_for_timestamp(name, t).await?;
            }
            found.unwrap_or(end).min(end)
        }
    })
}
