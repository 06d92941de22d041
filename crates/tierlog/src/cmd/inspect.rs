//! Looking at the tiers' storage directly (without opening the store): the WAL's topic
//! directories and segment files, and the cold tier's topic folders.

use std::path::{Path, PathBuf};

use anyhow::Context;
use object_store::ObjectStore;
use tier_cold::ColdTier;
use tier_core::{Offset, TopicName};
use tier_hot::layout::{parse_gap_file_name, parse_segment_file_name};
use tierlog_server::continuity::RecordedLoss;

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

/// The losses `topic`'s WAL recorded (its gap marker files), in offset order.
pub(crate) fn wal_gaps(data_dir: &Path, topic: &TopicName) -> anyhow::Result<Vec<RecordedLoss>> {
    let mut gaps = Vec::new();
    for entry in list_dir(&data_dir.join(topic.as_str()))? {
        let name = entry.file_name();
        if let Some(range) = name.to_str().and_then(parse_gap_file_name) {
            gaps.push(RecordedLoss { range, marker: entry.path().display().to_string() });
        }
    }
    gaps.sort_by_key(|g| g.range.start);
    Ok(gaps)
}

/// The losses `topic`'s cold folder recorded (its gap marker objects), in offset order.
pub(crate) async fn cold_gaps(cold: &ColdTier, topic: &TopicName) -> anyhow::Result<Vec<RecordedLoss>> {
    let ranges =
        cold.recorded_gaps(topic).await.with_context(|| format!("listing {topic} in the cold tier"))?;
    Ok(ranges
        .into_iter()
        .map(|range| RecordedLoss { range, marker: cold.layout().gap_key(topic, range).to_string() })
        .collect())
}

/// The topics some tier's files hold anything of: a WAL directory, a file in the router's
/// state directory, a cold folder (what `status` lists).
pub(crate) async fn known_topics(
    config: &tier_router::StoreConfig,
    cold: Option<&ColdTier>,
) -> anyhow::Result<Vec<TopicName>> {
    let mut names = wal_topics(&config.hot.data_dir)?;
    names.extend(state_topics(&state_dir(config))?);
    if let Some(cold) = cold {
        names.extend(cold_topics(cold).await?);
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// A topic no tier holds, named by a command that does not append (only an append
/// creates a topic).
#[derive(Debug)]
pub(crate) struct NoSuchTopic(String);

impl std::fmt::Display for NoSuchTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "topic '{}' does not exist: no tier holds any of it", self.0)
    }
}

impl std::error::Error for NoSuchTopic {}

/// The error for a topic no tier holds: what every command that does not append says.
pub(crate) fn no_such_topic(name: &str) -> anyhow::Error {
    anyhow::Error::new(NoSuchTopic(name.to_owned()))
}

/// `name`, which must be one of `known`; [`no_such_topic`] otherwise.
pub(crate) fn require_known(name: TopicName, known: &[TopicName]) -> anyhow::Result<TopicName> {
    if known.contains(&name) { Ok(name) } else { Err(no_such_topic(name.as_str())) }
}

/// The WAL data directory's lock ([`tier_hot::lock_data_dir`], the one the WAL takes when
/// it opens), for a command that reads the WAL's
/// files without opening it and must not read them while another process writes,
/// rotates or prunes them. `None` when `data_dir` does not exist (nothing to read, and
/// nothing is created). Released when dropped.
pub(crate) fn lock_data_dir(data_dir: &Path) -> anyhow::Result<Option<std::fs::File>> {
    if !data_dir.is_dir() {
        return Ok(None);
    }
    Ok(Some(tier_hot::lock_data_dir(data_dir)?))
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
/// data directory (the library's choice, `StoreConfig::state_dir`).
pub(crate) fn state_dir(config: &tier_router::StoreConfig) -> PathBuf {
    config.state_dir()
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
