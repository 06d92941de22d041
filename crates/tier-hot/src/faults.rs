//! Test-only I/O fault injection (feature `fault-injection`): make a WAL write, an
//! fsync, a background seal's fsync or a directory fsync fail, to test what the hot tier
//! promises when the disk fails (see "Appends, fsync policies and group commit" in
//! `docs/hot.md`).
//!
//! Faults are armed **per data directory**: a hook fires only for files under the
//! directory it was armed for, so tests running in parallel in one process (each with
//! its own temporary directory) do not disturb each other. Arming counts calls from
//! the moment it is armed: [`fail_nth`]`(dir, point, 3, kind)` lets two calls at
//! `point` under `dir` pass and fails the third, once; later calls pass again (the
//! writer must stay poisoned by itself, not because the disk keeps failing).
//!
//! ```no_run
//! # fn demo(data_dir: &std::path::Path) {
//! use std::io::ErrorKind;
//! use tier_hot::faults::{self, FaultPoint};
//!
//! faults::fail_nth(data_dir, FaultPoint::Fsync, 1, ErrorKind::Other); // the next fsync fails
//! // ... append, observe `Unavailable` ...
//! assert_eq!(faults::fired(data_dir, FaultPoint::Fsync), 1);
//! faults::clear(data_dir);
//! # }
//! ```
//!
//! **Durability tracking** (for power-cut simulation): after [`track_durability`]`(dir)`,
//! every successful fsync of a segment file under `dir` records the file's length at
//! that moment; [`durable_lengths`] returns them. A simulated power cut may then cut
//! each file back to its durable length or to any byte past it (what a real power cut
//! can leave), and nothing before. A file never fsynced has no entry. A background
//! seal's fsync of the *next* active segment (under `never`/`interval`) is not recorded:
//! appends into that segment run concurrently with it, so which of them it covers is a
//! race, and counting none of them keeps a simulated power cut deterministic (and on
//! the safe side: those appends were acknowledged without an fsync anyway). For the
//! same reason the `interval` timer's fsync (and the one when the writer stops) is not
//! recorded: a cut below it is the state a crash just before the timer leaves.
//!
//! Without the feature this module does not exist and the hooks at the call sites
//! (the `fault!` macro) expand to `Ok(())`: no code, no cost.

use std::{
    collections::HashMap,
    fs::File,
    io::{self, IoSlice, Write},
    path::{Path, PathBuf},
};

use parking_lot::Mutex;

/// Where a fault can be injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultPoint {
    /// The write of a group of batches to the active segment (both the copied small
    /// write and the vectored write). An injected failure is a *short* write: the first
    /// half of the group's bytes reach the file, then the write fails (as on a full
    /// disk), so the test sees whether the file is cut back.
    Write,
    /// The `fdatasync` of the active segment that makes appends durable (per group
    /// under `always`, on the timer under `interval`). The data was written.
    Fsync,
    /// A background seal's fsync of a segment file: the sealed segment, then (under
    /// `never`/`interval`) the new active segment rotation created without one.
    SealFsync,
    /// Any fsync of a directory: the topic directory when a segment is created, sealed
    /// or deleted, the data directory when a topic directory is created, gap markers.
    DirFsync,
}

#[derive(Debug)]
struct Armed {
    dir: PathBuf,
    point: FaultPoint,
    /// Calls still to let pass before the one that fails; `None` once it has failed.
    pass: Option<u32>,
    kind: io::ErrorKind,
    /// Failures injected.
    fired: u32,
}

/// Every armed fault of the process (few, and only in tests).
static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

/// Arms `point` under `data_dir`: the `nth` call (1 = the next one) at that point on a
/// file under `data_dir` fails with an error of `kind`; the calls before and after it
/// pass. Re-arming a point of the same directory replaces it (and resets
/// [`fired`]). `nth == 0` is treated as 1.
pub fn fail_nth(data_dir: &Path, point: FaultPoint, nth: u32, kind: io::ErrorKind) {
    let mut armed = ARMED.lock();
    armed.retain(|a| !(a.dir == data_dir && a.point == point));
    armed.push(Armed { dir: data_dir.to_owned(), point, pass: Some(nth.max(1) - 1), kind, fired: 0 });
}

/// How many failures were injected at `point` under `data_dir` since it was armed
/// (0 when it is not armed).
pub fn fired(data_dir: &Path, point: FaultPoint) -> u32 {
    ARMED.lock().iter().find(|a| a.dir == data_dir && a.point == point).map_or(0, |a| a.fired)
}

/// Disarms every fault of `data_dir`.
pub fn clear(data_dir: &Path) {
    ARMED.lock().retain(|a| a.dir != data_dir);
}

/// The hook: `Err` when a fault armed for `point` on a directory holding `path` is due
/// now.
pub(crate) fn check(point: FaultPoint, path: &Path) -> io::Result<()> {
    let mut armed = ARMED.lock();
    let Some(a) = armed.iter_mut().find(|a| a.point == point && path.starts_with(&a.dir)) else {
        return Ok(());
    };
    match a.pass {
        Some(0) => {
            a.pass = None;
            a.fired += 1;
            Err(io::Error::new(a.kind, format!("injected {point:?} fault on {}", path.display())))
        }
        Some(n) => {
            a.pass = Some(n - 1);
            Ok(())
        }
        None => Ok(()),
    }
}

/// The [`FaultPoint::Write`] hook: when a fault is due, writes the first half of
/// `slices`' bytes to `file` (a short write) and returns the injected error; otherwise
/// writes nothing and returns `Ok`, for the caller's write to go ahead.
pub(crate) fn torn_write(path: &Path, file: &mut impl Write, slices: &[IoSlice<'_>]) -> io::Result<()> {
    let Err(injected) = check(FaultPoint::Write, path) else { return Ok(()) };
    let mut left = slices.iter().map(|s| s.len()).sum::<usize>() / 2;
    for slice in slices {
        if left == 0 {
            break;
        }
        let n = left.min(slice.len());
        file.write_all(&slice[..n])?;
        left -= n;
    }
    Err(injected)
}

/// Directories whose fsyncs are tracked, each with the durable length of every segment
/// file fsynced under it (see the module docs).
static DURABLE: Mutex<Vec<(PathBuf, HashMap<PathBuf, u64>)>> = Mutex::new(Vec::new());

/// Starts recording, for every segment file under `data_dir`, its length at each
/// successful fsync (replacing what was recorded for `data_dir` before).
pub fn track_durability(data_dir: &Path) {
    let mut durable = DURABLE.lock();
    durable.retain(|(dir, _)| dir != data_dir);
    durable.push((data_dir.to_owned(), HashMap::new()));
}

/// The length of every file under `data_dir` at its last successful fsync since
/// [`track_durability`] (empty when not tracked).
pub fn durable_lengths(data_dir: &Path) -> HashMap<PathBuf, u64> {
    DURABLE.lock().iter().find(|(dir, _)| dir == data_dir).map(|(_, files)| files.clone()).unwrap_or_default()
}

/// Stops tracking `data_dir` and forgets what was recorded.
pub fn untrack_durability(data_dir: &Path) {
    DURABLE.lock().retain(|(dir, _)| dir != data_dir);
}

/// The hook after a successful fsync of `file` at `path`: records its length when a
/// tracked directory holds `path`.
pub(crate) fn synced(path: &Path, file: &File) {
    let mut durable = DURABLE.lock();
    let Some((_, files)) = durable.iter_mut().find(|(dir, _)| path.starts_with(dir)) else { return };
    if let Ok(meta) = file.metadata() {
        files.insert(path.to_owned(), meta.len());
    }
}
