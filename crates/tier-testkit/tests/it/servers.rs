//! The harness against real servers: Valkey replication and WAIT through `fred`, S3
//! through `object_store`.

use bytes::Bytes;
use fred::prelude::*;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, aws::AmazonS3Builder, path::Path};
use tier_testkit::servers::{S3Server, S3Settings, SharedS3, SharedServers, SharedValkey, ValkeyPair};

async fn connect(url: &str) -> Client {
    let config = Config::from_url(url).expect("harness URLs parse");
    let client = Builder::from_config(config).build().expect("client builds");
    client.init().await.expect("client connects");
    client
}

async fn xadd(client: &Client, key: &str) -> String {
    client.xadd(key, false, None::<()>, "*", vec![("f", "v")]).await.expect("XADD succeeds")
}

fn s3_store(settings: &S3Settings, bucket: &str) -> impl ObjectStore {
    AmazonS3Builder::new()
        .with_endpoint(&settings.endpoint)
        .with_region(&settings.region)
        .with_access_key_id(&settings.access_key_id)
        .with_secret_access_key(&settings.secret_access_key)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .build()
        .expect("S3 settings build a store")
}

#[tokio::test]
async fn valkey_pair_replicates_and_wait_counts_the_replica() {
    let mut pair = ValkeyPair::start().await.unwrap();
    let kind = pair.server_kind();
    assert!(kind.starts_with("valkey ") || kind.starts_with("redis "), "{kind}");
    assert_eq!(pair.primary_url(), format!("redis://127.0.0.1:{}", pair.primary_port()));
    assert_ne!(pair.primary_port(), pair.replica_port());

    let primary = connect(&pair.primary_url()).await;
    xadd(&primary, "s").await;
    let acked: i64 = primary.wait(1, 5000).await.unwrap();
    assert_eq!(acked, 1, "the replica acknowledges the write");
    let replica = connect(&pair.replica_url()).await;
    let len: u64 = replica.xlen("s").await.unwrap();
    assert_eq!(len, 1, "the replica holds the entry");
    replica.quit().await.unwrap();

    pair.stop_replica().await;
    assert_eq!(pair.replica_pid(), None);
    xadd(&primary, "s").await;
    let acked: i64 = primary.wait(1, 200).await.unwrap();
    assert_eq!(acked, 0, "no replica is left to acknowledge");

    pair.start_replica().await.unwrap();
    xadd(&primary, "s").await;
    let acked: i64 = primary.wait(1, 5000).await.unwrap();
    assert_eq!(acked, 1, "the restarted replica acknowledges again");
    primary.quit().await.unwrap();
}

#[tokio::test]
async fn restart_primary_keeps_its_port_and_relinks_the_replica() {
    let mut pair = ValkeyPair::start().await.unwrap();
    let port = pair.primary_port();
    let old_pid = pair.primary_pid().unwrap();
    {
        let primary = connect(&pair.primary_url()).await;
        xadd(&primary, "before").await;
        primary.quit().await.unwrap();
    }

    pair.stop_primary().await;
    assert_eq!(pair.primary_pid(), None);
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err(), "primary is down");

    pair.restart_primary().await.unwrap();
    assert_eq!(pair.primary_port(), port);
    assert_ne!(pair.primary_pid().unwrap(), old_pid);
    let primary = connect(&pair.primary_url()).await;
    let exists: u64 = primary.exists("before").await.unwrap();
    assert_eq!(exists, 0, "a restarted primary without persistence starts empty");
    xadd(&primary, "after").await;
    let acked: i64 = primary.wait(1, 5000).await.unwrap();
    assert_eq!(acked, 1);
    primary.quit().await.unwrap();
}

#[tokio::test]
async fn shared_valkey_gives_each_caller_a_unique_prefix_on_working_servers() {
    let (a, b) = tokio::join!(SharedValkey::get(), SharedValkey::get());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.key_prefix(), b.key_prefix());
    assert!(a.key_prefix().ends_with('-'));
    assert!(tier_core::TopicName::new(&format!("{}topic", a.key_prefix())).is_ok());
    let client = connect(a.primary_url()).await;
    xadd(&client, &format!("{}s", a.key_prefix())).await;
    let acked: i64 = client.wait(1, 5000).await.unwrap();
    assert_eq!(acked, 1, "{} at {}", a.server_kind(), a.primary_url());
    client.quit().await.unwrap();
}

#[tokio::test]
async fn s3_server_round_trips_objects_and_reset_and_restart_clear_it() {
    let mut server = S3Server::start().await.unwrap();
    assert_eq!(server.endpoint(), format!("http://127.0.0.1:{}", server.port()));
    server.create_bucket("roundtrip").await.unwrap();
    let store = s3_store(&server.settings(), "roundtrip");
    let path = Path::from("a/b.bin");
    let data = Bytes::from_static(b"segment bytes \x00\x01\x02");
    store.put(&path, PutPayload::from(data.clone())).await.unwrap();
    assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), data);

    server.reset().await.unwrap();
    let err = store.get(&path).await.unwrap_err();
    assert!(
        err.to_string().contains("NoSuchBucket") || matches!(err, object_store::Error::NotFound { .. }),
        "{err}"
    );

    server.create_bucket("roundtrip").await.unwrap();
    store.put(&path, PutPayload::from(data.clone())).await.unwrap();
    let port = server.port();
    server.restart().await.unwrap();
    assert_eq!(server.port(), port);
    assert!(store.get(&path).await.is_err(), "a restarted moto starts empty");
    server.create_bucket("roundtrip").await.unwrap();
    store.put(&path, PutPayload::from(data.clone())).await.unwrap();
    assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), data);
}

#[tokio::test]
async fn shared_s3_gives_each_caller_its_own_bucket() {
    let (a, b) = tokio::join!(SharedS3::get(), SharedS3::get());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.bucket(), b.bucket());
    let store_a = s3_store(a.settings(), a.bucket());
    let store_b = s3_store(b.settings(), b.bucket());
    let path = Path::from("only-in-a");
    store_a.put(&path, PutPayload::from_static(b"x")).await.unwrap();
    assert_eq!(store_a.get(&path).await.unwrap().bytes().await.unwrap(), Bytes::from_static(b"x"));
    let err = store_b.get(&path).await.unwrap_err();
    assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn shared_guards_use_the_servers_xtask_exports() {
    let servers = SharedServers::start().await.unwrap();
    let vars = servers.env_vars();
    let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    assert_eq!(lookup("TIERLOG_TEST_VALKEY_PRIMARY"), Some(servers.valkey.primary_url()));
    assert_eq!(lookup("TIERLOG_TEST_S3_ENDPOINT"), Some(servers.s3.endpoint()));

    let valkey = SharedValkey::get_with(lookup).await.unwrap();
    assert!(!valkey.is_private());
    assert_eq!(valkey.primary_url(), servers.valkey.primary_url());
    assert_eq!(valkey.replica_url(), servers.valkey.replica_url());
    assert_eq!(valkey.server_kind(), servers.valkey.server_kind());
    let client = connect(valkey.primary_url()).await;
    xadd(&client, &format!("{}s", valkey.key_prefix())).await;
    let acked: i64 = client.wait(1, 5000).await.unwrap();
    assert_eq!(acked, 1);
    client.quit().await.unwrap();

    let s3 = SharedS3::get_with(lookup).await.unwrap();
    assert!(!s3.is_private());
    assert_eq!(s3.endpoint(), servers.s3.endpoint());
    let store = s3_store(s3.settings(), s3.bucket());
    store.put(&Path::from("k"), PutPayload::from_static(b"v")).await.unwrap();
    servers.s3.reset().await.unwrap();
    assert!(store.get(&Path::from("k")).await.is_err(), "the bucket lived on the exported server");
}

#[tokio::test]
async fn half_set_shared_variables_are_a_loud_error() {
    let err = SharedValkey::get_with(|name| {
        (name == "TIERLOG_TEST_VALKEY_PRIMARY").then(|| "redis://127.0.0.1:1".to_string())
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("TIERLOG_TEST_VALKEY_REPLICA"), "{err}");
}
