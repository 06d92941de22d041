//! Blocking file work, off the async runtime.
//!
//! [`spawn`] runs a job on tokio's blocking pool, as `tokio::task::spawn_blocking` does,
//! and returns a [`Job`] to await. The WAL and the router run every blocking job through
//! it, so that a deterministic simulation can decide when jobs run.
//!
//! A thread that calls [`defer_jobs_here`] (the simulation's) queues the jobs it spawns
//! instead: they run on that thread, in the order spawned, from the runtime's
//! `on_thread_park` hook ([`on_park`]) — once every task is idle, before simulated time
//! moves — or when code that waits for a job without yielding calls [`run_deferred`]. A
//! job then ends at a point of the runtime's own schedule, not when a blocking thread
//! happened to run, and no thread but the runtime's takes part: a schedule replays
//! exactly whatever the machine's load.
//!
//! Such a thread can also hold its background seals ([`hold_seals_here`]): a held seal
//! stays queued, as a seal whose fsync has not started, until released — how the
//! simulation cuts the power between a rotation and its seal.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use std::sync::{Mutex, MutexGuard, PoisonError};

/// A job queued on a thread that defers its jobs.
struct Queued {
    seal: bool,
    run: Box<dyn FnOnce()>,
}

thread_local! {
    static DEFER: Cell<bool> = const { Cell::new(false) };
    static HOLD_SEALS: Cell<bool> = const { Cell::new(false) };
    static QUEUE: RefCell<VecDeque<Queued>> = const { RefCell::new(VecDeque::new()) };
    /// The task waiting in [`held_seal_at_idle`], and whether an idle runtime found a
    /// held seal since.
    static IDLE_WAITER: RefCell<Option<Waker>> = const { RefCell::new(None) };
    static HELD_AT_IDLE: Cell<bool> = const { Cell::new(false) };
}

/// Makes the jobs this thread spawns from now on queue until [`run_deferred`] (`true`),
/// or go to tokio's blocking pool (`false`, the default). For deterministic simulations,
/// whose current-thread runtime calls [`on_park`] from its `on_thread_park` hook.
pub fn defer_jobs_here(defer: bool) {
    DEFER.set(defer);
}

/// Keeps the background seals this thread queues from running (`true`) until released
/// (`false`, then they run with the other deferred jobs). Only where jobs are
/// [deferred](defer_jobs_here).
pub fn hold_seals_here(hold: bool) {
    HOLD_SEALS.set(hold);
}

/// Background seals queued on this thread and held ([`hold_seals_here`]).
pub fn held_seals_here() -> usize {
    QUEUE.with_borrow(|queue| queue.iter().filter(|job| job.seal).count())
}

/// Runs the jobs this thread queued, oldest first, including those they queue in turn
/// (held seals stay queued); returns how many ran. Does nothing on a thread that queues
/// none.
pub fn run_deferred() -> usize {
    let mut ran = 0;
    loop {
        let next = QUEUE.with_borrow_mut(|queue| {
            let at = queue.iter().position(|job| !(job.seal && HOLD_SEALS.get()))?;
            queue.remove(at)
        });
        let Some(job) = next else { return ran };
        (job.run)();
        ran += 1;
    }
}

/// The `on_thread_park` hook of a runtime on a thread that defers its jobs: runs them
/// ([`run_deferred`]); when none was left to run and a seal is held, wakes the task
/// waiting in [`held_seal_at_idle`].
pub fn on_park() {
    if run_deferred() == 0 && held_seals_here() > 0 {
        HELD_AT_IDLE.set(true);
        if let Some(waiter) = IDLE_WAITER.take() {
            waiter.wake();
        }
    }
}

/// Completes once the runtime went idle ([`on_park`]) with a background seal held
/// ([`hold_seals_here`]): every task waits, and the rotation that queued the seal is
/// done.
pub async fn held_seal_at_idle() {
    HELD_AT_IDLE.set(false);
    std::future::poll_fn(|cx| {
        if HELD_AT_IDLE.replace(false) {
            return Poll::Ready(());
        }
        IDLE_WAITER.set(Some(cx.waker().clone()));
        Poll::Pending
    })
    .await;
}

/// Runs `f` off the async runtime: on tokio's blocking pool, or queued on this thread
/// when it [defers its jobs](defer_jobs_here). Dropping the [`Job`] does not stop it.
///
/// # Panics
/// On the pool, outside a tokio runtime (as `spawn_blocking` does).
pub fn spawn<F, R>(f: F) -> Job<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    spawn_job(false, f)
}

/// [`spawn`] for the WAL's background seal, which a thread that defers its jobs can hold
/// ([`hold_seals_here`]).
pub fn spawn_seal<F>(f: F) -> Job<()>
where
    F: FnOnce() + Send + 'static,
{
    spawn_job(true, f)
}

fn spawn_job<F, R>(seal: bool, f: F) -> Job<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    if !DEFER.get() {
        return Job { inner: Inner::Pool(tokio::task::spawn_blocking(f)) };
    }
    let slot = Arc::new(Mutex::new(Slot { out: None, waker: None }));
    let filled = Arc::clone(&slot);
    let run = Box::new(move || {
        let out = std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            JobFailed::Panicked(message)
        });
        let waker = {
            let mut slot = lock(&filled);
            slot.out = Some(out);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    QUEUE.with_borrow_mut(|queue| queue.push_back(Queued { seal, run }));
    Job { inner: Inner::Queued(slot) }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A job [`spawn`]ed off the runtime; awaiting it gives its result.
#[derive(Debug)]
pub struct Job<R> {
    inner: Inner<R>,
}

#[derive(Debug)]
enum Inner<R> {
    Pool(tokio::task::JoinHandle<R>),
    Queued(Arc<Mutex<Slot<R>>>),
}

#[derive(Debug)]
struct Slot<R> {
    /// The result, once the job ran and until it is taken.
    out: Option<Result<R, JobFailed>>,
    waker: Option<Waker>,
}

impl<R> Job<R> {
    /// True once the job ended (its result not yet taken).
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Inner::Pool(handle) => handle.is_finished(),
            Inner::Queued(slot) => lock(slot).out.is_some(),
        }
    }
}

impl<R> Future for Job<R> {
    type Output = Result<R, JobFailed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().inner {
            Inner::Pool(handle) => Pin::new(handle).poll(cx).map_err(JobFailed::Join),
            Inner::Queued(slot) => {
                let mut slot = lock(slot);
                match slot.out.take() {
                    Some(out) => Poll::Ready(out),
                    None => {
                        slot.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                }
            }
        }
    }
}

/// A blocking job that did not return.
#[derive(Debug, thiserror::Error)]
pub enum JobFailed {
    /// The pool's task failed (panicked, or was cancelled as the runtime shut down).
    #[error(transparent)]
    Join(tokio::task::JoinError),
    /// A queued job panicked.
    #[error("the blocking job panicked: {0}")]
    Panicked(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deferring_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(on_park)
            .build()
            .expect("a runtime builds")
    }

    #[tokio::test]
    async fn a_job_runs_on_the_pool_by_default() {
        let job = spawn(|| std::thread::current().id());
        assert_ne!(job.await.expect("the job returns"), std::thread::current().id());
    }

    #[test]
    fn deferred_jobs_run_in_order_on_this_thread_once_the_runtime_idles() {
        let rt = deferring_runtime();
        defer_jobs_here(true);
        let order = Arc::new(Mutex::new(Vec::new()));
        let (first, second) = rt.block_on(async {
            let log = Arc::clone(&order);
            let a = spawn(move || {
                lock(&log).push("first job");
                std::thread::current().id()
            });
            let log = Arc::clone(&order);
            let b = spawn(move || lock(&log).push("second job"));
            // The jobs wait for the runtime to idle: this task's next step comes first.
            tokio::task::yield_now().await;
            lock(&order).push("task");
            assert!(!a.is_finished());
            let first = a.await;
            (first, b.await)
        });
        defer_jobs_here(false);
        assert_eq!(first.expect("the job returns"), std::thread::current().id());
        second.expect("the job returns");
        assert_eq!(*lock(&order), ["task", "first job", "second job"]);
    }

    #[test]
    fn a_held_seal_waits_while_other_jobs_run_and_is_seen_at_idle() {
        let rt = deferring_runtime();
        defer_jobs_here(true);
        hold_seals_here(true);
        let sealed = Arc::new(Mutex::new(false));
        let done = Arc::clone(&sealed);
        let seal = spawn_seal(move || *lock(&done) = true);
        rt.block_on(async {
            spawn(|| ()).await.expect("an unheld job runs");
            held_seal_at_idle().await;
        });
        assert_eq!(held_seals_here(), 1);
        assert!(!seal.is_finished());
        assert!(!*lock(&sealed));
        hold_seals_here(false);
        assert_eq!(run_deferred(), 1);
        defer_jobs_here(false);
        assert!(*lock(&sealed));
        assert!(seal.is_finished());
    }

    #[test]
    fn a_deferred_job_that_panics_fails_its_awaiter() {
        defer_jobs_here(true);
        let job = spawn(|| panic!("boom"));
        defer_jobs_here(false);
        assert_eq!(run_deferred(), 1);
        let out = futures::executor::block_on(job);
        assert!(matches!(out, Err(JobFailed::Panicked(ref m)) if m == "boom"), "{out:?}");
    }
}
