//! The status page at `/`, rendered by a real browser: headless Chromium dumps the DOM
//! after parsing the page, and it must show each tier's range of the topic.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use tierlog_client::{Client, NewRecordJson};

use crate::support::{serve, workdir};

/// The Chromium binary: `$TIERLOG_CHROMIUM`, else `chromium` on PATH. Fails loudly when
/// missing: the test is never skipped.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("TIERLOG_CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "chromium is not on PATH: the status page test needs a headless browser. Install it with \
                 `apt-get install -y chromium` (or `cargo xtask deps`), or set TIERLOG_CHROMIUM to a Chromium binary"
            )
        })
}

#[tokio::test]
async fn a_browser_renders_each_tiers_range_on_the_status_page() {
    let browser = chromium();
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    for _ in 0..4 {
        let batch = (0..25).map(|i| NewRecordJson::new(format!("record {i}").as_str())).collect();
        client.append("orders", batch).await.expect("append");
    }
    let exported = client.export("orders").await.expect("export");
    assert_eq!(exported.cold.map(|c| (c.start, c.end)), Some((0, 100)));
    client.append("orders", vec![NewRecordJson::new("after the export")]).await.expect("append");
    let topic = client.topic("orders").await.expect("topic");
    let hot = format!("WAL [{}, {})", topic.hot.start, topic.hot.end);

    let profile = dir.path().join("chromium-profile");
    let url = format!("{}/", server.url);
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&browser)
            .args(["--headless", "--disable-gpu", "--no-sandbox", "--dump-dom"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(&url)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", browser.display()))
    })
    .await
    .expect("join");
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(dom.contains("data-topic=\"orders\""), "the topic is on the page: {dom}");
    assert!(dom.contains("cold [0, 100)"), "cold's range: {dom}");
    assert!(dom.contains(&hot), "the WAL's range {hot}: {dom}");
    assert!(dom.contains("<td class=\"committed\">101</td>"), "the commit point: {dom}");
    assert!(dom.contains("<td class=\"export-lag\">1 record</td>"), "the export lag: {dom}");
    // Both bars are drawn on one axis [0, 101): cold's ends at 100/101 of the width.
    assert!(dom.contains("data-tier=\"cold\" data-start=\"0\" data-end=\"100\""), "{dom}");
    assert!(dom.contains("class=\"cold\" x=\"0.0\" y=\"0\" width=\"594.1\""), "{dom}");
    assert!(dom.contains("http-equiv=\"refresh\""), "the page refreshes itself");
    assert!(server.terminate().success());
}
