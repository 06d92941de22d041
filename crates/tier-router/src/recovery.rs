//! Crash recovery of one topic when the store opens it, and the router's checkpoints.
//!
//! The WAL is the source of truth while it exists. When it is missing or behind what
//! warm and cold hold, the topic continues at `max(end of warm, end of cold)` (or the
//! last checkpointed commit point, when that is further): warm batches beyond the WAL's
//! end (and cold's end) are replayed into the fresh WAL, and any offsets no tier can
//! serve are reported in [`RecoveryReport::lost`] — never renumbered. When warm is
//! behind an intact WAL (a crash between the WAL write and warm's confirmation), the
//! missing records are queued for warm again.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use tier_core::{
    ErrorContext, Offset, OffsetRange, ReadLimit, RecordBatch, Tier, TierError, TierKind, TopicName,
};
use tracing::{error, info, warn};

use crate::store::Tiers;

/// What opening a topic found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The topic.
    pub topic: TopicName,
    /// What the WAL held when opened.
    pub hot: OffsetRange,
    /// What warm held (`None`: warm disabled).
    pub warm: Option<OffsetRange>,
    /// What cold held (`None`: cold disabled).
    pub cold: Option<OffsetRange>,
    /// Warm batches replayed into the WAL.
    pub replayed: Option<OffsetRange>,
    /// WAL records queued for warm because warm did not hold them.
    pub warm_backfill: Option<OffsetRange>,
    /// Offsets that were (or may have been) acknowledged but that no tier holds.
    pub lost: Vec<OffsetRange>,
    /// The offset the next append gets.
    pub next_offset: Offset,
}

impl RecoveryReport {
    /// True when nothing was lost.
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty()
    }
}

/// The outcome the writer starts from.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) report: RecoveryReport,
    /// Batches in the WAL that warm lacks, in order.
    pub(crate) backlog: Vec<RecordBatch>,
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Router).topic(topic)
}

/// Recovers `topic` (see the module docs).
pub(crate) async fn recover_topic(
    tiers: &Tiers,
    state_dir: &Path,
    topic: &TopicName,
) -> Result<Recovered, TierError> {
    let hot = tiers.hot.range(topic).await?;
    let warm = match &tiers.warm {
        Some(w) => Some(w.range(topic).await?),
        None => None,
    };
    let cold = match &tiers.cold {
        Some(c) => Some(c.range(topic).await?),
        None => None,
    };
    let checkpoint = read_checkpoint(state_dir, topic)?;
    let mut report = RecoveryReport {
        topic: topic.clone(),
        hot,
        warm,
        cold,
        replayed: None,
        warm_backfill: None,
        lost: Vec::new(),
        next_offset: hot.end,
    };
    let warm_r = warm.unwrap_or_default();
    let cold_end = cold.map_or(0, |c| c.end);
    let mut next = hot.end;

    if !warm_r.is_empty() && warm_r.end > hot.end {
        // Warm is ahead of the WAL: replay what the WAL lacks.
        let mut from = hot.end;
        if hot.is_empty() {
            from = from.max(cold_end);
        }
        if warm_r.start > from {
            if !hot.is_empty() {
                return Err(TierError::corruption(
                    ctx(topic).offset(hot.end),
                    format!(
                        "the WAL ends at {} but warm starts at {}: offsets {} are held by no tier and the WAL \
                         cannot continue past them",
                        hot.end,
                        warm_r.start,
                        OffsetRange::new(hot.end, warm_r.start)
                    ),
                ));
            }
            report.lost.push(OffsetRange::new(from, warm_r.start));
            from = warm_r.start;
        }
        if from < warm_r.end {
            let replayed = replay(tiers, topic, from, hot).await?;
            report.replayed = Some(replayed);
        }
        next = warm_r.end;
    } else if hot.is_empty() && cold_end > hot.end {
        // Lost WAL, nothing to replay: the fresh WAL starts where cold ends.
        next = cold_end;
    } else if !hot.is_empty() && cold_end > hot.end {
        return Err(TierError::corruption(
            ctx(topic).offset(hot.end),
            format!("the WAL ends at {} but cold already holds offsets up to {cold_end}", hot.end),
        ));
    }

    // A checkpointed commit point beyond what the tiers hold: those offsets were handed
    // out (and maybe acknowledged); they are lost, and never reused.
    if let Some(cp) = checkpoint
        && cp > next
    {
        report.lost.push(OffsetRange::new(next, cp));
        next = cp;
    }

    let mut backlog = Vec::new();
    if let Some(w) = &warm
        && !w.is_empty()
        && w.end < hot.end
    {
        if w.end < hot.start {
            return Err(TierError::corruption(
                ctx(topic).offset(w.end),
                format!(
                    "warm ends at {} but the WAL starts at {}: warm cannot be caught up",
                    w.end, hot.start
                ),
            ));
        }
        backlog = rebuild_from_hot(tiers, topic, OffsetRange::new(w.end, hot.end)).await?;
        report.warm_backfill = Some(OffsetRange::new(w.end, hot.end));
    }

    report.next_offset = next;
    for range in &report.lost {
        error!(topic = %topic, lost = %range, "recovery: these offsets are held by no tier and are lost");
    }
    if report.replayed.is_some() || report.warm_backfill.is_some() {
        info!(topic = %topic, report = ?report, "recovered topic");
    }
    Ok(Recovered { report, backlog })
}

/// Appends warm's batches from the one holding `from` to the WAL. Returns the offsets
/// replayed.
async fn replay(
    tiers: &Tiers,
    topic: &TopicName,
    from: Offset,
    hot: OffsetRange,
) -> Result<OffsetRange, TierError> {
    let Some(warm) = &tiers.warm else {
        return Ok(OffsetRange::empty_at(from));
    };
    let mut stream = warm.batches_from(topic, from);
    let mut first = None;
    let mut end = from;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if batch.end_offset() <= from {
            continue;
        }
        if !hot.is_empty() && batch.base_offset() != end {
            return Err(TierError::corruption(
                ctx(topic).offset(end),
                format!("warm batch at {} does not continue the WAL at {end}", batch.base_offset()),
            ));
        }
        let (base, batch_end) = (batch.base_offset(), batch.end_offset());
        tiers.hot.append(topic, batch).await?;
        first.get_or_insert(base);
        end = batch_end;
    }
    Ok(OffsetRange::new(first.unwrap_or(from).min(end), end))
}

/// The WAL's records in `range`, as batches of at most 1000 records.
async fn rebuild_from_hot(
    tiers: &Tiers,
    topic: &TopicName,
    range: OffsetRange,
) -> Result<Vec<RecordBatch>, TierError> {
    let mut out = Vec::new();
    let mut next = range.start;
    while next < range.end {
        let records = tiers.hot.read(topic, next, range.end, ReadLimit::default()).await?;
        if records.is_empty() {
            return Err(TierError::corruption(
                ctx(topic).offset(next),
                "the WAL returned no record inside its range",
            ));
        }
        out.push(RecordBatch::from_records(next, &records)?);
        next += records.len() as u64;
    }
    warn!(topic = %topic, range = %range, "warm is behind the WAL; queued the missing records for warm");
    Ok(out)
}

/// The checkpoint file of `topic`.
fn checkpoint_path(state_dir: &Path, topic: &TopicName) -> PathBuf {
    state_dir.join(format!("{topic}.end"))
}

/// The last checkpointed commit point of `topic`, if any.
pub(crate) fn read_checkpoint(state_dir: &Path, topic: &TopicName) -> Result<Option<Offset>, TierError> {
    let path = checkpoint_path(state_dir, topic);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<Offset>().map(Some).map_err(|e| {
            TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("bad checkpoint: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TierError::unavailable(
            ctx(topic).location(path.display().to_string()),
            format!("reading the checkpoint: {e}"),
        )
        .with_source(e)),
    }
}

/// Records `end` as `topic`'s commit point (write to a temporary file, then rename).
pub(crate) fn write_checkpoint(state_dir: &Path, topic: &TopicName, end: Offset) -> Result<(), TierError> {
    let path = checkpoint_path(state_dir, topic);
    let io = |what: &str, e: std::io::Error| {
        TierError::unavailable(ctx(topic).location(path.display().to_string()), format!("{what}: {e}"))
            .with_source(e)
    };
    std::fs::create_dir_all(state_dir).map_err(|e| io("creating the state directory", e))?;
    let tmp = state_dir.join(format!("{topic}.end.tmp"));
    std::fs::write(&tmp, end.to_string()).map_err(|e| io("writing the checkpoint", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("renaming the checkpoint", e))
}
