//! Opening a [`TieredStore`]: from a [`StoreConfig`] ([`TieredStore::open`]) or from
//! parts ([`StoreBuilder`]) — the WAL opened, every known topic recovered (concurrently),
//! the background tasks started.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures::stream::{self, StreamExt};
use parking_lot::Mutex;
use tier_core::clock::SharedClock;
use tier_core::{ErrorContext, ErrorKind, IntoTopicName, TierError, TierKind, TopicName};
use tier_hot::{HotConfig, HotTier};
use tokio::sync::watch;
#[cfg(feature = "warm")]
use tracing::warn;

use crate::backend::{ColdBackend, WarmBackend};
use crate::background;
use crate::config::{RouterConfig, StoreConfig};
use crate::state::{claim_state_dir, current_boot_id};
use crate::store::{StoreInner, TieredStore};
use crate::tiers::Tiers;
use crate::topic::TopicCore;

/// Topics [`StoreBuilder::open`] recovers at once: recovery of a topic is mostly waiting
/// (state files, warm's and cold's answers), so one slow topic takes one of these and the
/// others go on.
const OPEN_CONCURRENCY: usize = 16;

/// Builds a [`TieredStore`] from parts; see [`TieredStore::builder`].
#[derive(Debug, Default)]
pub struct StoreBuilder {
    hot: HotConfig,
    warm: Option<Arc<dyn WarmBackend>>,
    cold: Option<Arc<dyn ColdBackend>>,
    router: RouterConfig,
    topics: Vec<TopicName>,
    /// The first invalid name given to [`topics`](Self::topics), answered by `open`.
    invalid_topic: Option<TierError>,
    background: bool,
    boot_id: Option<String>,
    clock: Option<SharedClock>,
}

impl StoreBuilder {
    /// A builder holding the store `config` describes, its tiers connected — what
    /// [`TieredStore::open`] opens; set [`topics`](Self::topics) or
    /// [`background`](Self::background) before [`open`](Self::open) (a command-line tool
    /// that exports or prunes on demand opens without background tasks this way).
    ///
    /// Validates `config`, connects the warm tier — under
    /// `router.warm_failure_policy = "degrade"` an unreachable Valkey does not fail: the
    /// backend connects on first use and recovery opens degraded — and opens the cold
    /// tier after a quick probe that its store answers ([`tier_cold::ColdTier::connect`]:
    /// one listing, no retries, at most 10 s), so an unreachable S3 is one clear
    /// `Unavailable` at once.
    pub async fn from_config(config: StoreConfig) -> Result<Self, TierError> {
        config.validate().map_err(|e| {
            TierError::invalid(ErrorContext::tier(TierKind::Router), "invalid settings").with_source(e)
        })?;
        #[cfg(feature = "warm")]
        let degrade = config.router.warm_failure_policy == crate::WarmFailurePolicy::Degrade;
        #[allow(unused_mut)]
        let mut builder = TieredStore::builder().hot(config.hot).router(config.router);
        #[cfg(feature = "warm")]
        if let Some(warm) = config.warm {
            // A Valkey that has never had a replica while `warm.wait_replicas > 0` fails
            // the open under `fail` (no append could be confirmed) and is a warning
            // under `degrade` (`docs/warm.md`, "Replicas at open").
            let without_replicas =
                if degrade { tier_warm::WithoutReplicas::Warn } else { tier_warm::WithoutReplicas::Refuse };
            let opened = tier_warm::WarmTier::open(warm.clone(), without_replicas).await;
            let backend: Arc<dyn WarmBackend> = match opened {
                Ok(tier) => Arc::new(tier),
                // Under `degrade` an unreachable Valkey does not keep the store from
                // opening: the backend connects on first use (recovery opens degraded).
                Err(e) if degrade && e.kind() == tier_core::ErrorKind::Unavailable => {
                    warn!(error = %e.report(), "the warm tier is unreachable; opening degraded, connecting later");
                    Arc::new(crate::lazy_warm::LazyWarm::new(warm))
                }
                Err(e) => return Err(e),
            };
            builder = builder.warm(backend);
        }
        #[cfg(feature = "cold")]
        if let Some(cold) = config.cold {
            builder = builder.cold(Arc::new(tier_cold::ColdTier::connect(cold).await?));
        }
        Ok(builder)
    }

    /// The WAL's settings.
    pub fn hot(mut self, config: HotConfig) -> Self {
        self.hot = config;
        self
    }

    /// Enables the warm position with `warm`.
    pub fn warm(mut self, warm: Arc<dyn WarmBackend>) -> Self {
        self.warm = Some(warm);
        self
    }

    /// Enables the cold position with `cold`.
    pub fn cold(mut self, cold: Arc<dyn ColdBackend>) -> Self {
        self.cold = Some(cold);
        self
    }

    /// The router's settings.
    pub fn router(mut self, config: RouterConfig) -> Self {
        self.router = config;
        self
    }

    /// Topics to recover at open besides those found in the WAL directory (after a lost
    /// disk, the WAL knows none): strings or [`TopicName`]s ([`IntoTopicName`]). An
    /// invalid name makes [`open`](Self::open) fail `InvalidInput`.
    pub fn topics(mut self, topics: impl IntoIterator<Item: IntoTopicName>) -> Self {
        for topic in topics {
            match topic.into_topic_name() {
                Ok(name) => self.topics.push(name),
                Err(e) => {
                    self.invalid_topic.get_or_insert(e);
                }
            }
        }
        self
    }

    /// Whether to run the background exporter, deleter and warm trimmer (default
    /// `true`). Without them, call [`TieredStore::export_now`],
    /// [`TieredStore::run_retention_now`] and [`TieredStore::trim_warm_now`] yourself.
    pub fn background(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    /// The identity of the running OS boot, recorded with each offset reservation so that
    /// recovery knows whether the page cache (and every unsynced WAL write) survived.
    /// Default: Linux's `/proc/sys/kernel/random/boot_id` (elsewhere none is known, and
    /// recovery assumes the OS restarted). A simulation of a power cut passes a new one.
    pub fn boot_id(mut self, id: impl Into<String>) -> Self {
        self.boot_id = Some(id.into());
        self
    }

    /// The wall clock the store reads time from: the WAL's segment creation and seal
    /// times and the background deleter's "now" (see [`TieredStore::clock`]). Overrides
    /// [`HotConfig::clock`] whenever it is called; default the system clock. Tests and
    /// the simulation pass a [`ManualClock`](tier_core::clock::ManualClock).
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// Validates the settings, opens the WAL, recovers every known topic and starts the
    /// background tasks.
    ///
    /// A topic whose recovery fails (a damaged WAL topic, which the WAL keeps aside —
    /// see [`HotTier::damaged`] — or a tier that answers an error) does not fail the
    /// open: it is logged and listed by [`TieredStore::failed_topics`], the other topics
    /// open and serve, and [`TieredStore::topic`] for it tries its recovery again and
    /// answers the error while it fails. Errors are those of opening the WAL itself, of
    /// taking the router's state directory — `Fenced` when another store holds it or owns
    /// it (two stores whose data directories share a parent share the default one: set
    /// `router.state_dir`; see `docs/router.md`, "The state directory belongs to one
    /// store") — and invalid settings, including a warm backend whose capabilities lack
    /// `idempotent_append` (`InvalidInput`).
    pub async fn open(mut self) -> Result<TieredStore, TierError> {
        if let Some(invalid) = self.invalid_topic.take() {
            return Err(invalid);
        }
        let router_ctx = || ErrorContext::tier(TierKind::Router).location("config");
        self.router
            .validate()
            .map_err(|e| TierError::invalid(router_ctx(), "invalid router settings").with_source(e))?;
        // The writer re-sends a batch whose confirmation it lost (a `WAIT` that fell
        // short, a timed-out reply): warm must take the identical batch again as a no-op.
        if let Some(warm) = &self.warm
            && !warm.capabilities().idempotent_append
        {
            return Err(TierError::invalid(
                ErrorContext::tier(warm.kind()).location("config"),
                "the warm position needs a tier whose capabilities report idempotent_append (Tier contract, \
                 invariant 5): the writer re-sends a batch whose confirmation it lost",
            ));
        }
        if let Some(clock) = self.clock.take() {
            self.hot.clock = clock;
        }
        let state_dir = self.router.state_dir_for(&self.hot.data_dir);
        let data_dir = self.hot.data_dir.clone();
        let hot = HotTier::open(self.hot).await?;
        // The state directory is this store's alone (its lock, held while open, and its
        // `owner`): another store's checkpoints and reservations would pass for this
        // store's evidence, and a lost WAL would continue at offsets already acknowledged.
        let claim_dir = state_dir.clone();
        let claimed = tier_core::blocking::spawn(move || claim_state_dir(&claim_dir, &data_dir))
            .await
            .map_err(|e| {
                TierError::internal(ErrorContext::tier(TierKind::Router), "the state directory task failed")
                    .with_source(e)
            })
            .and_then(|claimed| claimed);
        let state_lock = match claimed {
            Ok(lock) => lock,
            Err(e) => {
                hot.close().await;
                return Err(e);
            }
        };
        let boot_id = self.boot_id.unwrap_or_else(current_boot_id);
        let tiers = Arc::new(Tiers {
            hot,
            warm: self.warm,
            cold: self.cold,
            config: self.router,
            boot_id,
            unacked: Default::default(),
            torn_in_warm: Default::default(),
            state_writes: Default::default(),
        });
        let (shutdown, _) = watch::channel(false);
        let store = TieredStore {
            inner: Arc::new(StoreInner {
                tiers,
                topics: Mutex::new(HashMap::new()),
                opening: Mutex::new(HashMap::new()),
                failed: Mutex::new(HashMap::new()),
                background: Mutex::new(Vec::new()),
                shutdown,
                export_lock: tokio::sync::Mutex::new(()),
                closed: AtomicBool::new(false),
                state_dir,
                state_lock: Mutex::new(Some(state_lock)),
            }),
        };
        let hot = &store.inner.tiers.hot;
        let damaged: Vec<TopicName> = hot.damaged().into_iter().map(|(name, _)| name).collect();
        let mut names = hot.topics();
        names.extend(damaged.iter().cloned());
        names.extend(self.topics);
        names.sort();
        names.dedup();
        // Topics recover concurrently (at most `OPEN_CONCURRENCY` at once); the first
        // failure, in topic order, that is not the topic's alone fails the open.
        // Each topic, its core and whether this open recovered it (or the error).
        type Recovered = Result<(Arc<TopicCore>, bool), TierError>;
        let results: Vec<(TopicName, Recovered)> = stream::iter(names)
            .map(|name| {
                let store = &store;
                async move {
                    let result = store.core_kept(&name).await;
                    (name, result)
                }
            })
            .buffer_unordered(OPEN_CONCURRENCY)
            .collect()
            .await;
        let mut opened = Vec::new();
        let mut failures: Vec<(TopicName, TierError)> = Vec::new();
        for (name, result) in results {
            match result {
                Ok((core, recovered)) => opened.extend(recovered.then_some((name, core))),
                Err(e) => failures.push((name, e)),
            }
        }
        failures.sort_by(|a, b| a.0.cmp(&b.0));
        // A failure of the topic's own data is the topic's alone: `core` logs and
        // remembers it — any failure of a topic the WAL kept aside as damaged (its files
        // fail their checks, whatever the kind: a flipped version byte is
        // `InvalidInput`), and `Corruption` or `Trimmed` of any other. Anything else — a
        // tier unreachable, a missing bucket, refused credentials — concerns every topic
        // and fails the open.
        if let Some((_, e)) = failures.into_iter().find(|(name, e)| {
            !damaged.contains(name) && !matches!(e.kind(), ErrorKind::Corruption | ErrorKind::Trimmed)
        }) {
            store.close().await;
            return Err(e);
        }
        // The open succeeds: the reports are handed out with the store.
        for (name, core) in &opened {
            store.hand_out_report(name, core).await;
        }
        if self.background {
            background::spawn_all(&store);
        }
        Ok(store)
    }
}

impl TieredStore {
    /// A builder: WAL settings, optional warm and cold backends, router settings.
    pub fn builder() -> StoreBuilder {
        StoreBuilder { background: true, ..StoreBuilder::default() }
    }

    /// Opens the store `config` describes, connecting the warm tier and opening the cold
    /// tier when configured (see [`StoreBuilder::from_config`]). The topics the WAL holds
    /// are recovered at open; any other topic is recovered on first use
    /// ([`topic`](Self::topic), [`recover_topic`](Self::recover_topic)).
    pub async fn open(config: StoreConfig) -> Result<Self, TierError> {
        StoreBuilder::from_config(config).await?.open().await
    }

    /// As [`open`](Self::open), and recovers `topics` at open besides those the WAL holds
    /// — after a lost disk the WAL knows none, and a topic whose recovery fails is then
    /// listed by [`failed_topics`](Self::failed_topics) before first use. Names are strings
    /// or [`TopicName`]s ([`IntoTopicName`]); an invalid one fails `InvalidInput`.
    pub async fn open_recovering(
        config: StoreConfig,
        topics: impl IntoIterator<Item: IntoTopicName>,
    ) -> Result<Self, TierError> {
        StoreBuilder::from_config(config).await?.topics(topics).open().await
    }
}
