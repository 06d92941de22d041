//! The tier choice shared by the record and batch readers: which tier serves the next
//! offset `n` of a historical read, and up to where.
//!
//! The WAL is preferred for any offset it holds (up to the commit point), then warm (up
//! to where the WAL takes over), then cold (up to where warm or the WAL takes over), so
//! each tier serves only its slice. An offset no tier holds is `NotFound` naming the
//! missing range — never skipped.
//!
//! A damaged WAL batch ([`read_intact`](tier_core::position::read_intact), [`instead_of_wal`]): the WAL's intact records
//! before it are served from the WAL, the damaged offsets from warm or cold when one of
//! them holds them; when neither does, the read ends with the WAL's `Corruption`.

use std::sync::Arc;

use tier_core::{ErrorContext, ErrorKind, Offset, OffsetRange, Tier, TierError, TierKind, TopicName};

use crate::backend::{ColdBackend, WarmBackend};
use crate::tiers::Tiers;

/// Retries of a slice read whose tier's range moved (retention, trimming) meanwhile.
const MAX_RANGE_RETRIES: u32 = 5;

/// Whether a slice read that failed with `e` is tried again: the tier answered
/// `Trimmed` (its range moved between the choice and the read; the next choice sees the
/// new ranges), at most [`MAX_RANGE_RETRIES`] times per slice. Counts the retry in
/// `attempt`.
pub(crate) fn retry_moved(e: &TierError, attempt: &mut u32) -> bool {
    let retry = e.kind() == ErrorKind::Trimmed && *attempt < MAX_RANGE_RETRIES;
    *attempt += u32::from(retry);
    retry
}

/// The tier that serves offsets `[n, to)` of a read (`n < to`); batches are never split,
/// so a batch reader may receive a last batch ending beyond `to`.
pub(crate) enum Slice {
    /// The WAL, up to the commit point or its end.
    Hot {
        /// End of the slice (exclusive).
        to: Offset,
    },
    /// Warm, up to where the WAL takes over.
    Warm {
        /// The warm tier.
        tier: Arc<dyn WarmBackend>,
        /// End of the slice (exclusive).
        to: Offset,
    },
    /// Cold, up to where warm or the WAL takes over.
    Cold {
        /// The cold tier.
        tier: Arc<dyn ColdBackend>,
        /// End of the slice (exclusive).
        to: Offset,
    },
}

/// Chooses the tier serving offset `n < committed` of `topic` from the tiers' ranges as
/// they are now. `NotFound` when no tier holds `n`, naming the missing offsets (up to
/// where the next tier starts, or the commit point).
pub(crate) async fn choose(
    tiers: &Tiers,
    topic: &TopicName,
    n: Offset,
    committed: Offset,
) -> Result<Slice, TierError> {
    let hot = tiers.hot.range(topic).await?;
    if hot.start <= n && n < hot.end {
        return Ok(Slice::Hot { to: committed.min(hot.end) });
    }
    // Where the WAL takes over.
    let hot_start = if hot.is_empty() { committed } else { hot.start.min(committed) };
    let warm = match &tiers.warm {
        Some(w) => w.range(topic).await?,
        None => OffsetRange::default(),
    };
    // Never warm's records in offsets a degraded open skipped: they were never
    // acknowledged (the WAL's gap there may have been deleted by its retention since).
    let warm_limit = tiers.warm_limit(topic, n);
    if let Some(w) = &tiers.warm
        && warm.start <= n
        && n < warm.end
        && let Ok(limit) = warm_limit
    {
        let to = hot_start.max(n + 1).min(warm.end).min(limit);
        return Ok(Slice::Warm { tier: Arc::clone(w), to });
    }
    let cold = match &tiers.cold {
        Some(c) => c.range(topic).await?,
        None => OffsetRange::default(),
    };
    let warm_start = if !warm.is_empty() && warm.start > n { warm.start } else { hot_start };
    if let Some(c) = &tiers.cold
        && cold.start <= n
        && n < cold.end
    {
        let to = warm_start.min(hot_start).max(n + 1).min(cold.end);
        return Ok(Slice::Cold { tier: Arc::clone(c), to });
    }
    let resumes = [hot, warm, cold]
        .iter()
        .filter(|r| !r.is_empty() && r.start > n)
        .map(|r| r.start)
        .min()
        .unwrap_or(committed)
        .max(n + 1);
    if let Err(skipped) = warm_limit {
        return Err(skipped_error(topic, n, skipped, resumes.min(skipped.end)));
    }
    Err(TierError::not_found(
        ErrorContext::tier(TierKind::Router).topic(topic).offset(n),
        format!(
            "offsets {} are held by no tier (WAL {hot}, warm {warm}, cold {cold})",
            OffsetRange::new(n, resumes)
        ),
    ))
}

/// The error of a read at `n`, inside `skipped`: offsets a degraded open skipped, which
/// hold no acknowledged record (warm's records there, if any, were never acknowledged).
/// The topic continues at `resumes`.
fn skipped_error(topic: &TopicName, n: Offset, skipped: OffsetRange, resumes: Offset) -> TierError {
    TierError::not_found(
        ErrorContext::tier(TierKind::Router).topic(topic).offset(n),
        format!(
            "offsets {}..{} hold no acknowledged record: a degraded open skipped them (warm's records there were \
             never acknowledged); the topic continues at {resumes}",
            skipped.start, skipped.end
        ),
    )
}

/// What a reader does when the WAL's read of its slice `[n, to)` failed with `error`:
/// when `error` is `Corruption` (the batch holding `n` is damaged, as [`read_intact`](tier_core::position::read_intact)
/// reports it, or the WAL answered offsets that do not continue the read) or `NotFound`
/// (a gap the WAL recorded, whose offsets warm or cold may still hold: an earlier WAL
/// acknowledged them there), the tier serving `n` in its place — warm when it holds `n`, else cold, up to `to` or the end
/// of its range. Never [`Slice::Hot`]. `error` itself for any other error, or when
/// neither tier holds `n`; `Unavailable` when neither holds it but one could not be
/// asked (it may hold the intact copy: the reader may retry).
///
/// The reader makes one bounded read from that tier, then asks the WAL again from
/// where it ended: once per damaged range the WAL's answer is replaced (again only if
/// the replacement read ended inside the damaged batch, always moving forward), and the
/// WAL serves everything it still holds intact.
pub(crate) async fn instead_of_wal(
    tiers: &Tiers,
    topic: &TopicName,
    n: Offset,
    to: Offset,
    error: TierError,
) -> Result<Slice, TierError> {
    // A damaged batch, or a gap the WAL recorded (offsets it declared lost) that another
    // tier may still hold: warm kept what an earlier WAL acknowledged there.
    if !matches!(error.kind(), ErrorKind::Corruption | ErrorKind::NotFound) {
        return Err(error);
    }
    // A tier that cannot be asked may hold the intact copy: then the answer is its
    // `Unavailable` (retry later), not the damage (no intact copy anywhere).
    let mut unreachable = None;
    // Never warm's records where a degraded open skipped the offsets: warm may hold
    // records there that were never acknowledged. The WAL's gap there is not a loss.
    let warm_limit = tiers.warm_limit(topic, n);
    if let Some(w) = &tiers.warm
        && let Ok(limit) = warm_limit
    {
        match w.range(topic).await {
            Ok(range) if range.contains(n) => {
                return Ok(Slice::Warm { tier: Arc::clone(w), to: to.min(range.end).min(limit) });
            }
            Err(e) if e.kind() == ErrorKind::Unavailable => unreachable = Some(e),
            _ => {}
        }
    }
    if let Some(c) = &tiers.cold {
        match c.range(topic).await {
            Ok(range) if range.contains(n) => {
                return Ok(Slice::Cold { tier: Arc::clone(c), to: to.min(range.end) });
            }
            Err(e) if e.kind() == ErrorKind::Unavailable => unreachable = unreachable.or(Some(e)),
            _ => {}
        }
    }
    Err(match (unreachable, warm_limit) {
        (Some(e), _) => damaged_and_unreachable(topic, n, &error, &e),
        (None, Err(skipped)) if error.kind() == ErrorKind::NotFound => {
            skipped_error(topic, n, skipped, skipped.end)
        }
        (None, _) => error,
    })
}

/// `read` (cold's read of a slice from `n`) as the reader answers it: a `Corruption` —
/// cold's copy is damaged — while warm, which may hold an intact copy, cannot be asked
/// becomes `Unavailable` (retry later): `Corruption` says no intact copy exists.
pub(crate) async fn or_unreachable(
    tiers: &Tiers,
    topic: &TopicName,
    n: Offset,
    read: Result<(), TierError>,
) -> Result<(), TierError> {
    let Err(error) = read else { return Ok(()) };
    if error.kind() != ErrorKind::Corruption {
        return Err(error);
    }
    if let Some(w) = &tiers.warm
        && let Err(e) = w.range(topic).await
        && e.kind() == ErrorKind::Unavailable
    {
        return Err(damaged_and_unreachable(topic, n, &error, &e));
    }
    Err(error)
}

fn damaged_and_unreachable(
    topic: &TopicName,
    n: Offset,
    damage: &TierError,
    unreachable: &TierError,
) -> TierError {
    TierError::unavailable(
        ErrorContext::tier(TierKind::Router).topic(topic).offset(n),
        format!(
            "the copy of offset {n} read cannot be served ({damage}) and a tier that may hold it cannot be reached \
             ({unreachable})"
        ),
    )
}
