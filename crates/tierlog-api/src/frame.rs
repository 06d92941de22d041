//! The binary record framing, `application/x-tierlog-batch`: the body of an append in
//! binary, and of a read in `format=binary`. The grammar, byte by byte, is in
//! `docs/server.md` ("Binary framing"); in short (all integers big-endian):
//!
//! ```text
//! body   = magic frame*
//! magic  = "TLB" 0x01                      (4 bytes: the format and its version)
//! frame  = len:u32 kind:u8 body[len - 1]   (len counts kind and body; 1 ≤ len ≤ MAX_FRAME)
//! kind 0 = record: offset:u64 timestamp:i64 key_len:u32 key[key_len]
//!              header_count:u32 (name_len:u32 name value_len:u32 value)* payload[rest]
//!          key_len 0xFFFF_FFFF means no key (and no key bytes follow)
//! kind 1 = error (reads only, the last frame): an `ApiError` as JSON
//! kind 2 = tier (reads with `tiers=true` only): the tier's name in UTF-8 (`cold`, `warm`,
//!          `hot`, `live`); the records after it, up to the next tier frame, were served
//!          by that tier
//! kind 3 = end (append streams, client to server): the record frames since the stream's
//!          magic or the previous end frame are one batch; empty body
//! kind 4 = appended (append streams, server to client): the answer to the next batch not
//!          yet answered, its offsets: start:u64 end:u64
//! kind 5 = close (append streams, server to client, the last frame): an `ApiError` as
//!          JSON, why the server ends the stream; no batch it did not answer was appended
//! ```
//!
//! An append stream (`docs/server.md`, "Append streams") carries this framing both ways
//! over one upgraded connection: the client sends batches (record frames, then an end
//! frame), the server answers each in order (an appended frame, or an error frame for a
//! batch it refused).
//!
//! In an append, `offset` is ignored (write 0) and `timestamp` [`SERVER_CLOCK`] asks for
//! the server's clock. [`Decoder`] decodes incrementally (a body arriving in chunks) and
//! never panics on any input: a truncated or malformed frame is a [`FrameError`].

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::{ApiError, Tier};

/// The first four bytes of every body: `TLB` and version 1.
pub const MAGIC: [u8; 4] = *b"TLB\x01";

/// The largest `len` a frame may have (64 MiB, the largest record batch tierlog stores).
pub const MAX_FRAME: u32 = 64 << 20;

/// A record frame's timestamp asking the server to stamp the record with its clock.
pub const SERVER_CLOCK: i64 = i64::MIN;

/// `key_len` of a record without a key.
const NO_KEY: u32 = u32::MAX;

/// Frame kinds.
const KIND_RECORD: u8 = 0;
const KIND_ERROR: u8 = 1;
const KIND_TIER: u8 = 2;
const KIND_END: u8 = 3;
const KIND_APPENDED: u8 = 4;
const KIND_CLOSE: u8 = 5;

/// A record as framed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameRecord {
    /// The offset (reads); ignored in an append.
    pub offset: u64,
    /// Publish time, ms since the Unix epoch; [`SERVER_CLOCK`] in an append for the
    /// server's clock.
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// Headers, `(name, value)`.
    pub headers: Vec<(Bytes, Bytes)>,
    /// The payload.
    pub payload: Bytes,
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame {
    /// A record.
    Record(FrameRecord),
    /// The error that ended a read.
    Error(ApiError),
    /// The tier that served the records after it (a read asked for `tiers=true`); a name
    /// this program does not know (a newer server) is [`Tier::Unknown`].
    Tier(Tier),
    /// The end of a batch in an append stream: the record frames since the previous end
    /// (or the magic) are one batch.
    End,
    /// An append stream's answer to its next unanswered batch: the batch's offsets,
    /// `start..end`.
    Appended {
        /// The first offset of the batch.
        start: u64,
        /// The offset after its last record.
        end: u64,
    },
    /// Why the server ends an append stream (its last frame): every batch it did not
    /// answer before it was not appended.
    Close(ApiError),
}

/// A malformed body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("binary framing, byte {position}: {message}")]
pub struct FrameError {
    /// Byte position in the body where the problem is.
    pub position: u64,
    /// What is wrong.
    pub message: String,
}

/// Appends [`MAGIC`] to `buf`: the start of every body.
pub fn encode_magic(buf: &mut BytesMut) {
    buf.put_slice(&MAGIC);
}

/// The bytes [`encode_record`] appends for `record` (its length prefix included).
pub fn record_frame_len(record: &FrameRecord) -> usize {
    let key_len = record.key.as_ref().map_or(0, Bytes::len);
    let headers_len: usize = record.headers.iter().map(|(n, v)| 8 + n.len() + v.len()).sum();
    4 + 1 + 8 + 8 + 4 + key_len + 4 + headers_len + record.payload.len()
}

/// Appends one record frame to `buf`.
///
/// # Panics
///
/// Never for a record tierlog stores; a record whose key, header or frame is longer than
/// `u32::MAX` bytes cannot be framed and panics (no store holds one: batches are at most
/// 64 MiB).
pub fn encode_record(buf: &mut BytesMut, record: &FrameRecord) {
    let len32 = |n: usize| u32::try_from(n).expect("frame fields are shorter than 4 GiB");
    let len = record_frame_len(record) - 4;
    buf.reserve(4 + len);
    buf.put_u32(len32(len));
    buf.put_u8(KIND_RECORD);
    buf.put_u64(record.offset);
    buf.put_i64(record.timestamp);
    match &record.key {
        Some(key) => {
            buf.put_u32(len32(key.len()));
            buf.put_slice(key);
        }
        None => buf.put_u32(NO_KEY),
    }
    buf.put_u32(len32(record.headers.len()));
    for (name, value) in &record.headers {
        buf.put_u32(len32(name.len()));
        buf.put_slice(name);
        buf.put_u32(len32(value.len()));
        buf.put_slice(value);
    }
    buf.put_slice(&record.payload);
}

/// Appends an error frame to `buf` (the last frame of a read that failed).
pub fn encode_error(buf: &mut BytesMut, error: &ApiError) {
    let json = serde_json::to_vec(error).expect("an ApiError serialises");
    buf.put_u32(u32::try_from(json.len() + 1).expect("an error message is shorter than 4 GiB"));
    buf.put_u8(KIND_ERROR);
    buf.put_slice(&json);
}

/// Appends a tier frame to `buf`: the records framed after it, up to the next tier frame,
/// were served by `tier`.
pub fn encode_tier(buf: &mut BytesMut, tier: Tier) {
    let name = tier.as_str().as_bytes();
    buf.put_u32(u32::try_from(name.len() + 1).expect("a tier name is short"));
    buf.put_u8(KIND_TIER);
    buf.put_slice(name);
}

/// Appends an end frame to `buf`: in an append stream, the record frames before it (since
/// the previous end frame) are one batch.
pub fn encode_end(buf: &mut BytesMut) {
    buf.put_u32(1);
    buf.put_u8(KIND_END);
}

/// Appends an appended frame to `buf`: an append stream's answer to a batch stored at
/// `start..end`.
pub fn encode_appended(buf: &mut BytesMut, start: u64, end: u64) {
    buf.put_u32(17);
    buf.put_u8(KIND_APPENDED);
    buf.put_u64(start);
    buf.put_u64(end);
}

/// Appends a close frame to `buf`: the last frame of an append stream the server ends,
/// saying why.
pub fn encode_close(buf: &mut BytesMut, error: &ApiError) {
    let json = serde_json::to_vec(error).expect("an ApiError serialises");
    buf.put_u32(u32::try_from(json.len() + 1).expect("an error message is shorter than 4 GiB"));
    buf.put_u8(KIND_CLOSE);
    buf.put_slice(&json);
}

/// Decodes a body incrementally: feed it chunks with [`push`](Self::push), take frames
/// with [`next_frame`](Self::next_frame); [`finish`](Self::finish) at the end says whether
/// the body ended between frames.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes handed over whole ([`push_bytes`](Self::push_bytes) into an empty decoder):
    /// frames are slices of them, nothing is copied. Read before `buf`, which is empty
    /// while this is not.
    whole: Bytes,
    /// Bytes copied in ([`push`](Self::push), or chunks after a frame cut in two).
    buf: BytesMut,
    /// Bytes of the body consumed so far (for error positions).
    consumed: u64,
    magic_seen: bool,
}

impl Decoder {
    /// A decoder at the start of a body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next bytes of the body (copied).
    pub fn push(&mut self, chunk: &[u8]) {
        if !self.whole.is_empty() {
            // A frame cut between chunks: its start moves to the copied buffer.
            self.buf.extend_from_slice(&self.whole);
            self.whole = Bytes::new();
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Adds the next bytes of the body without copying them when nothing is pending:
    /// the frames decoded from them are slices of `chunk` (a whole body, or a chunk that
    /// starts between frames).
    pub fn push_bytes(&mut self, chunk: Bytes) {
        if self.whole.is_empty() && self.buf.is_empty() {
            self.whole = chunk;
        } else {
            self.push(&chunk);
        }
    }

    /// The next complete frame, `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let at = (&mut self.consumed, &mut self.magic_seen);
        if self.whole.is_empty() {
            next_frame_in(&mut self.buf, at)
        } else {
            next_frame_in(&mut self.whole, at)
        }
    }

    /// Bytes pushed and not yet taken as frames: a partial frame, or whole frames
    /// [`next_frame`](Self::next_frame) has not returned yet.
    pub fn buffered(&self) -> usize {
        self.whole.len() + self.buf.len()
    }

    /// Ok when the body ended between frames (after the magic); an error for a body cut
    /// inside a frame, or an empty one.
    pub fn finish(&self) -> Result<(), FrameError> {
        let error = |message: String| FrameError { position: self.consumed, message };
        if !self.magic_seen {
            return Err(error("the body ended before the magic".into()));
        }
        let pending = self.buffered();
        if pending > 0 {
            return Err(error(format!("the body ended inside a frame ({pending} bytes of it)")));
        }
        Ok(())
    }
}

/// What [`next_frame_in`] decodes from: bytes it steps over and splits frames off.
trait FrameBuf: std::ops::Deref<Target = [u8]> + Buf {
    fn split_frame(&mut self, len: usize) -> Bytes;
}

impl FrameBuf for BytesMut {
    fn split_frame(&mut self, len: usize) -> Bytes {
        self.split_to(len).freeze()
    }
}

impl FrameBuf for Bytes {
    fn split_frame(&mut self, len: usize) -> Bytes {
        self.split_to(len)
    }
}

/// The next complete frame of `buf` (after the magic, once `magic_seen`), `None` when
/// more bytes are needed; `consumed` counts the body's bytes before `buf`'s first.
fn next_frame_in(
    buf: &mut impl FrameBuf,
    (consumed, magic_seen): (&mut u64, &mut bool),
) -> Result<Option<Frame>, FrameError> {
    let error = |consumed: u64, at: u64, message: String| FrameError { position: consumed + at, message };
    if !*magic_seen {
        if buf.len() < MAGIC.len() {
            if !MAGIC.starts_with(&buf[..]) {
                return Err(error(*consumed, 0, "not a tierlog batch body (bad magic)".into()));
            }
            return Ok(None);
        }
        if buf[..MAGIC.len()] != MAGIC {
            return Err(if buf[..3] == MAGIC[..3] {
                error(*consumed, 3, format!("unsupported framing version {}", buf[3]))
            } else {
                error(*consumed, 0, "not a tierlog batch body (bad magic)".into())
            });
        }
        buf.advance(MAGIC.len());
        *consumed += MAGIC.len() as u64;
        *magic_seen = true;
    }
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len == 0 || len > MAX_FRAME {
        return Err(error(*consumed, 0, format!("frame length {len} is not in 1..={MAX_FRAME}")));
    }
    let total = 4 + len as usize;
    if buf.len() < total {
        return Ok(None);
    }
    let start = *consumed;
    let mut frame = buf.split_frame(total);
    *consumed += total as u64;
    frame.advance(4);
    let kind = frame.get_u8();
    match kind {
        KIND_RECORD => decode_record(frame)
            .map(|r| Some(Frame::Record(r)))
            .map_err(|(at, message)| FrameError { position: start + 5 + at, message }),
        KIND_ERROR => serde_json::from_slice(&frame)
            .map(|e| Some(Frame::Error(e)))
            .map_err(|e| FrameError { position: start + 5, message: format!("malformed error frame: {e}") }),
        KIND_TIER => match std::str::from_utf8(&frame) {
            Ok(name) => Ok(Some(Frame::Tier(Tier::from_name(name)))),
            Err(e) => Err(FrameError {
                position: start + 5 + e.valid_up_to() as u64,
                message: "a tier frame's name is not UTF-8".into(),
            }),
        },
        KIND_END if frame.is_empty() => Ok(Some(Frame::End)),
        KIND_END => Err(FrameError { position: start + 5, message: "an end frame has no body".into() }),
        KIND_APPENDED if frame.len() == 16 => {
            let (start, end) = (frame.get_u64(), frame.get_u64());
            if start > end {
                return Err(FrameError {
                    position: start + 5,
                    message: format!("an appended frame's offsets {start}..{end} are reversed"),
                });
            }
            Ok(Some(Frame::Appended { start, end }))
        }
        KIND_APPENDED => Err(FrameError {
            position: start + 5,
            message: format!("an appended frame's body is {} bytes, not 16", frame.len()),
        }),
        KIND_CLOSE => serde_json::from_slice(&frame)
            .map(|e| Some(Frame::Close(e)))
            .map_err(|e| FrameError { position: start + 5, message: format!("malformed close frame: {e}") }),
        other => Err(FrameError { position: start + 4, message: format!("unknown frame kind {other}") }),
    }
}

/// Decodes a record frame's body (after `kind`); errors carry the position in it.
fn decode_record(mut b: Bytes) -> Result<FrameRecord, (u64, String)> {
    let len = b.len();
    let at = |b: &Bytes| (len - b.remaining()) as u64;
    let short = |b: &Bytes, what: &str| (at(b), format!("the frame ends inside the {what}"));
    let offset = b.try_get_u64().map_err(|_| short(&b, "offset"))?;
    let timestamp = b.try_get_i64().map_err(|_| short(&b, "timestamp"))?;
    let key_len = b.try_get_u32().map_err(|_| short(&b, "key length"))?;
    let key =
        if key_len == NO_KEY { None } else { Some(take(&mut b, key_len, "key").map_err(|w| short(&b, w))?) };
    let count = b.try_get_u32().map_err(|_| short(&b, "header count"))?;
    let mut headers = Vec::new();
    for _ in 0..count {
        let n = b.try_get_u32().map_err(|_| short(&b, "header name length"))?;
        let name = take(&mut b, n, "header name").map_err(|w| short(&b, w))?;
        let n = b.try_get_u32().map_err(|_| short(&b, "header value length"))?;
        let value = take(&mut b, n, "header value").map_err(|w| short(&b, w))?;
        headers.push((name, value));
    }
    Ok(FrameRecord { offset, timestamp, key, headers, payload: b })
}

fn take(b: &mut Bytes, n: u32, what: &'static str) -> Result<Bytes, &'static str> {
    let n = n as usize;
    if b.remaining() < n { Err(what) } else { Ok(b.split_to(n)) }
}
