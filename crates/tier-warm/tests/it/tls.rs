//! The warm tier over TLS with a private CA and as a restricted ACL user, against
//! tier-testkit's [`ValkeyTls`] (Valkey listening with TLS only, certificates made by
//! the harness): the conformance suites pass with the CA (and a client certificate when
//! the server asks for one) and as an ACL user holding exactly the documented commands;
//! a wrong CA, a missing client certificate, a wrong password and a missing command each
//! fail with their own error naming what to set or grant (`docs/warm.md`, "TLS and ACL").

use crate::common;

use std::path::Path;

use tier_core::position::{NodeId, WarmBackend};
use tier_core::{ErrorKind, ReadLimit, Tier, TierError, TierExt};
use tier_testkit::conformance::{SuiteConfig, run_all, warm_backend};
use tier_testkit::servers::{TlsOptions, ValkeyTls};
use tier_warm::{Mode, Secret, WarmConfig, WarmTier, WithoutReplicas};

const ACL_USER: &str = "tierlog";
const ACL_PASSWORD: &str = "acl-pa55word";

/// A configuration trusting the harness's CA, `WAIT 1` when the server has a replica.
fn tls_config(valkey: &ValkeyTls, prefix: &str, replica: bool) -> WarmConfig {
    let mut config = common::config(&valkey.url(), prefix);
    config.tls_ca_file = Some(valkey.files().ca.clone());
    config.wait_replicas = u32::from(replica);
    // What these tests check does not depend on how fast the replica over TLS answers
    // `WAIT`; on a loaded machine it has taken longer than the shared config's 200 ms.
    config.wait_timeout = std::time::Duration::from_secs(10);
    config
}

/// The ACL user with `commands`, on keys under `prefix`, and a configuration logging in
/// as it.
async fn acl_config(valkey: &ValkeyTls, prefix: &str, commands: &[&str]) -> WarmConfig {
    valkey
        .set_acl_user(ACL_USER, ACL_PASSWORD, &format!("{prefix}*"), commands)
        .await
        .expect("the harness creates the ACL user");
    let mut config = tls_config(valkey, prefix, true);
    config.username = Some(ACL_USER.to_owned());
    config.password = Some(Secret::new(ACL_PASSWORD));
    config
}

async fn connect_err(config: WarmConfig) -> TierError {
    match WarmTier::open(config, WithoutReplicas::Warn).await {
        Ok(_) => panic!("the warm tier connected"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suites_pass_over_tls_with_a_private_ca_and_a_client_certificate() {
    let options = TlsOptions::new().auth_clients(true).replica(true);
    let valkey = ValkeyTls::start(options).await.expect("a Valkey over TLS with a replica");
    eprintln!("TLS tests run against {}", valkey.server_kind());
    let mut config = tls_config(&valkey, "tls:", true);
    config.tls_cert_file = Some(valkey.files().client_cert.clone());
    config.tls_key_file = Some(valkey.files().client_key.clone());
    assert!(valkey.url().starts_with("rediss://"), "the scheme asks for TLS: {}", valkey.url());
    let tier = WarmTier::open(config, WithoutReplicas::Refuse).await.expect("connects over TLS");
    run_all(&tier, &SuiteConfig::new("conf-")).await;
    warm_backend(&tier, &SuiteConfig::new("conf-pos-")).await;
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_with_the_documented_commands_passes_the_conformance_suites() {
    let valkey = ValkeyTls::start(TlsOptions::new().replica(true)).await.expect("a Valkey over TLS");
    let config = acl_config(&valkey, "acl:", tier_warm::ACL_COMMANDS).await;
    let tier = WarmTier::open(config, WithoutReplicas::Refuse).await.expect("the ACL user connects");
    run_all(&tier, &SuiteConfig::new("conf-")).await;
    warm_backend(&tier, &SuiteConfig::new("conf-pos-")).await;
    tier.close().await;
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused_naming_warm_tls_ca_file() {
    let valkey = ValkeyTls::start(TlsOptions::new()).await.expect("a Valkey over TLS");
    let mut config = tls_config(&valkey, "wrong-ca:", false);
    config.tls_ca_file = Some(valkey.files().other_ca.clone());
    let err = connect_err(config).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(message.contains("not trusted") && message.contains("warm.tls_ca_file"), "{message}");
}

#[tokio::test]
async fn tls_with_the_system_roots_refuses_a_private_ca_naming_warm_tls_ca_file() {
    let valkey = ValkeyTls::start(TlsOptions::new()).await.expect("a Valkey over TLS");
    // A plain scheme and `tls = true`: the system's roots, which hold no test CA.
    let mut config = common::config(&valkey.url().replace("rediss://", "redis://"), "sys-roots:");
    config.tls = true;
    config.wait_replicas = 0;
    let err = connect_err(config).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(message.contains("not trusted") && message.contains("warm.tls_ca_file"), "{message}");
}

#[tokio::test]
async fn the_certificate_is_checked_against_warm_tls_server_name() {
    let valkey = ValkeyTls::start(TlsOptions::new()).await.expect("a Valkey over TLS");
    // The certificate names 127.0.0.1 and localhost; the URL's host is 127.0.0.1.
    let mut config = tls_config(&valkey, "server-name:", false);
    config.tls_server_name = Some("localhost".to_owned());
    let tier = WarmTier::open(config.clone(), WithoutReplicas::Refuse).await.expect("localhost is named");
    tier.append(&common::topic("t"), common::batch(0, 1, "a")).await.expect("an append over TLS");
    tier.close().await;
    config.tls_server_name = Some("cache.example".to_owned());
    let err = connect_err(config).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(
        message.contains("does not name the host") && message.contains("warm.tls_server_name"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_that_requires_a_client_certificate_names_warm_tls_cert_file() {
    let valkey = ValkeyTls::start(TlsOptions::new().auth_clients(true)).await.expect("a Valkey over TLS");
    let err = connect_err(tls_config(&valkey, "no-cert:", false)).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(message.contains("client certificate") && message.contains("warm.tls_cert_file"), "{message}");
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_error() {
    let valkey = ValkeyTls::start(TlsOptions::new()).await.expect("a Valkey over TLS");
    let mut config = acl_config(&valkey, "wrong-pw:", tier_warm::ACL_COMMANDS).await;
    config.password = Some(Secret::new("not-the-password"));
    let err = connect_err(config).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let report = err.report().to_string();
    assert!(report.contains("authentication failed") && report.contains("warm.password"), "{report}");
    assert!(!report.contains("not-the-password"), "the password is never shown: {report}");
}

#[tokio::test]
async fn an_acl_user_lacking_a_command_gets_an_error_naming_it() {
    let valkey = ValkeyTls::start(TlsOptions::new().replica(true)).await.expect("a Valkey over TLS");
    let without = |name: &str| -> Vec<&str> {
        let kept: Vec<&str> = tier_warm::ACL_COMMANDS.iter().copied().filter(|c| *c != name).collect();
        assert_eq!(kept.len() + 1, tier_warm::ACL_COMMANDS.len(), "{name} is a documented command");
        kept
    };
    // Without XADD: the tier opens, and the first append names the command.
    let tier =
        WarmTier::open(acl_config(&valkey, "noperm:", &without("xadd")).await, WithoutReplicas::Refuse)
            .await
            .expect("the ACL user connects");
    let err = tier.append(&common::topic("t"), common::batch(0, 2, "a")).await.expect_err("XADD is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(message.contains("ACL user may not run XADD") && message.contains("+xadd"), "{message}");
    tier.close().await;
    // Without INFO: opening (the replica check) names it.
    let err = connect_err(acl_config(&valkey, "noperm:", &without("info")).await).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    let message = err.to_string();
    assert!(message.contains("ACL user may not run INFO") && message.contains("+info"), "{message}");
}

/// A server that refuses the claim script (here the ACL user lacks `EVAL`) gets a plain
/// `INCR`: the epoch is claimed, its claimer is not recorded (a node reading the claimers
/// counts it as another node's), and a claimed writer's append fails naming `+eval`.
#[tokio::test]
async fn without_eval_a_claim_is_a_plain_incr_that_records_no_claimer() {
    let valkey = ValkeyTls::start(TlsOptions::new().replica(true)).await.expect("a Valkey over TLS");
    let without_eval: Vec<&str> = tier_warm::ACL_COMMANDS.iter().copied().filter(|c| *c != "eval").collect();
    let config = acl_config(&valkey, "no-eval:", &without_eval).await;
    let tier = WarmTier::open(config, WithoutReplicas::Refuse).await.expect("the ACL user connects");
    let t = common::topic("t");
    let me = NodeId::from_u128(1);
    let first = tier.claim_owner(&t, me).await.expect("claimed with INCR");
    let second = tier.claim_owner(&t, me).await.expect("claimed with INCR");
    assert_eq!(second, first + 1);
    assert_eq!(tier.owner_epoch(&t), Some(second));
    let claimers = tier.claimers(&t, first..second + 1).await.expect("HMGET is granted");
    assert!(claimers.is_empty(), "no claimer recorded: {claimers:?}");
    let err = tier.append(&t, common::batch(0, 1, "a")).await.expect_err("a claimed writer needs the script");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    assert!(err.to_string().contains("+eval"), "{}", err.report());
    tier.close().await;
}

/// What a writer and a reader of the warm tier do, every command of
/// [`tier_warm::ACL_COMMANDS`] among them.
async fn every_operation(config: WarmConfig, topic: &str) -> Result<(), TierError> {
    let tier = WarmTier::open(config, WithoutReplicas::Refuse).await?;
    let t = common::topic(topic);
    let result = async {
        let epoch = tier.claim_owner(&t, NodeId::from_u128(1)).await?;
        tier.claimers(&t, epoch..epoch + 1).await?;
        tier.append(&t, common::batch(0, 2, "a")).await?;
        let (held, outcome) =
            WarmBackend::append_group(&tier, &t, vec![common::batch(2, 2, "b"), common::batch(4, 2, "c")])
                .await;
        outcome?;
        assert_eq!(held, 2);
        let read = tier.read(&t, 1, u64::MAX, ReadLimit::unbounded()).await?;
        assert_eq!(read.len(), 5);
        tier.record_topic(&t).await?;
        assert!(tier.topic_recorded(&t).await?);
        tier.trim_before(&t, 4).await.map(drop)
    }
    .await;
    tier.close().await;
    result
}

#[tokio::test]
async fn every_documented_command_is_one_the_tier_needs() {
    let valkey = ValkeyTls::start(TlsOptions::new().replica(true)).await.expect("a Valkey over TLS");
    let all = tier_warm::ACL_COMMANDS;
    every_operation(acl_config(&valkey, "need:", all).await, "all").await.expect("with every command");
    for (i, lacking) in all.iter().enumerate() {
        let kept: Vec<&str> = all.iter().copied().filter(|c| c != lacking).collect();
        let result = every_operation(acl_config(&valkey, "need:", &kept).await, &format!("t{i}")).await;
        match (*lacking, result) {
            (_, Ok(())) => panic!("the tier never needed {lacking}"),
            (_, Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{}", e.report());
                assert!(e.to_string().contains(&format!("+{lacking}`")), "without {lacking}: {}", e.report());
            }
        }
    }
}

#[tokio::test]
async fn tls_files_that_cannot_be_used_are_invalid_input_naming_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not PEM at all: s3cr3t-key-material\n").expect("write");
    let missing = dir.path().join("missing.pem");
    let path = |p: &Path| Some(p.to_owned());
    let with = |set: &dyn Fn(&mut WarmConfig)| {
        let mut config = base();
        set(&mut config);
        config
    };
    let cases: Vec<(&str, WarmConfig, &[&str])> = vec![
        (
            "missing CA",
            with(&|c| c.tls_ca_file = path(&missing)),
            &["cannot read warm.tls_ca_file", "missing.pem"],
        ),
        (
            "CA file without a certificate",
            with(&|c| c.tls_ca_file = path(&garbage)),
            &["warm.tls_ca_file", "garbage.pem", "holds no PEM certificate"],
        ),
        (
            "certificate file without a certificate",
            with(&|c| {
                c.tls_cert_file = path(&garbage);
                c.tls_key_file = path(&garbage);
            }),
            &["warm.tls_cert_file", "garbage.pem", "holds no PEM certificate"],
        ),
        (
            "key file without a key",
            with(&|c| {
                c.tls_cert_file = Some(write_self_signed(dir.path()));
                c.tls_key_file = path(&garbage);
            }),
            &["warm.tls_key_file", "garbage.pem", "holds no PEM private key"],
        ),
        ("certificate without a key", with(&|c| c.tls_cert_file = path(&garbage)), &["go together"]),
        (
            "bad server name",
            with(&|c| c.tls_server_name = Some("not a name!".into())),
            &["warm.tls_server_name", "not a name!"],
        ),
    ];
    for (what, config, expected) in cases {
        let err = connect_err(config).await;
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {}", err.report());
        let report = err.report().to_string();
        assert!(expected.iter().all(|e| report.contains(e)), "{what}: {report}");
        assert!(!report.contains("s3cr3t"), "{what}: a file's contents are never shown: {report}");
    }
}

/// A configuration no server answers (nothing listens on port 1): file errors come first.
fn base() -> WarmConfig {
    let mut config = common::config("rediss://127.0.0.1:1", "files:");
    config.wait_replicas = 0;
    config
}

/// A well-formed certificate file, usable as `tls_cert_file`.
fn write_self_signed(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("self.pem");
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    std::fs::write(&path, params.self_signed(&key).expect("certificate").pem()).expect("write");
    path
}

#[test]
fn debug_of_a_configuration_shows_paths_but_no_secret() {
    let mut config = WarmConfig::standalone("rediss://app:url-s3cret@cache:6380");
    config.password = Some(Secret::new("pa55-s3cret"));
    config.tls_key_file = Some("/etc/tierlog/valkey-client.key".into());
    let debug = format!("{config:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("/etc/tierlog/valkey-client.key"), "{debug}");
}

#[test]
fn docs_warm_md_holds_the_acl_line_for_the_documented_commands() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/warm.md"))
        .expect("docs/warm.md exists");
    let line = tier_warm::acl_setuser_line(&WarmConfig::default(), "tierlog", "<password>");
    assert!(doc.contains(&line), "docs/warm.md lacks the line\n{line}");
    for mode in [Mode::Cluster, Mode::Sentinel { service_name: "s".into() }] {
        for extra in mode.acl_commands().iter().filter(|c| !tier_warm::ACL_COMMANDS.contains(c)) {
            assert!(doc.contains(&format!("+{extra}")), "docs/warm.md lacks +{extra} ({mode:?})");
        }
    }
}
