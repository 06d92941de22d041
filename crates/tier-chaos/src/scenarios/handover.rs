//! Handover: two nodes — two real `tierlog serve` processes, each on its own data
//! directory — share one Valkey pair (`router.warm_failure_policy = "fail"`, one replica
//! confirmed by `WAIT`) and one S3 bucket (moto), and one topic moves between them under
//! the load of `PRODUCERS` client producers (`tierlog-client`, one `POST` per batch).
//! Each move, of a kind drawn from the seeded generator, goes from the node serving the
//! topic (A) to the other (B), whose process is started on its own data directory (on a
//! new port; its open claims the topic, `docs/ownership.md`):
//!
//! - **graceful**: A exports (`POST /v1/topics/{topic}/export`) and is stopped with
//!   SIGTERM (it drains and closes its store; it must exit 0); then B starts;
//! - **crash**: A is SIGKILLed; then B starts;
//! - **zombie**: A is SIGSTOPped with the producers' appends under way on it; B starts and
//!   an append through B confirms its claim; A is SIGCONTed: the appends it held and
//!   `ZOMBIE_APPENDS` more sent to it afterwards by a client of its own must all be
//!   refused (`409 fenced`), and A is then stopped with SIGTERM.
//!
//! The producers move to B once their append to A fails (a refused, lost or unanswered
//! append's sequence numbers are never reused). At the end the last node serves the
//! whole topic back through the client (every acknowledged record at its offset with its
//! bytes, each identity once, no record at an offset other than the one acknowledged)
//! and verifies it online (`GET /v1/topics/{topic}/verify`: every batch's CRC, no hole
//! between the tiers); then each node's store is opened in this process (the other's
//! WAL is stale: its open claims the topic again and rebuilds it from warm and cold) and
//! checked by the usual verifier. An append A acknowledged at or past the offset of B's
//! claim is a zombie write accepted and fails the row.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::ExitStatus,
    time::Duration,
};

use tier_core::Offset;
use tierlog_client::{Client, ErrorKind, Record};
use tokio::{process::Command, sync::watch, task::JoinHandle};

use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    payload::{self, RecordId},
    rng::Rng,
    scenarios::{
        open_and_verify,
        server_kill::{Current, Served, acked, check_read_back, client, next_server, read_back, record},
        temp_dir,
    },
};

/// The row's name.
pub const NAME: &str = "handover fail";

/// Client producers appending to the topic.
const PRODUCERS: u64 = 4;

/// The writer of the runner's own appends (the first one, and each confirming a claim).
const RUNNER_WRITER: u64 = PRODUCERS;

/// The writer of the appends sent to a zombie after it is resumed.
const ZOMBIE_WRITER: u64 = PRODUCERS + 1;

/// Appends sent to each zombie after `SIGCONT` that it must refuse as fenced (more are
/// sent, up to [`ZOMBIE_ATTEMPTS`], while its answers are other errors).
const ZOMBIE_APPENDS: u64 = 3;

/// Most appends sent to one zombie.
const ZOMBIE_ATTEMPTS: u64 = 10;

/// Attempts of the append that confirms a new node's claim.
const CLAIM_ATTEMPTS: u64 = 10;

/// How long a SIGTERMed server may drain and close (the server's own drain timeout is
/// 30 s) before it is SIGKILLed and the stop counted as failed.
const STOP_TIMEOUT: Duration = Duration::from_secs(45);

/// The topic that moves.
const TOPIC: &str = "chaos-handover";

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct HandoverOptions {
    /// Moves of the topic from one node to the other.
    pub moves: u64,
    /// Shortest and longest time a node serves the topic before it moves, in ms.
    pub uptime_ms: (u64, u64),
    /// Seed of the kinds, uptimes and batch sizes.
    pub seed: u64,
}

/// How the topic leaves a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// Export, SIGTERM, then the other node.
    Graceful,
    /// SIGKILL, then the other node.
    Crash,
    /// SIGSTOP, the other node takes over, SIGCONT: the resumed node must refuse.
    Zombie,
}

impl Move {
    fn letter(self) -> char {
        match self {
            Move::Graceful => 'g',
            Move::Crash => 'c',
            Move::Zombie => 'z',
        }
    }
}

/// What the moves did and found.
#[derive(Debug, Default)]
struct Moves {
    /// The kinds in order (`g`, `c`, `z`).
    sequence: String,
    graceful: u64,
    crash: u64,
    zombie: u64,
    /// Graceful moves whose export answered.
    exported: u64,
    /// Appends the runner sent to a resumed zombie that it refused as fenced.
    zombie_fenced: u64,
    /// ... that failed otherwise (not counted as refusals by the fence).
    zombie_other: u64,
    /// ... that it acknowledged (each a failure).
    zombie_accepted: u64,
    /// Exit statuses of SIGTERMed zombies other than success, in words.
    zombie_exits: Vec<String>,
    /// Per server generation that was made a zombie: the offset at which B's claim
    /// was confirmed (an acknowledgement of that generation reaching it is a zombie
    /// write accepted).
    claimed_at: HashMap<u64, Offset>,
}

/// One node: its data directory's configuration file.
struct Node {
    config: tier_router::StoreConfig,
    path: PathBuf,
}

/// Runs the scenario under `base` with the `tierlog` binary `tierlog`.
pub async fn run(
    servers: &Servers,
    base: &Path,
    tierlog: &Path,
    opts: &HandoverOptions,
) -> Result<ScenarioResult, ChaosError> {
    let mut result = ScenarioResult::new(NAME);
    let mut rng = Rng::new(opts.seed);
    let dir = temp_dir(base, "handover-")?;
    let tag = format!("handover-{}", opts.seed % 100_000);
    // One warm key prefix and one bucket; a data directory (and state directory) each.
    let shared =
        store_config(Deployment::HotWarmCold, &dir.path().join("a"), servers, &tag, &Profile::default())
            .await?;
    let nodes: Vec<Node> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let mut config = shared.clone();
            config.hot.data_dir = dir.path().join(name).join("hot");
            let path = dir.path().join(format!("{name}.toml"));
            write_config(&config, &path).map(|()| Node { config, path })
        })
        .collect::<Result<_, _>>()?;

    let mut owner = 0;
    let mut served = Served::start(tierlog, &nodes[owner].path).await?;
    let mut runner_seq = 0;
    let mut acks = vec![claim(&client(&served.url)?, &mut runner_seq).await?];
    let (tx, rx) = watch::channel::<Current>(Some((0, client(&served.url)?)));
    let producers: Vec<JoinHandle<ProducerTally>> =
        (0..PRODUCERS).map(|w| tokio::spawn(produce(w, opts.seed.wrapping_add(w), rx.clone()))).collect();

    let mut moves = Moves::default();
    let mut zombie_seq = 0;
    let mut outcome = Ok(());
    for generation in 1..=opts.moves {
        // The uptime *is* the fault's timing (where in the node's work the move lands).
        tokio::time::sleep(Duration::from_millis(rng.between(opts.uptime_ms.0, opts.uptime_ms.1))).await;
        let kind = match rng.between(0, 2) {
            0 => Move::Graceful,
            1 => Move::Crash,
            _ => Move::Zombie,
        };
        moves.sequence.push(kind.letter());
        let target = 1 - owner;
        let step = match kind {
            Move::Graceful => graceful(&mut served, &mut moves, &mut result).await,
            Move::Crash => {
                moves.crash += 1;
                served.kill().await
            }
            Move::Zombie => {
                moves.zombie += 1;
                signal(&served, "STOP").await
            }
        };
        let next = match step {
            Ok(()) => start_and_claim(tierlog, &nodes[target].path, &mut runner_seq).await,
            Err(e) => Err(e),
        };
        let (next, ack) = match next {
            Ok(started) => started,
            Err(e) => {
                outcome = Err(format!("move {generation} ({kind:?} to node {target}): {e}"));
                let _ = signal(&served, "CONT").await;
                break;
            }
        };
        acks.push(ack);
        result.iterations += 1;
        let zombie = std::mem::replace(&mut served, next);
        tx.send_replace(Some((generation, client(&served.url)?)));
        if kind == Move::Zombie {
            moves.claimed_at.insert(generation - 1, ack.range.start);
            let mut zombie = zombie;
            if let Err(e) = resume_zombie(&mut zombie, &mut moves, &mut zombie_seq, &mut acks).await {
                outcome = Err(format!("move {generation} (zombie, node {owner}): {e}"));
                break;
            }
        }
        owner = target;
    }
    tx.send_replace(None);
    let mut tally = ProducerTally::default();
    for p in producers {
        let t = p.await.map_err(|e| ChaosError::Other(format!("a producer task: {e}")))?;
        tally.acks.extend(t.acks);
        tally.errors += t.errors;
        tally.fenced += t.fenced;
    }
    for (generation, ack) in &tally.acks {
        if let Some(at) = moves.claimed_at.get(generation)
            && ack.range.end > *at
        {
            moves.zombie_accepted += 1;
            result.fail(format!(
                "a zombie (server generation {generation}) acknowledged {:?}, past the new owner's claim at {at}",
                ack.range
            ));
        }
    }
    acks.extend(tally.acks.iter().map(|(_, a)| *a));
    if let Err(e) = outcome {
        served.kill().await?;
        result.fail(format!("a move failed: {e}"));
        result.notes.push(format!("seed {}; moves {}", opts.seed, moves.sequence));
        return Ok(result);
    }

    // Read everything back through the last owner, and verify it online.
    let last = client(&served.url)?;
    let readback = read_back(&last, TOPIC, &nodes[owner].config.hot.data_dir.join(TOPIC)).await;
    let online = last.verify(TOPIC).await;
    stop(&mut served, &mut result, "the last owner").await?;
    let back = readback?;
    let v = check_read_back(&acks, &back.records, back.committed);
    result.absorb("read back through the last owner", &v);
    let renumbered = renumbered(&acks, &back.records);
    if renumbered > 0 {
        result.fail(format!("{renumbered} acknowledged records read back at another offset"));
    }
    match online {
        Ok(report) => {
            for p in report.problems.iter().take(4) {
                result.fail(format!("online verify: {p}"));
            }
            result.notes.push(format!(
                "online verify: {} records in {} batches over [{}, {})",
                report.records, report.batches, report.checked.start, report.checked.end
            ));
        }
        Err(e) => result.fail(format!("online verify: {e}")),
    }
    for (i, n) in [owner, 1 - owner].into_iter().enumerate() {
        let label =
            if i == 0 { "the last owner opened in process" } else { "the other node opened in process" };
        let v = open_and_verify(&nodes[n].config, TOPIC, &acks, &[]).await?;
        result.absorb(label, &v);
        result.notes.push(format!("{label}: {}", v.tiers));
    }

    if moves.zombie > 0 && moves.zombie_fenced + tally.fenced == 0 {
        result.fail("no append to a zombie was refused as fenced: the zombie moves tested nothing");
    }
    if moves.zombie_accepted > 0 {
        result.fail(format!("{} appends acknowledged by a zombie after the takeover", moves.zombie_accepted));
    }
    if tally.acks.is_empty() {
        result.fail("no producer append was ever acknowledged");
    }
    result.notes.push(format!(
        "seed {}; moves {} ({} graceful, {} exported; {} crash; {} zombie); zombie appends refused as fenced: {} sent after SIGCONT + {} of the producers', {} refused otherwise, {} accepted",
        opts.seed,
        moves.sequence,
        moves.graceful,
        moves.exported,
        moves.crash,
        moves.zombie,
        moves.zombie_fenced,
        tally.fenced,
        moves.zombie_other,
        moves.zombie_accepted,
    ));
    result.notes.push(format!(
        "{} acked appends, {} other failed appends; {} records read back, commit point {}; recorded gaps read past: {:?}; zombie exits other than 0: {:?}",
        acks.len(),
        tally.errors,
        back.records.len(),
        back.committed,
        back.passed,
        moves.zombie_exits,
    ));
    Ok(result)
}

/// A graceful move's first half: export, then SIGTERM (the server drains and closes its
/// store, and must exit 0).
async fn graceful(
    served: &mut Served,
    moves: &mut Moves,
    result: &mut ScenarioResult,
) -> Result<(), ChaosError> {
    moves.graceful += 1;
    if client(&served.url)?.export(TOPIC).await.is_ok() {
        moves.exported += 1;
    }
    stop(served, result, "a graceful move").await
}

/// SIGTERM, and wait for the drain and the close; SIGKILL (a failed check) past
/// [`STOP_TIMEOUT`] or on an exit status other than success.
async fn stop(served: &mut Served, result: &mut ScenarioResult, what: &str) -> Result<(), ChaosError> {
    match terminate(served).await? {
        Some(status) if status.success() => {}
        Some(status) => result.fail(format!("{what}: SIGTERM: the server exited with {status}")),
        None => result.fail(format!("{what}: SIGTERM: the server did not exit within {STOP_TIMEOUT:?}")),
    }
    Ok(())
}

/// SIGTERM and the exit status; `None` (and SIGKILLed) when it did not exit within
/// [`STOP_TIMEOUT`].
async fn terminate(served: &mut Served) -> Result<Option<ExitStatus>, ChaosError> {
    signal(served, "TERM").await?;
    match tokio::time::timeout(STOP_TIMEOUT, served.child.wait()).await {
        Ok(status) => Ok(Some(status.map_err(|e| ChaosError::io("waiting for tierlog serve", e))?)),
        Err(_) => {
            served.kill().await?;
            Ok(None)
        }
    }
}

/// Sends `SIG<name>` to the server's process (by its PID, with `kill(1)`).
async fn signal(served: &Served, name: &str) -> Result<(), ChaosError> {
    let Some(pid) = served.child.id() else {
        return Err(ChaosError::Other(format!("SIG{name}: the server has already exited")));
    };
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .await
        .map_err(|e| ChaosError::io(format!("running kill -{name} {pid}"), e))?;
    if status.success() { Ok(()) } else { Err(ChaosError::Other(format!("kill -{name} {pid}: {status}"))) }
}

/// Starts a node's server and confirms its claim with an append of the runner's.
async fn start_and_claim(tierlog: &Path, config: &Path, seq: &mut u64) -> Result<(Served, Ack), ChaosError> {
    let mut served = Served::start(tierlog, config).await?;
    match claim(&client(&served.url)?, seq).await {
        Ok(ack) => Ok((served, ack)),
        Err(e) => {
            served.kill().await?;
            Err(e)
        }
    }
}

/// One append of [`RUNNER_WRITER`] through `client` (retried with new sequence numbers
/// while it fails): once answered, the node's claim of the topic is in warm.
async fn claim(client: &Client, seq: &mut u64) -> Result<Ack, ChaosError> {
    let mut last = String::new();
    for _ in 0..CLAIM_ATTEMPTS {
        let first_seq = *seq;
        *seq += 1;
        match client.append_binary(TOPIC, &[record(RecordId { writer: RUNNER_WRITER, seq: first_seq })]).await
        {
            Ok(r) => {
                return Ok(acked(&r, RUNNER_WRITER, first_seq));
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(ChaosError::Other(format!("the new owner refused {CLAIM_ATTEMPTS} appends; the last: {last}")))
}

/// Resumes a zombie (its successor has claimed the topic), sends it appends of
/// [`ZOMBIE_WRITER`] until [`ZOMBIE_APPENDS`] were refused as fenced (or
/// [`ZOMBIE_ATTEMPTS`] were sent), then stops it with SIGTERM. An append it acknowledges
/// is recorded (the verifier then checks it) and counted as accepted.
async fn resume_zombie(
    zombie: &mut Served,
    moves: &mut Moves,
    seq: &mut u64,
    acks: &mut Vec<Ack>,
) -> Result<(), ChaosError> {
    signal(zombie, "CONT").await?;
    let to = client(&zombie.url)?;
    let mut fenced = 0;
    for _ in 0..ZOMBIE_ATTEMPTS {
        if fenced == ZOMBIE_APPENDS {
            break;
        }
        let first_seq = *seq;
        *seq += 1;
        match to.append_binary(TOPIC, &[record(RecordId { writer: ZOMBIE_WRITER, seq: first_seq })]).await {
            Ok(r) => {
                moves.zombie_accepted += 1;
                acks.push(acked(&r, ZOMBIE_WRITER, first_seq));
            }
            Err(e) if e.kind() == Some(ErrorKind::Fenced) => fenced += 1,
            Err(_) => moves.zombie_other += 1,
        }
    }
    moves.zombie_fenced += fenced;
    match terminate(zombie).await? {
        Some(status) if status.success() => {}
        Some(status) => moves.zombie_exits.push(status.to_string()),
        None => moves.zombie_exits.push(format!("no exit within {STOP_TIMEOUT:?} (SIGKILLed)")),
    }
    Ok(())
}

/// Acknowledged records read back at an offset other than the acknowledged one.
fn renumbered(acks: &[Ack], records: &[(Offset, bytes::Bytes)]) -> u64 {
    let at: HashMap<RecordId, Offset> = acks.iter().flat_map(Ack::records).map(|(o, id)| (id, o)).collect();
    records
        .iter()
        .filter_map(|(offset, bytes)| payload::decode(bytes).ok().map(|id| (*offset, id)))
        .filter(|(offset, id)| at.get(id).is_some_and(|acked| acked != offset))
        .count() as u64
}

/// What one producer did.
#[derive(Debug, Default)]
struct ProducerTally {
    /// Each acknowledged append with the server generation that acknowledged it.
    acks: Vec<(u64, Ack)>,
    /// Appends refused as fenced (only a zombie refuses so).
    fenced: u64,
    /// Other failed appends.
    errors: u64,
}

/// Appends batches of 1-4 records as writer `writer` until the run stops, moving to the
/// newest server after a failed append; a failed append's sequence numbers are never
/// reused.
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
            Ok(r) => {
                // Recorded as acknowledged even if its size is wrong: the verifier then
                // reports the mismatch.
                if r.end - r.start != n {
                    tally.errors += 1;
                }
                let ack = acked(&r, writer, seq);
                tally.acks.push((generation, ack));
            }
            Err(e) => {
                if e.kind() == Some(ErrorKind::Fenced) {
                    tally.fenced += 1;
                } else {
                    tally.errors += 1;
                }
                match next_server(&mut rx, generation).await {
                    Some((g, c)) => (generation, client) = (g, c),
                    None => return tally,
                }
            }
        }
        seq += n;
    }
}

#[cfg(test)]
mod tests {
    use tier_core::OffsetRange;

    use super::*;

    #[test]
    fn a_record_read_at_another_offset_than_acknowledged_is_renumbered() {
        let ack = Ack { range: OffsetRange { start: 0, end: 2 }, writer: 1, first_seq: 0 };
        let at = |offset, seq| (offset, payload::encode(RecordId { writer: 1, seq }));
        assert_eq!(renumbered(&[ack], &[at(0, 0), at(1, 1)]), 0);
        assert_eq!(renumbered(&[ack], &[at(0, 0), at(1, 9), at(2, 1)]), 1);
    }
}
