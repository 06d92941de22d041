//! The router's state directory belongs to one store: the store holds its lock while open
//! and records its data directory in it (`owner`), and a store refuses to start on state
//! another store wrote — two stores whose data directories are siblings would otherwise
//! share `<parent>/router`, each overwriting the other's checkpoints and reservations,
//! and a lost WAL would then continue at offsets already acknowledged.
//!
//! Hot-only stores on temporary directories; no server needed.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};

use tier_core::{ErrorKind, OffsetRange, TierError};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{NewRecord, RouterConfig, TieredStore, Topic};

const T: &str = "t";

/// A hot-only store on `data_dir` without background tasks, its state directory
/// `state_dir` (`None`: the default).
async fn open(data_dir: &Path, state_dir: Option<PathBuf>) -> Result<TieredStore, TierError> {
    let mut router = RouterConfig::default();
    router.state_dir = state_dir;
    TieredStore::builder()
        .hot(HotConfig::new(data_dir).with_fsync(FsyncPolicy::Never))
        .router(router)
        .background(false)
        .topics([T])
        .open()
        .await
}

/// Appends `from..to` in batches of `per_batch` records, checking each batch's offsets.
async fn append_range(topic: &Topic, from: u64, to: u64, per_batch: u64) {
    let mut at = from;
    while at < to {
        let end = (at + per_batch).min(to);
        let records = (at..end).map(|o| NewRecord::new(o as i64, format!("r{o}"))).collect();
        assert_eq!(topic.append(records).await.unwrap(), OffsetRange::new(at, end));
        at = end;
    }
}

/// The offset the next append of one record to `store`'s topic gets.
async fn next_append(store: &TieredStore) -> u64 {
    let topic = store.topic(T).await.unwrap();
    topic.append(vec![NewRecord::new(0, "next")]).await.unwrap().start
}

/// The state file `name` under `state_dir`, when it exists.
fn state_file(state_dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(state_dir.join(name)).ok()
}

/// Asserts `result` is a refusal of kind `Fenced` whose message names every one of `says`.
fn assert_refused(result: Result<TieredStore, TierError>, says: &[&str]) {
    let e = match result {
        Ok(_) => panic!("a store opened on a state directory another store owns"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    let message = e.to_string();
    for word in says {
        assert!(message.contains(word), "the refusal names {word:?}: {message}");
    }
}

/// Two stores on sibling data directories `a` and `b` with the default state directory
/// (`<parent>/router` for both): the second is refused while the first is open (it holds
/// the state directory's lock) and after it closed (the directory's `owner` names `a`),
/// naming the state directory and the setting that gives each store its own. With its own
/// `router.state_dir`, `b` opens beside `a`, and neither sees the other's offsets.
#[tokio::test]
async fn a_sibling_store_on_the_default_state_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let shared = root.path().join("router");
    let store_a = open(&a, None).await.unwrap();
    append_range(&store_a.topic(T).await.unwrap(), 0, 5, 5).await;

    match open(&b, None).await {
        Ok(store_b) => {
            // Both stores write `<parent>/router/t.*`: `b`'s close overwrites `a`'s files.
            let before = (state_file(&shared, "t.end"), state_file(&shared, "t.reserved"));
            let topic_b = store_b.topic(T).await.unwrap();
            let got = topic_b.append(vec![NewRecord::new(0, "b")]).await.unwrap();
            drop(topic_b);
            store_b.close().await;
            let after = (state_file(&shared, "t.end"), state_file(&shared, "t.reserved"));
            panic!(
                "a second store opened on the state directory {} while the store of {} held it; its append got \
                 {got} (numbered after a's reservation) and its close overwrote a's files: (t.end, t.reserved) \
                 {before:?} -> {after:?}",
                shared.display(),
                a.display()
            );
        }
        Err(e) => assert_refused(Err(e), &[&shared.display().to_string(), "router.state_dir"]),
    }

    store_a.close().await;
    // Closed, `a` still owns the directory: `b` is refused, naming both data directories.
    let canonical_a = a.canonicalize().unwrap();
    assert_refused(
        open(&b, None).await,
        &[&shared.display().to_string(), &canonical_a.display().to_string(), "b", "router.state_dir"],
    );
    assert_eq!(
        state_file(&shared, "owner").map(|o| o.trim_end().to_owned()),
        Some(canonical_a.display().to_string())
    );

    // With a state directory of its own, `b` opens beside `a`; each continues its own log.
    let store_b = open(&b, Some(root.path().join("router-b"))).await.unwrap();
    let store_a = open(&a, None).await.unwrap();
    assert_eq!(next_append(&store_b).await, 0, "b's topic is its own");
    assert_eq!(next_append(&store_a).await, 5, "a's topic continues after what it acknowledged");
    // Two stores configured with one state directory are refused just the same.
    assert_refused(open(&root.path().join("c"), Some(root.path().join("router-b"))).await, &["router-b"]);
    store_a.close().await;
    store_b.close().await;
}

/// The bad sequence end to end: `a` acknowledges [0, 3000); a sibling `b` on the default
/// state directory — had it opened — appends one record and closes cleanly, lowering the
/// shared reservation and checkpoint to 1; `a` is killed and its WAL directory lost. The
/// reopened `a` must continue at or past 3000: its reservation is its own.
#[tokio::test]
async fn a_sibling_store_never_makes_a_lost_wal_reuse_acknowledged_offsets() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let store_a = open(&a, None).await.unwrap();
    let topic_a = store_a.topic(T).await.unwrap();
    let opened_b = open(&b, None).await;
    let topic_b = match &opened_b {
        Ok(store_b) => Some(store_b.topic(T).await.unwrap()),
        Err(_) => None,
    };
    append_range(&topic_a, 0, 3000, 100).await;
    if let (Ok(store_b), Some(topic_b)) = (&opened_b, topic_b) {
        append_range(&topic_b, 0, 1, 1).await;
        drop(topic_b);
        store_b.close().await;
    }

    // `a` is killed (no checkpoint, no reservation lowered) and loses its WAL directory.
    store_a.abort().await;
    drop(topic_a);
    drop(store_a);
    std::fs::remove_dir_all(&a).unwrap();

    let store_a = open(&a, None).await.unwrap();
    let report = store_a.recover_topic(T).await.unwrap();
    let next = next_append(&store_a).await;
    assert!(
        next >= 3000,
        "acknowledged offsets [{next}, 3000) handed out again after the lost WAL: {report:?}"
    );
    assert!(
        report.maybe_lost.iter().any(|m| m.start == 0 && m.end >= 3000),
        "the lost WAL's offsets are reported: {report:?}"
    );
    store_a.close().await;
    assert_refused(opened_b, &["router.state_dir"]);
}

/// The state directory lost (recreated empty at open) and the WAL directory lost
/// (recreated at the same path) both leave the store its own state directory: it opens,
/// and `owner` names its data directory.
#[tokio::test]
async fn a_lost_state_directory_or_wal_directory_still_opens() {
    let root = tempfile::tempdir().unwrap();
    let (a, state) = (root.path().join("a"), root.path().join("router"));
    let store = open(&a, None).await.unwrap();
    append_range(&store.topic(T).await.unwrap(), 0, 10, 10).await;
    store.close().await;
    let owner = state_file(&state, "owner").expect("an owner file");

    std::fs::remove_dir_all(&state).unwrap();
    let store = open(&a, None).await.unwrap();
    assert_eq!(state_file(&state, "owner").as_ref(), Some(&owner), "the new state directory is a's");
    // Nothing bounds what was acknowledged (fsync = never): fenced at the WAL's end.
    let report = store.recover_topic(T).await.unwrap();
    assert!(report.end_unknown && report.next_offset == 10, "{report:?}");
    store.resume_topic(T, 10).await.unwrap();
    assert_eq!(next_append(&store).await, 10);
    store.close().await;

    std::fs::remove_dir_all(&a).unwrap();
    let store = open(&a, None).await.unwrap();
    assert_eq!(state_file(&state, "owner").as_ref(), Some(&owner), "the recreated WAL directory matches");
    let report = store.recover_topic(T).await.unwrap();
    assert_eq!(report.lost, vec![OffsetRange::new(0, 11)], "{report:?}");
    assert_eq!(next_append(&store).await, 11);
    store.close().await;
}

/// A state directory an older version wrote (state files, no `owner`) is adopted by the
/// store that opens it: `owner` is written, the store continues from its files, and a
/// sibling is refused from then on.
#[tokio::test]
async fn a_state_directory_without_an_owner_is_adopted() {
    let root = tempfile::tempdir().unwrap();
    let (a, state) = (root.path().join("a"), root.path().join("router"));
    let store = open(&a, None).await.unwrap();
    append_range(&store.topic(T).await.unwrap(), 0, 10, 10).await;
    store.close().await;
    std::fs::remove_file(state.join("owner")).unwrap();
    assert!(state_file(&state, "t.end").is_some() && state_file(&state, "t.reserved").is_some());

    let store = open(&a, None).await.unwrap();
    let owner = state_file(&state, "owner").expect("adopted");
    assert_eq!(owner.trim_end(), a.canonicalize().unwrap().display().to_string());
    assert_eq!(next_append(&store).await, 10);
    store.close().await;
    assert_refused(open(&root.path().join("b"), None).await, &["router.state_dir"]);
}
