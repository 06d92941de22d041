//! `produce`, `consume`, `status`, `export` and `verify` against a running `tierlog serve`
//! (`--server URL`, or the `[client]` table's `server`), through `tierlog-client`, instead
//! of opening the store: the same arguments and output as the local commands
//! (`produce.rs`, `consume.rs`, `status.rs`, `export.rs`, `verify.rs`, whose parsers, JSON
//! form and table are used here) where the API's answers hold the data, the records
//! travelling in the binary framing (JSON lines for `consume --output json`, which say
//! each record's tier). A `consume --follow` reconnects when the server goes away and
//! resumes after the last record it printed.

use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use tier_core::{Header, OffsetRange, Record, Secret, StartPosition, TopicName};
use tier_router::Source;
use tierlog_client::{
    Client, ErrorKind as ApiKind, FollowEvent, FollowStream, RangeJson, Reconnect, Record as WireRecord,
    SERVER_CLOCK, Served, ServedStream, Start, Tier, TopicInfo,
};
use tokio::sync::mpsc;

use crate::cli::{
    Command, ConsumeArgs, ExportArgs, Global, Output, ProduceArgs, RecoverArgs, StatusArgs, VerifyArgs,
};
use crate::cmd::Ctx;
use crate::cmd::consume::{FromArg, parse_from, parse_time, record_json};
use crate::cmd::produce::{
    BATCH_BYTES, Ending, Produced, open_acks, print_summary, synthetic_batch, synthetic_payload, write_ack,
};
use crate::cmd::recover::{Found, resume_failed};
use crate::cmd::served::{add_to_runs, print_served};
use crate::cmd::status::{Pending, TierStatus, TopicStatus, print_table};
use crate::units::{count, parse_size};
use crate::{exit, store};

/// The `[client]` table: where `produce`, `consume`, `status`, `export` and `verify` find
/// a server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ClientConfig {
    /// The server's URL (`http://127.0.0.1:7171`); `--server` overrides it.
    pub(crate) server: Option<String>,
    /// Bearer token sent to it (`Debug` prints `***`).
    pub(crate) token: Option<Secret>,
    /// CA certificate (PEM) to trust for an HTTPS server, e.g. a self-signed one.
    pub(crate) ca_cert: Option<PathBuf>,
}

/// Whether `command` can talk to a server.
fn remote_capable(command: &Command) -> bool {
    matches!(
        command,
        Command::Produce(_)
            | Command::Consume(_)
            | Command::Status(_)
            | Command::Export(_)
            | Command::Verify(_)
            | Command::Recover(_)
    )
}

/// The client of the server named by `--server` or `client.server`, if any. `--server`
/// with a command that cannot talk to a server is a usage error.
pub(crate) fn client(
    global: &Global,
    command: &Command,
    config: &ClientConfig,
) -> anyhow::Result<Option<Client>> {
    if global.server.is_some() && !remote_capable(command) {
        return Err(exit::usage(
            "--server is taken by produce, consume, status, export, verify and recover only",
        ));
    }
    let Some(url) = global.server.as_deref().or(config.server.as_deref()) else { return Ok(None) };
    let mut builder = Client::builder(url);
    if let Some(token) = &config.token {
        builder = builder.token(token.expose());
    }
    if let Some(path) = &config.ca_cert {
        let pem =
            std::fs::read(path).with_context(|| format!("cannot read client.ca_cert {}", path.display()))?;
        builder = builder.ca_certificate_pem(pem);
    }
    Ok(Some(builder.build().with_context(|| format!("the client of {url}"))?))
}

/// Batches a remote `produce` keeps in flight on its append stream.
const IN_FLIGHT: usize = 8;

/// Payload bytes a remote `produce` keeps in flight (a larger batch goes alone).
const IN_FLIGHT_BYTES: u64 = 64 << 20;

/// A batch sent and its answer to come, with the run's number of its first record
/// (from 1), its records and its payload bytes.
type InFlight = futures::future::BoxFuture<
    'static,
    (Result<tierlog_client::AppendResponse, tierlog_client::Error>, u64, u64, u64),
>;

/// `produce` through the server: batches of `--batch` records over one append stream, up
/// to [`IN_FLIGHT`] (and [`IN_FLIGHT_BYTES`]) sent before their answers come, which
/// arrive in order (`--acks` is written in that order). The first refused batch stops
/// the run: nothing more is sent, the batches under way are answered (and acknowledged
/// if they were: they may be stored after the refused one), and the error names the
/// refused batch's records and what was acknowledged. Ctrl-C stops
/// sending, awaits the batches under way, prints the summary and what was acknowledged,
/// and exits 130, as the local command does.
pub(crate) async fn produce(ctx: &Ctx, client: &Client, args: &ProduceArgs) -> anyhow::Result<u8> {
    let name = store::topic_name(&args.topic)?;
    let size = usize::try_from(parse_size(&args.size).map_err(exit::usage)?)
        .map_err(|_| exit::usage("--size is too large"))?;
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(exit::usage("--rate must be a positive number of records per second"));
    }
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    let mut acks = open_acks(args.acks.as_deref())?;
    // Polled once here so the handler is installed before the first record is read:
    // from now on Ctrl-C ends the run with a report instead of killing the process.
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    if let Some(result) = (&mut ctrl_c).now_or_never() {
        result.context("installing the Ctrl-C handler")?;
    }
    let stream = client
        .append_stream(name.as_str())
        .await
        .with_context(|| format!("opening an append stream to {name}"))?;
    let mut batches = match args.count {
        Some(count) => synthetic(count, size, batch),
        None => lines(args.file.clone(), batch, !args.keep_cr)?,
    };
    let key = args.key.clone().map(Bytes::from);
    let bar = ctx.progress.bar(args.count, "producing", "records");
    // The elapsed time shown to the user is real time
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let mut produced = Produced::default();
    let mut acknowledged = Acknowledged::default();
    let mut interrupted = false;
    let mut in_flight: futures::stream::FuturesOrdered<InFlight> = futures::stream::FuturesOrdered::new();
    let mut in_flight_bytes = 0u64;
    let mut sent = 0u64;
    let mut input_done = false;
    // The first error: the run stops sending and reports it once the answers are in.
    let mut failed: Option<anyhow::Error> = None;
    loop {
        let room = in_flight.len() < IN_FLIGHT && (in_flight.is_empty() || in_flight_bytes < IN_FLIGHT_BYTES);
        let sending = !input_done && !interrupted && failed.is_none();
        if !sending && in_flight.is_empty() {
            break;
        }
        // Pace: the records sent so far are due at `records / rate` seconds.
        let due = args.rate.map(|rate| started + Duration::from_secs_f64(sent as f64 / rate));
        tokio::select! {
            biased;
            Some((answer, first, records, bytes)) = in_flight.next() => {
                in_flight_bytes -= bytes;
                match answer {
                    Ok(answer) => {
                        let range = OffsetRange::new(answer.start, answer.end);
                        produced.records += records;
                        produced.bytes += bytes;
                        acknowledged.add(range);
                        if let Some(out) = acks.as_mut()
                            && let Err(e) = write_ack(out, range)
                        {
                            failed.get_or_insert(anyhow::Error::new(e).context("writing --acks"));
                        }
                        bar.inc(records);
                    }
                    Err(e) => {
                        let last = first + records - 1;
                        failed.get_or_insert(anyhow::Error::new(e).context(format!(
                            "appending to {name}: the batch of this run's records {first} to {last} (counting from 1) was refused"
                        )));
                    }
                }
            }
            _ = &mut ctrl_c, if sending => interrupted = true,
            payloads = async {
                if let Some(due) = due {
                    tokio::time::sleep_until(due.into()).await;
                }
                batches.recv().await
            }, if sending && room => {
                let Some(payloads) = payloads else {
                    input_done = true;
                    continue;
                };
                let payloads = match payloads {
                    Ok(payloads) => payloads,
                    Err(e) => {
                        failed.get_or_insert(anyhow::Error::new(e).context("reading input"));
                        continue;
                    }
                };
                let framed: Vec<WireRecord> = payloads
                    .into_iter()
                    .map(|payload| WireRecord { timestamp: SERVER_CLOCK, key: key.clone(), payload, ..WireRecord::default() })
                    .collect();
                let records = framed.len() as u64;
                let bytes = framed.iter().map(|r| r.payload.len() as u64).sum::<u64>();
                match stream.queue(&framed).await {
                    Ok(pending) => {
                        let first = sent + 1;
                        sent += records;
                        in_flight_bytes += bytes;
                        in_flight.push_back(pending.map(move |answer| (answer, first, records, bytes)).boxed());
                    }
                    Err(e) => {
                        failed.get_or_insert(anyhow::Error::new(e).context(format!("appending to {name}")));
                    }
                }
            }
        }
    }
    drop(stream);
    bar.finish_and_clear();
    produced.range = acknowledged.span();
    let stored = match produced.records {
        0 => "no records acknowledged".to_owned(),
        n => format!("{} acknowledged at offsets {acknowledged}", count(n, "record")),
    };
    let secs = started.elapsed().as_secs_f64();
    let hint = "the server exports them as their segments seal; `tierlog export` seals and exports now";
    if let Some(e) = failed {
        let e = if produced.records == 0 { e } else { e.context(format!("{stored}, then")) };
        if args.json {
            print_summary(&name, &produced, secs, Ending::Failed(&e), None, hint, true)?;
        }
        return Err(e);
    }
    // Committed records the server's cold tier does not hold yet, as a local produce says
    // (None without cold, or when the server cannot say).
    let not_in_cold = match produced.range {
        Some(_) => client.topic(name.as_str()).await.ok().and_then(|t| t.export_lag),
        None => None,
    };
    let ending = if interrupted { Ending::Interrupted } else { Ending::Done };
    print_summary(&name, &produced, secs, ending, not_in_cold, hint, args.json)?;
    if interrupted {
        eprintln!("interrupted: {stored}");
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::OK)
}

/// The offsets acknowledged, as ranges merged where they touch: `[0, 500)`, or
/// `[0, 500), [600, 800)` when a refused batch between them left its offsets to others.
#[derive(Debug, Default)]
struct Acknowledged(Vec<OffsetRange>);

impl Acknowledged {
    /// From the first offset acknowledged to the end of the last (what the summary
    /// shows).
    fn span(&self) -> Option<OffsetRange> {
        Some(OffsetRange::new(self.0.first()?.start, self.0.last()?.end))
    }

    fn add(&mut self, range: OffsetRange) {
        match self.0.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => self.0.push(range),
        }
    }
}

impl std::fmt::Display for Acknowledged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, range) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{range}")?;
        }
        Ok(())
    }
}

type Batches = mpsc::Receiver<std::io::Result<Vec<Bytes>>>;

/// Batches of synthetic payloads.
fn synthetic(count: u64, size: usize, batch: usize) -> Batches {
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        let batch = synthetic_batch(batch, size);
        let mut next = 0;
        while next < count {
            let end = count.min(next + batch as u64);
            if tx.send(Ok((next..end).map(|i| synthetic_payload(i, size)).collect())).await.is_err() {
                return;
            }
            next = end;
        }
    });
    rx
}

/// Batches of the lines of `file` or stdin (without their `\n`, and without a `\r` before
/// it when `strip_cr`), read on a thread: a batch is sent when it holds `batch` lines, when
/// the next line would take it past [`BATCH_BYTES`], or when no more input is at hand
/// (reading on would wait), so lines already read are appended at once rather than waiting
/// for a full batch — a pipe fed slowly is produced as it comes.
fn lines(file: Option<PathBuf>, batch: usize, strip_cr: bool) -> anyhow::Result<Batches> {
    let source: Box<dyn Read + Send> = match &file {
        Some(path) => Box::new(
            std::fs::File::open(path)
                .with_context(|| format!("cannot open input file {}", path.display()))?,
        ),
        None => Box::new(std::io::stdin()),
    };
    let (tx, rx) = mpsc::channel(2);
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 20, source);
        let (mut pending, mut pending_bytes) = (Vec::new(), 0);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if strip_cr && line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    if !pending.is_empty() && pending_bytes + line.len() > BATCH_BYTES {
                        if tx.blocking_send(Ok(std::mem::take(&mut pending))).is_err() {
                            return;
                        }
                        pending_bytes = 0;
                    }
                    pending_bytes += line.len();
                    pending.push(Bytes::from(line));
                    let at_hand = !reader.buffer().is_empty();
                    if pending.len() >= batch || !at_hand {
                        if tx.blocking_send(Ok(std::mem::take(&mut pending))).is_err() {
                            return;
                        }
                        pending_bytes = 0;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
        if !pending.is_empty() {
            let _ = tx.blocking_send(Ok(pending));
        }
    });
    Ok(rx)
}

/// `consume` through the server: the same start positions, output and `--follow`.
pub(crate) async fn consume(ctx: &Ctx, client: &Client, args: &ConsumeArgs) -> anyhow::Result<u8> {
    let name = store::topic_name(&args.topic)?;
    let start = match &args.at {
        Some(at) => FromArg::At(StartPosition::Timestamp(parse_time(at)?)),
        None => parse_from(&args.from)?,
    };
    if args.wait && !wait_for_topic(client, &name).await? {
        return Ok(exit::OK);
    }
    let start = match start {
        FromArg::At(StartPosition::Earliest) => Start::Earliest,
        FromArg::At(StartPosition::Latest) => Start::Latest,
        FromArg::At(StartPosition::Timestamp(t)) => Start::Time(t),
        FromArg::At(StartPosition::Offset(o)) => {
            let end = client.topic(name.as_str()).await.with_context(|| format!("reading {name}"))?.committed;
            if o > end {
                return Err(anyhow!(
                    "offset {o} is beyond the end of topic {name} (the next offset is {end})"
                ));
            }
            Start::Offset(o)
        }
        FromArg::Last(n) => {
            let end = client.topic(name.as_str()).await.with_context(|| format!("reading {name}"))?.committed;
            Start::Offset(end.saturating_sub(n))
        }
    };
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    };
    let bar = ctx.progress.bar(None, "consuming", "records");
    if args.out.is_none() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Each record with the tier that served it (tier frames in the binary read): for JSON
    // output and the summary on stderr. A follow outlives the server going away (a
    // restart): it reconnects and resumes after the last record printed, saying so on
    // stderr.
    let read = if args.follow {
        client.follow(name.as_str(), start, args.max, true, Reconnect::default()).await
    } else {
        client.read_with_tiers(name.as_str(), start, false, args.max).await.map(events)
    };
    let mut records = read.with_context(|| format!("reading {name}"))?;
    let mut count = 0u64;
    let mut runs = Vec::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let written: anyhow::Result<()> = async {
        loop {
            let item = tokio::select! {
                item = records.next() => item,
                _ = &mut ctrl_c => break,
            };
            let Some(item) = item else { break };
            let record = match item.with_context(|| format!("reading {name}"))? {
                FollowEvent::Record(record) => record,
                FollowEvent::Disconnected { error, next, give_up_after } => {
                    eprintln!(
                        "the server went away ({:#}): reconnecting, resuming at offset {next} \
                         (for up to {} s; Ctrl-C to stop)",
                        anyhow::Error::new(error),
                        give_up_after.as_secs()
                    );
                    continue;
                }
                FollowEvent::Resumed { next } => {
                    eprintln!("reconnected: resuming at offset {next}");
                    continue;
                }
                _ => continue,
            };
            if let Some(source) = record.tier.and_then(source) {
                add_to_runs(&mut runs, source, record.record.offset);
            }
            write_record(out.as_mut(), args.output, record)?;
            count += 1;
            bar.inc(1);
            if args.follow {
                out.flush()?;
            }
        }
        out.flush()?;
        Ok(())
    }
    .await;
    bar.finish_and_clear();
    match written {
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == ErrorKind::BrokenPipe) => {
            return Ok(exit::OK);
        }
        other => other?,
    }
    // Which tier served which offsets, on stderr (stdout may be the records), as a local
    // consume prints it.
    print_served(name.as_str(), count, &runs);
    if let Some(path) = &args.out {
        println!("consumed {count} records from {name} into {}", path.display());
    }
    Ok(exit::OK)
}

/// A read's records as the events of a follow (a read without follow never reconnects).
fn events(records: ServedStream) -> FollowStream {
    records.map(|r| r.map(FollowEvent::Record)).boxed()
}

/// How often `consume --wait` asks whether the topic exists.
const WAIT_POLL: Duration = Duration::from_millis(200);

/// Polls `GET /v1/topics/{name}` every [`WAIT_POLL`] until the topic exists (true) or
/// Ctrl-C (false). Any answer but `not_found` ends the wait with an error.
async fn wait_for_topic(client: &Client, name: &TopicName) -> anyhow::Result<bool> {
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    // Polled once so the handler is installed before "waiting …" is printed: from then on
    // Ctrl-C ends the wait instead of killing the process.
    if let Some(result) = (&mut ctrl_c).now_or_never() {
        result.context("installing the Ctrl-C handler")?;
        return Ok(false);
    }
    let mut said = false;
    loop {
        match client.topic(name.as_str()).await {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == Some(ApiKind::NotFound) => {}
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {name}"))),
        }
        if !said {
            eprintln!("waiting for topic {name} to exist (Ctrl-C to stop)");
            said = true;
        }
        tokio::select! {
            () = tokio::time::sleep(WAIT_POLL) => {}
            _ = &mut ctrl_c => return Ok(false),
        }
    }
}

fn write_record(out: &mut dyn Write, format: Output, served: Served) -> std::io::Result<()> {
    let r = served.record;
    match format {
        Output::Raw => {
            out.write_all(&r.payload)?;
            out.write_all(b"\n")
        }
        Output::Json => {
            let headers = r.headers.into_iter().map(|(name, value)| Header::new(name, value)).collect();
            let record =
                Record { offset: r.offset, timestamp: r.timestamp, key: r.key, headers, payload: r.payload };
            serde_json::to_writer(&mut *out, &record_json(&record, served.tier.and_then(source)))?;
            out.write_all(b"\n")
        }
    }
}

/// The store's name for the tier the API says served a record (`None` for a tier this
/// program does not know).
fn source(tier: Tier) -> Option<Source> {
    match tier {
        Tier::Cold => Some(Source::Cold),
        Tier::Warm => Some(Source::Warm),
        Tier::Hot => Some(Source::Hot),
        Tier::Live => Some(Source::Live),
        _ => None,
    }
}

/// The topics a command names: `topic`, checked to exist, or every topic the server has
/// open.
async fn topics(client: &Client, topic: Option<&str>) -> anyhow::Result<Vec<TopicInfo>> {
    match topic {
        Some(t) => {
            let name = store::topic_name(t)?;
            let info = client.topic(name.as_str()).await.with_context(|| format!("reading {name}"))?;
            Ok(vec![info])
        }
        None => client.topics().await.context("listing the server's topics"),
    }
}

fn tier(range: RangeJson) -> TierStatus {
    // The API gives ranges only: no segment counts or sizes.
    TierStatus { start: range.start, end: range.end, segments: None, bytes: None }
}

/// `status` through the server (`GET /v1/topics`, `GET /v1/topics/{topic}`): the same
/// table or JSON, without segment counts and sizes, which the API does not report.
pub(crate) async fn status(client: &Client, args: &StatusArgs) -> anyhow::Result<u8> {
    let rows: Vec<TopicStatus> = topics(client, args.topic.as_deref())
        .await?
        .into_iter()
        .map(|t| TopicStatus {
            topic: t.topic,
            committed: t.committed,
            hot: tier(t.hot),
            warm: t.warm.map(tier),
            cold: t.cold.map(tier),
            export_lag: t.export_lag,
            // Of a served topic's recovery state, the API reports an awaited resume.
            pending: Pending::served(t.resume_at_least),
        })
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    if !rows.is_empty() {
        eprintln!("(through a server: segment counts and sizes are not shown; the API reports offsets only)");
    }
    Ok(exit::OK)
}

/// `export` through the server (`POST /v1/topics/{topic}/export`), per topic: the
/// segments stored and cold's end, as the local command prints them; the bytes uploaded
/// are not reported by the API.
pub(crate) async fn export(client: &Client, args: &ExportArgs) -> anyhow::Result<u8> {
    let infos = topics(client, args.topic.as_deref()).await?;
    if infos.iter().any(|t| t.cold.is_none()) {
        return Err(anyhow!(
            "the server's store has no cold tier (no [cold] table), so there is nothing to export to"
        ));
    }
    let mut segments = 0u64;
    let mut failed = Vec::new();
    for info in &infos {
        let name = &info.topic;
        match client.export(name).await {
            Ok(answer) => {
                let cold_end = answer.cold.map_or(0, |c| c.end);
                println!(
                    "{name}: exported {}, cold holds offsets up to {cold_end}",
                    count(answer.segments.len() as u64, "segment")
                );
                for seg in &answer.segments {
                    println!("  {name} {}", OffsetRange::new(seg.start, seg.end));
                }
                segments += answer.segments.len() as u64;
            }
            Err(e) => failed.push(anyhow::Error::new(e).context(format!("exporting {name}"))),
        }
    }
    println!("uploaded {} (through a server: sizes are not reported)", count(segments, "segment"));
    crate::cmd::export::outcome(failed, infos.len())
}

/// `verify` through the server (`GET /v1/topics/{topic}/verify`): the server's online
/// check below each topic's commit point — every batch's CRC and records read through
/// the stitched reader, and no hole between the tiers — not the local command's file by
/// file check. One line per problem on stdout (`<topic>: <what>`), exit 3 when any.
pub(crate) async fn verify(client: &Client, args: &VerifyArgs) -> anyhow::Result<u8> {
    let infos = topics(client, args.topic.as_deref()).await?;
    let (mut records, mut batches) = (0u64, 0u64);
    let mut problems = Vec::new();
    for info in &infos {
        let report = client.verify(&info.topic).await.with_context(|| format!("verifying {}", info.topic))?;
        records += report.records;
        batches += report.batches;
        problems.extend(report.problems.into_iter().map(|p| format!("{}: {p}", report.topic)));
    }
    for p in &problems {
        println!("{p}");
    }
    let summary = format!(
        "verified {} in {} of {} online, below each topic's commit point (through a server: \
         records read through the tiers, not WAL files and cold objects one by one)",
        count(records, "record"),
        if batches == 1 { "1 batch".to_owned() } else { format!("{batches} batches") },
        count(infos.len() as u64, "topic")
    );
    if problems.is_empty() {
        println!("{summary}: no problems");
        Ok(exit::OK)
    } else {
        eprintln!("{summary}: {}", count(problems.len() as u64, "problem"));
        Ok(exit::PROBLEMS)
    }
}

/// `recover` through the server: the server's store recovered every topic when it opened
/// them, so this prints its reports (`GET /v1/recovery`; only the `--topic`s named, when
/// any) with the local command's `LOST:` … lines; `--resume-at` resumes the one topic
/// named online (`POST /v1/topics/{topic}/resume`) first, without stopping the server.
/// `--json` prints the API's reports. Exit 3 when a topic lost (or may have lost)
/// offsets, waits for a resume, or failed to open.
pub(crate) async fn recover(client: &Client, args: &RecoverArgs) -> anyhow::Result<u8> {
    let topics = args.topics.iter().map(|t| store::topic_name(t)).collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(at) = args.resume_at {
        let [topic] = topics.as_slice() else {
            return Err(exit::usage("--resume-at needs exactly one --topic"));
        };
        if let Err(e) = client.resume(topic.as_str(), at).await {
            let unavailable = e.kind() == Some(tierlog_client::ErrorKind::Unavailable);
            return Err(anyhow::Error::new(e).context(resume_failed(topic.as_str(), at, unavailable)));
        }
        eprintln!("RESUMED: {topic} continues at offset {at}; the offsets skipped are never used");
    }
    let mut reports = client.recovery().await.context("reading the server's recovery reports")?.topics;
    if !topics.is_empty() {
        reports.retain(|r| topics.iter().any(|t| t.as_str() == r.topic));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else if reports.is_empty() {
        println!("no topics recovered");
    }
    let mut clean = true;
    for r in &reports {
        if !args.json && r.failed.is_none() {
            let replayed =
                r.replayed.as_ref().map_or_else(|| "-".to_owned(), |r| format!("[{}, {})", r.start, r.end));
            println!(
                "{}: when the server opened it: replayed {replayed}, next offset {}",
                r.topic, r.next_offset
            );
        }
        let found = Found::served(r);
        found.print();
        clean &= found.is_clean();
    }
    Ok(if clean { exit::OK } else { exit::PROBLEMS })
}
