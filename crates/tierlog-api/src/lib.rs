//! The wire vocabulary of tierlog's HTTP API (`tierlog serve`), shared by the server
//! (`tierlog-server`) and the client (`tierlog-client`): the JSON request and response
//! bodies, the error body, the start positions a read takes, and the binary record
//! framing ([`frame`]). The API itself is described in `docs/server.md`.
//!
//! This crate depends on neither the server's nor the client's HTTP stack, so each side
//! links only its own: the server does not link reqwest, the client does not link axum.

pub mod frame;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The API's version prefix: every endpoint but `/`, `/healthz`, `/readyz` and
/// `/metrics` lives under it.
pub const PREFIX: &str = "/v1";

/// Content type of one JSON document.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// Content type of the line format: one record's payload per line.
pub const CONTENT_TYPE_LINES: &str = "text/plain";
/// Content type of JSON records, one per line (reads in `format=json`).
pub const CONTENT_TYPE_NDJSON: &str = "application/x-ndjson";
/// Content type of the binary record framing ([`frame`]).
pub const CONTENT_TYPE_BATCH: &str = "application/x-tierlog-batch";
/// The `Upgrade` protocol of an append stream (`POST /v1/topics/{topic}/append-stream`):
/// the binary framing both ways over the upgraded connection ([`frame`]).
pub const APPEND_STREAM_PROTOCOL: &str = "tierlog-append/1";

/// Bytes in JSON: a string when they are valid UTF-8, else `{"base64": "…"}` (standard
/// alphabet, padded) — the form `tierlog consume --output json` writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Data {
    /// UTF-8 text.
    Text(String),
    /// Any bytes, base64-encoded.
    Base64 {
        /// The bytes, base64 (standard alphabet, padded).
        base64: String,
    },
}

impl Data {
    /// The JSON form of `bytes`: text when valid UTF-8, base64 otherwise.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Data::Text(text.to_owned()),
            Err(_) => Data::Base64 { base64: STANDARD.encode(bytes) },
        }
    }

    /// The bytes; an error for malformed base64.
    pub fn to_bytes(&self) -> Result<Bytes, ApiError> {
        match self {
            Data::Text(t) => Ok(Bytes::copy_from_slice(t.as_bytes())),
            Data::Base64 { base64 } => STANDARD
                .decode(base64)
                .map(Bytes::from)
                .map_err(|e| ApiError::new(ErrorKind::InvalidInput, format!("malformed base64: {e}"))),
        }
    }
}

impl From<&str> for Data {
    fn from(value: &str) -> Self {
        Data::Text(value.to_owned())
    }
}

/// A record header in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderJson {
    /// The header's name.
    pub name: Data,
    /// The header's value.
    pub value: Data,
}

/// One record to append (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRecordJson {
    /// The payload (`value` is accepted as another name for it).
    #[serde(alias = "value")]
    pub payload: Data,
    /// An optional key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Data>,
    /// Headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderJson>,
    /// Publish time, ms since the Unix epoch; the server's clock when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

impl NewRecordJson {
    /// A record with this payload, no key, no header, the server's clock.
    pub fn new(payload: impl Into<Data>) -> Self {
        Self { payload: payload.into(), key: None, headers: Vec::new(), timestamp: None }
    }
}

/// `POST /v1/topics/{topic}/records` with `Content-Type: application/json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// The records, appended as one batch, in order.
    pub records: Vec<NewRecordJson>,
}

/// The answer to an append: the records got offsets `[start, end)`, in order, and every
/// enabled write tier holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendResponse {
    /// The first record's offset.
    pub start: u64,
    /// One past the last record's offset.
    pub end: u64,
}

/// Which part of the store served a record read: the label `tierlog consume --output
/// json` prints and the `tier` label of `tierlog_read_records_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Tier {
    /// The cold tier (object storage).
    Cold,
    /// The warm tier (Valkey).
    Warm,
    /// The WAL, read as history.
    Hot,
    /// The WAL's live tail (a follow that caught up).
    Live,
    /// A tier this program does not know: the name a newer server sent (a record read
    /// still decodes; the tier is just not named).
    #[serde(other)]
    Unknown,
}

impl Tier {
    /// The name as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Cold => "cold",
            Tier::Warm => "warm",
            Tier::Hot => "hot",
            Tier::Live => "live",
            Tier::Unknown => "unknown",
        }
    }

    /// The tier named `name` (as written in JSON and in a binary tier frame);
    /// [`Tier::Unknown`] for a name this program does not know.
    pub fn from_name(name: &str) -> Tier {
        [Tier::Cold, Tier::Warm, Tier::Hot, Tier::Live]
            .into_iter()
            .find(|t| t.as_str() == name)
            .unwrap_or(Tier::Unknown)
    }
}

/// A record read (one NDJSON line of a read in `format=json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordJson {
    /// Its offset.
    pub offset: u64,
    /// Which tier served it. Absent from servers that predate it (the field was added
    /// compatibly); the binary framing carries it in tier frames when asked
    /// (`tiers=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Publish time, ms since the Unix epoch.
    pub timestamp: i64,
    /// Its key (`null`: none).
    pub key: Option<Data>,
    /// Its headers.
    pub headers: Vec<HeaderJson>,
    /// Its payload.
    pub payload: Data,
}

/// A half-open offset range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeJson {
    /// First offset held.
    pub start: u64,
    /// One past the last offset held.
    pub end: u64,
}

/// `GET /v1/topics/{topic}`: what each tier holds and the commit point (what
/// `tierlog status` shows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic.
    pub topic: String,
    /// The commit point: every offset below it is committed and readable.
    pub committed: u64,
    /// The WAL's offsets.
    pub hot: RangeJson,
    /// Warm's offsets (`null`: warm disabled).
    pub warm: Option<RangeJson>,
    /// Cold's offsets (`null`: cold disabled).
    pub cold: Option<RangeJson>,
    /// Committed records cold does not hold (`null` without cold).
    pub export_lag: Option<u64>,
    /// The topic's acknowledged end is unknown (the WAL and the router's state directory
    /// were lost): appends are refused until an operator resumes it at or past this
    /// offset (`POST /v1/topics/{topic}/resume`). Absent otherwise, and from servers
    /// before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at_least: Option<u64>,
}

/// `GET /v1/topics`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicList {
    /// Every open topic, by name.
    pub topics: Vec<TopicInfo>,
}

/// `POST /v1/topics/{topic}/resume`: the operator's decision for a topic whose
/// acknowledged end is unknown (`RecoveryJson::end_unknown`): appends continue at `at`,
/// which must be at or past the last offset any producer was told it holds. The answer
/// is the topic's [`RecoveryJson`] after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRequest {
    /// Where appends continue; the offsets between the topic's next offset and `at` are
    /// never used (reported in `maybe_lost`).
    pub at: u64,
}

/// `POST /v1/topics/{topic}/export`: the segments this call stored in cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportResponse {
    /// The topic.
    pub topic: String,
    /// Each segment this call stored, oldest first (the background exporter may have
    /// stored some of them first: they are then not listed).
    pub segments: Vec<RangeJson>,
    /// What cold holds after the export (`null` without cold).
    pub cold: Option<RangeJson>,
}

/// `GET /v1/topics/{topic}/verify`: an online check of everything below a snapshot of
/// the commit point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The topic.
    pub topic: String,
    /// The commit point when the check started; offsets at or past it were not checked.
    pub snapshot: u64,
    /// The offsets read: from the oldest any tier holds up to `snapshot`.
    pub checked: RangeJson,
    /// Records read (each in a batch whose CRC and records were checked).
    pub records: u64,
    /// Batches read.
    pub batches: u64,
    /// What was wrong: a hole between the tiers, a damaged batch. Empty when all is well.
    pub problems: Vec<String>,
}

/// One topic's recovery at open (`GET /v1/recovery`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryJson {
    /// The topic.
    pub topic: String,
    /// The offset the next append gets.
    pub next_offset: u64,
    /// Offsets acknowledged that no tier holds.
    pub lost: Vec<RangeJson>,
    /// Offsets maybe acknowledged that no tier holds.
    pub maybe_lost: Vec<RangeJson>,
    /// Warm batches replayed into the WAL.
    pub replayed: Option<RangeJson>,
    /// Warm could not be reached during recovery (`degrade`).
    pub warm_unreachable: bool,
    /// Offsets skipped because warm could not be reached: it may hold records there that
    /// were never acknowledged (none lost). Absent from servers before it was added.
    #[serde(default)]
    pub skipped: Option<RangeJson>,
    /// The acknowledged end is unknown: appends are refused until resumed.
    pub end_unknown: bool,
    /// The recovery failed: the topic could not be opened (its error).
    pub failed: Option<String>,
}

/// `GET /v1/recovery`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryList {
    /// One entry per topic recovered (or failed) since the server opened the store.
    pub topics: Vec<RecoveryJson>,
}

/// What went wrong, coarsely: what the caller can do (`docs/server.md`, "Errors").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// 400: the request is malformed.
    InvalidInput,
    /// 401: no valid bearer token.
    Unauthorized,
    /// 404: the topic (or offsets) do not exist.
    NotFound,
    /// 404: the offsets are no longer (or not yet) held.
    Trimmed,
    /// 409: another writer owns the position, or the topic refuses appends.
    Fenced,
    /// 413: the body is larger than the server accepts.
    TooLarge,
    /// 415: a content type the endpoint does not take.
    UnsupportedMediaType,
    /// 500: stored bytes failed a check.
    Corruption,
    /// 500: a bug or an unexpected backend answer.
    Internal,
    /// 503: a tier did not confirm in time; retry later.
    Unavailable,
    /// 503: the store is closed or the server is draining.
    Closed,
}

impl ErrorKind {
    /// The kind's name as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Trimmed => "trimmed",
            ErrorKind::Fenced => "fenced",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::UnsupportedMediaType => "unsupported_media_type",
            ErrorKind::Corruption => "corruption",
            ErrorKind::Internal => "internal",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Closed => "closed",
        }
    }

    /// The HTTP status the server answers it with.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidInput => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::NotFound | ErrorKind::Trimmed => 404,
            ErrorKind::Fenced => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::UnsupportedMediaType => 415,
            ErrorKind::Corruption | ErrorKind::Internal => 500,
            ErrorKind::Unavailable | ErrorKind::Closed => 503,
        }
    }
}

/// An error as the API answers it: `{"error": {"kind": …, "message": …}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}: {}", .error.kind.as_str(), .error.message)]
pub struct ApiError {
    /// The error.
    pub error: ErrorDetail,
}

/// The body of an [`ApiError`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// What the caller can do.
    pub kind: ErrorKind,
    /// What happened, with each cause once.
    pub message: String,
    /// Of a refused append: the offsets at which its records may still be committed (a
    /// tier holds or may hold them, and the server's recovery after a restart may commit
    /// them there). The outcome is unknown: appending the records again may store them
    /// twice. Absent when nothing of the append lasts (appending again is safe) and for
    /// every other error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may_commit: Option<RangeJson>,
}

impl ApiError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { error: ErrorDetail { kind, message: message.into(), may_commit: None } }
    }

    /// The error with [`ErrorDetail::may_commit`] set to `range`.
    pub fn with_may_commit(mut self, range: RangeJson) -> Self {
        self.error.may_commit = Some(range);
        self
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.error.kind
    }

    /// Of a refused append whose outcome is unknown, the offsets at which its records may
    /// still be committed ([`ErrorDetail::may_commit`]).
    pub fn may_commit(&self) -> Option<RangeJson> {
        self.error.may_commit
    }
}

/// Where a read starts (`from=` of `GET /v1/topics/{topic}/records`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `earliest`: the oldest offset any tier holds.
    Earliest,
    /// `latest`: the commit point: only records appended after the read started.
    Latest,
    /// `offset:N` (or a bare `N`).
    Offset(u64),
    /// `time:MS` or `time:RFC3339`: the first record at or after the time (ms since the
    /// Unix epoch; an RFC 3339 time is converted by whoever writes the query).
    Time(i64),
}

impl Start {
    /// Parses a `from=` value: `earliest`, `latest`, `offset:N` or `N`, `time:MS` or
    /// `time:RFC3339` (UTC, e.g. `time:2024-05-01T12:00:00Z`).
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let bad = |why: &str| {
            ApiError::new(
                ErrorKind::InvalidInput,
                format!("from={text:?}: {why} (expected earliest, latest, offset:N or time:MS|RFC3339)"),
            )
        };
        match text {
            "earliest" => return Ok(Start::Earliest),
            "latest" => return Ok(Start::Latest),
            _ => {}
        }
        if let Some(time) = text.strip_prefix("time:") {
            if let Ok(ms) = time.parse::<i64>() {
                return Ok(Start::Time(ms));
            }
            let t = humantime::parse_rfc3339_weak(time).map_err(|e| bad(&e.to_string()))?;
            let ms = t.duration_since(std::time::UNIX_EPOCH).map_err(|_| bad("before 1970"))?;
            return i64::try_from(ms.as_millis()).map(Start::Time).map_err(|_| bad("too far in the future"));
        }
        let offset = text.strip_prefix("offset:").unwrap_or(text);
        offset.parse::<u64>().map(Start::Offset).map_err(|_| bad("not a start position"))
    }

    /// The query value: `earliest`, `latest`, `offset:N`, `time:MS`.
    pub fn to_query(self) -> String {
        match self {
            Start::Earliest => "earliest".to_owned(),
            Start::Latest => "latest".to_owned(),
            Start::Offset(o) => format!("offset:{o}"),
            Start::Time(t) => format!("time:{t}"),
        }
    }
}

/// The formats a read answers in (`format=` of `GET /v1/topics/{topic}/records`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One [`RecordJson`] per line (`application/x-ndjson`).
    #[default]
    Json,
    /// Each payload and `\n` (`text/plain`).
    Lines,
    /// The binary framing of [`frame`] (`application/x-tierlog-batch`).
    Binary,
}

impl Format {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Lines => "lines",
            Format::Binary => "binary",
        }
    }

    /// The content type of a read's body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => CONTENT_TYPE_NDJSON,
            Format::Lines => CONTENT_TYPE_LINES,
            Format::Binary => CONTENT_TYPE_BATCH,
        }
    }
}

#[cfg(test)]
mod tests;
