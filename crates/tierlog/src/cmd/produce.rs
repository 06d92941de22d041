//! `tierlog produce`: appends lines of stdin or a file, or synthetic records, in batches,
//! optionally rate-limited.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use futures::FutureExt;
use tier_core::{OffsetRange, Timestamp, TopicName};
use tier_router::{NewRecord, RecordBatchBuilder, TieredStore, Topic};
use tokio::sync::mpsc;

use crate::cli::ProduceArgs;
use crate::cmd::Ctx;
use crate::units::{count, format_size, parse_size, rates};
use crate::{exit, store};

/// Lines buffered between the reading thread and the appender.
const LINE_QUEUE: usize = 16 * 1024;

/// Payload bytes at which a batch is cut before `--batch` records: well under the largest
/// record batch (64 MiB, `tier_core::MAX_BATCH_LEN`) and the server's default body limit,
/// so large records are sent in several batches instead of one that is refused. A single
/// record larger than this still goes alone (and is refused only over the limit).
pub(crate) const BATCH_BYTES: usize = 8 << 20;

/// Records per batch for synthetic records of `size` bytes: `batch`, fewer when that many
/// would pass [`BATCH_BYTES`], at least one.
pub(crate) fn synthetic_batch(batch: usize, size: usize) -> usize {
    batch.min((BATCH_BYTES / size.max(1)).max(1))
}

/// Milliseconds since the Unix epoch.
// Record timestamps are the producer's wall-clock time, and the CLI is the producer
#[allow(clippy::disallowed_methods)]
pub(crate) fn now_ms() -> Timestamp {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as Timestamp)
}

/// Where the records come from.
enum Input {
    /// Lines read by a thread from stdin or a file, and a line held back because it
    /// would have taken the previous batch past [`BATCH_BYTES`].
    Lines(mpsc::Receiver<std::io::Result<Vec<u8>>>, Option<Vec<u8>>),
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
    let mut acks = open_acks(args.acks.as_deref())?;
    let input = match args.count {
        Some(count) => Input::Synthetic {
            next: 0,
            count,
            size: usize::try_from(size).map_err(|_| exit::usage("--size is too large"))?,
        },
        None => Input::Lines(spawn_line_reader(args.file.clone(), !args.keep_cr)?, None),
    };
    // Polled once here so the handler is installed before the first record is read:
    // from now on Ctrl-C ends the run with a report instead of killing the process.
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    if let Some(result) = (&mut ctrl_c).now_or_never() {
        result.context("installing the Ctrl-C handler")?;
    }
    // The topic is opened with its first batch (see `produce`), not at open.
    let store = store::open(ctx.config(), Vec::new(), true).await?;
    // The elapsed time shown to the user is real time
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let bar = ctx.progress.bar(args.count, "producing", "records");
    let mut topic = None;
    let run = produce(&store, &name, &mut topic, input, &args, &mut acks, ctrl_c, &|n| bar.inc(n)).await;
    bar.finish_and_clear();
    // Committed records the cold tier does not hold yet (None without cold).
    let not_in_cold = match &topic {
        Some(topic) => {
            topic.ranges().await.ok().and_then(|r| r.cold.map(|c| r.committed.saturating_sub(c.end)))
        }
        None => None,
    };
    store.close().await;
    let produced = &run.produced;
    let secs = started.elapsed().as_secs_f64();
    let stored = match produced.range {
        Some(r) => format!("{} acknowledged at offsets {r}", count(produced.records, "record")),
        None => "no records acknowledged".to_owned(),
    };
    if let Some(e) = run.error {
        let e = if produced.records == 0 { e } else { e.context(format!("{stored}, then")) };
        if args.json {
            print_summary(&name, produced, secs, Ending::Failed(&e), not_in_cold, LOCAL_EXPORT_HINT, true)?;
        }
        return Err(e);
    }
    let ending = if run.interrupted { Ending::Interrupted } else { Ending::Done };
    print_summary(&name, produced, secs, ending, not_in_cold, LOCAL_EXPORT_HINT, args.json)?;
    if run.interrupted {
        eprintln!("interrupted: {stored}; the store was closed");
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::OK)
}

/// What uploads the records a local run leaves out of cold.
pub(crate) const LOCAL_EXPORT_HINT: &str = "`tierlog export` or `tierlog maintain` uploads them";

/// How a run ended, for its summary.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ending<'a> {
    /// The input ended and every batch was acknowledged.
    Done,
    /// Ctrl-C stopped it.
    Interrupted,
    /// An error stopped it (the JSON summary carries it; as text, the error says what was
    /// stored instead).
    Failed(&'a anyhow::Error),
}

/// Prints what a run stored, as text or one JSON object; `export_hint` says what uploads
/// the `not_in_cold` records.
pub(crate) fn print_summary(
    name: &TopicName,
    produced: &Produced,
    secs: f64,
    ending: Ending<'_>,
    not_in_cold: Option<u64>,
    export_hint: &str,
    json: bool,
) -> anyhow::Result<()> {
    let (rps, mbps) = rates(produced.records, produced.bytes, secs);
    if json {
        let mut summary = serde_json::json!({
            "topic": name.as_str(),
            "records": produced.records,
            "bytes": produced.bytes,
            "start": produced.range.map(|r| r.start),
            "end": produced.range.map(|r| r.end),
            "seconds": secs,
            "interrupted": matches!(ending, Ending::Interrupted),
            "not_in_cold": not_in_cold,
        });
        if let Ending::Failed(e) = ending {
            summary["error"] = exit::message(e).into();
            let may_commit = may_commit(e);
            summary["may_commit"] = may_commit.map(|r| [r.start, r.end]).into();
            summary["outcome_unknown"] = (may_commit.is_some() || outcome_unknown(e)).into();
        }
        println!("{}", serde_json::to_string(&summary)?);
        return Ok(());
    }
    let offsets = produced.range.map_or_else(|| "none".to_owned(), |r| r.to_string());
    let cold = match not_in_cold {
        Some(0) | None => String::new(),
        Some(n) => format!("; {} not yet in cold ({export_hint})", count(n, "record")),
    };
    println!(
        "produced {} ({}) to {name} at offsets {offsets} in {secs:.2} s: {rps:.0} records/s, {mbps:.2} MB/s{cold}",
        count(produced.records, "record"),
        format_size(produced.bytes),
    );
    Ok(())
}

/// The offsets a refused append's records may still be committed at (its outcome is
/// unknown: `TierError::may_commit`, or the server's answer of it), if the error says.
pub(crate) fn may_commit(error: &anyhow::Error) -> Option<OffsetRange> {
    error.chain().find_map(|cause| {
        if let Some(e) = cause.downcast_ref::<tier_core::TierError>() {
            e.may_commit()
        } else {
            let e = cause.downcast_ref::<tierlog_client::Error>()?;
            e.may_commit().map(|r| OffsetRange::new(r.start, r.end))
        }
    })
}

/// Whether the batch that failed was sent and may have been stored at offsets nobody
/// was told (an append stream cut before its answer came).
fn outcome_unknown(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<tierlog_client::Error>(),
            Some(tierlog_client::Error::Stream { outcome_unknown: true, .. })
        )
    })
}

/// Where acknowledgements go: nowhere, stdout (`-`) or a file created (truncated) now.
pub(crate) fn open_acks(path: Option<&Path>) -> anyhow::Result<Option<Box<dyn Write + Send>>> {
    Ok(match path {
        None => None,
        Some(p) if p == Path::new("-") => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(
            std::fs::File::create(p).with_context(|| format!("cannot create --acks file {}", p.display()))?,
        )),
    })
}

/// Writes one acknowledged batch as a JSON line and flushes it.
pub(crate) fn write_ack(out: &mut dyn Write, range: OffsetRange) -> std::io::Result<()> {
    /// The line's fields in the documented order (`json!` sorts them).
    #[derive(serde::Serialize)]
    struct AckLine {
        start: u64,
        end: u64,
        count: u64,
    }
    let line = AckLine { start: range.start, end: range.end, count: range.len() };
    serde_json::to_writer(&mut *out, &line)?;
    writeln!(out)?;
    out.flush()
}

/// Reads lines (without their `\n`, and without a `\r` before it when `strip_cr`) on a thread, so a blocked stdin never blocks the
/// runtime.
fn spawn_line_reader(
    file: Option<PathBuf>,
    strip_cr: bool,
) -> anyhow::Result<mpsc::Receiver<std::io::Result<Vec<u8>>>> {
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
                        if strip_cr && line.last() == Some(&b'\r') {
                            line.pop();
                        }
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

/// The next batch of at most `max` payloads and, unless one payload alone is larger, at
/// most [`BATCH_BYTES`]; empty at the end of the input. Lines already read are appended
/// at once rather than waiting for a full batch.
async fn next_batch(input: &mut Input, max: usize) -> anyhow::Result<Vec<Bytes>> {
    let mut batch = Vec::new();
    match input {
        Input::Lines(rx, held) => {
            let first = match held.take() {
                Some(line) => line,
                None => match rx.recv().await {
                    Some(line) => line.context("reading input")?,
                    None => return Ok(batch),
                },
            };
            let mut bytes = first.len();
            batch.push(Bytes::from(first));
            while batch.len() < max {
                let Ok(line) = rx.try_recv() else { break };
                let line = line.context("reading input")?;
                if bytes + line.len() > BATCH_BYTES {
                    *held = Some(line);
                    break;
                }
                bytes += line.len();
                batch.push(Bytes::from(line));
            }
        }
        Input::Synthetic { next, count, size } => {
            let max = synthetic_batch(max, *size);
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

/// How a produce loop ended.
struct RunOutcome {
    /// What was acknowledged.
    produced: Produced,
    /// Ctrl-C stopped it.
    interrupted: bool,
    /// The error that stopped it, after `produced` was acknowledged.
    error: Option<anyhow::Error>,
}

/// Appends everything `input` yields, in batches of `args.batch` (fewer under a low
/// `--rate`, so the limit is smooth), calling `progress` with each batch's size and
/// writing each acknowledged batch to `acks`, until the input ends, `ctrl_c` fires
/// (between batches: an append under way is awaited) or an error. `topic` is opened
/// once the first batch is known to fit, so that a refused write leaves no trace.
#[expect(clippy::too_many_arguments, reason = "one call site; the pieces are the run's parts")]
async fn produce(
    store: &TieredStore,
    name: &TopicName,
    topic: &mut Option<Topic>,
    mut input: Input,
    args: &ProduceArgs,
    acks: &mut Option<Box<dyn Write + Send>>,
    mut ctrl_c: Pin<Box<impl Future<Output = std::io::Result<()>>>>,
    progress: &dyn Fn(u64),
) -> RunOutcome {
    let mut max = usize::try_from(args.batch).unwrap_or(usize::MAX);
    if let Some(rate) = args.rate {
        max = max.min(((rate / 10.0).ceil() as usize).max(1));
    }
    let key = args.key.clone().map(Bytes::from);
    let started = tokio::time::Instant::now();
    let mut outcome = RunOutcome { produced: Produced::default(), interrupted: false, error: None };
    let produced = &mut outcome.produced;
    loop {
        let payloads = tokio::select! {
            biased;
            _ = &mut ctrl_c => {
                outcome.interrupted = true;
                break;
            }
            payloads = next_batch(&mut input, max) => payloads,
        };
        let payloads = match payloads {
            Ok(p) if p.is_empty() => break,
            Ok(p) => p,
            Err(e) => {
                outcome.error = Some(e);
                break;
            }
        };
        let count = payloads.len() as u64;
        let bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
        let now = now_ms();
        let records: Vec<NewRecord> = payloads
            .into_iter()
            .map(|payload| NewRecord { timestamp: now, key: key.clone(), headers: Vec::new(), payload })
            .collect();
        let opened = match topic.take() {
            Some(t) => t,
            None => match open_checked(store, name, &records).await {
                Ok(t) => t,
                Err(e) => {
                    outcome.error = Some(e);
                    break;
                }
            },
        };
        let appended = append(&opened, records).await;
        *topic = Some(opened);
        let range = match appended {
            Ok(range) => range,
            Err(e) => {
                outcome.error = Some(e);
                break;
            }
        };
        let first = produced.range.map_or(range.start, |r| r.start);
        produced.range = Some(OffsetRange::new(first, range.end));
        produced.records += count;
        produced.bytes += bytes;
        progress(count);
        if let Some(out) = acks.as_mut()
            && let Err(e) = write_ack(out.as_mut(), range)
        {
            outcome.error = Some(anyhow::Error::new(e).context("writing --acks"));
            break;
        }
        if let Some(rate) = args.rate {
            let due = started + Duration::from_secs_f64(produced.records as f64 / rate);
            tokio::select! {
                biased;
                _ = &mut ctrl_c => {
                    outcome.interrupted = true;
                    break;
                }
                () = tokio::time::sleep_until(due) => {}
            }
        }
    }
    outcome
}

/// Opens topic `name` once `records`, its first batch, are known to fit in one batch (the
/// check [`Topic::append`] makes): opening records the topic in the state directory, and a
/// refused write must leave no trace.
async fn open_checked(store: &TieredStore, name: &TopicName, records: &[NewRecord]) -> anyhow::Result<Topic> {
    let mut builder = RecordBatchBuilder::new();
    for r in records {
        builder
            .push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload)
            .with_context(|| format!("appending to {name}: refused, nothing was written"))?;
    }
    Ok(store.topic(name.as_str()).await?)
}

/// Appends `records` (the library counts the append metrics).
pub(crate) async fn append(topic: &Topic, records: Vec<NewRecord>) -> anyhow::Result<OffsetRange> {
    topic.append(records).await.with_context(|| format!("appending to {}", topic.name()))
}

#[cfg(test)]
mod tests {
    use tier_core::{ErrorContext, TierError, TierKind};

    use super::*;

    #[test]
    fn a_refusal_whose_outcome_is_unknown_names_its_offsets_through_the_context_added() {
        let range = OffsetRange::new(10, 20);
        let refused =
            TierError::unavailable(ErrorContext::tier(TierKind::Hot).may_commit(range), "fsync failed");
        let e =
            anyhow::Error::new(refused).context("appending to t").context("10 records acknowledged, then");
        assert_eq!(may_commit(&e), Some(range));
        assert!(!outcome_unknown(&e), "only a cut stream says so without offsets");
        let not_written =
            anyhow::Error::new(TierError::unavailable(ErrorContext::tier(TierKind::Hot), "disk full"));
        assert_eq!(may_commit(&not_written), None);
        let cut = anyhow::Error::new(tierlog_client::Error::Stream {
            message: "cut".into(),
            outcome_unknown: true,
        })
        .context("appending to t");
        assert_eq!((may_commit(&cut), outcome_unknown(&cut)), (None, true));
        let unsent = anyhow::Error::new(tierlog_client::Error::Stream {
            message: "cut".into(),
            outcome_unknown: false,
        });
        assert!(!outcome_unknown(&unsent));
    }
}
