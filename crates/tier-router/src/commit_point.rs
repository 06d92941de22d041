//! A topic's commit point (high watermark): the writer moves it ([`CommitPoint`]),
//! readers and the exporter read it and wait for it to pass an offset ([`Committed`]).
//!
//! It is moved on every commit, and almost always nobody waits for it: moving it is an
//! atomic store and one atomic load of the count of waiters, and it wakes waiters only
//! when there are some. (A `tokio::sync::watch` channel locks eight notifiers on every
//! send, which on a single-record append without fsync is a measurable share of the
//! commit.)
//!
//! No wake-up is lost: a waiter registers with the notifier, then counts itself, then
//! reads the point; the writer stores the point, then reads the count. Both count and
//! point are sequentially consistent, so either the writer sees the waiter and wakes it,
//! or the waiter's read comes after the store and sees the new point.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tier_core::Offset;
use tokio::sync::Notify;

#[derive(Debug)]
struct Shared {
    at: AtomicU64,
    /// The writer stopped: waiting for the point to move ends.
    closed: AtomicBool,
    /// Tasks in [`Committed::wait_for`], registered with `moved`.
    waiting: AtomicUsize,
    moved: Notify,
}

/// The writer's side: it moves the commit point, and closes it when it stops (or is
/// dropped).
#[derive(Debug)]
pub(crate) struct CommitPoint {
    shared: Arc<Shared>,
}

/// A reader's side: the commit point, and a wait for it to pass an offset. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Committed {
    shared: Arc<Shared>,
}

/// The writer stopped before the commit point reached what was waited for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Closed;

impl CommitPoint {
    /// A commit point at `at`, and its readers' side.
    pub(crate) fn new(at: Offset) -> (Self, Committed) {
        let shared = Arc::new(Shared {
            at: AtomicU64::new(at),
            closed: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            moved: Notify::new(),
        });
        (Self { shared: Arc::clone(&shared) }, Committed { shared })
    }

    /// Where the commit point is.
    pub(crate) fn get(&self) -> Offset {
        self.shared.at.load(Ordering::SeqCst)
    }

    /// Moves the commit point to `at` and wakes the tasks waiting for it to move.
    pub(crate) fn set(&self, at: Offset) {
        self.shared.at.store(at, Ordering::SeqCst);
        if self.shared.waiting.load(Ordering::SeqCst) > 0 {
            self.shared.moved.notify_waiters();
        }
    }

    /// Ends every wait for the point to move ([`Closed`]); it stays readable.
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.moved.notify_waiters();
    }
}

impl Drop for CommitPoint {
    fn drop(&mut self) {
        self.close();
    }
}

impl Committed {
    /// Where the commit point is.
    pub(crate) fn get(&self) -> Offset {
        self.shared.at.load(Ordering::SeqCst)
    }

    /// Waits until `pred` holds for the commit point and returns it; [`Closed`] when the
    /// writer stopped first (a point that already satisfies `pred` is returned even then).
    pub(crate) async fn wait_for(&self, pred: impl Fn(Offset) -> bool) -> Result<Offset, Closed> {
        /// Counts a waiter in `waiting` while it lives.
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let shared = &*self.shared;
        loop {
            let moved = shared.moved.notified();
            let mut moved = std::pin::pin!(moved);
            // Registered before it counts itself and reads the point (see the module docs).
            moved.as_mut().enable();
            shared.waiting.fetch_add(1, Ordering::SeqCst);
            let _counted = Counted(&shared.waiting);
            let at = shared.at.load(Ordering::SeqCst);
            if pred(at) {
                return Ok(at);
            }
            if shared.closed.load(Ordering::SeqCst) {
                return Err(Closed);
            }
            moved.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_point_passes_its_offset_and_not_before() {
        let (point, committed) = CommitPoint::new(3);
        assert_eq!(committed.wait_for(|at| at >= 3).await, Ok(3));
        let waiter = tokio::spawn({
            let committed = committed.clone();
            async move { committed.wait_for(|at| at >= 10).await }
        });
        // Moves short of the offset leave it waiting.
        for at in 4..10 {
            while point.shared.waiting.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            point.set(at);
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished(), "woke at {at}");
        }
        point.set(12);
        assert_eq!(tokio::time::timeout(Duration::from_secs(10), waiter).await.unwrap().unwrap(), Ok(12));
        assert_eq!(point.shared.waiting.load(Ordering::SeqCst), 0, "a waiter gone is not counted");
    }

    #[tokio::test]
    async fn closing_ends_waits_but_a_point_already_reached_is_still_returned() {
        let (point, committed) = CommitPoint::new(5);
        let waiter = tokio::spawn({
            let committed = committed.clone();
            async move { committed.wait_for(|at| at > 5).await }
        });
        while point.shared.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        drop(point);
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(10), waiter).await.unwrap().unwrap(),
            Err(Closed)
        );
        assert_eq!(committed.wait_for(|at| at == 5).await, Ok(5));
        assert_eq!(committed.wait_for(|at| at > 5).await, Err(Closed));
        assert_eq!(committed.get(), 5);
    }

    /// Many moves while a waiter comes and goes: it never misses the move that satisfies
    /// it (a lost wake-up would leave it waiting forever).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_wake_up_is_lost_between_threads() {
        let (point, committed) = CommitPoint::new(0);
        let waiter = tokio::spawn(async move {
            let mut seen = 0;
            while seen < 20_000 {
                seen = committed.wait_for(|at| at > seen).await.unwrap();
            }
            seen
        });
        for at in 1..=20_000 {
            point.set(at);
            if at % 64 == 0 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(tokio::time::timeout(Duration::from_secs(30), waiter).await.unwrap().unwrap(), 20_000);
    }
}
