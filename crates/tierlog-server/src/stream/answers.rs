//! [`Answers`]: the answers of one append stream's queued batches, in order, from the
//! reader task that queues the batches to the answerer task that writes the answers.
//!
//! Why not a channel: handing each answer over a channel wakes the answerer as its batch
//! is queued — in the same turn as the reader wakes the topic's writer with the batch.
//! When one turn of a tokio worker wakes two tasks, the first goes to the worker's run
//! queue and a parked worker thread is woken to take it; waking a parked thread on
//! another vCPU costs tens of µs on a small VM, and with one batch in flight that was a
//! third of the stream's latency (`docs/benchmarks.md`, "Server loopback (workload 10)"). Here, when a batch
//! is the only one in hand, the reader polls its answer with the answerer's waker, so the
//! answer wakes the answerer when it is ready and queuing the batch wakes only the topic's
//! writer. With more in hand the reader wakes the answerer at once (see
//! [`Answers::push`]): then a second thread taking work is what the stream wants.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use futures::future::{BoxFuture, MaybeDone, maybe_done};
use parking_lot::Mutex;

/// The answers of a stream's batches, in the order they were queued, each with what its
/// batch holds until it is answered (`H`), then why the stream ended (`E`).
pub(super) struct Answers<T, H, E> {
    inner: Mutex<Inner<T, H, E>>,
}

struct Inner<T, H, E> {
    queue: VecDeque<Slot<T, H>>,
    /// Why the stream ends, once the reader has said (until the answerer takes it).
    ending: Option<E>,
    /// The reader has said why the stream ends: a later [`Answers::end`] is ignored.
    ended: bool,
    /// The answerer's waker, from the last time it found nothing to take.
    waker: Option<Waker>,
    /// The answerer is gone: nothing more is taken.
    closed: bool,
}

/// One queued batch.
struct Slot<T, H> {
    /// Its answer, kept once ready.
    answer: MaybeDone<BoxFuture<'static, T>>,
    /// Released when the answer is taken.
    _hold: H,
}

/// [`Answers::push`]'s refusal: the answerer is gone (its client stopped reading).
#[derive(Debug)]
pub(super) struct AnswererGone;

/// What [`Answers::poll_take`] took.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken<E> {
    /// One or more answers, in order.
    Answers,
    /// Every answer has been taken, and the stream ends, for this reason.
    Ended(E),
}

impl<T, H, E> Answers<T, H, E> {
    pub(super) fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                ending: None,
                ended: false,
                waker: None,
                closed: false,
            }),
        }
    }

    /// Queues the answer of the next batch, and what the batch holds until it is
    /// answered; refused (both dropped) when the answerer is gone. `more_coming`: the
    /// reader already holds bytes of the batch after this one.
    ///
    /// When this is the only batch in hand — nothing queued before it, nothing more
    /// received — the answerer is not woken: the answer is polled with the answerer's
    /// waker, so it wakes the answerer when it is ready (or at once, if it already is).
    /// Otherwise the answerer is woken now, though it may find nothing ready: on a
    /// multi-threaded runtime that lets a second worker thread take the topic's writer,
    /// which the reader has just woken, while the reader goes on with the next batch — the
    /// stream's work spreads over two threads (eight batches in flight, `fsync = never`:
    /// ~70 µs a batch with this wake, ~140–280 µs without; `docs/benchmarks.md`, "Server
    /// loopback (workload 10)").
    pub(super) fn push(
        &self,
        answer: BoxFuture<'static, T>,
        hold: H,
        more_coming: bool,
    ) -> Result<(), AnswererGone> {
        let mut inner = self.inner.lock();
        if inner.closed {
            return Err(AnswererGone);
        }
        let mut answer = maybe_done(answer);
        if let Some(waker) = &inner.waker
            && (!inner.queue.is_empty()
                || more_coming
                || Pin::new(&mut answer).poll(&mut Context::from_waker(waker)).is_ready())
        {
            waker.wake_by_ref();
        }
        inner.queue.push_back(Slot { answer, _hold: hold });
        Ok(())
    }

    /// Says why the stream ends, after the answers queued; the first reason given is
    /// the one the answerer takes.
    pub(super) fn end(&self, ending: E) {
        let mut inner = self.inner.lock();
        if std::mem::replace(&mut inner.ended, true) {
            return;
        }
        inner.ending = Some(ending);
        if let Some(waker) = &inner.waker {
            waker.wake_by_ref();
        }
    }

    /// The answerer is gone: the answers queued are dropped (and what their batches
    /// hold, released), and [`push`](Self::push) refuses the next.
    pub(super) fn close(&self) {
        let mut inner = self.inner.lock();
        inner.closed = true;
        inner.queue.clear();
    }

    /// Moves the answers ready at the front of the queue, in order, to `ready`: ready
    /// once it took one or more, or once the queue is empty and the stream has ended.
    pub(super) fn poll_take(&self, cx: &mut Context<'_>, ready: &mut Vec<T>) -> Poll<Taken<E>> {
        let mut inner = self.inner.lock();
        while let Some(front) = inner.queue.front_mut() {
            if Pin::new(&mut front.answer).poll(cx).is_pending() {
                break;
            }
            let mut slot = inner.queue.pop_front().expect("the front is there");
            ready.extend(Pin::new(&mut slot.answer).take_output());
        }
        if !ready.is_empty() {
            return Poll::Ready(Taken::Answers);
        }
        if inner.queue.is_empty()
            && let Some(ending) = inner.ending.take()
        {
            return Poll::Ready(Taken::Ended(ending));
        }
        if !inner.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            inner.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use futures::FutureExt;
    use tokio::sync::oneshot;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn take(
        answers: &Answers<u32, (), &'static str>,
        waker: &Waker,
    ) -> (Poll<Taken<&'static str>>, Vec<u32>) {
        let mut ready = Vec::new();
        let poll = answers.poll_take(&mut Context::from_waker(waker), &mut ready);
        (poll, ready)
    }

    #[test]
    fn answers_come_out_in_queue_order_and_a_lone_batch_wakes_the_answerer_only_when_ready() {
        let answers = Answers::new();
        let count = Arc::new(Counting::default());
        let waker = Waker::from(Arc::clone(&count));
        // The answerer finds nothing and waits.
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));

        let (tx1, rx1) = oneshot::channel::<u32>();
        let (tx2, rx2) = oneshot::channel::<u32>();
        answers.push(rx1.map(Result::unwrap).boxed(), (), false).unwrap();
        // Queuing the only batch in hand woke nobody.
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // Queuing one behind it wakes the answerer at once (a second worker may take
        // what the reader woke); it finds nothing ready.
        answers.push(rx2.map(Result::unwrap).boxed(), (), false).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));

        // The second answer is ready first: nothing is taken, nobody is woken.
        tx2.send(2).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // The first answer wakes the answerer, which then takes both, in order.
        tx1.send(1).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(take(&answers, &waker), (Poll::Ready(Taken::Answers), vec![1, 2]));

        // The only batch in hand, its answer pending: `push` registers the answerer's
        // waker with the answer, which wakes it when ready.
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));
        let (tx4, rx4) = oneshot::channel::<u32>();
        answers.push(rx4.map(Result::unwrap).boxed(), (), false).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        tx4.send(4).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert_eq!(take(&answers, &waker), (Poll::Ready(Taken::Answers), vec![4]));

        // More coming behind a batch: the answerer is woken at once.
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));
        let (_tx5, rx5) = oneshot::channel::<u32>();
        answers.push(rx5.map(Result::unwrap).boxed(), (), true).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 4);
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));
        let answers = Answers::new();

        // An answer ready as it is queued wakes the waiting answerer at once.
        assert_eq!(take(&answers, &waker), (Poll::Pending, vec![]));
        answers.push(futures::future::ready(3).boxed(), (), false).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 5);
        // The ending comes after the answers queued before it.
        answers.end("drained");
        assert_eq!(take(&answers, &waker), (Poll::Ready(Taken::Answers), vec![3]));
        assert_eq!(take(&answers, &waker), (Poll::Ready(Taken::Ended("drained")), vec![]));
    }

    #[test]
    fn the_ending_wakes_a_waiting_answerer_and_a_closed_queue_refuses_and_releases() {
        let answers: Answers<u32, Arc<()>, &'static str> = Answers::new();
        let count = Arc::new(Counting::default());
        let waker = Waker::from(Arc::clone(&count));
        let mut ready = Vec::new();
        assert!(answers.poll_take(&mut Context::from_waker(&waker), &mut ready).is_pending());
        answers.end("client done");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // The first reason given is the one taken (the reader's guard ends again as it
        // is dropped).
        answers.end("reader dropped");
        assert_eq!(
            answers.poll_take(&mut Context::from_waker(&waker), &mut ready),
            Poll::Ready(Taken::Ended("client done"))
        );

        let answers: Answers<u32, Arc<()>, &'static str> = Answers::new();
        let hold = Arc::new(());
        answers.push(futures::future::pending().boxed(), Arc::clone(&hold), false).unwrap();
        assert_eq!(Arc::strong_count(&hold), 2);
        answers.close();
        // What the queued batch held is released, and the next push is refused.
        assert_eq!(Arc::strong_count(&hold), 1);
        assert!(answers.push(futures::future::ready(1).boxed(), Arc::clone(&hold), false).is_err());
    }
}
