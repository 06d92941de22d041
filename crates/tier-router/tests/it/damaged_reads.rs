//! Reads across damaged bytes: the record and batch readers
//! never fail for damage in bytes they do not need (cold's read-ahead past the hand-off
//! to the WAL), and a corrupt WAL batch whose offsets cold or warm also holds is served
//! from that tier, the intact records before it from the WAL. Hot+cold on a local
//! directory and on moto S3, hot+warm on Valkey; the cold tier as itself (its own
//! read-ahead) and behind a wrapper that keeps `ColdBackend`'s default `records_from` /
//! `record_batches_from`.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use common::{ColdOn, Deployment, Tiers, append_range, check, r};
use futures::StreamExt;
use tier_core::TierExt;
use tier_core::segment::SealedSegment;
use tier_core::{ErrorKind, Offset, OffsetRange, Record, StartPosition, Tier, TierError, TopicName};
use tier_router::{ColdBackend, PagedCold, Source, TieredStore, Topic};
use tier_testkit::faults::Op;
use tier_testkit::{FaultyTier, MemoryTier};

const TOPIC: &str = "damaged";
const WAIT: Duration = Duration::from_secs(20);

/// Flips one byte inside the records of the batch starting at `base` in the sealed
/// segment file at `path`, so that the batch's CRC fails (header, index and trailer
/// stay intact).
/// Flips a bit in the `base_offset` field of the batch starting at `base` (a field the
/// batch's CRC does not cover: the damage shows as a batch that does not continue the
/// segment).
fn damage_base_offset(path: &Path, base: Offset) {
    let mut bytes = std::fs::read(path).unwrap();
    let segment = SealedSegment::open(Bytes::from(bytes.clone())).unwrap();
    let (position, _) = segment.batches().map(Result::unwrap).find(|(_, b)| b.base_offset() == base).unwrap();
    bytes[usize::try_from(position).unwrap() + 4] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

fn damage_batch(path: &Path, base: Offset) {
    let mut bytes = std::fs::read(path).unwrap();
    let segment = SealedSegment::open(Bytes::from(bytes.clone())).unwrap();
    let (position, batch) =
        segment.batches().map(Result::unwrap).find(|(_, b)| b.base_offset() == base).unwrap();
    let at = usize::try_from(position).unwrap() + batch.encoded_len() - 3;
    bytes[at] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

/// The offsets each source served, in runs, after checking every record's content and
/// that the offsets are dense from `from` (each delivered exactly once).
fn runs(from: Offset, records: &[(Source, Record)]) -> Vec<(Source, OffsetRange)> {
    let mut out: Vec<(Source, OffsetRange)> = Vec::new();
    for (i, (source, record)) in records.iter().enumerate() {
        assert_eq!(record.offset, from + i as u64, "offsets are dense, each delivered once");
        check(record);
        match out.last_mut() {
            Some((s, run)) if s == source && run.end == record.offset => run.end += 1,
            _ => out.push((*source, r(record.offset, record.offset + 1))),
        }
    }
    out
}

/// The record reader's records from `from` below `until`, or the error that ended it
/// with the records before it.
async fn read_records(
    topic: &Topic,
    from: Offset,
    until: Offset,
) -> (Vec<(Source, Record)>, Option<TierError>) {
    let mut stream = topic.reader_with_source(StartPosition::Offset(from)).await.unwrap();
    let mut out = Vec::new();
    while out.last().map_or(from, |(_, r): &(Source, Record)| r.offset + 1) < until {
        match tokio::time::timeout(WAIT, stream.next()).await.expect("the reader yields").expect("no end") {
            Ok(item) => out.push(item),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// The batch reader's records from `from` below `until` (each item's records from its
/// `from`), or the error that ended it with the records before it.
async fn read_batches(
    topic: &Topic,
    from: Offset,
    until: Offset,
) -> (Vec<(Source, Record)>, Option<TierError>) {
    let mut stream = topic.batch_reader(StartPosition::Offset(from)).await.unwrap();
    let mut out = Vec::new();
    let mut next = from;
    while next < until {
        match tokio::time::timeout(WAIT, stream.next()).await.expect("the reader yields").expect("no end") {
            Ok(item) => {
                assert_eq!(item.from, next, "each item continues where the previous one ended");
                next = item.batch.end_offset();
                out.extend(item.records().map(|r| (item.source, r)));
            }
            Err(e) => return (out, Some(e)),
        }
    }
    out.retain(|(_, r)| r.offset < until);
    (out, None)
}

/// Both readers from `from` deliver every record below `until` exactly once, served in
/// the runs `want`.
async fn both_readers_serve(topic: &Topic, from: Offset, until: Offset, want: &[(Source, OffsetRange)]) {
    let (records, err) = read_records(topic, from, until).await;
    assert!(err.is_none(), "record reader from {from}: {err:?} after {} records", records.len());
    assert_eq!(runs(from, &records), want, "record reader from {from}");
    let (records, err) = read_batches(topic, from, until).await;
    assert!(err.is_none(), "batch reader from {from}: {err:?} after {} records", records.len());
    assert_eq!(runs(from, &records), want, "batch reader from {from}");
}

/// Cold holds [0, 800) as one object, exported from a scratch WAL with one byte of its
/// batch [600, 610) damaged; the store's WAL holds [500, 1000) (its segment [0, 500)
/// deleted by retention, as cold holds it), so readers hand off from cold to the WAL at
/// 500 and never need cold's damaged bytes.
async fn damage_past_the_hand_off(
    cold_on: ColdOn,
    default_streams: bool,
) -> (Deployment, TieredStore, Topic) {
    let mut d = Deployment::new(Tiers::HotCold, cold_on).await;
    if default_streams {
        let cold = d.cold.take().unwrap();
        d.cold = Some(Arc::new(PagedCold(cold)));
    }
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 500, 10).await;
    store.wal().rotate(&name).await.unwrap().unwrap();
    append_range(&topic, 500, 1000, 10).await;

    let scratch = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let scratch_store = scratch.open(&[TOPIC]).await;
    append_range(&scratch_store.topic(TOPIC).await.unwrap(), 0, 800, 10).await;
    let segment = scratch_store.wal().rotate(&name).await.unwrap().unwrap();
    damage_batch(&segment.path, 600);
    let cold = store.cold().unwrap();
    assert_eq!(cold.store_segment(&name, &segment.path).await.unwrap(), r(0, 800));
    scratch_store.close().await;

    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 500)]);
    let ranges = topic.ranges().await.unwrap();
    assert_eq!((ranges.hot, ranges.cold, ranges.committed), (r(500, 1000), Some(r(0, 800)), 1000));
    (d, store, topic)
}

async fn read_ahead_past_the_hand_off(cold_on: ColdOn, default_streams: bool) {
    let (_d, store, topic) = damage_past_the_hand_off(cold_on, default_streams).await;
    both_readers_serve(&topic, 499, 1000, &[(Source::Cold, r(499, 500)), (Source::Hot, r(500, 1000))]).await;
    both_readers_serve(&topic, 0, 1000, &[(Source::Cold, r(0, 500)), (Source::Hot, r(500, 1000))]).await;
    store.close().await;
}

#[tokio::test]
async fn local_cold_read_ahead_past_the_hand_off_never_fails_a_read() {
    read_ahead_past_the_hand_off(ColdOn::Local, false).await;
}

#[tokio::test]
async fn s3_cold_read_ahead_past_the_hand_off_never_fails_a_read() {
    read_ahead_past_the_hand_off(ColdOn::S3, false).await;
}

#[tokio::test]
async fn default_cold_streams_past_the_hand_off_never_fail_a_read() {
    read_ahead_past_the_hand_off(ColdOn::Local, true).await;
}

/// [0, 500) in a sealed WAL segment (exported to cold when there is one), [500, 700) in
/// the active segment; then, with the store closed, one byte of the sealed batch
/// [200, 210) damaged. Returns the reopened store.
async fn damaged_wal_batch(d: &Deployment) -> (TieredStore, Topic) {
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 500, 10).await;
    let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
    if d.tiers.cold() {
        let exported: Vec<_> = store.export_now(TOPIC).await.unwrap().iter().map(|e| e.range).collect();
        assert_eq!(exported, vec![r(0, 500)]);
    }
    append_range(&topic, 500, 700, 10).await;
    store.close().await;
    damage_batch(&sealed.path, 200);
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    assert_eq!(topic.ranges().await.unwrap().hot, r(0, 700));
    (store, topic)
}

/// Both readers from 0 over the WAL's damaged batch [200, 210): the WAL's intact records
/// before it, then cold from 200 (one read, up to cold's end 500), then the WAL again.
#[tokio::test]
async fn a_corrupt_wal_batch_is_served_from_cold() {
    let d = Deployment::new(Tiers::HotCold, ColdOn::Local).await;
    let (store, topic) = damaged_wal_batch(&d).await;
    let want = [(Source::Hot, r(0, 200)), (Source::Cold, r(200, 500)), (Source::Hot, r(500, 700))];
    both_readers_serve(&topic, 0, 700, &want).await;
    // From inside the damaged batch: cold at once.
    both_readers_serve(&topic, 205, 700, &[(Source::Cold, r(205, 500)), (Source::Hot, r(500, 700))]).await;
    store.close().await;
}

/// Hot+warm (Valkey): warm holds every batch, so it serves from the damaged batch on, up
/// to the end of the WAL's slice (the commit point).
#[tokio::test]
async fn a_corrupt_wal_batch_is_served_from_warm() {
    let d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let (store, topic) = damaged_wal_batch(&d).await;
    assert_eq!(topic.ranges().await.unwrap().warm, Some(r(0, 700)));
    both_readers_serve(&topic, 0, 700, &[(Source::Hot, r(0, 200)), (Source::Warm, r(200, 700))]).await;
    store.close().await;
}

/// Reads of 4 records: cold's read from 200 takes its whole batch [200, 210) (batches are
/// never split), then the WAL is asked again at 210 — past the damaged batch — and serves
/// from there.
#[tokio::test]
async fn a_corrupt_wal_batch_longer_than_a_read_is_replaced_until_it_ends() {
    let mut d = Deployment::new(Tiers::HotCold, ColdOn::Local).await;
    d.router.read_batch_records = 4;
    let (store, topic) = damaged_wal_batch(&d).await;
    let (records, err) = read_records(&topic, 0, 700).await;
    assert!(err.is_none(), "{err:?} after {} records", records.len());
    assert_eq!(
        runs(0, &records),
        vec![(Source::Hot, r(0, 200)), (Source::Cold, r(200, 210)), (Source::Hot, r(210, 700))]
    );
    store.close().await;
}

/// Hot only: both readers deliver the WAL's intact records before the damaged batch,
/// then end with `Corruption`.
#[tokio::test]
async fn a_corrupt_wal_batch_no_other_tier_holds_ends_the_read_after_the_intact_records() {
    let d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let (store, topic) = damaged_wal_batch(&d).await;
    for (reader, (records, err)) in
        [("record", read_records(&topic, 0, 700).await), ("batch", read_batches(&topic, 0, 700).await)]
    {
        assert_eq!(runs(0, &records), vec![(Source::Hot, r(0, 200))], "{reader} reader");
        let err = err.unwrap_or_else(|| panic!("{reader} reader: no error"));
        assert_eq!(err.kind(), ErrorKind::Corruption, "{reader} reader: {err}");
    }
    // A read starting in the damaged batch fails at once; one after it is served.
    let (records, err) = read_records(&topic, 205, 700).await;
    assert!(records.is_empty() && err.is_some_and(|e| e.kind() == ErrorKind::Corruption));
    both_readers_serve(&topic, 210, 700, &[(Source::Hot, r(210, 700))]).await;
    store.close().await;
}

/// Hot+warm, warm down: the WAL's batch [200, 210) is damaged and warm, which holds it
/// intact, cannot be asked. Both readers deliver [0, 200) and then end with `Unavailable`
/// (retry later), not `Corruption` (which says no intact copy exists) — sim seed 70005541.
/// Once warm answers, the read from 200 is served from it.
#[tokio::test]
async fn a_corrupt_wal_batch_with_warm_down_is_unavailable_not_corrupt() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    let (store, topic) = damaged_wal_batch(&d).await;
    warm.target(&[Op::Range, Op::Read]);
    warm.fail_fraction(1.0);
    for (reader, (records, err)) in
        [("record", read_records(&topic, 0, 700).await), ("batch", read_batches(&topic, 0, 700).await)]
    {
        assert_eq!(runs(0, &records), vec![(Source::Hot, r(0, 200))], "{reader} reader");
        let err = err.unwrap_or_else(|| panic!("{reader} reader: no error"));
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{reader} reader: {err}");
    }
    warm.clear();
    both_readers_serve(&topic, 200, 700, &[(Source::Warm, r(200, 700))]).await;
    store.close().await;
}

/// Where the byte flipped in a cold object.
#[derive(Clone, Copy, Debug)]
enum ColdDamage {
    /// Inside the batch [150, 160): its CRC fails, the rest of the object is intact.
    Batch,
    /// In the trailer: the object's metadata cannot be read, none of its records can.
    Trailer,
}

impl ColdDamage {
    /// The first offset of the object [100, 200) no read can serve.
    fn first_lost(self) -> Offset {
        match self {
            ColdDamage::Batch => 150,
            ColdDamage::Trailer => 100,
        }
    }
}

/// The file of the local cold tier's object holding `range`.
fn cold_object(root: &Path, range: OffsetRange) -> std::path::PathBuf {
    let name = format!("{:020}-{:020}.seg", range.start, range.end - 1);
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == name.as_str()) {
                return path;
            }
        }
    }
    panic!("no cold object {name} under {}", root.display());
}

/// Cold holds [0, 100), [100, 200) and [200, 300) as three objects, the WAL only
/// [300, 350) (retention deleted the rest, as cold holds it), and warm — when `warm`
/// keeps from `warm_from` — a `MemoryTier` holding [warm_from, 350), behind a `FaultyTier`
/// (no fault until a test sets one; returned). Then, with the store
/// closed, one byte of the object [100, 200) flips (`damage`), and the store opens again
/// with a fresh cold tier (no cached metadata), as itself or behind [`Defaults`].
async fn damaged_cold_object(
    default_streams: bool,
    damage: ColdDamage,
    warm_from: Option<Offset>,
) -> (Deployment, TieredStore, Topic, Arc<FaultyTier<MemoryTier>>) {
    let mut d = Deployment::new(Tiers::HotCold, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    if warm_from.is_some() {
        d.warm = Some(warm.clone());
    }
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    for base in [0, 100, 200] {
        append_range(&topic, base, base + 100, 10).await;
        store.wal().rotate(&name).await.unwrap().unwrap();
    }
    let exported: Vec<_> = store.export_now(TOPIC).await.unwrap().iter().map(|e| e.range).collect();
    assert_eq!(exported, vec![r(0, 100), r(100, 200), r(200, 300)]);
    append_range(&topic, 300, 350, 10).await;
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 100), r(100, 200), r(200, 300)]);
    if let Some(from) = warm_from {
        warm.inner().trim_before(&name, from);
    }
    store.close().await;

    let root = d.dir.path().join("cold");
    let object = cold_object(&root, r(100, 200));
    match damage {
        ColdDamage::Batch => damage_batch(&object, 150),
        ColdDamage::Trailer => {
            let mut bytes = std::fs::read(&object).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0x5a;
            std::fs::write(&object, bytes).unwrap();
        }
    }
    let cold: Arc<dyn ColdBackend> =
        Arc::new(tier_cold::ColdTier::open(tier_cold::ColdConfig::local(root)).unwrap());
    d.cold = Some(if default_streams { Arc::new(PagedCold(cold)) } else { cold });
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let ranges = topic.ranges().await.unwrap();
    assert_eq!((ranges.hot, ranges.cold, ranges.committed), (r(300, 350), Some(r(0, 300)), 350));
    (d, store, topic, warm)
}

/// No other tier holds the damaged object's offsets: both readers from 0 deliver the
/// intact records before the damage (the whole object [0, 100), and with a damaged batch
/// the object's batches before it), then fail with `Corruption` naming the damaged
/// object; a read starting in the damage fails the same way at once; a read from after
/// the object is served (cold, then the WAL).
async fn a_damaged_cold_object_no_other_tier_holds(default_streams: bool, damage: ColdDamage) {
    let (_d, store, topic, _) = damaged_cold_object(default_streams, damage, None).await;
    let lost = damage.first_lost();
    let object = "00000000000000000100-00000000000000000199.seg";
    for from in [0, 99, lost] {
        for (reader, (records, err)) in [
            ("record", read_records(&topic, from, 350).await),
            ("batch", read_batches(&topic, from, 350).await),
        ] {
            let want = if from < lost { vec![(Source::Cold, r(from, lost))] } else { Vec::new() };
            assert_eq!(runs(from, &records), want, "{reader} reader from {from}, {damage:?}");
            let err = err.unwrap_or_else(|| panic!("{reader} reader from {from}, {damage:?}: no error"));
            assert_eq!(err.kind(), ErrorKind::Corruption, "{reader} reader from {from}: {err}");
            let location = err.context().location.clone().unwrap_or_default();
            assert!(location.contains(object), "{reader} reader from {from}: {err} names the object");
        }
    }
    both_readers_serve(&topic, 200, 350, &[(Source::Cold, r(200, 300)), (Source::Hot, r(300, 350))]).await;
    store.close().await;
}

#[tokio::test]
async fn a_damaged_cold_batch_ends_the_read_after_the_intact_records() {
    a_damaged_cold_object_no_other_tier_holds(false, ColdDamage::Batch).await;
}

#[tokio::test]
async fn a_damaged_cold_trailer_ends_the_read_after_the_intact_objects() {
    a_damaged_cold_object_no_other_tier_holds(false, ColdDamage::Trailer).await;
}

#[tokio::test]
async fn default_cold_streams_over_a_damaged_batch_deliver_the_intact_records() {
    a_damaged_cold_object_no_other_tier_holds(true, ColdDamage::Batch).await;
}

#[tokio::test]
async fn default_cold_streams_over_a_damaged_trailer_deliver_the_intact_objects() {
    a_damaged_cold_object_no_other_tier_holds(true, ColdDamage::Trailer).await;
}

/// Warm still holds [100, 350): the damaged object's offsets are served from warm (cold's
/// slice ends at 100, so its read never touches the object), for both cold shapes.
#[tokio::test]
async fn a_damaged_cold_object_warm_still_holds_is_served_from_warm() {
    for default_streams in [false, true] {
        for damage in [ColdDamage::Batch, ColdDamage::Trailer] {
            let (_d, store, topic, _) = damaged_cold_object(default_streams, damage, Some(100)).await;
            let want = [(Source::Cold, r(0, 100)), (Source::Warm, r(100, 300)), (Source::Hot, r(300, 350))];
            both_readers_serve(&topic, 0, 350, &want).await;
            both_readers_serve(&topic, 150, 350, &[(Source::Warm, r(150, 300)), (Source::Hot, r(300, 350))])
                .await;
            store.close().await;
        }
    }
}

/// A sealed WAL segment damaged before its export (sim seed 60001204). Cold must not be
/// handed the damage: once WAL retention and warm's trim have run it would be the only
/// copy. With warm (Valkey) holding the batches intact, the object stored is rebuilt from
/// warm's copy and reads back whole; without warm there is no intact copy, and the file is
/// stored as it is (its intact batches stay readable).
#[tokio::test]
async fn a_damaged_wal_segment_is_exported_from_warms_intact_copy() {
    for tiers in [Tiers::HotWarmCold, Tiers::HotCold] {
        let d = Deployment::new(tiers, ColdOn::Local).await;
        let name = TopicName::new(TOPIC).unwrap();
        let store = d.open(&[TOPIC]).await;
        let topic = store.topic(TOPIC).await.unwrap();
        append_range(&topic, 0, 500, 10).await;
        let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
        drop(topic);
        store.close().await;
        damage_batch(&sealed.path, 200);

        let store = d.open(&[TOPIC]).await;
        let exported: Vec<_> = store.export_now(TOPIC).await.unwrap().iter().map(|e| e.range).collect();
        assert_eq!(exported, vec![r(0, 500)], "{tiers:?}");
        let cold = d.cold.clone().unwrap();
        let read = cold.read(&name, 0, 500, tier_core::ReadLimit::unbounded()).await;
        if tiers.warm() {
            let records = read.unwrap_or_else(|e| panic!("cold was given the WAL's damage: {e}"));
            assert_eq!(records.len(), 500);
            records.iter().for_each(check);
        } else {
            assert_eq!(read.unwrap_err().kind(), ErrorKind::Corruption, "no intact copy: stored as it is");
            let before = cold.read(&name, 0, 200, tier_core::ReadLimit::unbounded()).await.unwrap();
            assert_eq!(before.len(), 200, "the intact batches before the damage stay readable");
        }
        let state_dir = d.dir.path().join("router");
        let leftovers: Vec<_> =
            std::fs::read_dir(&state_dir).unwrap().filter_map(Result::ok).map(|e| e.file_name()).collect();
        assert!(
            leftovers.iter().all(|f| !f.to_string_lossy().starts_with(".rebuilt")),
            "the rebuilt file is removed: {leftovers:?}"
        );
        store.close().await;
    }
}

/// Hot+warm+cold: the WAL's batch [200, 210) and cold's copy of it are both damaged, and
/// warm, which holds it intact, is down. Both readers deliver [0, 200) and then end with
/// `Unavailable` (warm may hold it; retry later), not cold's `Corruption` (which says no
/// intact copy exists) — sim seed 90005027. Once warm answers, warm serves.
#[tokio::test]
async fn a_damaged_wal_batch_and_cold_copy_with_warm_down_is_unavailable_not_corrupt() {
    let mut d = Deployment::new(Tiers::HotWarmCold, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    let (store, topic) = damaged_wal_batch(&d).await;
    damage_batch(&cold_object(&d.dir.path().join("cold"), r(0, 500)), 200);
    warm.target(&[Op::Range, Op::Read]);
    warm.fail_fraction(1.0);
    for (reader, (records, err)) in
        [("record", read_records(&topic, 0, 700).await), ("batch", read_batches(&topic, 0, 700).await)]
    {
        assert_eq!(runs(0, &records), vec![(Source::Hot, r(0, 200))], "{reader} reader");
        let err = err.unwrap_or_else(|| panic!("{reader} reader: no error"));
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{reader} reader: {err}");
    }
    warm.clear();
    both_readers_serve(&topic, 200, 700, &[(Source::Warm, r(200, 700))]).await;
    store.close().await;
}

/// Hot+warm under `fail`: [0, 10) is committed, [10, 20) lands in warm but its `WAIT`
/// falls short (queued again at the restart, as warm holds it), all in one sealed WAL
/// segment whose first batch's offset field is then damaged. A record
/// reader from the latest offset starts at the commit point, 10 — inside the damaged
/// segment — and follows the live tail there; once warm confirms the backlog it must get
/// the records (from warm), not the WAL's `Corruption` — sim seed 90014473.
#[tokio::test]
async fn a_live_tail_inside_a_damaged_segment_is_served_from_warm() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    d.router.warm_failure_policy = tier_router::WarmFailurePolicy::Fail;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    d.warm = Some(warm.clone());
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 10, 10).await;
    // The batch lands in warm, its `WAIT` falls short.
    warm.fail_after_append(true);
    warm.fail_fraction(1.0);
    let refused = topic.append((10..20).map(common::rec).collect()).await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Unavailable);
    let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
    assert_eq!(sealed.range, r(0, 20));
    drop(topic);
    store.close().await;
    damage_base_offset(&sealed.path, 0);

    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    assert_eq!(topic.high_watermark(), 10);
    let mut tail = topic.reader(StartPosition::Latest).await.unwrap();
    warm.clear();
    topic.flush().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), tail.next()).await.expect("the tail answers");
    let record = next.expect("a record").unwrap_or_else(|e| panic!("the live tail failed: {e}"));
    assert_eq!(record.offset, 10);
    check(&record);
    store.close().await;
}

/// Hot+warm under `fail`, warm a stand-in: [0, 10) is refused by warm (it never lands) and
/// stays in the WAL, whose sealed segment is then damaged (the first batch's offset
/// field), so that after a restart warm's back-fill cannot read it and no tier holds it
/// intact; warm answers again, empty, taking a batch at any offset.
async fn refused_batch_damaged() -> (Deployment, Arc<FaultyTier<MemoryTier>>) {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    d.router.warm_failure_policy = tier_router::WarmFailurePolicy::Fail;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    d.warm = Some(warm.clone());
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    warm.fail_fraction(1.0);
    let refused = topic.append((0..10).map(common::rec).collect()).await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Unavailable);
    let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
    assert_eq!(sealed.range, r(0, 10));
    drop(topic);
    store.close().await;
    damage_base_offset(&sealed.path, 0);
    warm.clear();
    (d, warm)
}

/// [`refused_batch_damaged`]: the next append must still not be acknowledged over the
/// damaged, never-confirmed records — the commit point cannot pass records the WAL holds
/// that were never committed (it would serve them, or their damage, as committed) — sim
/// seed 100012370, where the commit point jumped to 11 and a live tail from 0 met the
/// damage.
#[tokio::test]
async fn the_commit_point_never_passes_a_damaged_batch_warm_never_confirmed() {
    let (d, _warm) = refused_batch_damaged().await;
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let answer = topic.append(vec![common::rec(10)]).await;
    assert_eq!(topic.high_watermark(), 0, "the commit point passed never-confirmed records ({answer:?})");
    assert_eq!(answer.unwrap_err().kind(), ErrorKind::Unavailable, "acknowledged past the damaged backlog");
    store.close().await;
}

/// [`refused_batch_damaged`]: warm's back-fill stops at the damage, and the next append,
/// [10, 11), must not be sent to the empty stream — a stream starting at 10 is taken for
/// committed up to there by the next recovery, which would then serve the refused
/// records the WAL holds below it (sim seeds 230048725 and, of generator 6, 74010453;
/// `Repair::WarmContinuesItsHold` puts the old behaviour back).
#[tokio::test]
async fn warm_is_never_sent_a_batch_past_records_it_lacks_that_no_tier_gives() {
    let (d, warm) = refused_batch_damaged().await;
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let answer = topic.append(vec![common::rec(10)]).await;
    assert_eq!(answer.unwrap_err().kind(), ErrorKind::Unavailable, "acknowledged past the damaged backlog");
    let held = warm.range(&name).await.unwrap();
    assert!(held.is_empty(), "warm took a batch past the records it lacks: it holds {held}");
    drop(topic);
    store.close().await;

    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    assert_eq!(
        topic.high_watermark(),
        0,
        "the refused records below warm's start became committed (warm holds {:?})",
        warm.range(&name).await
    );
    store.close().await;
}

/// Hot+warm under `fail`: [0, 5) is committed; [5, 10) is refused by warm and stays in the
/// WAL, whose sealed segment is then damaged there, so no tier holds it intact. After a
/// restart the next batch, [10, 13), lands in the WAL and is refused by warm too. Once
/// warm answers, the next append finds warm ending at 5 with no tier able to give it
/// [5, 13): warm must not be restarted past them — [10, 13) are records the WAL holds that
/// were never committed, and a later recovery takes a restarted stream's start for
/// committed — so after one more restart the commit point is still 5 and [10, 13) are
/// never served (sim seed 400078426, where warm restarted at 29 and the refused [26, 29)
/// were served).
#[tokio::test]
async fn warm_is_never_restarted_past_records_the_wal_holds_that_were_never_committed() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    d.router.warm_failure_policy = tier_router::WarmFailurePolicy::Fail;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    d.warm = Some(warm.clone());
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    warm.fail_fraction(1.0);
    let refused = topic.append((5..10).map(common::rec).collect()).await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Unavailable);
    let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
    assert_eq!(sealed.range, r(0, 10));
    drop(topic);
    store.close().await;
    damage_batch(&sealed.path, 5);

    // Warm still refuses: the back-fill cannot read [5, 10), so [10, 13) is written.
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let refused = topic.append((10..13).map(common::rec).collect()).await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Unavailable);
    assert_eq!(store.wal().range(&name).await.unwrap(), r(0, 13));
    drop(topic);
    store.close().await;

    // Warm answers: the next append meets warm's end at 5.
    warm.clear();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let answer = topic.append(vec![common::rec(13)]).await;
    assert_eq!(answer.unwrap_err().kind(), ErrorKind::Unavailable, "acknowledged past the damaged backlog");
    assert_eq!(topic.high_watermark(), 5);
    drop(topic);
    store.close().await;

    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    assert_eq!(
        topic.high_watermark(),
        5,
        "the refused [10, 13) became committed: warm was restarted past them (warm holds {:?})",
        warm.range(&name).await
    );
    store.close().await;
}

/// Hot+warm under `degrade`: warm holds [0, 1) and then refuses; [1, 11) and [11, 21) are
/// acknowledged from the WAL alone, each in a sealed segment of its own, and the first is
/// damaged. After a restart warm's back-fill stops at 1, so the next append finds warm
/// ending there with no tier able to give it [1, 11): warm is restarted — at 11, after the
/// damage, with the WAL's intact [11, 21), not at the new batch, which would leave
/// [11, 21) in the WAL alone (a power cut of an unsynced tail then left a WAL ending below
/// warm's start, and the store refused to open) — sim seed 500055659.
#[tokio::test]
async fn warm_restarts_after_the_damage_with_the_intact_records_after_it() {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    d.router.warm_failure_policy = tier_router::WarmFailurePolicy::Degrade;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    warm.target(&[Op::Append]);
    d.warm = Some(warm.clone());
    let name = TopicName::new(TOPIC).unwrap();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 0, 1, 1).await;
    warm.fail_fraction(1.0);
    append_range(&topic, 1, 11, 10).await;
    let damaged = store.wal().rotate(&name).await.unwrap().unwrap();
    append_range(&topic, 11, 21, 10).await;
    assert_eq!(store.wal().rotate(&name).await.unwrap().unwrap().range, r(11, 21));
    drop(topic);
    store.close().await;
    damage_batch(&damaged.path, 1);

    warm.clear();
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 21, 22, 1).await;
    topic.flush().await.unwrap();
    assert_eq!(
        warm.range(&name).await.unwrap(),
        r(11, 22),
        "warm restarts after the damage and holds every intact record after it"
    );
    store.close().await;
}
