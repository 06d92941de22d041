//! Test-only switches (the `testkit` feature) that put a repaired behaviour back, so that
//! a test or the simulation can show it finds the bug the repair removed. Each is on for
//! the directories it was turned on for, until turned off.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// The directories one switch is on for.
struct Switch(Mutex<Vec<PathBuf>>);

impl Switch {
    const fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    fn on(&self, dir: &Path) {
        let mut dirs = self.0.lock();
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_owned());
        }
    }

    fn off(&self, dir: &Path) {
        self.0.lock().retain(|d| d != dir);
    }

    /// Whether the switch is on for `dir` or a directory holding it.
    fn covers(&self, dir: &Path) -> bool {
        self.0.lock().iter().any(|d| dir.starts_with(d))
    }
}

static SHARED_STATE_DIRS: Switch = Switch::new();
static WARM_PAST_BACKLOGS: Switch = Switch::new();

/// Puts back the shared state directory: a store whose state directory is `state_dir`
/// (or inside it) opens without locking it or checking its `owner`, as stores did when
/// two stores whose data directories are siblings shared the default `<parent>/router`
/// and overwrote each other's checkpoints and reservations. Until
/// [`restore_state_dirs`].
pub fn share_state_dirs(state_dir: &Path) {
    SHARED_STATE_DIRS.on(state_dir);
}

/// Ends [`share_state_dirs`] for `state_dir`.
pub fn restore_state_dirs(state_dir: &Path) {
    SHARED_STATE_DIRS.off(state_dir);
}

pub(crate) fn shares_state_dirs(state_dir: &Path) -> bool {
    SHARED_STATE_DIRS.covers(state_dir)
}

/// Puts back warm taking batches past a never-committed backlog: the writer of a store
/// whose WAL is in `data_dir` sends warm the pending queue even while the WAL holds
/// records below it that were never committed and that warm lacks (a refused batch whose
/// WAL copy is damaged), as writers did when an empty warm stream took such a batch and
/// a later recovery committed the refused records below it. Until
/// [`restore_warm_backlogs`].
pub fn send_warm_past_backlogs(data_dir: &Path) {
    WARM_PAST_BACKLOGS.on(data_dir);
}

/// Ends [`send_warm_past_backlogs`] for `data_dir`.
pub fn restore_warm_backlogs(data_dir: &Path) {
    WARM_PAST_BACKLOGS.off(data_dir);
}

pub(crate) fn sends_warm_past_backlogs(data_dir: &Path) -> bool {
    WARM_PAST_BACKLOGS.covers(data_dir)
}
