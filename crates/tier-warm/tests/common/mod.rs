//! Helpers shared by the warm tier's integration tests.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use fred::prelude::{Builder, Client, ClientLike, Config};
use tier_core::{Header, RecordBatch, RecordBatchBuilder, TopicName};
use tier_testkit::servers::SharedValkey;
use tier_warm::{WarmConfig, WarmTier};

/// A configuration for `url` with test-friendly timeouts.
pub fn config(url: &str, key_prefix: &str) -> WarmConfig {
    let mut config = WarmConfig::standalone(url);
    config.key_prefix = key_prefix.to_owned();
    config.wait_timeout = Duration::from_millis(200);
    config.command_timeout = Duration::from_secs(1);
    config.connect_timeout = Duration::from_secs(1);
    config.reconnect.min_backoff = Duration::from_millis(20);
    config.reconnect.max_backoff = Duration::from_millis(200);
    config
}

/// The shared server and a warm tier on it (WAIT 1, unique key prefix).
pub async fn shared_tier() -> (SharedValkey, WarmTier) {
    let valkey = SharedValkey::get().await.expect("a Valkey server for the warm tier tests");
    eprintln!("warm tier tests run against {} at {}", valkey.server_kind(), valkey.primary_url());
    let tier = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.expect("connect");
    (valkey, tier)
}

/// A plain fred client on `url`, for poking at streams behind the tier's back.
pub async fn raw_client(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).expect("url")).build().expect("client");
    client.init().await.expect("raw client connects");
    client
}

pub fn topic(name: &str) -> TopicName {
    TopicName::new(name).expect("valid topic")
}

/// A batch of `count` records at `base`: payload `"<tag>-<offset>"`, timestamp
/// `1000 + offset`, a key on even offsets and a header on every third.
pub fn batch(base: u64, count: u64, tag: &str) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new();
    for offset in base..base + count {
        let key = (offset % 2 == 0).then(|| format!("k{offset}"));
        let headers = if offset % 3 == 0 {
            vec![Header::new(Bytes::from_static(b"h"), Bytes::from(offset.to_string()))]
        } else {
            vec![]
        };
        builder
            .push(
                1000 + offset as i64,
                key.as_deref().map(str::as_bytes),
                &headers,
                format!("{tag}-{offset}").as_bytes(),
            )
            .expect("push");
    }
    builder.build(base).expect("build")
}
