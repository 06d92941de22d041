//! Crash recovery of one topic when the store opens it, and the router's checkpoints.
//!
//! The WAL is the source of truth while it exists. When it is missing or behind what
//! warm and cold hold, the topic continues at `max(end of warm, end of cold)` (or the
//! last checkpointed commit point, when that is further): warm batches beyond the WAL's
//! end (and cold's end) are replayed into the fresh WAL, and any offsets no tier can
//! serve are reported in [`RecoveryReport::lost`] — never renumbered. When the WAL
//! holds nothing of the topic, the durable offset reservation (see the writer) bounds
//! what may have been acknowledged after the last checkpoint: the topic continues
//! there and the range is reported in [`RecoveryReport::maybe_lost`]. When warm is
//! behind an intact WAL (a crash between the WAL write and warm's confirmation), the
//! missing records are queued for warm again.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, ReadLimit, RecordBatch, Tier, TierError, TierKind,
    TopicName,
};
use tracing::{error, info, warn};

use crate::config::WarmFailurePolicy;
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
    /// Offsets that were acknowledged but that no tier holds: known from the tiers'
    /// ends and the last checkpointed commit point.
    pub lost: Vec<OffsetRange>,
    /// Offsets that *may* have been acknowledged but that no tier holds: when the WAL
    /// holds nothing of the topic (lost), the range from the last checkpointed commit point (or the tiers'
    /// ends, when further) to the offset reservation. Producers may have been
    /// acknowledged for any of them after the last checkpoint (the process was killed
    /// before it could write another); they are never reused. Empty after a clean
    /// shutdown, which leaves the reservation at the commit point.
    pub maybe_lost: Vec<OffsetRange>,
    /// Warm could not be reached during recovery and the policy is
    /// [`WarmFailurePolicy::Degrade`]: the topic
    /// opened from the WAL (and cold) alone, `warm` is `None` (its end unknown), and
    /// the writer back-fills warm from its actual end once it answers.
    pub warm_unreachable: bool,
    /// The offset the next append gets.
    pub next_offset: Offset,
}

impl RecoveryReport {
    /// True when nothing was (or may have been) lost.
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.maybe_lost.is_empty()
    }
}

/// The outcome the writer starts from.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) report: RecoveryReport,
    /// Batches in the WAL that warm lacks, in order.
    pub(crate) backlog: Vec<RecordBatch>,
    /// The durable offset reservation found (see [`read_reservation`]).
    pub(crate) reservation: Option<Offset>,
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
    let mut warm_unreachable = false;
    let warm = match &tiers.warm {
        Some(w) => match w.range(topic).await {
            Ok(r) => Some(r),
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                warm_unreachable = degraded_open(tiers, topic, hot, e)?;
                None
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let cold = match &tiers.cold {
        Some(c) => Some(c.range(topic).await?),
        None => None,
    };
    let checkpoint = read_checkpoint(state_dir, topic)?;
    let reservation = read_reservation(state_dir, topic)?;
    let mut report = RecoveryReport {
        topic: topic.clone(),
        hot,
        warm,
        cold,
        replayed: None,
        warm_backfill: None,
        lost: Vec::new(),
        maybe_lost: Vec::new(),
        warm_unreachable,
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
        skip_wal_to(tiers, topic, cp).await?;
        next = cp;
    }

    // A WAL that holds nothing of the topic (lost) and a reservation beyond everything
    // known: the process may have acknowledged offsets up to the reservation after its
    // last checkpoint. Report them as possibly lost and never reuse them. (When the WAL
    // knows the topic — even emptied by retention — its end is exact.)
    if hot.end == 0
        && let Some(reserved) = reservation
        && reserved > next
    {
        report.maybe_lost.push(OffsetRange::new(next, reserved));
        // Warm batches replayed into the WAL: it must continue after the gap.
        skip_wal_to(tiers, topic, reserved).await?;
        next = reserved;
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
    for range in &report.maybe_lost {
        error!(
            topic = %topic, maybe_lost = %range,
            "recovery: these offsets may have been acknowledged after the last checkpoint; no tier holds them"
        );
    }
    if report.replayed.is_some() || report.warm_backfill.is_some() {
        info!(topic = %topic, report = ?report, "recovered topic");
    }
    Ok(Recovered { report, backlog, reservation })
}

/// Decides what an unreachable warm tier (`err`) at recovery means: under `degrade`,
/// with a WAL that knows the topic, the topic opens without warm (`Ok(true)`); otherwise
/// recovery fails with an `Unavailable` error naming warm.
fn degraded_open(
    tiers: &Tiers,
    topic: &TopicName,
    hot: OffsetRange,
    err: TierError,
) -> Result<bool, TierError> {
    let why = if tiers.config.warm_failure_policy != WarmFailurePolicy::Degrade {
        "router.warm_failure_policy is `fail`"
    } else if hot.end == 0 {
        // An empty WAL that never held the topic: warm may hold records the WAL lacks
        // (a lost disk), and continuing without knowing its end could reuse offsets.
        "the WAL holds nothing of the topic, so recovery needs warm's records"
    } else {
        warn!(
            topic = %topic, error = %err,
            "recovery: the warm tier is unreachable; opening degraded from the WAL, warm is back-filled once it answers"
        );
        return Ok(true);
    };
    Err(TierError::unavailable(
        ErrorContext::tier(TierKind::Warm).topic(topic),
        format!("cannot recover the topic: the warm tier is unreachable ({err}) and {why}"),
    )
    .with_source(err))
}

/// Makes a non-empty WAL continue at `cp` (the offsets before it were lost), recording
/// the gap durably (`HotTier::skip_to`) so the topic accepts appends at `cp` and reads
/// into the gap fail naming it. An empty WAL needs nothing: it takes over at the first
/// append.
async fn skip_wal_to(tiers: &Tiers, topic: &TopicName, cp: Offset) -> Result<(), TierError> {
    if tiers.hot.range(topic).await?.is_empty() {
        return Ok(());
    }
    let gap = tiers.hot.skip_to(topic, cp).await?;
    warn!(topic = %topic, lost = %gap, "recorded the lost offsets in the WAL; it continues after them");
    Ok(())
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
pub(crate) async fn rebuild_from_hot(
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

/// The file under `state_dir` where `topic`'s offset of `kind` is kept.
fn state_path(state_dir: &Path, topic: &TopicName, kind: &str) -> PathBuf {
    state_dir.join(format!("{topic}.{kind}"))
}

/// The last checkpointed commit point of `topic` (`<state_dir>/<topic>.end`), if any.
pub(crate) fn read_checkpoint(state_dir: &Path, topic: &TopicName) -> Result<Option<Offset>, TierError> {
    read_offset(state_dir, topic, CHECKPOINT)
}

/// `topic`'s durable offset reservation (`<state_dir>/<topic>.reserved`), if any: the
/// writer never acknowledges an offset at or beyond it.
pub(crate) fn read_reservation(state_dir: &Path, topic: &TopicName) -> Result<Option<Offset>, TierError> {
    read_offset(state_dir, topic, RESERVATION)
}

/// Records `end` as `topic`'s commit point, durably.
pub(crate) fn write_checkpoint(state_dir: &Path, topic: &TopicName, end: Offset) -> Result<(), TierError> {
    write_offset(state_dir, topic, CHECKPOINT, end)
}

/// Records `end` as `topic`'s offset reservation, durably (the writer calls it on the
/// blocking pool before acknowledging offsets beyond the previous reservation).
pub(crate) fn write_reservation(state_dir: &Path, topic: &TopicName, end: Offset) -> Result<(), TierError> {
    write_offset(state_dir, topic, RESERVATION, end)
}

/// The suffix of checkpoint files.
const CHECKPOINT: &str = "end";
/// The suffix of reservation files.
const RESERVATION: &str = "reserved";

fn read_offset(state_dir: &Path, topic: &TopicName, kind: &str) -> Result<Option<Offset>, TierError> {
    let path = state_path(state_dir, topic, kind);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<Offset>().map(Some).map_err(|e| {
            TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("bad {kind} file: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TierError::unavailable(
            ctx(topic).location(path.display().to_string()),
            format!("reading the {kind} file: {e}"),
        )
        .with_source(e)),
    }
}

/// Writes `value` to a temporary file, syncs it, renames it over the state file and
/// syncs the directory, so a crash leaves either the old or the new value.
fn write_offset(state_dir: &Path, topic: &TopicName, kind: &str, value: Offset) -> Result<(), TierError> {
    use std::io::Write;
    let path = state_path(state_dir, topic, kind);
    let io = |what: &str, e: std::io::Error| {
        TierError::unavailable(ctx(topic).location(path.display().to_string()), format!("{what}: {e}"))
            .with_source(e)
    };
    std::fs::create_dir_all(state_dir).map_err(|e| io("creating the state directory", e))?;
    let tmp = state_dir.join(format!("{topic}.{kind}.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(|e| io("creating the state file", e))?;
    file.write_all(value.to_string().as_bytes()).map_err(|e| io("writing the state file", e))?;
    file.sync_all().map_err(|e| io("syncing the state file", e))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| io("renaming the state file", e))?;
    std::fs::File::open(state_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io("syncing the state directory", e))
}
