//! Damage in one topic while others serve (hot): three topics are written, the store
//! closes, one byte of the footer of a sealed WAL segment of one topic is flipped, and
//! the store reopens with all three.
//!
//! Checks: the store opens; the two intact topics serve every acknowledged record and
//! accept appends; the damaged topic is reported (`Corruption` naming the segment, when
//! opening the topic or reading it), never serving a bad record.

use std::path::Path;

use futures::StreamExt;
use tier_core::{ErrorKind, OffsetRange, StartPosition, TopicName};
use tier_router::{NewRecord, TieredStore};

use super::segment_files;
use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config},
    payload::{self, RecordId},
    rng::Rng,
    scenarios::temp_dir,
    verify::verify_topic,
};

/// The row's name.
pub const NAME: &str = "compound damaged-topic hot";

const DAMAGED: &str = "chaos-damaged";
const INTACT: [&str; 2] = ["chaos-intact-a", "chaos-intact-b"];
const PER_BATCH: u64 = 8;

fn tier(what: &str) -> impl FnOnce(tier_core::TierError) -> ChaosError + '_ {
    move |e| ChaosError::tier(what, e)
}

/// Appends batches to `topic` until its WAL has at least `segments` segment files;
/// returns the acknowledgements.
async fn fill(store: &TieredStore, topic: &str, segments: usize) -> Result<Vec<Ack>, ChaosError> {
    let handle = store.topic(topic).await.map_err(tier("opening a topic"))?;
    let dir = store.wal().config().data_dir.join(topic);
    let mut acks = Vec::new();
    let mut seq = 0;
    while segment_files(&dir).map_or(0, |f| f.len()) < segments {
        let records = (seq..seq + PER_BATCH)
            .map(|s| NewRecord::new(1, payload::encode(RecordId { writer: 0, seq: s })))
            .collect();
        let range = handle.append(records).await.map_err(tier("appending"))?;
        acks.push(Ack { range, writer: 0, first_seq: seq });
        seq += PER_BATCH;
    }
    Ok(acks)
}

/// Runs `rounds` damages, each on a fresh data directory.
pub async fn run(
    servers: &Servers,
    base: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        let dir = temp_dir(base, "damaged-")?;
        let tag = format!("damaged-{}-{round}", seed % 100_000);
        let config = store_config(Deployment::Hot, dir.path(), servers, &tag, &Profile::default()).await?;
        let names: Vec<TopicName> = std::iter::once(DAMAGED)
            .chain(INTACT)
            .map(TopicName::new)
            .collect::<Result<_, _>>()
            .map_err(tier("topic name"))?;
        let store =
            TieredStore::open_recovering(config.clone(), names.clone()).await.map_err(tier("opening"))?;
        fill(&store, DAMAGED, 3).await?;
        let mut intact_acks = Vec::new();
        for t in INTACT {
            intact_acks.push(fill(&store, t, 2).await?);
        }
        store.close().await;

        // One flipped byte in the footer (the last bytes) of a sealed segment.
        let files = segment_files(&config.hot.data_dir.join(DAMAGED))?;
        let Some(sealed) = files.first().filter(|_| files.len() > 1) else {
            return Err(ChaosError::Other("expected a sealed segment".into()));
        };
        let mut bytes = std::fs::read(sealed).map_err(|e| ChaosError::io("reading a sealed segment", e))?;
        let pos = bytes.len() - rng.between(1, 24) as usize;
        bytes[pos] ^= 0x5a;
        std::fs::write(sealed, &bytes).map_err(|e| ChaosError::io("damaging a sealed segment", e))?;
        r.iterations += 1;
        let file = sealed.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();

        let store = match TieredStore::open_recovering(config.clone(), names.clone()).await {
            Ok(store) => store,
            Err(e) => {
                r.fail(format!(
                    "round {round}: one damaged topic ({DAMAGED}, byte {pos} of {file}) keeps the store from \
                     opening, so the intact topics do not serve: {e}"
                ));
                continue;
            }
        };
        let checked = async {
            for (t, acks) in INTACT.iter().zip(&intact_acks) {
                let handle = match store.topic(*t).await {
                    Ok(h) => h,
                    Err(e) => {
                        r.fail(format!("round {round}: intact topic {t} does not open: {e}"));
                        continue;
                    }
                };
                let v = verify_topic(&handle, acks, 0, &[]).await?;
                let acked_before = r.acked;
                r.absorb(&format!("round {round}, {t}"), &v);
                r.acked = acked_before + v.acked;
                let end = acks.iter().map(|a| a.range.end).max().unwrap_or(0);
                match handle
                    .append(vec![NewRecord::new(1, payload::encode(RecordId { writer: 1, seq: 0 }))])
                    .await
                {
                    Ok(got) if got == OffsetRange::new(end, end + 1) => {}
                    Ok(got) => {
                        r.fail(format!("round {round}: an append to {t} got {got}, expected offset {end}"))
                    }
                    Err(e) => r.fail(format!("round {round}: appending to intact topic {t}: {e}")),
                }
            }
            match damaged_outcome(&store).await {
                Ok((detected, what)) => {
                    r.corruptions_detected += u64::from(detected);
                    r.notes.push(format!("round {round}: {DAMAGED} ({file} byte {pos} flipped): {what}"));
                }
                Err(what) => r.fail(format!("round {round}: {DAMAGED} ({file} byte {pos} flipped): {what}")),
            }
            Ok::<(), ChaosError>(())
        }
        .await;
        store.close().await;
        checked?;
    }
    r.notes.push(format!("seed {seed}"));
    Ok(r)
}

/// How the damaged topic answers: `Ok((true, _))` with the `Corruption` it reported
/// (opening it or reading it), `Ok((false, _))` when every record read back intact (the
/// flipped byte is not on the read path), `Err` when it served a bad record, ended early
/// or failed otherwise.
async fn damaged_outcome(store: &TieredStore) -> Result<(bool, String), String> {
    let topic = match store.topic(DAMAGED).await {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::Corruption => return Ok((true, format!("opening it: {e}"))),
        Err(e) => return Err(format!("opening it failed with a non-corruption error: {e}")),
    };
    let end = topic.high_watermark();
    let mut reader = match topic.reader(StartPosition::Offset(0)).await {
        Ok(reader) => reader,
        Err(e) if e.kind() == ErrorKind::Corruption => return Ok((true, format!("opening a reader: {e}"))),
        Err(e) => return Err(format!("opening a reader failed: {e}")),
    };
    let mut n = 0;
    while n < end {
        match reader.next().await {
            Some(Ok(record)) => {
                if payload::decode(&record.payload).is_err() {
                    return Err(format!("served a corrupt record at offset {}", record.offset));
                }
                n += 1;
            }
            Some(Err(e)) if e.kind() == ErrorKind::Corruption => {
                return Ok((true, format!("reading at {n}: {e}")));
            }
            Some(Err(e)) => return Err(format!("reading at {n} failed with a non-corruption error: {e}")),
            None => return Err(format!("the reader ended at {n} before {end} without an error")),
        }
    }
    // A footer flip the reads never touch (the index) is found by verification only.
    Ok((false, format!("all {end} records read intact (the flipped footer byte is not on the read path)")))
}
