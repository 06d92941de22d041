//! `HotConfig` reads from TOML with humantime durations, and an empty table gives the
//! documented defaults.

use std::time::Duration;

use tier_hot::{FsyncPolicy, HotConfig, RecoveryPolicy};

#[test]
fn empty_table_gives_the_documented_defaults() {
    let config: HotConfig = toml::from_str("").unwrap();
    assert_eq!(config, HotConfig::default());
    assert_eq!(config.fsync, FsyncPolicy::Always);
    assert_eq!(config.segment_bytes, 64 << 20);
    assert_eq!(config.segment_age, Duration::from_secs(600));
    assert_eq!(config.index_interval_bytes, 64 << 10);
    assert_eq!(config.cache_bytes, 64 << 20);
    assert_eq!(config.retention_time, Duration::from_secs(24 * 3600));
    assert_eq!(config.retention_bytes, 10 << 30);
    assert_eq!(config.recovery, RecoveryPolicy::TruncateTornTail);
}

#[test]
fn every_setting_parses_from_toml() {
    let config: HotConfig = toml::from_str(
        r#"
        data_dir = "/var/lib/tierlog/hot"
        fsync = { interval = "250ms" }
        segment_bytes = 1048576
        segment_age = "5m"
        index_interval_bytes = 4096
        cache_bytes = 0
        live_tail_batches = 16
        retention_time = "2h 30m"
        retention_bytes = 1000000
        recovery = "refuse"
        "#,
    )
    .unwrap();
    assert_eq!(config.fsync, FsyncPolicy::Interval(Duration::from_millis(250)));
    assert_eq!(config.segment_age, Duration::from_secs(300));
    assert_eq!(config.retention_time, Duration::from_secs(9000));
    assert_eq!(config.recovery, RecoveryPolicy::Refuse);
    assert_eq!(config.data_dir, std::path::PathBuf::from("/var/lib/tierlog/hot"));
    assert_eq!((config.cache_bytes, config.live_tail_batches), (0, 16));
    let never: HotConfig = toml::from_str(r#"fsync = "never""#).unwrap();
    assert_eq!(never.fsync, FsyncPolicy::Never);
    assert!(toml::from_str::<HotConfig>("segment_size = 1").is_err(), "unknown fields are refused");
}
