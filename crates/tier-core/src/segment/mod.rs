//! The segment format: one layout for the hot tier's WAL files and the cold tier's objects.
//!
//! A segment is a [`SegmentHeader`], then [`RecordBatch`](crate::RecordBatch)es back to
//! back, and — once sealed — a footer: a sparse [`SegmentIndex`] and a fixed-size
//! [`Trailer`] that ends the file. A sealed WAL segment is uploaded to object storage
//! byte for byte and read there in place with ranged requests: the last
//! [`DEFAULT_TAIL_FETCH_BYTES`] of an object hold the trailer and, usually, the whole
//! index, so one request tells a reader where every index interval lies and a second
//! fetches the data for a seek.
//!
//! The byte grammar, the meaning of every field and the reasoning behind the layout are
//! in `docs/format.md` ("Segment"); the batch grammar is in [`crate::batch`].
//!
//! What lives here:
//!
//! - [`SegmentHeader`], [`Trailer`], [`IndexEntry`] and [`SegmentIndex`]: the encodings
//!   and their decoders, which return a [`DecodeError`] on any malformed input and never
//!   panic or allocate more than the input justifies;
//! - [`SegmentWriterState`]: the pure (no I/O) bookkeeping a writer needs to build the
//!   footer, and [`SegmentWriter`], a streaming writer built on it;
//! - [`SealedSegment`]: reads a sealed segment held in memory (or an mmap) by offset and
//!   by timestamp, using the index instead of scanning from the start;
//! - [`RangedSegment`] and [`RangeReader`]: the same lookups over ranged reads of an
//!   object, with metadata ([`SegmentMeta`]) that is cheap to cache;
//! - [`scan_unsealed`] / [`scan_unsealed_with`]: the recovery scan of a WAL file after a
//!   crash, with an explicit [`RecoveryPolicy`] for torn tails and, in [`Unsynced`], what
//!   the writer's fsyncs say about where a crash can leave holes; [`header_unwritten`]
//!   tells a header that never reached the disk from a damaged one.

mod collect;
mod cursor;
mod gap;
mod header;
mod index;
mod ranged;
mod reader;
mod recovery;
mod trailer;
mod writer;

pub use collect::{BatchCollector, BatchSink, RecordCollector, first_offset_reaching};
pub use cursor::SegmentBatches;
pub use gap::{GAP_SUFFIX, gap_marker_name, parse_gap_marker_name};
pub use header::{HEADER_FIXED_LEN, MAX_HEADER_LEN, SEGMENT_MAGIC, SegmentHeader};
pub use index::{DataRange, INDEX_ENTRY_LEN, IndexEntry, SegmentIndex};
pub use ranged::{RangeReader, RangedSegment, SegmentMeta, tail_bytes_for_index};
pub use reader::SealedSegment;
pub use recovery::{
    DroppedIntact, PAGE, RecoveryPolicy, SECTOR, ScanOutcome, Unsynced, header_unwritten, hole_is_torn,
    scan_unsealed, scan_unsealed_with, unwritten_page,
};
pub use trailer::{TRAILER_LEN, TRAILER_MAGIC, Trailer};
pub use writer::{SegmentWriter, SegmentWriterState};

pub use crate::batch::DecodeError;

/// The segment format version this build writes.
pub const FORMAT_VERSION: u16 = 1;

/// The versions [`is_supported_version`] accepts, for error messages.
const SUPPORTED_VERSIONS: &str = "1";

/// Default distance in bytes between two index entries (64 KiB).
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 64 * 1024;

/// Default number of bytes [`RangedSegment::open`] fetches from the end of an object
/// (64 KiB): the trailer and, for segments up to about 256 MiB, the whole index.
pub const DEFAULT_TAIL_FETCH_BYTES: u64 = 64 * 1024;

/// True when this build can read segments of format `version`.
pub fn is_supported_version(version: u16) -> bool {
    version == FORMAT_VERSION
}

fn unsupported(version: u16) -> DecodeError {
    DecodeError::UnsupportedVersion { version, supported: SUPPORTED_VERSIONS }
}

fn invalid(position: u64, message: impl Into<String>) -> DecodeError {
    DecodeError::Invalid { position, message: message.into() }
}

fn truncated(position: u64, needed: u64, available: u64) -> DecodeError {
    DecodeError::Truncated { position, needed, available }
}
