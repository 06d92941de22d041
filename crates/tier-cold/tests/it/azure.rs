//! The cold tier on Azure Blob Storage as Azurite serves it: tier-testkit's conformance
//! suites, multipart (block list) uploads, and the conditional create (`If-None-Match: *`)
//! that fences a second writer. Each test runs its own Azurite (`tier_testkit::servers::Azurite`).

use crate::common;

use std::sync::Arc;

use common::{azurite, records, topic, write_segment};
use futures::TryStreamExt;
use tier_cold::{BackendConfig, ColdTier, ExportOutcome};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt};
use tier_testkit::servers::AnswerDropProxy;
use tier_testkit::{SuiteConfig, run_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_azurite() {
    let (_server, config) = azurite().await;
    let tier = ColdTier::connect(config).await.expect("connect");
    let mut caps = SuiteConfig::new("azure-");
    // One object per append: keep the many-batch check as short as on moto.
    caps.many_batches = 40;
    run_all(&tier, &caps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cold_position_conformance_suite_on_azurite() {
    let (_server, config) = azurite().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = Arc::new(ColdTier::open(config).expect("open"));
    tier_testkit::conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("azure-pos-")).await;
}

/// A segment above `multipart_threshold` goes up as staged blocks and a block list; a
/// fresh tier lists and reads it back whole, and exporting it again is `AlreadyPresent`
/// (the whole-content comparison streams it in ranged GETs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_segment_is_a_multipart_upload_read_back_on_azurite() {
    let (_server, config) = azurite().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topic("big");
    let file = dir.path().join("big.seg");
    let end = write_segment(&file, &t, 0, 24, 4, 128 * 1024); // 12 MiB
    let len = std::fs::metadata(&file).expect("meta").len();
    let tier = ColdTier::open(config.clone()).expect("open");
    let outcome = tier.export_segment(&t, &file).await.expect("export");
    let want_parts = len.div_ceil(5 << 20);
    assert!(matches!(outcome, ExportOutcome::Uploaded { parts, .. } if parts == want_parts), "{outcome:?}");
    let fresh = ColdTier::open(config.clone()).expect("open");
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, end));
    let got = fresh.read(&t, 0, end, ReadLimit::unbounded()).await.expect("read");
    assert_eq!(got.len() as u64, end);
    assert_eq!(got[7], records(7, 1, 128 * 1024)[0]);
    let again = fresh.export_segment(&t, &file).await.expect("export again");
    assert!(matches!(again, ExportOutcome::AlreadyPresent { .. }), "{again:?}");
}

/// Two tiers that both list the topic as empty append different batches at offset 0:
/// Azure's conditional create lets the first write and the second is `Fenced`; the
/// stored batch is the first one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_at_the_same_offsets_is_fenced_by_the_conditional_create_on_azurite() {
    let (_server, config) = azurite().await;
    let t = topic("writers");
    let (a, b) = (ColdTier::open(config.clone()).expect("a"), ColdTier::open(config.clone()).expect("b"));
    for tier in [&a, &b] {
        assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0));
    }
    let mine = tier_core::RecordBatch::from_records(0, &records(0, 3, 10)).expect("batch");
    let theirs = tier_core::RecordBatch::from_records(0, &records(0, 3, 11)).expect("batch");
    a.append(&t, mine).await.expect("first writer");
    let err = b.append(&t, theirs).await.expect_err("a different batch at held offsets");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    let fresh = ColdTier::open(config).expect("open");
    assert_eq!(fresh.read(&t, 0, 3, ReadLimit::unbounded()).await.expect("read"), records(0, 3, 10));
}

/// An ambiguous failure on Azurite: the proxy in front of it forwards the segment's PUT
/// and loses the answer. `object_store` retries, the retried conditional create finds the
/// blob, and the export is `AlreadyPresent`; when every attempt (3) loses its answer the
/// export fails `Unavailable` and the next one is `AlreadyPresent`. Either way exactly one
/// correct blob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_whose_put_answer_was_lost_is_already_present_on_retry_on_azurite() {
    let (server, direct_config) = azurite().await;
    let proxy = AnswerDropProxy::start(&server.endpoint()).await.expect("answer-dropping proxy");
    let mut config = direct_config.clone();
    if let BackendConfig::Azure { endpoint, .. } = &mut config.backend {
        *endpoint = Some(format!("{}/{}", proxy.endpoint(), server.settings().account));
    }
    let direct = ColdTier::open(direct_config).expect("tier straight to Azurite");
    let tier = ColdTier::open(config).expect("tier through the proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, lost, fails) in [("lost-put-once", 1, false), ("lost-put-always", 3, true)] {
        let t = topic(name);
        let seg = dir.path().join(format!("{name}.seg"));
        let end = write_segment(&seg, &t, 0, 3, 4, 40);
        assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 0));
        proxy.drop_answers("PUT", ".seg", lost);
        let first = tier.export_segment(&t, &seg).await;
        assert_eq!(proxy.dropped(), lost, "{name}");
        match first {
            Ok(outcome) if !fails => {
                assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{name}: {outcome:?}")
            }
            Err(err) if fails => {
                assert_eq!(err.kind(), ErrorKind::Unavailable, "{name}: {err}");
                let outcome = tier.export_segment(&t, &seg).await.expect("the retry");
                assert!(matches!(outcome, ExportOutcome::AlreadyPresent { .. }), "{name}: {outcome:?}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(direct.range(&t).await.expect("range"), OffsetRange::new(0, end), "{name}");
        let got = direct.read(&t, 0, end, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got, records(0, end as usize, 40), "{name}");
        let objects: Vec<String> = direct
            .store()
            .list(Some(&direct.layout().topic_dir(&t)))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .expect("list");
        assert_eq!(objects.iter().filter(|k| k.ends_with(".seg")).count(), 1, "{name}: {objects:?}");
    }
}

#[test]
fn the_azure_backend_parses_from_toml_validates_and_never_prints_the_key() {
    let key = "c2VjcmV0LWFjY291bnQta2V5"; // base64 of "secret-account-key"
    let config: tier_cold::ColdConfig = toml::from_str(&format!(
        r#"
        [backend]
        kind = "azure"
        account = "devstoreaccount1"
        container = "logs"
        access_key = "{key}"
        endpoint = "http://127.0.0.1:10000/devstoreaccount1"
        allow_http = true
        "#
    ))
    .expect("parse");
    config.validate().expect("valid");
    assert_eq!(config.location(), "Azure container logs at http://127.0.0.1:10000/devstoreaccount1");
    let shown = format!("{config:?}");
    assert!(!shown.contains(key) && shown.contains("***"), "{shown}");
    let tier = ColdTier::open(config.clone()).expect("Azure client (no request is made)");
    let shown = format!("{tier:?}");
    assert!(!shown.contains(key), "{shown}");

    let invalid = |edit: &dyn Fn(&mut tier_cold::BackendConfig)| {
        let mut bad = config.clone();
        edit(&mut bad.backend);
        let err = bad.validate().expect_err("invalid");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(ColdTier::open(bad).is_err(), "open validates too");
        err.to_string()
    };
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Azure { allow_http, .. } = b {
            *allow_http = false;
        }
    });
    assert!(err.contains("backend.endpoint") && err.contains("allow_http"), "{err}");
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Azure { endpoint, .. } = b {
            *endpoint = Some("127.0.0.1:10000".into());
        }
    });
    assert!(err.contains("must start with https://"), "{err}");
    let err = invalid(&|b| {
        if let tier_cold::BackendConfig::Azure { container, .. } = b {
            container.clear();
        }
    });
    assert!(err.contains("backend.container must not be empty"), "{err}");
}
