//! The record cache's budget bounds what its batches keep alive on the heap: the
//! allocations behind the cached batches, not only their encoded lengths.
//!
//! This test binary counts the bytes live on the heap with a global allocator that
//! forwards to the system's; each test appends far more than the budget and checks how
//! much more is live afterwards than before.

// A counting global allocator needs `unsafe impl GlobalAlloc`; it only forwards to the
// system allocator.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use common::{open, topic};
use tier_core::{RecordBatch, RecordBatchBuilder, Tier};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};

/// Forwards to the system allocator, keeping the sum of the sizes of live allocations.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const BUDGET: u64 = 1 << 20;
/// Live bytes allowed beyond the budget: the active segment's in-memory index, the
/// writer's buffers, the runtime's own.
const SLACK: usize = 256 << 10;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// One test at a time in this binary: the count is process-wide, and `cargo test` runs
/// the tests of a binary on parallel threads (nextest runs each in a process of its own).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn tier(dir: &std::path::Path) -> HotTier {
    let mut config = HotConfig::new(dir).with_fsync(FsyncPolicy::Never);
    config.cache_bytes = BUDGET;
    open(config).await
}

/// A batch of one `size`-byte record at `base`, built as `Topic::append` builds one.
fn single(base: u64, size: usize) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new();
    builder.push(base as i64, None, &[], &vec![(base % 251) as u8; size]).expect("push");
    builder.build(base).expect("build")
}

/// Appends `count` batches from `make` after a first one, returning the bytes live
/// after them minus those live after the first.
async fn growth(tier: &HotTier, count: u64, make: impl Fn(u64) -> RecordBatch) -> usize {
    let t = topic("memory");
    tier.append(&t, make(0)).await.expect("first append");
    let before = live();
    for base in 1..count {
        tier.append(&t, make(base)).await.expect("append");
    }
    assert_eq!(tier.range(&t).await.expect("range").end, count);
    live().saturating_sub(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_single_record_batches_keep_no_more_alive_than_the_budget() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = tier(dir.path()).await;
    // 40,000 batches of one 100-byte record: about 6 MiB encoded, six times the budget.
    // A builder's buffer starts at 4 KiB; kept as built, each cached batch would hold
    // 4 KiB for its 144 encoded bytes.
    let grown = growth(&tier, 40_000, |base| single(base, 100)).await;
    assert!(
        grown <= BUDGET as usize + SLACK,
        "{grown} bytes more are live after the appends; the cache budget is {BUDGET}"
    );
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sliced_from_a_larger_buffer_does_not_keep_that_buffer_alive() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = tier(dir.path()).await;
    // Each batch is decoded from a 64 KiB buffer that holds it and more (as a read
    // chunk or a network frame would): kept as decoded, each cached 1 KiB batch would
    // hold its whole buffer.
    let sliced = |base: u64| {
        let mut buf = single(base, 1024).to_bytes().to_vec();
        buf.resize(64 << 10, 0);
        RecordBatch::decode(&Bytes::from(buf)).expect("decode")
    };
    let grown = growth(&tier, 4_000, sliced).await;
    assert!(
        grown <= BUDGET as usize + SLACK,
        "{grown} bytes more are live after the appends; the cache budget is {BUDGET}"
    );
    tier.close().await;
}
