//! Request and byte counters of a [`ColdTier`](crate::ColdTier).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of a cold tier's counters since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColdStats {
    /// Ranged GET requests (segment tails, index heads and data).
    pub get_requests: u64,
    /// Bytes those GETs returned.
    pub get_bytes: u64,
    /// Largest single GET, in bytes.
    pub max_get_bytes: u64,
    /// Single-request PUTs.
    pub put_requests: u64,
    /// Multipart uploads completed.
    pub multipart_uploads: u64,
    /// Multipart uploads aborted after a failure.
    pub multipart_aborts: u64,
    /// Bytes uploaded (single puts and parts).
    pub put_bytes: u64,
    /// HEAD requests.
    pub head_requests: u64,
    /// Listings of a topic's folder (each may be several paginated requests).
    pub listings: u64,
    /// Objects deleted.
    pub deletes: u64,
    /// Segment metadata found in the cache.
    pub meta_cache_hits: u64,
    /// Segment metadata fetched from the store.
    pub meta_cache_misses: u64,
    /// Data intervals of seeks and bounded reads found in the data cache (no request).
    pub data_cache_hits: u64,
    /// Data intervals of seeks and bounded reads fetched from the store.
    pub data_cache_misses: u64,
    /// Zero-byte time markers written.
    pub marker_puts: u64,
    /// Zero-byte gap markers written (by [`record_gap`](crate::ColdTier::record_gap)).
    pub gap_marker_puts: u64,
    /// Successor pointers written (see [`Layout::pointer_key`](crate::Layout::pointer_key)).
    pub pointer_puts: u64,
    /// Successor pointers read while building a manifest (the last one of each listing
    /// is normally absent).
    pub pointer_gets: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) get_requests: AtomicU64,
    pub(crate) get_bytes: AtomicU64,
    pub(crate) max_get_bytes: AtomicU64,
    pub(crate) put_requests: AtomicU64,
    pub(crate) multipart_uploads: AtomicU64,
    pub(crate) multipart_aborts: AtomicU64,
    pub(crate) put_bytes: AtomicU64,
    pub(crate) head_requests: AtomicU64,
    pub(crate) listings: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) meta_cache_hits: AtomicU64,
    pub(crate) meta_cache_misses: AtomicU64,
    pub(crate) data_cache_hits: AtomicU64,
    pub(crate) data_cache_misses: AtomicU64,
    pub(crate) marker_puts: AtomicU64,
    pub(crate) gap_marker_puts: AtomicU64,
    pub(crate) pointer_puts: AtomicU64,
    pub(crate) pointer_gets: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub(crate) fn note_get(&self, bytes: u64) {
        Self::add(&self.get_requests, 1);
        Self::add(&self.get_bytes, bytes);
        self.max_get_bytes.fetch_max(bytes, Relaxed);
        crate::metrics::fetched(bytes);
    }

    pub(crate) fn snapshot(&self) -> ColdStats {
        let g = |c: &AtomicU64| c.load(Relaxed);
        ColdStats {
            get_requests: g(&self.get_requests),
            get_bytes: g(&self.get_bytes),
            max_get_bytes: g(&self.max_get_bytes),
            put_requests: g(&self.put_requests),
            multipart_uploads: g(&self.multipart_uploads),
            multipart_aborts: g(&self.multipart_aborts),
            put_bytes: g(&self.put_bytes),
            head_requests: g(&self.head_requests),
            listings: g(&self.listings),
            deletes: g(&self.deletes),
            meta_cache_hits: g(&self.meta_cache_hits),
            meta_cache_misses: g(&self.meta_cache_misses),
            data_cache_hits: g(&self.data_cache_hits),
            data_cache_misses: g(&self.data_cache_misses),
            marker_puts: g(&self.marker_puts),
            gap_marker_puts: g(&self.gap_marker_puts),
            pointer_puts: g(&self.pointer_puts),
            pointer_gets: g(&self.pointer_gets),
        }
    }
}
