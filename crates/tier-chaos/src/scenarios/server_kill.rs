//! Server kill: the real `tierlog serve` binary on a hot-only store,
//! 8 producers appending through `tierlog-client` (binary framing: the even ones one
//! `POST` per batch, the odd ones over an append stream with up to
//! `STREAM_IN_FLIGHT` batches in flight) and 8 followers
//! reading from the earliest offset into the live tail, all over loopback; the server is
//! SIGKILLed at random moments and restarted on the same data directory (on a new port:
//! the clients reconnect to the URL it prints). Followers must never see two payloads for
//! one offset nor an offset go backwards within a connection; at the end a fresh server
//! serves the whole topic back through the client, and every acknowledged record must be
//! there exactly once, at its offset, with its bytes (the read goes on past gaps the WAL
//! recorded, where a recovery skipped offsets never acknowledged). The store is then also opened in
//! this process and checked by the usual verifier (which knows the WAL's recorded gaps).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::Duration,
};

use futures::StreamExt;
use parking_lot::Mutex;
use tier_core::{Offset, OffsetRange};
use tierlog_client::{Client, Record, SERVER_CLOCK, Start};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::watch,
    task::JoinHandle,
};

use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    payload::{self, RecordId},
    rng::Rng,
    scenarios::{open_and_verify, temp_dir},
    verify::Verification,
};

/// The row's name.
pub const NAME: &str = "server-kill hot";

/// Producers and followers (each).
const CLIENTS: u64 = 8;

/// Batches a streaming producer keeps in flight.
const STREAM_IN_FLIGHT: usize = 4;

/// How long a starting server may take to print its URL.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The topic written.
const TOPIC: &str = "chaos-server-kill";

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct ServerKillOptions {
    /// SIGKILLs of the server.
    pub kills: u64,
    /// Shortest and longest time a server runs before it is killed, in ms.
    pub uptime_ms: (u64, u64),
    /// Seed of the uptimes and batch sizes.
    pub seed: u64,
}

/// A running `tierlog serve`.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Served {
    /// Starts `tierlog --config CONFIG serve --listen 127.0.0.1:0` and reads its URL (the
    /// first stdout line: the store is open and the port bound).
    pub(crate) async fn start(tierlog: &Path, config: &Path) -> Result<Self, ChaosError> {
        let mut child = Command::new(tierlog)
            .arg("--config")
            .arg(config)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ChaosError::io(format!("spawning {}", tierlog.display()), e))?;
        let stdout = child.stdout.take().ok_or_else(|| ChaosError::Other("serve has no stdout".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(START_TIMEOUT, lines.next_line()).await;
        match first {
            Ok(Ok(Some(url))) if url.starts_with("http") => Ok(Self { child, url }),
            other => {
                let _ = child.start_kill();
                let status = child.wait().await.ok();
                Err(ChaosError::Other(format!(
                    "tierlog serve did not print its URL (got {other:?}, exit {status:?})"
                )))
            }
        }
    }

    /// SIGKILL, and wait until it is gone.
    pub(crate) async fn kill(&mut self) -> Result<(), ChaosError> {
        if let Ok(Some(_)) = self.child.try_wait() {
            return Ok(());
        }
        self.child.start_kill().map_err(|e| ChaosError::io("killing tierlog serve", e))?;
        self.child.wait().await.map_err(|e| ChaosError::io("waiting for tierlog serve", e))?;
        Ok(())
    }
}

/// The server the clients talk to: its generation and a client for its URL; `None` once
/// the clients must stop.
pub(crate) type Current = Option<(u64, Client)>;

/// What the followers saw.
#[derive(Debug, Default)]
struct Seen {
    /// The CRC-32C of the payload each offset was first seen with.
    payloads: HashMap<Offset, u32>,
    /// Records received (over all followers and connections).
    received: u64,
    /// Connections opened.
    connections: u64,
    /// Problems, in words (the first few), and their count.
    problems: Vec<String>,
    violations: u64,
}

impl Seen {
    fn problem(&mut self, text: String) {
        self.violations += 1;
        if self.problems.len() < 8 {
            self.problems.push(text);
        }
    }
}

/// Runs the scenario under `base` with the `tierlog` binary `tierlog`.
pub async fn run(
    servers: &Servers,
    base: &Path,
    tierlog: &Path,
    opts: &ServerKillOptions,
) -> Result<ScenarioResult, ChaosError> {
    let mut result = ScenarioResult::new(NAME);
    let mut rng = Rng::new(opts.seed);
    let dir = temp_dir(base, "server-kill-")?;
    let tag = format!("server-kill-{}", opts.seed % 100_000);
    let config = store_config(Deployment::Hot, dir.path(), servers, &tag, &Profile::default()).await?;
    let config_path = dir.path().join("store.toml");
    write_config(&config, &config_path)?;

    let mut served = Served::start(tierlog, &config_path).await?;
    let first = client(&served.url)?;
    // Creates the topic, so followers never start on one the server does not hold.
    let setup = first
        .append_binary(TOPIC, &[record(RecordId { writer: CLIENTS, seq: 0 })])
        .await
        .map_err(|e| ChaosError::Other(format!("the first append: {e}")))?;
    let mut acks = vec![acked(&setup, CLIENTS, 0)];
    let (tx, rx) = watch::channel::<Current>(Some((0, first)));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let producers: Vec<JoinHandle<ProducerTally>> = (0..CLIENTS)
        .map(|w| {
            let (seed, rx) = (opts.seed.wrapping_add(w), rx.clone());
            if w % 2 == 0 {
                tokio::spawn(produce(w, seed, rx))
            } else {
                tokio::spawn(produce_streaming(w, seed, rx))
            }
        })
        .collect();
    let followers: Vec<JoinHandle<()>> =
        (0..CLIENTS).map(|_| tokio::spawn(follow(rx.clone(), Arc::clone(&seen)))).collect();

    let mut outcome = Ok(());
    for generation in 1..=opts.kills {
        // The uptime *is* the fault's timing (where in the server's work the kill lands),
        // not a wait for some condition.
        tokio::time::sleep(Duration::from_millis(rng.between(opts.uptime_ms.0, opts.uptime_ms.1))).await;
        served.kill().await?;
        result.iterations += 1;
        served = match Served::start(tierlog, &config_path).await {
            Ok(s) => s,
            Err(e) => {
                outcome = Err(e);
                break;
            }
        };
        let next = client(&served.url)?;
        tx.send_replace(Some((generation, next)));
    }
    tx.send_replace(None);
    let mut tally = ProducerTally::default();
    let mut streamed = 0;
    for (w, p) in producers.into_iter().enumerate() {
        let t = p.await.map_err(|e| ChaosError::Other(format!("a producer task: {e}")))?;
        if w % 2 == 1 {
            streamed += t.acks.len();
        }
        acks.extend(t.acks);
        tally.errors += t.errors;
    }
    if streamed == 0 {
        result.fail("no batch sent over an append stream was acknowledged".to_owned());
    }
    for f in followers {
        f.await.map_err(|e| ChaosError::Other(format!("a follower task: {e}")))?;
    }
    served.kill().await?;
    if let Err(e) = outcome {
        result.fail(format!("a restart failed: {e}"));
        return Ok(result);
    }

    // Read everything back through a fresh server.
    let mut fresh = Served::start(tierlog, &config_path).await?;
    let readback = read_back(&client(&fresh.url)?, TOPIC, &config.hot.data_dir.join(TOPIC)).await;
    fresh.kill().await?;
    let ReadBack { records, committed, passed } = readback?;
    let v = check_read_back(&acks, &records, committed);
    result.absorb("read back through the server", &v);
    let v = open_and_verify(&config, TOPIC, &acks, &[]).await?;
    result.absorb("opened in process", &v);

    let seen = seen.lock();
    for p in &seen.problems {
        result.fail(format!("a follower: {p}"));
    }
    if seen.violations > seen.problems.len() as u64 {
        result.fail(format!("followers: {} violations in all", seen.violations));
    }
    result.notes.push(format!(
        "seed {}; {} acked appends ({streamed} of them over append streams), {} failed appends; followers received {} records over {} connections; {} records read back, commit point {committed}; recorded gaps read past: {passed:?}",
        opts.seed,
        acks.len(),
        tally.errors,
        seen.received,
        seen.connections,
        records.len(),
    ));
    result.notes.push(format!("opened in process: {}", v.tiers));
    if acks.len() < 2 {
        result.fail("no producer append was ever acknowledged");
    }
    Ok(result)
}

pub(crate) fn client(url: &str) -> Result<Client, ChaosError> {
    Client::new(url).map_err(|e| ChaosError::Other(format!("a client of {url}: {e}")))
}

pub(crate) fn record(id: RecordId) -> Record {
    Record {
        offset: 0,
        timestamp: SERVER_CLOCK,
        key: None,
        headers: Vec::new(),
        payload: payload::encode(id),
    }
}

/// The acknowledgement of writer `writer`'s append from sequence number `first_seq`,
/// as the server answered it.
pub(crate) fn acked(r: &tierlog_client::AppendResponse, writer: u64, first_seq: u64) -> Ack {
    Ack { range: OffsetRange { start: r.start, end: r.end }, writer, first_seq }
}

/// The server to use after a failed request on generation `used`: the current one when
/// it is newer, else the next one once it is published; `None` once the run stops.
pub(crate) async fn next_server(rx: &mut watch::Receiver<Current>, used: u64) -> Option<(u64, Client)> {
    loop {
        match &*rx.borrow_and_update() {
            None => return None,
            Some((generation, client)) if *generation != used => return Some((*generation, client.clone())),
            Some(_) => {}
        }
        if rx.changed().await.is_err() {
            return None;
        }
    }
}

/// What one producer did.
#[derive(Debug, Default)]
struct ProducerTally {
    acks: Vec<Ack>,
    errors: u64,
}

/// Appends batches of 1-4 records as writer `writer` until the run stops; a failed
/// append's sequence numbers are never reused.
async fn produce(writer: u64, seed: u64, mut rx: watch::Receiver<Current>) -> ProducerTally {
    let mut rng = Rng::new(seed);
    let mut tally = ProducerTally::default();
    let mut seq = 0;
    let Some((mut generation, mut client)) = rx.borrow_and_update().clone() else { return tally };
    loop {
        if rx.borrow().is_none() {
            return tally;
        }
        let n = rng.between(1, 4);
        let batch: Vec<Record> = (seq..seq + n).map(|s| record(RecordId { writer, seq: s })).collect();
        match client.append_binary(TOPIC, &batch).await {
            Ok(r) if r.end - r.start == n => {
                tally.acks.push(acked(&r, writer, seq));
            }
            Ok(r) => {
                // Recorded as acknowledged: the verifier then reports the mismatch.
                tally.acks.push(acked(&r, writer, seq));
                tally.errors += 1;
            }
            Err(_) => {
                tally.errors += 1;
                match next_server(&mut rx, generation).await {
                    Some((g, c)) => (generation, client) = (g, c),
                    None => return tally,
                }
            }
        }
        seq += n;
    }
}

/// As [`produce`], over an append stream (one per server), keeping up to
/// [`STREAM_IN_FLIGHT`] batches sent and not yet answered. After a failed batch nothing
/// more is sent on that stream; the batches under way are awaited (those answered are
/// acknowledged) before moving to the next server. A failed batch's sequence numbers are
/// never reused.
async fn produce_streaming(writer: u64, seed: u64, mut rx: watch::Receiver<Current>) -> ProducerTally {
    let mut rng = Rng::new(seed);
    let mut tally = ProducerTally::default();
    let mut seq = 0;
    let Some((mut generation, mut client)) = rx.borrow_and_update().clone() else { return tally };
    loop {
        if let Ok(stream) = client.append_stream(TOPIC).await {
            let mut in_flight = std::collections::VecDeque::new();
            let mut failed = false;
            loop {
                let stopping = rx.borrow().is_none();
                if !stopping && !failed && in_flight.len() < STREAM_IN_FLIGHT {
                    let n = rng.between(1, 4);
                    let batch: Vec<Record> =
                        (seq..seq + n).map(|s| record(RecordId { writer, seq: s })).collect();
                    match stream.queue(&batch).await {
                        Ok(pending) => in_flight.push_back((pending, seq, n)),
                        Err(_) => {
                            tally.errors += 1;
                            failed = true;
                        }
                    }
                    seq += n;
                    continue;
                }
                let Some((pending, first_seq, n)) = in_flight.pop_front() else { break };
                match pending.await {
                    Ok(r) => {
                        // Recorded as acknowledged even if its size is wrong: the verifier
                        // then reports the mismatch.
                        if r.end - r.start != n {
                            tally.errors += 1;
                        }
                        tally.acks.push(acked(&r, writer, first_seq));
                    }
                    Err(_) => {
                        tally.errors += 1;
                        failed = true;
                    }
                }
            }
            if rx.borrow().is_none() {
                return tally;
            }
        } else {
            tally.errors += 1;
        }
        match next_server(&mut rx, generation).await {
            Some((g, c)) => (generation, client) = (g, c),
            None => return tally,
        }
    }
}

/// Follows the topic from the earliest offset; after a lost connection, from the offset
/// after the last one it saw, on the newest server.
async fn follow(mut rx: watch::Receiver<Current>, seen: Arc<Mutex<Seen>>) {
    let Some((mut generation, mut client)) = rx.borrow_and_update().clone() else { return };
    let mut from = Start::Earliest;
    loop {
        seen.lock().connections += 1;
        if let Ok(mut stream) = client.read(TOPIC, from).await {
            let mut last: Option<Offset> = None;
            loop {
                let item = tokio::select! {
                    item = stream.next() => item,
                    changed = rx.changed() => {
                        if changed.is_err() || rx.borrow().is_none() {
                            return;
                        }
                        continue;
                    }
                };
                let Some(Ok(r)) = item else { break };
                let mut seen = seen.lock();
                seen.received += 1;
                if last.is_some_and(|l| r.offset <= l) {
                    seen.problem(format!("offset {} after {:?} within one connection", r.offset, last));
                }
                last = Some(r.offset);
                if let Err(e) = payload::decode(&r.payload) {
                    seen.problem(format!("offset {}: {e}", r.offset));
                }
                let crc = crc32c::crc32c(&r.payload);
                if *seen.payloads.entry(r.offset).or_insert(crc) != crc {
                    seen.problem(format!("two different payloads at offset {}", r.offset));
                }
            }
            if let Some(l) = last {
                from = Start::Offset(l + 1);
            }
        }
        match next_server(&mut rx, generation).await {
            Some((g, c)) => (generation, client) = (g, c),
            None => return,
        }
    }
}

/// Every record the server holds up to its commit point (read without following), and
/// the commit point.
/// Reads the whole topic back: the records in the order served, the commit point, and
/// the gaps the WAL recorded that the read went past.
pub(crate) async fn read_back(client: &Client, topic: &str, wal_dir: &Path) -> Result<ReadBack, ChaosError> {
    let err = |what: &str, e: tierlog_client::Error| ChaosError::Other(format!("{what}: {e}"));
    let committed = client.topic(topic).await.map_err(|e| err("the topic's commit point", e))?.committed;
    let mut out: Vec<(Offset, bytes::Bytes)> = Vec::new();
    let mut from = Start::Earliest;
    let mut passed = Vec::new();
    'read: loop {
        let mut stream =
            client.read_with(topic, from, false, None).await.map_err(|e| err("reading back", e))?;
        while let Some(item) = stream.next().await {
            match item {
                Ok(r) => out.push((r.offset, r.payload)),
                Err(e) => {
                    // A read ends at a gap the WAL recorded (`NotFound`, never skipped by
                    // the server): offsets a recovery skipped as maybe lost. The reader
                    // goes on after it; `check_read_back` counts any acknowledged record
                    // in it as lost.
                    let next = out.last().map_or(0, |(o, _)| o + 1);
                    match recorded_gaps(wal_dir)?.into_iter().find(|g| g.start <= next && next < g.end) {
                        Some(gap) => {
                            passed.push(gap);
                            from = Start::Offset(gap.end);
                            continue 'read;
                        }
                        None => return Err(err("reading back", e)),
                    }
                }
            }
        }
        return Ok(ReadBack { records: out, committed, passed });
    }
}

/// What [`read_back`] read.
pub(crate) struct ReadBack {
    pub(crate) records: Vec<(Offset, bytes::Bytes)>,
    pub(crate) committed: Offset,
    pub(crate) passed: Vec<OffsetRange>,
}

/// The gaps the WAL of the topic recorded (its `<from>-<to>.gap` markers).
fn recorded_gaps(wal_dir: &Path) -> Result<Vec<OffsetRange>, ChaosError> {
    let entries = std::fs::read_dir(wal_dir)
        .map_err(|e| ChaosError::io(format!("listing {}", wal_dir.display()), e))?;
    Ok(entries
        .filter_map(|e| e.ok()?.file_name().to_str().and_then(tier_hot::layout::parse_gap_file_name))
        .collect())
}

/// Checks records read back (in the order served) against `acks`: every acknowledged
/// record at its offset with its payload, each identity once, offsets increasing, the
/// read reaching `committed`. Offsets skipped without an acknowledged record there are
/// the WAL's recorded gaps (offsets a recovery skipped as maybe lost: under `always` a
/// write the kill cut short, never acknowledged, up to the offset reservation) and not
/// counted.
pub fn check_read_back(acks: &[Ack], records: &[(Offset, bytes::Bytes)], committed: Offset) -> Verification {
    let expected: HashMap<Offset, RecordId> = acks.iter().flat_map(Ack::records).collect();
    let mut v = Verification { acked: expected.len() as u64, ..Verification::default() };
    let mut found: HashMap<Offset, RecordId> = HashMap::new();
    let mut seen: HashMap<RecordId, u32> = HashMap::new();
    let mut last: Option<Offset> = None;
    for (offset, bytes) in records {
        v.read += 1;
        if last.is_some_and(|l| *offset <= l) {
            v.gaps += 1;
            v.notes.push(format!("offset {offset} served after {last:?}"));
        }
        last = Some(*offset);
        match payload::decode(bytes) {
            Ok(id) => {
                found.insert(*offset, id);
                *seen.entry(id).or_default() += 1;
            }
            Err(e) => {
                v.bad_payloads += 1;
                v.notes.push(format!("offset {offset}: {e}"));
            }
        }
    }
    if last.map_or(0, |l| l + 1) < committed {
        v.gaps += committed - last.map_or(0, |l| l + 1);
        v.notes.push(format!("the read ended at {last:?}, the commit point is {committed}"));
    }
    v.unacknowledged = found.keys().filter(|o| !expected.contains_key(o)).count() as u64;
    v.duplicated = seen.values().map(|n| u64::from(*n - 1)).sum();
    let mut lost: Vec<_> = expected.iter().filter(|(o, id)| found.get(o) != Some(id)).collect();
    lost.sort();
    v.lost = lost.len() as u64;
    for (offset, id) in lost.iter().take(3) {
        v.notes
            .push(format!("acknowledged offset {offset} should hold {id:?}, read {:?}", found.get(offset)));
    }
    v.notes.truncate(8);
    v
}

/// The `tierlog` binary beside the running one (`cargo xtask chaos` builds it).
pub fn tierlog_binary() -> Result<PathBuf, ChaosError> {
    crate::process::sibling_binary("tierlog")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(start: Offset, end: Offset, writer: u64, first_seq: u64) -> Ack {
        Ack { range: OffsetRange { start, end }, writer, first_seq }
    }

    fn at(offset: Offset, writer: u64, seq: u64) -> (Offset, bytes::Bytes) {
        (offset, payload::encode(RecordId { writer, seq }))
    }

    #[test]
    fn a_clean_read_back_with_a_skipped_unacknowledged_range_passes() {
        let acks = [ack(0, 2, 1, 0), ack(5, 6, 2, 0)];
        // Offsets 2..5: a failed append (unacknowledged) at 2, a recorded gap after it.
        let records = [at(0, 1, 0), at(1, 1, 1), at(2, 3, 9), at(5, 2, 0)];
        let v = check_read_back(&acks, &records, 6);
        assert!(v.is_clean(), "{v:?}");
        assert_eq!((v.acked, v.read, v.unacknowledged), (3, 4, 1));
    }

    #[test]
    fn losses_duplicates_reordering_and_a_short_read_are_counted() {
        let acks = [ack(0, 3, 1, 0)];
        let mut flipped = payload::encode(RecordId { writer: 1, seq: 2 }).to_vec();
        flipped[0] ^= 1;
        let records = [at(0, 1, 0), at(1, 1, 0), (2, bytes::Bytes::from(flipped)), at(1, 1, 1)];
        let v = check_read_back(&acks, &records, 5);
        assert_eq!(v.lost, 1, "{v:?}"); // 2 is damaged (1 was served again, right)
        assert_eq!(v.duplicated, 1);
        assert_eq!(v.bad_payloads, 1);
        assert_eq!(v.gaps, 1 + 3); // 1 served after 2; the read ended at 1 below 5
        assert!(!v.is_clean());
    }
}
