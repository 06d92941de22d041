//! `GET /v1/topics/{topic}/records`: a read streamed from the router's batch reader,
//! one chunk per batch. Hyper asks the stream for the next chunk only once the previous
//! one is written, so a slow consumer holds the read back (backpressure) and the server
//! holds about one batch per read, however long the history or the follow.
//!
//! A start offset past the commit point is refused before the answer starts (`404
//! trimmed`, naming the next offset); one at it reads nothing, or with `follow` waits.
//! Without `follow` the read ends at the commit point as it was when the request came
//! (or after `limit` records); with it, the read continues into the live tail until
//! `limit`, the client leaving, or the server draining. An error ends the stream: in
//! `json` with an `{"error": …}` line, in `binary` with an error frame, in `lines` by
//! cutting the chunked body short (no final chunk), which every HTTP client reports.

use std::io;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Deserialize;
use tier_router::{ReadBatch, Record, Source, StartPosition, TierError};
use tierlog_api::frame::{FrameRecord, encode_error, encode_magic, encode_record, encode_tier};
use tierlog_api::{ApiError, Data, ErrorKind, Format, HeaderJson, RecordJson, Start, Tier};
use tokio::sync::watch;

use crate::AppState;
use crate::error::{HttpError, api_error};

/// The query of a read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadQuery {
    from: Option<String>,
    limit: Option<u64>,
    follow: Option<bool>,
    format: Option<Format>,
    /// In `binary`, tier frames say which tier served the records after them (`json`
    /// records always say it; `lines` has no room for it).
    tiers: Option<bool>,
}

/// The store's start position for an API start.
pub(crate) fn start_position(start: Start) -> StartPosition {
    match start {
        Start::Earliest => StartPosition::Earliest,
        Start::Latest => StartPosition::Latest,
        Start::Offset(o) => StartPosition::Offset(o),
        Start::Time(t) => StartPosition::Timestamp(t),
    }
}

pub(crate) async fn read(
    State(state): State<AppState>,
    Path(topic): Path<String>,
    query: Result<Query<ReadQuery>, QueryRejection>,
) -> Result<Response, HttpError> {
    let Query(query) = query.map_err(|e| HttpError::invalid(e.body_text()))?;
    let start = Start::parse(query.from.as_deref().unwrap_or("earliest")).map_err(HttpError)?;
    let format = query.format.unwrap_or_default();
    let follow = query.follow.unwrap_or(false);
    let limit = query.limit.unwrap_or(u64::MAX);
    let topic = state.store.existing_topic(topic.as_str()).await?;
    // The end is taken before the start is resolved: a `latest` read without follow is
    // then empty, never waiting for a record appended in between.
    let committed = topic.high_watermark();
    if let Start::Offset(o) = start
        && o > committed
    {
        return Err(beyond_the_end(topic.name(), o, committed));
    }
    let end = (!follow).then_some(committed);
    let first = topic.start_offset(start_position(start)).await?;
    let reader = if limit == 0 || end.is_some_and(|end| first >= end) {
        None
    } else {
        Some(topic.batch_reader(StartPosition::Offset(first)).await?)
    };
    let body = RecordStream {
        reader,
        end,
        remaining: limit,
        format,
        tier_frames: format == Format::Binary && query.tiers.unwrap_or(false),
        last_tier: None,
        shutdown: state.shutdown.clone(),
    };
    let mut response = Response::new(Body::from_stream(body.into_stream()));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    headers.insert("x-tierlog-start", HeaderValue::from(first));
    if let Some(end) = end {
        headers.insert("x-tierlog-end", HeaderValue::from(end));
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// A read starting at `offset`, past the commit point `committed` (with or without
/// `follow`): `404 trimmed` (offsets not held yet) naming the next offset, as `tierlog
/// consume --from N` says it. A read from exactly the commit point is no error: it is
/// empty, or with `follow` waits for the next record.
fn beyond_the_end(topic: &tier_router::TopicName, offset: u64, committed: u64) -> HttpError {
    HttpError::new(
        ErrorKind::Trimmed,
        format!("offset {offset} is beyond the end of topic {topic} (the next offset is {committed})"),
    )
}

/// The API's name for the part of the store that served a batch.
fn tier_of(source: Source) -> Tier {
    match source {
        Source::Cold => Tier::Cold,
        Source::Warm => Tier::Warm,
        Source::Hot => Tier::Hot,
        Source::Live => Tier::Live,
    }
}

/// The state of one streamed read.
struct RecordStream {
    /// `None` once finished (or for an empty read).
    reader: Option<BoxStream<'static, Result<ReadBatch, TierError>>>,
    /// Stop before this offset (a read without follow).
    end: Option<u64>,
    /// Records still to deliver.
    remaining: u64,
    format: Format,
    /// A binary read that asked for tier frames.
    tier_frames: bool,
    /// The tier of the last tier frame sent.
    last_tier: Option<Tier>,
    shutdown: watch::Receiver<bool>,
}

impl RecordStream {
    fn into_stream(self) -> BoxStream<'static, io::Result<Bytes>> {
        let mut head = BytesMut::new();
        if self.format == Format::Binary {
            encode_magic(&mut head);
        }
        let first = futures::stream::iter((!head.is_empty()).then(|| Ok(head.freeze())));
        first
            .chain(futures::stream::unfold(self, |mut s| async move { s.next_chunk().await.map(|c| (c, s)) }))
            .boxed()
    }

    /// The next chunk: one batch's records, or the error that ends the read.
    async fn next_chunk(&mut self) -> Option<io::Result<Bytes>> {
        let reader = self.reader.as_mut()?;
        let item = tokio::select! {
            biased;
            _ = self.shutdown.wait_for(|stop| *stop) => {
                Some(Err(ApiError::new(ErrorKind::Closed, "the server is draining: the read ends here")))
            }
            item = reader.next() => item.map(|r| r.map_err(|e| api_error(&e))),
        };
        let mut buf = BytesMut::new();
        match item {
            None => {
                self.reader = None;
                return None;
            }
            Some(Ok(batch)) => {
                let mut finished = false;
                let tier = tier_of(batch.source);
                if self.tier_frames && self.last_tier != Some(tier) {
                    encode_tier(&mut buf, tier);
                    self.last_tier = Some(tier);
                }
                for record in batch.records() {
                    if self.end.is_some_and(|end| record.offset >= end) || self.remaining == 0 {
                        finished = true;
                        break;
                    }
                    self.encode(&mut buf, &record, tier);
                    self.remaining -= 1;
                }
                if finished
                    || self.remaining == 0
                    || self.end.is_some_and(|end| batch.batch.end_offset() >= end)
                {
                    self.reader = None;
                }
            }
            Some(Err(error)) => {
                self.reader = None;
                match self.format {
                    Format::Json => {
                        serde_json::to_writer((&mut buf).writer(), &error).expect("an error serialises");
                        buf.put_u8(b'\n');
                    }
                    Format::Binary => encode_error(&mut buf, &error),
                    Format::Lines => return Some(Err(io::Error::other(error))),
                }
            }
        }
        Some(Ok(buf.freeze()))
    }

    /// One record in the read's format; `tier` (the batch's source) in `json` only: the
    /// line format has no room for it, and the binary framing says it in tier frames
    /// (`next_chunk`), not per record.
    fn encode(&self, buf: &mut BytesMut, record: &Record, tier: Tier) {
        match self.format {
            Format::Json => {
                let json = RecordJson {
                    offset: record.offset,
                    tier: Some(tier),
                    timestamp: record.timestamp,
                    key: record.key.as_deref().map(Data::from_bytes),
                    headers: record
                        .headers
                        .iter()
                        .map(|h| HeaderJson {
                            name: Data::from_bytes(&h.name),
                            value: Data::from_bytes(&h.value),
                        })
                        .collect(),
                    payload: Data::from_bytes(&record.payload),
                };
                serde_json::to_writer((&mut *buf).writer(), &json).expect("a record serialises");
                buf.put_u8(b'\n');
            }
            Format::Lines => {
                buf.put_slice(&record.payload);
                buf.put_u8(b'\n');
            }
            Format::Binary => encode_record(
                buf,
                &FrameRecord {
                    offset: record.offset,
                    timestamp: record.timestamp,
                    key: record.key.clone(),
                    headers: record.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
                    payload: record.payload.clone(),
                },
            ),
        }
    }
}
