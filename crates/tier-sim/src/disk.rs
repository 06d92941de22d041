//! What the simulation does to the local disk: power cuts (each WAL file cut back to
//! its last fsync point or to a random byte past it), lost directories, and byte damage
//! in a sealed segment.
//!
//! The durable length of a file is what tier-hot's fault-injection feature recorded at
//! its last successful fsync ([`tier_hot::faults::durable_lengths`]); a file not fsynced
//! since the previous power cut keeps the length that cut left. A cut never goes below a
//! segment's header: the model assumes a file system that persists a new file together
//! with its first block (tearing a header is left out on purpose, see
//! `docs/simulation.md`).

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
    let mut out: Vec<PathBuf> = fs::read_dir(data_dir)
        .map(|it| it.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// The length each file had after the previous power cut (its durable length until the
/// next fsync), per data directory.
#[derive(Debug, Default)]
pub struct Disk {
    settled: HashMap<PathBuf, u64>,
}

/// What a power cut did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Cut {
    /// Files cut.
    pub files: u64,
    /// Bytes removed (written but not durable).
    pub bytes: u64,
}

impl Disk {
    /// Cuts every segment file under `data_dir` (the process must be gone: no mapping
    /// may be open) back to its durable length or a random byte past it, then starts a
    /// new durability record.
    pub fn power_cut(&mut self, data_dir: &Path, header_len: u64, rng: &mut Rng) -> std::io::Result<Cut> {
        let synced = tier_hot::faults::durable_lengths(data_dir);
        let mut cut = Cut::default();
        for dir in topic_dirs(data_dir) {
            for (_, path) in segments(&dir) {
                let len = fs::metadata(&path)?.len();
                let durable = synced.get(&path).or_else(|| self.settled.get(&path)).copied().unwrap_or(0);
                let lo = durable.max(header_len).min(len);
                let to = if rng.chance(1, 2) { lo } else { rng.range(lo, len) };
                if to < len {
                    OpenOptions::new().write(true).open(&path)?.set_len(to)?;
                    cut.files += 1;
                    cut.bytes += len - to;
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
        tier_hot::faults::track_durability(data_dir);
    }

    /// Forgets a lost directory's files.
    pub fn forget(&mut self, dir: &Path) {
        self.settled.retain(|p, _| !p.starts_with(dir));
    }
}

/// Flips one byte in the data of a sealed segment (any file but a topic's last) under
/// `data_dir`. Returns the offsets the damaged file holds, or `None` when there is no
/// sealed segment.
pub fn damage_sealed(
    data_dir: &Path,
    header_len: u64,
    rng: &mut Rng,
) -> std::io::Result<Option<OffsetRange>> {
    let mut sealed = Vec::new();
    for dir in topic_dirs(data_dir) {
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
    Ok(Some(OffsetRange::new(start, end.max(start))))
}
