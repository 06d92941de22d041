//! [`Tiers`]: the handles of the enabled tiers and the router's settings, shared by the
//! store, every topic's writer and readers, recovery and the background tasks.

use std::sync::Arc;

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
}
