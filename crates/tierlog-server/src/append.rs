//! `POST /v1/topics/{topic}/records`: the three body formats, decoded into the records
//! of one batch, and the append itself (answered once every enabled write tier holds
//! the batch — the router's acknowledgement).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use tier_core::batch::MAX_BATCH_LEN;
use tier_router::{IntoTopicName, NewRecord, RecordBatchBuilder, TopicName};
use tierlog_api::frame::{Decoder, Frame, FrameRecord, SERVER_CLOCK};
use tierlog_api::{
    AppendRequest, AppendResponse, CONTENT_TYPE_BATCH, CONTENT_TYPE_JSON, CONTENT_TYPE_LINES, ErrorKind,
};

use crate::AppState;
use crate::error::{HttpError, json_body};

/// Now, in ms since the Unix epoch.
// Record timestamps are the producer's wall-clock time: the server stands in for a producer that sent none
#[allow(clippy::disallowed_methods)]
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) async fn append(
    State(state): State<AppState>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<AppendResponse>, HttpError> {
    // A request refused here never reaches the router, which counts the appends it
    // refuses itself: count it as the failed append it is.
    let (name, batch) = checked(&state, topic, &headers, body)
        .inspect_err(|_| metrics::counter!(tier_core::metrics::APPEND_ERRORS).increment(1))?;
    let topic = state.store.topic(name).await?;
    let offsets = topic.append_batch(batch).await?;
    Ok(Json(AppendResponse { start: offsets.start, end: offsets.end }))
}

/// The topic and the batch of a request, or why it is refused. The batch is built before
/// the topic is opened: opening creates a topic that does not exist yet (its state file,
/// its cold marker), and a refused append must leave nothing behind.
fn checked(
    state: &AppState,
    topic: String,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(TopicName, RecordBatchBuilder), HttpError> {
    let body = body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            HttpError::new(ErrorKind::TooLarge, format!("the body is larger than {} bytes", state.max_body))
        } else {
            HttpError::invalid(format!("reading the body: {e}"))
        }
    })?;
    let records = decode(headers, body)?;
    if records.is_empty() {
        return Err(HttpError::invalid("no records to append"));
    }
    let name = topic.into_topic_name()?;
    let batch = build(&name, &records)?;
    Ok((name, batch))
}

/// The records as one batch, the check [`Topic::append`](tier_router::Topic::append)
/// makes: `413 too_large` when they do not fit in one (at most 64 MiB encoded, whatever
/// `max_body_bytes` allows).
pub(crate) fn build(topic: &TopicName, records: &[NewRecord]) -> Result<RecordBatchBuilder, HttpError> {
    let mut builder = RecordBatchBuilder::with_capacity(NewRecord::batch_capacity(records));
    for (i, r) in records.iter().enumerate() {
        builder.push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload).map_err(|_| {
            HttpError::new(
                ErrorKind::TooLarge,
                format!(
                    "appending to {topic}: refused, nothing was written: the {} records do not fit in one \
                     batch of at most {MAX_BATCH_LEN} bytes encoded (it is full before record {i})",
                    records.len()
                ),
            )
        })?;
    }
    Ok(builder)
}

/// A framed record to append, stamped with `now` when it asks for the server's clock.
pub(crate) fn new_record(r: FrameRecord, now: i64) -> NewRecord {
    let timestamp = if r.timestamp == SERVER_CLOCK { now } else { r.timestamp };
    let mut record = NewRecord::new(timestamp, r.payload);
    if let Some(key) = r.key {
        record = record.with_key(key);
    }
    for (name, value) in r.headers {
        record = record.with_header(name, value);
    }
    record
}

/// The records of a body, by its content type.
fn decode(headers: &HeaderMap, body: Bytes) -> Result<Vec<NewRecord>, HttpError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let now = now_ms();
    match essence.as_str() {
        CONTENT_TYPE_JSON => {
            let request: AppendRequest = json_body(&body)?;
            request
                .records
                .into_iter()
                .map(|r| {
                    let mut record =
                        NewRecord::new(r.timestamp.unwrap_or(now), r.payload.to_bytes().map_err(HttpError)?);
                    if let Some(key) = r.key {
                        record = record.with_key(key.to_bytes().map_err(HttpError)?);
                    }
                    for h in r.headers {
                        record = record.with_header(
                            h.name.to_bytes().map_err(HttpError)?,
                            h.value.to_bytes().map_err(HttpError)?,
                        );
                    }
                    Ok(record)
                })
                .collect()
        }
        CONTENT_TYPE_LINES => {
            // One record per line, without its `\n` (and a `\r` before it); a final
            // newline does not start another record.
            if body.is_empty() {
                return Ok(Vec::new());
            }
            let text = if body.ends_with(b"\n") { body.slice(..body.len() - 1) } else { body };
            let line = |mut line: Bytes| {
                if line.ends_with(b"\r") {
                    line.truncate(line.len() - 1);
                }
                NewRecord::new(now, line)
            };
            let mut records = Vec::new();
            let mut start = 0;
            while let Some(i) = text[start..].iter().position(|b| *b == b'\n') {
                records.push(line(text.slice(start..start + i)));
                start += i + 1;
            }
            records.push(line(text.slice(start..)));
            Ok(records)
        }
        CONTENT_TYPE_BATCH => {
            let mut decoder = Decoder::new();
            decoder.push_bytes(body);
            let mut records = Vec::new();
            while let Some(frame) = decoder.next_frame().map_err(|e| HttpError::invalid(e.to_string()))? {
                let Frame::Record(r) = frame else {
                    return Err(HttpError::invalid("an append holds record frames only"));
                };
                records.push(new_record(r, now));
            }
            decoder.finish().map_err(|e| HttpError::invalid(e.to_string()))?;
            Ok(records)
        }
        _ => Err(HttpError::new(
            ErrorKind::UnsupportedMediaType,
            format!(
                "Content-Type {content_type:?} is not one of {CONTENT_TYPE_JSON}, {CONTENT_TYPE_LINES}, {CONTENT_TYPE_BATCH}"
            ),
        )),
    }
}
