//! The topic marker: durable evidence in cold that a topic exists.
//!
//! A topic's segments reach cold only after their WAL segment is sealed, so for a while
//! cold holds nothing of a topic whose records were acknowledged. If the data directory
//! (the WAL and the router's state files) is lost then, nothing would tell a restart that
//! the topic ever existed, and it would hand out offset 0 again. The router writes this
//! marker before a topic's first offset is handed out and checks it when a topic opens
//! with no local evidence (see `docs/router.md`, "Crash recovery").

use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tier_core::{TierError, TopicName};

use crate::ColdTier;
use crate::error::{key_ctx, map_store_error};
use crate::stats::Counters;

impl ColdTier {
    /// Records durably that `topic` exists: one conditional PUT of the zero-byte object
    /// `<prefix>/<topic>/topic`. Idempotent (an existing marker is success). The marker
    /// is never deleted by expiry: it outlives every segment of the topic.
    pub async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        let key = self.layout().topic_marker_key(topic);
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        Counters::add(&self.counters.marker_puts, 1);
        match self.store().put_opts(&key, PutPayload::new(), opts).await {
            Ok(_)
            | Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(()),
            Err(e) => Err(map_store_error(key_ctx(topic, &key), "writing the topic marker", e)),
        }
    }

    /// Whether [`record_topic`](Self::record_topic) has recorded `topic` (one HEAD).
    pub async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        let key = self.layout().topic_marker_key(topic);
        Counters::add(&self.counters.head_requests, 1);
        match self.store().head(&key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(map_store_error(key_ctx(topic, &key), "checking for the topic marker", e)),
        }
    }
}
