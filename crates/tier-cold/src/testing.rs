//! Object-store wrappers for tests (feature `testing`): [`CountingStore`] counts requests
//! and bytes, [`FaultyStore`] injects failures, ambiguous answers, lagging listings and
//! latency. Both forward every [`ObjectStore`] method to the wrapped store.

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
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt,
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

/// Which calls a [`FaultyStore`] fails, how, and how slow it is.
///
/// Besides plain failures it models what real S3-compatible stores do (see
/// `docs/cold.md`, "How object stores fail"):
///
/// 1. *Ambiguous answers* ([`lose_answer_every`](Self::lose_answer_every)): a mutating
///    request takes effect and its answer is lost (a timeout, a connection reset); the
///    caller sees an error, a retry finds the object already there (a conditional PUT
///    answers "already exists") or already gone. Object_store's own retries do not help:
///    it retries a request whose answer it did not see, so a conditional PUT retried
///    after it took effect fails with `AlreadyExists` / `Precondition`.
/// 2. *Refused before taking effect* ([`refuse_write_every`](Self::refuse_write_every)):
///    a mutating request fails and nothing changed; reads are not affected.
/// 3. *Lagging listings* ([`list_lag`](Self::list_lag)): LIST does not yet show an object
///    a PUT (or multipart completion) through this wrapper created, and still shows one a
///    DELETE through it removed, for the next `n` listings (eventually consistent LIST:
///    AWS S3 before December 2020, several S3-compatible stores today). GET and HEAD
///    are read-after-write consistent.
///
/// *Mutating requests* are `put_opts`, a multipart upload's `complete`, and each path of
/// `delete_stream`; they are counted on their own, so the write faults' `n`th request
/// does not move with the number of reads.
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
    /// Every `n`th mutating request takes effect on the store, then answers an
    /// injected error (the answer lost).
    pub lose_answer_every: Option<u64>,
    /// Every `n`th mutating request fails before it reaches the store.
    pub refuse_write_every: Option<u64>,
    /// Objects created or deleted through the wrapper stay unlisted / listed for the next
    /// `n` listings (`list`, `list_with_offset`, `list_with_delimiter`).
    pub list_lag: Option<u64>,
    /// Delay before every call.
    pub latency: Duration,
}

/// What the `n`th mutating request meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteFate {
    /// It takes effect and is answered.
    Normal,
    /// It takes effect; its answer is lost.
    LoseAnswer,
    /// It fails before reaching the store.
    Refuse,
}

/// A change a lagging listing does not show yet.
#[derive(Clone, Debug)]
struct Lagging {
    /// The object created (`None`: deleted, see `deleted`).
    path: Path,
    /// The deleted object's metadata, which listings keep showing (`None`: created).
    deleted: Option<ObjectMeta>,
    /// Listings left before it shows.
    lists_left: u64,
}

/// Injects failures ([`Faults`]) into calls to the wrapped store; the failures are
/// `object_store::Error::Generic` errors saying "injected fault".
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<parking_lot::Mutex<Faults>>,
    calls: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
    injected: Arc<AtomicU64>,
    lagging: Arc<parking_lot::Mutex<Vec<Lagging>>>,
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "FaultyStore", source: format!("injected fault in {what}").into() }
}

fn answer_lost(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault in {what}: the request took effect, its answer was lost").into(),
    }
}

impl FaultyStore {
    /// Wraps `inner` with `faults`.
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Faults) -> Self {
        Self {
            inner,
            faults: Arc::new(parking_lot::Mutex::new(faults)),
            calls: Arc::default(),
            writes: Arc::default(),
            injected: Arc::default(),
            lagging: Arc::default(),
        }
    }

    /// Replaces the faults (and restarts the call counts). Without `list_lag`, listings
    /// catch up at once.
    pub fn set_faults(&self, faults: Faults) {
        if faults.list_lag.is_none() {
            self.lagging.lock().clear();
        }
        *self.faults.lock() = faults;
        self.calls.store(0, Relaxed);
        self.writes.store(0, Relaxed);
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

    /// Counts a mutating request and decides its fate.
    fn write_fate(&self) -> WriteFate {
        let n = self.writes.fetch_add(1, Relaxed) + 1;
        let faults = self.faults.lock();
        let nth = |every: Option<u64>| every.is_some_and(|every| every > 0 && n.is_multiple_of(every));
        if nth(faults.refuse_write_every) {
            WriteFate::Refuse
        } else if nth(faults.lose_answer_every) {
            WriteFate::LoseAnswer
        } else {
            WriteFate::Normal
        }
    }

    /// The answer of a mutating request that met `fate` and answered `result`.
    fn answer<T>(&self, fate: WriteFate, what: &str, result: Result<T>) -> Result<T> {
        match fate {
            WriteFate::LoseAnswer => {
                self.injected.fetch_add(1, Relaxed);
                Err(answer_lost(what))
            }
            _ => result,
        }
    }

    /// Refuses a mutating request that met [`WriteFate::Refuse`].
    fn refuse(&self, fate: WriteFate, what: &str) -> Result<()> {
        if fate == WriteFate::Refuse {
            self.injected.fetch_add(1, Relaxed);
            return Err(injected(what));
        }
        Ok(())
    }

    /// Records a change listings lag behind (when `list_lag` is set).
    fn lag(&self, path: &Path, deleted: Option<ObjectMeta>) {
        let Some(lists_left) = self.faults.lock().list_lag.filter(|n| *n > 0) else { return };
        let mut lagging = self.lagging.lock();
        lagging.retain(|l| l.path != *path);
        lagging.push(Lagging { path: path.clone(), deleted, lists_left });
    }

    /// `listed` as a lagging listing of `prefix` shows it (objects after `offset` only):
    /// recent creations hidden, recent deletions still there. Counts one listing.
    fn lagged(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
        listed: Vec<ObjectMeta>,
    ) -> Vec<ObjectMeta> {
        let mut lagging = self.lagging.lock();
        if lagging.is_empty() {
            return listed;
        }
        let under = |p: &Path| {
            prefix.is_none_or(|prefix| p.prefix_match(prefix).is_some()) && offset.is_none_or(|o| p > o)
        };
        let mut out: Vec<ObjectMeta> =
            listed.into_iter().filter(|m| !lagging.iter().any(|l| l.path == m.location)).collect();
        for l in lagging.iter() {
            if let Some(meta) = &l.deleted
                && under(&l.path)
                && !out.iter().any(|m| m.location == l.path)
            {
                out.push(meta.clone());
            }
        }
        out.sort_by(|a, b| a.location.cmp(&b.location));
        for l in lagging.iter_mut() {
            l.lists_left -= 1;
        }
        lagging.retain(|l| l.lists_left > 0);
        out
    }

    /// Whether listings lag now.
    fn lagging_lists(&self) -> bool {
        !self.lagging.lock().is_empty()
    }

    /// A listing stream through [`lagged`](Self::lagged) (collected first when a change
    /// lags).
    fn list_lagged(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
        inner: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        if !self.lagging_lists() {
            return inner;
        }
        let store = self.clone();
        let (prefix, offset) = (prefix.cloned(), offset.cloned());
        futures::stream::once(async move {
            let listed: Vec<Result<ObjectMeta>> = inner.collect().await;
            match listed.into_iter().collect::<Result<Vec<_>>>() {
                Ok(listed) => store
                    .lagged(prefix.as_ref(), offset.as_ref(), listed)
                    .into_iter()
                    .map(Ok)
                    .collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            }
        })
        .map(futures::stream::iter)
        .flatten()
        .boxed()
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
    location: Path,
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
        let fate = self.store.write_fate();
        self.store.refuse(fate, "complete")?;
        let result = self.inner.complete().await;
        if result.is_ok() {
            self.store.lag(&self.location, None);
        }
        self.store.answer(fate, "complete", result)
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
        let fate = self.write_fate();
        self.refuse(fate, "put_opts")?;
        let result = self.inner.put_opts(location, payload, opts).await;
        if result.is_ok() {
            self.lag(location, None);
        }
        self.answer(fate, "put_opts", result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.enter("put_multipart_opts").await?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload { inner, store: self.clone(), location: location.clone(), parts: 0 }))
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
        // One path at a time, so each meets its own fate (and a lagging listing keeps
        // showing what it deleted, with the metadata it had).
        let store = self.clone();
        locations
            .then(move |location| {
                let store = store.clone();
                async move {
                    let location = location?;
                    let fate = store.write_fate();
                    store.refuse(fate, "delete_stream")?;
                    let lags = store.faults.lock().list_lag.is_some();
                    let before = if lags { store.inner.head(&location).await.ok() } else { None };
                    let one = futures::stream::iter([Ok(location.clone())]).boxed();
                    let result = store.inner.delete_stream(one).next().await.unwrap_or(Ok(location.clone()));
                    if result.is_ok()
                        && let Some(meta) = before
                    {
                        store.lag(&location, Some(meta));
                    }
                    store.answer(fate, "delete_stream", result)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if let Err(e) = self.call("list") {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.list_lagged(prefix, None, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        if let Err(e) = self.call("list_with_offset") {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.list_lagged(prefix, Some(offset), self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.enter("list_with_delimiter").await?;
        let mut result = self.inner.list_with_delimiter(prefix).await?;
        if self.lagging_lists() {
            // Only the objects directly under `prefix` lag (common prefixes are left alone).
            let objects = std::mem::take(&mut result.objects);
            let depth = prefix.map_or(0, |p| p.parts().count()) + 1;
            result.objects = self
                .lagged(prefix, None, objects)
                .into_iter()
                .filter(|m| m.location.parts().count() == depth)
                .collect();
        }
        Ok(result)
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
