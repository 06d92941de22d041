//! Object-store wrappers for tests (feature `testing`): [`CountingStore`] counts requests
//! and bytes, [`FaultyStore`] injects failures and latency. Both forward every
//! [`ObjectStore`] method to the wrapped store.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};

/// Request counts of a [`CountingStore`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// `get_opts` calls (GETs, ranged or not, and HEADs through `get_opts`).
    pub gets: u64,
    /// Bytes those GETs covered.
    pub get_bytes: u64,
    /// Largest single GET in bytes.
    pub max_get_bytes: u64,
    /// `get_ranges` calls.
    pub get_ranges: u64,
    /// `put_opts` calls.
    pub puts: u64,
    /// Multipart uploads started.
    pub multipart_starts: u64,
    /// Parts uploaded.
    pub parts: u64,
    /// Multipart uploads completed.
    pub multipart_completes: u64,
    /// Multipart uploads aborted.
    pub multipart_aborts: u64,
    /// `list`, `list_with_offset` and `list_with_delimiter` calls.
    pub lists: u64,
    /// Paths passed to `delete_stream`.
    pub deletes: u64,
    /// `copy_opts` and `rename_opts` calls.
    pub copies: u64,
}

impl RequestCounts {
    /// Every request counted (a multipart upload counts its start, parts and end).
    pub fn total(&self) -> u64 {
        self.gets
            + self.get_ranges
            + self.puts
            + self.multipart_starts
            + self.parts
            + self.multipart_completes
            + self.multipart_aborts
            + self.lists
            + self.deletes
            + self.copies
    }
}

#[derive(Debug, Default)]
struct Counts {
    gets: AtomicU64,
    get_bytes: AtomicU64,
    max_get_bytes: AtomicU64,
    get_ranges: AtomicU64,
    puts: AtomicU64,
    multipart_starts: AtomicU64,
    parts: AtomicU64,
    multipart_completes: AtomicU64,
    multipart_aborts: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    copies: AtomicU64,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// Counts every request made through it.
#[derive(Debug, Clone)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Counts>,
}

impl CountingStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, counts: Arc::default() }
    }

    /// The counts so far.
    pub fn counts(&self) -> RequestCounts {
        let c = &self.counts;
        let g = |a: &AtomicU64| a.load(Relaxed);
        RequestCounts {
            gets: g(&c.gets),
            get_bytes: g(&c.get_bytes),
            max_get_bytes: g(&c.max_get_bytes),
            get_ranges: g(&c.get_ranges),
            puts: g(&c.puts),
            multipart_starts: g(&c.multipart_starts),
            parts: g(&c.parts),
            multipart_completes: g(&c.multipart_completes),
            multipart_aborts: g(&c.multipart_aborts),
            lists: g(&c.lists),
            deletes: g(&c.deletes),
            copies: g(&c.copies),
        }
    }

    /// Sets every count back to zero.
    pub fn reset(&self) {
        let c = &self.counts;
        for a in [
            &c.gets,
            &c.get_bytes,
            &c.max_get_bytes,
            &c.get_ranges,
            &c.puts,
            &c.multipart_starts,
            &c.parts,
            &c.multipart_completes,
            &c.multipart_aborts,
            &c.lists,
            &c.deletes,
            &c.copies,
        ] {
            a.store(0, Relaxed);
        }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    counts: Arc<Counts>,
}

#[async_trait]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        inc(&self.counts.parts);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        inc(&self.counts.multipart_completes);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        inc(&self.counts.multipart_aborts);
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        inc(&self.counts.puts);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        inc(&self.counts.multipart_starts);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload { inner, counts: self.counts.clone() }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        inc(&self.counts.gets);
        let result = self.inner.get_opts(location, options).await?;
        let len = result.range.end - result.range.start;
        self.counts.get_bytes.fetch_add(len, Relaxed);
        self.counts.max_get_bytes.fetch_max(len, Relaxed);
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        inc(&self.counts.get_ranges);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let counts = self.counts.clone();
        let counted = locations.inspect(move |_| inc(&counts.deletes)).boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        inc(&self.counts.lists);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        inc(&self.counts.lists);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        inc(&self.counts.lists);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        inc(&self.counts.copies);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        inc(&self.counts.copies);
        self.inner.rename_opts(from, to, options).await
    }
}

/// Which calls a [`FaultyStore`] fails, and how slow it is.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Every call after this many (counting all methods, parts included) fails.
    pub fail_after_calls: Option<u64>,
    /// Every `n`th call fails (a deterministic failure rate of 1/n).
    pub fail_every: Option<u64>,
    /// Parts of a multipart upload after this many (per upload) fail.
    pub fail_parts_after: Option<u64>,
    /// `abort` of a multipart upload fails too (as when the process dies mid-upload).
    pub fail_aborts: bool,
    /// Delay before every call.
    pub latency: Duration,
}

/// Injects failures ([`Faults`]) into calls to the wrapped store; the failures are
/// `object_store::Error::Generic` errors saying "injected fault".
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<parking_lot::Mutex<Faults>>,
    calls: Arc<AtomicU64>,
    injected: Arc<AtomicU64>,
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "FaultyStore", source: format!("injected fault in {what}").into() }
}

impl FaultyStore {
    /// Wraps `inner` with `faults`.
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Faults) -> Self {
        Self {
            inner,
            faults: Arc::new(parking_lot::Mutex::new(faults)),
            calls: Arc::default(),
            injected: Arc::default(),
        }
    }

    /// Replaces the faults (and restarts the call count).
    pub fn set_faults(&self, faults: Faults) {
        *self.faults.lock() = faults;
        self.calls.store(0, Relaxed);
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Relaxed)
    }

    /// Counts a call; `Err` when it must fail.
    fn call(&self, what: &str) -> Result<Duration> {
        let n = self.calls.fetch_add(1, Relaxed) + 1;
        let faults = self.faults.lock().clone();
        let fail = faults.fail_after_calls.is_some_and(|after| n > after)
            || faults.fail_every.is_some_and(|every| every > 0 && n.is_multiple_of(every));
        if fail {
            self.injected.fetch_add(1, Relaxed);
            return Err(injected(what));
        }
        Ok(faults.latency)
    }

    async fn enter(&self, what: &str) -> Result<()> {
        let latency = self.call(what)?;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        Ok(())
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    store: FaultyStore,
    parts: u64,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.parts += 1;
        let limit = self.store.faults.lock().fail_parts_after;
        if limit.is_some_and(|after| self.parts > after) {
            self.store.injected.fetch_add(1, Relaxed);
            return async { Err(injected("put_part")) }.boxed();
        }
        if let Err(e) = self.store.call("put_part") {
            return async move { Err(e) }.boxed();
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.store.enter("complete").await?;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        if self.store.faults.lock().fail_aborts {
            self.store.injected.fetch_add(1, Relaxed);
            return Err(injected("abort"));
        }
        self.store.enter("abort").await?;
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.enter("put_opts").await?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.enter("put_multipart_opts").await?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload { inner, store: self.clone(), parts: 0 }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.enter("get_opts").await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.enter("get_ranges").await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        if let Err(e) = self.call("delete_stream") {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if let Err(e) = self.call("list") {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        if let Err(e) = self.call("list_with_offset") {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.enter("list_with_delimiter").await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.enter("copy_opts").await?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.enter("rename_opts").await?;
        self.inner.rename_opts(from, to, options).await
    }
}
