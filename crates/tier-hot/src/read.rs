//! The read path: records by offset and by timestamp, and the batch at a given offset.
//!
//! A read first checks the range under the topic's read lock. When the cache holds the
//! start of the read, it is answered from memory. Otherwise a *plan* (handles on the
//! sealed segments from the one holding the start, and the active segment's sparse
//! index position) is copied out and the segment bytes are read on the blocking pool:
//! sealed segments through their mmap and footer index, the active segment with
//! positional reads starting at the sparse-index entry at or before the wanted offset.
//! Neither ever scans from a segment's start.

use std::{os::unix::fs::FileExt, sync::Arc};

use bytes::{Bytes, BytesMut};
use tier_core::{
    Offset, ReadLimit, Record, RecordBatch, TierError, Timestamp,
    batch::{BATCH_PREFIX_LEN, BatchPrefix, DecodeError},
    segment::{BatchCollector, BatchSink, RecordCollector, first_offset_reaching},
};

use crate::layout::{at, ctx, io_err};
use crate::segment::SealedFile;
use crate::topic::{ActiveView, Gap, ParkedBatch, TopicShared, TopicState};

/// Where the active segment's batches are to be read from.
#[derive(Debug, Clone)]
pub(crate) struct ActivePlan {
    view_path: std::path::PathBuf,
    file: Arc<std::fs::File>,
    /// Byte position of the first batch to read (an index interval start).
    position: u64,
    /// Base offset of the batch at `position`.
    first_offset: Offset,
    /// End of the committed data.
    data_end: u64,
    /// Running maximum timestamp of the segment's records before `position`.
    max_before: Timestamp,
}

impl ActivePlan {
    /// The plan for reading from `offset` (which the segment holds, or its end).
    fn for_offset(view: &ActiveView, offset: Offset) -> Self {
        let i = view.entries.partition_point(|e| e.offset <= offset);
        Self::at_entry(view, i.checked_sub(1))
    }

    /// The plan for finding the first offset whose running maximum reaches `t`, or
    /// `None` when the active segment has no such record.
    fn for_timestamp(view: &ActiveView, t: Timestamp) -> Option<Self> {
        let i = view.entries.partition_point(|e| e.max_timestamp < t);
        (i < view.entries.len()).then(|| Self::at_entry(view, Some(i)))
    }

    fn at_entry(view: &ActiveView, i: Option<usize>) -> Self {
        let (position, first_offset, max_before) = match i.and_then(|i| view.entries.get(i).map(|e| (i, e))) {
            Some((i, e)) => {
                let before = i.checked_sub(1).map_or(Timestamp::MIN, |p| view.entries[p].max_timestamp);
                (e.position, e.offset, before)
            }
            // No batch yet: the data (empty) starts at data_end.
            None => (view.data_end, view.base_offset, Timestamp::MIN),
        };
        Self {
            view_path: view.path.clone(),
            file: Arc::clone(&view.file),
            position,
            first_offset,
            data_end: view.data_end,
            max_before,
        }
    }

    /// The batches from the plan's position to the committed end, read in chunks.
    fn batches<'a>(&'a self, shared: &'a TopicShared) -> ActiveBatches<'a> {
        ActiveBatches {
            plan: self,
            shared,
            pos: self.position,
            expected: self.first_offset,
            chunk: Bytes::new(),
            chunk_pos: self.position,
            skip_before: self.first_offset,
            done: false,
        }
    }
}

/// Bytes read at once from the active segment.
const CHUNK_BYTES: u64 = 256 * 1024;

/// Iterator over the active segment's committed batches from a plan's position.
struct ActiveBatches<'a> {
    plan: &'a ActivePlan,
    shared: &'a TopicShared,
    pos: u64,
    expected: Offset,
    /// Bytes of the file from `chunk_pos`.
    chunk: Bytes,
    chunk_pos: u64,
    /// Batches ending at or before this offset are stepped over by their fixed fields
    /// only (see [`ActiveBatches::skip_to`]).
    skip_before: Offset,
    done: bool,
}

impl ActiveBatches<'_> {
    fn corrupt(&self, e: DecodeError) -> TierError {
        let pos = e.position();
        e.into_tier_error(ctx(&self.shared.name).location(at(&self.plan.view_path, pos)))
    }

    fn read_at(&self, pos: u64, len: u64) -> Result<Bytes, TierError> {
        let mut buf = BytesMut::zeroed(len as usize);
        self.plan
            .file
            .read_exact_at(&mut buf, pos)
            .map_err(|e| io_err(&self.shared.name, &self.plan.view_path, "reading the active segment", e))?;
        Ok(buf.freeze())
    }

    /// Makes sure `self.chunk` holds the whole batch at `self.pos`; returns its length.
    fn fill(&mut self) -> Result<usize, TierError> {
        let avail_in_file = self.plan.data_end - self.pos;
        let offset_in_chunk = (self.pos - self.chunk_pos) as usize;
        let mut have = self.chunk.len().saturating_sub(offset_in_chunk);
        if have < BATCH_PREFIX_LEN {
            self.chunk = self.read_at(self.pos, avail_in_file.min(CHUNK_BYTES))?;
            self.chunk_pos = self.pos;
            have = self.chunk.len();
        }
        let start = (self.pos - self.chunk_pos) as usize;
        let prefix =
            BatchPrefix::parse(&self.chunk[start..]).map_err(|e| self.corrupt(e.shifted(self.pos)))?;
        let len = prefix.encoded_len;
        if len as u64 > avail_in_file {
            return Err(self.corrupt(DecodeError::Truncated {
                position: self.pos,
                needed: len as u64,
                available: avail_in_file,
            }));
        }
        if have < len {
            self.chunk = self.read_at(self.pos, (len as u64).max(avail_in_file.min(CHUNK_BYTES)))?;
            self.chunk_pos = self.pos;
        }
        Ok(len)
    }

    /// Makes the iterator step over the batches that end at or before `offset` without
    /// decoding them (no CRC, no record parsing): none of their records is wanted.
    /// Batches yielded afterwards are checked as usual, including their continuity with
    /// the skipped batches' offsets, so a damaged skipped batch cannot go unnoticed in
    /// what is returned.
    fn skip_to(mut self, offset: Offset) -> Self {
        self.skip_before = offset;
        self
    }

    /// Steps over the batch at `self.pos` if it is wholly before `skip_before` and
    /// looks like the expected batch; true when it did.
    fn skipped(&mut self, len: usize) -> bool {
        let start = (self.pos - self.chunk_pos) as usize;
        let Some(fixed) = self.chunk.get(start..start + BATCH_PREFIX_LEN + 4) else { return false };
        let base = u64::from_le_bytes(fixed[..8].try_into().expect("8 bytes"));
        let count = u32::from_le_bytes(fixed[BATCH_PREFIX_LEN..].try_into().expect("4 bytes"));
        let Some(end) = base.checked_add(u64::from(count)) else { return false };
        if base != self.expected || count == 0 || end > self.skip_before {
            return false;
        }
        self.pos += len as u64;
        self.expected = end;
        true
    }

    fn step(&mut self) -> Result<Option<RecordBatch>, TierError> {
        let len = loop {
            if self.pos >= self.plan.data_end {
                return Ok(None);
            }
            let len = self.fill()?;
            if !self.skipped(len) {
                break len;
            }
        };
        let start = (self.pos - self.chunk_pos) as usize;
        let batch = RecordBatch::decode(&self.chunk.slice(start..start + len))
            .map_err(|e| self.corrupt(e.shifted(self.pos)))?;
        if batch.base_offset() != self.expected {
            return Err(self.corrupt(DecodeError::Invalid {
                position: self.pos,
                message: format!(
                    "batch starts at offset {} but {} was expected",
                    batch.base_offset(),
                    self.expected
                ),
            }));
        }
        self.pos += len as u64;
        self.expected = batch.end_offset();
        Ok(Some(batch))
    }
}

impl Iterator for ActiveBatches<'_> {
    type Item = Result<RecordBatch, TierError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

fn sealed_corrupt(shared: &TopicShared, seg: &SealedFile, e: DecodeError) -> TierError {
    let pos = e.position();
    e.into_tier_error(ctx(&shared.name).location(at(&seg.info.path, pos)))
}

/// Pushes the batches of `seg` holding `from..` into `collector`.
///
/// A read stops at a batch it has already read and verified (the one after the last that
/// fit its byte limit or its end, or one it took only part of): it leaves that batch and
/// the one before in the topic's [`ParkedBatch`] slot, and the read continuing there takes
/// them from the slot, so a sequential reader's CRC and record checks run once a batch,
/// not once more at every read's boundary.
fn collect_sealed(
    shared: &TopicShared,
    seg: &Arc<SealedFile>,
    collector: &mut impl BatchSink,
) -> Result<(), TierError> {
    // The last two batches read.
    let (mut before, mut last): (Option<RecordBatch>, Option<RecordBatch>) = (None, None);
    let mut push = |collector: &mut _, batch: RecordBatch| {
        BatchSink::push_batch(collector, &batch);
        before = last.replace(batch);
    };
    for batch in take_parked(shared, seg, collector.next_offset()) {
        if collector.is_full() {
            break;
        }
        push(collector, batch);
    }
    if !collector.is_full() {
        let from = collector.next_offset();
        if let Some(range) = seg.segment.index().locate_offset(from) {
            let mut batches =
                seg.segment.batches_from(range.bytes.start).map_err(|e| sealed_corrupt(shared, seg, e))?;
            // The batches of the index interval before `from` are stepped over without
            // being decoded; every batch read from here on is checked (CRC, records,
            // continuity).
            batches.skip_to(from);
            for item in batches {
                if collector.is_full() {
                    break;
                }
                let (_, batch) = item.map_err(|e| sealed_corrupt(shared, seg, e))?;
                push(collector, batch);
            }
        }
    }
    let next = collector.next_offset();
    if let Some(last) = last.filter(|b| next < b.end_offset()) {
        let batches = before.into_iter().chain([last]).collect();
        *shared.parked.lock() = Some(ParkedBatch { segment: Arc::clone(seg), batches });
    }
    Ok(())
}

/// The verified batches of `seg` from the one holding `from` on that an earlier read
/// stopped at, taken out of the slot (none when it holds no batch of `seg` holding `from`).
fn take_parked(shared: &TopicShared, seg: &Arc<SealedFile>, from: Offset) -> Vec<RecordBatch> {
    let mut slot = shared.parked.lock();
    let at = slot
        .as_ref()
        .filter(|p| Arc::ptr_eq(&p.segment, seg))
        .and_then(|p| p.batches.iter().position(|b| b.base_offset() <= from && from < b.end_offset()));
    match at {
        Some(i) => slot.take().map(|p| p.batches[i..].to_vec()).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// What a disk read needs, copied out of the topic state.
#[derive(Debug)]
struct DiskPlan {
    sealed: Vec<Arc<SealedFile>>,
    active: Option<ActivePlan>,
}

fn disk_plan(state: &TopicState, from: Offset) -> DiskPlan {
    let first = state.sealed.partition_point(|s| s.info.range.end <= from);
    let sealed = state.sealed[first..].to_vec();
    let active = state.active.as_ref().map(|v| ActivePlan::for_offset(v, from.max(v.base_offset)));
    DiskPlan { sealed, active }
}

/// Records `from..to` (invariant 6), from the cache when it holds `from`, else from disk.
pub(crate) async fn read(
    shared: &Arc<TopicShared>,
    from: Offset,
    to: Offset,
    limit: ReadLimit,
) -> Result<Vec<Record>, TierError> {
    let collector = read_into(shared, from, to, |to| RecordCollector::new(from, to, limit)).await?;
    Ok(collector.into_records())
}

/// The verified batches holding `from..to`, at most `max_bytes` of them (at least one
/// when any is available); see [`Tier::read_batches`](tier_core::Tier::read_batches).
pub(crate) async fn read_batches(
    shared: &Arc<TopicShared>,
    from: Offset,
    to: Offset,
    max_bytes: usize,
) -> Result<Vec<RecordBatch>, TierError> {
    let collector = read_into(shared, from, to, |to| BatchCollector::new(from, to, max_bytes)).await?;
    Ok(collector.into_batches())
}

/// Feeds the batches holding `from..to` into the sink `make` builds for the clipped end
/// (`to` bounded by the range held and by a recorded gap): from the cache when it holds
/// `from`, else from disk on the blocking pool.
async fn read_into<S>(
    shared: &Arc<TopicShared>,
    from: Offset,
    to: Offset,
    make: impl FnOnce(Offset) -> S,
) -> Result<S, TierError>
where
    S: BatchSink + Send + 'static,
{
    // The range check and the plan are taken under one lock, so the plan holds every
    // offset from `from` to the end seen, even if retention or rotation runs meanwhile.
    // Cached batches are copied out (handles only) and decoded after the lock is let go.
    let (to, plan) = {
        let state = shared.state.read();
        let held = state.range();
        if from < held.start || from > held.end {
            return Err(TierError::trimmed(ctx(&shared.name).offset(from), from, held));
        }
        let mut to = to.min(held.end);
        if let Some(gap) = state.gap_after(from) {
            if gap.range.start <= from {
                return Err(gap_error(&shared.name, from, gap));
            }
            // A read stops before a recorded gap; the next read starting in it fails.
            to = to.min(gap.range.start);
        }
        if from >= to {
            (to, Err(Vec::new()))
        } else if state.cache.covers(from) {
            (to, Err(state.cache.batches_between(from, to)))
        } else {
            (to, Ok(disk_plan(&state, from)))
        }
    };
    let mut sink = make(to);
    let plan = match plan {
        Ok(plan) if !sink.is_full() => plan,
        Ok(_) => return Ok(sink),
        Err(batches) => {
            for b in &batches {
                if sink.is_full() {
                    break;
                }
                sink.push_batch(b);
            }
            return Ok(sink);
        }
    };
    let shared = Arc::clone(shared);
    read_blocking(&shared.name.clone(), move || {
        read_disk(&shared, &plan, to, &mut sink)?;
        Ok(sink)
    })
    .await
}

/// Feeds `sink` from the segments of `plan` up to `to`, starting at the sink's next
/// offset.
fn read_disk(
    shared: &TopicShared,
    plan: &DiskPlan,
    to: Offset,
    sink: &mut impl BatchSink,
) -> Result<(), TierError> {
    for seg in &plan.sealed {
        if sink.is_full() || seg.info.range.start >= to {
            return Ok(());
        }
        collect_sealed(shared, seg, sink)?;
    }
    if let Some(active) = plan.active.as_ref().filter(|a| a.first_offset < to) {
        for batch in active.batches(shared).skip_to(sink.next_offset()) {
            if sink.is_full() {
                break;
            }
            sink.push_batch(&batch?);
        }
    }
    Ok(())
}

/// The first offset whose running maximum timestamp is `>= t` (invariant 7).
pub(crate) async fn offset_for_timestamp(
    shared: &Arc<TopicShared>,
    t: Timestamp,
) -> Result<Option<Offset>, TierError> {
    let shared = Arc::clone(shared);
    blocking(&shared.name.clone(), move || {
        let (sealed, active) = {
            let state = shared.state.read();
            let sealed = state.sealed.iter().find(|s| s.info.max_timestamp >= t).cloned();
            let active = match sealed {
                Some(_) => None,
                None => state.active.as_ref().and_then(|v| ActivePlan::for_timestamp(v, t)),
            };
            (sealed, active)
        };
        if let Some(seg) = sealed {
            // Every earlier segment's records stay below `t`, so the segment's own
            // running maximum decides.
            return seg.segment.offset_for_timestamp(t).map_err(|e| sealed_corrupt(&shared, &seg, e));
        }
        let Some(plan) = active else { return Ok(None) };
        first_offset_reaching(plan.batches(&shared), t, plan.max_before)
    })
    .await
}

/// The committed batch starting exactly at `base`, or `None` when no held batch starts
/// there (inside a batch, or outside the range).
pub(crate) fn find_batch(shared: &TopicShared, base: Offset) -> Result<Option<RecordBatch>, TierError> {
    let plan = {
        let state = shared.state.read();
        let held = state.range();
        if !held.contains(base) || state.gap_after(base).is_some_and(|g| g.range.contains(base)) {
            return Ok(None);
        }
        if state.cache.covers(base) {
            return Ok(state.cache.batch_at(base));
        }
        disk_plan(&state, base)
    };
    if let Some(seg) = plan.sealed.first().filter(|s| s.info.range.contains(base)) {
        let Some(range) = seg.segment.index().locate_offset(base) else { return Ok(None) };
        let mut batches =
            seg.segment.batches_from(range.bytes.start).map_err(|e| sealed_corrupt(shared, seg, e))?;
        batches.skip_to(base);
        for item in batches {
            let (_, batch) = item.map_err(|e| sealed_corrupt(shared, seg, e))?;
            if batch.base_offset() >= base {
                return Ok((batch.base_offset() == base).then_some(batch));
            }
        }
        return Ok(None);
    }
    if let Some(active) = &plan.active {
        for batch in active.batches(shared).skip_to(base) {
            let batch = batch?;
            if batch.base_offset() >= base {
                return Ok((batch.base_offset() == base).then_some(batch));
            }
        }
    }
    Ok(None)
}

/// The error of a read starting at `from`, inside the recorded `gap`: `NotFound`
/// naming the lost range and its marker file (the router's stitched reader passes
/// `NotFound` on as "held by no tier", never retrying or skipping it).
pub(crate) fn gap_error(topic: &tier_core::TopicName, from: Offset, gap: &Gap) -> TierError {
    TierError::not_found(
        ctx(topic).offset(from).location(gap.marker.display().to_string()),
        format!(
            "offsets {}..{} of topic {topic} were lost (recorded lost at recovery in {})",
            gap.range.start,
            gap.range.end,
            gap.marker.display()
        ),
    )
}

/// Runs a read's blocking file work (mapped pages may fault in from the disk) where the
/// caller will use what it reads: on a multi-threaded runtime, in place on the caller's
/// worker thread ([`tokio::task::block_in_place`]: the worker's other tasks move to
/// another thread meanwhile), so the batches it verified are still in this core's cache
/// when the caller builds records from them; elsewhere on the blocking pool.
pub(crate) async fn read_blocking<T: Send + 'static>(
    topic: &tier_core::TopicName,
    f: impl FnOnce() -> Result<T, TierError> + Send + 'static,
) -> Result<T, TierError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        return tokio::task::block_in_place(f);
    }
    blocking(topic, f).await
}

/// Runs blocking file work on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    topic: &tier_core::TopicName,
    f: impl FnOnce() -> Result<T, TierError> + Send + 'static,
) -> Result<T, TierError> {
    tier_core::blocking::spawn(f)
        .await
        .map_err(|e| TierError::internal(ctx(topic), "the blocking file task failed").with_source(e))?
}
