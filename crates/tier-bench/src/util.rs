//! Helpers shared by the workloads: record batches, timing, peak memory, page-cache
//! eviction and a small deterministic random generator.

use std::{path::Path, time::Duration};

use anyhow::{Context, Result};
use tier_core::{RecordBatch, RecordBatchBuilder, TopicName};

/// Record sizes every throughput workload covers.
pub(crate) const SIZES: [usize; 3] = [100, 1024, 16 * 1024];

/// Timestamp of offset 0; record `o` has timestamp `BASE_TS + o`.
pub(crate) const BASE_TS: i64 = 1_700_000_000_000;

/// A payload of `size` bytes that does not compress to nothing.
pub(crate) fn payload(size: usize) -> Vec<u8> {
    let mut rng = Rng::new(size as u64 + 1);
    (0..size).map(|_| rng.next() as u8).collect()
}

/// A builder holding `count` records of `payload` with timestamps from `BASE_TS + base`.
pub(crate) fn builder(payload: &[u8], count: usize, base: u64) -> Result<RecordBatchBuilder> {
    let mut b = RecordBatchBuilder::with_capacity(count * (payload.len() + 8));
    for i in 0..count as u64 {
        b.push(BASE_TS + (base + i) as i64, None, &[], payload)?;
    }
    Ok(b)
}

/// A batch of `count` records of `payload` at `base`.
pub(crate) fn batch(payload: &[u8], count: usize, base: u64) -> Result<RecordBatch> {
    Ok(builder(payload, count, base)?.build(base)?)
}

/// A topic name (the names used here are valid).
pub(crate) fn topic(name: &str) -> Result<TopicName> {
    Ok(TopicName::new(name)?)
}

/// `1 KiB` style size label.
pub(crate) fn size_label(size: usize) -> String {
    if size >= 1024 { format!("{} KiB", size / 1024) } else { format!("{size} B") }
}

/// Seconds as f64.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// This process's peak resident set size in KiB (`VmHWM` of `/proc/self/status`).
pub(crate) fn vm_hwm_kib() -> Result<u64> {
    proc_status_kib("VmHWM")
}

/// This process's resident set size now in KiB (`VmRSS` of `/proc/self/status`).
pub(crate) fn vm_rss_kib() -> Result<u64> {
    proc_status_kib("VmRSS")
}

/// A `kB` field of `/proc/self/status`.
fn proc_status_kib(field: &str) -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kib = line[field.len() + 1..].trim().trim_end_matches("kB").trim();
    kib.parse().with_context(|| format!("parsing {line:?}"))
}

/// Drops `path`'s pages from the page cache (after writing back dirty ones) with
/// `posix_fadvise(DONTNEED)`. Pages mapped by a live process may stay.
pub(crate) fn evict(path: &Path) -> Result<()> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    file.sync_all().with_context(|| format!("fsyncing {}", path.display()))?;
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)
        .with_context(|| format!("fadvise(DONTNEED) on {}", path.display()))?;
    Ok(())
}

/// Writes back every dirty page of the file system holding `dir` (`syncfs`), so that a
/// case timed next does not pay for the write-back of the data cases before it left.
pub(crate) fn settle(dir: &Path) -> Result<()> {
    let fd = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    rustix::fs::syncfs(&fd).with_context(|| format!("syncfs on {}", dir.display()))?;
    Ok(())
}

/// Every regular file under `dir` (recursively), sorted.
pub(crate) fn files_under(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Percentile `p` (0..=100) of sorted `values`.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// xorshift64*: deterministic points for seeks, no dependency.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_picks_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 51.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn peak_rss_is_read_from_proc() {
        let kib = vm_hwm_kib().expect("VmHWM");
        assert!(kib > 100, "a running test binary uses more than 100 KiB, got {kib}");
    }

    #[test]
    fn batches_hold_the_requested_records_and_timestamps() {
        let payload = payload(100);
        let b = batch(&payload, 10, 5).expect("batch");
        assert_eq!(b.base_offset(), 5);
        assert_eq!(b.record_count(), 10);
        assert_eq!(b.first_timestamp(), BASE_TS + 5);
        assert_eq!(b.max_timestamp(), BASE_TS + 14);
        assert!(b.records().all(|r| r.payload.len() == 100));
    }

    #[test]
    fn rng_is_deterministic_and_bounded() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..100).map(|_| a.below(10)).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.below(10)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| x < 10));
        assert!(xs.iter().any(|&x| x != xs[0]), "not constant");
    }

    #[test]
    fn evict_accepts_a_written_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 1 << 16]).expect("write");
        evict(&path).expect("fadvise");
        assert_eq!(std::fs::read(&path).expect("read back").len(), 1 << 16);
    }
}
