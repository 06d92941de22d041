//! What a power cut leaves of directory operations: every create, rename and unlink in a
//! directory since that directory's last fsync may be undone, because only the fsync of
//! a directory makes its entries durable (fsync(2): "Calling fsync() does not
//! necessarily ensure that the entry in the directory containing the file has also
//! reached disk. For that an explicit fsync() on a file descriptor for the directory is
//! also needed.").
//!
//! While a data directory is tracked ([`track`]), each of its directories (the data
//! directory and its topic directories) has a *durable listing*: its entries as of its
//! last fsync through the WAL's `fsync_dir` (or as of the start of the tracking, when
//! everything on disk is taken as durable), each file kept alive by a hard link in a
//! shadow directory beside the data directory, so that a file unlinked or replaced since
//! can be put back with the content it had. [`listings`] copies them at the moment of a
//! cut; [`DirListings::undo`] then makes chosen directories what their durable listing
//! says: entries created since are removed, entries removed or replaced since come back.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// One directory's durable entries: name → the shadow hard link of a file, or `None`
/// for a subdirectory.
type Listing = BTreeMap<OsString, Option<PathBuf>>;

/// The durable listings of one tracked data directory's directories.
#[derive(Debug)]
struct Tracked {
    data_dir: PathBuf,
    shadow: PathBuf,
    listings: HashMap<PathBuf, Listing>,
}

static TRACKED: Mutex<Vec<Tracked>> = Mutex::new(Vec::new());
static NEXT_LINK: AtomicU64 = AtomicU64::new(0);

/// The shadow directory of `data_dir`: a sibling, so that hard links reach it.
fn shadow_of(data_dir: &Path) -> PathBuf {
    let name = data_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    data_dir.with_file_name(format!(".{name}.durable-entries"))
}

/// Starts tracking `data_dir`'s directories, everything on disk now counting as durable
/// (after a power cut, or a clean shutdown). Replaces an earlier tracking of it.
pub(super) fn track(data_dir: &Path) {
    let shadow = shadow_of(data_dir);
    let _ = fs::remove_dir_all(&shadow);
    let mut tracked = Tracked { data_dir: data_dir.to_owned(), shadow, listings: HashMap::new() };
    if fs::create_dir_all(&tracked.shadow).is_ok() {
        let mut dirs = vec![data_dir.to_owned()];
        dirs.extend(subdirectories(data_dir));
        for dir in dirs {
            if let Some(listing) = snapshot(&tracked.shadow, &dir, None) {
                tracked.listings.insert(dir, listing);
            }
        }
    }
    let mut all = TRACKED.lock();
    all.retain(|t| t.data_dir != data_dir);
    all.push(tracked);
}

/// Stops tracking `data_dir` (its shadow directory is removed).
pub(super) fn untrack(data_dir: &Path) {
    let mut all = TRACKED.lock();
    if let Some(i) = all.iter().position(|t| t.data_dir == data_dir) {
        let t = all.swap_remove(i);
        let _ = fs::remove_dir_all(&t.shadow);
    }
}

/// The hook after a successful fsync of `dir`: its entries now are its durable listing,
/// when it is a tracked data directory or one of its topic directories.
pub(super) fn synced(dir: &Path) {
    let mut all = TRACKED.lock();
    let Some(t) = all.iter_mut().find(|t| dir == t.data_dir || dir.parent() == Some(t.data_dir.as_path()))
    else {
        return;
    };
    if let Some(listing) = snapshot(&t.shadow, dir, t.listings.get(dir)) {
        t.listings.insert(dir.to_owned(), listing);
    }
}

/// The durable listings of `data_dir`'s directories now (empty when not tracked): what a
/// power cut at this moment leaves of their entries.
pub(super) fn listings(data_dir: &Path) -> DirListings {
    let all = TRACKED.lock();
    let listings =
        all.iter().find(|t| t.data_dir == data_dir).map(|t| t.listings.clone()).unwrap_or_default();
    DirListings { data_dir: data_dir.to_owned(), listings }
}

/// The durable listings of a data directory's directories at a power cut (`faults::dir_listings`).
#[derive(Debug, Clone, Default)]
pub struct DirListings {
    data_dir: PathBuf,
    listings: HashMap<PathBuf, Listing>,
}

/// What [`DirListings::undo`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Undone {
    /// Entries created since their directory's last fsync, removed.
    pub removed: Vec<PathBuf>,
    /// Files unlinked or replaced since their directory's last fsync, put back.
    pub restored: Vec<PathBuf>,
}

impl DirListings {
    /// The directories a cut may undo operations in: the data directory first, then each
    /// topic directory existing now, sorted (a topic directory with no durable listing of
    /// its own — never fsynced since it was created — has an empty one).
    pub fn directories(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.data_dir.clone()];
        dirs.extend(subdirectories(&self.data_dir));
        dirs
    }

    /// Undoes every directory operation in `dir` since its durable listing: entries not
    /// in it are removed (a subdirectory with everything in it), files of it that are
    /// missing or are another file now are put back as they were. Call it once the
    /// process is gone.
    pub fn undo(&self, dir: &Path) -> io::Result<Undone> {
        let empty = Listing::new();
        let listing = self.listings.get(dir).unwrap_or(&empty);
        let mut undone = Undone::default();
        let mut now: Vec<(OsString, PathBuf)> = match fs::read_dir(dir) {
            Ok(entries) => entries.flatten().map(|e| (e.file_name(), e.path())).collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(undone),
            Err(e) => return Err(e),
        };
        now.sort();
        for (name, path) in &now {
            if !listing.contains_key(name) {
                if path.is_dir() {
                    fs::remove_dir_all(path)?;
                } else {
                    fs::remove_file(path)?;
                }
                undone.removed.push(path.clone());
            }
        }
        for (name, shadow) in listing {
            let Some(shadow) = shadow else { continue };
            let path = dir.join(name);
            let same = match (fs::symlink_metadata(&path), fs::metadata(shadow)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                (Err(_), Ok(_)) => false,
                (_, Err(_)) => true,
            };
            if !same {
                if path.is_dir() {
                    fs::remove_dir_all(&path)?;
                } else if path.exists() {
                    fs::remove_file(&path)?;
                }
                fs::hard_link(shadow, &path)?;
                undone.restored.push(path);
            }
        }
        Ok(undone)
    }
}

/// `dir`'s entries now, each file hard-linked into `shadow` (`None` when `dir` cannot be
/// read). A file `before` (the previous listing) kept a link to keeps that link: the
/// links are not removed while the directory is tracked.
fn snapshot(shadow: &Path, dir: &Path, before: Option<&Listing>) -> Option<Listing> {
    let mut listing = Listing::new();
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            listing.insert(entry.file_name(), None);
        } else if kind.is_file() {
            if let Some(Some(kept)) = before.and_then(|b| b.get(&entry.file_name()))
                && let (Ok(now), Ok(then)) = (entry.metadata(), fs::metadata(kept))
                && now.ino() == then.ino()
                && now.dev() == then.dev()
            {
                listing.insert(entry.file_name(), Some(kept.clone()));
                continue;
            }
            let link = shadow.join(NEXT_LINK.fetch_add(1, Ordering::Relaxed).to_string());
            if fs::hard_link(entry.path(), &link).is_ok() {
                listing.insert(entry.file_name(), Some(link));
            }
        }
    }
    Some(listing)
}

/// The directories directly inside `dir`, sorted (none when it cannot be read): a data
/// directory's topic directories.
pub fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|it| it.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}
