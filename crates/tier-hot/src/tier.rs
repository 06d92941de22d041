//! [`HotTier`]: the topics of a data directory, their writer tasks, and the `Tier`
//! implementation.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::SystemTime,
};

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};
use tier_core::{
    ErrorContext, Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TierKind, Timestamp,
    TopicName,
};
use tokio::{
    sync::{broadcast, mpsc, oneshot},
    task::JoinHandle,
};
use tracing::warn;

use crate::config::HotConfig;
use crate::layout::{ctx, topic_dir};
use crate::read;
use crate::recovery::{Recovered, recover_topic};
use crate::retention;
use crate::segment::{SegmentEvent, SegmentInfo};
use crate::tail::Subscription;
use crate::topic::{ActiveView, TopicShared, TopicState, WriteStats};
use crate::writer::{Command, Writer};

/// Appends queued per topic before producers wait for the writer.
const WRITER_QUEUE: usize = 4096;
/// Segment events buffered for slow listeners.
const EVENT_BUFFER: usize = 1024;

/// The hot tier: a write-ahead log of segment files under one data directory, for any
/// number of topics. Cheap to clone (clones share the tier).
///
/// Open it with [`HotTier::open`] inside a tokio runtime; it runs one writer task per
/// topic. [`close`](Self::close) stops them after fsyncing what is unsynced.
#[derive(Clone, Debug)]
pub struct HotTier {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Arc<HotConfig>,
    topics: RwLock<HashMap<TopicName, Arc<TopicLog>>>,
    events: broadcast::Sender<SegmentEvent>,
    closed: AtomicBool,
    /// The data directory's exclusive lock, held until [`HotTier::close`] or drop.
    lock: Mutex<Option<std::fs::File>>,
}

#[derive(Debug)]
struct TopicLog {
    shared: Arc<TopicShared>,
    tx: mpsc::Sender<Command>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl HotTier {
    /// Opens (creating it if needed) the data directory of `config` and recovers every
    /// topic in it: sealed segments are mapped and checked (header, trailer, index), the
    /// active segment is scanned and a torn tail handled per
    /// [`HotConfig::recovery`], and each topic continues at exactly the offset after
    /// its last valid record.
    ///
    /// Errors: `Fenced` when another process (or another open `HotTier`) holds the data
    /// directory's lock; `Corruption` naming the file and byte position (a malformed
    /// sealed segment, a torn tail under [`RecoveryPolicy::Refuse`](crate::RecoveryPolicy),
    /// segments that are not contiguous); `Unavailable` on I/O failures.
    pub async fn open(config: HotConfig) -> Result<Self, TierError> {
        let config = Arc::new(config);
        let cfg = Arc::clone(&config);
        let (lock, found) = tokio::task::spawn_blocking(move || recover_all(&cfg)).await.map_err(|e| {
            TierError::internal(ErrorContext::tier(TierKind::Hot), format!("recovery task failed: {e}"))
        })??;
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let tier = Self {
            inner: Arc::new(Inner {
                config,
                topics: RwLock::new(HashMap::new()),
                events,
                closed: AtomicBool::new(false),
                lock: Mutex::new(Some(lock)),
            }),
        };
        {
            let mut topics = tier.inner.topics.write();
            for (name, recovered) in found {
                let log = tier.start_topic(name.clone(), recovered);
                topics.insert(name, log);
            }
        }
        Ok(tier)
    }

    /// The configuration the tier was opened with.
    pub fn config(&self) -> &HotConfig {
        &self.inner.config
    }

    /// The topics the tier knows (on disk or written since it opened), sorted.
    pub fn topics(&self) -> Vec<TopicName> {
        let mut names: Vec<TopicName> = self.inner.topics.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// A receiver of every topic's segment events (sealed, deleted), from now on.
    pub fn segment_events(&self) -> broadcast::Receiver<SegmentEvent> {
        self.inner.events.subscribe()
    }

    /// The sealed segments of `topic`, oldest first (empty for an unknown topic).
    pub fn sealed_segments(&self, topic: &TopicName) -> Vec<SegmentInfo> {
        self.lookup(topic)
            .map(|log| log.shared.state.read().sealed.iter().map(|s| s.info.clone()).collect())
            .unwrap_or_default()
    }

    /// Counters of `topic`'s writer since the tier opened (`None` for an unknown
    /// topic).
    pub fn write_stats(&self, topic: &TopicName) -> Option<WriteStats> {
        self.lookup(topic).map(|log| log.shared.stats.snapshot())
    }

    /// Seals `topic`'s active segment now, after the appends queued before this call,
    /// and starts a new one. Returns the sealed segment, or `None` when the active
    /// segment held no record (nothing to seal).
    pub async fn rotate(&self, topic: &TopicName) -> Result<Option<SegmentInfo>, TierError> {
        let Some(log) = self.lookup(topic) else { return Ok(None) };
        let (done, answer) = oneshot::channel();
        send(topic, &log.tx, Command::Rotate { done }).await?;
        answer.await.map_err(|_| closed(topic))?
    }

    /// A live-tail subscription yielding every committed record of `topic` from `from`
    /// on, in order, exactly once (see [`Subscription`]).
    pub fn subscribe(&self, topic: &TopicName, from: Offset) -> Result<Subscription, TierError> {
        let log = self.topic_or_create(topic)?;
        Ok(Subscription::new(Arc::clone(&log.shared), from))
    }

    /// Deletes sealed segments of every topic by age ([`HotConfig::retention_time`],
    /// measured from each segment's seal time to `now`) and size (while a topic's
    /// segment files take more than [`HotConfig::retention_bytes`]): oldest first,
    /// never the active segment, asking `can_delete` before each deletion and stopping
    /// at a topic's first refusal. Returns the deleted segments.
    ///
    /// Does blocking file I/O (unlink, directory fsync); call it from a blocking
    /// context or `spawn_blocking` in an async program.
    pub fn run_retention(
        &self,
        now: SystemTime,
        can_delete: &dyn Fn(&SegmentInfo) -> bool,
    ) -> Result<Vec<SegmentInfo>, TierError> {
        let logs: Vec<Arc<TopicLog>> = self.inner.topics.read().values().cloned().collect();
        let mut deleted = Vec::new();
        for log in logs {
            deleted.extend(retention::run_topic(
                &log.shared,
                &self.inner.config,
                now,
                can_delete,
                &self.inner.events,
            )?);
        }
        Ok(deleted)
    }

    /// Stops every writer task after the appends already queued, fsyncing unsynced
    /// data. Later calls on this tier (or its clones) fail with `Unavailable`.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let logs: Vec<Arc<TopicLog>> = self.inner.topics.write().drain().map(|(_, log)| log).collect();
        let mut tasks = Vec::new();
        for log in logs {
            if let Some(task) = log.task.lock().take() {
                tasks.push(task);
            }
            // Dropping the last sender ends the writer's loop.
        }
        for task in tasks {
            if let Err(e) = task.await {
                warn!(error = %e, "a WAL writer task failed");
            }
        }
        // Every writer has stopped: another process may take the directory now.
        drop(self.inner.lock.lock().take());
    }

    fn lookup(&self, topic: &TopicName) -> Option<Arc<TopicLog>> {
        self.inner.topics.read().get(topic).cloned()
    }

    fn topic_or_create(&self, topic: &TopicName) -> Result<Arc<TopicLog>, TierError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(closed(topic));
        }
        if let Some(log) = self.lookup(topic) {
            return Ok(log);
        }
        let mut topics = self.inner.topics.write();
        if let Some(log) = topics.get(topic) {
            return Ok(Arc::clone(log));
        }
        let log = self.start_topic(topic.clone(), Recovered { sealed: Vec::new(), active: None });
        topics.insert(topic.clone(), Arc::clone(&log));
        Ok(log)
    }

    fn start_topic(&self, name: TopicName, recovered: Recovered) -> Arc<TopicLog> {
        let config = &self.inner.config;
        let mut state = TopicState::new(config.cache_bytes);
        state.sealed = recovered.sealed;
        if let Some(active) = &recovered.active {
            state.active = Some(ActiveView::of(active));
            state.end = active.state.next_offset();
        }
        let dir = topic_dir(&config.data_dir, &name);
        let shared = Arc::new(TopicShared::new(name, dir, state, config.live_tail_batches));
        let (tx, rx) = mpsc::channel(WRITER_QUEUE);
        let writer =
            Writer::new(Arc::clone(&shared), Arc::clone(config), self.inner.events.clone(), recovered.active);
        let task = tokio::spawn(writer.run(rx));
        Arc::new(TopicLog { shared, tx, task: Mutex::new(Some(task)) })
    }
}

/// Recovers every topic directory under the data directory.
/// Name of the lock file in the data directory.
pub(crate) const LOCK_FILE: &str = ".lock";

/// Takes the data directory's exclusive lock, so a second process (or a second
/// `HotTier` in this one) cannot open the same WAL and interleave writes. The lock is
/// an advisory `flock` on `<data_dir>/.lock`, released when the file is closed — also
/// when the process dies, so a crash never leaves a stale lock.
fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, TierError> {
    let path = data_dir.join(LOCK_FILE);
    let ctx = || ErrorContext::tier(TierKind::Hot).location(path.display().to_string());
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| {
            TierError::unavailable(ctx(), format!("opening the data directory's lock file: {e}"))
                .with_source(e)
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(TierError::fenced(
            ctx(),
            format!("the data directory {} is in use by another tierlog process", data_dir.display()),
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(TierError::unavailable(ctx(), format!("locking the data directory: {e}")).with_source(e))
        }
    }
}

fn recover_all(config: &HotConfig) -> Result<(std::fs::File, Vec<(TopicName, Recovered)>), TierError> {
    let data_dir = &config.data_dir;
    let hot = || ErrorContext::tier(TierKind::Hot).location(data_dir.display().to_string());
    std::fs::create_dir_all(data_dir).map_err(|e| {
        TierError::unavailable(hot(), format!("creating the data directory: {e}")).with_source(e)
    })?;
    let lock = lock_data_dir(data_dir)?;
    let entries = std::fs::read_dir(data_dir).map_err(|e| {
        TierError::unavailable(hot(), format!("listing the data directory: {e}")).with_source(e)
    })?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            TierError::unavailable(hot(), format!("listing the data directory: {e}")).with_source(e)
        })?;
        let path = entry.path();
        let topic = match entry.file_name().to_str().map(TopicName::new) {
            Some(Ok(topic)) if path.is_dir() => topic,
            _ if entry.file_name() == LOCK_FILE => continue,
            _ => {
                warn!(path = ?path, "ignoring an entry of the data directory that is not a topic");
                continue;
            }
        };
        let recovered = recover_topic(&topic, &path, config)?;
        found.push((topic, recovered));
    }
    Ok((lock, found))
}

async fn send(topic: &TopicName, tx: &mpsc::Sender<Command>, cmd: Command) -> Result<(), TierError> {
    tx.send(cmd).await.map_err(|_| closed(topic))
}

fn closed(topic: &TopicName) -> TierError {
    TierError::unavailable(ctx(topic), "the hot tier is closed")
}

#[async_trait]
impl Tier for HotTier {
    fn kind(&self) -> TierKind {
        TierKind::Hot
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        Ok(self.lookup(topic).map_or(OffsetRange::empty_at(0), |log| log.shared.range()))
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let log = self.topic_or_create(topic)?;
        let (done, answer) = oneshot::channel();
        let tx = log.tx.clone();
        drop(log);
        send(topic, &tx, Command::Append { batch, done }).await?;
        answer.await.map_err(|_| closed(topic))?
    }

    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        match self.lookup(topic) {
            Some(log) => read::read(&log.shared, from, to, limit).await,
            None if from == 0 => Ok(Vec::new()),
            None => Err(TierError::trimmed(ctx(topic).offset(from), from, OffsetRange::empty_at(0))),
        }
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        match self.lookup(topic) {
            Some(log) => read::offset_for_timestamp(&log.shared, timestamp).await,
            None => Ok(None),
        }
    }
}
