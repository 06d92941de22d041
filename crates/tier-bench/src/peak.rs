//! Workload 7 for the hot tier: the peak RSS of each hot-append case on its own, with
//! the default 64 MiB record cache and with a 4 MiB one; and of the router's 1 KiB cases
//! (a hot-only `TieredStore`, `Topic::append_batch`) with the default cache.
//!
//! Each case runs in a child process of its own (`tier-bench hot-append-peak …`), so its
//! `VmHWM` is its alone. Unlike workload 1, which appends clones of one template batch
//! (they all share one buffer), the child builds every batch afresh the way
//! `Topic::append` does (`RecordBatchBuilder::new()`, one push per record), so the record
//! cache retains what a real producer's batches cost. It appends until twice the cache
//! budget plus one segment's worth of encoded bytes went in, or a time cap ran out.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tier_core::{RecordBatchBuilder, Tier};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_router::TieredStore;

use crate::{
    Settings,
    report::Row,
    util::{self, BASE_TS, SIZES, size_label},
};

const PEAK: &str = "7 peak RSS";
/// What a case may take beyond its cache budget.
const SLACK: u64 = 16 << 20;
/// The bound of the small-cache run (cache 4 MiB).
const SMALL_CACHE_BOUND: u64 = 32 << 20;
/// The two cache budgets measured.
pub(crate) const BUDGETS: [u64; 2] = [64 << 20, 4 << 20];

/// One hot-append case: record size, records per batch, fsync policy, and whether it
/// appends through the router (a hot-only `TieredStore`, `Topic::append_batch`) or to
/// `HotTier` alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub(crate) size: usize,
    pub(crate) batch: usize,
    pub(crate) always: bool,
    pub(crate) router: bool,
}

impl Case {
    /// Workload 1's cases, in its order.
    pub(crate) fn all() -> Vec<Case> {
        let mut out = Vec::new();
        for always in [false, true] {
            for size in SIZES {
                for batch in [1, 100] {
                    out.push(Case { size, batch, always, router: false });
                }
            }
        }
        out
    }

    /// The router's cases (1 KiB records), measured with the default cache only.
    pub(crate) fn router() -> Vec<Case> {
        let mut out = Vec::new();
        for always in [false, true] {
            for batch in [1, 100] {
                out.push(Case { size: 1024, batch, always, router: true });
            }
        }
        out
    }

    fn label(&self) -> String {
        format!(
            "{} x{} fsync={}",
            size_label(self.size),
            self.batch,
            if self.always { "always" } else { "never" }
        )
    }
}

/// What one child measured.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Peak {
    pub(crate) batches: u64,
    pub(crate) encoded_bytes: u64,
    pub(crate) secs: f64,
    /// `VmHWM` with the tier open, before the first append.
    pub(crate) start_hwm_kib: u64,
    /// `VmHWM` at the end (the case's peak).
    pub(crate) vm_hwm_kib: u64,
}

/// The child's work: appends fresh batches of `case` to a tier with `cache_bytes`.
pub(crate) async fn run_case(settings: &Settings, dir: &Path, case: Case, cache_bytes: u64) -> Result<Peak> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let fsync = if case.always { FsyncPolicy::Always } else { FsyncPolicy::Never };
    let mut config = HotConfig::new(case_dir.path().join("hot")).with_fsync(fsync);
    config.cache_bytes = cache_bytes;
    let target = 2 * cache_bytes + config.segment_bytes;
    let cap = if settings.quick { Duration::from_secs(5) } else { Duration::from_secs(10) };
    let (tier, store) = if case.router {
        (None, Some(TieredStore::builder().hot(config).open().await?))
    } else {
        (Some(HotTier::open(config).await?), None)
    };
    let topic = util::topic("peak")?;
    let handle = match &store {
        Some(store) => Some(store.topic(topic.clone()).await?),
        None => None,
    };
    let payload = util::payload(case.size);
    let start_hwm_kib = util::vm_hwm_kib()?;
    let start = Instant::now();
    let (mut batches, mut encoded_bytes, mut next) = (0u64, 0u64, 0u64);
    while encoded_bytes < target && start.elapsed() < cap {
        let mut builder = RecordBatchBuilder::new();
        for i in 0..case.batch as u64 {
            builder.push(BASE_TS + (next + i) as i64, None, &[], &payload)?;
        }
        let len = builder.encoded_len();
        match (&tier, &handle) {
            (Some(tier), _) => {
                let batch = builder.build(next)?;
                tier.append(&topic, batch).await?;
            }
            (None, Some(handle)) => {
                handle.append_batch(builder).await?;
            }
            (None, None) => anyhow::bail!("neither a tier nor a topic to append to"),
        }
        next += case.batch as u64;
        encoded_bytes += len as u64;
        batches += 1;
    }
    let secs = util::secs(start.elapsed());
    let vm_hwm_kib = util::vm_hwm_kib()?;
    if let Some(tier) = tier {
        tier.close().await;
    }
    if let Some(store) = store {
        store.close().await;
    }
    Ok(Peak { batches, encoded_bytes, secs, start_hwm_kib, vm_hwm_kib })
}

/// The bound a case's peak must stay within: the budget + 16 MiB, and 32 MiB for the
/// 4 MiB cache.
pub(crate) fn bound(cache_bytes: u64) -> u64 {
    if cache_bytes <= 4 << 20 { SMALL_CACHE_BOUND } else { cache_bytes + SLACK }
}

/// The report row of one case.
pub(crate) fn row(case: Case, cache_bytes: u64, peak: &Peak) -> Row {
    let bound = bound(cache_bytes);
    let peak_bytes = peak.vm_hwm_kib << 10;
    let filled = if peak.encoded_bytes >= cache_bytes { "cache filled" } else { "cache NOT filled" };
    let path = if case.router { "router hot append" } else { "hot append" };
    Row::new(PEAK, format!("{path} {}, cache {} MiB", case.label(), cache_bytes >> 20))
        .target_checked(&format!("<= {} MiB", bound >> 20), peak_bytes <= bound)
        .detail(format!(
            "VmHWM {} MiB; budget {} MiB, bound {} MiB; {} MiB with the tier open before appending; \
             {} fresh batches ({} MiB encoded, {filled}) in {:.1} s",
            peak.vm_hwm_kib >> 10,
            cache_bytes >> 20,
            bound >> 20,
            peak.start_hwm_kib >> 10,
            peak.batches,
            peak.encoded_bytes >> 20,
            peak.secs
        ))
}
