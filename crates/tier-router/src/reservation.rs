//! The durable offset reservation of one topic (`<state_dir>/<topic>.reserved`).
//!
//! The writer never acknowledges an offset at or beyond the durable *reservation*
//! (`<state_dir>/<topic>.reserved`): before committing a group that ends beyond it, it
//! makes sure a reservation covering the group's end is durable. After a lost WAL and a
//! crash, recovery continues at the reservation, so no acknowledged offset is reused.
//! The chunk reserved beyond a group's end starts at [`MIN_RESERVATION_CHUNK`] and
//! doubles while reservations are used up in under a second (up to
//! [`MAX_RESERVATION_CHUNK`]), so the cost stays about one small synced write per chunk.
//!
//! The next reservation is written *ahead*: once less than half of the current chunk is
//! left, a new one (the group's end plus the next chunk) starts on the blocking pool
//! while appends continue below the current one. It is awaited only when a group ends
//! beyond the current reservation, so at a steady rate the writer never waits for the
//! state file's fsyncs (they overlap the WAL's writes). In-memory, `reserved` is only
//! ever the value of a reservation whose write finished; one in flight is never relied
//! on. Writes of the file are serialised (one in flight at a time): a reservation written
//! explicitly ([`Reservation::write`]) first waits for the one in flight.
//!
//! When the writer stops, it lowers the reservation to the commit point (nothing beyond
//! it was acknowledged).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

// The runtime's clock (paused in the simulation, so that chunk sizes replay exactly).
use tokio::time::Instant;

use parking_lot::{Condvar, Mutex};

use tier_core::{ErrorContext, Offset, TierError, TierKind, TopicName};
use tracing::warn;

use crate::state::{ReservationFile, write_reservation};

/// The first reservation chunk (offsets reserved beyond a group's end).
pub(crate) const MIN_RESERVATION_CHUNK: u64 = 1024;
/// The largest reservation chunk.
pub(crate) const MAX_RESERVATION_CHUNK: u64 = 1 << 20;
/// A reservation used up faster than this doubles the chunk.
const FAST_RESERVATION: Duration = Duration::from_secs(1);

/// The chunk of the next reservation: doubled (up to [`MAX_RESERVATION_CHUNK`]) when the
/// previous one lasted less than a second, otherwise unchanged.
pub(crate) fn next_chunk(chunk: u64, lasted: Option<Duration>) -> u64 {
    match lasted {
        Some(d) if d < FAST_RESERVATION => chunk.saturating_mul(2).min(MAX_RESERVATION_CHUNK),
        _ => chunk.clamp(MIN_RESERVATION_CHUNK, MAX_RESERVATION_CHUNK),
    }
}

/// The durable offset reservation of one topic.
#[derive(Debug)]
pub(crate) struct Reservation {
    /// Where the state files live.
    pub(crate) state_dir: PathBuf,
    /// No offset at or beyond this is acknowledged before a new reservation is durable.
    pub(crate) reserved: Offset,
    chunk: u64,
    since: Option<Instant>,
    /// What each reservation written records besides its offset: this boot, and whether
    /// the WAL fsyncs every append before it is acknowledged.
    boot: String,
    durable: bool,
    /// A reservation being written ahead (see the module docs): its offset and the
    /// blocking task writing it. Not relied on until it finished.
    ahead: Option<(Offset, Arc<Written>)>,
    /// The store's count of reservations being written ahead.
    in_flight: Arc<InFlight>,
}

/// The reservations being written ahead on the blocking pool, store-wide: what a test
/// that stops a process at a chosen point waits for first
/// ([`TieredStore::wait_for_state_writes`](crate::TieredStore::wait_for_state_writes)), so
/// that what the file holds after the stop does not depend on when a blocking thread ran.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    count: Mutex<usize>,
    done: Condvar,
}

/// The outcome of a reservation written ahead, once its blocking job finished (`None`
/// before; `Some(Err)` also when the job was dropped before it ran).
#[derive(Debug, Default)]
struct Written {
    outcome: Mutex<Option<Result<(), TierError>>>,
    done: Condvar,
}

impl Written {
    fn set(&self, outcome: Result<(), TierError>) {
        *self.outcome.lock() = Some(outcome);
        self.done.notify_all();
    }

    /// Blocks the calling thread until the job finished. Waiting without yielding to the
    /// runtime keeps the order in which the runtime's tasks run independent of when a
    /// blocking thread ran (the simulation replays a schedule exactly); the wait is one
    /// small file's write and two fsyncs, and comes only when a group needs the
    /// reservation before it is written. A job this thread
    /// [deferred](tier_core::blocking::defer_jobs_here) runs here first.
    fn wait(&self) -> Result<(), TierError> {
        tier_core::blocking::run_deferred();
        let mut outcome = self.outcome.lock();
        loop {
            if let Some(done) = outcome.take() {
                return done;
            }
            self.done.wait(&mut outcome);
        }
    }
}

/// The blocking job writing a reservation ahead: it sets the outcome when it ran, or, when
/// dropped before it ran (the runtime stopping), a failure.
struct WriteJob {
    written: Arc<Written>,
    topic: TopicName,
    outcome: Option<Result<(), TierError>>,
    _counted: Counted,
}

impl Drop for WriteJob {
    fn drop(&mut self) {
        let outcome = self.outcome.take().unwrap_or_else(|| {
            Err(TierError::internal(ctx(&self.topic), "the reservation job was dropped before it ran"))
        });
        self.written.set(outcome);
    }
}

/// One reservation written ahead, counted in [`InFlight`] until dropped (written, failed,
/// or its task dropped before it ran).
struct Counted(Arc<InFlight>);

impl Drop for Counted {
    fn drop(&mut self) {
        let mut count = self.0.count.lock();
        *count = count.saturating_sub(1);
        self.0.done.notify_all();
    }
}

impl InFlight {
    fn start(this: &Arc<Self>) -> Counted {
        *this.count.lock() += 1;
        Counted(Arc::clone(this))
    }

    /// Blocks the calling thread until no reservation is being written ahead (running
    /// first the jobs this thread [deferred](tier_core::blocking::defer_jobs_here)).
    pub(crate) fn wait(&self) {
        tier_core::blocking::run_deferred();
        let mut count = self.count.lock();
        while *count > 0 {
            self.done.wait(&mut count);
        }
    }
}

impl Reservation {
    /// The reservation found on disk (`reserved`, 0 when none); `boot` and `durable`
    /// are recorded with each new one.
    pub(crate) fn new(
        state_dir: PathBuf,
        reserved: Offset,
        boot: String,
        durable: bool,
        in_flight: Arc<InFlight>,
    ) -> Self {
        let chunk = MIN_RESERVATION_CHUNK;
        Self { state_dir, reserved, chunk, since: None, boot, durable, ahead: None, in_flight }
    }

    fn file(&self, offset: Offset) -> ReservationFile {
        ReservationFile { offset, boot: Some(self.boot.clone()), durable: self.durable }
    }
}

impl Reservation {
    /// Makes sure offsets below `end` may be acknowledged: when `end` exceeds the durable
    /// reservation, waits for the one written ahead, and writes a new one (`end` plus the
    /// adaptive chunk) if that does not cover `end` either. Then starts the next
    /// reservation ahead when less than half a chunk is left.
    pub(crate) async fn reserve(&mut self, topic: &TopicName, end: Offset) -> Result<(), TierError> {
        if end > self.reserved {
            self.finish_ahead(topic).await;
        }
        if end > self.reserved {
            self.chunk = next_chunk(self.chunk, self.since.map(|t| t.elapsed()));
            self.write(topic, end.saturating_add(self.chunk)).await?;
            self.since = Some(Instant::now());
        }
        self.write_ahead_if_due(topic, end);
        Ok(())
    }

    /// [`reserve`](Self::reserve) when the durable reservation already covers `end`
    /// (it then never waits): starts the next reservation ahead if one is due and returns
    /// true. False, with nothing done, when `end` is beyond it.
    pub(crate) fn covers(&mut self, topic: &TopicName, end: Offset) -> bool {
        if end > self.reserved {
            return false;
        }
        self.write_ahead_if_due(topic, end);
        true
    }

    /// Starts writing the next reservation on the blocking pool when none is in flight
    /// and less than half a chunk is left beyond `end`.
    fn write_ahead_if_due(&mut self, topic: &TopicName, end: Offset) {
        if self.ahead.is_none() && self.reserved.saturating_sub(end) < self.chunk / 2 {
            self.chunk = next_chunk(self.chunk, self.since.map(|t| t.elapsed()));
            let offset = end.saturating_add(self.chunk);
            let (dir, name, file) = (self.state_dir.clone(), topic.clone(), self.file(offset));
            let counted = InFlight::start(&self.in_flight);
            let written = Arc::new(Written::default());
            let job = WriteJob {
                written: Arc::clone(&written),
                topic: topic.clone(),
                outcome: None,
                _counted: counted,
            };
            tier_core::blocking::spawn(move || {
                let mut job = job;
                job.outcome = Some(write_reservation(&dir, &name, &file));
            });
            self.ahead = Some((offset, written));
            self.since = Some(Instant::now());
        }
    }

    /// Waits for the reservation written ahead, if any, and makes it the current one once
    /// durable (never lowering it); a failed one is logged and left to the next write.
    async fn finish_ahead(&mut self, topic: &TopicName) {
        let Some((offset, written)) = self.ahead.take() else { return };
        match written.wait() {
            Ok(()) => self.reserved = self.reserved.max(offset),
            Err(failed) => {
                warn!(topic = %topic, error = %failed.report(), "writing the offset reservation ahead failed");
            }
        }
    }

    /// Waits for the reservation written ahead, if any (the writer stops: its value is
    /// the one on disk, to be lowered from).
    pub(crate) async fn settle(&mut self, topic: &TopicName) {
        self.finish_ahead(topic).await;
    }

    /// Writes a reservation of exactly `offset` durably (on the blocking pool, after the
    /// one written ahead, if any) and records it as the current one.
    pub(crate) async fn write(&mut self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.finish_ahead(topic).await;
        let (dir, name, file) = (self.state_dir.clone(), topic.clone(), self.file(offset));
        tier_core::blocking::spawn(move || write_reservation(&dir, &name, &file))
            .await
            .map_err(|e| TierError::internal(ctx(topic), "the reservation task failed").with_source(e))??;
        self.reserved = offset;
        Ok(())
    }
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Router).topic(topic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reservation_chunk_doubles_only_when_used_up_fast() {
        assert_eq!(next_chunk(MIN_RESERVATION_CHUNK, None), MIN_RESERVATION_CHUNK);
        assert_eq!(next_chunk(1024, Some(Duration::from_millis(10))), 2048);
        assert_eq!(next_chunk(4096, Some(Duration::from_secs(5))), 4096);
        assert_eq!(next_chunk(MAX_RESERVATION_CHUNK, Some(Duration::ZERO)), MAX_RESERVATION_CHUNK);
        assert_eq!(next_chunk(3 << 19, Some(Duration::ZERO)), MAX_RESERVATION_CHUNK);
    }
}
