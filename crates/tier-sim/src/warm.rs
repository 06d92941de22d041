//! The warm stand-in: an in-process model of a Valkey primary with its replicas and the
//! connection tier-warm talks to it through, with the faults the simulation injects.
//!
//! **Replication.** Every write the primary takes — a stream entry, a trim that removes
//! entries, the topic marker's `SET`, the `SET` an identical retry sends before its
//! `WAIT` — advances the primary's replication offset by one. The replica `WAIT` counts
//! has an offset of its own, the writes it applied: while its link is up it applies
//! every write as it is made; while the link is down (*WAIT short*) it applies nothing,
//! and it catches up on everything at the first write or `WAIT` after the link is back
//! (replication is asynchronous: until then a failover loses what it lacks).
//!
//! **Connections.** Calls go through one connection, opened by the first call after
//! there was none. It remembers the replication offset of its last write. `WAIT` on it
//! is met iff the replica's applied offset is at least that: it counts acknowledgements
//! of *this connection's* writes, so on a fresh connection, whose last write offset is 0,
//! it is met at once whatever the replica holds — it confirms nothing. An outage, a lost
//! answer, a reset ([`SimWarm::reconnect`]) and a failover drop the connection.
//!
//! **The protocol** is tier-warm's (`tier-warm/src/tier.rs`), step by step, each step
//! named after the function it mirrors: an append decides on the stream's range
//! (`append_checked`), sends `XADD` + `WAIT` in one pipeline (`xadd_and_wait`), and an
//! append at a held offset reads the entry there (`resolve_existing`): the same batch is
//! confirmed by `SET <marker>` + `WAIT` (`confirm_held`), a different one is `Fenced`.
//! A group continuing the stream goes in one script + `WAIT` (`conditional_append`;
//! from generator 9, [`SimWarm::set_group_script`] — before it one batch at a time, as the
//! stand-in older regression schedules were found with did). `trim_before` never drops
//! the newest batch and `batches_from` returns the batches as appended.
//!
//! **The next key.** Each `XADD` writes, in the same step, the offset at which the
//! stream's next batch must start; `restart_at` writes it too (a write of its own). A
//! batch anywhere else is refused, even by a stream that holds nothing — an emptied
//! stream cannot take a batch past the batches a failover took from it. Without the key
//! (a topic the replica never had) any base at or past the end is taken, unless the
//! client saw the key before (tier-warm's `next_held`, kept until the process ends:
//! [`SimWarm::new_client`]) and the base is not 0. Reverted
//! ([`SimWarm::set_ignore_next`], `Revert::WarmIgnoresNext`): the key is not consulted,
//! and an empty stream takes any base at or past its end.
//!
//! **Faults.**
//! - *WAIT short*: the replica's link is down; writes land on the primary, their `WAIT`
//!   falls short and the caller gets `Unavailable`.
//! - *Failover* ([`SimWarm::fail_over`]): the replica `WAIT` counts is promoted; every
//!   write it did not apply vanishes (entries, markers).
//! - *Failover to a replica behind* ([`SimWarm::fail_over_behind`]): a replica lacking the
//!   primary's last writes is promoted, writes a met `WAIT` confirmed among them — with two
//!   replicas and `WAIT 1` the one that did not acknowledge, or one replicated
//!   asynchronously.
//! - *Answers lost* ([`SimWarm::set_answers_lost`]): every n-th write pipeline is applied
//!   by the server and its answer lost (a timeout, a reset): the caller gets
//!   `Unavailable`, the connection is dropped.
//! - *Outage*: every call is `Unavailable`.
//!
//! **Owner epochs** ([`SimWarm::set_owner_epochs`]): a claim is tier-warm's claim script
//! and a `WAIT` — the owner key's `INCR` and the claimer's record in one write, so a
//! failover keeps the record exactly when it keeps the epoch — and the append and trim
//! scripts check the epoch and raise a lower owner key (a write with no claimer record). The
//! script's drop of the record 1024 epochs below the new one is not modelled: a schedule
//! claims far fewer. The stand-in always runs scripts (no server refusing them).
//!
//! For the model, the stand-in also remembers every batch it ever *confirmed* (an `Ok`
//! answer): under `warm_failure_policy = "fail"` only those may be served as committed.
//! Every batch the primary ever *took*: under `degrade` a batch the WAL refused while
//! warm took it may be committed from warm by recovery. And the confirmed records (and
//! topic marker) a failover to a replica behind took away that a `WAIT` had legitimately
//! confirmed (the replica `WAIT` counts held them), until a `WAIT` confirms them again.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use parking_lot::Mutex;
use tier_core::position::NodeId;
use tier_core::segment::{BatchCollector, BatchSink};
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tier_router::WarmBackend;

/// A stream entry and the replication offset of the write that added it.
#[derive(Debug, Clone)]
struct Entry {
    batch: RecordBatch,
    written: u64,
}

#[derive(Debug, Default)]
struct TopicLog {
    entries: Vec<Entry>,
    start: Offset,
    end: Offset,
    /// After each `XADD`: its replication offset and the stream's end.
    ends: Vec<(u64, Offset)>,
    /// The end a replica knows of the stream without any `XADD` of its own: the base of
    /// the first entry of a stream holding none (its start, as an emptied stream keeps).
    floor: Offset,
    /// The topic's next key: where the stream's next batch must start (`None`: the
    /// server has no key for the topic).
    next: Option<Offset>,
}

impl TopicLog {
    fn range(&self) -> OffsetRange {
        OffsetRange::new(self.start, self.end)
    }

    fn batch_index(&self, offset: Offset) -> usize {
        self.entries.partition_point(|e| e.batch.end_offset() <= offset)
    }

    /// tier-warm's `append_allowed` and its append script's check of the next key: a
    /// batch continues the stream. `next_held`: the client saw the key before.
    /// `ignore_next`: the reverted protocol, without the key.
    fn continues(&self, base: Offset, next_held: bool, ignore_next: bool) -> bool {
        if !ignore_next {
            match self.next {
                Some(next) => return base == next,
                None if next_held && base != 0 => return false,
                None => {}
            }
        }
        base == self.end || (self.start == self.end && base > self.end)
    }

    /// The stream as a replica that applied the writes up to `applied` holds it: drops
    /// the entries it lacks and returns their offsets.
    /// `with_next`: the next key is modelled, so a restart is a write of its own and the
    /// replica's end is what its last applied write left (without it, an emptied
    /// stream's end is at least its floor).
    fn roll_back(&mut self, applied: u64, with_next: bool) -> Option<OffsetRange> {
        let last_known = self.ends.iter().rev().find(|(w, _)| *w <= applied).map(|(_, e)| *e);
        // The next key as the replica holds it: written with each `XADD` and restart.
        self.next = last_known;
        let known = last_known.unwrap_or(0);
        let end = if with_next { known.min(self.end) } else { known.max(self.floor).min(self.end) };
        self.ends.retain(|(w, _)| *w <= applied);
        if end >= self.end {
            return None;
        }
        let lost = OffsetRange::new(end.max(self.start), self.end);
        // A replica holds whole entries, in the order they were written.
        self.entries.retain(|e| e.written <= applied && e.batch.end_offset() <= end);
        self.end = self.entries.last().map_or(end, |e| e.batch.end_offset());
        if self.entries.is_empty() {
            // An empty stream: like a Valkey stream whose entries are all gone.
            self.start = self.end;
        }
        self.floor = self.floor.min(self.end);
        Some(lost)
    }
}

#[derive(Debug, Default)]
struct State {
    topics: BTreeMap<TopicName, TopicLog>,
    /// Topic markers on the primary, each with the replication offset of its first `SET`.
    markers: BTreeMap<TopicName, u64>,
    /// The primary's replication offset: writes so far.
    primary_offset: u64,
    /// The replication offset the replica `WAIT` counts has applied.
    replica_offset: u64,
    /// The open connection's last write offset (0: it wrote nothing); `None`: no
    /// connection, the next call opens one.
    conn: Option<u64>,
    outage: bool,
    /// The replica's link is down (`WAIT` falls short).
    link_down: bool,
    /// Every n-th write pipeline loses its answer.
    answers_lost: Option<u64>,
    /// Write pipelines sent while answers are lost.
    pipelines: u64,
    /// The identical retry sends `WAIT` alone, with no write of its own (the reverted
    /// protocol, `Revert::WarmWaitAlone`).
    wait_alone: bool,
    /// A group continuing the stream goes in one script + `WAIT` (tier-warm's
    /// `conditional_append`); otherwise one batch at a time.
    group_script: bool,
    /// The next key is not consulted (the reverted protocol, `Revert::WarmIgnoresNext`).
    ignore_next: bool,
    /// Topics whose next key the client saw (tier-warm's `next_held`); forgotten by
    /// [`SimWarm::new_client`].
    next_seen: BTreeSet<TopicName>,
    /// (topic, offset) → (payload, timestamp) of every record of a batch this tier confirmed.
    confirmed: BTreeMap<(TopicName, Offset), (bytes::Bytes, Timestamp)>,
    /// Offset → payload of every record of a batch the primary ever took (confirmed or
    /// not).
    landed: BTreeMap<(TopicName, Offset), bytes::Bytes>,
    /// (offset, payload) of each confirmed record a failover to a replica behind took
    /// away while the replica `WAIT` counts held it, until confirmed again.
    confirmed_lost: BTreeSet<(TopicName, Offset, bytes::Bytes)>,
    /// A failover to a replica behind took a topic marker the replica `WAIT` counts held,
    /// and no `WAIT` has confirmed a marker since.
    marker_lost: BTreeSet<TopicName>,
    /// Owner epochs are modelled ([`SimWarm::set_owner_epochs`]); otherwise a claim
    /// returns no epoch and no write is fenced.
    owner_epochs: bool,
    /// Each topic's owner key as written, oldest first: (epoch, replication offset of the
    /// write). The last is the key's value; a failover keeps what the promoted replica
    /// applied.
    owners: BTreeMap<TopicName, Vec<(u64, u64)>>,
    /// Each topic's claimers hash as written, oldest first: (epoch, claimer, replication
    /// offset of the write). A claim writes its record in the write of its `INCR` (one
    /// script); a failover keeps what the promoted replica applied. An epoch's last record
    /// is its field's value.
    claimers: BTreeMap<TopicName, Vec<(u64, NodeId, u64)>>,
    /// The epoch the client holds for each topic: the last claim whose `INCR` it got an
    /// answer to (tier-warm's cached `owner`); forgotten by [`SimWarm::new_client`].
    claimed: BTreeMap<TopicName, u64>,
    /// Owner claims sent, claims whose answer was lost, writes the owner check refused.
    claims: u64,
    claims_unanswered: u64,
    fenced: u64,
    calls: u64,
}

impl State {
    /// A write on the open connection: the primary's offset advances, the connection
    /// remembers it, and a replica whose link is up applies it (and everything before).
    fn write(&mut self) -> u64 {
        self.primary_offset += 1;
        self.conn = Some(self.primary_offset);
        if !self.link_down {
            self.replica_offset = self.primary_offset;
        }
        self.primary_offset
    }

    /// `WAIT 1`: met iff the replica applied the connection's last write. While its link
    /// is up the replica catches up within the `WAIT`'s timeout, so the `WAIT` is met.
    fn wait(&mut self) -> bool {
        if !self.link_down {
            self.replica_offset = self.primary_offset;
        }
        self.replica_offset >= self.conn.unwrap_or(0)
    }

    /// The answer of a write pipeline the server applied: lost (`Unavailable`, the
    /// connection dropped) every n-th time while answers are lost.
    fn answer(&mut self, ctx: ErrorContext) -> Result<(), TierError> {
        let Some(every) = self.answers_lost else { return Ok(()) };
        self.pipelines += 1;
        if !self.pipelines.is_multiple_of(every) {
            return Ok(());
        }
        self.conn = None;
        Err(TierError::unavailable(
            ctx,
            "simulated lost answer: the server applied the pipeline, the connection broke before its reply",
        ))
    }

    /// A `WAIT` was met and answered: the batches of `topic` the replica holds count as
    /// confirmed (a met `WAIT` confirms every earlier write too), and so does `batch`
    /// (the one the caller is told is confirmed).
    fn confirm_topic(&mut self, topic: &TopicName, batch: Option<&RecordBatch>) {
        let applied = self.replica_offset;
        let held: Vec<RecordBatch> = self
            .topics
            .get(topic)
            .map(|log| log.entries.iter().filter(|e| e.written <= applied).map(|e| e.batch.clone()).collect())
            .unwrap_or_default();
        for b in held.iter().chain(batch) {
            confirm(self, topic, b);
        }
        self.confirm_marker(topic);
    }

    /// A met `WAIT` confirms the topic's marker if the replica holds it.
    fn confirm_marker(&mut self, topic: &TopicName) {
        if self.markers.get(topic).is_some_and(|w| *w <= self.replica_offset) {
            self.marker_lost.remove(topic);
        }
    }

    /// The topic's owner key on the primary (`None`: no key).
    fn owner(&self, topic: &TopicName) -> Option<u64> {
        self.owners.get(topic).and_then(|h| h.last()).map(|(epoch, _)| *epoch)
    }

    /// The owner check that opens tier-warm's append script (`CONDITIONAL_XADD`) and its
    /// trim script (`OWNED_TRIM`), for a client that holds an epoch: a later epoch in the
    /// owner key refuses the write (`Fenced`, nothing written; the pipeline's answer may
    /// still be lost); a missing or earlier one — a failover lost the claim — is raised
    /// to the client's (a write of the script). A client holding no epoch is not checked.
    fn check_owner(&mut self, topic: &TopicName, ctx: ErrorContext) -> Result<(), TierError> {
        let Some(&mine) = self.claimed.get(topic) else { return Ok(()) };
        match self.owner(topic) {
            Some(owner) if owner > mine => {
                self.fenced += 1;
                self.wait();
                self.answer(ctx.clone())?;
                Err(TierError::fenced(
                    ctx,
                    format!(
                        "topic {topic} is owned by epoch {owner} in warm, and this writer holds epoch {mine}: another writer took the topic over"
                    ),
                ))
            }
            Some(owner) if owner == mine => Ok(()),
            _ => {
                self.set_owner(topic, mine);
                Ok(())
            }
        }
    }

    /// `SET` (or `INCR`) of the topic's owner key to `epoch`: one write, whose replication
    /// offset it returns.
    fn set_owner(&mut self, topic: &TopicName, epoch: u64) -> u64 {
        let written = self.write();
        self.owners.entry(topic.clone()).or_default().push((epoch, written));
        written
    }

    /// Promotes a replica that applied the writes up to `applied`: every later write
    /// vanishes, the clients' connections are closed, and the other replica resyncs to
    /// it. Returns the offsets of the entries that vanished.
    fn promote(&mut self, applied: u64) -> Vec<OffsetRange> {
        let mut lost = Vec::new();
        for log in self.topics.values_mut() {
            lost.extend(log.roll_back(applied, !self.ignore_next));
        }
        self.markers.retain(|_, written| *written <= applied);
        for history in self.owners.values_mut() {
            history.retain(|(_, written)| *written <= applied);
        }
        for records in self.claimers.values_mut() {
            records.retain(|(_, _, written)| *written <= applied);
        }
        self.primary_offset = applied;
        self.replica_offset = applied;
        self.conn = None;
        lost
    }
}

/// The warm stand-in (see the module docs). Shared by the simulation (which injects the
/// faults and inspects it) and the store (which uses it as its warm backend).
#[derive(Debug, Default)]
pub struct SimWarm {
    state: Mutex<State>,
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Warm).topic(topic)
}

fn wait_short(ctx: ErrorContext, what: &str) -> TierError {
    TierError::unavailable(
        ctx,
        format!("simulated WAIT short: {what} is on the primary, the replica did not acknowledge it"),
    )
}

impl SimWarm {
    /// An empty primary and replica, no fault.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts or ends an outage (the connection breaks).
    pub fn set_outage(&self, on: bool) {
        let mut s = self.state.lock();
        s.outage = on;
        if on {
            s.conn = None;
        }
    }

    /// Cuts or restores the replica's link (`WAIT` falls short while it is cut).
    pub fn set_wait_short(&self, on: bool) {
        self.state.lock().link_down = on;
    }

    /// Loses the answer of every `every`-th write pipeline from now on (`None`: no more).
    pub fn set_answers_lost(&self, every: Option<u8>) {
        let mut s = self.state.lock();
        s.answers_lost = every.map(|n| u64::from(n.max(1)));
        s.pipelines = 0;
    }

    /// Resets the connection: the next call opens a fresh one.
    pub fn reconnect(&self) {
        self.state.lock().conn = None;
    }

    /// Takes a group continuing the stream as tier-warm does, in one script + `WAIT`
    /// (every batch lands on the primary before the `WAIT`), or (`false`, the stand-in of
    /// generators before 9) one batch at a time, stopping at the first refusal.
    pub fn set_group_script(&self, on: bool) {
        self.state.lock().group_script = on;
    }

    /// Puts back the protocol in which an identical retry confirms with `WAIT` alone.
    pub fn set_wait_alone(&self, on: bool) {
        self.state.lock().wait_alone = on;
    }

    /// Puts back the protocol without the next key: an empty stream takes any base at or
    /// past its end.
    pub fn set_ignore_next(&self, on: bool) {
        self.state.lock().ignore_next = on;
    }

    /// Models owner epochs as tier-warm keeps them (`claim_owner`'s `INCR` + `WAIT`, the
    /// scripts' owner check); off, a claim returns no epoch, as before they existed.
    pub fn set_owner_epochs(&self, on: bool) {
        self.state.lock().owner_epochs = on;
    }

    /// A new process's client: it has seen no topic's next key and holds no owner epoch.
    pub fn new_client(&self) {
        let mut s = self.state.lock();
        s.next_seen.clear();
        s.claimed.clear();
    }

    /// Owner claims sent, claims whose answer was lost, and writes the owner check
    /// refused, so far.
    pub fn owner_events(&self) -> [(&'static str, u64); 3] {
        let s = self.state.lock();
        [("claims", s.claims), ("claims unanswered", s.claims_unanswered), ("writes fenced", s.fenced)]
    }

    /// True while an outage, a short `WAIT` or lost answers last.
    pub fn faulty(&self) -> bool {
        let s = self.state.lock();
        s.outage || s.link_down || s.answers_lost.is_some()
    }

    /// Fails over to the replica `WAIT` counts: the primary's writes it did not apply
    /// vanish. Returns the offsets that vanished.
    pub fn fail_over(&self) -> Vec<OffsetRange> {
        let mut s = self.state.lock();
        let applied = s.replica_offset;
        s.promote(applied)
    }

    /// Fails over to a replica that lacks the primary's last `writes` writes (and what the
    /// replica `WAIT` counts lacks), confirmed ones among them. Returns the offsets that
    /// vanished and the records among them a met `WAIT` had confirmed while the replica it
    /// counts held them.
    pub fn fail_over_behind(
        &self,
        writes: u8,
        topic: &TopicName,
    ) -> (Vec<OffsetRange>, Vec<(Offset, bytes::Bytes)>) {
        let mut s = self.state.lock();
        let applied = s.replica_offset.min(s.primary_offset.saturating_sub(u64::from(writes)));
        let counted = s.replica_offset;
        let mut taken = Vec::new();
        for (name, log) in &s.topics {
            for e in log.entries.iter().filter(|e| e.written > applied && e.written <= counted) {
                taken.extend(e.batch.records().map(|r| (name.clone(), r.offset, r.payload)));
            }
        }
        let markers_taken: Vec<TopicName> = s
            .markers
            .iter()
            .filter(|(_, w)| **w > applied && **w <= counted)
            .map(|(t, _)| t.clone())
            .collect();
        s.marker_lost.extend(markers_taken);
        let mut confirmed_lost = Vec::new();
        for (name, offset, payload) in taken {
            if s.confirmed.get(&(name.clone(), offset)).is_some_and(|(p, _)| *p == payload) {
                let payload = bytes::Bytes::copy_from_slice(&payload);
                s.confirmed_lost.insert((name.clone(), offset, payload.clone()));
                if name == *topic {
                    confirmed_lost.push((offset, payload));
                }
            }
        }
        (s.promote(applied), confirmed_lost)
    }

    /// True when a failover to a replica behind took away the confirmed record `payload`
    /// at `offset` (see [`fail_over_behind`](Self::fail_over_behind)) and no `WAIT` has
    /// confirmed it again since.
    pub fn confirmed_copy_lost(&self, topic: &TopicName, offset: Offset, payload: &[u8]) -> bool {
        self.state.lock().confirmed_lost.contains(&(
            topic.clone(),
            offset,
            bytes::Bytes::copy_from_slice(payload),
        ))
    }

    /// True when a failover to a replica behind took a topic marker the replica `WAIT`
    /// counts held (a confirmed one) and no `WAIT` has confirmed a marker since.
    pub fn confirmed_marker_lost(&self, topic: &TopicName) -> bool {
        self.state.lock().marker_lost.contains(topic)
    }

    /// The record the primary holds at `offset` of `topic` now (payload and timestamp).
    pub fn holds(&self, topic: &TopicName, offset: Offset) -> Option<(bytes::Bytes, Timestamp)> {
        let s = self.state.lock();
        let log = s.topics.get(topic)?;
        if !log.range().contains(offset) {
            return None;
        }
        let entry = log.entries.get(log.batch_index(offset))?;
        entry.batch.records().find(|r| r.offset == offset).map(|r| (r.payload, r.timestamp))
    }

    /// What the tier confirmed at `offset` of `topic` (payload and timestamp), ever.
    pub fn confirmed(&self, topic: &TopicName, offset: Offset) -> Option<(bytes::Bytes, Timestamp)> {
        self.state.lock().confirmed.get(&(topic.clone(), offset)).cloned()
    }

    /// What the primary took at `offset` (payload), ever, confirmed or not.
    pub fn landed(&self, topic: &TopicName, offset: Offset) -> Option<bytes::Bytes> {
        self.state.lock().landed.get(&(topic.clone(), offset)).cloned()
    }

    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.state.lock().calls
    }

    /// A call: refused during an outage, else on the open connection (a fresh one, whose
    /// last write offset is 0, when there is none).
    fn enter(&self, topic: &TopicName) -> Result<parking_lot::MutexGuard<'_, State>, TierError> {
        let mut s = self.state.lock();
        s.calls += 1;
        if s.outage {
            s.conn = None;
            return Err(TierError::unavailable(
                ctx(topic),
                "simulated warm outage: the primary does not answer",
            ));
        }
        s.conn.get_or_insert(0);
        Ok(s)
    }

    /// tier-warm's `append_checked` (through `Tier::append`): decides on the stream's
    /// range — the stand-in has no cache, its range is always the server's, so the `XADD`
    /// is sent only for a batch that continues it and is never refused.
    fn append_checked(s: &mut State, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let log = s.topics.entry(topic.clone()).or_default();
        if log.range().contains(base) {
            // A retry of something already held, or a conflict.
            return Self::resolve_existing(s, topic, batch);
        }
        let (next_held, ignore) = (s.next_seen.contains(topic), s.ignore_next);
        if !log.continues(base, next_held, ignore) {
            return Err(TierError::invalid(
                ctx(topic).offset(base),
                format!("batch base offset {base} does not continue the held range {}", log.range()),
            ));
        }
        Self::xadd_and_wait(s, topic, batch)
    }

    /// tier-warm's `xadd_and_wait`: the append script (the owner check, then `XADD`) +
    /// `WAIT` in one pipeline on one connection.
    fn xadd_and_wait(s: &mut State, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        s.check_owner(topic, ctx(topic).offset(batch.base_offset()))?;
        Self::xadd(s, topic, batch);
        Self::wait_and_confirm(s, topic, batch)
    }

    /// The `WAIT` closing a pipeline that wrote `batch` (or a write of its own after it):
    /// tier-warm's `send_with_wait` (the answer of the pipeline the server applied) and
    /// `check_wait`; met, the batch is confirmed.
    fn wait_and_confirm(s: &mut State, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let met = s.wait();
        s.answer(ctx(topic).offset(base))?;
        if !met {
            return Err(wait_short(ctx(topic).offset(base), "the entry"));
        }
        s.confirm_topic(topic, Some(batch));
        Ok(())
    }

    /// The `XADD` of a batch continuing the stream: one write.
    fn xadd(s: &mut State, topic: &TopicName, batch: &RecordBatch) {
        let written = s.write();
        let log = s.topics.entry(topic.clone()).or_default();
        let base = batch.base_offset();
        if log.start == log.end {
            log.start = base;
            if log.entries.is_empty() {
                log.floor = log.floor.max(base);
            }
        }
        log.end = batch.end_offset();
        log.next = Some(log.end);
        log.entries.push(Entry { batch: owned_copy(batch), written });
        log.ends.push((written, log.end));
        s.next_seen.insert(topic.clone());
        for r in batch.records() {
            s.landed.insert((topic.clone(), r.offset), bytes::Bytes::copy_from_slice(&r.payload));
        }
    }

    /// tier-warm's `resolve_existing`: the entry at the batch's base (a read) is the same
    /// batch → `confirm_held`; anything else → `Fenced`.
    fn resolve_existing(s: &mut State, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let log = s.topics.entry(topic.clone()).or_default();
        let held = &log.entries[log.batch_index(base)].batch;
        if held != batch {
            return Err(TierError::fenced(
                ctx(topic).offset(base),
                format!(
                    "a different batch already holds offset {base} (held {:?}, offered {:?})",
                    held.offset_range(),
                    batch.offset_range()
                ),
            ));
        }
        Self::confirm_held(s, topic, batch)
    }

    /// tier-warm's `confirm_held`: `SET <marker> 1` + `WAIT` in one pipeline, so that the
    /// `WAIT` counts a write of its own connection made after the entry. Reverted
    /// (`wait_alone`): `WAIT` alone, which on a fresh connection is met at once.
    fn confirm_held(s: &mut State, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        if !s.wait_alone {
            Self::set_marker(s, topic);
        }
        Self::wait_and_confirm(s, topic, batch)
    }

    /// `SET <marker> 1`: one write (the marker exists from its first).
    fn set_marker(s: &mut State, topic: &TopicName) {
        let written = s.write();
        s.markers.entry(topic.clone()).or_insert(written);
    }
}

/// Records `batch`'s records as confirmed, each payload a copy of its own: a batch the
/// router sends warm may be read from a WAL segment file that the simulation later damages
/// in place, and the model would see what warm confirmed change under it.
fn confirm(s: &mut State, topic: &TopicName, batch: &RecordBatch) {
    for r in batch.records() {
        // Confirmed again: held by the replica `WAIT` counts once more (another record
        // confirmed at its offset leaves it lost).
        s.confirmed_lost.remove(&(topic.clone(), r.offset, bytes::Bytes::copy_from_slice(&r.payload)));
        s.confirmed
            .insert((topic.clone(), r.offset), (bytes::Bytes::copy_from_slice(&r.payload), r.timestamp));
    }
}

#[async_trait]
impl Tier for SimWarm {
    fn kind(&self) -> TierKind {
        TierKind::Warm
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    /// tier-warm's `refresh_range`: the stream's range, and its next key seen.
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        let mut s = self.enter(topic)?;
        let Some(log) = s.topics.get(topic) else { return Ok(OffsetRange::default()) };
        let range = log.range();
        if log.next.is_some() {
            s.next_seen.insert(topic.clone());
        }
        Ok(range)
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let mut s = self.enter(topic)?;
        Self::append_checked(&mut s, topic, &batch)
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let s = self.enter(topic)?;
        let range = s.topics.get(topic).map(TopicLog::range).unwrap_or_default();
        if from < range.start || from > range.end {
            return Err(TierError::trimmed(ctx(topic).offset(from), from, range));
        }
        let mut collector = BatchCollector::new(from, to.min(range.end), max_bytes);
        if let Some(log) = s.topics.get(topic) {
            for entry in log.entries.iter().skip(log.batch_index(from)) {
                if collector.is_full() {
                    break;
                }
                collector.push_batch(&entry.batch);
            }
        }
        Ok(collector.into_batches())
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        let s = self.enter(topic)?;
        let Some(log) = s.topics.get(topic) else { return Ok(None) };
        let mut running = Timestamp::MIN;
        for entry in &log.entries {
            for record in entry.batch.records() {
                running = running.max(record.timestamp);
                if running >= timestamp {
                    return Ok(Some(record.offset));
                }
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl WarmBackend for SimWarm {
    /// tier-warm's `append_group`: a group of several contiguous batches continuing the
    /// stream goes in one script + `WAIT` (`conditional_append`); the rest, and every
    /// other case, one batch at a time as [`Tier::append`].
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        let contiguous = batches.windows(2).all(|w| w[0].end_offset() == w[1].base_offset());
        let mut held = 0;
        let script = self.state.lock().group_script;
        if script && batches.len() > 1 && contiguous {
            let mut guard = match self.enter(topic) {
                Ok(s) => s,
                Err(e) => return (0, Err(e)),
            };
            let s = &mut *guard;
            let (next_held, ignore) = (s.next_seen.contains(topic), s.ignore_next);
            let continues = s
                .topics
                .get(topic)
                .is_none_or(|log| log.continues(batches[0].base_offset(), next_held, ignore));
            if continues {
                // `conditional_append`: the script's owner check and `XADD`s (none
                // refused: each continues the one before) and the `WAIT` after them, one
                // pipeline.
                if let Err(e) = s.check_owner(topic, ctx(topic).offset(batches[0].base_offset())) {
                    return (0, Err(e));
                }
                for batch in &batches {
                    Self::xadd(s, topic, batch);
                }
                let met = s.wait();
                let base = batches[0].base_offset();
                if let Err(e) = s.answer(ctx(topic).offset(base)) {
                    return (0, Err(e));
                }
                if !met {
                    return (0, Err(wait_short(ctx(topic).offset(base), "the group")));
                }
                s.confirm_topic(topic, None);
                held = batches.len();
            }
        }
        for batch in batches.into_iter().skip(held) {
            if let Err(e) = self.append(topic, batch).await {
                return (held, Err(e));
            }
            held += 1;
        }
        (held, Ok(()))
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let mut guard = self.enter(topic)?;
        let s = &mut *guard;
        // A client holding an epoch trims in `OWNED_TRIM`, which checks it first.
        s.check_owner(topic, ctx(topic).offset(offset))?;
        let Some(log) = s.topics.get_mut(topic) else { return Ok(()) };
        // Never the newest batch: the stream keeps remembering where the log ends.
        let keep_from = log
            .entries
            .partition_point(|e| e.batch.end_offset() <= offset)
            .min(log.entries.len().saturating_sub(1));
        if keep_from == 0 {
            return Ok(());
        }
        log.entries.drain(..keep_from);
        log.start = log.entries.first().map_or(log.end, |e| e.batch.base_offset());
        // `XTRIM` that removed entries: a write (which a failover does not undo: the
        // stand-in keeps no copy of what a trim removed).
        s.write();
        Ok(())
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let mut guard = self.enter(topic)?;
        let s = &mut *guard;
        // A client holding an epoch restarts in `OWNED_TRIM`, which checks it first.
        s.check_owner(topic, ctx(topic).offset(offset))?;
        // A topic the stream never held: `XTRIM` removes nothing (an empty log takes any
        // base, as no log does).
        let log = s.topics.entry(topic.clone()).or_default();
        if log.end > offset {
            return Err(TierError::invalid(
                ctx(topic).offset(offset),
                format!("cannot restart at {offset}: the tier holds {}", log.range()),
            ));
        }
        // Like `XTRIM MINID <offset>-1`: every entry goes, the stream stays (a write when
        // it removed any); then `SET <next key> <offset>` (a write).
        let removed = !log.entries.is_empty();
        log.entries.clear();
        log.start = log.end;
        if removed {
            s.write();
        }
        if s.ignore_next {
            return Ok(());
        }
        let written = s.write();
        let log = s.topics.entry(topic.clone()).or_default();
        (log.start, log.end, log.next) = (offset, offset, Some(offset));
        log.ends.push((written, offset));
        s.next_seen.insert(topic.clone());
        Ok(())
    }

    /// tier-warm's `claim_owner`: the claim script (`INCR <owner key>` and `HSET
    /// <claimers key> <epoch> <claimer>`, one write) + `WAIT` in one pipeline. The client
    /// holds the new epoch once it has the script's answer, also when the `WAIT` fell
    /// short (`Unavailable`: the claim holds on the primary); a lost answer leaves it
    /// holding what it held, and the server the epoch and its record.
    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        if !self.state.lock().owner_epochs {
            return Ok(None);
        }
        let mut guard = self.enter(topic)?;
        let s = &mut *guard;
        let epoch = s.owner(topic).unwrap_or(0) + 1;
        let written = s.set_owner(topic, epoch);
        s.claimers.entry(topic.clone()).or_default().push((epoch, claimer, written));
        s.claims += 1;
        let met = s.wait();
        if let Err(e) = s.answer(ctx(topic)) {
            s.claims_unanswered += 1;
            return Err(e);
        }
        s.claimed.insert(topic.clone(), epoch);
        if !met {
            return Err(wait_short(ctx(topic), "the owner claim"));
        }
        Ok(Some(epoch))
    }

    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        self.state.lock().claimed.get(topic).copied()
    }

    /// tier-warm's `claimers`: `HMGET <claimers key>`, a read on the primary.
    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        let s = self.enter(topic)?;
        let records = s.claimers.get(topic).map(Vec::as_slice).unwrap_or_default();
        Ok(records
            .iter()
            .filter(|(epoch, _, _)| epochs.contains(epoch))
            .map(|(epoch, id, _)| (*epoch, *id))
            .collect())
    }

    /// tier-warm's `record_topic`: `SET <marker> 1` + `WAIT` in one pipeline.
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        let mut guard = self.enter(topic)?;
        let s = &mut *guard;
        Self::set_marker(s, topic);
        let met = s.wait();
        s.answer(ctx(topic))?;
        if !met {
            return Err(wait_short(ctx(topic), "the topic marker"));
        }
        s.confirm_marker(topic);
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        Ok(self.enter(topic)?.markers.contains_key(topic))
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        let batches = match self.enter(topic) {
            Ok(s) => Ok(s
                .topics
                .get(topic)
                .map(|log| {
                    log.entries
                        .iter()
                        .filter(|e| e.batch.end_offset() > from)
                        .map(|e| e.batch.clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()),
            Err(e) => Err(e),
        };
        match batches {
            Ok(b) => stream::iter(b.into_iter().map(Ok)).boxed(),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        }
    }
}

/// `batch` in memory of its own, as a real warm tier holds what it was sent: a batch read
/// from the WAL may share the bytes of a mapped segment file, which the simulation later
/// damages or cuts back in place.
fn owned_copy(batch: &RecordBatch) -> RecordBatch {
    RecordBatch::decode(&batch.to_bytes()).expect("a batch re-decodes from its own encoding")
}
