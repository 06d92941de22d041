//! Scenario 4, object-store faults, on hot+cold over moto S3:
//!
//! 1. A fault-injecting store wrapper (`tier_cold::testing::FaultyStore`: every 4th call
//!    fails, 2 ms latency) under producers, the background exporter and aggressive WAL
//!    retention, with a reader of the whole topic running: exports retry, retention
//!    holds segments until they are exported, the reader gets clear errors or records
//!    (never a bad one), nothing is lost.
//! 2. Multipart uploads whose parts fail: the export fails, a retry stores the segment
//!    once.
//! 3. The moto server stopped for a while (it restarts empty, so this runs on a fresh
//!    store): exports fail, the WAL keeps every segment, and once S3 is back everything
//!    is exported and retention proceeds.
//!
//! Every phase ends by checking the bucket holds each offset in exactly one object
//! (no duplicate or overlapping segment objects) and reading everything back.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use tier_cold::{
    ColdTier,
    testing::{Faults, FaultyStore},
};
use tier_core::{ErrorKind, OffsetRange, StartPosition, TopicName};
use tier_router::{NewRecord, StoreConfig, TieredStore};

use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config},
    payload::{self, RecordId},
    scenarios::{inproc::Producers, temp_dir},
    verify::verify_topic,
};

const TOPIC: &str = "chaos-objstore";

fn tier(what: &str) -> impl FnOnce(tier_core::TierError) -> ChaosError + '_ {
    move |e| ChaosError::tier(what, e)
}

/// A store whose cold tier goes through a `FaultyStore` over the S3 bucket of `config`.
async fn open_faulty(
    config: &StoreConfig,
    faults: Faults,
    background: bool,
) -> Result<(TieredStore, Arc<FaultyStore>, Arc<dyn ObjectStore>), ChaosError> {
    let cold_cfg = config.cold.clone().ok_or_else(|| ChaosError::Other("no cold config".into()))?;
    let s3 = cold_cfg.build_store().map_err(tier("building the S3 store"))?;
    let faulty = Arc::new(FaultyStore::new(Arc::clone(&s3), faults));
    let cold = ColdTier::with_store(Arc::clone(&faulty) as Arc<dyn ObjectStore>, cold_cfg)
        .map_err(tier("opening cold"))?;
    let store = TieredStore::builder()
        .hot(config.hot.clone())
        .router(config.router.clone())
        .cold(Arc::new(cold))
        .topics([TopicName::new(TOPIC).map_err(tier("topic name"))?])
        .background(background)
        .open()
        .await
        .map_err(tier("opening the store"))?;
    Ok((store, faulty, s3))
}

/// Checks the bucket's segment objects of the topic cover disjoint, contiguous ranges
/// (time markers only beside their segments);
/// returns how many objects there are and counts overlaps as duplicates.
async fn check_objects(
    s3: &Arc<dyn ObjectStore>,
    r: &mut ScenarioResult,
    phase: &str,
) -> Result<usize, ChaosError> {
    let prefix = object_store::path::Path::from(TOPIC);
    let metas: Vec<_> = s3
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|e| ChaosError::Other(format!("listing the bucket: {e}")))?;
    let mut ranges: Vec<OffsetRange> = metas
        .iter()
        .filter_map(|m| m.location.filename().and_then(tier_cold::layout::parse_file_name))
        .collect();
    ranges.sort_by_key(|x| x.start);
    for pair in ranges.windows(2) {
        if pair[1].start < pair[0].end {
            r.duplicated += pair[0].end.min(pair[1].end) - pair[1].start;
            r.fail(format!("{phase}: objects {:?} and {:?} overlap", pair[0], pair[1]));
        } else if pair[1].start > pair[0].end {
            r.gaps += pair[1].start - pair[0].end;
            r.fail(format!("{phase}: no object holds {:?}", OffsetRange::new(pair[0].end, pair[1].start)));
        }
    }
    // Each segment may have one time marker (written after it); anything else is a stray.
    let markers: Vec<OffsetRange> = metas
        .iter()
        .filter_map(|m| m.location.filename().and_then(tier_cold::layout::parse_marker_name))
        .map(|(range, _)| range)
        .collect();
    for marker in &markers {
        if !ranges.contains(marker) {
            r.fail(format!("{phase}: a time marker for {marker:?} has no segment object"));
        }
    }
    // At most one topic marker (written before the topic's first offset was handed out).
    let topic_markers =
        metas.iter().filter(|m| m.location.filename() == Some(tier_cold::layout::TOPIC_MARKER)).count();
    if topic_markers > 1 {
        r.fail(format!("{phase}: {topic_markers} topic markers"));
    }
    // Each segment may have one successor pointer from its base (from 0 for the first),
    // written after it.
    let pointers: Vec<u64> = metas
        .iter()
        .filter_map(|m| m.location.filename()?.strip_suffix(tier_cold::layout::POINTER_SUFFIX)?.parse().ok())
        .collect();
    for at in &pointers {
        if *at != 0 && !ranges.iter().any(|r| r.start == *at) {
            r.fail(format!("{phase}: a successor pointer from {at} names no segment object"));
        }
    }
    let known = ranges.len() + markers.len() + topic_markers + pointers.len();
    if metas.len() != known {
        r.fail(format!(
            "{phase}: {} objects that are neither segments, time markers, successor pointers nor the topic marker",
            metas.len() - known
        ));
    }
    Ok(ranges.len())
}

/// Polls (with a deadline) until cold holds everything committed, exporting on demand.
async fn until_exported(store: &TieredStore, within: Duration) -> Result<bool, ChaosError> {
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    let deadline = Instant::now() + within;
    loop {
        let _ = store.export_now(TOPIC).await;
        let ranges = topic.ranges().await.map_err(tier("ranges"))?;
        if ranges.cold.is_some_and(|c| c.end >= ranges.committed) {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn verify_all(
    store: &TieredStore,
    acks: &[Ack],
    r: &mut ScenarioResult,
    phase: &str,
) -> Result<(), ChaosError> {
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    let v = verify_topic(&topic, acks, 0, &[]).await?;
    let acked_before = r.acked;
    r.absorb(phase, &v);
    r.acked = acked_before + v.acked;
    Ok(())
}

/// Runs the object-store scenario (phase 3 restarts moto, emptying every bucket).
pub async fn run(servers: &mut Servers, base: &Path, seed: u64) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new("objstore-faults hot+cold");
    let tag = |phase: &str| format!("objstore-{phase}-{}", seed % 100_000);

    // 1. Error rate and latency under load, with a reader running.
    let dir = temp_dir(base, "objstore-")?;
    let config =
        store_config(Deployment::HotCold, dir.path(), servers, &tag("rate"), &Profile::default()).await?;
    let faults = Faults { fail_every: Some(4), latency: Duration::from_millis(2), ..Faults::default() };
    // The faults start once the topic is open: an open that meets a cold failure fails
    // (the caller retries it), and which call fails depends on how many the open makes.
    let (store, faulty, s3) = open_faulty(&config, Faults::default(), true).await?;
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    faulty.set_faults(faults);
    let producers = Producers::start(&topic, 2);
    tokio::time::sleep(Duration::from_millis(1500)).await; // load duration, not a wait
    let reader_outcome = read_during_faults(&store).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let acks = producers.stop().await?;
    r.iterations += 1;
    r.notes.push(format!(
        "error rate: {} injected failures; reader under faults: {reader_outcome}",
        faulty.injected()
    ));
    if reader_outcome.starts_with("BAD") {
        r.fail(format!("reader under faults: {reader_outcome}"));
    }
    faulty.set_faults(Faults::default());
    if !until_exported(&store, Duration::from_secs(30)).await? {
        r.fail("error rate: exports did not catch up within 30 s once the faults stopped");
    }
    verify_all(&store, &acks, &mut r, "error rate").await?;
    let objects = check_objects(&s3, &mut r, "error rate").await?;
    r.notes.push(format!("error rate: {objects} segment objects, {} acked appends", acks.len()));
    store.close().await;

    // 2. Multipart uploads whose parts fail.
    multipart(servers, base, &tag("multipart"), &mut r).await?;

    // 3. moto stopped for a while.
    let dir = temp_dir(base, "objstore-down-")?;
    let config =
        store_config(Deployment::HotCold, dir.path(), servers, &tag("down"), &Profile::default()).await?;
    let (store, _faulty, s3) = open_faulty(&config, Faults::default(), true).await?;
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    let name = TopicName::new(TOPIC).map_err(tier("topic name"))?;
    // S3 goes away before the first export: moto restarts empty, so anything exported
    // before the outage would be gone for a reason that is not the store's.
    servers.s3.stop().await;
    let producers = Producers::start(&topic, 2);
    tokio::time::sleep(Duration::from_millis(1500)).await; // the outage
    let _ = store.run_retention_now(SystemTime::now()).await;
    let hot_start = store.wal().range(&name).await.map_err(tier("WAL range"))?.start;
    let cold_end_before = topic.ranges().await.map_err(tier("ranges"))?.cold.map_or(0, |c| c.end);
    servers.s3.restart().await?;
    let bucket = match &config.cold.as_ref().map(|c| c.backend.clone()) {
        Some(tier_cold::BackendConfig::S3 { bucket, .. }) => bucket.clone(),
        _ => return Err(ChaosError::Other("phase 3 needs an S3 bucket".into())),
    };
    servers.s3.create_bucket(&bucket).await?;
    let acks = producers.stop().await?;
    r.iterations += 1;
    r.notes.push(format!(
        "S3 down: after retention the WAL still starts at {hot_start}, cold ends at {cold_end_before}"
    ));
    if hot_start > cold_end_before {
        r.fail(format!("S3 down: retention deleted WAL segments below {hot_start} that cold does not hold"));
    }
    if !until_exported(&store, Duration::from_secs(30)).await? {
        r.fail("S3 down: exports did not complete within 30 s of S3's return");
    }
    // Retention may now delete every exported segment; the data must come from cold.
    store.run_retention_now(SystemTime::now()).await.map_err(tier("retention"))?;
    verify_all(&store, &acks, &mut r, "S3 down").await?;
    check_objects(&s3, &mut r, "S3 down").await?;
    store.close().await;
    Ok(r)
}

/// Reads the topic from the start while the faults are on: returns a description of the
/// outcome; one starting with `BAD` is a failure (a bad record or a corruption error).
async fn read_during_faults(store: &TieredStore) -> Result<String, ChaosError> {
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    let end = topic.high_watermark();
    let mut reader = match topic.reader(StartPosition::Earliest).await {
        Ok(reader) => reader,
        Err(e) if e.kind() == ErrorKind::Unavailable => return Ok(format!("clear error at open: {e}")),
        Err(e) => return Ok(format!("BAD error at open: {e}")),
    };
    let mut n = 0u64;
    while n < end {
        match reader.next().await {
            Some(Ok(record)) => {
                if payload::decode(&record.payload).is_err() {
                    return Ok(format!("BAD record at {}", record.offset));
                }
                n += 1;
            }
            Some(Err(e)) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::NotFound) => {
                return Ok(format!("{n} records, then a clear error: {:?}", e.kind()));
            }
            Some(Err(e)) => return Ok(format!("BAD error after {n} records: {e}")),
            None => return Ok(format!("BAD: the reader ended after {n} records")),
        }
    }
    Ok(format!("all {n} records read"))
}

/// Phase 2: a segment larger than the multipart threshold, exported while parts fail.
async fn multipart(
    servers: &Servers,
    base: &Path,
    tag: &str,
    r: &mut ScenarioResult,
) -> Result<(), ChaosError> {
    let dir = temp_dir(base, "objstore-mp-")?;
    let profile = Profile { segment_bytes: 6 << 20, ..Profile::default() };
    let mut config = store_config(Deployment::HotCold, dir.path(), servers, tag, &profile).await?;
    // One segment of 6 MiB, however slow the appends: an age rotation would cut it into
    // pieces under the multipart threshold, and no part would be uploaded to fail.
    config.hot.segment_age = Duration::from_secs(3600);
    if let Some(cold) = config.cold.as_mut() {
        cold.multipart_threshold = tier_cold::MIN_PART_SIZE;
        cold.part_size = tier_cold::MIN_PART_SIZE;
    }
    let faults = Faults { fail_parts_after: Some(1), ..Faults::default() };
    let (store, faulty, s3) = open_faulty(&config, faults, false).await?;
    let topic = store.topic(TOPIC).await.map_err(tier("topic"))?;
    let mut acks = Vec::new();
    let mut seq = 0;
    while topic.high_watermark() < 1500 {
        let records: Vec<NewRecord> = (seq..seq + 10)
            .map(|s| {
                NewRecord::new(1, payload::encode(RecordId { writer: 9, seq: s }))
                    .with_header("pad", vec![b'p'; 4000])
            })
            .collect();
        let range = topic.append(records).await.map_err(tier("appending"))?;
        acks.push(Ack { range, writer: 9, first_seq: seq });
        seq += 10;
    }
    r.iterations += 1;
    match store.export_now(TOPIC).await {
        Err(e) => {
            r.notes.push(format!("multipart with failing parts: export failed as it should ({:?})", e.kind()))
        }
        Ok(done) => r.fail(format!("multipart export with failing parts reported success: {done:?}")),
    }
    faulty.set_faults(Faults::default());
    match store.export_now(TOPIC).await {
        Ok(done) => r.notes.push(format!("multipart retry stored {} segment(s)", done.len())),
        Err(e) => r.fail(format!("multipart retry failed: {e}")),
    }
    let exported = store.export_now(TOPIC).await.map_err(tier("exporting again"))?;
    if !exported.is_empty() {
        r.fail(format!("a third export stored {exported:?} again"));
    }
    store.run_retention_now(SystemTime::now()).await.map_err(tier("retention"))?;
    verify_all(&store, &acks, r, "multipart").await?;
    check_objects(&s3, r, "multipart").await?;
    store.close().await;
    Ok(())
}
