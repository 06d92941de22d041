//! `demo` against a real Valkey and a real S3 server (tier-testkit's shared servers):
//! warm serves a slice between cold and the WAL; `demo` with cold on Azurite.

use tier_testkit::servers::{Azurite, SharedS3, SharedValkey};

use crate::support::{ok, run, stderr, workdir};

#[test]
fn demo_against_valkey_and_s3_reads_from_all_three_tiers() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let (valkey, s3) = rt.block_on(async {
        let valkey = SharedValkey::get().await.expect("Valkey (see docs/testing.md for what to install)");
        let s3 = SharedS3::get().await.expect("moto S3 (see docs/testing.md for what to install)");
        (valkey, s3)
    });
    let dir = workdir();
    let s = s3.settings();
    std::fs::write(
        dir.path().join("tierlog.toml"),
        format!(
            "[hot]\n[warm]\nurls = [\"{}\"]\nkey_prefix = \"{}cli:\"\n\n[cold]\nprefix = \"cli\"\n\
             backend = {{ kind = \"s3\", bucket = \"{}\", endpoint = \"{}\", region = \"{}\", allow_http = true, \
             access_key_id = \"{}\", secret_access_key = \"{}\" }}\n",
            valkey.primary_url(),
            valkey.key_prefix(),
            s3.bucket(),
            s.endpoint,
            s.region,
            s.access_key_id,
            s.secret_access_key
        ),
    )
    .expect("write config");
    let out = run(dir.path(), &["demo", "--records", "20000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split("read from timestamp").next().expect("the offset-0 section");
    for tier in ["cold  [0, ", "warm  [", "hot   ["] {
        assert!(section.lines().any(|l| l.trim_start().starts_with(tier)), "no {tier:?} row: {text}");
    }
    assert!(text.contains("20000 records,"), "{text}");
    drop((valkey, s3));
}

/// A wrong user or password is an authentication failure naming the server, not "warm
/// tier unreachable", and the password is never printed.
#[test]
fn a_wrong_valkey_password_says_authentication_failed() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let valkey = rt.block_on(SharedValkey::get()).expect("Valkey (see docs/testing.md for what to install)");
    let dir = workdir();
    let url = valkey.primary_url().replacen("redis://", "redis://nosuchuser:hunter2@", 1);
    std::fs::write(dir.path().join("w.toml"), format!("[hot]\n[warm]\nurls = [\"{url}\"]\n")).expect("write");
    for command in ["produce", "verify"] {
        let args: &[&str] =
            if command == "produce" { &["produce", "t", "--count", "1"] } else { &["verify"] };
        let out = run(dir.path(), &[&["--config", "w.toml"][..], args].concat());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("authentication failed at redis://nosuchuser:***@"), "{command}: {err}");
        assert!(!err.contains("hunter2") && !err.contains("unreachable"), "{command}: {err}");
    }
    drop(valkey);
}

/// `demo` with cold on Azure Blob Storage (a private Azurite): the `[cold]` table's
/// `kind = "azure"` settings reach the client, cold serves the exported offsets, the
/// segments are in the container for any other client, and `config` prints the account
/// key as `***`.
#[test]
fn demo_with_cold_on_azurite_reads_from_cold_and_stores_into_the_container() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let azurite = rt.block_on(async {
        let azurite = Azurite::start().await.expect("Azurite (`cargo xtask deps` installs it)");
        azurite.create_container("cli").await.expect("create the container");
        azurite
    });
    let s = azurite.settings();
    let dir = workdir();
    std::fs::write(
        dir.path().join("tierlog.toml"),
        format!(
            "[hot]\n\n[cold]\nprefix = \"cli\"\n\
             backend = {{ kind = \"azure\", account = \"{}\", container = \"cli\", access_key = \"{}\", \
             endpoint = \"{}\", allow_http = true }}\n",
            s.account, s.access_key, s.account_url
        ),
    )
    .expect("write config");
    let out = run(dir.path(), &["demo", "--records", "20000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("cold (Azure container cli at {})", s.account_url)), "{text}");
    let section = text.split("read from timestamp").next().expect("the offset-0 section");
    for tier in ["cold  [0, ", "hot   ["] {
        assert!(section.lines().any(|l| l.trim_start().starts_with(tier)), "no {tier:?} row: {text}");
    }
    assert!(text.contains("20000 records,"), "{text}");

    // Another client of the container lists the demo's topic with exported offsets.
    let topic = text
        .split_once("topic ")
        .and_then(|(_, rest)| rest.split_once(','))
        .map(|(name, _)| name.to_owned())
        .expect("the demo names its topic");
    let mut config = tier_cold::ColdConfig::new(tier_cold::BackendConfig::Azure {
        account: s.account.clone(),
        container: "cli".into(),
        access_key: Some(tier_cold::Secret::new(s.access_key.clone())),
        endpoint: Some(s.account_url.clone()),
        allow_http: true,
    });
    config.prefix = "cli".into();
    let range = rt.block_on(async {
        let cold = tier_cold::ColdTier::connect(config).await.expect("connect to Azurite");
        let topic = tier_core::TopicName::new(&topic).expect("topic name");
        tier_core::Tier::range(&cold, &topic).await.expect("cold range")
    });
    assert_eq!(range.start, 0, "{range:?}");
    assert!(range.end > 0, "cold holds the exported segments: {range:?}");

    let shown = ok(dir.path(), &["config"]);
    assert!(shown.contains("kind = \"azure\"") && shown.contains("access_key = \"***\""), "{shown}");
    assert!(!shown.contains(&s.access_key), "{shown}");
    drop(azurite);
}
