//! [`Tiers`]: the handles of the enabled tiers and the router's settings, shared by the
//! store, every topic's writer and readers, recovery and the background tasks.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tier_core::{Offset, OffsetRange, TopicName};
use tier_hot::HotTier;

use crate::backend::{ColdBackend, WarmBackend};
use crate::config::RouterConfig;

/// The enabled tiers and the router settings, shared by every task.
#[derive(Debug)]
pub(crate) struct Tiers {
    pub(crate) hot: HotTier,
    pub(crate) warm: Option<Arc<dyn WarmBackend>>,
    pub(crate) cold: Option<Arc<dyn ColdBackend>>,
    pub(crate) config: RouterConfig,
    /// The OS boot this store runs in (recorded with each offset reservation).
    pub(crate) boot_id: String,
    /// Per topic, the offsets degraded opens skipped where warm may still hold records
    /// that were never acknowledged (see [`RecoveryReport::skipped`](crate::RecoveryReport::skipped)):
    /// set when the topic opens, cleared once warm holds none of them. Readers never take
    /// those offsets from warm in place of the WAL's gap.
    pub(crate) unacked: Mutex<HashMap<TopicName, Vec<OffsetRange>>>,
}

impl Tiers {
    /// Whether `n` of `topic` lies in offsets a degraded open skipped that warm may still
    /// hold never-acknowledged records at.
    pub(crate) fn is_unacked(&self, topic: &TopicName, n: Offset) -> bool {
        self.unacked.lock().get(topic).is_some_and(|ranges| ranges.iter().any(|r| r.contains(n)))
    }

    /// Records `ranges` as `topic`'s (see [`Tiers::unacked`]); none forget it.
    pub(crate) fn set_unacked(&self, topic: &TopicName, ranges: Vec<OffsetRange>) {
        let mut map = self.unacked.lock();
        if ranges.is_empty() {
            map.remove(topic);
        } else {
            map.insert(topic.clone(), ranges);
        }
    }
}
