//! Producers running inside the runner process (for scenarios that stop servers rather
//! than the producer): each appends batches of three self-describing records in a loop
//! and records every acknowledgement and error.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use tier_router::{NewRecord, Topic};
use tokio::task::JoinHandle;

use crate::{
    ChaosError,
    ack::Ack,
    payload::{self, RecordId},
};

/// What the producers saw.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) acks: Mutex<Vec<Ack>>,
    pub(crate) errors: AtomicU64,
}

impl Tally {
    /// (acknowledged appends, failed appends) so far.
    pub(crate) fn counts(&self) -> (usize, u64) {
        (self.acks.lock().len(), self.errors.load(Ordering::SeqCst))
    }
}

/// Running producers; [`stop`](Self::stop) ends them.
#[derive(Debug)]
pub(crate) struct Producers {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
    pub(crate) tally: Arc<Tally>,
}

impl Producers {
    /// Starts `n` producers on `topic` (writers `0..n`).
    pub(crate) fn start(topic: &Topic, n: u64) -> Self {
        Self::start_writers(topic, 0..n)
    }

    /// Starts one producer per writer id in `writers` on `topic` (ids must differ from
    /// those of earlier producers of the topic, whose records are checked together).
    pub(crate) fn start_writers(topic: &Topic, writers: std::ops::Range<u64>) -> Self {
        Self::start_batches(topic, writers, 3)
    }

    /// [`start_writers`](Self::start_writers) with `records` records in each append.
    pub(crate) fn start_batches(topic: &Topic, writers: std::ops::Range<u64>, records: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let tasks = writers
            .map(|w| tokio::spawn(produce(topic.clone(), w, records, Arc::clone(&stop), Arc::clone(&tally))))
            .collect();
        Self { stop, tasks, tally }
    }

    /// Stops them and returns every acknowledgement.
    pub(crate) async fn stop(self) -> Result<Vec<Ack>, ChaosError> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            t.await.map_err(|e| ChaosError::Other(format!("producer task: {e}")))?;
        }
        Ok(self.tally.acks.lock().clone())
    }
}

async fn produce(topic: Topic, writer: u64, per_append: u64, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut seq = 0;
    while !stop.load(Ordering::SeqCst) {
        let records = (seq..seq + per_append)
            .map(|s| NewRecord::new(1, payload::encode(RecordId { writer, seq: s })))
            .collect();
        match topic.append(records).await {
            Ok(range) => tally.acks.lock().push(Ack { range, writer, first_seq: seq }),
            Err(_) => {
                tally.errors.fetch_add(1, Ordering::SeqCst);
                // Pace retries during an outage.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        seq += per_append;
    }
}

/// How long [`until`] waits for what it waits for (acknowledgements, a refusal).
const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `done()` holds, polling every 5 ms, for at most [`PATIENCE`]; returns
/// whether it held. The producers report nothing else to wait on.
pub(crate) async fn until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}
