//! S3 server-side encryption passed through to object_store's S3 client: every object
//! tier-cold writes (a segment in one PUT, a segment in a multipart upload, an appended
//! batch) carries the configured `x-amz-server-side-encryption` headers, which moto
//! stores and answers on a `HEAD`.

use crate::common;

use common::{records, s3_config, topic, write_segment};
use futures::TryStreamExt;
use tier_cold::{BackendConfig, ColdConfig, ColdTier, S3Encryption};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt};
use tier_testkit::servers::SharedS3;

const KMS_KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/tierlog-test";

/// `config` with its S3 backend's settings written as a `[cold]` table and parsed back,
/// plus `extra` (a TOML line of the `backend` table): what an operator's file does.
fn with_backend_setting(config: &ColdConfig, extra: &str) -> ColdConfig {
    let BackendConfig::S3 { bucket, region, endpoint, access_key_id, secret_access_key, .. } =
        &config.backend
    else {
        panic!("an S3 config");
    };
    let text = format!(
        "multipart_threshold = {}\npart_size = {}\n[backend]\nkind = \"s3\"\nbucket = \"{bucket}\"\n\
         region = \"{region}\"\nendpoint = \"{}\"\naccess_key_id = \"{}\"\nsecret_access_key = \"{}\"\n\
         allow_http = true\n{extra}\n",
        config.multipart_threshold,
        config.part_size,
        endpoint.as_deref().expect("moto's endpoint"),
        access_key_id.as_deref().expect("moto's key id"),
        secret_access_key.as_ref().expect("moto's secret").expose(),
    );
    toml::from_str(&text).unwrap_or_else(|e| panic!("parse {extra:?}: {e}"))
}

/// The encryption headers of a HEAD answer, sorted.
fn encryption_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut found: Vec<_> = headers
        .iter()
        .filter(|(name, _)| name.starts_with("x-amz-server-side-encryption"))
        .cloned()
        .collect();
    found.sort();
    found
}

/// With no setting, SSE-S3 and SSE-KMS (a key id and the bucket key): a small segment
/// (one PUT), a 6 MiB segment (a multipart upload) and an appended batch are each stored
/// with exactly the configured encryption headers (moto's HEAD answer), and the
/// multipart one reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_is_written_with_the_configured_server_side_encryption() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let base = s3_config(&s3);
    let h = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    let cases = [
        ("plain", "", vec![]),
        ("sse-s3", "encryption = { kind = \"sse-s3\" }", vec![h("x-amz-server-side-encryption", "AES256")]),
        (
            "sse-kms",
            &*format!("encryption = {{ kind = \"sse-kms\", key_id = \"{KMS_KEY}\", bucket_key = true }}"),
            vec![
                h("x-amz-server-side-encryption", "aws:kms"),
                h("x-amz-server-side-encryption-aws-kms-key-id", KMS_KEY),
                h("x-amz-server-side-encryption-bucket-key-enabled", "true"),
            ],
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, setting, want) in cases {
        let mut config = with_backend_setting(&base, setting);
        config.prefix = name.to_owned();
        config.validate().expect("valid");
        let tier = ColdTier::connect(config).await.expect("connect");
        let (small, large, appended) = (topic("small"), topic("large"), topic("appended"));
        let file = dir.path().join(format!("{name}-small.seg"));
        write_segment(&file, &small, 0, 2, 5, 32);
        tier.export_segment(&small, &file).await.expect("export one PUT");
        let file = dir.path().join(format!("{name}-large.seg"));
        let end = write_segment(&file, &large, 0, 12, 4, 128 * 1024); // 6 MiB
        let outcome = tier.export_segment(&large, &file).await.expect("export multipart");
        assert!(
            matches!(outcome, tier_cold::ExportOutcome::Uploaded { parts, .. } if parts == 2),
            "{name}: {outcome:?}"
        );
        let batch = RecordBatch::from_records(0, &records(0, 3, 16)).expect("batch");
        tier.append(&appended, batch).await.expect("append");
        assert_eq!(tier.range(&large).await.expect("range"), OffsetRange::new(0, end), "{name}");
        let got = tier.read(&large, 0, end, ReadLimit::unbounded()).await.expect("read");
        assert_eq!(got.len() as u64, end, "{name}");

        let keys: Vec<String> = tier
            .store()
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect::<Vec<_>>()
            .await
            .expect("list")
            .into_iter()
            .filter(|k| k.starts_with(&format!("{name}/")))
            .collect();
        for t in ["small", "large", "appended"] {
            assert!(keys.iter().any(|k| k.starts_with(&format!("{name}/{t}/"))), "{name}: {keys:?}");
        }
        for key in &keys {
            let headers = s3.settings().head_object(s3.bucket(), key).await.expect("HEAD");
            // object_store sends the bucket-key header with CreateMultipartUpload too, but
            // moto 5.2's multipart upload keeps only the encryption and the key id.
            let multipart = key.starts_with(&format!("{name}/large/"));
            let compared = |list: &[(String, String)]| -> Vec<(String, String)> {
                list.iter()
                    .filter(|(h, _)| !(multipart && h.ends_with("bucket-key-enabled")))
                    .cloned()
                    .collect()
            };
            assert_eq!(compared(&encryption_headers(&headers)), compared(&want), "{name}: {key}");
        }
    }
}

/// The settings parse and validate; the KMS key id (not a secret) shows in `Debug`
/// while the secret key stays `***`; an empty key id or a bucket key without KMS is
/// refused.
#[test]
fn encryption_settings_parse_validate_and_keep_the_secret_out_of_debug() {
    let parse = |extra: &str| -> Result<ColdConfig, String> {
        let text = format!(
            "[backend]\nkind = \"s3\"\nbucket = \"b\"\naccess_key_id = \"AKIA\"\n\
             secret_access_key = \"very-secret\"\n{extra}\n"
        );
        toml::from_str(&text).map_err(|e| e.to_string())
    };
    let config =
        parse(&format!("encryption = {{ kind = \"sse-kms\", key_id = \"{KMS_KEY}\" }}")).expect("parse");
    config.validate().expect("valid");
    let BackendConfig::S3 { encryption, .. } = &config.backend else { panic!("S3") };
    assert_eq!(encryption, &Some(S3Encryption::SseKms { key_id: Some(KMS_KEY.into()), bucket_key: None }));
    let shown = format!("{config:?}");
    assert!(shown.contains(KMS_KEY) && !shown.contains("very-secret") && shown.contains("***"), "{shown}");
    ColdTier::open(config).expect("S3 client with SSE-KMS (no request is made)");

    let config = parse("encryption = { kind = \"sse-kms\" }").expect("the bucket's KMS key");
    config.validate().expect("valid");
    ColdTier::open(config).expect("S3 client with SSE-KMS and no key id");

    let err = parse("encryption = { kind = \"sse-c\" }").expect_err("no SSE-C");
    assert!(err.contains("unknown variant") && err.contains("sse-kms"), "{err}");
    let err = parse("encryption = { kind = \"sse-s3\", key_id = \"k\" }").expect_err("a key id without KMS");
    assert!(err.contains("unknown field"), "{err}");

    let invalid = |extra: &str| {
        let config = parse(extra).expect("parse");
        let err = config.validate().expect_err("invalid");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(ColdTier::open(config).is_err(), "open validates too");
        err.to_string()
    };
    let err = invalid("encryption = { kind = \"sse-kms\", key_id = \" \" }");
    assert!(err.contains("backend.encryption.key_id must not be empty"), "{err}");
}
