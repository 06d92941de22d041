//! A client of tierlog's HTTP API (`tierlog serve`, `docs/server.md`): reqwest with
//! rustls, no OpenSSL.
//!
//! ```no_run
//! use futures::StreamExt;
//! use tierlog_client::{Client, NewRecordJson, Start};
//!
//! # async fn example() -> Result<(), tierlog_client::Error> {
//! let client = Client::new("http://127.0.0.1:7171")?;
//! let offsets = client.append("orders", vec![NewRecordJson::new("first")]).await?;
//! let mut records = client.read("orders", Start::Offset(offsets.start)).await?;
//! let first = records.next().await.expect("the read follows the live tail")?;
//! assert_eq!(&first.payload[..], b"first");
//! # Ok(())
//! # }
//! ```
//!
//! Reads use the binary framing (`tierlog_api::frame`), decoded as the body arrives: a
//! stream that follows the live tail holds about one response chunk, however long it runs.
//! [`Client::read_with_tiers`] asks for the framing's tier frames as well, which say
//! which tier served the records after them.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use tierlog_api::frame::{Decoder, Frame, FrameError, MAGIC, encode_magic, encode_record, record_frame_len};
pub use tierlog_api::frame::{FrameRecord as Record, SERVER_CLOCK};
pub use tierlog_api::{
    ApiError, AppendRequest, AppendResponse, Data, ErrorKind, ExportResponse, Format, HeaderJson,
    NewRecordJson, RangeJson, RecordJson, RecoveryJson, RecoveryList, ResumeRequest, Start, Tier, TopicInfo,
    TopicList, VerifyReport,
};
use tierlog_api::{CONTENT_TYPE_BATCH, CONTENT_TYPE_LINES};

mod stream;

pub use stream::{AppendStream, PendingAppend};

/// What can go wrong talking to the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error (`kind` says what to do), or ended a read with
    /// one.
    #[error("{}", describe_api(*status, error))]
    Api {
        /// The HTTP status (the last frame of a read: 200).
        status: u16,
        /// The error.
        error: ApiError,
    },
    /// The request could not be made or the answer not read (connection, TLS, body).
    #[error("talking to the server")]
    Http(#[from] reqwest::Error),
    /// A read's body was not valid binary framing.
    #[error("reading the server's records")]
    Frame(#[from] FrameError),
    /// A follow gave up reconnecting: the server stayed away ([`Reconnect`]); `source` is
    /// the last attempt's error.
    #[error("the server did not come back within {} s", waited.as_secs())]
    GaveUp {
        /// How long the follow tried.
        waited: Duration,
        /// The last attempt's error.
        #[source]
        source: Box<Error>,
    },
    /// An answer that is not what the API says it is.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// An append stream's connection broke or ended before the server answered a batch
    /// ([`AppendStream::append`]): with `outcome_unknown` the batch was sent and may have
    /// been appended; without, it was never sent and was not appended.
    #[error("{message}")]
    Stream {
        /// What happened.
        message: String,
        /// Whether the batch may have been appended.
        outcome_unknown: bool,
    },
}

/// [`Error::Api`]'s message: the status the server answered with, or — for an error that
/// ended a read whose answer had begun (status 200) — that the server ended it.
fn describe_api(status: u16, error: &ApiError) -> String {
    if status == 200 {
        format!("the server ended the read: {error}")
    } else {
        format!("the server answered {status}: {error}")
    }
}

impl Error {
    /// The API's error kind, for an error the server answered.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Api { error, .. } => Some(error.kind()),
            _ => None,
        }
    }

    /// Of an append the server refused with its outcome unknown, the offsets at which the
    /// records may still be committed: appending them again may store them twice. `None`
    /// when the server said nothing of the append lasts — and for an error that is not
    /// the server's answer (a connection lost after the request was sent leaves the
    /// outcome unknown too, without offsets).
    pub fn may_commit(&self) -> Option<RangeJson> {
        match self {
            Error::Api { error, .. } => error.may_commit(),
            _ => None,
        }
    }
}

/// A bearer token; `Debug` prints `***`.
#[derive(Clone)]
struct Token(HeaderValue);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// Builds a [`Client`]: a bearer token, a CA certificate for a server whose certificate
/// no public root signs. `Debug` does not show the token.
pub struct ClientBuilder {
    url: String,
    token: Option<String>,
    ca_pem: Option<Vec<u8>>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("ca_pem", &self.ca_pem.is_some())
            .finish()
    }
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Trusts only this CA certificate (PEM) for HTTPS, e.g. a self-signed server's.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, Error> {
        // Below the server's 30 s wait for a request on an idle connection, so the pool
        // never sends on a connection the server is closing.
        let mut http = reqwest::Client::builder().pool_idle_timeout(std::time::Duration::from_secs(20));
        if let Some(pem) = &self.ca_pem {
            http = http.tls_certs_only([reqwest::Certificate::from_pem(pem)?]);
        }
        let token = match self.token {
            Some(t) => {
                let mut value = HeaderValue::try_from(format!("Bearer {t}"))
                    .map_err(|_| Error::Unexpected("the token is not a valid header value".into()))?;
                value.set_sensitive(true);
                Some(Token(value))
            }
            None => None,
        };
        Ok(Client { http: http.build()?, base: self.url.trim_end_matches('/').to_owned(), token })
    }
}

/// A client of one server. Cheap to clone (clones share connections).
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<Token>,
}

/// A stream of records read, in offset order; it ends when a read without follow is
/// done, and with an error the server ended the read with.
pub type RecordStream = BoxStream<'static, Result<Record, Error>>;

/// A record read and the tier that served it (`None` when the read did not say: a
/// binary read, or a server that predates the field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The record.
    pub record: Record,
    /// Which part of the store served it.
    pub tier: Option<Tier>,
}

/// A stream of [`Served`] records, as [`RecordStream`].
pub type ServedStream = BoxStream<'static, Result<Served, Error>>;

/// How [`Client::follow`] reconnects: it waits `first_delay`, doubling each time up to
/// `max_delay`, between attempts, and gives up once the server has been away for
/// `give_up_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reconnect {
    /// The wait before the first attempt.
    pub first_delay: Duration,
    /// The longest wait between two attempts.
    pub max_delay: Duration,
    /// How long the server may stay away before the follow gives up.
    pub give_up_after: Duration,
}

impl Default for Reconnect {
    /// 100 ms, doubling up to 2 s, for at most 60 s.
    fn default() -> Self {
        Self {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            give_up_after: Duration::from_secs(60),
        }
    }
}

/// What a [`Client::follow`] stream yields.
#[derive(Debug)]
#[non_exhaustive]
pub enum FollowEvent {
    /// The next record.
    Record(Served),
    /// The stream broke (`error` says how); the follow reconnects and will resume at
    /// offset `next`, for at most `give_up_after`.
    Disconnected {
        /// Why the stream broke.
        error: Error,
        /// The offset the follow resumes at.
        next: u64,
        /// How long it tries.
        give_up_after: Duration,
    },
    /// The follow reconnected and goes on at offset `next`.
    Resumed {
        /// The offset it resumed at.
        next: u64,
    },
}

/// A [`Client::follow`] stream: records, and when it broke and resumed.
pub type FollowStream = BoxStream<'static, Result<FollowEvent, Error>>;

/// Whether a follow whose stream ended with `e` should reconnect: the connection failed
/// or broke, or the server is draining or did not answer in time. Anything else (an
/// unknown topic, trimmed offsets, a malformed body, a refused token) would fail again.
fn reconnects(e: &Error) -> bool {
    match e {
        Error::Http(_) | Error::Stream { .. } => true,
        Error::Api { error, .. } => matches!(error.kind(), ErrorKind::Closed | ErrorKind::Unavailable),
        _ => false,
    }
}

/// The state of a [`Client::follow`].
struct Follow {
    client: Client,
    topic: String,
    wire: Wire,
    reconnect: Reconnect,
    /// The offset after the last record delivered (the read's start before the first).
    next: u64,
    /// Records still to deliver (`None`: no limit).
    remaining: Option<u64>,
    /// The read under way; `None` while reconnecting.
    records: Option<ServedStream>,
    /// While reconnecting: when the stream broke, and the next wait.
    outage: Option<(Instant, Duration)>,
}

impl Follow {
    /// The next event; `None` once done (the limit reached, or after the error that
    /// ended the follow).
    async fn next_event(&mut self) -> Option<Result<FollowEvent, Error>> {
        if self.remaining == Some(0) {
            return None;
        }
        loop {
            if let Some(records) = &mut self.records {
                let broke = match records.next().await {
                    Some(Ok(served)) => {
                        self.next = served.record.offset + 1;
                        self.remaining = self.remaining.map(|n| n - 1);
                        return Some(Ok(FollowEvent::Record(served)));
                    }
                    Some(Err(e)) if reconnects(&e) => e,
                    Some(Err(e)) => {
                        self.remaining = Some(0);
                        return Some(Err(e));
                    }
                    // A follow ends only with an error; a body that simply stops is a
                    // connection closed under it.
                    None => Error::Unexpected("the server ended the follow without an error".into()),
                };
                self.records = None;
                // The client's give-up deadline is the user's real time, outside the store
                #[allow(clippy::disallowed_methods)]
                let now = Instant::now();
                self.outage = Some((now, self.reconnect.first_delay));
                return Some(Ok(FollowEvent::Disconnected {
                    error: broke,
                    next: self.next,
                    give_up_after: self.reconnect.give_up_after,
                }));
            }
            let (since, delay) = self.outage.expect("a follow without a read is reconnecting");
            let left = self.reconnect.give_up_after.saturating_sub(since.elapsed());
            tokio::time::sleep(delay.min(left)).await;
            let from = Start::Offset(self.next);
            match self.client.open_read(&self.topic, from, true, self.remaining, self.wire).await {
                Ok(read) => {
                    self.records = Some(read.records);
                    self.outage = None;
                    return Some(Ok(FollowEvent::Resumed { next: self.next }));
                }
                Err(e) if reconnects(&e) && since.elapsed() < self.reconnect.give_up_after => {
                    self.outage = Some((since, (delay * 2).min(self.reconnect.max_delay)));
                }
                Err(e) if reconnects(&e) => {
                    self.remaining = Some(0);
                    return Some(Err(Error::GaveUp { waited: since.elapsed(), source: Box::new(e) }));
                }
                Err(e) => {
                    self.remaining = Some(0);
                    return Some(Err(e));
                }
            }
        }
    }
}

/// How a read's records travel: the binary framing, with or without tier frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// Records only.
    Binary,
    /// Tier frames before the records each tier served (`tiers=true`).
    BinaryWithTiers,
}

/// A read started: its first offset and its records.
struct OpenRead {
    start: u64,
    records: ServedStream,
}

/// The body of a read, decoded incrementally, with the tier the last tier frame named.
struct BodyDecoder {
    frames: Decoder,
    tier: Option<Tier>,
}

impl BodyDecoder {
    fn new() -> Self {
        Self { frames: Decoder::new(), tier: None }
    }

    /// The next chunk of the body: the records decoded from it are slices of it.
    fn push(&mut self, chunk: Bytes) {
        self.frames.push_bytes(chunk);
    }

    /// The next record, or the error the server ended the read with; `None` until more
    /// bytes are pushed.
    fn next_item(&mut self) -> Result<Option<Result<Served, ApiError>>, Error> {
        loop {
            match self.frames.next_frame()? {
                None => return Ok(None),
                Some(Frame::Record(record)) => return Ok(Some(Ok(Served { record, tier: self.tier }))),
                Some(Frame::Error(error)) => return Ok(Some(Err(error))),
                Some(Frame::Tier(tier)) => self.tier = Some(tier),
                Some(other) => {
                    return Err(Error::Unexpected(format!("a frame a read does not carry: {other:?}")));
                }
            }
        }
    }

    /// Checks that the body ended between two frames.
    fn finish(&self) -> Result<(), Error> {
        Ok(self.frames.finish()?)
    }
}

impl Client {
    /// A client of the server at `url` (`http://host:port` or `https://…`).
    pub fn new(url: &str) -> Result<Self, Error> {
        Self::builder(url).build()
    }

    /// A builder, for a token or a CA certificate.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder { url: url.to_owned(), token: None, ca_pem: None }
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, token.0.clone());
        }
        request
    }

    /// The response if its status is a success, else its error body.
    async fn check(response: Response) -> Result<Response, Error> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.bytes().await?;
        let error = serde_json::from_slice::<ApiError>(&body).unwrap_or_else(|_| {
            ApiError::new(ErrorKind::Internal, String::from_utf8_lossy(&body).into_owned())
        });
        Err(Error::Api { status: status.as_u16(), error })
    }

    async fn json<T: DeserializeOwned>(request: RequestBuilder) -> Result<T, Error> {
        Ok(Self::check(request.send().await?).await?.json().await?)
    }

    /// Appends `records` as one batch; their offsets once every enabled write tier of the
    /// server's store holds them.
    pub async fn append(&self, topic: &str, records: Vec<NewRecordJson>) -> Result<AppendResponse, Error> {
        Self::json(self.request(Method::POST, &records_path(topic)).json(&AppendRequest { records })).await
    }

    /// Appends each line of `lines` (without its `\n`) as a record (the line format).
    pub async fn append_lines(&self, topic: &str, lines: impl Into<Bytes>) -> Result<AppendResponse, Error> {
        let request = self
            .request(Method::POST, &records_path(topic))
            .header(CONTENT_TYPE, CONTENT_TYPE_LINES)
            .body(lines.into());
        Self::json(request).await
    }

    /// Appends `records` in the binary framing (keys, headers and payloads as bytes;
    /// `timestamp` [`SERVER_CLOCK`] for the server's clock; `offset` is ignored).
    pub async fn append_binary(&self, topic: &str, records: &[Record]) -> Result<AppendResponse, Error> {
        let frames: usize = records.iter().map(record_frame_len).sum();
        let mut body = BytesMut::with_capacity(MAGIC.len() + frames);
        encode_magic(&mut body);
        for r in records {
            encode_record(&mut body, r);
        }
        let request = self
            .request(Method::POST, &records_path(topic))
            .header(CONTENT_TYPE, CONTENT_TYPE_BATCH)
            .body(body.freeze());
        Self::json(request).await
    }

    /// Opens an append stream to `topic` (`docs/server.md`, "Append streams"): one
    /// connection that carries any number of batches without waiting for each answer —
    /// the way to append at the rate of the store rather than of round trips. Batches
    /// get offsets in the order they are sent. `invalid_input` for a bad topic name;
    /// `closed` from a draining server. The topic is created by its first batch.
    pub async fn append_stream(&self, topic: &str) -> Result<AppendStream, Error> {
        let request = self
            .request(Method::POST, &format!("/v1/topics/{}/append-stream", encode(topic)))
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, tierlog_api::APPEND_STREAM_PROTOCOL);
        let response = request.send().await?;
        let status = response.status();
        if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Err(match Self::check(response).await {
                Err(e) => e,
                Ok(_) => {
                    Error::Unexpected(format!("the server answered {status} instead of opening the stream"))
                }
            });
        }
        Ok(AppendStream::start(response.upgrade().await?))
    }

    /// Reads `topic` from `from`, following the live tail: the stream never ends by
    /// itself (drop it to stop). `NotFound` for a topic the server does not hold.
    pub async fn read(&self, topic: &str, from: Start) -> Result<RecordStream, Error> {
        self.read_with(topic, from, true, None).await
    }

    /// Reads `topic` from `from`: with `follow`, into the live tail; without, up to the
    /// commit point when the read started. At most `limit` records.
    pub async fn read_with(
        &self,
        topic: &str,
        from: Start,
        follow: bool,
        limit: Option<u64>,
    ) -> Result<RecordStream, Error> {
        let read = self.open_read(topic, from, follow, limit, Wire::Binary).await?;
        Ok(read.records.map(|r| r.map(|served| served.record)).boxed())
    }

    /// [`read_with`](Self::read_with), each record with the tier that served it: the read
    /// asks for the binary framing's tier frames (`tiers=true`). A server that predates
    /// them refuses the read (`invalid_input`).
    pub async fn read_with_tiers(
        &self,
        topic: &str,
        from: Start,
        follow: bool,
        limit: Option<u64>,
    ) -> Result<ServedStream, Error> {
        Ok(self.open_read(topic, from, follow, limit, Wire::BinaryWithTiers).await?.records)
    }

    /// Starts a read: its first offset (`x-tierlog-start`) and its records, decoded as
    /// the body arrives.
    async fn open_read(
        &self,
        topic: &str,
        from: Start,
        follow: bool,
        limit: Option<u64>,
        wire: Wire,
    ) -> Result<OpenRead, Error> {
        // Every value is made of characters a query takes as they are.
        let mut path =
            format!("{}?format={}&from={}", records_path(topic), Format::Binary.as_str(), from.to_query());
        if wire == Wire::BinaryWithTiers {
            path.push_str("&tiers=true");
        }
        if follow {
            path.push_str("&follow=true");
        }
        if let Some(limit) = limit {
            path.push_str(&format!("&limit={limit}"));
        }
        let response = Self::check(self.request(Method::GET, &path).send().await?).await?;
        let start = response
            .headers()
            .get("x-tierlog-start")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| Error::Unexpected("a read's answer without its x-tierlog-start header".into()))?;
        let chunks = response.bytes_stream();
        let state = (chunks, BodyDecoder::new(), false);
        let stream = futures::stream::unfold(state, |(mut chunks, mut decoder, mut done)| async move {
            loop {
                if done {
                    return None;
                }
                match decoder.next_item() {
                    Err(e) => {
                        done = true;
                        return Some((Err(e), (chunks, decoder, done)));
                    }
                    Ok(Some(Ok(served))) => return Some((Ok(served), (chunks, decoder, done))),
                    Ok(Some(Err(error))) => {
                        done = true;
                        return Some((Err(Error::Api { status: 200, error }), (chunks, decoder, done)));
                    }
                    Ok(None) => {}
                }
                match chunks.next().await {
                    Some(Ok(chunk)) => decoder.push(chunk),
                    Some(Err(e)) => {
                        done = true;
                        return Some((Err(Error::Http(e)), (chunks, decoder, done)));
                    }
                    None => {
                        done = true;
                        return decoder.finish().err().map(|e| (Err(e), (chunks, decoder, done)));
                    }
                }
            }
        });
        Ok(OpenRead { start, records: stream.boxed() })
    }

    /// Follows `topic` from `from` into the live tail, as [`read_with`](Self::read_with)
    /// with `follow` (or [`read_with_tiers`](Self::read_with_tiers) with `tiers`), and
    /// survives the server going away: when the stream breaks — the connection reset or
    /// closed, the server draining (`closed`) or not answering (`unavailable`) — it
    /// reconnects with backoff and resumes at the offset after the last record it
    /// delivered, so no record is lost or delivered twice. [`FollowEvent`]s say when the
    /// stream broke and when it resumed. It gives up, ending with [`Error::GaveUp`],
    /// once the server stayed away for [`Reconnect::give_up_after`]; any other error ends
    /// it as is. At most `limit` records in all.
    ///
    /// The first request is made here: an error answer (`not_found`, …) is returned
    /// without retrying.
    pub async fn follow(
        &self,
        topic: &str,
        from: Start,
        limit: Option<u64>,
        tiers: bool,
        reconnect: Reconnect,
    ) -> Result<FollowStream, Error> {
        let wire = if tiers { Wire::BinaryWithTiers } else { Wire::Binary };
        let first = self.open_read(topic, from, true, limit, wire).await?;
        let state = Follow {
            client: self.clone(),
            topic: topic.to_owned(),
            wire,
            reconnect,
            next: first.start,
            remaining: limit,
            records: Some(first.records),
            outage: None,
        };
        Ok(futures::stream::unfold(state, |mut state| async move {
            let item = state.next_event().await?;
            Some((item, state))
        })
        .boxed())
    }

    /// Every topic's tier ranges and commit point.
    pub async fn topics(&self) -> Result<Vec<TopicInfo>, Error> {
        Ok(Self::json::<TopicList>(self.request(Method::GET, "/v1/topics")).await?.topics)
    }

    /// One topic's tier ranges and commit point.
    pub async fn topic(&self, name: &str) -> Result<TopicInfo, Error> {
        Self::json(self.request(Method::GET, &format!("/v1/topics/{}", encode(name)))).await
    }

    /// Exports `topic` now: seals its active WAL segment and stores what cold lacks.
    pub async fn export(&self, topic: &str) -> Result<ExportResponse, Error> {
        Self::json(self.request(Method::POST, &format!("/v1/topics/{}/export", encode(topic)))).await
    }

    /// Verifies `topic` online, below a snapshot of its commit point.
    pub async fn verify(&self, topic: &str) -> Result<VerifyReport, Error> {
        Self::json(self.request(Method::GET, &format!("/v1/topics/{}/verify", encode(topic)))).await
    }

    /// The recovery reports of the server's store.
    pub async fn recovery(&self) -> Result<RecoveryList, Error> {
        Self::json(self.request(Method::GET, "/v1/recovery")).await
    }

    /// Resumes `topic`, whose acknowledged end is unknown, at offset `at` (at or past the
    /// last offset any producer was told it holds): its appends continue there and the
    /// offsets skipped are never used. Returns the topic's recovery report after it.
    pub async fn resume(&self, topic: &str, at: u64) -> Result<RecoveryJson, Error> {
        let path = format!("/v1/topics/{}/resume", encode(topic));
        Self::json(self.request(Method::POST, &path).json(&ResumeRequest { at })).await
    }
}

fn records_path(topic: &str) -> String {
    format!("/v1/topics/{}/records", encode(topic))
}

/// `topic` as one path segment (topic names are already path-safe; anything else is
/// percent-encoded so it cannot change the path).
fn encode(topic: &str) -> String {
    let mut out = String::with_capacity(topic.len());
    for b in topic.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
