//! `tierlog consume`: reads a topic from any start position, stitched across the tiers,
//! as raw payload lines or JSON lines, to stdout or a file.

use std::io::{BufWriter, ErrorKind, Write};

use anyhow::{Context, anyhow};
use base64::Engine;
use futures::StreamExt;
use serde_json::{Value, json};
use tier_core::{Offset, Record, StartPosition, Timestamp, TopicName};
use tier_router::{Source, StoreConfig, TieredStore};

use crate::cli::{ConsumeArgs, Output};
use crate::cmd::served::{Run, add_to_runs, print_served};
use crate::cmd::{Ctx, inspect};
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

/// Bytes as a JSON string when they are UTF-8, else `{"base64": "..."}`.
fn bytes_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::String(s.to_owned()),
        Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

/// One record as a JSON object; `tier` is the tier that served it, when known (over a
/// server, from the JSON read's `tier`; a server that predates it does not say).
pub(crate) fn record_json(record: &Record, source: Option<Source>) -> Value {
    let mut value = json!({
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": record.key.as_deref().map(bytes_json),
        "headers": record.headers.iter().map(|h| json!({"name": bytes_json(&h.name), "value": bytes_json(&h.value)})).collect::<Vec<_>>(),
        "payload": bytes_json(&record.payload),
    });
    if let (Some(source), Some(object)) = (source, value.as_object_mut()) {
        object.insert("tier".into(), source.label().into());
    }
    value
}

fn write_record(out: &mut dyn Write, format: Output, record: &Record, source: Source) -> std::io::Result<()> {
    match format {
        Output::Raw => {
            out.write_all(&record.payload)?;
            out.write_all(b"\n")
        }
        Output::Json => {
            serde_json::to_writer(&mut *out, &record_json(record, Some(source)))?;
            out.write_all(b"\n")
        }
    }
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ConsumeArgs) -> anyhow::Result<u8> {
    let name = store::topic_name(&args.topic)?;
    if args.wait {
        // This process holds the data directory's lock while it reads, so no producer or
        // server could create the topic: the wait would never end.
        return Err(exit::usage(
            "--wait needs --server: a local consume holds the data directory's lock, so nothing \
             else can create the topic it would wait for",
        ));
    }
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
    check_recovered(ctx.config(), &name).await?;
    // No topic named at open: a reader must not create (or write state for) the topic
    // it asks for; `existing_topic` refuses one nothing holds.
    let store = store::open(ctx.config(), Vec::new(), false).await?;
    let mut runs = Vec::new();
    let result = consume(ctx, &store, &args, start, out.as_mut(), &mut runs).await;
    store.close().await;
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
    // Which tier served which offsets, on stderr (stdout may be the records).
    print_served(name.as_str(), count, &runs);
    if let Some(path) = &args.out {
        println!("consumed {count} records from {name} into {}", path.display());
    }
    Ok(exit::OK)
}

/// A topic the WAL lacks but the router's state directory or cold knows (a lost or new
/// data directory) is left to `recover`: opening it here would run recovery, which a
/// read must not do as a side effect.
async fn check_recovered(config: &StoreConfig, name: &TopicName) -> anyhow::Result<()> {
    if inspect::wal_topics(&config.hot.data_dir)?.contains(name) {
        return Ok(());
    }
    let mut known = inspect::state_topics(&inspect::state_dir(config))?.contains(name);
    if !known && let Some(cold) = &config.cold {
        known = inspect::cold_topics(&store::open_cold(cold).await?).await?.contains(name);
    }
    if known {
        return Err(anyhow!(
            "topic '{name}' is not in the WAL (a lost or new data directory?): run `tierlog recover` first, \
             which rebuilds it from the other tiers; a read does not run recovery"
        ));
    }
    Ok(())
}

async fn consume(
    ctx: &Ctx,
    store: &TieredStore,
    args: &ConsumeArgs,
    start: FromArg,
    out: &mut dyn Write,
    runs: &mut Vec<Run>,
) -> anyhow::Result<u64> {
    let topic = crate::store::existing_topic(store, &crate::store::topic_name(&args.topic)?).await?;
    let end = topic.high_watermark();
    let start = match start {
        FromArg::At(start) => start,
        FromArg::Last(n) => StartPosition::Offset(end.saturating_sub(n)),
    };
    if let StartPosition::Offset(o) = start
        && o > end
    {
        return Err(anyhow!(
            "offset {o} is beyond the end of topic {} (the next offset is {end})",
            topic.name()
        ));
    }
    // Without --follow the read ends at `end`: resolve the start offset first, so that a
    // start at or past the end reads nothing instead of waiting for new records. The
    // reader is opened from `start` itself (it resolves it the same way), so the seek is
    // counted by what was asked.
    let from = if args.follow { None } else { Some(topic.start_offset(start).await?) };
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
    let mut count = 0u64;
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
        write_record(out, args.output, &record, source)?;
        add_to_runs(runs, source, record.offset);
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
