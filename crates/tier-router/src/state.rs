//! The router's state directory (`state_dir`): its per-topic state files — the
//! checkpointed commit point (`<topic>.end`), the durable offset reservation
//! (`<topic>.reserved`), the fence of a topic whose acknowledged end is unknown
//! (`<topic>.fenced`), the losses a recovery found until its topic opened
//! (`<topic>.losses`), the offsets a degraded open skipped where warm may hold records that
//! were never acknowledged (`<topic>.unacked`) — the identity of the running OS boot that
//! tells recovery whether the page cache survived, the directory's ownership: the lock
//! a store holds while open (`.router.lock`) and the data directory of the store it belongs
//! to (`owner`; see [`claim_state_dir`]), and the store's node id, which its claims of
//! owner epochs record (`node`; see [`node_id`]).
//!
//! Every file is written to a temporary file, synced, renamed over the old one and the
//! directory synced, so a crash leaves the old or the new value.
//!
//! The reservation file holds `<offset> <boot id> <durable|lazy>`: no offset at or beyond
//! `offset` was acknowledged; `boot id` is the OS boot during which it was written; `durable`
//! says the WAL fsynced every append before it was acknowledged (`fsync = always`). A file
//! holding only `<offset>` (older versions) has neither.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use tier_core::position::NodeId;
use tier_core::{ErrorContext, Offset, TierError, TierKind, TopicName};
use tracing::{info, warn};

/// The suffix of checkpoint files.
const CHECKPOINT: &str = "end";
/// The suffix of reservation files.
const RESERVATION: &str = "reserved";
/// The suffix of fence files.
const FENCE: &str = "fenced";
/// The suffix of the file of losses a recovery found and has not reported yet.
const LOSSES: &str = "losses";
/// The suffix of the file of offsets skipped while warm's end was unknown.
const UNACKED: &str = "unacked";
/// The suffix of every kind of state file.
const STATE_KINDS: [&str; 5] = [CHECKPOINT, RESERVATION, FENCE, LOSSES, UNACKED];

/// What a topic's files say the next recovery will act on, or the topic waits for: read
/// without opening the store ([`pending_recovery`]), for read-only inspection such as
/// `tierlog status`. Empty for a topic that opened and closed normally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingRecovery {
    /// Appends are refused until an operator resumes the topic at or past this offset
    /// (`TieredStore::resume_topic`): nothing bounds the offsets acknowledged
    /// (`RecoveryReport::end_unknown`).
    pub fenced_at_least: Option<Offset>,
    /// Offsets an earlier recovery found lost, whose open did not complete: the next
    /// recovery reports them again.
    pub lost: Vec<tier_core::OffsetRange>,
    /// The same for offsets that may have been acknowledged (`RecoveryReport::maybe_lost`).
    pub maybe_lost: Vec<tier_core::OffsetRange>,
    /// Offsets degraded opens skipped (`RecoveryReport::skipped`) where warm may still
    /// hold records that were never acknowledged; never served.
    pub skipped: Vec<tier_core::OffsetRange>,
    /// The WAL was being rebuilt from warm by a recovery that did not finish
    /// (`tier_hot::HotTier::mark_rebuilt`): its end vouches for nothing until the next
    /// open completes.
    pub rebuilt: Option<tier_hot::Rebuilt>,
}

impl PendingRecovery {
    /// Nothing pending.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// What the files of `topic` — under the router's `state_dir` and the WAL's `hot_dir` —
/// say is pending ([`PendingRecovery`]). Reads only; takes no lock. `Corruption` for a
/// state file that cannot be parsed.
pub fn pending_recovery(
    hot_dir: &Path,
    state_dir: &Path,
    topic: &TopicName,
) -> Result<PendingRecovery, TierError> {
    let losses = read_losses_copies(hot_dir, state_dir, topic)?;
    Ok(PendingRecovery {
        fenced_at_least: read_fence(state_dir, topic)?,
        lost: losses.lost,
        maybe_lost: losses.maybe_lost,
        skipped: {
            let (state, wal) = read_unacked_copies(hot_dir, state_dir, topic)?;
            unacked_union(state, wal)
        },
        rebuilt: tier_hot::HotTier::rebuilt_in(hot_dir, topic)?,
    })
}

/// Losses a recovery found, kept until the topic opened and the report was handed out:
/// `lost` ranges (known acknowledged) and `maybe_lost` ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PendingLosses {
    pub(crate) lost: Vec<tier_core::OffsetRange>,
    pub(crate) maybe_lost: Vec<tier_core::OffsetRange>,
}

impl PendingLosses {
    fn is_empty(&self) -> bool {
        self.lost.is_empty() && self.maybe_lost.is_empty()
    }
}

/// The losses an earlier recovery of `topic` found but whose open did not complete
/// (`<state_dir>/<topic>.losses`; lines `lost <from> <to>` / `maybe <from> <to>`).
pub(crate) fn read_losses(state_dir: &Path, topic: &TopicName) -> Result<PendingLosses, TierError> {
    let Some((path, text)) = read_state(state_dir, topic, LOSSES)? else {
        return Ok(PendingLosses::default());
    };
    let mut out = PendingLosses::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [kind, from, to] = words[..] else {
            return Err(TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("bad {LOSSES} line {line:?}"),
            ));
        };
        let (from, to) = (parse_offset(topic, &path, LOSSES, from)?, parse_offset(topic, &path, LOSSES, to)?);
        if to < from {
            return Err(TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("bad {LOSSES} line {line:?}: the range ends before it starts"),
            ));
        }
        let range = tier_core::OffsetRange::new(from, to);
        match kind {
            "lost" => out.lost.push(range),
            _ => out.maybe_lost.push(range),
        }
    }
    Ok(out)
}

/// Records `losses` for `topic` durably, before recovery changes anything that would hide
/// them from the next recovery (replaying warm into the WAL, recording gaps): an open that
/// fails after that reports them the next time. Nothing is written for no losses.
pub(crate) fn write_losses(
    state_dir: &Path,
    topic: &TopicName,
    losses: &PendingLosses,
) -> Result<(), TierError> {
    if losses.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for r in &losses.lost {
        text.push_str(&format!("lost {} {}\n", r.start, r.end));
    }
    for r in &losses.maybe_lost {
        text.push_str(&format!("maybe {} {}\n", r.start, r.end));
    }
    write_state(state_dir, topic, LOSSES, &text)
}

/// Removes `topic`'s pending losses: the topic opened and its report was handed out.
pub(crate) fn remove_losses(state_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
    remove_state(state_dir, topic, LOSSES)
}

/// The losses an earlier recovery of `topic` kept, as both copies say together: the
/// router's `.losses` file under `state_dir` ([`read_losses`]) and the `losses` marker in
/// the WAL's directory `hot_dir` (`tier_hot::HotTier::keep_losses`). Each goes with its
/// own directory: a recovery that made an emptied WAL continue past the offsets it found
/// lost, in an open that then failed, leaves the marker as the only evidence of them once
/// the state directory is lost.
pub(crate) fn read_losses_copies(
    hot_dir: &Path,
    state_dir: &Path,
    topic: &TopicName,
) -> Result<PendingLosses, TierError> {
    let mut losses = read_losses(state_dir, topic)?;
    let (lost, maybe_lost) = tier_hot::HotTier::kept_losses_in(hot_dir, topic)?;
    for (all, more) in [(&mut losses.lost, lost), (&mut losses.maybe_lost, maybe_lost)] {
        all.extend(more);
        all.sort_by_key(|r| (r.start, r.end));
        all.dedup();
    }
    Ok(losses)
}

/// Records `losses` in both copies (see [`read_losses_copies`]); nothing for no losses.
pub(crate) fn write_losses_copies(
    hot: &tier_hot::HotTier,
    state_dir: &Path,
    topic: &TopicName,
    losses: &PendingLosses,
) -> Result<(), TierError> {
    if losses.is_empty() {
        return Ok(());
    }
    write_losses(state_dir, topic, losses)?;
    #[cfg(feature = "testkit")]
    if crate::testing::reverted(state_dir, crate::testing::Repair::LossesInWal) {
        return Ok(());
    }
    hot.keep_losses(topic, &losses.lost, &losses.maybe_lost)
}

/// Removes both copies of `topic`'s pending losses (see [`read_losses_copies`]).
pub(crate) fn remove_losses_copies(
    hot: &tier_hot::HotTier,
    state_dir: &Path,
    topic: &TopicName,
) -> Result<(), TierError> {
    remove_losses(state_dir, topic)?;
    hot.keep_losses(topic, &[], &[])
}

/// The offsets degraded opens of `topic` skipped (`<state_dir>/<topic>.unacked`; lines
/// `<from> <to>`): warm was unreachable, so its end was unknown, and it may hold records
/// there that the WAL never stored — never acknowledged, since under `degrade` every
/// acknowledgement waits for the WAL, whose end was exact. Kept until warm is known to
/// hold none of them; such records are never served, replayed or confirmed again.
pub(crate) fn read_unacked(
    state_dir: &Path,
    topic: &TopicName,
) -> Result<Vec<tier_core::OffsetRange>, TierError> {
    let Some((path, text)) = read_state(state_dir, topic, UNACKED)? else { return Ok(Vec::new()) };
    tier_core::parse_range_lines(&text).map_err(|why| {
        TierError::corruption(
            ctx(topic).location(path.display().to_string()),
            format!("{UNACKED} file: {why}"),
        )
    })
}

/// The offsets degraded opens skipped as the two copies ([`read_unacked_copies`]) say
/// together.
pub(crate) fn unacked_union(
    mut state: Vec<tier_core::OffsetRange>,
    wal: Vec<tier_core::OffsetRange>,
) -> Vec<tier_core::OffsetRange> {
    state.extend(wal);
    state.sort_by_key(|r| (r.start, r.end));
    state.dedup();
    state
}

/// The offsets degraded opens of `topic` skipped as each copy says: the router's
/// `.unacked` file under `state_dir` ([`read_unacked`]) and the `unacked` marker in the
/// WAL's directory `hot_dir` (`tier_hot::HotTier::mark_unacked`). Each goes with its own
/// directory; what either says holds ([`unacked_union`]).
pub(crate) fn read_unacked_copies(
    hot_dir: &Path,
    state_dir: &Path,
    topic: &TopicName,
) -> Result<(Vec<tier_core::OffsetRange>, Vec<tier_core::OffsetRange>), TierError> {
    Ok((read_unacked(state_dir, topic)?, tier_hot::HotTier::unacked_in(hot_dir, topic)?))
}

/// Records `ranges` in both copies (see [`read_unacked_copies`]); no ranges remove both.
pub(crate) fn write_unacked_copies(
    hot: &tier_hot::HotTier,
    state_dir: &Path,
    topic: &TopicName,
    ranges: &[tier_core::OffsetRange],
) -> Result<(), TierError> {
    write_unacked(state_dir, topic, ranges)?;
    hot.mark_unacked(topic, ranges)
}

/// Records `ranges` as the offsets degraded opens of `topic` skipped, durably (see
/// [`read_unacked`]); no ranges remove the file.
pub(crate) fn write_unacked(
    state_dir: &Path,
    topic: &TopicName,
    ranges: &[tier_core::OffsetRange],
) -> Result<(), TierError> {
    if ranges.is_empty() {
        return remove_state(state_dir, topic, UNACKED);
    }
    write_state(state_dir, topic, UNACKED, &tier_core::format_range_lines(ranges))
}

/// A durable offset reservation as found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReservationFile {
    /// No offset at or beyond this was acknowledged.
    pub(crate) offset: Offset,
    /// The OS boot during which it was written (`None`: unknown).
    pub(crate) boot: Option<String>,
    /// Every append acknowledged below `offset` was fsynced first.
    pub(crate) durable: bool,
}

impl ReservationFile {
    /// True when a WAL that survived can be trusted to hold every offset acknowledged
    /// below this reservation: appends were fsynced before acknowledgement, or the OS has
    /// not restarted since (its page cache, with every write, survived the process).
    pub(crate) fn wal_is_exact(&self, current_boot: &str) -> bool {
        self.durable || self.boot.as_deref().is_some_and(|b| b == current_boot && b != UNKNOWN_BOOT)
    }
}

/// The boot identity used when the OS offers none: never equal to a recorded one.
pub(crate) const UNKNOWN_BOOT: &str = "unknown";

/// The identity of the running OS boot: Linux's `/proc/sys/kernel/random/boot_id`, or
/// [`UNKNOWN_BOOT`] where there is none (recovery then assumes a restart of the OS).
pub(crate) fn current_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
        .unwrap_or_else(|| UNKNOWN_BOOT.to_owned())
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Router).topic(topic)
}

/// Whether any state file of `topic` exists (checkpoint, reservation, fence, losses or
/// unacknowledged offsets): the router has opened the topic before.
pub(crate) fn has_state(state_dir: &Path, topic: &TopicName) -> bool {
    STATE_KINDS.iter().any(|kind| state_path(state_dir, topic, kind).exists())
}

/// The file under `state_dir` where `topic`'s state of `kind` is kept.
fn state_path(state_dir: &Path, topic: &TopicName, kind: &str) -> PathBuf {
    state_dir.join(format!("{topic}.{kind}"))
}

/// A checkpoint (`<state_dir>/<topic>.end`: `<end>` or `<end> warm <confirmed>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// The commit point.
    pub(crate) end: Offset,
    /// Where warm's confirmed records ended (the writer's warm floor: every batch below it
    /// was confirmed by warm's replicas, or needs no warm copy); `None` without warm, and
    /// in files written before it was recorded. Under `degrade` the commit point runs
    /// ahead of it: recovery confirms warm's batches from here again before WAL retention
    /// may delete their WAL copies.
    pub(crate) warm: Option<Offset>,
}

/// The last checkpoint of `topic`, if any.
pub(crate) fn read_checkpoint(state_dir: &Path, topic: &TopicName) -> Result<Option<Checkpoint>, TierError> {
    let Some((path, text)) = read_state(state_dir, topic, CHECKPOINT)? else { return Ok(None) };
    let mut words = text.split_whitespace();
    let end = parse_offset(topic, &path, CHECKPOINT, words.next().unwrap_or(""))?;
    let warm = match (words.next(), words.next()) {
        (Some("warm"), Some(w)) => Some(parse_offset(topic, &path, CHECKPOINT, w)?),
        (None, _) => None,
        (Some(other), _) => {
            return Err(TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("bad {CHECKPOINT} file: unexpected {other:?} after the commit point"),
            ));
        }
    };
    Ok(Some(Checkpoint { end, warm }))
}

/// `topic`'s durable offset reservation (`<state_dir>/<topic>.reserved`), if any.
pub(crate) fn read_reservation(
    state_dir: &Path,
    topic: &TopicName,
) -> Result<Option<ReservationFile>, TierError> {
    let Some((path, text)) = read_state(state_dir, topic, RESERVATION)? else { return Ok(None) };
    let mut words = text.split_whitespace();
    let offset = parse_offset(topic, &path, RESERVATION, words.next().unwrap_or(""))?;
    let boot = words.next().map(str::to_owned);
    let durable = words.next() == Some("durable");
    Ok(Some(ReservationFile { offset, boot, durable }))
}

/// The fence of `topic` (`<state_dir>/<topic>.fenced`), if any: recovery found its
/// acknowledged end unknown, and the offset it found everything any tier holds to end at.
/// The file keeps the topic fenced across restarts until an operator resumes it — nothing
/// else does where the evidence that made recovery fence it is gone by the next restart
/// (an unsynced WAL tail after a power cut).
pub(crate) fn read_fence(state_dir: &Path, topic: &TopicName) -> Result<Option<Offset>, TierError> {
    let Some((path, text)) = read_state(state_dir, topic, FENCE)? else { return Ok(None) };
    parse_offset(topic, &path, FENCE, text.trim()).map(Some)
}

/// Records that `topic`'s acknowledged end is unknown beyond `at_least`, durably.
pub(crate) fn write_fence(state_dir: &Path, topic: &TopicName, at_least: Offset) -> Result<(), TierError> {
    write_state(state_dir, topic, FENCE, &at_least.to_string())
}

/// Removes `topic`'s fence file (an operator resumed it), durably.
pub(crate) fn remove_fence(state_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
    remove_state(state_dir, topic, FENCE)
}

/// Removes every state file of `topic`, durably: for a topic whose WAL another owner's
/// log superseded (`docs/ownership.md`), where they describe that WAL's time.
pub(crate) fn remove_topic_state(state_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
    for kind in STATE_KINDS {
        remove_state(state_dir, topic, kind)?;
    }
    Ok(())
}

/// Removes `topic`'s state file of `kind`, if any, durably.
fn remove_state(state_dir: &Path, topic: &TopicName, kind: &str) -> Result<(), TierError> {
    let path = state_path(state_dir, topic, kind);
    let io = |what: &str, e: std::io::Error| {
        TierError::unavailable(ctx(topic).location(path.display().to_string()), what.to_owned())
            .with_source(e)
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("removing a state file", e)),
    }
    tier_hot::layout::fsync_dir(state_dir).map_err(|e| io("syncing the state directory", e))
}

/// Records `checkpoint` as `topic`'s, durably.
pub(crate) fn write_checkpoint(
    state_dir: &Path,
    topic: &TopicName,
    checkpoint: Checkpoint,
) -> Result<(), TierError> {
    let text = match checkpoint.warm {
        Some(w) => format!("{} warm {w}", checkpoint.end),
        None => checkpoint.end.to_string(),
    };
    write_state(state_dir, topic, CHECKPOINT, &text)
}

/// Records `reservation` as `topic`'s offset reservation, durably (the writer calls it on
/// the blocking pool before acknowledging offsets beyond the previous reservation).
pub(crate) fn write_reservation(
    state_dir: &Path,
    topic: &TopicName,
    reservation: &ReservationFile,
) -> Result<(), TierError> {
    let boot = reservation.boot.as_deref().unwrap_or(UNKNOWN_BOOT);
    let class = if reservation.durable { "durable" } else { "lazy" };
    write_state(state_dir, topic, RESERVATION, &format!("{} {boot} {class}\n", reservation.offset))
}

fn parse_offset(topic: &TopicName, path: &Path, kind: &str, text: &str) -> Result<Offset, TierError> {
    text.parse::<Offset>().map_err(|e| {
        TierError::corruption(ctx(topic).location(path.display().to_string()), format!("bad {kind} file"))
            .with_source(e)
    })
}

fn read_state(
    state_dir: &Path,
    topic: &TopicName,
    kind: &str,
) -> Result<Option<(PathBuf, String)>, TierError> {
    let path = state_path(state_dir, topic, kind);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((path, text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TierError::unavailable(
            ctx(topic).location(path.display().to_string()),
            format!("reading the {kind} file"),
        )
        .with_source(e)),
    }
}

/// Writes `value` to a temporary file, syncs it, renames it over the state file and
/// syncs the directory, so a crash leaves either the old or the new value.
fn write_state(state_dir: &Path, topic: &TopicName, kind: &str, value: &str) -> Result<(), TierError> {
    write_atomically(state_dir, &format!("{topic}.{kind}"), value.as_bytes(), ctx(topic))
}

/// Writes `value` to `<dir>/<name>.tmp`, syncs it, renames it over `<dir>/<name>` and syncs
/// `dir` (created when missing), so a crash leaves either the old or the new value.
fn write_atomically(dir: &Path, name: &str, value: &[u8], ctx: ErrorContext) -> Result<(), TierError> {
    use std::io::Write;
    let path = dir.join(name);
    let io = |what: &str, e: std::io::Error| {
        TierError::unavailable(ctx.clone().location(path.display().to_string()), what.to_owned())
            .with_source(e)
    };
    std::fs::create_dir_all(dir).map_err(|e| io("creating the state directory", e))?;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(|e| io("creating the state file", e))?;
    file.write_all(value).map_err(|e| io("writing the state file", e))?;
    file.sync_all().map_err(|e| io("syncing the state file", e))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| io("renaming the state file", e))?;
    tier_hot::layout::fsync_dir(dir).map_err(|e| io("syncing the state directory", e))
}

/// The state directory's lock file: an advisory `flock`, held by the open store. Not
/// `.lock`, so that a state directory configured as the WAL's own directory does not
/// collide with the WAL's lock.
const LOCK_FILE: &str = ".router.lock";
/// The file naming the data directory of the store the state directory belongs to.
const OWNER_FILE: &str = "owner";

/// How a store opening on a state directory stands to it, from what the directory holds:
/// its `owner` file and whether it holds any state file. A pure decision
/// ([`ownership`]); [`claim_state_dir`] acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// No owner and no state file (a new or lost directory): the store records itself.
    Claim,
    /// No owner but state files, written by a version that recorded none: the store
    /// records itself and keeps them — whichever store opens such a directory first.
    Adopt,
    /// The owner is this store's data directory.
    Owned,
    /// Another store's: its checkpoints and reservations are not this store's evidence.
    Foreign,
    /// An `owner` file naming nothing (it is written whole, so this is damage).
    Damaged,
}

/// How a store whose canonical data directory is `ours` stands to a state directory whose
/// `owner` file holds `owner` (`None`: no such file) and which holds state files or not.
pub(crate) fn ownership(owner: Option<&[u8]>, has_state_files: bool, ours: &[u8]) -> Ownership {
    match owner {
        None if has_state_files => Ownership::Adopt,
        None => Ownership::Claim,
        Some([]) => Ownership::Damaged,
        Some(owner) if owner == ours => Ownership::Owned,
        Some(_) => Ownership::Foreign,
    }
}

/// The contents of the `owner` file naming `data_dir` (a path as the OS encodes it, then
/// a newline).
fn owner_bytes(data_dir: &Path) -> Vec<u8> {
    let mut bytes = data_dir.as_os_str().as_encoded_bytes().to_vec();
    bytes.push(b'\n');
    bytes
}

/// The data directory `state_dir`'s `owner` file names (its trailing newline removed),
/// `None` when there is none.
fn read_owner(state_dir: &Path) -> Result<Option<Vec<u8>>, TierError> {
    let path = state_dir.join(OWNER_FILE);
    match std::fs::read(&path) {
        Ok(mut bytes) => {
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
            }
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TierError::unavailable(
            ErrorContext::tier(TierKind::Router).location(path.display().to_string()),
            "reading the state directory's owner file",
        )
        .with_source(e)),
    }
}

/// Whether `state_dir` holds a state file of any topic (`<topic>.end`, `.reserved`, …).
fn holds_state_files(state_dir: &Path) -> Result<bool, TierError> {
    let entries = std::fs::read_dir(state_dir).map_err(|e| {
        TierError::unavailable(
            ErrorContext::tier(TierKind::Router).location(state_dir.display().to_string()),
            "listing the state directory",
        )
        .with_source(e)
    })?;
    Ok(entries.filter_map(Result::ok).any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|name| name.rsplit_once('.'))
            .is_some_and(|(topic, kind)| STATE_KINDS.contains(&kind) && TopicName::new(topic).is_ok())
    }))
}

/// Takes `state_dir` for the store whose WAL is `data_dir` (which exists) and returns its
/// lock, to hold while the store is open. The directory is created when missing; the lock
/// is an advisory `flock` on `<state_dir>/.router.lock`, released when the file is closed
/// (also when the process dies). Then the directory's `owner` decides ([`ownership`]): a
/// directory with none is recorded as this store's (`owner` holds `data_dir`'s canonical
/// path, written atomically), one naming `data_dir` is this store's, and one naming
/// another data directory is refused. A WAL directory lost and recreated at the same path
/// still matches; a state directory lost is recreated and recorded afresh.
///
/// Errors: `Fenced` when another store holds the lock or owns the directory (the message
/// names the directories and `router.state_dir`, which gives each store its own);
/// `Corruption` for an `owner` file naming nothing; `Unavailable` when the directory or its
/// files cannot be created, locked, listed, read or written.
pub(crate) fn claim_state_dir(state_dir: &Path, data_dir: &Path) -> Result<std::fs::File, TierError> {
    let at = |path: &Path| ErrorContext::tier(TierKind::Router).location(path.display().to_string());
    let unavailable = |path: &Path, what: &str, e: std::io::Error| {
        TierError::unavailable(at(path), what.to_owned()).with_source(e)
    };
    std::fs::create_dir_all(state_dir)
        .map_err(|e| unavailable(state_dir, "creating the state directory", e))?;
    let lock_path = state_dir.join(LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| unavailable(&lock_path, "opening the state directory's lock file", e))?;
    #[cfg(feature = "testkit")]
    if crate::testing::reverted(state_dir, crate::testing::Repair::StateDirOfOneStore) {
        return Ok(lock);
    }
    let data_dir = std::fs::canonicalize(data_dir)
        .map_err(|e| unavailable(data_dir, "resolving the data directory's path", e))?;
    let shown = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = match read_owner(state_dir) {
                Ok(Some(owner)) if !owner.is_empty() => format!("the store of {}", shown(&owner)),
                _ => "another store".to_owned(),
            };
            return Err(TierError::fenced(
                at(state_dir),
                format!(
                    "the router's state directory {} is in use by {holder}; the store of {} needs a state \
                     directory of its own (two stores whose data directories share a parent share the default, \
                     <parent>/router): set router.state_dir",
                    state_dir.display(),
                    data_dir.display()
                ),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(unavailable(&lock_path, "locking the state directory", e));
        }
    }
    let owner = read_owner(state_dir)?;
    let record = || {
        write_atomically(state_dir, OWNER_FILE, &owner_bytes(&data_dir), ErrorContext::tier(TierKind::Router))
    };
    let ours = data_dir.as_os_str().as_encoded_bytes();
    match ownership(owner.as_deref(), holds_state_files(state_dir)?, ours) {
        Ownership::Owned => {}
        Ownership::Claim => record()?,
        Ownership::Adopt => {
            record()?;
            info!(
                state_dir = %state_dir.display(),
                data_dir = %data_dir.display(),
                "recorded the store as the owner of its state directory, written by a version that recorded none"
            );
        }
        Ownership::Foreign => {
            let owner = shown(owner.as_deref().unwrap_or_default());
            return Err(TierError::fenced(
                at(state_dir),
                format!(
                    "the router's state directory {} belongs to the store of {owner}, not to this one ({}): its \
                     checkpoints and offset reservations are that store's, and taking them would hand out offsets \
                     already acknowledged; set router.state_dir to a directory of this store's own (if the data \
                     directory was moved from {owner}, remove {} and the store adopts the directory)",
                    state_dir.display(),
                    data_dir.display(),
                    state_dir.join(OWNER_FILE).display()
                ),
            ));
        }
        Ownership::Damaged => {
            return Err(TierError::corruption(
                at(&state_dir.join(OWNER_FILE)),
                "the state directory's owner file names no data directory; remove it and the store adopts \
                 the directory",
            ));
        }
    }
    Ok(lock)
}

/// The file holding the node id of the store the state directory belongs to.
const NODE_FILE: &str = "node";

/// Serialises the creation of node id files: the topics of one store recover
/// concurrently, and each reads its store's id before its first claim.
static NODE_FILE_WRITE: Mutex<()> = Mutex::new(());

/// The node id of the store whose state directory is `state_dir` (`<state_dir>/node`:
/// 32 hexadecimal digits and a newline), created when there is none: 128 bits from the
/// OS's randomness, written atomically (file and directory synced) before any claim
/// records it. It lives as long as the state directory, which belongs to one store
/// ([`claim_state_dir`]), so no two stores share one; a lost state directory gives the
/// store a new id, and its earlier claims then count as another node's — the safe side
/// (`docs/ownership.md`, "Who claimed an epoch"). A file that holds no id (damage) is
/// replaced by a new id, with a warning, for the same reason.
///
/// Errors: `Unavailable` when the file cannot be read or written.
pub(crate) fn node_id(state_dir: &Path) -> Result<NodeId, TierError> {
    let path = state_dir.join(NODE_FILE);
    let at = || ErrorContext::tier(TierKind::Router).location(path.display().to_string());
    let _creating = NODE_FILE_WRITE.lock();
    match std::fs::read_to_string(&path) {
        Ok(text) => match NodeId::parse(text.trim_end_matches('\n')) {
            Some(id) => return Ok(id),
            None => warn!(
                path = %path.display(),
                "the state directory's node file holds no node id; a new one replaces it (this node's earlier \
                 claims of owner epochs count as another node's)"
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(
                TierError::unavailable(at(), "reading the state directory's node file").with_source(e)
            );
        }
    }
    let id = random_node_id();
    write_atomically(
        state_dir,
        NODE_FILE,
        format!("{id}\n").as_bytes(),
        ErrorContext::tier(TierKind::Router),
    )?;
    info!(state_dir = %state_dir.display(), node = %id, "created the store's node id");
    Ok(id)
}

/// 128 bits from the OS's randomness: std's [`RandomState`](std::hash::RandomState) is
/// keyed from it (once per thread, then varied per instance); two hashes under one fresh
/// key give the bits.
fn random_node_id() -> NodeId {
    use std::hash::BuildHasher;
    let keyed = std::hash::RandomState::new();
    let (high, low) = (keyed.hash_one(0_u8), keyed.hash_one(1_u8));
    NodeId::from_u128((u128::from(high) << 64) | u128::from(low))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_is_created_once_and_survives_while_its_state_directory_does() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("router");
        let id = node_id(&state).expect("created, with the directory");
        assert_eq!(node_id(&state).expect("read"), id, "the same id on every read");
        let text = std::fs::read_to_string(state.join(NODE_FILE)).expect("the node file");
        assert_eq!(text, format!("{id}\n"));
        assert!(!holds_state_files(&state).expect("listed"), "the node file is no topic's state file");

        let other = dir.path().join("other");
        assert_ne!(node_id(&other).expect("another store's"), id, "each state directory its own id");
        std::fs::remove_dir_all(&state).expect("the state directory lost");
        assert_ne!(node_id(&state).expect("created again"), id, "a lost state directory, a new id");

        std::fs::write(state.join(NODE_FILE), "damaged\n").expect("write");
        let replaced = node_id(&state).expect("a damaged file is replaced");
        assert_eq!(node_id(&state).expect("read"), replaced);
    }

    #[test]
    fn pending_losses_round_trip_and_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let topic = TopicName::new("t").expect("topic");
        assert_eq!(read_losses(dir.path(), &topic).expect("none"), PendingLosses::default());
        write_losses(dir.path(), &topic, &PendingLosses::default()).expect("nothing to write");
        assert!(!state_path(dir.path(), &topic, LOSSES).exists(), "no file for no losses");
        let losses = PendingLosses {
            lost: vec![tier_core::OffsetRange::new(5, 10)],
            maybe_lost: vec![tier_core::OffsetRange::new(10, 1034), tier_core::OffsetRange::new(2000, 2010)],
        };
        write_losses(dir.path(), &topic, &losses).expect("write");
        assert_eq!(read_losses(dir.path(), &topic).expect("read"), losses);
        remove_losses(dir.path(), &topic).expect("remove");
        remove_losses(dir.path(), &topic).expect("removing none is fine");
        assert_eq!(read_losses(dir.path(), &topic).expect("gone"), PendingLosses::default());
        std::fs::write(state_path(dir.path(), &topic, LOSSES), "lost 9 3\n").expect("write");
        assert_eq!(read_losses(dir.path(), &topic).unwrap_err().kind(), tier_core::ErrorKind::Corruption);
    }

    #[test]
    fn unacked_ranges_round_trip_and_none_remove_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let topic = TopicName::new("t").expect("topic");
        assert_eq!(read_unacked(dir.path(), &topic).expect("none"), vec![]);
        let ranges = vec![tier_core::OffsetRange::new(10, 1034), tier_core::OffsetRange::new(2000, 4048)];
        write_unacked(dir.path(), &topic, &ranges).expect("write");
        assert!(has_state(dir.path(), &topic));
        assert_eq!(read_unacked(dir.path(), &topic).expect("read"), ranges);
        write_unacked(dir.path(), &topic, &[]).expect("remove");
        assert!(!state_path(dir.path(), &topic, UNACKED).exists());
        std::fs::write(dir.path().join("t.unacked"), "9 3\n").expect("bad file");
        assert_eq!(
            read_unacked(dir.path(), &topic).expect_err("backwards").kind(),
            tier_core::ErrorKind::Corruption
        );
    }

    /// Every combination of what a state directory holds, and what a store opening on it
    /// makes of it.
    #[test]
    fn ownership_is_decided_by_the_owner_file_and_the_state_files() {
        let ours: &[u8] = b"/srv/tl/a";
        let cases: [(Option<&[u8]>, bool, Ownership); 8] = [
            (None, false, Ownership::Claim),
            (None, true, Ownership::Adopt),
            (Some(b"/srv/tl/a"), false, Ownership::Owned),
            (Some(b"/srv/tl/a"), true, Ownership::Owned),
            (Some(b"/srv/tl/b"), false, Ownership::Foreign),
            (Some(b"/srv/tl/b"), true, Ownership::Foreign),
            (Some(b""), false, Ownership::Damaged),
            (Some(b""), true, Ownership::Damaged),
        ];
        for (owner, has_state_files, expected) in cases {
            assert_eq!(ownership(owner, has_state_files, ours), expected, "{owner:?} {has_state_files}");
        }
    }

    #[test]
    fn a_state_directory_is_claimed_once_and_refused_to_another_store() {
        let root = tempfile::tempdir().expect("temp dir");
        let (a, b, state) = (root.path().join("a"), root.path().join("b"), root.path().join("router"));
        for dir in [&a, &b] {
            std::fs::create_dir_all(dir).expect("data dir");
        }
        let lock = claim_state_dir(&state, &a).expect("claimed");
        let held = claim_state_dir(&state, &b).expect_err("locked");
        assert_eq!(held.kind(), tier_core::ErrorKind::Fenced, "{held}");
        assert!(held.to_string().contains("router.state_dir"), "{held}");
        drop(lock);
        let foreign = claim_state_dir(&state, &b).expect_err("a's");
        assert_eq!(foreign.kind(), tier_core::ErrorKind::Fenced, "{foreign}");
        drop(claim_state_dir(&state, &a).expect("a's own"));
        std::fs::write(state.join(OWNER_FILE), "").expect("damage");
        let damaged = claim_state_dir(&state, &a).expect_err("damaged");
        assert_eq!(damaged.kind(), tier_core::ErrorKind::Corruption, "{damaged}");
        // The directory holds no state file: removing the owner lets the next store claim it.
        std::fs::remove_file(state.join(OWNER_FILE)).expect("remove");
        assert!(!holds_state_files(&state).expect("list"), "the lock file is no state file");
        drop(claim_state_dir(&state, &b).expect("claimed by b"));
    }

    #[test]
    fn reservation_files_round_trip_and_old_ones_parse() {
        let dir = tempfile::tempdir().expect("temp dir");
        let topic = TopicName::new("t").expect("topic");
        let r = ReservationFile { offset: 42, boot: Some("b-1".into()), durable: false };
        write_reservation(dir.path(), &topic, &r).expect("write");
        assert_eq!(read_reservation(dir.path(), &topic).expect("read"), Some(r.clone()));
        assert!(r.wal_is_exact("b-1"));
        assert!(!r.wal_is_exact("b-2"), "another boot: the page cache is gone");
        let durable = ReservationFile { durable: true, ..r };
        assert!(durable.wal_is_exact("b-2"), "fsynced before acknowledged");
        std::fs::write(dir.path().join("t.reserved"), "17").expect("old format");
        let old = read_reservation(dir.path(), &topic).expect("read").expect("present");
        assert_eq!(old, ReservationFile { offset: 17, boot: None, durable: false });
        assert!(!old.wal_is_exact(UNKNOWN_BOOT));
    }
}
