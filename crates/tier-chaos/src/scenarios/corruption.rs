//! Scenario 5, corruption: bytes flipped in a sealed WAL segment and in a cold object,
//! a torn (truncated) tail and a flipped byte in the middle of the active segment.
//!
//! Checks: segment verification (`SealedSegment::verify`) reports a flipped sealed
//! segment; reads through the store fail with `Corruption` naming the file or object
//! (never serve a bad record); reopening truncates only a torn tail of the active
//! segment and never touches sealed segments; valid batches after a corrupted one in
//! the active segment are not silently dropped.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;
use futures::StreamExt;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{
    ErrorKind, Offset, OffsetRange, ReadLimit, StartPosition, TierExt, TopicName,
    segment::{SealedSegment, SegmentHeader},
};
use tier_hot::HotConfig;
use tier_router::{NewRecord, TieredStore};

use crate::{ChaosError, ScenarioResult, payload, scenarios::temp_dir};

const TOPIC: &str = "chaos-corrupt";
const PER_BATCH: u64 = 5;

struct Setup {
    hot: HotConfig,
    cold: ColdConfig,
    name: TopicName,
}

impl Setup {
    async fn open(&self) -> Result<TieredStore, tier_core::TierError> {
        TieredStore::builder()
            .hot(self.hot.clone())
            .cold(Arc::new(ColdTier::open(self.cold.clone())?))
            .topics([self.name.clone()])
            .background(false)
            .open()
            .await
    }

    fn topic_dir(&self) -> PathBuf {
        self.hot.data_dir.join(TOPIC)
    }
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> ChaosError + '_ {
    move |e| ChaosError::io(what, e)
}

fn tier(what: &str) -> impl FnOnce(tier_core::TierError) -> ChaosError + '_ {
    move |e| ChaosError::tier(what, e)
}

/// Segment files (`*.seg`) in `dir`, sorted by name (= by base offset).
fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, ChaosError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io("listing segment files"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    Ok(files)
}

/// XORs the byte at `pos` of `path` with `0x5a` (twice restores it).
fn flip(path: &Path, pos: usize) -> Result<(), ChaosError> {
    let mut bytes = std::fs::read(path).map_err(io("reading a file to corrupt"))?;
    if let Some(b) = bytes.get_mut(pos) {
        *b ^= 0x5a;
    }
    std::fs::write(path, bytes).map_err(io("writing a corrupted file"))
}

async fn append_batches(store: &TieredStore, batches: u64, seq: &mut u64) -> Result<Offset, ChaosError> {
    let topic = store.topic(TOPIC).await.map_err(tier("opening the topic"))?;
    let mut end = 0;
    for _ in 0..batches {
        let records = (*seq..*seq + PER_BATCH)
            .map(|s| NewRecord::new(1, payload::encode(payload::RecordId { writer: 0, seq: s })))
            .collect();
        end = topic.append(records).await.map_err(tier("appending"))?.end;
        *seq += PER_BATCH;
    }
    Ok(end)
}

/// Reads `[0, hwm)` through the store; `Ok(n)` when all `n` records were served intact,
/// `Err(message)` with the first error (a bad payload served is reported as such).
async fn read_all(store: &TieredStore) -> Result<Result<u64, String>, ChaosError> {
    let topic = match store.topic(TOPIC).await {
        Ok(topic) => topic,
        // Kept aside as damaged at open (the other topics serve): the error names the file.
        Err(e) if e.kind() == ErrorKind::Corruption => return Ok(Err(e.to_string())),
        Err(e) => return Err(tier("opening the topic")(e)),
    };
    let end = topic.high_watermark();
    let mut reader = topic.reader(StartPosition::Offset(0)).await.map_err(tier("opening a reader"))?;
    let mut n = 0;
    while n < end {
        match reader.next().await {
            Some(Ok(record)) => {
                if payload::decode(&record.payload).is_err() {
                    return Ok(Err(format!("SERVED A CORRUPT RECORD at offset {}", record.offset)));
                }
                n += 1;
            }
            Some(Err(e)) if e.kind() == ErrorKind::Corruption => return Ok(Err(e.to_string())),
            Some(Err(e)) => return Ok(Err(format!("non-corruption error: {e}"))),
            None => return Ok(Err("reader ended early".into())),
        }
    }
    Ok(Ok(n))
}

/// Runs the corruption scenario (hot + cold in a local directory) under `base`.
pub async fn run(base: &Path) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new("corruption hot+cold");
    let dir = temp_dir(base, "corrupt-")?;
    let mut hot = HotConfig::new(dir.path().join("hot"));
    hot.segment_bytes = 4 << 10;
    hot.index_interval_bytes = 512;
    let setup = Setup {
        hot,
        cold: ColdConfig::local(dir.path().join("cold")),
        name: TopicName::new(TOPIC).map_err(tier("topic name"))?,
    };
    let mut seq = 0;
    let store = setup.open().await.map_err(tier("opening the store"))?;
    append_batches(&store, 200, &mut seq).await?;
    store.export_now(TOPIC).await.map_err(tier("exporting"))?;
    let acked_end = append_batches(&store, 6, &mut seq).await?;
    store.close().await;
    r.acked = acked_end;

    let files = segment_files(&setup.topic_dir())?;
    let [.., sealed, active] = files.as_slice() else {
        return Err(ChaosError::Other("expected several WAL segments".into()));
    };
    let sealed_name = file_name(sealed);

    // 1. A flipped byte in a sealed WAL segment.
    r.iterations += 1;
    let len = std::fs::metadata(sealed).map_err(io("stat"))?.len();
    flip(sealed, len as usize / 3)?;
    let bytes = Bytes::from(std::fs::read(sealed).map_err(io("reading the sealed segment"))?);
    match SealedSegment::open(bytes).and_then(|s| s.verify()) {
        Err(e) => {
            r.corruptions_detected += 1;
            r.notes.push(format!("verify {sealed_name}: {e}"));
        }
        Ok(()) => r.fail(format!("SealedSegment::verify accepted {sealed_name} with a flipped byte")),
    }
    match setup.open().await {
        Err(e) if e.kind() == ErrorKind::Corruption && e.to_string().contains(&sealed_name) => {
            r.corruptions_detected += 1;
            r.notes.push(format!("open refused: {e}"));
        }
        Err(e) => r.fail(format!("opening with a flipped sealed segment: unexpected error {e}")),
        Ok(store) => {
            match read_all(&store).await? {
                Err(msg) if msg.contains(&sealed_name) && !msg.starts_with("SERVED") => {
                    r.corruptions_detected += 1;
                    r.notes.push(format!("WAL read: {msg}"));
                }
                Err(msg) => {
                    r.fail(format!("reading a flipped sealed WAL segment: {msg} (should name {sealed_name})"))
                }
                Ok(n) => {
                    r.fail(format!("read {n} records through a flipped sealed WAL segment without an error"))
                }
            }
            store.close().await;
        }
    }
    let len_after = std::fs::metadata(sealed).map_err(io("stat"))?.len();
    if len_after != len {
        r.fail(format!("reopening changed sealed {sealed_name} from {len} to {len_after} bytes"));
    }
    flip(sealed, len as usize / 3)?;

    // 2. A flipped byte in a cold object.
    r.iterations += 1;
    check_cold_flip(&setup, dir.path(), &mut r).await?;

    // 3a. A torn write: half a batch of garbage after the last (acknowledged) batch.
    r.iterations += 1;
    let active_len = std::fs::metadata(active).map_err(io("stat"))?.len();
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(active)
            .map_err(io("opening the active segment"))?;
        file.write_all(&[0x00, 0x00, 0x00, 0x2a, 0x17, 0x99, 0x01]).map_err(io("writing a torn tail"))?;
    }
    let store = setup.open().await.map_err(tier("reopening after a torn write"))?;
    let hot_end = store.wal().range(&setup.name).await.map_err(tier("WAL range"))?.end;
    if hot_end != acked_end {
        r.fail(format!("after a torn write the WAL ends at {hot_end}, expected {acked_end}"));
    }
    let len_now = std::fs::metadata(active).map_err(io("stat"))?.len();
    if len_now != active_len {
        r.fail(format!(
            "recovery left the active segment at {len_now} bytes, expected {active_len} (torn bytes removed)"
        ));
    }
    match read_all(&store).await? {
        Ok(n) if n == acked_end => {}
        Ok(n) => r.fail(format!("read {n} records after the torn write, expected {acked_end}")),
        Err(msg) => r.fail(format!("reading after the torn write: {msg}")),
    }
    let mut resumed = append_batches(&store, 2, &mut seq).await;
    store.close().await;
    match &resumed {
        Ok(end) if *end == acked_end + 2 * PER_BATCH => {}
        Ok(end) => r.fail(format!(
            "appends after the torn write ended at {end}, expected {}",
            acked_end + 2 * PER_BATCH
        )),
        Err(e) => r.fail(format!("appending after the torn write: {e}")),
    }

    // 3b. Media damage at the tail: the last acknowledged batch loses its last 7 bytes.
    // Recovery truncates it (the WAL was its only copy: those records are lost and must
    // be reported), and the topic must keep accepting appends.
    r.iterations += 1;
    let before = resumed.as_ref().map_or(acked_end, |e| *e);
    let active_len = std::fs::metadata(active).map_err(io("stat"))?.len();
    let file =
        std::fs::OpenOptions::new().write(true).open(active).map_err(io("opening the active segment"))?;
    file.set_len(active_len - 7).map_err(io("truncating the active segment"))?;
    drop(file);
    let store = setup.open().await.map_err(tier("reopening after a truncated batch"))?;
    let report = store.recover_topic(TOPIC).await.map_err(tier("recovery report"))?;
    // What the WAL held when opened: recovery then records the lost offsets as a gap
    // in the WAL, which continues at the checkpoint.
    let hot_end = report.hot.end;
    if hot_end != before - PER_BATCH {
        r.fail(format!(
            "after a truncated last batch the WAL ends at {hot_end}, expected {}",
            before - PER_BATCH
        ));
    }
    if report.lost != [OffsetRange::new(before - PER_BATCH, before)] || report.next_offset != before {
        r.fail(format!(
            "after a truncated last batch recovery reported lost {:?} and next offset {}, expected [{}..{before}] \
             and {before}",
            report.lost,
            report.next_offset,
            before - PER_BATCH
        ));
    }
    r.notes.push(format!(
        "truncated acknowledged batch: recovery reported lost {:?}, next offset {}",
        report.lost, report.next_offset
    ));
    // Two batches, so that step 4 finds a first batch with an intact one after it.
    resumed = append_batches(&store, 2, &mut seq).await;
    store.close().await;
    if let Err(e) = &resumed {
        r.fail(format!(
            "after recovery truncated an acknowledged batch (WAL end {hot_end}, next offset {}), the topic \
             refuses every append: {e}",
            report.next_offset
        ));
    }
    let resumed = resumed.unwrap_or(hot_end);
    let sealed_len = std::fs::metadata(sealed).map_err(io("stat"))?.len();
    if sealed_len != len {
        r.fail(format!("tail recovery changed sealed {sealed_name} ({len} -> {sealed_len} bytes)"));
    }

    // 4. A flipped byte in the first batch of the active segment, valid batches after it.
    // Recovery in 3b sealed the damaged segment and recorded the gap: the active segment
    // is now the newest file, starting at the checkpoint.
    r.iterations += 1;
    let files = segment_files(&setup.topic_dir())?;
    let Some(active) = files.last() else {
        return Err(ChaosError::Other("expected an active WAL segment".into()));
    };
    let active_bytes = std::fs::read(active).map_err(io("reading the active segment"))?;
    let (_, header_len) = SegmentHeader::decode(&active_bytes)
        .map_err(|e| ChaosError::Other(format!("active segment header: {e}")))?;
    let active_base: Offset = file_name(active)
        .trim_end_matches(".seg")
        .parse()
        .map_err(|_| ChaosError::Other(format!("unexpected WAL file name {}", active.display())))?;
    flip(active, header_len + 24)?;
    match setup.open().await {
        Err(e) if e.kind() == ErrorKind::Corruption => {
            r.corruptions_detected += 1;
            r.notes.push(format!("mid-active-segment flip refused at open: {e}"));
        }
        Err(e) => r.fail(format!("opening after a mid-active-segment flip: unexpected error {e}")),
        Ok(store)
            if store
                .failed_topics()
                .iter()
                .any(|(t, e)| *t == setup.name && e.kind() == ErrorKind::Corruption) =>
        {
            // The damaged topic was kept aside at open (one damaged topic never blocks the
            // others): refused, naming the file.
            let (_, e) =
                store.failed_topics().into_iter().find(|(t, _)| *t == setup.name).expect("just found");
            store.close().await;
            if e.to_string().contains(&file_name(active)) {
                r.corruptions_detected += 1;
                r.notes.push(format!("mid-active-segment flip refused at open (topic kept aside): {e}"));
            } else {
                r.fail(format!(
                    "a mid-active-segment flip was refused without naming {}: {e}",
                    file_name(active)
                ));
            }
        }
        Ok(store) => {
            let end = store.wal().range(&setup.name).await.map_err(tier("WAL range"))?.end;
            let read = read_all(&store).await?;
            store.close().await;
            // The flipped batch itself is unreadable; the ones after it are intact.
            let intact_after = resumed.saturating_sub(active_base + PER_BATCH);
            if end < resumed && intact_after > 0 && end <= active_base {
                r.lost += intact_after;
                r.fail(format!(
                    "a flipped byte in the first batch of the active segment ({}) made recovery truncate \
                     the intact batches after it: the WAL now ends at {end}; {intact_after} acknowledged \
                     records in valid batches were dropped (only a torn tail may be truncated)",
                    file_name(active),
                ));
            } else {
                match read {
                    Err(msg) if msg.contains(&file_name(active)) && !msg.starts_with("SERVED") => {
                        r.corruptions_detected += 1;
                        r.notes.push(format!("mid-active-segment flip kept, reported at read: {msg}"));
                    }
                    Err(msg) => r.fail(format!("reading a mid-active-segment flip: {msg}")),
                    Ok(n) => {
                        r.fail(format!("read {n} records through a flipped active segment without an error"))
                    }
                }
            }
        }
    }
    Ok(r)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

async fn check_cold_flip(setup: &Setup, dir: &Path, r: &mut ScenarioResult) -> Result<(), ChaosError> {
    let objects = segment_files(&dir.join("cold").join(TOPIC))?;
    let Some(object) = objects.get(1) else {
        return Err(ChaosError::Other("expected cold objects".into()));
    };
    let name = file_name(object);
    let range = tier_cold::layout::parse_file_name(&name)
        .ok_or_else(|| ChaosError::Other(format!("unexpected cold object name {name}")))?;
    let len = std::fs::metadata(object).map_err(io("stat"))?.len();
    flip(object, len as usize / 3)?;
    let cold = ColdTier::open(setup.cold.clone()).map_err(tier("opening cold"))?;
    match cold.read(&setup.name, range.start, range.end, ReadLimit::unbounded()).await {
        Err(e) if e.kind() == ErrorKind::Corruption && e.to_string().contains(&name) => {
            r.corruptions_detected += 1;
            r.notes.push(format!("cold read: {e}"));
        }
        Err(e) => r.fail(format!("reading a flipped cold object: {e} (expected Corruption naming {name})")),
        Ok(records) => {
            r.fail(format!("read {} records of a flipped cold object {name} without an error", records.len()))
        }
    }
    flip(object, len as usize / 3)
}
