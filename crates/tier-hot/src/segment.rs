//! Segment files: the active segment the writer appends to, sealed segments read through
//! mmap, and the descriptions ([`SegmentInfo`], [`SegmentEvent`]) handed to callers.

use std::{
    fs::{File, OpenOptions},
    io::{self, IoSlice, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::SystemTime,
};

use tier_core::{
    Offset, OffsetRange, RecordBatch, TierError, Timestamp, TopicName,
    batch::BATCH_PREFIX_LEN,
    clock::unix_millis,
    segment::{SealedSegment, SegmentHeader, SegmentWriterState},
};

use crate::layout::{at, ctx, fsync_dir, io_err, segment_file_name};
use crate::mmap::map_sealed;

/// A sealed segment of the hot tier, as listed by
/// [`HotTier::sealed_segments`](crate::HotTier::sealed_segments) and handed to the
/// retention predicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The topic.
    pub topic: TopicName,
    /// The segment file.
    pub path: PathBuf,
    /// The offsets it holds.
    pub range: OffsetRange,
    /// File size in bytes (header, batches, index and trailer).
    pub bytes: u64,
    /// Smallest record timestamp.
    pub min_timestamp: Timestamp,
    /// Largest record timestamp.
    pub max_timestamp: Timestamp,
    /// When the segment was sealed, by the tier's clock ([`HotConfig::clock`](crate::HotConfig::clock));
    /// for segments found on disk at open, the file's modification time, which the seal
    /// set to that time. May be later than a newer segment's when the clock went back.
    pub sealed_at: SystemTime,
}

/// A change to a topic's sealed segments, broadcast to
/// [`HotTier::segment_events`](crate::HotTier::segment_events) subscribers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SegmentEvent {
    /// A segment was sealed: it is immutable from now on and may be exported.
    Sealed(SegmentInfo),
    /// Retention deleted a sealed segment.
    Deleted(SegmentInfo),
}

/// A sealed segment file, mapped into memory.
///
/// A segment sealed by rotation is readable (and listed in the topic's state) as soon
/// as its footer is written, but its fsync runs in the background (`writer::seal`):
/// until that is done it is `synced == false` and not yet *sealed to the outside*
/// (no `SegmentEvent::Sealed`, not in `sealed_segments()`, never deleted by retention).
#[derive(Debug)]
pub(crate) struct SealedFile {
    pub(crate) info: SegmentInfo,
    pub(crate) segment: SealedSegment,
    /// The footer and data are on disk (always true for segments found at open).
    synced: AtomicBool,
}

impl SealedFile {
    /// Maps and opens the sealed segment at `path` (header, trailer and index are
    /// checked). A malformed file is `Corruption` naming the file and byte position.
    pub(crate) fn open(
        topic: &TopicName,
        path: &Path,
        sealed_at: Option<SystemTime>,
    ) -> Result<Self, TierError> {
        let file = File::open(path).map_err(|e| io_err(topic, path, "opening a sealed segment", e))?;
        let meta = file.metadata().map_err(|e| io_err(topic, path, "reading a segment's metadata", e))?;
        let bytes = map_sealed(&file).map_err(|e| io_err(topic, path, "mapping a sealed segment", e))?;
        let segment = SealedSegment::open(bytes).map_err(|e| {
            let pos = e.position();
            e.into_tier_error(ctx(topic).location(at(path, pos)))
        })?;
        let trailer = segment.trailer();
        if segment.header().topic != *topic {
            return Err(TierError::corruption(
                ctx(topic).location(at(path, 0)),
                format!("segment belongs to topic '{}'", segment.header().topic),
            ));
        }
        let info = SegmentInfo {
            topic: topic.clone(),
            path: path.to_owned(),
            range: segment.offset_range(),
            bytes: meta.len(),
            min_timestamp: trailer.min_timestamp,
            max_timestamp: trailer.max_timestamp,
            sealed_at: sealed_at.or_else(|| meta.modified().ok()).unwrap_or(SystemTime::UNIX_EPOCH),
        };
        Ok(Self { info, segment, synced: AtomicBool::new(true) })
    }

    /// True once the file (and its directory entry) is durable.
    pub(crate) fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Records that the background seal made the file durable.
    pub(crate) fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}

/// Largest group of batches [`ActiveSegment::write_batches`] copies into one buffer for
/// a single `write` instead of a zero-copy `writev`: below this the copy costs less than
/// the kernel's per-`iovec` work (a 100 B batch appends about 12% faster), above it the
/// copy starts to cost more than it saves.
const COPY_WRITE_MAX: usize = 4096;

/// The segment being appended to, owned by the topic's writer task.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    pub(crate) path: PathBuf,
    file: File,
    /// A second handle on the same file for readers (positional reads only).
    pub(crate) read_handle: Arc<File>,
    pub(crate) state: SegmentWriterState,
    /// The file's length as of its last successful fsync through this handle (or the
    /// recovery that found it): the bytes known durable. A failed fsync cuts the file
    /// back to it ([`cut_back_to_durable`](Self::cut_back_to_durable)).
    durable: u64,
    /// Reused buffer of batch prefixes for vectored writes.
    prefixes: Vec<[u8; BATCH_PREFIX_LEN]>,
    /// Reused buffer small writes are copied into (see [`COPY_WRITE_MAX`]).
    small: Vec<u8>,
}

impl ActiveSegment {
    /// Creates `<dir>/<base>.seg` holding only a header (recording `created_at`, the
    /// tier's clock's time), fsyncs it and the directory.
    pub(crate) fn create(
        topic: &TopicName,
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u32,
        created_at: SystemTime,
    ) -> Result<Self, TierError> {
        Self::create_with(topic, dir, base_offset, index_interval_bytes, created_at, true)
    }

    /// Creates `<dir>/<base>.seg` holding only a header; fsyncs it and the directory
    /// only when `sync` (otherwise the caller makes it durable later: rotation's
    /// background seal does, under `never`/`interval`).
    pub(crate) fn create_with(
        topic: &TopicName,
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u32,
        created_at: SystemTime,
        sync: bool,
    ) -> Result<Self, TierError> {
        let path = dir.join(segment_file_name(base_offset));
        let header = SegmentHeader::new(topic.clone(), base_offset, unix_millis(created_at))
            .with_index_interval_bytes(index_interval_bytes);
        let p = path.as_path();
        let io = |what: &'static str| move |e| io_err(topic, p, what, e);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io("creating a segment"))?;
        file.write_all(&header.encode()).map_err(io("writing a segment header"))?;
        if sync {
            file.sync_all().map_err(io("fsyncing a new segment"))?;
            synced!(&path, &file);
            fsync_dir(dir).map_err(io("fsyncing the topic directory"))?;
        }
        let mut segment = Self::from_parts(topic, path.clone(), file, SegmentWriterState::new(&header))?;
        if !sync {
            segment.durable = 0;
        }
        Ok(segment)
    }

    /// An active segment from an open file whose valid data ends at `state.size()`, all
    /// of it durable (recovery fsynced the file and read it from the disk, see
    /// `page_cache`); the file is positioned there.
    pub(crate) fn from_parts(
        topic: &TopicName,
        path: PathBuf,
        mut file: File,
        state: SegmentWriterState,
    ) -> Result<Self, TierError> {
        file.seek(SeekFrom::Start(state.size()))
            .map_err(|e| io_err(topic, &path, "positioning in a segment", e))?;
        let read_handle =
            Arc::new(file.try_clone().map_err(|e| io_err(topic, &path, "opening a segment for reads", e))?);
        let durable = state.size();
        Ok(Self { path, file, read_handle, state, durable, prefixes: Vec::new(), small: Vec::new() })
    }

    /// True when no batch has been written.
    pub(crate) fn is_empty(&self) -> bool {
        self.state.batch_count() == 0
    }

    /// Writes `batches` (which continue the segment) and notes them in the state. On
    /// failure the file is cut back to its previous size.
    ///
    /// Copies and allocations: a group of at most [`COPY_WRITE_MAX`] bytes is copied
    /// into a reused buffer and written with one `write` (for a small batch the kernel's
    /// per-`iovec` work in `writev` costs more than the copy). A larger group goes from
    /// each batch's buffer (built once by the producer) to the kernel with no copy — one
    /// `IoSlice` for the 16-byte prefix (kept in a reused buffer) and one for the body,
    /// one `IoSlice` vector allocated per group, not per batch or record. (Noting a batch
    /// in `SegmentWriterState` reads its minimum timestamp with
    /// `RecordBatch::min_timestamp`, which walks only the records' length and timestamp
    /// fields and allocates nothing.)
    pub(crate) fn write_batches(&mut self, batches: &[RecordBatch]) -> io::Result<()> {
        let before = self.state.size();
        let total: usize = batches.iter().map(RecordBatch::encoded_len).sum();
        let result = if total <= COPY_WRITE_MAX {
            self.small.clear();
            for batch in batches {
                batch.write_to(&mut self.small);
            }
            fault!(Write, &self.path, &mut self.file, &[IoSlice::new(&self.small)])
                .and_then(|()| self.file.write_all(&self.small))
        } else {
            self.prefixes.clear();
            self.prefixes.extend(batches.iter().map(RecordBatch::prefix));
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(batches.len() * 2);
            for (prefix, batch) in self.prefixes.iter().zip(batches) {
                slices.push(IoSlice::new(prefix));
                slices.push(IoSlice::new(batch.body()));
            }
            fault!(Write, &self.path, &mut self.file, &slices)
                .and_then(|()| write_all_vectored(&mut self.file, &mut slices))
        };
        if let Err(e) = result {
            // Leave no partial batch behind; a failure here too is reported by the caller
            // poisoning the writer.
            self.file.set_len(before)?;
            self.file.seek(SeekFrom::Start(before))?;
            return Err(e);
        }
        let mut position = before;
        for batch in batches {
            self.state.note_batch(batch, position).map_err(io::Error::other)?;
            position += batch.encoded_len() as u64;
        }
        Ok(())
    }

    /// fsyncs the file's data (an acknowledgement waits for it: recorded as durable by
    /// the fault-injection feature's durability tracking).
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.sync_untracked()?;
        synced!(&self.path, &self.file);
        Ok(())
    }

    /// fsyncs the file's data without recording it as durable: the `interval` timer's
    /// fsync, which races with appends on the blocking pool, so which of them it covers
    /// is timing (see `faults`' durability tracking).
    pub(crate) fn sync_untracked(&mut self) -> io::Result<()> {
        fault!(Fsync, &self.path, &self.file, self.durable)?;
        self.file.sync_data()?;
        self.durable = self.state.size();
        synced!(&self.path, &self.file);
        Ok(())
    }

    /// After a failed fsync: cuts the file back to its last durable length, so that the
    /// bytes written since — which a failed writeback may have left in the page cache
    /// only, marked clean, where no later fsync writes them (see `page_cache`) — are never
    /// read, served or appended after. Truncating drops their pages. Only under
    /// `fsync = always`, where nothing past that length was acknowledged; the writer is
    /// poisoned, and `state` (which still counts the batches cut off) is never used again.
    pub(crate) fn cut_back_to_durable(&mut self) -> io::Result<()> {
        self.file.set_len(self.durable)?;
        cut_to!(&self.path, self.durable);
        self.file.seek(SeekFrom::Start(self.durable))?;
        Ok(())
    }

    /// Writes the footer and reopens the file as a sealed segment, *without* fsyncing:
    /// returns the mapped segment (not yet synced, see [`SealedFile`]) and the file, for
    /// the background seal to fsync with [`sync_sealed`].
    pub(crate) fn finish(
        mut self,
        topic: &TopicName,
        sealed_at: SystemTime,
    ) -> Result<(SealedFile, File), TierError> {
        let path = self.path.clone();
        self.file
            .write_all(&self.state.footer_bytes())
            .map_err(|e| io_err(topic, &path, "writing a segment footer", e))?;
        stamp_seal(&self.file, sealed_at);
        let mut sealed = SealedFile::open(topic, &path, Some(sealed_at))?;
        *sealed.synced.get_mut() = false;
        Ok((sealed, self.file))
    }
}

/// Records a segment's seal time, from the tier's clock, as its file's modification time:
/// an open takes a sealed segment's seal time from there
/// ([`SegmentInfo::sealed_at`](crate::SegmentInfo::sealed_at)), so that it is the clock's
/// — an injected one's in tests and the simulation — rather than the file system's. Set
/// after the last write, before the seal's fsync, which makes it durable with the file. A
/// file system that refuses it leaves the time of the last write, which only moves when
/// retention by age deletes the segment.
pub(crate) fn stamp_seal(file: &File, sealed_at: SystemTime) {
    if let Err(e) = file.set_modified(sealed_at) {
        tracing::debug!(error = %e, "could not set a sealed segment's modification time");
    }
}

/// Makes a sealed segment durable: fsyncs its file, then `also` (the next active
/// segment when it was created without an fsync), then the topic directory.
pub(crate) fn sync_sealed(
    topic: &TopicName,
    path: &Path,
    file: &File,
    also: Option<(&Path, &File)>,
) -> Result<(), TierError> {
    fault!(SealFsync, path)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_err(topic, path, "fsyncing a sealed segment", e))?;
    synced!(path, file);
    if let Some((next, next_file)) = also {
        fault!(SealFsync, next)
            .and_then(|()| next_file.sync_all())
            .map_err(|e| io_err(topic, next, "fsyncing a new segment", e))?;
        // Only its header is recorded as durable: appends into the new segment run
        // concurrently with this fsync, so how much of them it covers is a race.
        synced_header!(next);
    }
    if let Some(dir) = path.parent() {
        fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
    }
    Ok(())
}

fn write_all_vectored(file: &mut File, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
