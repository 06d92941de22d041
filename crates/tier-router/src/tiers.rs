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
    /// those offsets from warm ([`Tiers::warm_limit`]).
    pub(crate) unacked: Mutex<HashMap<TopicName, Vec<OffsetRange>>>,
    /// Per topic, the offsets of torn points the WAL recorded when this store opened it
    /// that warm held then (see `recovery/plan.rs`, `Plan::torn_in_warm`): while warm
    /// cannot be asked, the exporter does not record them lost in cold — warm holds
    /// acknowledged records there, which it exports once warm answers.
    pub(crate) torn_in_warm: Mutex<HashMap<TopicName, Vec<OffsetRange>>>,
    /// The offset reservations being written ahead (`reservation::InFlight`).
    pub(crate) state_writes: Arc<crate::reservation::InFlight>,
}

impl Tiers {
    /// How far warm may serve a read of `topic` at `n`: `Ok(limit)`, warm's records in
    /// `[n, limit)` may be served (`limit` is where the next offsets a degraded open skipped
    /// start, [`Offset::MAX`] when none follow); `Err(range)` when `n` lies in `range`,
    /// offsets a degraded open skipped where warm may hold records that were never
    /// acknowledged — never served.
    pub(crate) fn warm_limit(&self, topic: &TopicName, n: Offset) -> Result<Offset, OffsetRange> {
        let map = self.unacked.lock();
        let Some(ranges) = map.get(topic) else { return Ok(Offset::MAX) };
        if let Some(r) = ranges.iter().find(|r| r.contains(n)) {
            return Err(*r);
        }
        Ok(first_unacked(ranges, n))
    }

    /// `topic`'s offsets degraded opens skipped (see [`Tiers::unacked`]).
    pub(crate) fn unacked_of(&self, topic: &TopicName) -> Vec<OffsetRange> {
        self.unacked.lock().get(topic).cloned().unwrap_or_default()
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

/// The first offset at or after `from` inside one of `unacked` (offsets degraded opens
/// skipped), [`Offset::MAX`] when none is: where warm's records stop being ones to serve,
/// replay or confirm.
pub(crate) fn first_unacked(unacked: &[OffsetRange], from: Offset) -> Offset {
    unacked.iter().filter(|r| r.end > from).map(|r| r.start.max(from)).min().unwrap_or(Offset::MAX)
}
