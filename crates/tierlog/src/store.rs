//! Opening the store a configuration describes, through the library
//! ([`StoreBuilder::from_config`]: the same warm connection, `degrade` behaviour and
//! quick cold probe as any embedding), and the cold tier alone for the commands that
//! inspect it directly.

use anyhow::Context;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::TopicName;
use tier_router::{StoreBuilder, StoreConfig, TieredStore, Topic};

/// Validates topic names given on the command line.
pub(crate) fn topic_name(name: &str) -> anyhow::Result<TopicName> {
    TopicName::new(name).map_err(|e| crate::exit::usage(e.to_string()))
}

/// The handle of topic `name` if some tier holds anything of it
/// ([`TieredStore::existing_topic`], which writes nothing for a topic that does not
/// exist); `topic 'NAME' does not exist` otherwise. Only an append creates a topic.
pub(crate) async fn existing_topic(store: &TieredStore, name: &TopicName) -> anyhow::Result<Topic> {
    store.existing_topic(name.as_str()).await.map_err(|e| {
        // A topic whose recovery failed exists: the store keeps its error.
        let failed = store.failed_topics().iter().any(|(t, _)| t == name);
        if e.kind() == tier_core::ErrorKind::NotFound && !failed {
            crate::cmd::no_such_topic(name.as_str())
        } else {
            anyhow::Error::new(e)
        }
    })
}

/// Opens the store: connects warm, probes and opens cold, opens the WAL and recovers
/// every topic it holds and `topics`. `background` runs the exporter, deleter and
/// trimmer.
pub(crate) async fn open(
    config: &StoreConfig,
    topics: Vec<TopicName>,
    background: bool,
) -> anyhow::Result<TieredStore> {
    let builder = StoreBuilder::from_config(config.clone()).await.context("opening the store")?;
    builder.topics(topics).background(background).open().await.context("opening the store")
}

/// The cold tier alone, after the library's quick reachability probe (for `status`,
/// `verify` and `inspect`, which list or read its objects directly).
pub(crate) async fn open_cold(config: &ColdConfig) -> anyhow::Result<ColdTier> {
    Ok(ColdTier::connect(config.clone()).await?)
}

/// A short description of where the cold tier lives (no secrets).
pub(crate) fn describe(config: &ColdConfig) -> String {
    format!("({})", config.location())
}
