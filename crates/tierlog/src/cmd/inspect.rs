//! Looking at the tiers' storage directly (without opening the store): the WAL's topic
//! directories and segment files, and the cold tier's topic folders.

use std::path::{Path, PathBuf};

use anyhow::Context;
use object_store::ObjectStore;
use tier_cold::ColdTier;
use tier_core::{Offset, TopicName};
use tier_hot::layout::parse_segment_file_name;

/// One WAL segment file.
#[derive(Clone, Debug)]
pub(crate) struct WalFile {
    /// Its path.
    pub(crate) path: PathBuf,
    /// The base offset its name encodes.
    pub(crate) base: Offset,
    /// Its size in bytes.
    pub(crate) bytes: u64,
}

/// The entries of `dir`; none when it does not exist.
fn list_dir(dir: &Path) -> anyhow::Result<Vec<std::fs::DirEntry>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    entries.map(|e| e.with_context(|| format!("cannot list {}", dir.display()))).collect()
}

/// The topics with a directory under the WAL's `data_dir` (none when it does not exist).
pub(crate) fn wal_topics(data_dir: &Path) -> anyhow::Result<Vec<TopicName>> {
    let mut topics = Vec::new();
    for entry in list_dir(data_dir)? {
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Some(name) = entry.file_name().to_str()
            && let Ok(topic) = TopicName::new(name)
        {
            topics.push(topic);
        }
    }
    topics.sort();
    Ok(topics)
}

/// The segment files of `topic` in offset order.
pub(crate) fn wal_files(data_dir: &Path, topic: &TopicName) -> anyhow::Result<Vec<WalFile>> {
    let mut files = Vec::new();
    for entry in list_dir(&data_dir.join(topic.as_str()))? {
        let name = entry.file_name();
        let Some(base) = name.to_str().and_then(parse_segment_file_name) else { continue };
        let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
        files.push(WalFile { path: entry.path(), base, bytes });
    }
    files.sort_by_key(|f| f.base);
    Ok(files)
}

/// The topics with a folder in the cold tier.
pub(crate) async fn cold_topics(cold: &ColdTier) -> anyhow::Result<Vec<TopicName>> {
    let prefix = cold.layout().prefix().clone();
    let listing =
        cold.store().list_with_delimiter(Some(&prefix)).await.context("listing the cold tier's topics")?;
    let mut topics: Vec<TopicName> = listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename())
        .filter_map(|name| TopicName::new(name).ok())
        .collect();
    topics.sort();
    Ok(topics)
}

/// The router's state directory: `router.state_dir`, else `router` beside the WAL's
/// data directory (as the library chooses it).
pub(crate) fn state_dir(config: &tier_router::StoreConfig) -> PathBuf {
    config.router.state_dir.clone().unwrap_or_else(|| {
        config.hot.data_dir.parent().map_or_else(|| PathBuf::from("router"), |p| p.join("router"))
    })
}

/// The topics with a file in the router's state directory (`<topic>.end`, `.reserved`,
/// `.fenced`, `.losses`, `.unacked`); none when it does not exist.
pub(crate) fn state_topics(state_dir: &Path) -> anyhow::Result<Vec<TopicName>> {
    let mut topics = Vec::new();
    for entry in list_dir(state_dir)? {
        let name = entry.file_name();
        if let Some((topic, kind)) = name.to_str().and_then(|n| n.rsplit_once('.'))
            && ["end", "reserved", "fenced", "losses", "unacked"].contains(&kind)
            && let Ok(topic) = TopicName::new(topic)
        {
            topics.push(topic);
        }
    }
    topics.sort();
    topics.dedup();
    Ok(topics)
}
