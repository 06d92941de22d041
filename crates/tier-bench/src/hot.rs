//! Hot-tier workloads: append (1), full-topic read (2) and append scaling over many
//! topics (8a), each against a raw file baseline on the same bytes.

use std::{
    fs::File,
    io::{Read, Write},
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tier_core::{ReadLimit, RecordBatch, Tier, TierExt};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};

use crate::{
    Settings,
    report::Row,
    util::{self, SIZES, secs, size_label},
};

const APPEND: &str = "1 hot append";
const READ: &str = "2 hot read";
const SCALE: &str = "8 scaling: topics";

fn fsync_label(f: FsyncPolicy) -> String {
    match f {
        FsyncPolicy::Always => "always".to_owned(),
        FsyncPolicy::Never => "never".to_owned(),
        FsyncPolicy::Interval(_) => "interval".to_owned(),
        // `FsyncPolicy` is non-exhaustive; a policy added later is labelled as it prints.
        other => format!("{other:?}"),
    }
}

/// Workload 1: sequential appends of one producer, batches of 1 and 100, fsync always
/// and never; baseline: `write` of the same encoded batches to one file with the same
/// fsync cadence (`fdatasync` per batch for `always`).
pub(crate) async fn append(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Always] {
        for size in SIZES {
            for batch in [1usize, 100] {
                let payload = util::payload(size);
                let template = util::batch(&payload, batch, 0)?;
                let max_batches = (settings.append_bytes / (size * batch) as u64).max(1);
                // The first tierlog run sets the batch count (time budget); then raw and
                // tierlog alternate on that count and the fastest of each is kept.
                let (n, mut tier_secs) =
                    tier_append(dir, fsync, None, &template, max_batches, settings.case_budget).await?;
                let mut raw_secs = raw_append(dir, fsync, &template, n)?;
                let mut pool_secs = raw_append_on_pool(dir, fsync, &template, n).await?;
                let mut rotating_secs = raw_append_rotating(dir, fsync, &template, n)?;
                let mut mmap_secs = raw_append_mmap(dir, fsync, &template, n)?;
                // Under `never`, the same appends into segments larger than the whole run:
                // no rotation, so no seal (footer, mmap, background fsync) in the timing.
                let unrotated = fsync == FsyncPolicy::Never;
                let mut unrotated_secs = f64::INFINITY;
                for round in 0..settings.rounds {
                    if unrotated {
                        unrotated_secs = unrotated_secs.min(
                            tier_append(
                                dir,
                                fsync,
                                Some(UNROTATED_SEGMENT_BYTES),
                                &template,
                                n,
                                Duration::MAX,
                            )
                            .await?
                            .1,
                        );
                    }
                    if round == 0 {
                        continue;
                    }
                    tier_secs =
                        tier_secs.min(tier_append(dir, fsync, None, &template, n, Duration::MAX).await?.1);
                    raw_secs = raw_secs.min(raw_append(dir, fsync, &template, n)?);
                    pool_secs = pool_secs.min(raw_append_on_pool(dir, fsync, &template, n).await?);
                    rotating_secs = rotating_secs.min(raw_append_rotating(dir, fsync, &template, n)?);
                    mmap_secs = mmap_secs.min(raw_append_mmap(dir, fsync, &template, n)?);
                }
                let records = n * batch as u64;
                // 0.9x of the raw writes under `never` (the writer is single); 0.8x under `always`.
                let target = if unrotated { 0.9 } else { 0.8 };
                let unrotated_detail = if unrotated {
                    format!(
                        "; tierlog with no rotation in the run (segments larger than it) vs raw write: {:.2}x",
                        raw_secs / unrotated_secs.max(1e-9)
                    )
                } else {
                    String::new()
                };
                rows.push(
                    Row::new(APPEND, format!("{} x{batch} fsync={}", size_label(size), fsync_label(fsync)))
                        .throughput(records, records * size as u64, tier_secs, Some(raw_secs))
                        .target_at_least(target, &format!(">= {target}x raw write"))
                        .detail(format!(
                            "{n} batches, best of {}; vs the same raw writes each handed to tokio's blocking pool: \
                             {:.2}x; vs raw writes into {} MiB files, each fsynced by a thread once full: {:.2}x; \
                             raw memcpy into preallocated mmap'ed files vs raw write: {:.2}x{unrotated_detail}",
                            settings.rounds,
                            pool_secs / tier_secs.max(1e-9),
                            SEGMENT_BYTES >> 20,
                            rotating_secs / tier_secs.max(1e-9),
                            raw_secs / mmap_secs.max(1e-9),
                        )),
                );
            }
        }
    }
    Ok(rows)
}

/// Like [`raw_append`], but each write (and fdatasync) is one `spawn_blocking` task
/// awaited by the caller: the thread hand-offs tier-hot's writer makes, without its
/// bookkeeping.
async fn raw_append_on_pool(dir: &Path, fsync: FsyncPolicy, template: &RecordBatch, n: u64) -> Result<f64> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let bytes = template.to_bytes();
    let file = std::sync::Arc::new(File::create(case_dir.path().join("raw.log"))?);
    let always = fsync == FsyncPolicy::Always;
    let start = Instant::now();
    for _ in 0..n {
        let (file, bytes) = (file.clone(), bytes.clone());
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            (&*file).write_all(&bytes)?;
            if always {
                file.sync_data()?;
            }
            Ok(())
        })
        .await??;
    }
    Ok(secs(start.elapsed()))
}

/// Appends `template` re-based up to `max` times or until `budget` ran out, into a
/// fresh tier; returns the count and the seconds taken.
async fn tier_append(
    dir: &Path,
    fsync: FsyncPolicy,
    segment_bytes: Option<u64>,
    template: &RecordBatch,
    max: u64,
    budget: Duration,
) -> Result<(u64, f64)> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let mut config = HotConfig::new(case_dir.path().join("hot")).with_fsync(fsync);
    if let Some(bytes) = segment_bytes {
        config.segment_bytes = bytes;
    }
    let tier = HotTier::open(config).await?;
    let topic = util::topic("append")?;
    let per = u64::from(template.record_count());
    let start = Instant::now();
    let mut n = 0u64;
    while n < max && start.elapsed() < budget {
        tier.append(&topic, template.clone().with_base_offset(n * per)).await?;
        n += 1;
    }
    let took = secs(start.elapsed());
    tier.close().await;
    Ok((n, took))
}

/// Writes the encoded `template` `n` times to a fresh file, `fdatasync` after each under
/// `always`; returns the seconds taken.
pub(crate) fn raw_append(dir: &Path, fsync: FsyncPolicy, template: &RecordBatch, n: u64) -> Result<f64> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let bytes = template.to_bytes();
    let mut file = File::create(case_dir.path().join("raw.log"))?;
    let start = Instant::now();
    for _ in 0..n {
        file.write_all(&bytes)?;
        if fsync == FsyncPolicy::Always {
            file.sync_data()?;
        }
    }
    Ok(secs(start.elapsed()))
}

/// A segment size no workload-1 case fills (each writes at most `append_bytes`).
const UNROTATED_SEGMENT_BYTES: u64 = 4 << 30;

/// The hot tier's default segment size, for the rotating baselines.
const SEGMENT_BYTES: u64 = 64 << 20;

/// Like [`raw_append`], but into files of [`SEGMENT_BYTES`] like the WAL's segments,
/// each `fsync`ed by a thread of its own once full (the WAL's background seal, without
/// its footer): what segment rotation costs a raw writer.
fn raw_append_rotating(dir: &Path, fsync: FsyncPolicy, template: &RecordBatch, n: u64) -> Result<f64> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let bytes = template.to_bytes();
    let mut seals = Vec::new();
    let (mut file, mut files, mut written) = (File::create(case_dir.path().join("0.log"))?, 1u64, 0u64);
    let start = Instant::now();
    for _ in 0..n {
        if written + bytes.len() as u64 > SEGMENT_BYTES && written > 0 {
            let full =
                std::mem::replace(&mut file, File::create(case_dir.path().join(format!("{files}.log")))?);
            seals.push(std::thread::spawn(move || full.sync_all()));
            (files, written) = (files + 1, 0);
        }
        file.write_all(&bytes)?;
        written += bytes.len() as u64;
        if fsync == FsyncPolicy::Always {
            file.sync_data()?;
        }
    }
    let took = secs(start.elapsed());
    for seal in seals {
        seal.join().map_err(|_| anyhow::anyhow!("a seal thread panicked"))??;
    }
    Ok(took)
}

/// Like [`raw_append`], but each batch is copied into a file of [`SEGMENT_BYTES`]
/// preallocated with `fallocate` and mapped writable (`msync` of the batch's range after
/// each under `always`; a full file is unmapped, the next one mapped): how much of an
/// append the `write` syscall is, the ceiling of a memory-mapped append path.
fn raw_append_mmap(dir: &Path, fsync: FsyncPolicy, template: &RecordBatch, n: u64) -> Result<f64> {
    let case_dir = tempfile::tempdir_in(dir)?;
    let bytes = template.to_bytes();
    let len = bytes.len();
    anyhow::ensure!(len as u64 <= SEGMENT_BYTES, "a batch larger than a segment");
    let map = |i: u64| -> Result<memmap2::MmapMut> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(case_dir.path().join(format!("{i}.log")))?;
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, SEGMENT_BYTES)?;
        // SAFETY: the file is this function's own, in a fresh temporary directory; nothing
        // else maps, truncates or writes it while the map lives.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
        Ok(map)
    };
    let start = Instant::now();
    let (mut files, mut at) = (0u64, 0usize);
    let mut current = map(files)?;
    for _ in 0..n {
        if at + len > current.len() {
            files += 1;
            current = map(files)?;
            at = 0;
        }
        current[at..at + len].copy_from_slice(&bytes);
        if fsync == FsyncPolicy::Always {
            current.flush_range(at, len)?;
        }
        at += len;
    }
    Ok(secs(start.elapsed()))
}

/// Writes `total` payload bytes of `size`-byte records to `topic` in batches of 100
/// (fsync never), then seals the active segment. Returns the record count.
pub(crate) async fn fill(tier: &HotTier, topic: &str, size: usize, total: u64) -> Result<u64> {
    let topic = util::topic(topic)?;
    let payload = util::payload(size);
    let per_batch = 100usize;
    let template = util::batch(&payload, per_batch, 0)?;
    let batches = (total / (size * per_batch) as u64).max(1);
    for i in 0..batches {
        let base = i * per_batch as u64;
        // Timestamps must follow offsets for the seek workloads: rebuild when they matter.
        let batch = if i == 0 { template.clone() } else { util::batch(&payload, per_batch, base)? };
        tier.append(&topic, batch).await?;
    }
    tier.rotate(&topic).await?;
    Ok(batches * per_batch as u64)
}

async fn read_all(tier: &HotTier, topic: &str) -> Result<(u64, u64)> {
    let topic = util::topic(topic)?;
    let end = tier.range(&topic).await?.end;
    let (mut next, mut bytes) = (0u64, 0u64);
    while next < end {
        let records = tier.read(&topic, next, end, ReadLimit::default()).await?;
        anyhow::ensure!(!records.is_empty(), "hot read returned nothing at {next} before {end}");
        next += records.len() as u64;
        bytes += records.iter().map(|r| r.payload.len() as u64).sum::<u64>();
    }
    Ok((next, bytes))
}

/// The whole topic through `HotTier::read_batches` (4 MiB answers, as `Tier::read`'s
/// default limit): verified batches, no record built. Returns records and batch bytes.
async fn read_all_batches(tier: &HotTier, topic: &str) -> Result<(u64, u64)> {
    let topic = util::topic(topic)?;
    let end = tier.range(&topic).await?.end;
    let (mut next, mut bytes) = (0u64, 0u64);
    while next < end {
        let batches = tier.read_batches(&topic, next, end, ReadLimit::default().max_bytes).await?;
        let last = batches
            .last()
            .with_context(|| format!("hot batch read returned nothing at {next} before {end}"))?;
        anyhow::ensure!(
            batches[0].base_offset() == next,
            "batch read at {next} began at {}",
            batches[0].base_offset()
        );
        next = last.end_offset();
        bytes += batches.iter().map(|b| b.encoded_len() as u64).sum::<u64>();
    }
    Ok((next, bytes))
}

fn raw_read(dir: &Path) -> Result<Duration> {
    let start = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    for path in util::files_under(dir)? {
        let mut f = File::open(path)?;
        while f.read(&mut buf)? > 0 {}
    }
    Ok(start.elapsed())
}

/// Workload 2: read a whole topic from offset 0 through a freshly opened tier (so its
/// in-memory cache is empty), with the segment files in the page cache and evicted;
/// baseline: sequential 1 MiB `read`s of the same files in the same cache state.
pub(crate) async fn read(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for size in SIZES {
        let case_dir = tempfile::tempdir_in(dir)?;
        let hot_dir = case_dir.path().join("hot");
        let config = HotConfig::new(&hot_dir).with_fsync(FsyncPolicy::Never);
        let tier = HotTier::open(config.clone()).await?;
        let written = fill(&tier, "read", size, settings.read_bytes).await?;
        tier.close().await;
        drop(tier);
        for cached in [true, false] {
            let label = format!("{} {}", size_label(size), if cached { "page-cached" } else { "evicted" });
            let prepare = || -> Result<()> {
                if cached {
                    raw_read(&hot_dir)?;
                } else {
                    for f in util::files_under(&hot_dir)? {
                        util::evict(&f)?;
                    }
                }
                Ok(())
            };
            if let Err(e) = prepare() {
                rows.push(Row::new(READ, label).detail(format!("not measured: {e:#}")));
                continue;
            }
            let (mut tier_secs, mut batch_secs, mut raw_secs) = (f64::MAX, f64::MAX, f64::MAX);
            let (mut records, mut bytes, mut batch_bytes) = (0, 0, 0);
            for round in 0..settings.rounds {
                if round > 0 {
                    prepare()?;
                }
                let tier = HotTier::open(config.clone()).await?;
                let start = Instant::now();
                (records, bytes) = read_all(&tier, "read").await?;
                tier_secs = tier_secs.min(secs(start.elapsed()));
                tier.close().await;
                drop(tier);
                anyhow::ensure!(records == written, "read {records} records of {written}");
                prepare()?;
                let tier = HotTier::open(config.clone()).await?;
                let start = Instant::now();
                let batch_records;
                (batch_records, batch_bytes) = read_all_batches(&tier, "read").await?;
                batch_secs = batch_secs.min(secs(start.elapsed()));
                tier.close().await;
                drop(tier);
                anyhow::ensure!(
                    batch_records == written,
                    "read {batch_records} records in batches of {written}"
                );
                prepare()?;
                raw_secs = raw_secs.min(secs(raw_read(&hot_dir)?));
            }
            let files = format!("{} MiB of files, best of {}", dir_bytes(&hot_dir)? >> 20, settings.rounds);
            rows.push(
                Row::new(READ, format!("{label}, records"))
                    .throughput(records, bytes, tier_secs, Some(raw_secs))
                    .target_at_least(0.8, ">= 0.8x raw read")
                    .detail(format!("Tier::read (a Record per record, payload MB/s); {files}")),
            );
            rows.push(
                Row::new(READ, format!("{label}, batches"))
                    .throughput(records, batch_bytes, batch_secs, Some(raw_secs))
                    .target_at_least(0.8, ">= 0.8x raw read")
                    .detail(format!(
                        "HotTier::read_batches (verified batches, MB/s of batch bytes); {files}"
                    )),
            );
        }
    }
    Ok(rows)
}

fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for f in util::files_under(dir)? {
        total += std::fs::metadata(f)?.len();
    }
    Ok(total)
}

/// Workload 8a: the same number of 100 B records (batches of 100, fsync never) spread
/// over 1, 100 and 1000 topics, one sequential producer per topic, all concurrent; the
/// baseline is the single-topic run.
pub(crate) async fn scale_topics(settings: &Settings, dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let payload = util::payload(100);
    let template = util::batch(&payload, 100, 0)?;
    let total_batches = settings.scale_records / 100;
    let mut single = None;
    for topics in [1u64, 100, 1000] {
        let case_dir = tempfile::tempdir_in(dir)?;
        let mut config = HotConfig::new(case_dir.path().join("hot")).with_fsync(FsyncPolicy::Never);
        // Bounded per-topic memory with many topics.
        config.cache_bytes = 1 << 20;
        let tier = HotTier::open(config).await?;
        let per_topic = (total_batches / topics).max(2);
        // Creating a topic (directory, first segment file, directory fsyncs) is not
        // append throughput: every topic takes its first batch before the clock starts.
        let spawn_all = |from: u64, to: u64| {
            let mut tasks = Vec::new();
            for t in 0..topics {
                let tier = tier.clone();
                let template = template.clone();
                tasks.push(tokio::spawn(async move {
                    let topic = util::topic(&format!("t{t}"))?;
                    for i in from..to {
                        tier.append(&topic, template.clone().with_base_offset(i * 100)).await?;
                    }
                    Ok::<_, anyhow::Error>(())
                }));
            }
            tasks
        };
        for task in spawn_all(0, 1) {
            task.await??;
        }
        let start = Instant::now();
        for task in spawn_all(1, per_topic) {
            task.await??;
        }
        let tier_secs = secs(start.elapsed());
        tier.close().await;
        let records = (per_topic - 1) * topics * 100;
        let baseline = *single.get_or_insert(tier_secs / records as f64);
        rows.push(
            Row::new(SCALE, format!("append, {topics} topics, 100 B x100, fsync=never"))
                .throughput(records, records * 100, tier_secs, Some(baseline * records as f64))
                .detail(format!("baseline = the 1-topic run; {} timed batches per topic", per_topic - 1)),
        );
    }
    Ok(rows)
}
