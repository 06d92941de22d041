//! Cold-tier workloads: catch-up reads (4, run in a child process so its peak memory is
//! its own), seeks by offset and timestamp (5) and seek cost over many segments (8b).

use std::{path::Path, sync::Arc, time::Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt, stream};
use object_store::{ObjectStore, ObjectStoreExt as _, path::Path as ObjectPath};
use serde::{Deserialize, Serialize};
use tier_cold::{BackendConfig, ColdConfig, ColdTier, Secret, testing::CountingStore};
use tier_core::{ReadLimit, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};

use crate::{
    report::Row,
    util::{self, BASE_TS, Rng, secs},
};

/// Name of the topic every cold workload reads.
pub(crate) const TOPIC: &str = "cold";

/// Where the cold copies of the catch-up data live.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Backend {
    /// The moto S3 server at this endpoint, bucket `bench`.
    S3 { endpoint: String },
    /// A local directory.
    Local { path: std::path::PathBuf },
}

impl Backend {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Backend::S3 { .. } => "moto S3",
            Backend::Local { .. } => "local dir",
        }
    }

    pub(crate) fn config(&self) -> ColdConfig {
        let backend = match self {
            Backend::S3 { endpoint } => BackendConfig::S3 {
                bucket: "bench".into(),
                region: tier_testkit::servers::S3_REGION.into(),
                endpoint: Some(endpoint.clone()),
                access_key_id: Some(tier_testkit::servers::S3_ACCESS_KEY.into()),
                secret_access_key: Some(Secret::new(tier_testkit::servers::S3_SECRET_KEY)),
                allow_http: true,
                encryption: None,
            },
            Backend::Local { path } => BackendConfig::Local { path: path.clone() },
        };
        ColdConfig::new(backend)
    }
}

/// Writes `total` payload bytes of 1 KiB records into 64 MiB WAL segments under `dir`
/// and exports every sealed segment to each of `backends`. Returns the records written.
pub(crate) async fn prepare(dir: &Path, total: u64, backends: &[Backend]) -> Result<u64> {
    let hot = HotTier::open(HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Never)).await?;
    let records = crate::hot::fill(&hot, TOPIC, 1024, total).await?;
    let topic = util::topic(TOPIC)?;
    let sealed = hot.sealed_segments(&topic);
    for backend in backends {
        let cold = ColdTier::open(backend.config())?;
        for seg in &sealed {
            cold.export_segment(&topic, &seg.path).await?;
        }
    }
    hot.close().await;
    Ok(records)
}

/// How a catch-up child reads the topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CatchUpMode {
    /// `ColdTier::stream`: every record built.
    Records,
    /// `ColdTier::stream_batches`: verified batches, no record built.
    Batches,
    /// The baseline: raw ranged GETs of the same objects.
    Raw,
}

impl CatchUpMode {
    pub(crate) fn arg(self) -> &'static str {
        match self {
            CatchUpMode::Records => "records",
            CatchUpMode::Batches => "batches",
            CatchUpMode::Raw => "raw",
        }
    }
}

/// What a catch-up child reports.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct CatchUp {
    /// Records read (0 for the raw baseline, which does not decode).
    pub(crate) records: u64,
    /// Payload bytes (records), encoded batch bytes (batches) or object bytes (raw) read.
    pub(crate) bytes: u64,
    /// Wall time of the read.
    pub(crate) secs: f64,
    /// Peak RSS of the child, KiB.
    pub(crate) vm_hwm_kib: u64,
    /// GET requests made.
    pub(crate) gets: u64,
}

/// Child-process body of workload 4: stream the whole topic from `backend` through
/// `ColdTier::stream` or `ColdTier::stream_batches`, or issue the baseline's ranged GETs
/// of the same objects, `read_buffer` bytes each, `read_ahead` in flight.
pub(crate) async fn catch_up_child(backend: &Backend, mode: CatchUpMode) -> Result<CatchUp> {
    let config = backend.config();
    let counting = Arc::new(CountingStore::new(config.build_store()?));
    let cold = ColdTier::with_store(counting.clone(), config.clone())?;
    let topic = util::topic(TOPIC)?;
    let segments = cold.segments(&topic).await?;
    counting.reset();
    let start = Instant::now();
    let (records, bytes) = if mode == CatchUpMode::Raw {
        let store: Arc<dyn ObjectStore> = counting.clone();
        let mut ranges: Vec<(ObjectPath, std::ops::Range<u64>)> = Vec::new();
        for (key, _, size) in &segments {
            let mut at = 0;
            while at < *size {
                let end = (at + config.read_buffer).min(*size);
                ranges.push((key.clone(), at..end));
                at = end;
            }
        }
        let bytes = stream::iter(ranges)
            .map(|(key, range)| {
                let store = store.clone();
                async move { store.get_range(&key, range).await.map(|b| b.len() as u64) }
            })
            .buffered(config.read_ahead)
            .try_fold(0u64, |acc, n| async move { Ok(acc + n) })
            .await?;
        (0, bytes)
    } else if mode == CatchUpMode::Batches {
        let mut batches = cold.stream_batches(&topic, 0).await?;
        let (mut n, mut bytes) = (0u64, 0u64);
        while let Some(b) = batches.try_next().await? {
            anyhow::ensure!(b.base_offset() == n, "catch-up batch at {} where {n} was due", b.base_offset());
            n = b.end_offset();
            bytes += b.encoded_len() as u64;
        }
        (n, bytes)
    } else {
        let mut records = cold.stream(&topic, 0).await?;
        let (mut n, mut bytes) = (0u64, 0u64);
        while let Some(r) = records.try_next().await? {
            anyhow::ensure!(r.offset == n, "catch-up read offset {} where {n} was due", r.offset);
            n += 1;
            bytes += r.payload.len() as u64;
        }
        (n, bytes)
    };
    let secs = secs(start.elapsed());
    let counts = counting.counts();
    Ok(CatchUp {
        records,
        bytes,
        secs,
        vm_hwm_kib: util::vm_hwm_kib()?,
        gets: counts.gets + counts.get_ranges,
    })
}

/// Summary of seeks at random points.
#[derive(Debug, Default)]
struct SeekStats {
    requests: Vec<u64>,
    bytes: Vec<u64>,
    millis: Vec<f64>,
}

impl SeekStats {
    fn describe(&self) -> String {
        let n = self.requests.len().max(1) as f64;
        let mut ms = self.millis.clone();
        ms.sort_by(f64::total_cmp);
        format!(
            "{} seeks: requests avg {:.2} max {}; bytes avg {:.0}; latency p50 {:.2} ms p99 {:.2} ms",
            self.requests.len(),
            self.requests.iter().sum::<u64>() as f64 / n,
            self.requests.iter().max().copied().unwrap_or(0),
            self.bytes.iter().sum::<u64>() as f64 / n,
            util::percentile(&ms, 50.0),
            util::percentile(&ms, 99.0),
        )
    }

    fn max_requests(&self) -> u64 {
        self.requests.iter().max().copied().unwrap_or(0)
    }
}

/// Seeks `points` random offsets (and their timestamps) of the cold copy in `config`,
/// each with the segment-metadata cache cleared ("uncached") and again with it warm
/// ("cached"); the data-interval cache is cleared before every seek. A timestamp seek
/// is `offset_for_timestamp` then `read`, counted together. Reports request counts
/// beside the Pulsar-style scan estimate.
pub(crate) async fn seeks(
    workload: &str,
    label: &str,
    config: ColdConfig,
    points: usize,
) -> Result<Vec<Row>> {
    let counting = Arc::new(CountingStore::new(config.build_store()?));
    let cold = ColdTier::with_store(counting.clone(), config.clone())?;
    let topic = util::topic(TOPIC)?;
    let range = cold.refresh(&topic).await?;
    let first = first_timestamp_seek(workload, label, config, range.end.saturating_sub(1)).await?;
    let segments = cold.segments(&topic).await?;
    anyhow::ensure!(!range.is_empty(), "no cold data for seeks");
    let mut rng = Rng::new(42);
    let mut stats: [[SeekStats; 2]; 2] = Default::default();
    let mut pulsar = Vec::new();
    for _ in 0..points {
        let offset = range.start + rng.below(range.len());
        let (_, seg_range, seg_bytes) =
            segments.iter().find(|(_, r, _)| r.contains(offset)).context("offset in no segment")?;
        let position = (offset - seg_range.start) as f64 / seg_range.len() as f64 * *seg_bytes as f64;
        pulsar.push((position / (1 << 20) as f64).floor() + 1.0);
        for (by_time, per_kind) in stats.iter_mut().enumerate() {
            for (cached, s) in per_kind.iter_mut().enumerate() {
                if cached == 0 {
                    cold.clear_index_cache();
                }
                // Each seek fetches its data interval: "cached" is the segment index only,
                // not the interval the previous seek of the same point left in the data
                // cache (that one would cost no request at all).
                cold.clear_data_cache();
                counting.reset();
                let start = Instant::now();
                let target = if by_time == 1 {
                    cold.offset_for_timestamp(&topic, BASE_TS + offset as i64)
                        .await?
                        .context("timestamp not found")?
                } else {
                    offset
                };
                let got = cold.read(&topic, target, target + 1, ReadLimit::records(1)).await?;
                s.millis.push(start.elapsed().as_secs_f64() * 1e3);
                anyhow::ensure!(
                    got.first().map(|r| r.offset) == Some(offset),
                    "seek to {offset} landed elsewhere"
                );
                let c = counting.counts();
                s.requests.push(c.gets + c.get_ranges);
                s.bytes.push(c.get_bytes);
            }
        }
    }
    let pulsar_avg = pulsar.iter().sum::<f64>() / pulsar.len().max(1) as f64;
    let mut rows = vec![first];
    for (by_time, per_kind) in stats.iter().enumerate() {
        for (cached, s) in per_kind.iter().enumerate() {
            let (limit, words) = if cached == 1 { (1, "<= 1 request") } else { (2, "<= 2 requests") };
            let kind = if by_time == 1 { "timestamp" } else { "offset" };
            let cache = if cached == 1 { "index cached" } else { "index not cached" };
            rows.push(
                Row::new(workload, format!("{label}: seek by {kind}, {cache}"))
                    .target_checked(words, s.max_requests() <= limit)
                    .detail(format!(
                        "{}; Pulsar-style scan from 64 MiB block start with 1 MiB reads: avg {pulsar_avg:.1} requests",
                        s.describe()
                    )),
            );
        }
    }
    Ok(rows)
}

/// A freshly opened tier (no segment's newest timestamp known yet) seeking the
/// timestamp of `offset` (the newest record: the worst case of a scan in offset order).
async fn first_timestamp_seek(workload: &str, label: &str, config: ColdConfig, offset: u64) -> Result<Row> {
    let counting = Arc::new(CountingStore::new(config.build_store()?));
    let cold = ColdTier::with_store(counting.clone(), config)?;
    let topic = util::topic(TOPIC)?;
    cold.refresh(&topic).await?;
    let segments = cold.segments(&topic).await?.len();
    counting.reset();
    let start = Instant::now();
    let found = cold.offset_for_timestamp(&topic, BASE_TS + offset as i64).await?;
    let took = start.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(found == Some(offset), "timestamp seek found {found:?}, not {offset}");
    let c = counting.counts();
    let requests = c.gets + c.get_ranges;
    Ok(Row::new(workload, format!("{label}: first timestamp lookup on a fresh tier, newest record"))
        .target_checked("<= 2 requests", requests <= 2)
        .detail(format!(
            "offset_for_timestamp alone: {requests} requests, {} bytes, {took:.2} ms over {segments} segments",
            c.get_bytes
        )))
}

/// Workload 8b: a local cold copy of `segments` small segments (100 records of 100 B
/// each), then seeks as in workload 5.
pub(crate) async fn scale_segments(dir: &Path, segments: u64, points: usize) -> Result<Vec<Row>> {
    let case = tempfile::tempdir_in(dir)?;
    let hot = HotTier::open(HotConfig::new(case.path().join("hot")).with_fsync(FsyncPolicy::Never)).await?;
    let topic = util::topic(TOPIC)?;
    let payload = util::payload(100);
    let backend = Backend::Local { path: case.path().join("cold") };
    let cold = ColdTier::open(backend.config())?;
    for s in 0..segments {
        hot.append(&topic, util::batch(&payload, 100, s * 100)?).await?;
        let info = hot.rotate(&topic).await?.context("rotate sealed nothing")?;
        cold.export_segment(&topic, &info.path).await?;
    }
    hot.close().await;
    let label = format!("{segments} local segments");
    seeks("8 scaling: segments", &label, backend.config(), points).await
}
