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
//! Two more tools reproduce what a **power cut** leaves, with no sleeps:
//!
//! - [`hold`]`(dir, point)` makes the next call at `point` under `dir` wait (on the
//!   blocking thread that made it) until [`release`]; [`wait_held`] returns once a call
//!   waits there. A background seal held this way is one whose fsync has not happened.
//! - [`track_durability`]`(dir)` records, for every segment file under `dir`, the length
//!   its last fsync made durable (the active segment's fsync, a background seal's
//!   fsyncs, a new segment's creation); [`wait_durable`] waits for a length.
//!   [`power_cut`] then freezes what is durable, and [`PowerCut::apply`] (once the tier
//!   is closed or dropped) cuts every segment file back to it — a file never fsynced to
//!   nothing — as the page cache's loss would.
//!
//! A third reproduces **a failed fsync as Linux fails it**:
//! [`fail_fsync_losing_pages`] arms [`FaultPoint::Fsync`] so that the bytes the failed
//! fsync could not write stay in the file only until its pages are dropped (recovery's
//! `posix_fadvise` before it scans a file, [`drop_page_cache`], [`PowerCut::apply`]),
//! then read back as zeros.
//!
//! The simulation (`cargo xtask sim`) reads the same records with [`durable_lengths`]
//! and decides what a power cut leaves of the bytes past them (tier-sim's `disk` module:
//! a cut at any byte past the durable length, or lost 4 KiB pages, a size persisted
//! without its data and new files zero-filled or gone), and it [`hold`]s a background
//! seal to cut the power before the seal's fsyncs. Two fsyncs are not recorded, so
//! that a simulated power cut stays deterministic: a background seal's fsync of the
//! *next* active segment (appends into it run concurrently with that fsync, so which of
//! them it covers is a race) and the `interval` timer's fsync (a cut below it is the
//! state a crash just before the timer leaves). Both keep the simulation on the safe
//! side: those appends were acknowledged without an fsync.
//!
//! Without the feature this module does not exist and the hooks at the call sites
//! (the `fault!` and `synced!` macros) expand to `Ok(())` and nothing: no code, no cost.

use std::{
    collections::HashMap,
    fs::File,
    io::{self, IoSlice, Write},
    ops::Range,
    path::{Path, PathBuf},
};

use parking_lot::{Condvar, Mutex};

mod dirs;

pub use dirs::{DirListings, Undone, subdirectories};

/// Starts tracking the durable listings of `data_dir`'s directories (see the `dirs`
/// module: what a power cut leaves of creates, renames and unlinks since a directory's
/// last fsync), everything on disk now counting as durable. Its shadow hard links live
/// in a sibling of `data_dir` until [`untrack_directories`].
pub fn track_directories(data_dir: &Path) {
    dirs::track(data_dir);
}

/// Stops tracking `data_dir`'s directories and removes its shadow links.
pub fn untrack_directories(data_dir: &Path) {
    dirs::untrack(data_dir);
}

/// The durable listings of `data_dir`'s directories now (empty when not tracked).
pub fn dir_listings(data_dir: &Path) -> DirListings {
    dirs::listings(data_dir)
}

/// The hook after a successful directory fsync.
pub(crate) fn dir_synced(dir: &Path) {
    dirs::synced(dir);
}

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
    /// A failed [`FaultPoint::Fsync`] loses the pages it could not write (see
    /// [`fail_fsync_losing_pages`]).
    loses_pages: bool,
}

/// Every armed fault of the process (few, and only in tests).
static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

/// Arms `point` under `data_dir`: the `nth` call (1 = the next one) at that point on a
/// file under `data_dir` fails with an error of `kind`; the calls before and after it
/// pass. Re-arming a point of the same directory replaces it (and resets
/// [`fired`]). `nth == 0` is treated as 1.
pub fn fail_nth(data_dir: &Path, point: FaultPoint, nth: u32, kind: io::ErrorKind) {
    arm(data_dir, point, nth, kind, false);
}

/// Arms [`FaultPoint::Fsync`] under `data_dir` like [`fail_nth`], with what a failed
/// writeback does on Linux: the pages it could not write are marked clean and their bytes
/// never reach the disk, while the page cache keeps showing them, and a later fsync
/// succeeds without writing them (see "Failed fsyncs" in `docs/hot.md`).
///
/// So when the `nth` fsync of an active segment fails, the bytes written to that file
/// since its last successful fsync are *lost*: the file still holds them until its pages
/// are dropped — by recovery before it scans the file, by [`drop_page_cache`] (what a
/// reboot or the pages' eviction does), or by [`PowerCut::apply`] — and from then on they
/// read back as zeros (the file keeps its length, as when the inode's new size reached the
/// disk and its data did not). Cutting the file back below them forgets them, as
/// truncating drops a file's pages. Every byte of the range is lost, also in the page it
/// shares with durable bytes: the model leaves out that a later write to that page would
/// write the whole page again.
pub fn fail_fsync_losing_pages(data_dir: &Path, nth: u32, kind: io::ErrorKind) {
    arm(data_dir, FaultPoint::Fsync, nth, kind, true);
}

fn arm(data_dir: &Path, point: FaultPoint, nth: u32, kind: io::ErrorKind, loses_pages: bool) {
    let mut armed = ARMED.lock();
    armed.retain(|a| !(a.dir == data_dir && a.point == point));
    let pass = Some(nth.max(1) - 1);
    armed.push(Armed { dir: data_dir.to_owned(), point, pass, kind, fired: 0, loses_pages });
}

/// How many failures were injected at `point` under `data_dir` since it was armed
/// (0 when it is not armed).
pub fn fired(data_dir: &Path, point: FaultPoint) -> u32 {
    ARMED.lock().iter().find(|a| a.dir == data_dir && a.point == point).map_or(0, |a| a.fired)
}

/// Disarms every fault of `data_dir` (behaviours [`revert`]ed there stay reverted until
/// [`restore`]).
pub fn clear(data_dir: &Path) {
    ARMED.lock().retain(|a| a.dir != data_dir);
}

/// Restores every behaviour [`revert`]ed under `data_dir`.
pub fn restore(data_dir: &Path) {
    REVERTED.lock().retain(|(dir, _)| dir != data_dir);
}

/// A repaired behaviour of the hot tier that [`revert`] puts back under one data
/// directory, so that a test (or the simulation's `--revert`) shows the bug it was is
/// found again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Revert {
    /// The evidence of a cut is lost: an open ignores the `cut` marker an earlier open
    /// left (a cut whose recovery failed is forgotten, and the log it left passes for
    /// whole), and a first segment that lost every batch is removed without a cut.
    ForgetCuts,
    /// A failed fsync is trusted as Linux makes it look ("fsyncgate"): the active segment
    /// is not cut back to its durable length after a failed fsync, and an open scans the
    /// last file as the page cache shows it, without dropping its pages first — so bytes
    /// a failed writeback never wrote are served and appended after.
    TrustFailedFsyncs,
    /// Holes and unwritten headers are damage: an invalid batch followed by an intact one
    /// (an unwritten page before written ones) and a segment whose header reads as zeros
    /// (its size persisted without its data) make the topic refused as damaged, whatever
    /// the fsync policy says of what a crash may leave.
    HolesAreDamage,
}

/// The reverted behaviours of the process, per data directory.
static REVERTED: Mutex<Vec<(PathBuf, Revert)>> = Mutex::new(Vec::new());

/// Puts `behaviour` back for the tiers opened on `data_dir` (until [`restore`]).
pub fn revert(data_dir: &Path, behaviour: Revert) {
    let mut reverted = REVERTED.lock();
    if !reverted.iter().any(|(dir, b)| dir == data_dir && *b == behaviour) {
        reverted.push((data_dir.to_owned(), behaviour));
    }
}

/// True when `behaviour` is reverted for the data directory that holds `path`.
pub(crate) fn reverted(path: &Path, behaviour: Revert) -> bool {
    REVERTED.lock().iter().any(|(dir, b)| *b == behaviour && path.starts_with(dir))
}

/// A call waiting at a held point, or the hold before a call reached it.
#[derive(Debug)]
struct Hold {
    dir: PathBuf,
    point: FaultPoint,
    /// A call is waiting here.
    reached: bool,
}

/// Every hold of the process, and the condition variable their waiters use.
static HOLDS: Mutex<Vec<Hold>> = Mutex::new(Vec::new());
static HOLDS_CHANGED: Condvar = Condvar::new();

/// Makes the calls at `point` on files under `data_dir` wait, from now until
/// [`release`]: the blocking thread that makes such a call stops in the hook before the
/// I/O. Meant for points reached on the blocking pool (a background seal's
/// [`FaultPoint::SealFsync`]); holding a point the test itself waits on deadlocks it.
pub fn hold(data_dir: &Path, point: FaultPoint) {
    let mut holds = HOLDS.lock();
    holds.retain(|h| !(h.dir == data_dir && h.point == point));
    holds.push(Hold { dir: data_dir.to_owned(), point, reached: false });
}

/// Blocks until a call waits at the [`hold`] of `point` under `data_dir` (returns at
/// once when there is no such hold). Call it from a blocking context
/// (`tokio::task::spawn_blocking`).
pub fn wait_held(data_dir: &Path, point: FaultPoint) {
    let mut holds = HOLDS.lock();
    while holds.iter().any(|h| h.dir == data_dir && h.point == point && !h.reached) {
        HOLDS_CHANGED.wait(&mut holds);
    }
}

/// Ends the hold of `point` under `data_dir`: waiting calls go on.
pub fn release(data_dir: &Path, point: FaultPoint) {
    HOLDS.lock().retain(|h| !(h.dir == data_dir && h.point == point));
    HOLDS_CHANGED.notify_all();
}

/// Waits while `point` is held for a directory holding `path`.
fn wait_if_held(point: FaultPoint, path: &Path) {
    let mut holds = HOLDS.lock();
    let held = |holds: &mut Vec<Hold>| {
        let hold = holds.iter_mut().find(|h| h.point == point && path.starts_with(&h.dir));
        hold.map(|h| h.reached = true).is_some()
    };
    if !held(&mut holds) {
        return;
    }
    HOLDS_CHANGED.notify_all();
    while held(&mut holds) {
        HOLDS_CHANGED.wait(&mut holds);
    }
}

/// The durable lengths of the segment files under one tracked data directory.
#[derive(Debug)]
struct Tracked {
    dir: PathBuf,
    durable: HashMap<PathBuf, u64>,
}

static TRACKED: Mutex<Vec<Tracked>> = Mutex::new(Vec::new());
static DURABLE_CHANGED: Condvar = Condvar::new();

/// Starts recording, for every segment file under `data_dir`, the length its last
/// fsync made durable (replacing an earlier record of the directory). Files fsynced
/// before this call count as never fsynced: call it before the tier writes.
pub fn track_durability(data_dir: &Path) {
    let mut tracked = TRACKED.lock();
    tracked.retain(|t| t.dir != data_dir);
    tracked.push(Tracked { dir: data_dir.to_owned(), durable: HashMap::new() });
}

/// Blocks until the fsync of `path` (under a tracked directory) has made at least
/// `len` bytes durable. Call it from a blocking context.
pub fn wait_durable(path: &Path, len: u64) {
    let mut tracked = TRACKED.lock();
    loop {
        let durable = tracked.iter().find(|t| path.starts_with(&t.dir)).and_then(|t| t.durable.get(path));
        if durable.is_some_and(|&d| d >= len) {
            return;
        }
        DURABLE_CHANGED.wait(&mut tracked);
    }
}

/// The hook after a successful fsync of the segment file `path`: records its length as
/// durable when its directory is tracked.
pub(crate) fn synced(path: &Path, file: &File) {
    let mut tracked = TRACKED.lock();
    let Some(t) = tracked.iter_mut().find(|t| path.starts_with(&t.dir)) else { return };
    let Ok(meta) = file.metadata() else { return };
    t.durable.insert(path.to_owned(), meta.len());
    DURABLE_CHANGED.notify_all();
}

/// The hook after a seal's fsync of the *next* segment: only its header (written when
/// the file was created, before the fsync started) is surely durable — appends into it
/// race with the fsync — so the header's length is recorded, never less than before.
pub(crate) fn synced_header(path: &Path) {
    let mut tracked = TRACKED.lock();
    let Some(t) = tracked.iter_mut().find(|t| path.starts_with(&t.dir)) else { return };
    let Ok(bytes) = std::fs::read(path) else { return };
    let Ok((_, header_len)) = tier_core::segment::SegmentHeader::decode(&bytes) else { return };
    let entry = t.durable.entry(path.to_owned()).or_insert(0);
    *entry = (*entry).max(header_len as u64);
    DURABLE_CHANGED.notify_all();
}

/// The length of every segment file under `data_dir` at its last recorded fsync since
/// [`track_durability`] (empty when not tracked).
pub fn durable_lengths(data_dir: &Path) -> HashMap<PathBuf, u64> {
    TRACKED.lock().iter().find(|t| t.dir == data_dir).map(|t| t.durable.clone()).unwrap_or_default()
}

/// Stops tracking `data_dir` and forgets what was recorded.
pub fn untrack_durability(data_dir: &Path) {
    TRACKED.lock().retain(|t| t.dir != data_dir);
}

/// What a power cut now would leave of `data_dir`'s segment files: each file's durable
/// length (files not listed were never fsynced). Ends the tracking of `data_dir`, so
/// fsyncs after the cut (a held seal released to let the tier close) do not count.
#[must_use = "apply the cut once the tier is closed"]
pub fn power_cut(data_dir: &Path) -> PowerCut {
    let mut tracked = TRACKED.lock();
    let durable = match tracked.iter().position(|t| t.dir == data_dir) {
        Some(i) => tracked.swap_remove(i).durable,
        None => HashMap::new(),
    };
    // The records of durable seals as of the cut: a close let finish after it (to release
    // a held seal) writes a new one, which the cut must not keep.
    let seal_records = std::fs::read_dir(data_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .map(|topic| topic.path().join(crate::layout::DURABLE_SEALS_FILE))
        .map(|path| {
            let text = std::fs::read(&path).ok();
            (path, text)
        })
        .collect();
    PowerCut { dir: data_dir.to_owned(), durable, seal_records }
}

/// The durable state of a data directory at a power cut (see [`power_cut`]).
#[derive(Debug, Clone)]
pub struct PowerCut {
    dir: PathBuf,
    durable: HashMap<PathBuf, u64>,
    /// Each topic directory's record of durable seals at the cut (`None`: none).
    seal_records: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl PowerCut {
    /// The length `path` keeps (0 for a file never fsynced).
    pub fn durable_len(&self, path: &Path) -> u64 {
        self.durable.get(path).copied().unwrap_or(0)
    }

    /// Cuts every segment file (`*.seg`) in the topic directories of the data directory
    /// back to its durable length, after zeroing what failed fsyncs lost
    /// ([`drop_page_cache`]), and puts each record of durable seals back as it was at the
    /// cut. Call it once the tier is closed (or dropped), as the machine's restart would
    /// find the disk.
    pub fn apply(&self) -> io::Result<()> {
        drop_page_cache(&self.dir)?;
        self.restore_seal_records()?;
        for topic in std::fs::read_dir(&self.dir)? {
            let topic = topic?.path();
            if !topic.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(&topic)? {
                let path = file?.path();
                if path.extension().is_some_and(|e| e == "seg") {
                    let keep = self.durable_len(&path);
                    let file = std::fs::OpenOptions::new().write(true).open(&path)?;
                    if file.metadata()?.len() > keep {
                        file.set_len(keep)?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl PowerCut {
    /// Puts each topic's record of durable seals back as it was at the cut (part of
    /// [`apply`](Self::apply), for a test that shapes the segment files itself).
    pub fn restore_seal_records(&self) -> io::Result<()> {
        for (path, text) in &self.seal_records {
            match text {
                Some(text) => std::fs::write(path, text)?,
                None => match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                },
            }
        }
        Ok(())
    }
}

/// The hook: `Err` when a fault armed for `point` on a directory holding `path` is due
/// now. Waits first while `point` is [held](hold) for that directory.
pub(crate) fn check(point: FaultPoint, path: &Path) -> io::Result<()> {
    check_armed(point, path).map_err(|(e, _)| e)
}

/// [`check`], also saying whether the fault that fired loses pages.
fn check_armed(point: FaultPoint, path: &Path) -> Result<(), (io::Error, bool)> {
    wait_if_held(point, path);
    let mut armed = ARMED.lock();
    let Some(a) = armed.iter_mut().find(|a| a.point == point && path.starts_with(&a.dir)) else {
        return Ok(());
    };
    match a.pass {
        Some(0) => {
            a.pass = None;
            a.fired += 1;
            let e = io::Error::new(a.kind, format!("injected {point:?} fault on {}", path.display()));
            Err((e, a.loses_pages))
        }
        Some(n) => {
            a.pass = Some(n - 1);
            Ok(())
        }
        None => Ok(()),
    }
}

/// Byte ranges of segment files that a failed fsync lost (see
/// [`fail_fsync_losing_pages`]): still in the file until its pages are dropped.
static LOST: Mutex<Vec<(PathBuf, Range<u64>)>> = Mutex::new(Vec::new());

/// The [`FaultPoint::Fsync`] hook of the active segment `path` (open as `file`), whose
/// last successful fsync made `durable` bytes durable: [`check`], and when the fault that
/// fires loses pages, records `durable..` (to the file's length) as lost.
pub(crate) fn check_fsync(path: &Path, file: &File, durable: u64) -> io::Result<()> {
    let Err((e, loses_pages)) = check_armed(FaultPoint::Fsync, path) else { return Ok(()) };
    if loses_pages {
        let len = file.metadata()?.len();
        if len > durable {
            LOST.lock().push((path.to_owned(), durable..len));
        }
    }
    Err(e)
}

/// The hook after recovery dropped `path`'s pages from the page cache: its lost bytes
/// read back as zeros from now on.
pub(crate) fn page_cache_dropped(path: &Path) -> io::Result<()> {
    let lost: Vec<Range<u64>> = {
        let mut all = LOST.lock();
        let (mine, others) = std::mem::take(&mut *all).into_iter().partition(|(p, _)| p == path);
        *all = others;
        mine.into_iter().map(|(_, r)| r).collect()
    };
    zero(path, &lost)
}

/// The hook after `path` was cut back to `len` bytes: lost bytes beyond are forgotten.
pub(crate) fn cut_to(path: &Path, len: u64) {
    let mut lost = LOST.lock();
    for (_, range) in lost.iter_mut().filter(|(p, _)| p == path) {
        range.end = range.end.min(len);
    }
    lost.retain(|(_, range)| !range.is_empty());
}

/// Drops the page cache of every segment file under `data_dir`, as a reboot (or the
/// pages' eviction) does: the bytes a failed fsync lost ([`fail_fsync_losing_pages`])
/// read back as zeros from now on. Call it once the tier is closed or dropped.
pub fn drop_page_cache(data_dir: &Path) -> io::Result<()> {
    let lost: Vec<(PathBuf, Range<u64>)> = {
        let mut all = LOST.lock();
        let (mine, others) =
            std::mem::take(&mut *all).into_iter().partition(|(p, _)| p.starts_with(data_dir));
        *all = others;
        mine
    };
    for (path, range) in lost {
        zero(&path, std::slice::from_ref(&range))?;
    }
    Ok(())
}

/// Overwrites `ranges` of `path` with zeros, within the file's length.
fn zero(path: &Path, ranges: &[Range<u64>]) -> io::Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    let file = match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    for range in ranges {
        let end = range.end.min(len);
        if range.start < end {
            let zeros = vec![0u8; usize::try_from(end - range.start).map_err(io::Error::other)?];
            std::os::unix::fs::FileExt::write_all_at(&file, &zeros, range.start)?;
        }
    }
    Ok(())
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
