//! Object stores as they really fail: a request that took effect whose answer was lost
//! (a timeout or a connection reset after the store acted), a request refused before it
//! took effect, and listings that lag writes — injected by `FaultyStore`
//! (`lose_answer_every`, `refuse_write_every`, `list_lag`), and on moto through
//! `tier-testkit`'s `AnswerDropProxy`. See `docs/cold.md`, "How object stores fail".

use crate::common;

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use common::{s3_config, small_config, topic, write_segment};
use tier_cold::testing::{Faults, FaultyStore};
use tier_cold::{BackendConfig, ColdTier, ExportOutcome};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt};
use tier_testkit::servers::{AnswerDropProxy, SharedS3};

fn batch(base: u64, count: usize, ts: i64) -> RecordBatch {
    let mut recs = common::records(base, count, 50);
    for r in &mut recs {
        r.timestamp = ts;
    }
    RecordBatch::from_records(base, &recs).expect("batch")
}

/// An in-memory bucket behind a fault wrapper.
fn bucket() -> (Arc<InMemory>, FaultyStore) {
    let memory = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(Arc::clone(&memory) as Arc<dyn ObjectStore>, Faults::default());
    (memory, faulty)
}

fn tier_over(faulty: &FaultyStore) -> ColdTier {
    ColdTier::with_store(Arc::new(faulty.clone()), small_config()).expect("tier")
}

async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    let mut keys: Vec<String> =
        store.list(None).map_ok(|m| m.location.to_string()).try_collect().await.expect("list");
    keys.sort();
    keys
}

fn lose_answer(n: u64) -> Faults {
    Faults { lose_answer_every: Some(n), ..Faults::default() }
}

#[tokio::test]
async fn the_wrapper_applies_a_write_whose_answer_it_loses_and_refuses_one_before_it_applies() {
    let (memory, faulty) = bucket();
    let key = Path::from("a/x");
    faulty.set_faults(lose_answer(1));
    let err = faulty.put(&key, PutPayload::from_static(b"1")).await.expect_err("answer lost");
    assert!(err.to_string().contains("its answer was lost"), "{err}");
    assert!(memory.head(&key).await.is_ok(), "the PUT took effect");
    let err = faulty.delete(&key).await.expect_err("answer lost");
    assert!(err.to_string().contains("its answer was lost"), "{err}");
    assert!(memory.head(&key).await.is_err(), "the DELETE took effect");
    faulty.set_faults(Faults { refuse_write_every: Some(1), ..Faults::default() });
    faulty.put(&key, PutPayload::from_static(b"1")).await.expect_err("refused");
    assert!(memory.head(&key).await.is_err(), "a refused PUT did not take effect");
    // Reads are not affected by either.
    faulty.set_faults(Faults::default());
    faulty.put(&key, PutPayload::from_static(b"1")).await.expect("healthy");
    faulty.set_faults(Faults {
        refuse_write_every: Some(1),
        lose_answer_every: Some(1),
        ..Faults::default()
    });
    assert!(faulty.head(&key).await.is_ok());
    assert_eq!(faulty.injected(), 3);
}

#[tokio::test]
async fn a_lagging_listing_hides_new_objects_and_shows_deleted_ones_for_n_listings() {
    let (memory, faulty) = bucket();
    let (old, new) = (Path::from("a/old"), Path::from("a/new"));
    memory.put(&old, PutPayload::from_static(b"old")).await.expect("put");
    faulty.set_faults(Faults { list_lag: Some(2), ..Faults::default() });
    faulty.put(&new, PutPayload::from_static(b"new")).await.expect("put");
    faulty.delete(&old).await.expect("delete");
    for _ in 0..2 {
        assert_eq!(keys(&faulty).await, vec!["a/old"], "lagging");
    }
    assert_eq!(keys(&faulty).await, vec!["a/new"], "caught up after two listings");
    // GET and HEAD are consistent meanwhile; ending the lag catches listings up at once.
    faulty.put(&old, PutPayload::from_static(b"again")).await.expect("put");
    assert!(faulty.head(&old).await.is_ok());
    assert_eq!(keys(&faulty).await, vec!["a/new"]);
    faulty.set_faults(Faults::default());
    assert_eq!(keys(&faulty).await, vec!["a/new", "a/old"]);
}

#[tokio::test]
async fn an_append_whose_answer_was_lost_is_held_once_after_the_retry() {
    let (_memory, faulty) = bucket();
    let t = topic("lost-append");
    let tier = tier_over(&faulty);
    tier.append(&t, batch(0, 4, 100)).await.expect("healthy append");
    faulty.set_faults(lose_answer(1));
    let err = tier.append(&t, batch(4, 4, 200)).await.expect_err("the answer was lost");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    faulty.set_faults(Faults::default());
    tier.append(&t, batch(4, 4, 200)).await.expect("the retry finds its own object");
    let fresh = tier_over(&faulty);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 8));
    let got = fresh.read(&t, 0, 8, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
}

#[tokio::test]
async fn an_export_whose_segment_or_marker_answer_was_lost_is_already_present_on_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lost-export");
    let (memory, faulty) = bucket();
    let tier = tier_over(&faulty);
    let seg = dir.path().join("0.seg");
    write_segment(&seg, &t, 0, 3, 4, 40);
    // The segment's PUT (request 1), its successor pointer's (2), its time marker's (3).
    for n in [1, 2, 3] {
        faulty.set_faults(lose_answer(n));
        let err = tier.export_segment(&t, &seg).await.expect_err("an answer was lost");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        faulty.set_faults(Faults::default());
        let outcome = tier.export_segment(&t, &seg).await.expect("the retry");
        assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{outcome:?}");
        let listed = keys(memory.as_ref()).await;
        assert_eq!(listed.iter().filter(|k| k.ends_with(".seg")).count(), 1, "{listed:?}");
        assert_eq!(listed.iter().filter(|k| k.contains(".ts-")).count(), 1, "{listed:?}");
        assert_eq!(listed.iter().filter(|k| k.ends_with(".next")).count(), 1, "{listed:?}");
        let fresh = tier_over(&faulty);
        assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 12), "request {n}");
        for victim in listed {
            memory.delete(&Path::from(victim)).await.expect("empty the bucket");
        }
        tier.refresh(&t).await.expect("refresh");
    }
}

#[tokio::test]
async fn a_multipart_completion_whose_answer_was_lost_is_already_present_on_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lost-complete");
    let (memory, faulty) = bucket();
    let tier = tier_over(&faulty);
    let seg = dir.path().join("big.seg");
    // Over the 5 MiB multipart threshold: two parts.
    let end = write_segment(&seg, &t, 0, 12, 100, 5_000);
    // The completion is the first mutating request (parts are not counted).
    faulty.set_faults(lose_answer(1));
    let err = tier.export_segment(&t, &seg).await.expect_err("the completion's answer was lost");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    faulty.set_faults(Faults::default());
    let outcome = tier.export_segment(&t, &seg).await.expect("the retry");
    assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{outcome:?}");
    let fresh = ColdTier::with_store(memory.clone() as Arc<dyn ObjectStore>, small_config()).expect("tier");
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, end));
}

#[tokio::test]
async fn a_gap_marker_whose_answer_was_lost_is_recorded_once_on_retry() {
    let (memory, faulty) = bucket();
    let t = topic("lost-gap");
    let tier = tier_over(&faulty);
    tier.append(&t, batch(0, 4, 100)).await.expect("append");
    faulty.set_faults(lose_answer(1));
    tier.record_gap(&t, OffsetRange::new(4, 10)).await.expect_err("the answer was lost");
    faulty.set_faults(Faults::default());
    tier.record_gap(&t, OffsetRange::new(4, 10)).await.expect("the retry");
    tier.append(&t, batch(10, 2, 200)).await.expect("the log continues after the gap");
    let fresh = ColdTier::with_store(memory.clone() as Arc<dyn ObjectStore>, small_config()).expect("tier");
    assert_eq!(fresh.recorded_gaps(&t).await.expect("gaps"), vec![OffsetRange::new(4, 10)]);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 12));
}

/// Expiry deletes a segment whose DELETE answer is lost: the object is gone although
/// expiry saw an error. The tier must not keep listing it (its reads would fail on an
/// object that no longer exists, at offsets its range still claims).
#[tokio::test]
async fn an_expired_segment_whose_delete_answer_was_lost_is_not_served_from_the_manifest() {
    let (_memory, faulty) = bucket();
    let t = topic("lost-delete");
    let tier = tier_over(&faulty);
    for (i, base) in [0u64, 4, 8].into_iter().enumerate() {
        tier.append(&t, batch(base, 4, 100 * (i as i64 + 1))).await.expect("append");
    }
    // Expiry deletes the first segment's time marker (request 1), then the segment (2).
    faulty.set_faults(lose_answer(2));
    let err = tier.expire_before(&t, 101).await.expect_err("the segment DELETE's answer was lost");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    faulty.set_faults(Faults::default());
    let range = tier.range(&t).await.expect("range");
    let got = tier.read(&t, range.start, 12, ReadLimit::unbounded()).await;
    let got = got.unwrap_or_else(|e| panic!("the range {range} starts at a segment that is gone: {e}"));
    assert_eq!(got.first().map(|r| r.offset), Some(4), "range {range}");
    assert_eq!(range, OffsetRange::new(4, 12));
}

fn lag(lists: u64) -> Faults {
    Faults { list_lag: Some(lists), ..Faults::default() }
}

/// A process that starts while the store's LIST lags the last exports (an eventually
/// consistent listing) must still see every stored segment: otherwise its manifest ends
/// early, the WAL segments cold already held look missing, and the next export does
/// not continue the log.
#[tokio::test]
async fn a_listing_that_lags_the_last_exports_is_completed_by_the_pointers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lagging");
    let (_memory, faulty) = bucket();
    let writer = tier_over(&faulty);
    let mut paths = Vec::new();
    let mut base = 0;
    for i in 0..4 {
        let path = dir.path().join(format!("{i}.seg"));
        base = write_segment(&path, &t, base, 2, 3, 40);
        paths.push(path);
    }
    writer.export_segment(&t, &paths[0]).await.expect("export before the lag");
    faulty.set_faults(lag(5));
    writer.export_segment(&t, &paths[1]).await.expect("export");
    writer.export_segment(&t, &paths[2]).await.expect("export");
    // A new process: its listing does not show the last two segments yet.
    let fresh = tier_over(&faulty);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 18), "every exported segment");
    let got = fresh.read(&t, 0, 18, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got.len(), 18);
    let outcome = fresh.export_segment(&t, &paths[3]).await.expect("the next segment continues the log");
    assert!(matches!(outcome, ExportOutcome::Uploaded { .. }), "{outcome:?}");
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, base));
}

/// A LIST that shows a later object before an earlier one (each object's listing lags
/// its own write, by different amounts): the pointers from 0 complete the manifest
/// before its first listed segment, so the earlier offsets are not taken for missing.
#[tokio::test]
async fn a_listing_that_shows_a_later_segment_before_an_earlier_one_is_completed_from_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lagging-earlier");
    let (_memory, faulty) = bucket();
    let writer = tier_over(&faulty);
    let (first, second) = (dir.path().join("0.seg"), dir.path().join("1.seg"));
    let middle = write_segment(&first, &t, 0, 3, 7, 40);
    let end = write_segment(&second, &t, middle, 1, 5, 40);
    faulty.set_faults(lag(5));
    writer.export_segment(&t, &first).await.expect("export");
    faulty.set_faults(lag(1));
    writer.export_segment(&t, &second).await.expect("export");
    // A LIST or two later the second segment shows, the first does not yet.
    let shows = |listed: &[String], base: u64| listed.iter().any(|k| k.contains(&format!("{base:020}-")));
    let mut listed = keys(&faulty).await;
    for _ in 0..2 {
        if shows(&listed, middle) {
            break;
        }
        listed = keys(&faulty).await;
    }
    assert!(shows(&listed, middle) && !shows(&listed, 0), "{listed:?}");
    let fresh = tier_over(&faulty);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, end), "every exported segment");
    let got = fresh.read(&t, 0, end, ReadLimit::unbounded()).await.expect("read from 0");
    assert_eq!(got.len() as u64, end);
}

/// A LIST that shows the segments on both sides of one whose listing lags: the pointer
/// from the end of the earlier one completes the hole, so the middle offsets are not taken
/// for missing (a reader would fail `NotFound` inside the committed range).
#[tokio::test]
async fn a_listing_that_misses_a_segment_between_two_listed_ones_is_completed_by_the_pointers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lagging-middle");
    let (_memory, faulty) = bucket();
    let writer = tier_over(&faulty);
    let paths: Vec<_> = (0..3).map(|i| dir.path().join(format!("{i}.seg"))).collect();
    let middle = write_segment(&paths[0], &t, 0, 2, 5, 40);
    let last = write_segment(&paths[1], &t, middle, 3, 7, 40);
    let end = write_segment(&paths[2], &t, last, 1, 5, 40);
    writer.export_segment(&t, &paths[0]).await.expect("export");
    faulty.set_faults(lag(5));
    writer.export_segment(&t, &paths[1]).await.expect("export");
    // Listed at once: only the middle segment's listing lags.
    faulty.set_faults(lag(0));
    writer.export_segment(&t, &paths[2]).await.expect("export");
    let shows = |listed: &[String], base: u64| listed.iter().any(|k| k.contains(&format!("{base:020}-")));
    let listed = keys(&faulty).await;
    assert!(shows(&listed, 0) && !shows(&listed, middle) && shows(&listed, last), "{listed:?}");
    let fresh = tier_over(&faulty);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, end));
    assert!(fresh.gaps(&t).await.expect("holes").is_empty(), "no segment taken for missing");
    let got = fresh.read(&t, middle, end, ReadLimit::unbounded()).await.expect("read across the middle");
    assert_eq!(got.len() as u64, end - middle);
}

/// The same when the LIST shows nothing yet: the pointer from 0 names the topic's first
/// object wherever it starts (a topic cold joined late), and a recorded gap after it is
/// found the same way.
#[tokio::test]
async fn a_listing_that_shows_nothing_yet_finds_the_first_segment_and_a_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("lagging-first");
    let (_memory, faulty) = bucket();
    faulty.set_faults(lag(5));
    let writer = tier_over(&faulty);
    let first = dir.path().join("first.seg");
    let end = write_segment(&first, &t, 100, 2, 3, 40);
    writer.export_segment(&t, &first).await.expect("export");
    writer.record_gap(&t, OffsetRange::new(end, end + 10)).await.expect("gap");
    let next = dir.path().join("next.seg");
    let last = write_segment(&next, &t, end + 10, 1, 3, 40);
    writer.export_segment(&t, &next).await.expect("export after the gap");
    let fresh = tier_over(&faulty);
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(100, last));
    assert_eq!(fresh.recorded_gaps(&t).await.expect("gaps"), vec![OffsetRange::new(end, end + 10)]);
    assert!(fresh.gaps(&t).await.expect("holes").is_empty());
    assert_eq!(fresh.continuation(&t).await.expect("continuation"), last);
}

/// The same ambiguity on a real S3 server: moto stores the segment, the proxy in front
/// of it loses the answer (the connection ends without a response). `object_store`
/// retries a request whose connection ended before any answer, and the retried
/// conditional PUT answers 412 (the object exists): the export finds its own object
/// (`AlreadyPresent`). When every attempt loses its answer (here 3: the first and
/// `max_retries = 2`), the export fails, and the next one finds the object. Either way
/// exactly one correct copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_s3_an_export_whose_put_answer_was_lost_is_already_present_on_retry() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let proxy = AnswerDropProxy::start(&s3.settings().endpoint).await.expect("answer-dropping proxy");
    let mut config = s3_config(&s3);
    if let BackendConfig::S3 { endpoint, .. } = &mut config.backend {
        *endpoint = Some(proxy.endpoint());
    }
    let direct = ColdTier::open(s3_config(&s3)).expect("tier straight to moto");
    let tier = ColdTier::open(config).expect("tier through the proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, lost, fails) in [("lost-put-once", 1, false), ("lost-put-always", 3, true)] {
        let t = topic(name);
        let seg = dir.path().join(format!("{name}.seg"));
        let end = write_segment(&seg, &t, 0, 3, 4, 40);
        assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0));
        proxy.drop_answers("PUT", ".seg", lost);
        let first = tier.export_segment(&t, &seg).await;
        assert_eq!(proxy.dropped(), lost, "{name}");
        match first {
            Ok(outcome) if !fails => {
                assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{name}: {outcome:?}")
            }
            Err(err) if fails => {
                assert_eq!(err.kind(), ErrorKind::Unavailable, "{name}: {err}");
                let key = direct.layout().segment_key(&t, OffsetRange::new(0, end));
                direct.store().head(&key).await.expect("the PUT took effect");
                let outcome = tier.export_segment(&t, &seg).await.expect("the retry");
                assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{name}: {outcome:?}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(direct.range(&t).await.expect("range"), OffsetRange::new(0, end), "{name}");
        let got = direct.read(&t, 0, end, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got, common::records(0, end as usize, 40), "{name}");
        let dir_path = direct.layout().topic_dir(&t);
        let objects: Vec<String> = direct
            .store()
            .list(Some(&dir_path))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .expect("list");
        assert_eq!(objects.iter().filter(|k| k.ends_with(".seg")).count(), 1, "{name}: {objects:?}");
    }
}
