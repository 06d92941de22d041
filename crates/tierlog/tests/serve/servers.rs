//! `tierlog serve` over hot + warm + cold: a real Valkey and a real S3 server
//! (tier-testkit's shared servers).

use tier_testkit::servers::{SharedS3, SharedValkey};
use tierlog_client::{Client, NewRecordJson, Start};

use crate::read_all;
use crate::support::{serve, workdir};

#[tokio::test]
async fn serve_over_valkey_and_s3_appends_reads_exports_and_verifies() {
    let valkey = SharedValkey::get().await.expect("Valkey (see docs/testing.md for what to install)");
    let s3 = SharedS3::get().await.expect("moto S3 (see docs/testing.md for what to install)");
    let dir = workdir();
    let s = s3.settings();
    let config = [
        "[hot]\nsegment_bytes = \"4KiB\"".to_owned(),
        format!(
            "[warm]\nurls = [\"{}\"]\nkey_prefix = \"{}serve:\"",
            valkey.primary_url(),
            valkey.key_prefix()
        ),
        format!(
            "[cold]\nprefix = \"serve\"\nbackend = {{ kind = \"s3\", bucket = \"{}\", endpoint = \"{}\", \
             region = \"{}\", allow_http = true, access_key_id = \"{}\", secret_access_key = \"{}\" }}",
            s3.bucket(),
            s.endpoint,
            s.region,
            s.access_key_id,
            s.secret_access_key
        ),
    ];
    std::fs::write(dir.path().join("tierlog.toml"), config.join("\n\n")).expect("write config");
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    let missing = client.read("tiers", Start::Latest).await.err().expect("no topic yet");
    assert_eq!(missing.kind(), Some(tierlog_client::ErrorKind::NotFound));
    for b in 0..10 {
        let batch =
            (0..20).map(|i| NewRecordJson::new(format!("{b}-{i} {}", "w".repeat(50)).as_str())).collect();
        client.append("tiers", batch).await.expect("append: WAL and warm confirmed");
    }
    let exported = client.export("tiers").await.expect("export");
    assert_eq!(exported.cold.map(|c| c.end), Some(200), "{exported:?}");
    let topic = client.topic("tiers").await.expect("topic");
    assert_eq!(topic.committed, 200);
    assert_eq!(topic.warm.map(|w| w.end), Some(200), "warm holds what was acknowledged: {topic:?}");
    let records = read_all(&client, "tiers").await;
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..200).collect::<Vec<_>>());
    assert!(records[199].payload.starts_with(b"9-19 "));
    let report = client.verify("tiers").await.expect("verify");
    assert!(report.problems.is_empty() && report.records == 200, "{report:?}");
    assert!(server.terminate().success());
    drop((valkey, s3));
}
