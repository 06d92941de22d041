//! Workload 12: reopening one topic that retains much WAL — the time from `open` to the
//! first record read, against the WAL's own open of the same directory. What an open
//! does is proportional to what is unproven (`docs/hot.md`, "Recovery"): after a clean
//! close every sealed segment's seal is known durable and only the active segment is
//! scanned; after a crash (here: the close's record of the durable seals removed, which
//! is what a process killed before its close leaves) the seals that may have been in
//! flight are checked too.
//!
//! Each case writes `size` of 1 KiB records (batches of 100, 64 MiB segments, `fsync =
//! never`) with `HotTier` alone, rotates, appends one more batch (the active segment is
//! one batch, so the open's time is not the active segment's scan), and closes. The
//! opens then run on a warm page cache.

use std::{path::Path, sync::Arc, time::Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use tier_cold::ColdTier;
use tier_core::{StartPosition, Tier};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_router::{ColdBackend, RouterConfig, TieredStore};
use tier_testkit::servers::S3Server;

use crate::{Settings, cold::Backend, report::Row, util};

const REOPEN: &str = "12 reopen";
const TOPIC: &str = "big";
const SEGMENT_BYTES: u64 = 64 << 20;
/// The goal: an open (with the first read) of any size within this many milliseconds
/// plus the active segment's scan (one batch here).
const GOAL_MS: f64 = 50.0;

fn hot_config(root: &Path) -> HotConfig {
    let mut hot = HotConfig::new(root.join("hot")).with_fsync(FsyncPolicy::Never);
    hot.segment_bytes = SEGMENT_BYTES;
    hot
}

/// Writes `bytes` of 1 KiB records to `root/hot`, then one batch in a fresh segment.
async fn prepare(root: &Path, bytes: u64) -> Result<u64> {
    let hot = HotTier::open(hot_config(root)).await?;
    let topic = util::topic(TOPIC)?;
    let payload = util::payload(1024);
    let mut offset = 0u64;
    while offset * 1024 < bytes {
        hot.append(&topic, util::batch(&payload, 100, offset)?).await?;
        offset += 100;
    }
    hot.rotate(&topic).await?;
    hot.append(&topic, util::batch(&payload, 100, offset)?).await?;
    offset += 100;
    hot.close().await;
    Ok(offset)
}

/// Opens the store on `root` and reads the first record; the open's duration.
async fn open_and_read(root: &Path, cold: Option<&Arc<dyn ColdBackend>>) -> Result<f64> {
    let started = Instant::now();
    let mut router = RouterConfig::default();
    router.state_dir = Some(root.join("router"));
    let mut builder = TieredStore::builder().hot(hot_config(root)).router(router).background(false);
    if let Some(cold) = cold {
        builder = builder.cold(Arc::clone(cold));
    }
    let store = builder.open().await?;
    let topic = store.topic(TOPIC).await?;
    let mut reader = topic.reader(StartPosition::Earliest).await?;
    let first = reader.next().await.context("no record")??;
    let secs = util::secs(started.elapsed());
    anyhow::ensure!(first.offset == 0, "first record at {}", first.offset);
    drop(reader);
    drop(topic);
    store.close().await;
    Ok(secs)
}

/// The best of `rounds` opens: the WAL alone, then the store (hot only, and with `cold`).
async fn case(
    settings: &Settings,
    root: &Path,
    label: &str,
    cold: &Arc<dyn ColdBackend>,
    unclean: bool,
) -> Result<Vec<Row>> {
    let seal_record = root.join("hot").join(TOPIC).join(tier_hot::layout::DURABLE_SEALS_FILE);
    let (mut wal, mut hot_only, mut with_cold) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..settings.rounds {
        if unclean {
            let _ = std::fs::remove_file(&seal_record);
        }
        let started = Instant::now();
        let hot = HotTier::open(hot_config(root)).await?;
        wal = wal.min(util::secs(started.elapsed()));
        hot.close().await;
        drop(hot);
        if unclean {
            let _ = std::fs::remove_file(&seal_record);
        }
        hot_only = hot_only.min(open_and_read(root, None).await?);
        if unclean {
            let _ = std::fs::remove_file(&seal_record);
        }
        with_cold = with_cold.min(open_and_read(root, Some(cold)).await?);
    }
    let state = if unclean { "after a crash" } else { "after a clean close" };
    let row = |deployment: &str, secs: f64| {
        let ms = secs * 1e3;
        let row = Row::new(REOPEN, format!("{label}, {deployment}, {state}")).detail(format!(
            "open + first read {ms:.1} ms; the WAL's own open {:.1} ms; best of {}{}",
            wal * 1e3,
            settings.rounds,
            if unclean {
                "; the two newest sealed segments are read from the disk and checked (their seals may have been \
                 in flight): what is unproven, not what is retained"
            } else {
                ""
            }
        ));
        // After a crash the open checks the seals that may have been in flight: its
        // time is theirs to read, whatever the WAL retains; no target.
        if unclean { row } else { row.target_checked(&format!("<= {GOAL_MS:.0} ms"), ms <= GOAL_MS) }
    };
    Ok(vec![row("hot only", hot_only), row("hot+cold (moto S3)", with_cold)])
}

/// Workload 12: 1 GiB (and 10 GiB in the full run) of WAL in one topic.
pub(crate) async fn large_wal(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let s3 = S3Server::start().await?;
    s3.create_bucket("bench").await?;
    let cold: Arc<dyn ColdBackend> =
        Arc::new(ColdTier::open(Backend::S3 { endpoint: s3.endpoint() }.config())?);
    let sizes: &[u64] = if settings.quick { &[1 << 30] } else { &[1 << 30, 10 << 30] };
    let mut rows = Vec::new();
    for &size in sizes {
        let root = tempfile::tempdir_in(dir)?;
        let records = prepare(root.path(), size).await?;
        let label =
            format!("{} GiB, {} segments, {records} records", size >> 30, size.div_ceil(SEGMENT_BYTES) + 1);
        rows.extend(case(settings, root.path(), &label, &cold, false).await?);
        rows.extend(case(settings, root.path(), &label, &cold, true).await?);
    }
    Ok(rows)
}
