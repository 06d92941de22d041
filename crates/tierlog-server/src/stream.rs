//! `POST /v1/topics/{topic}/append-stream` with `Upgrade: tierlog-append/1`: an append
//! stream. The connection is upgraded and carries the binary framing both ways: the
//! client sends batches (record frames, then an end frame) without waiting for answers,
//! the server keeps up to [`WINDOW`] of them waiting for their answers (and
//! [`IN_FLIGHT_BYTES`] built or in the router's queue) and answers each, in order, with
//! its offsets (an appended frame) or why it was refused (an error frame).
//! Batches are queued in the order they arrive ([`Topic::enqueue_batch`]), so their
//! offsets follow the stream's order. When the server ends the stream — draining, or a
//! malformed frame — it answers every batch it took, then sends a close frame: no batch
//! after the ones answered was appended. `docs/server.md`, "Append streams".

mod answers;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures::FutureExt;
use futures::future::BoxFuture;
use hyper_util::rt::TokioIo;
use tier_core::metrics::APPEND_ERRORS;
use tier_router::{IntoTopicName, OffsetRange, Topic, TopicName};
use tierlog_api::frame::{
    Decoder, Frame, FrameRecord, encode_appended, encode_close, encode_error, encode_magic, record_frame_len,
};
use tierlog_api::{APPEND_STREAM_PROTOCOL, ApiError, ErrorKind};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::debug;

use crate::AppState;
use crate::append::{build, new_record, now_ms};
use crate::error::{HttpError, api_error};
use crate::listen::stopped;

use answers::{Answers, Taken};

/// Batches of one stream queued and not yet answered: with this many, the reader waits
/// for an answer before it queues the next (the client's writes then wait in TCP's
/// buffers).
pub(crate) const WINDOW: usize = 32;

/// Framed bytes of one stream's batches decoded and not yet answered: the reader waits
/// for room before queuing the next batch (a batch larger than this waits until
/// it is alone). With the batch being received (at most `max_body_bytes`), what one
/// stream holds in memory.
pub(crate) const IN_FLIGHT_BYTES: usize = 64 << 20;

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 128 << 10;

/// Whether the request asks to upgrade to an append stream.
fn asks_for_stream(request: &Request) -> bool {
    let has = |name: header::HeaderName, token: &str| {
        request.headers().get_all(name).iter().any(|v| {
            v.to_str().is_ok_and(|v| v.split(',').any(|part| part.trim().eq_ignore_ascii_case(token)))
        })
    };
    has(header::CONNECTION, "upgrade") && has(header::UPGRADE, APPEND_STREAM_PROTOCOL)
}

pub(crate) async fn open(
    State(state): State<AppState>,
    Path(topic): Path<String>,
    mut request: Request,
) -> Response {
    if !asks_for_stream(&request) {
        return HttpError::invalid(format!(
            "an append stream is opened with `Connection: upgrade` and `Upgrade: {APPEND_STREAM_PROTOCOL}` \
             (docs/server.md, \"Append streams\"); to append one batch, POST to /v1/topics/{{topic}}/records"
        ))
        .into_response();
    }
    // The topic is opened (and created) with the first batch: a stream that appends
    // nothing leaves nothing behind.
    let name = match topic.into_topic_name() {
        Ok(name) => name,
        Err(e) => return HttpError::from(e).into_response(),
    };
    if state.draining.load(std::sync::atomic::Ordering::SeqCst) {
        return HttpError::new(ErrorKind::Closed, "the server is draining").into_response();
    }
    let upgrade = hyper::upgrade::on(&mut request);
    let guard = state.tasks.enter();
    tokio::spawn(async move {
        let _guard = guard;
        match upgrade.await {
            Ok(upgraded) => Session::new(state, name).run(TokioIo::new(upgraded)).await,
            Err(e) => debug!(error = %e, "an append stream's upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, APPEND_STREAM_PROTOCOL)
        .body(Body::empty())
        .expect("a valid response")
}

/// The answer to one batch, in the stream's order.
type Answer = BoxFuture<'static, Result<OffsetRange, ApiError>>;

/// What a queued batch holds until it is answered: its place in the [`WINDOW`] and its
/// share of the stream's [`IN_FLIGHT_BYTES`].
type Held = (OwnedSemaphorePermit, OwnedSemaphorePermit);

/// The answers the reader hands the answerer, then why the stream ends (`None`: the
/// client ended it).
type StreamAnswers = Answers<Result<OffsetRange, ApiError>, Held, Option<ApiError>>;

/// A batch refused before it reached the router: counted as the failed append it is.
fn refused(error: ApiError) -> Answer {
    metrics::counter!(APPEND_ERRORS).increment(1);
    failed(error)
}

/// An answer already known: the batch failed with `error` (counted where it failed).
fn failed(error: ApiError) -> Answer {
    futures::future::ready(Err(error)).boxed()
}

/// One append stream: a reader task decodes the client's batches, builds them and queues
/// them to the router, in order, and hands their answers to the answerer task, which
/// writes them. Two tasks, so that receiving the next batch and answering the last one
/// run at once; the batch is built where it is received, and its answer wakes the
/// answerer only once it is ready ([`Answers`]), so queuing a batch wakes one task, the
/// topic's writer.
struct Session {
    state: AppState,
    name: TopicName,
    /// Opened at the first batch.
    topic: Option<Topic>,
}

impl Session {
    fn new(state: AppState, name: TopicName) -> Self {
        Self { state, name, topic: None }
    }

    async fn run<IO: AsyncRead + AsyncWrite + Send + Unpin + 'static>(self, io: IO) {
        let (rd, wr) = tokio::io::split(io);
        let answers = Arc::new(StreamAnswers::new());
        let answerer = Answerer { name: self.name.clone(), answers: Arc::clone(&answers) };
        let guard = self.state.tasks.enter();
        tokio::spawn(async move {
            let _guard = guard;
            answerer.run(wr).await;
        });
        self.read(rd, &answers).await;
    }

    /// Reads, decodes and queues the client's batches until the client ends the stream,
    /// the server drains, or a frame is malformed; then tells the answerer why.
    async fn read<R: AsyncRead + Unpin>(mut self, mut rd: R, answers: &StreamAnswers) {
        // However the reader stops — a panic included — the answerer is told, answers
        // what it has and closes the connection, instead of waiting for a reader that is
        // gone (with no reason given, without a close frame: the client treats the
        // unanswered batches as undecided).
        let mut ends = EndOnDrop { answers, why: None };
        let window = Arc::new(Semaphore::new(WINDOW));
        let budget = Arc::new(Semaphore::new(IN_FLIGHT_BYTES));
        let mut shutdown = self.state.shutdown.clone();
        let mut decoder = Decoder::new();
        let mut input = BytesMut::new();
        let mut batch = Batch::default();
        let ending = 'stream: loop {
            let read = tokio::select! {
                biased;
                () = stopped(&mut shutdown) => break 'stream Some(draining()),
                read = async {
                    input.reserve(READ_CHUNK);
                    rd.read_buf(&mut input).await
                } => read,
            };
            match read {
                Ok(0) => break None,
                Ok(_) => decoder.push_bytes(input.split().freeze()),
                Err(e) => {
                    debug!(topic = %self.name, error = %e, "an append stream's connection failed");
                    break None;
                }
            }
            loop {
                let frame = match decoder.next_frame() {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => break 'stream Some(ApiError::new(ErrorKind::InvalidInput, e.to_string())),
                };
                match frame {
                    Frame::Record(r) => batch.push(r, self.state.max_body),
                    Frame::End => {
                        let batch = std::mem::take(&mut batch);
                        let share = u32::try_from(batch.bytes.min(IN_FLIGHT_BYTES)).unwrap_or(u32::MAX);
                        let room = async {
                            let place = Arc::clone(&window).acquire_owned().await;
                            let bytes = Arc::clone(&budget).acquire_many_owned(share).await;
                            (place.expect("never closed"), bytes.expect("never closed"))
                        };
                        let held = tokio::select! {
                            biased;
                            () = stopped(&mut shutdown) => break 'stream Some(draining()),
                            held = room => held,
                        };
                        // Not raced with the drain from here: a batch queued to the router
                        // is always handed to the answerer, which answers it.
                        let answer = self.queue(batch.finish()).await;
                        let more_coming = decoder.buffered() > 0;
                        if answers.push(answer, held, more_coming).is_err() {
                            // The answerer is gone (the client stopped reading).
                            return;
                        }
                    }
                    other => {
                        break 'stream Some(ApiError::new(
                            ErrorKind::InvalidInput,
                            format!("an append stream carries record and end frames only, not {other:?}"),
                        ));
                    }
                }
            }
        };
        ends.why = ending;
    }

    /// Queues a batch received (or refuses it): its answer.
    async fn queue(&mut self, batch: Result<Vec<FrameRecord>, ApiError>) -> Answer {
        let records = match batch {
            Ok(records) => records,
            Err(error) => return refused(error),
        };
        let now = now_ms();
        let records: Vec<_> = records.into_iter().map(|r| new_record(r, now)).collect();
        let builder = match build(&self.name, &records) {
            Ok(builder) => builder,
            Err(HttpError(error)) => return refused(error),
        };
        drop(records);
        let topic = match &self.topic {
            Some(topic) => topic,
            None => match self.state.store.topic(self.name.clone()).await {
                Ok(topic) => self.topic.insert(topic),
                Err(e) => return failed(api_error(&e)),
            },
        };
        match topic.enqueue_batch(builder).await {
            Ok(pending) => pending.map(|result| result.map_err(|e| api_error(&e))).boxed(),
            // Counted by the router.
            Err(e) => failed(api_error(&e)),
        }
    }
}

/// Ends a stream's answers when dropped, with the reason the reader gave (`None`: the
/// client ended the stream, or the reader stopped without one).
struct EndOnDrop<'a> {
    answers: &'a StreamAnswers,
    why: Option<ApiError>,
}

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.answers.end(self.why.take());
    }
}

/// The error a draining server ends a stream with.
fn draining() -> ApiError {
    ApiError::new(ErrorKind::Closed, "the server is draining: the batches not answered were not appended")
}

/// The batch being received.
#[derive(Default)]
struct Batch {
    records: Vec<FrameRecord>,
    /// Their framed bytes.
    bytes: usize,
    /// Why it will be refused (too large).
    refused: Option<ApiError>,
}

impl Batch {
    fn push(&mut self, record: FrameRecord, max_bytes: usize) {
        self.bytes += record_frame_len(&record);
        if self.bytes > max_bytes {
            self.records = Vec::new();
            self.refused.get_or_insert_with(|| {
                ApiError::new(
                    ErrorKind::TooLarge,
                    format!("the batch is larger than {max_bytes} bytes framed"),
                )
            });
        } else if self.refused.is_none() {
            self.records.push(record);
        }
    }

    fn finish(self) -> Result<Vec<FrameRecord>, ApiError> {
        match self.refused {
            Some(error) => Err(error),
            None if self.records.is_empty() => {
                Err(ApiError::new(ErrorKind::InvalidInput, "no records to append"))
            }
            None => Ok(self.records),
        }
    }
}

/// Writes the answers of the batches the reader queued, in order.
struct Answerer {
    name: TopicName,
    answers: Arc<StreamAnswers>,
}

impl Answerer {
    async fn run<W: AsyncWrite + Unpin>(self, mut wr: W) {
        let mut out = BytesMut::with_capacity(1024);
        encode_magic(&mut out);
        let mut ready = Vec::new();
        let ending = loop {
            // Answers ready together go out in one write.
            let taken = std::future::poll_fn(|cx| self.answers.poll_take(cx, &mut ready)).await;
            for answer in ready.drain(..) {
                encode_answer(&mut out, answer);
            }
            if let Taken::Ended(ending) = taken {
                break ending;
            }
            if wr.write_all(&out).await.is_err() {
                // The client is gone: the batches it sent are appended all the same.
                self.answers.close();
                return;
            }
            out.clear();
        };
        // Every batch taken is answered; say why the stream ends.
        if let Some(error) = ending {
            debug!(topic = %self.name, error = %error, "the server ends an append stream");
            encode_close(&mut out, &error);
        }
        if wr.write_all(&out).await.is_ok() {
            let _ = wr.shutdown().await;
        }
    }
}

/// An answer as its frame: appended with the offsets, or the error.
fn encode_answer(out: &mut BytesMut, answer: Result<OffsetRange, ApiError>) {
    match answer {
        Ok(range) => encode_appended(out, range.start, range.end),
        Err(error) => encode_error(out, &error),
    }
}
