//! Uploading sealed segments: one conditional PUT for small ones, a streamed multipart
//! upload for large ones; idempotent by name, length, trailer and whole-object CRC-32C.

use std::path::Path as FsPath;

use bytes::{Bytes, BytesMut};
use metrics::counter;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use std::io::{Read, Seek};
use tier_core::blocking;
use tier_core::metrics::{EXPORT_BYTES, EXPORT_ERRORS, EXPORT_SEGMENTS};
use tier_core::segment::{MAX_HEADER_LEN, SegmentHeader, TRAILER_LEN, Trailer};
use tier_core::{OffsetRange, TierError, TopicName};
use tracing::Instrument;

use crate::ColdTier;
use crate::error::{file_error, key_ctx, map_store_error};
use crate::layout::TimeBounds;
use crate::listing::SegmentObject;
use crate::stats::Counters;

/// What [`ColdTier::export_segment`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportOutcome {
    /// The segment was uploaded.
    Uploaded {
        /// The object written.
        key: Path,
        /// Its offsets.
        range: OffsetRange,
        /// Its size.
        bytes: u64,
        /// Parts of the multipart upload (0: a single PUT).
        parts: u64,
    },
    /// An identical object (same name, length and trailer) was already there.
    AlreadyPresent {
        /// The existing object.
        key: Path,
        /// Its offsets.
        range: OffsetRange,
    },
}

impl ExportOutcome {
    /// The object's key.
    pub fn key(&self) -> &Path {
        match self {
            ExportOutcome::Uploaded { key, .. } | ExportOutcome::AlreadyPresent { key, .. } => key,
        }
    }
}

/// What identifies a segment's content for the idempotency check.
#[derive(Debug)]
pub(crate) struct Fingerprint<'a> {
    pub(crate) len: u64,
    pub(crate) content: Content<'a>,
}

/// The content an existing object is compared with.
#[derive(Debug)]
pub(crate) enum Content<'a> {
    /// The whole content in memory (a one-batch segment of `append`): compared byte for
    /// byte with one GET.
    Whole(Bytes),
    /// A sealed segment file: its trailer bytes are compared first (one small GET, a
    /// cheap early refusal), then the CRC-32C of the whole object with the file's, both
    /// streamed in `read_buffer` chunks.
    File {
        /// The file.
        path: &'a FsPath,
        /// Its last [`TRAILER_LEN`] bytes.
        trailer: Bytes,
    },
}

impl ColdTier {
    /// Uploads the sealed segment file at `path` as
    /// `<prefix>/<topic>/<base:020>-<last:020>.seg`, reading its header and trailer to
    /// learn the topic and range.
    ///
    /// - Up to `multipart_threshold` bytes: one `PutMode::Create` PUT (two exporters
    ///   cannot both write). Larger: a multipart upload of `part_size` parts streamed
    ///   from the file, `upload_concurrency` in flight, aborted on any failure. Never
    ///   holds more than `upload_concurrency + 1` parts in memory.
    /// - Idempotent: an existing object with the same length, trailer bytes and CRC-32C
    ///   of its whole content (streamed in `read_buffer` GETs, compared with the file's)
    ///   is [`ExportOutcome::AlreadyPresent`]; a different one is [`TierError::Fenced`].
    /// - Contiguous: a segment starting beyond the offsets held (the last segment's end,
    ///   moved past recorded gaps that start there) is `InvalidInput` naming both ranges,
    ///   unless the topic holds no segment (the segment takes over at its base). Record
    ///   the missing offsets with [`record_gap`](Self::record_gap) first.
    /// - Then the successor pointer from the segment's base (from 0 when the topic holds
    ///   no segment; see [`Layout::pointer_key`](crate::Layout::pointer_key)), so that a
    ///   listing lagging behind this upload still finds the segment; written also when
    ///   the segment was already present and the manifest did not know it (an upload
    ///   whose answer was lost leaves the segment without its pointer).
    /// - Then a zero-byte *time marker* object carrying the segment's timestamp bounds is
    ///   written beside it (see [`Layout::marker_key`](crate::Layout::marker_key)), also
    ///   when the segment was already present and the manifest knows no marker for it,
    ///   so a re-export restores a missing marker.
    ///   A failure there is an error too (the segment itself is stored; retrying the
    ///   export writes only the marker).
    /// - The cached manifest gains the segment, with its time bounds.
    ///
    /// Errors: `InvalidInput` for a file that is not a sealed segment of `topic`, is
    /// empty or does not continue the log; `Fenced` for a conflicting object (same name,
    /// or overlapping offsets or a recorded gap in the cached manifest); `Unavailable`
    /// for I/O and store failures.
    ///
    /// Each call is counted (`tierlog_export_segments_total` and `_bytes_total` when the
    /// segment is stored — uploaded or already present —, `tierlog_export_errors_total`
    /// when not) and runs in a `cold_export_segment` tracing span (topic, file).
    pub async fn export_segment(&self, topic: &TopicName, path: &FsPath) -> Result<ExportOutcome, TierError> {
        let span = tracing::info_span!("cold_export_segment", topic = %topic, path = %path.display());
        let result = self.export_segment_uncounted(topic, path).instrument(span).await;
        match &result {
            Ok(outcome) => {
                let bytes = match outcome {
                    ExportOutcome::Uploaded { bytes, .. } => *bytes,
                    _ => {
                        let path = path.to_owned();
                        let len = blocking::spawn(move || std::fs::metadata(path)).await;
                        len.ok().and_then(Result::ok).map_or(0, |m| m.len())
                    }
                };
                counter!(EXPORT_SEGMENTS).increment(1);
                counter!(EXPORT_BYTES).increment(bytes);
            }
            Err(_) => counter!(EXPORT_ERRORS).increment(1),
        }
        result
    }

    /// The body of [`export_segment`](Self::export_segment).
    async fn export_segment_uncounted(
        &self,
        topic: &TopicName,
        path: &FsPath,
    ) -> Result<ExportOutcome, TierError> {
        let (len, trailer, trailer_bytes) = read_segment_ends(topic, path).await?;
        let range = trailer.offset_range();
        let key = self.layout.segment_key(topic, range);
        let ctx = key_ctx(topic, &key).offset(range.start);
        let listing = self.listing(topic).await?;
        if let Some(other) = listing.segments().iter().find(|s| s.key != key && s.range.overlaps(&range)) {
            return Err(TierError::fenced(
                ctx,
                format!("offsets {range:?} overlap the existing object {} ({:?})", other.key, other.range),
            ));
        }
        if let Some(gap) = listing.recorded().iter().find(|g| g.range.overlaps(&range)) {
            return Err(TierError::fenced(
                ctx,
                format!("offsets {range} overlap offsets {} recorded lost by {}", gap.range, gap.key),
            ));
        }
        let next = listing.continuation();
        if !listing.segments().is_empty() && range.start > next {
            return Err(TierError::invalid(
                ctx,
                format!(
                    "the segment holding offsets {range} does not continue cold's offsets {} (the next \
                     segment must start at {next}); record offsets {} as lost first",
                    listing.range(),
                    OffsetRange::new(next, range.start)
                ),
            ));
        }
        let bounds = TimeBounds { min: trailer.min_timestamp, max: trailer.max_timestamp };
        let exported = |key: &Path| SegmentObject::with_bounds(key.clone(), range, len, Some(bounds));
        let fingerprint = Fingerprint { len, content: Content::File { path, trailer: trailer_bytes } };
        let pointer = (Self::pointer_from(&listing, range.start), crate::layout::segment_file_name(range));
        if self.existing_matches(topic, &key, &fingerprint).await? {
            let known = listing.segments().iter().find(|s| s.key == key);
            if known.is_none() {
                self.put_pointer(topic, pointer.0, &pointer.1).await?;
            }
            if !known.is_some_and(|s| s.marked) {
                self.put_marker(topic, range, bounds).await?;
            }
            self.note_segment(topic, exported(&key))?;
            return Ok(ExportOutcome::AlreadyPresent { key, range });
        }
        let parts = if len <= self.config.multipart_threshold {
            let data =
                read_file(path).await.map_err(|e| file_error(topic, path, "reading the segment", e))?;
            if data.len() as u64 != len {
                return Err(TierError::invalid(ctx, "the segment file changed while being exported"));
            }
            match self.put_create(topic, &key, Bytes::from(data)).await? {
                true => 0,
                false if self.existing_matches(topic, &key, &fingerprint).await? => {
                    self.put_pointer(topic, pointer.0, &pointer.1).await?;
                    self.put_marker(topic, range, bounds).await?;
                    self.note_segment(topic, exported(&key))?;
                    return Ok(ExportOutcome::AlreadyPresent { key, range });
                }
                false => {
                    return Err(TierError::fenced(
                        ctx,
                        "a different object was written at this name concurrently",
                    ));
                }
            }
        } else {
            self.put_multipart_from_file(topic, &key, path, len).await?
        };
        self.put_pointer(topic, pointer.0, &pointer.1).await?;
        self.put_marker(topic, range, bounds).await?;
        self.note_segment(topic, exported(&key))?;
        Ok(ExportOutcome::Uploaded { key, range, bytes: len, parts })
    }

    /// Writes the zero-byte time marker of the segment holding `range` (always *after*
    /// the segment, so a crash leaves a segment without a marker, never a marker without
    /// its segment). One conditional PUT; an existing marker is success.
    pub(crate) async fn put_marker(
        &self,
        topic: &TopicName,
        range: OffsetRange,
        bounds: TimeBounds,
    ) -> Result<(), TierError> {
        let key = self.layout.marker_key(topic, range, bounds);
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        Counters::add(&self.counters.marker_puts, 1);
        match self.store.put_opts(&key, PutPayload::new(), opts).await {
            Ok(_)
            | Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(()),
            Err(e) => Err(map_store_error(key_ctx(topic, &key), "writing a time marker", e)),
        }
    }

    /// One `PutMode::Create` PUT; `Ok(false)` when an object already exists there.
    pub(crate) async fn put_create(
        &self,
        topic: &TopicName,
        key: &Path,
        data: Bytes,
    ) -> Result<bool, TierError> {
        let len = data.len() as u64;
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        Counters::add(&self.counters.put_requests, 1);
        match self.store.put_opts(key, PutPayload::from(data), opts).await {
            Ok(_) => {
                Counters::add(&self.counters.put_bytes, len);
                Ok(true)
            }
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(map_store_error(key_ctx(topic, key), "uploading a segment", e)),
        }
    }

    /// Whether an object exists at `key` with the content `fingerprint` describes;
    /// `Fenced` when one exists with other content, `Ok(false)` when none exists.
    pub(crate) async fn existing_matches(
        &self,
        topic: &TopicName,
        key: &Path,
        fingerprint: &Fingerprint<'_>,
    ) -> Result<bool, TierError> {
        let ctx = key_ctx(topic, key);
        Counters::add(&self.counters.head_requests, 1);
        let meta = match self.store.head(key).await {
            Ok(meta) => meta,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(map_store_error(ctx, "checking for an existing segment", e)),
        };
        if meta.size != fingerprint.len {
            return Err(TierError::fenced(
                ctx,
                format!(
                    "a different object of {} bytes (not {}) already holds this name",
                    meta.size, fingerprint.len
                ),
            ));
        }
        let same = match &fingerprint.content {
            Content::Whole(whole) => self.get_counted(topic, key, 0..meta.size).await? == *whole,
            Content::File { path, trailer } => {
                let n = trailer.len() as u64;
                let existing = self.get_counted(topic, key, meta.size.saturating_sub(n)..meta.size).await?;
                existing == *trailer
                    && self.object_crc(topic, key, meta.size).await?
                        == file_crc(topic, path, meta.size, self.config.read_buffer).await?
            }
        };
        if !same {
            return Err(TierError::fenced(
                ctx,
                "a different object of the same length (other trailer or CRC-32C) already holds this name",
            ));
        }
        Ok(true)
    }

    /// The CRC-32C of the first `len` bytes of the object `key`, read in ranged GETs of
    /// at most `read_buffer` bytes, one at a time (memory: one chunk).
    async fn object_crc(&self, topic: &TopicName, key: &Path, len: u64) -> Result<u32, TierError> {
        let chunk = self.config.read_buffer.max(1);
        let mut crc = 0u32;
        let mut at = 0u64;
        while at < len {
            let end = (at + chunk).min(len);
            let bytes = self.get_counted(topic, key, at..end).await?;
            if bytes.len() as u64 != end - at {
                return Err(TierError::unavailable(
                    key_ctx(topic, key).location(format!("{key}@{at}")),
                    format!("a ranged read of {} bytes returned {}", end - at, bytes.len()),
                ));
            }
            crc = crc32c::crc32c_append(crc, &bytes);
            at = end;
        }
        Ok(crc)
    }

    async fn get_counted(
        &self,
        topic: &TopicName,
        key: &Path,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, TierError> {
        let bytes = self
            .store
            .get_range(key, range)
            .await
            .map_err(|e| map_store_error(key_ctx(topic, key), "reading an existing segment", e))?;
        self.counters.note_get(bytes.len() as u64);
        Ok(bytes)
    }

    /// Streams the file into a multipart upload; aborts it on any failure. Returns the
    /// number of parts.
    async fn put_multipart_from_file(
        &self,
        topic: &TopicName,
        key: &Path,
        path: &FsPath,
        len: u64,
    ) -> Result<u64, TierError> {
        let ctx = key_ctx(topic, key);
        let upload = self
            .store
            .put_multipart(key)
            .await
            .map_err(|e| map_store_error(ctx.clone(), "starting a multipart upload", e))?;
        let part_size = self.config.part_size as usize;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part_size);
        let opened = {
            let path = path.to_owned();
            blocking::spawn(move || std::fs::File::open(path)).await.unwrap_or_else(|e| Err(job_failed(e)))
        };
        let mut file = match opened {
            Ok(file) => file,
            Err(e) => {
                self.abort(writer).await;
                return Err(file_error(topic, path, "opening the segment", e));
            }
        };
        let mut sent = 0u64;
        let mut parts = 0u64;
        while sent < len {
            if let Err(e) = writer.wait_for_capacity(self.config.upload_concurrency).await {
                self.abort(writer).await;
                return Err(map_store_error(ctx, "uploading a part", e));
            }
            let want = (len - sent).min(part_size as u64) as usize;
            let read = blocking::spawn(move || {
                let mut buf = BytesMut::zeroed(want);
                let read = file.read_exact(&mut buf);
                (file, read.map(|()| buf))
            })
            .await;
            let buf = match read {
                Ok((back, Ok(buf))) => {
                    file = back;
                    buf
                }
                Ok((_, Err(e))) => {
                    self.abort(writer).await;
                    return Err(file_error(topic, path, "reading the segment", e));
                }
                Err(e) => {
                    self.abort(writer).await;
                    return Err(file_error(topic, path, "reading the segment", job_failed(e)));
                }
            };
            sent += want as u64;
            parts += 1;
            Counters::add(&self.counters.put_bytes, want as u64);
            writer.put(buf.freeze());
        }
        match writer.finish().await {
            Ok(_) => {
                Counters::add(&self.counters.multipart_uploads, 1);
                Ok(parts)
            }
            Err(e) => {
                // finish() aborts the upload itself when a part or the completion fails.
                Counters::add(&self.counters.multipart_aborts, 1);
                Err(map_store_error(ctx, "completing a multipart upload", e))
            }
        }
    }

    async fn abort(&self, writer: WriteMultipart) {
        Counters::add(&self.counters.multipart_aborts, 1);
        if let Err(e) = writer.abort().await {
            tracing::warn!(error = %e, "aborting a failed multipart upload failed; the bucket's lifecycle rule will remove its parts");
        }
    }
}

/// The CRC-32C of the first `len` bytes of the file at `path`, read `chunk` bytes at a
/// time. A file shorter than `len` is `InvalidInput` (it changed since it was checked).
async fn file_crc(topic: &TopicName, path: &FsPath, len: u64, chunk: u64) -> Result<u32, TierError> {
    let (owned, at) = (topic.clone(), path.to_owned());
    blocking::spawn(move || file_crc_now(&owned, &at, len, chunk))
        .await
        .unwrap_or_else(|e| Err(file_error(topic, path, "reading the segment", job_failed(e))))
}

fn file_crc_now(topic: &TopicName, path: &FsPath, len: u64, chunk: u64) -> Result<u32, TierError> {
    let mut file =
        std::fs::File::open(path).map_err(|e| file_error(topic, path, "opening the segment", e))?;
    let mut buf = vec![0u8; usize::try_from(chunk.clamp(1, len.max(1))).unwrap_or(1 << 20)];
    let mut crc = 0u32;
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match file.read_exact(&mut buf[..want]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(TierError::invalid(
                    crate::error::topic_ctx(topic).location(path.display().to_string()),
                    "the segment file shrank while being compared",
                ));
            }
            Err(e) => return Err(file_error(topic, path, "reading the segment", e)),
        }
        crc = crc32c::crc32c_append(crc, &buf[..want]);
        left -= want as u64;
    }
    Ok(crc)
}

/// The length, decoded trailer and raw trailer bytes of the sealed segment at `path`,
/// after checking its header names `topic` and agrees with the trailer.
async fn read_segment_ends(topic: &TopicName, path: &FsPath) -> Result<(u64, Trailer, Bytes), TierError> {
    let (owned, at) = (topic.clone(), path.to_owned());
    blocking::spawn(move || read_segment_ends_now(&owned, &at))
        .await
        .unwrap_or_else(|e| Err(file_error(topic, path, "reading the segment", job_failed(e))))
}

fn read_segment_ends_now(topic: &TopicName, path: &FsPath) -> Result<(u64, Trailer, Bytes), TierError> {
    let io = |what: &'static str| move |e: std::io::Error| file_error(topic, path, what, e);
    let invalid = |message: String| {
        TierError::invalid(crate::error::topic_ctx(topic).location(path.display().to_string()), message)
    };
    let mut file = std::fs::File::open(path).map_err(io("opening the segment"))?;
    let len = file.metadata().map_err(io("reading the segment's size"))?.len();
    if len < TRAILER_LEN as u64 {
        return Err(invalid(format!("{len} bytes is too short for a sealed segment")));
    }
    let mut head = vec![0u8; (len as usize).min(MAX_HEADER_LEN)];
    file.read_exact(&mut head).map_err(io("reading the segment header"))?;
    let (header, _) =
        SegmentHeader::decode(&head).map_err(|e| invalid("bad segment header".into()).with_source(e))?;
    file.seek(std::io::SeekFrom::Start(len - TRAILER_LEN as u64)).map_err(io("seeking to the trailer"))?;
    let mut tail = vec![0u8; TRAILER_LEN];
    file.read_exact(&mut tail).map_err(io("reading the segment trailer"))?;
    let trailer =
        Trailer::decode(&tail).map_err(|e| invalid("not a sealed segment".into()).with_source(e))?;
    if trailer.segment_len() != len {
        return Err(invalid(format!(
            "the trailer describes {} bytes, the file has {len}",
            trailer.segment_len()
        )));
    }
    if &header.topic != topic {
        return Err(invalid(format!("the segment belongs to topic '{}'", header.topic)));
    }
    if header.base_offset != trailer.base_offset {
        return Err(invalid("the header and trailer disagree on the base offset".into()));
    }
    if trailer.record_count == 0 {
        return Err(invalid("an empty segment has nothing to export".into()));
    }
    Ok((len, trailer, Bytes::from(tail)))
}

/// The whole file at `path`, read off the runtime ([`blocking::spawn`]).
async fn read_file(path: &FsPath) -> std::io::Result<Vec<u8>> {
    let path = path.to_owned();
    blocking::spawn(move || std::fs::read(path)).await.unwrap_or_else(|e| Err(job_failed(e)))
}

/// A blocking job that did not return, as the I/O error of the read it did.
fn job_failed(e: blocking::JobFailed) -> std::io::Error {
    std::io::Error::other(e)
}
