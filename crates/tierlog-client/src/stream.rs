//! [`AppendStream`]: batches over one upgraded connection, answered in order
//! (`docs/server.md`, "Append streams").
//!
//! Two tasks own the connection: the writer sends the batches callers queue, in queue
//! order, and hands each caller's answer slot to the reader *before* sending its batch;
//! the reader takes the server's answers in the same order and fills the slots. When the
//! stream ends — the server's close frame, or the connection failing — the reader fails
//! every slot still waiting, saying whether its batch may have been appended.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tierlog_api::frame::{Decoder, Frame, encode_end, encode_magic, encode_record, record_frame_len};
use tierlog_api::{ApiError, AppendResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Record};

/// Batches queued to the writer and not yet sent.
const QUEUED: usize = 64;

/// Bytes asked of the socket per read (answers are 21 bytes each).
const READ_CHUNK: usize = 16 << 10;

type Answer = oneshot::Sender<Result<AppendResponse, Error>>;

/// A batch to send and where its answer goes.
struct Queued {
    body: Bytes,
    answer: Answer,
}

/// Why a stream ended.
#[derive(Clone, Debug)]
enum Ended {
    /// The server's close frame: no batch it did not answer was appended.
    Closed(ApiError),
    /// The connection failed or the server left without a close frame.
    Broken(String),
}

impl Ended {
    /// The error for a batch the server did not answer: `sent` says whether it was sent.
    fn error(&self, sent: bool) -> Error {
        match self {
            Ended::Closed(error) => Error::Api { status: error.kind().status(), error: error.clone() },
            Ended::Broken(why) if sent => Error::Stream {
                message: format!(
                    "the append stream broke before the server answered ({why}): the batch may have been appended"
                ),
                outcome_unknown: true,
            },
            Ended::Broken(why) => Error::Stream {
                message: format!(
                    "the append stream had ended ({why}): the batch was not sent, nothing was appended"
                ),
                outcome_unknown: false,
            },
        }
    }
}

/// What the handles and the two tasks share.
#[derive(Debug, Default)]
struct Shared {
    ended: Mutex<Option<Ended>>,
}

impl Shared {
    /// Records why the stream ended (the first reason wins).
    fn end(&self, why: Ended) -> Ended {
        self.ended.lock().get_or_insert(why).clone()
    }

    fn ended(&self) -> Ended {
        self.ended.lock().clone().unwrap_or_else(|| Ended::Broken("the stream's tasks are gone".into()))
    }
}

/// An append stream ([`Client::append_stream`](crate::Client::append_stream)): batches sent
/// one after another over one connection without waiting for each answer. Cheap to clone;
/// clones share the stream, and any number of tasks may append at once — their batches
/// are sent, and get offsets, in the order their `append` calls queued them. The stream
/// closes when the last clone is dropped (the server answers what it was sent first).
#[derive(Clone, Debug)]
pub struct AppendStream {
    tx: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
}

impl AppendStream {
    /// Starts the writer and the reader on `io`, an upgraded connection.
    pub(crate) fn start(io: reqwest::Upgraded) -> Self {
        let (rd, wr) = tokio::io::split(io);
        let (tx, queue) = mpsc::channel(QUEUED);
        let (sent_tx, sent) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        tokio::spawn(write(wr, queue, sent_tx, Arc::clone(&shared)));
        tokio::spawn(read(rd, sent, Arc::clone(&shared)));
        Self { tx, shared }
    }

    /// Appends `records` as one batch (`timestamp` [`SERVER_CLOCK`](crate::SERVER_CLOCK)
    /// for the server's clock; `offset` is ignored): their offsets once every enabled
    /// write tier of the server's store holds them. Several calls may wait at once; each
    /// batch is sent as soon as it is queued. [`queue`](Self::queue) and then awaiting its
    /// answer is the same in two steps.
    ///
    /// Errors: the server's answer refusing the batch (as [`Client::append_binary`]'s:
    /// [`Error::kind`], [`Error::may_commit`]) — the stream goes on; `closed` when the
    /// server ended the stream (draining) before this batch: it was not appended;
    /// [`Error::Stream`] when the connection failed, saying whether the batch may have
    /// been appended.
    ///
    /// [`Client::append_binary`]: crate::Client::append_binary
    pub async fn append(&self, records: &[Record]) -> Result<AppendResponse, Error> {
        self.queue(records).await?.await
    }

    /// Queues `records` as one batch and returns once it has its place in the stream:
    /// it is sent after every batch queued before it and gets offsets after theirs. The
    /// [`PendingAppend`] resolves to its answer, as [`append`](Self::append) does;
    /// dropping it does not withdraw the batch. An error here (the stream has ended)
    /// means the batch was not sent.
    pub async fn queue(&self, records: &[Record]) -> Result<PendingAppend, Error> {
        let frames: usize = records.iter().map(record_frame_len).sum();
        let mut body = BytesMut::with_capacity(frames + 5);
        for r in records {
            encode_record(&mut body, r);
        }
        encode_end(&mut body);
        let (answer, answered) = oneshot::channel();
        if self.tx.send(Queued { body: body.freeze(), answer }).await.is_err() {
            return Err(self.shared.ended().error(false));
        }
        Ok(PendingAppend { answered, shared: Arc::clone(&self.shared) })
    }
}

/// A batch queued on an [`AppendStream`] ([`AppendStream::queue`]): resolves to the
/// server's answer.
#[derive(Debug)]
#[must_use = "the batch is sent whether or not this is awaited; await it for its offsets"]
pub struct PendingAppend {
    answered: oneshot::Receiver<Result<AppendResponse, Error>>,
    shared: Arc<Shared>,
}

impl std::future::Future for PendingAppend {
    type Output = Result<AppendResponse, Error>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let answer = std::task::ready!(std::pin::Pin::new(&mut self.answered).poll(cx));
        std::task::Poll::Ready(answer.unwrap_or_else(|_| Err(self.shared.ended().error(true))))
    }
}

/// The writer: the magic, then each queued batch, its answer slot handed to the reader
/// first. Ends the connection's sending side once every handle is dropped.
async fn write(
    mut wr: WriteHalf<reqwest::Upgraded>,
    mut queue: mpsc::Receiver<Queued>,
    sent: mpsc::UnboundedSender<Answer>,
    shared: Arc<Shared>,
) {
    let mut magic = BytesMut::new();
    encode_magic(&mut magic);
    if let Err(e) = wr.write_all(&magic).await {
        shared.end(Ended::Broken(e.to_string()));
        return;
    }
    while let Some(Queued { body, answer }) = queue.recv().await {
        if let Err(mpsc::error::SendError(answer)) = sent.send(answer) {
            // The reader has ended the stream: this batch is not sent.
            let _ = answer.send(Err(shared.ended().error(false)));
            break;
        }
        if let Err(e) = wr.write_all(&body).await {
            // The reader sees the connection fail too and answers what was sent.
            shared.end(Ended::Broken(e.to_string()));
            break;
        }
    }
    // Every handle is gone (or the stream broke): the server answers what it has and
    // closes. Batches still queued are answered as not sent.
    let _ = wr.shutdown().await;
    queue.close();
    while let Some(Queued { answer, .. }) = queue.recv().await {
        let _ = answer.send(Err(shared.ended().error(false)));
    }
}

/// The reader: each answer frame fills the oldest waiting slot; at the end, every slot
/// still waiting gets the reason.
async fn read(
    mut rd: ReadHalf<reqwest::Upgraded>,
    mut sent: mpsc::UnboundedReceiver<Answer>,
    shared: Arc<Shared>,
) {
    let mut decoder = Decoder::new();
    let mut input = BytesMut::new();
    let ended = 'stream: loop {
        input.reserve(READ_CHUNK);
        match rd.read_buf(&mut input).await {
            Ok(0) => {
                let why = match decoder.finish() {
                    Ok(()) => "the server closed the connection without a close frame".to_owned(),
                    Err(e) => e.to_string(),
                };
                break Ended::Broken(why);
            }
            Ok(_) => decoder.push_bytes(input.split().freeze()),
            Err(e) => break Ended::Broken(e.to_string()),
        }
        loop {
            let answer = match decoder.next_frame() {
                Ok(None) => break,
                Ok(Some(Frame::Appended { start, end })) => Ok(AppendResponse { start, end }),
                Ok(Some(Frame::Error(error))) => Err(Error::Api { status: error.kind().status(), error }),
                Ok(Some(Frame::Close(error))) => break 'stream Ended::Closed(error),
                Ok(Some(other)) => {
                    break 'stream Ended::Broken(format!(
                        "the server sent a frame a stream does not carry: {other:?}"
                    ));
                }
                Err(e) => break 'stream Ended::Broken(e.to_string()),
            };
            match sent.try_recv() {
                // A caller that stopped waiting (dropped its append) gets nothing.
                Ok(slot) => {
                    let _ = slot.send(answer);
                }
                Err(_) => {
                    break 'stream Ended::Broken("the server answered a batch that was not sent".into());
                }
            }
        }
    };
    let ended = shared.end(ended);
    sent.close();
    while let Ok(slot) = sent.try_recv() {
        let _ = slot.send(Err(ended.error(true)));
    }
}
