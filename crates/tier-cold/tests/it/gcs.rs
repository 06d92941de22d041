//! The cold tier on Google Cloud Storage as `fake-gcs-server` (the emulator installable
//! from the registries) serves it. The emulator answers the XML API's LIST, HEAD and
//! ranged GET that `object_store`'s GCS client reads with, but not its PUT or multipart
//! upload (`docs/cold.md`, "Backends"): objects are stored through the emulator's JSON API,
//! and the tier reads them through its configured GCS client. Each test runs its own
//! emulator (`tier_testkit::servers::GcsEmulator`).

use crate::common;

use common::{GCS_BUCKET, gcs_emulator, records, topic, write_segment};
use futures::TryStreamExt;
use tier_cold::ColdTier;
use tier_cold::layout::segment_file_name;
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt};

const PER_BATCH: usize = 10;
const PAYLOAD: usize = 16;

/// Three sealed segments of `[0, 300)` stored in the emulator; a tier connected through
/// the GCS client lists them (XML LIST), reads every record (ranged GETs), streams them,
/// and finds offsets by timestamp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_in_the_emulator_are_listed_and_read_through_the_gcs_client() {
    let (server, config) = gcs_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("gcs");
    for (base, end) in [(0u64, 100u64), (100, 200), (200, 300)] {
        let path = dir.path().join(format!("{base}.seg"));
        let batches = ((end - base) as usize).div_ceil(PER_BATCH);
        assert_eq!(write_segment(&path, &t, base, batches, PER_BATCH, PAYLOAD), end);
        let name = format!("{t}/{}", segment_file_name(OffsetRange::new(base, end)));
        server.upload(GCS_BUCKET, &name, &std::fs::read(&path).expect("read segment")).await.expect("upload");
    }
    let tier = ColdTier::connect(config).await.expect("connect: one XML LIST");
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 300));
    let got = tier.read(&t, 0, 300, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got, records(0, 300, PAYLOAD));
    let got = tier.read(&t, 155, 170, ReadLimit::unbounded()).await.expect("read inside a segment");
    assert_eq!(got, records(155, 15, PAYLOAD));
    let stream = tier.stream(&t, 42).await.expect("stream");
    let streamed: Vec<_> = stream.try_collect().await.expect("streamed records");
    assert_eq!(streamed, records(42, 258, PAYLOAD));
    // Timestamps are 1000 + 10 * offset.
    assert_eq!(tier.offset_for_timestamp(&t, 1000 + 10 * 250).await.expect("lookup"), Some(250));
}

/// What the emulator lacks surfaces as an error of the export, never as a success: the
/// XML API's PUT is refused (`fake-gcs-server` 1.54 answers 400 "invalid uploadType"), so
/// nothing is stored and the listing stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_the_emulator_cannot_store_fails_and_stores_nothing() {
    let (_server, config) = gcs_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("gcs");
    let path = dir.path().join("0.seg");
    write_segment(&path, &t, 0, 1, PER_BATCH, PAYLOAD);
    let tier = ColdTier::open(config.clone()).expect("open");
    let err = tier.export_segment(&t, &path).await.expect_err("the emulator has no XML PUT");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        format!("{err:?}").contains("invalid uploadType"),
        "the emulator's answer is the source: {err:?}"
    );
    let fresh = ColdTier::open(config).expect("open");
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 0));
}

#[test]
fn the_gcs_backend_parses_from_toml_and_validates() {
    let config: tier_cold::ColdConfig = toml::from_str(
        r#"
        [backend]
        kind = "gcs"
        bucket = "logs"
        base_url = "http://127.0.0.1:4443"
        anonymous = true
        allow_http = true
        "#,
    )
    .expect("parse");
    config.validate().expect("valid");
    assert_eq!(config.location(), "GCS bucket logs at http://127.0.0.1:4443");
    ColdTier::open(config.clone()).expect("GCS client (no request is made)");

    let invalid = |edit: &dyn Fn(&mut tier_cold::BackendConfig)| {
        let mut bad = config.clone();
        edit(&mut bad.backend);
        let err = bad.validate().expect_err("invalid");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(ColdTier::open(bad).is_err(), "open validates too");
        err.to_string()
    };
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Gcs { allow_http, .. } = b {
            *allow_http = false;
        }
    });
    assert!(err.contains("backend.base_url") && err.contains("allow_http"), "{err}");
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Gcs { service_account_path, .. } = b {
            *service_account_path = Some("/etc/sa.json".into());
        }
    });
    assert!(err.contains("anonymous") && err.contains("service_account_path"), "{err}");
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Gcs { base_url, .. } = b {
            *base_url = Some("http:///x".into());
        }
    });
    assert!(err.contains("names no host"), "{err}");
}
