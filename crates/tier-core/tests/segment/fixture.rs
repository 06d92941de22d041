//! The fixture of format version 1: written once, committed, and decoded by every later
//! build. Regenerate (only when deliberately changing version 1, which should never
//! happen once released) with `TIERLOG_WRITE_FIXTURES=1 cargo test -p tier-core --test segment fixture`.

use std::path::PathBuf;

use bytes::Bytes;
use tier_core::ReadLimit;
use tier_core::segment::{RecoveryPolicy, SealedSegment, scan_unsealed};

use crate::common;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1-sample.seg")
}

#[test]
fn v1_sample_fixture_keeps_decoding_with_known_contents() {
    let (fresh, model) = common::sample();
    if std::env::var_os("TIERLOG_WRITE_FIXTURES").is_some() {
        std::fs::write(path(), &fresh).unwrap();
    }
    let stored = std::fs::read(path()).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the fixture is committed with the code (regenerate with TIERLOG_WRITE_FIXTURES=1)",
            path().display()
        )
    });
    assert!(stored.len() < 8192);
    let seg = SealedSegment::open(Bytes::from(stored.clone())).unwrap();
    seg.verify().unwrap();
    assert_eq!(seg.header().topic.as_str(), "orders.v1");
    assert_eq!(seg.header().created_at, 1_700_000_000_000);
    assert_eq!(seg.offset_range().start, 100);
    assert_eq!(seg.offset_range().end, 113);
    assert_eq!(seg.trailer().batch_count, 6);
    let records = seg.read(0, u64::MAX, ReadLimit::unbounded()).unwrap();
    assert_eq!(records, model);
    assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
    assert_eq!(records[0].headers[0].name.as_ref(), b"h");
    assert_eq!(records[6].payload.as_ref(), b"out of order");
    assert_eq!(records[6].timestamp, 1015);
    assert_eq!(records[12].offset, 112);
    assert_eq!(seg.offset_for_timestamp(1012).unwrap(), Some(105));
    let scanned = scan_unsealed(&stored, RecoveryPolicy::Refuse).unwrap();
    assert!(scanned.sealed.is_some());
    // This build still writes exactly the same bytes.
    assert_eq!(fresh, stored, "the writer's output changed: format version 1 must stay stable");
}
