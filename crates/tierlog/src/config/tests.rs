use std::collections::BTreeSet;
use std::path::Path;

use super::*;

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn parse(text: &str, vars: &[(&str, &str)]) -> anyhow::Result<StoreConfig> {
    let mut table: Table = toml::from_str(text)?;
    apply_env(&mut table, env(vars))?;
    from_table(table)
}

#[test]
fn embedded_defaults_are_hot_plus_local_cold() {
    let config = parse(EMBEDDED_DEFAULTS, &[]).expect("defaults parse");
    assert_eq!(config.hot.data_dir, Path::new("./data/hot"));
    let cold = config.cold.expect("cold is on by default");
    assert_eq!(cold.backend, BackendConfig::Local { path: "./data/cold".into() });
    assert!(config.warm.is_none());
}

#[test]
fn sizes_take_units_in_files_and_environment() {
    let config = parse(
        "[hot]\nsegment_bytes = \"256KiB\"\ncache_bytes = 1024\n[router]\nread_batch_bytes = \"1MiB\"\n",
        &[("TIERLOG_HOT__RETENTION_BYTES", "2GiB")],
    )
    .expect("parses");
    assert_eq!(config.hot.segment_bytes, 256 << 10);
    assert_eq!(config.hot.cache_bytes, 1024);
    assert_eq!(config.hot.retention_bytes, 2 << 30);
    assert_eq!(config.router.read_batch_bytes, 1 << 20);
}

#[test]
fn environment_overrides_nested_keys_and_typed_values() {
    let config = parse(
        "[hot]\n",
        &[
            ("TIERLOG_HOT__SEGMENT_AGE", "5s"),
            ("TIERLOG_WARM__URLS", "[\"redis://127.0.0.1:7000\"]"),
            ("TIERLOG_WARM__WAIT_REPLICAS", "0"),
            ("TIERLOG_ROUTER__EXPORT_RETRY__MAX", "1m"),
            ("TIERLOG_TEST_S3_ENDPOINT", "ignored: no double underscore"),
        ],
    )
    .expect("parses");
    assert_eq!(config.hot.segment_age, std::time::Duration::from_secs(5));
    let warm = config.warm.expect("a warm override enables warm");
    assert_eq!(warm.urls, vec!["redis://127.0.0.1:7000".to_owned()]);
    assert_eq!(warm.wait_replicas, 0);
    assert_eq!(config.router.export_retry.max, std::time::Duration::from_secs(60));
}

#[test]
fn errors_name_the_key() {
    let err = parse("[hot]\nsegmnet_bytes = 5\n", &[]).expect_err("unknown key").to_string();
    assert!(err.contains("hot") && err.contains("segmnet_bytes"), "{err}");
    let err = parse("[hot]\nsegment_bytes = \"lots\"\n", &[]).expect_err("bad size").to_string();
    assert!(err.starts_with("hot.segment_bytes:"), "{err}");
    let err = parse("[router]\nretention_interval = \"soon\"\n", &[]).expect_err("bad duration").to_string();
    assert!(err.contains("router.retention_interval"), "{err}");
    let err = parse("", &[("TIERLOG_NOPE__X", "1")]).expect_err("bad section").to_string();
    assert!(err.contains("TIERLOG_NOPE__X"), "{err}");
    let err = parse("[bogus]\n", &[]).expect_err("unknown section").to_string();
    assert!(err.contains("bogus"), "{err}");
}

#[test]
fn errors_say_what_a_person_can_fix() {
    let err = parse("[hot]\nfsync = 3\n", &[]).expect_err("a number for an enum").to_string();
    assert_eq!(err, r#"hot.fsync: expected "always", "never" or { interval = "100ms" }, found 3"#);
    let err =
        parse("[router]\nwarm_failure_policy = \"sometimes\"\n", &[]).expect_err("bad variant").to_string();
    assert!(err.contains(r#"expected "fail" or "degrade", found "sometimes""#), "{err}");
    let err = parse("[hot]\nsegment_bytes = \"-1MiB\"\n", &[]).expect_err("negative").to_string();
    assert!(err.contains("cannot be negative"), "{err}");
    assert_eq!(
        plain_toml_message(
            "invalid type: integer `123456789012345678901` as i128, expected any valid TOML value"
        ),
        "123456789012345678901 is too large for a setting (the largest is 9223372036854775807)"
    );
}

#[test]
fn redacted_output_hides_secrets_and_round_trips() {
    let text = "[warm]\nurls = [\"redis://app:hunter2@127.0.0.1:6379\"]\npassword = \"hunter3\"\n\
                [cold]\nbackend = { kind = \"s3\", bucket = \"b\", secret_access_key = \"hunter4\" }\n\
                [server]\ntokens = [\"hunter5\"]\ntoken_file = \"tokens.txt\"\n\
                [client]\nserver = \"http://127.0.0.1:1\"\ntoken = \"hunter6\"\n";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("in.toml");
    std::fs::write(&path, text).expect("write");
    let loaded = load(Some(&path), None, env(&[])).expect("loads");
    let out = to_redacted_toml(&loaded.config, &loaded.server, &loaded.client).expect("serializes");
    assert!(!out.contains("hunter"), "{out}");
    assert!(out.contains("redis://app:***@127.0.0.1:6379"), "{out}");
    assert!(out.contains("tokens = [\"***\"]") && out.contains("token = \"***\""), "{out}");
    assert!(out.contains("token_file = \"tokens.txt\""), "{out}");
    let printed = dir.path().join("out.toml");
    std::fs::write(&printed, &out).expect("write");
    let back = load(Some(&printed), None, env(&[])).expect("the output is a valid configuration");
    assert_eq!(back.config.hot, loaded.config.hot);
    assert_eq!(back.config.router, loaded.config.router);
    assert_eq!(back.server.token_file, loaded.server.token_file);
    assert_eq!(back.client.server, loaded.client.server);
}

/// Every key of a full configuration, as dotted paths.
fn keys(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Value::Table(t) = value {
        for (k, v) in t {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                // Tagged enums and policy tables are documented as one key.
                Value::Table(_) if !matches!(k.as_str(), "backend" | "fsync" | "mode") => keys(v, &path, out),
                _ => {
                    out.insert(path);
                }
            }
        }
    }
}

#[test]
fn docs_configuration_lists_every_key() {
    let mut config = StoreConfig::default()
        .with_warm(tier_warm::WarmConfig::default())
        .with_cold(tier_cold::ColdConfig::default());
    config.router.state_dir = Some("x".into());
    let mut all = BTreeSet::new();
    keys(&Value::try_from(&config).expect("serializes"), "", &mut all);
    // Optional keys that are absent by default.
    for k in [
        "warm.username",
        "warm.password",
        "warm.tls_ca_file",
        "warm.tls_cert_file",
        "warm.tls_key_file",
        "warm.tls_server_name",
        "cold.expiry",
    ] {
        all.insert(k.to_owned());
    }
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/configuration.md exists");
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|k| k.contains('.'))
        .map(str::to_owned)
        .collect();
    let missing: Vec<_> = all.difference(&documented).collect();
    assert!(missing.is_empty(), "keys missing from docs/configuration.md: {missing:?}");
    let stale: Vec<_> = documented.difference(&all).filter(|k| !k.starts_with("cold.backend.")).collect();
    assert!(stale.is_empty(), "docs/configuration.md lists keys that do not exist: {stale:?}");
    for key in SIZE_KEYS {
        assert!(all.contains(*key), "SIZE_KEYS names {key}, which is not a key");
    }
}

/// The cloud backends' settings reach tier-cold as written: Azure and GCS (tier-cold's
/// `azure` and `gcp` features, which tierlog enables) and S3's server-side encryption. The printed
/// configuration hides the Azure key, shows the KMS key id (not a secret), and parses
/// back to the same backends.
#[test]
fn cloud_backend_settings_pass_through_and_print_redacted() {
    use tier_cold::S3Encryption;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cases = [
        (
            "backend = { kind = \"azure\", account = \"acct\", container = \"logs\", access_key = \"hunter7\", \
             endpoint = \"http://127.0.0.1:10000/acct\", allow_http = true }",
            "Azure container logs at http://127.0.0.1:10000/acct",
        ),
        (
            "backend = { kind = \"gcs\", bucket = \"logs\", base_url = \"http://127.0.0.1:4443\", anonymous = true, \
             allow_http = true }",
            "GCS bucket logs at http://127.0.0.1:4443",
        ),
        (
            "backend = { kind = \"s3\", bucket = \"logs\", secret_access_key = \"hunter8\", \
             encryption = { kind = \"sse-kms\", key_id = \"alias/tierlog\", bucket_key = true } }",
            "S3 bucket logs",
        ),
    ];
    for (i, (backend, location)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("in{i}.toml"));
        std::fs::write(&path, format!("[hot]\n[cold]\n{backend}\n")).expect("write");
        let loaded = load(Some(&path), None, env(&[])).expect("loads");
        let cold = loaded.config.cold.clone().expect("cold");
        assert_eq!(cold.location(), location);
        let out = to_redacted_toml(&loaded.config, &loaded.server, &loaded.client).expect("serializes");
        assert!(!out.contains("hunter"), "{out}");
        let printed = dir.path().join(format!("out{i}.toml"));
        std::fs::write(&printed, &out).expect("write");
        let back = load(Some(&printed), None, env(&[])).expect("the output is a valid configuration");
        match (&cold.backend, &back.config.cold.expect("cold").backend) {
            (BackendConfig::S3 { encryption, .. }, BackendConfig::S3 { encryption: printed, .. }) => {
                let want =
                    S3Encryption::SseKms { key_id: Some("alias/tierlog".into()), bucket_key: Some(true) };
                assert_eq!(encryption.as_ref(), Some(&want));
                assert_eq!(printed.as_ref(), Some(&want), "{out}");
                assert!(out.contains("alias/tierlog"), "{out}");
            }
            (BackendConfig::Azure { access_key, .. }, BackendConfig::Azure { access_key: printed, .. }) => {
                assert_eq!(access_key.as_ref().map(|k| k.expose().to_owned()), Some("hunter7".to_owned()));
                assert_eq!(printed.as_ref().map(|k| k.expose().to_owned()), Some("***".to_owned()), "{out}");
            }
            (original, printed) => assert_eq!(original, printed, "{out}"),
        }
    }
}
