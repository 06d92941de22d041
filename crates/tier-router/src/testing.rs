//! Test-only switches (the `testkit` feature) that put a repaired behaviour back, so that
//! a test or the simulation can show it finds the bug the repair removed.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

static SHARED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Puts back the shared state directory: a store whose state directory is `state_dir`
/// (or inside it) opens without locking it or checking its `owner`, as stores did when
/// two stores whose data directories are siblings shared the default `<parent>/router`
/// and overwrote each other's checkpoints and reservations. Until
/// [`restore_state_dirs`].
pub fn share_state_dirs(state_dir: &Path) {
    let mut shared = SHARED.lock();
    if !shared.iter().any(|d| d == state_dir) {
        shared.push(state_dir.to_owned());
    }
}

/// Ends [`share_state_dirs`] for `state_dir`.
pub fn restore_state_dirs(state_dir: &Path) {
    SHARED.lock().retain(|d| d != state_dir);
}

pub(crate) fn shares_state_dirs(state_dir: &Path) -> bool {
    SHARED.lock().iter().any(|d| state_dir.starts_with(d))
}
