//! What the simulation does to the local disk: power cuts, lost directories, and byte
//! damage in a sealed segment.
//!
//! A power cut keeps what each segment file's last successful fsync made durable (its
//! *durable length*, recorded by tier-hot's fault-injection feature,
//! [`tier_hot::faults::durable_lengths`]; a file not fsynced since the previous power cut
//! keeps what that cut left) and decides what became of the bytes written since, by one
//! of two models ([`CutModel`], chosen by the schedule's generator version):
//!
//! - [`CutModel::Bytes`] (generators 1–5): each file is cut back to its durable length or
//!   to a random byte past it, never below its segment header — a file system that
//!   persists appends in order and a new file together with its first block.
//! - [`CutModel::Pages`] (generator 6 on): what a kernel's page cache and a file system
//!   that orders nothing without an fsync can leave (see `docs/simulation.md`, "Power
//!   cuts"). The bytes past the durable length are written back by 4 KiB page, each page
//!   independently or not at all, and the file's size may reach the disk with or without
//!   the pages it covers: a page not written back reads as zeros inside the size, or the
//!   file is shorter. A file created since the last fsync of it (no durable length at
//!   all) may be gone (its directory entry never written), empty, its full size of zeros
//!   (header included: ext4 `data=writeback`'s "NULL bytes after a crash"), or pages of it
//!   as above. Bytes below the durable length are never touched.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tier_core::{Offset, OffsetRange};
use tier_hot::layout::parse_segment_file_name;

use crate::rng::Rng;

/// A topic directory's segment files, sorted by base offset.
fn segments(topic_dir: &Path) -> Vec<(Offset, PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(topic_dir) else { return out };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(parse_segment_file_name) {
            out.push((base, entry.path()));
        }
    }
    out.sort();
    out
}

fn topic_dirs(data_dir: &Path) -> Vec<PathBuf> {
    tier_hot::faults::subdirectories(data_dir)
}

/// How a power cut treats the bytes written since a file's last fsync (see the module
/// docs). A schedule's generator version picks it ([`crate::schedule::GENERATOR`]), so
/// a regression schedule replays the power cuts it was found with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutModel {
    /// Cut back to the durable length or a random byte past it, never below the header.
    Bytes,
    /// By 4 KiB page, the size persisted with or without the data; new files may come
    /// back missing, empty or zero-filled.
    Pages,
    /// [`Pages`](Self::Pages), and in each directory of the data directory, with even
    /// chances, every directory operation since the directory's last fsync undone: files
    /// and topic directories created since are gone, files unlinked or renamed over since
    /// are back as they were ([`tier_hot::faults::DirListings`]).
    PagesAndDirs,
}

/// The unit a kernel writes back a file's dirty data in (and the unit tier-hot's recovery
/// assumes a seal cut short loses of a footer).
pub const PAGE: u64 = 4096;

/// [`CutModel::Pages`]: the chances (out of 4) of what became of a file's bytes past its
/// durable length. Each is a state a real power cut leaves (`docs/simulation.md`, "Power
/// cuts"); the weights only make every one common.
mod pages {
    /// Nothing written back: the file ends at its durable length.
    pub(super) const NONE: u64 = 0;
    /// Written back in order up to a random byte (the file's size as of an earlier
    /// writeback): the byte model's cut.
    pub(super) const PREFIX: u64 = 1;
    /// The size reached the disk; each page independently written back or zeros.
    pub(super) const SIZE_PERSISTED: u64 = 2;
    /// Each page independently; the size ends with the last page written back.
    pub(super) const SIZE_WITH_PAGES: u64 = 3;
    /// For a file with no durable length (created since its last fsync): its directory
    /// entry never reached the disk, the file is gone.
    pub(super) const NEW_GONE: u64 = 0;
    /// Its entry reached the disk, its size did not: an empty file.
    pub(super) const NEW_EMPTY: u64 = 1;
    /// Its size reached the disk, none of its data: its size of zeros, header included.
    pub(super) const NEW_ZEROS: u64 = 2;
    /// Each page independently, as for a file whose durable length is 0.
    pub(super) const NEW_PAGES: u64 = 3;
}

/// The length each file had after the previous power cut (its durable length until the
/// next fsync), per data directory.
#[derive(Debug, Default)]
pub struct Disk {
    settled: HashMap<PathBuf, u64>,
    /// Directory operations are modelled ([`CutModel::PagesAndDirs`]).
    dirs: bool,
    /// Directories whose listings are tracked besides the data directory's (the router's
    /// state directory).
    others: Vec<PathBuf>,
}

/// What a power cut did.
#[derive(Debug, Default, Clone)]
pub struct Cut {
    /// Files changed (cut, zeroed in part, emptied or removed).
    pub files: u64,
    /// Bytes written but not durable that did not survive (removed or zeroed).
    pub bytes: u64,
    /// Files that came back as zeros where their header was (or gone, or empty): created
    /// since their last fsync.
    pub headers: u64,
    /// The directory entries a cut undid ([`CutModel::PagesAndDirs`]), by name: `-`
    /// removed, `+` put back.
    pub undone: Vec<String>,
}

impl Disk {
    /// Cuts every segment file under `data_dir` (the process must be gone: no mapping
    /// may be open) as `model` says, given `synced`, the durable lengths recorded at the
    /// moment of the cut ([`tier_hot::faults::durable_lengths`]), then starts a new
    /// durability record.
    pub fn power_cut(
        &mut self,
        data_dir: &Path,
        synced: &HashMap<PathBuf, u64>,
        listings: &[tier_hot::faults::DirListings],
        model: CutModel,
        header_len: u64,
        rng: &mut Rng,
    ) -> std::io::Result<Cut> {
        let mut cut = Cut::default();
        let mut synced = std::borrow::Cow::Borrowed(synced);
        if model == CutModel::PagesAndDirs {
            for (listings, dir) in
                listings.iter().flat_map(|l| l.directories().into_iter().map(move |d| (l, d)))
            {
                if !rng.chance(1, 2) {
                    continue;
                }
                let undone = listings.undo(&dir)?;
                let name =
                    |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                cut.undone.extend(undone.removed.iter().map(|p| format!("-{}", name(p))));
                cut.undone.extend(undone.restored.iter().map(|p| format!("+{}", name(p))));
                // A file put back is the one the directory's last fsync saw, as it was
                // when unlinked or replaced: the WAL fsyncs a file before it renames or
                // removes it, so it counts as durable whole.
                for path in undone.restored {
                    let len = fs::metadata(&path)?.len();
                    synced.to_mut().insert(path, len);
                }
            }
        }
        for dir in topic_dirs(data_dir) {
            for (_, path) in segments(&dir) {
                let len = fs::metadata(&path)?.len();
                let durable = synced.get(&path).or_else(|| self.settled.get(&path)).copied();
                match model {
                    CutModel::Bytes => {
                        let lo = durable.unwrap_or(0).max(header_len).min(len);
                        let to = if rng.chance(1, 2) { lo } else { rng.range(lo, len) };
                        if to < len {
                            OpenOptions::new().write(true).open(&path)?.set_len(to)?;
                            cut.files += 1;
                            cut.bytes += len - to;
                        }
                    }
                    CutModel::Pages | CutModel::PagesAndDirs => {
                        cut_pages(&path, len, durable, rng, &mut cut)?
                    }
                }
            }
        }
        self.settle(data_dir);
        Ok(cut)
    }

    /// Records every file's current length as durable (after a cut, or after a clean
    /// shutdown, whose files are all synced) and restarts the fsync record.
    pub fn settle(&mut self, data_dir: &Path) {
        self.settled.clear();
        for dir in topic_dirs(data_dir) {
            for (_, path) in segments(&dir) {
                if let Ok(m) = fs::metadata(&path) {
                    self.settled.insert(path, m.len());
                }
            }
        }
        self.track(data_dir);
    }

    /// Starts the fsync record of `data_dir` (and, when directory operations are
    /// modelled, of its directories' listings), everything on disk now counting as
    /// durable.
    pub fn track(&self, data_dir: &Path) {
        tier_hot::faults::track_durability(data_dir);
        if self.dirs {
            tier_hot::faults::track_directories(data_dir);
            for dir in &self.others {
                tier_hot::faults::track_directories(dir);
            }
        }
    }

    /// Restarts the record of `data_dir`'s directories' listings from what they hold now
    /// (a lost directory: what is gone stays gone).
    pub fn retrack_dirs(&self, dir: &Path) {
        if self.dirs {
            tier_hot::faults::track_directories(dir);
        }
    }

    /// Ends the records of `data_dir`.
    pub fn untrack(&self, data_dir: &Path) {
        tier_hot::faults::untrack_durability(data_dir);
        tier_hot::faults::untrack_directories(data_dir);
        for dir in &self.others {
            tier_hot::faults::untrack_directories(dir);
        }
    }

    /// A disk whose power cuts follow `model` ([`CutModel::PagesAndDirs`] tracks the
    /// directories' listings: the data directory's, and `others`, such as the router's
    /// state directory).
    pub fn new(model: CutModel, others: Vec<PathBuf>) -> Self {
        Self { settled: HashMap::new(), dirs: model == CutModel::PagesAndDirs, others }
    }

    /// Forgets a lost directory's files.
    pub fn forget(&mut self, dir: &Path) {
        self.settled.retain(|p, _| !p.starts_with(dir));
    }
}

/// [`CutModel::Pages`] for one file of `len` bytes whose durable length is `durable`
/// (`None`: never fsynced since it was created).
fn cut_pages(
    path: &Path,
    len: u64,
    durable: Option<u64>,
    rng: &mut Rng,
    cut: &mut Cut,
) -> std::io::Result<()> {
    let from = match durable {
        Some(d) if d >= len => return Ok(()),
        Some(d) => d,
        None => {
            let how = rng.below(4);
            if how == pages::NEW_GONE {
                fs::remove_file(path)?;
            } else if how == pages::NEW_EMPTY {
                OpenOptions::new().write(true).open(path)?.set_len(0)?;
            } else if how == pages::NEW_ZEROS {
                zero(path, 0, len)?;
            }
            if how != pages::NEW_PAGES {
                cut.files += 1;
                cut.headers += 1;
                cut.bytes += len;
                return Ok(());
            }
            0
        }
    };
    let how = rng.below(4);
    debug_assert!(how <= pages::SIZE_WITH_PAGES);
    let (size, holes) = if how == pages::NONE {
        (from, Vec::new())
    } else if how == pages::PREFIX {
        (rng.range(from, len), Vec::new())
    } else {
        // The pages holding bytes past `from`, each written back or not.
        let mut holes = Vec::new();
        let mut last_written = from;
        let mut page = from / PAGE * PAGE;
        while page < len {
            let (lo, hi) = (page.max(from), (page + PAGE).min(len));
            if rng.chance(1, 2) {
                last_written = hi;
            } else {
                holes.push((lo, hi));
            }
            page += PAGE;
        }
        let size = if how == pages::SIZE_PERSISTED { len } else { last_written };
        (size, holes)
    };
    let mut lost = len - size;
    for &(lo, hi) in &holes {
        if lo < size {
            zero(path, lo, hi.min(size))?;
            lost += hi.min(size) - lo;
        }
    }
    if size < len {
        OpenOptions::new().write(true).open(path)?.set_len(size)?;
    }
    if durable.is_none() && (size == 0 || holes.first().is_some_and(|&(lo, _)| lo == 0)) {
        cut.headers += 1;
    }
    if lost > 0 {
        cut.files += 1;
        cut.bytes += lost;
    }
    Ok(())
}

/// Overwrites `path`'s bytes `lo..hi` with zeros.
fn zero(path: &Path, lo: u64, hi: u64) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    file.seek(SeekFrom::Start(lo))?;
    file.write_all(&vec![0; usize::try_from(hi - lo).unwrap_or(0)])
}

/// Flips one byte in the data of a sealed segment (any file but the topic's last) of
/// `topic` under `data_dir` (the topic the model follows: damage elsewhere would be
/// counted against it). Returns the offsets the damaged file holds and its path, or `None` when
/// there is no sealed segment.
pub fn damage_sealed(
    data_dir: &Path,
    topic: &str,
    header_len: u64,
    rng: &mut Rng,
) -> std::io::Result<Option<(OffsetRange, PathBuf)>> {
    let mut sealed = Vec::new();
    for dir in topic_dirs(data_dir).into_iter().filter(|d| d.file_name().is_some_and(|n| n == topic)) {
        let segs = segments(&dir);
        for pair in segs.windows(2) {
            sealed.push((pair[0].0, pair[1].0, pair[0].1.clone()));
        }
    }
    if sealed.is_empty() {
        return Ok(None);
    }
    let (start, end, path) = rng.pick(&sealed).clone();
    let mut file = OpenOptions::new().read(true).write(true).open(&path)?;
    let len = file.metadata()?.len();
    if len <= header_len {
        return Ok(None);
    }
    let at = rng.range(header_len, len - 1);
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(&mut byte)?;
    byte[0] ^= 1 << rng.below(8);
    file.seek(SeekFrom::Start(at))?;
    file.write_all(&byte)?;
    Ok(Some((OffsetRange::new(start, end.max(start)), path)))
}
