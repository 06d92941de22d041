//! Test-only switches (the `testkit` feature) that put a repaired behaviour back, so that
//! a test or the simulation can show it finds the bug the repair removed.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// A repaired behaviour [`revert`] puts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// A store whose state directory is the reverted one (or inside it) opens without
    /// locking it or checking its `owner`, as stores did when two stores whose data
    /// directories are siblings shared the default `<parent>/router` and overwrote each
    /// other's checkpoints and reservations.
    StateDirOfOneStore,
    /// Recovery keeps the losses it found in the state directory alone, with no copy in
    /// the WAL's directory: an open that fails after a topic's recovery made its emptied
    /// WAL continue past them, and a lost state directory after it, leave nothing that
    /// reports them.
    LossesInWal,
    /// A lost data directory's open takes a topic whose marker it does not find for a new
    /// one, and writes a commit point of 0, even where cold or warm holds records of it:
    /// an open that then fails leaves a checkpoint that passes for a surviving state
    /// directory, and the next continues at the tiers' end, past what the WAL held.
    NewTopicOnlyWhenNoTierHolds,
    /// The writer sends warm the next batch although warm lacks records before it that
    /// its back-fill could not give (its hold): a stream a failover emptied takes the
    /// batch and starts there, and a later recovery counts that start as committed and
    /// serves the never-committed records the WAL holds below it.
    WarmContinuesItsHold,
    /// A claim of the topic's owner epoch whose answer was lost counts as made with the
    /// epoch the writer held before: its writes under that earlier epoch are then refused
    /// by its own claim, and the topic is fenced with no other writer.
    ClaimAnswered,
    /// Under `fail`, an open whose claim finds owner epochs skipped since the WAL was
    /// written discards the WAL even when this node claimed every skipped epoch (claims
    /// whose answers it lost): when a failover to a replica behind has since taken records
    /// warm confirmed, the discarded WAL held their only copy, and their offsets are handed
    /// out again.
    OwnClaimsKeepWal,
}

static REVERTED: Mutex<Vec<(PathBuf, Repair)>> = Mutex::new(Vec::new());

/// Puts `repair` back for the store whose state directory is `state_dir` (or inside it),
/// until [`restore`].
pub fn revert(state_dir: &Path, repair: Repair) {
    let mut reverted = REVERTED.lock();
    if !reverted.iter().any(|(d, r)| d == state_dir && *r == repair) {
        reverted.push((state_dir.to_owned(), repair));
    }
}

/// Ends every [`revert`] for `state_dir`.
pub fn restore(state_dir: &Path) {
    REVERTED.lock().retain(|(d, _)| d != state_dir);
}

/// True while `repair` is reverted for the store whose state directory is `state_dir`.
pub(crate) fn reverted(state_dir: &Path, repair: Repair) -> bool {
    REVERTED.lock().iter().any(|(d, r)| state_dir.starts_with(d) && *r == repair)
}
