//! `TieredStore::existing_topic`: a reader's way to a topic, which never creates one.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(feature = "cold")]

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::append_range;
use futures::StreamExt;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{ErrorKind, StartPosition};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::TieredStore;

async fn open(dir: &Path, cold: &Arc<ColdTier>) -> TieredStore {
    TieredStore::builder()
        .hot(HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Never))
        .cold(cold.clone())
        .background(false)
        .open()
        .await
        .unwrap()
}

/// Every path under `dir` whose name mentions `word`.
fn paths_mentioning(dir: &Path, word: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().contains(word) {
                found.push(path.display().to_string());
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    found
}

/// A topic no tier knows is `NotFound`, and asking for it — then closing the store —
/// writes nothing: no state file, no WAL directory, no cold marker (`topic` used to leave
/// `router/<topic>.end` and `cold/<topic>/topic` behind).
#[tokio::test]
async fn an_unknown_topic_is_not_found_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let store = open(dir.path(), &cold).await;
    let e = store.existing_topic("nosuchtopic").await.map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("topic 'nosuchtopic' does not exist"), "{e}");
    assert_eq!(
        store.existing_topic("bad name!").await.map(|_| ()).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    store.close().await;
    assert_eq!(paths_mentioning(dir.path(), "nosuchtopic"), Vec::<String>::new());
}

/// A topic the store has (open, in the WAL, or known only to cold after the data
/// directory was lost) is opened as `topic` opens it.
#[tokio::test]
async fn an_existing_topic_is_found_in_the_wal_and_in_cold_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let store = open(dir.path(), &cold).await;
    let topic = store.topic("orders").await.unwrap();
    append_range(&topic, 0, 20, 5).await;
    assert_eq!(store.existing_topic("orders").await.unwrap().high_watermark(), 20, "open");
    store.export_now("orders").await.unwrap();
    drop(topic);
    store.close().await;

    let store = open(dir.path(), &cold).await;
    assert_eq!(store.existing_topic("orders").await.unwrap().high_watermark(), 20, "in the WAL");
    store.close().await;

    // The data directory is lost: only cold knows the topic.
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();
    let store = open(dir.path(), &cold).await;
    assert!(store.topics().await.is_empty(), "nothing local names the topic");
    let topic = store.existing_topic("orders").await.unwrap();
    let mut reader = topic.reader(StartPosition::Earliest).await.unwrap();
    assert_eq!(reader.next().await.unwrap().unwrap().offset, 0);
    store.close().await;
}
