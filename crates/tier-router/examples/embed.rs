//! Embedding the store in a service: open it from a configuration, produce with
//! acknowledgements, consume from a timestamp on into the live tail, export, close.
//!
//! `cargo run -p tier-router --example embed [DIR]` (a temporary directory by default):
//! the WAL in `DIR/hot`, a local cold tier in `DIR/cold`, no warm tier. Point
//! `[cold.backend]` at S3 and add a `[warm]` table for the other deployments; the code
//! does not change.

use futures::StreamExt;
use tier_router::{NewRecord, Source, StartPosition, StoreConfig, TieredStore, TopicName};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = tempfile::tempdir()?;
    let dir = std::env::args().nth(1).map_or_else(|| temp.path().to_owned(), Into::into);
    let config: StoreConfig = toml::from_str(&format!(
        r#"
        [hot]
        data_dir = "{hot}"
        fsync = "always"
        [cold.backend]
        kind = "local"
        path = "{cold}"
        "#,
        hot = dir.join("hot").display(),
        cold = dir.join("cold").display(),
    ))?;
    config.validate()?;
    let orders = TopicName::new("orders")?;
    let store = TieredStore::open_recovering(config, vec![orders.clone()]).await?;
    for report in store.recovery_reports().await {
        // After a crash this says what recovery found (and what was lost, if anything).
        println!(
            "recovered {}: next offset {}, clean: {}",
            report.topic,
            report.next_offset,
            report.is_clean()
        );
    }
    let topic = store.topic(orders.as_str()).await?;

    // Produce: an append returns once every enabled write tier holds the batch; the
    // range is where the records are, for good.
    let t0 = 1_700_000_000_000;
    let mut acked = Vec::new();
    for batch in 0..10i64 {
        let records = (0..100i64)
            .map(|i| {
                let n = batch * 100 + i;
                NewRecord::new(t0 + n, format!("order {n}")).with_key(format!("customer-{}", n % 7))
            })
            .collect();
        acked.push(topic.append(records).await?);
    }
    println!("acknowledged {} batches: {} .. {}", acked.len(), acked[0], acked[acked.len() - 1]);

    // Seal the active WAL segment and store what is sealed in cold (the background
    // exporter does this on its own; a service calls it only to force it).
    store.export_now(orders.as_str()).await?;
    let ranges = topic.ranges().await?;
    println!(
        "the WAL holds {}, cold holds {:?}, committed up to {}",
        ranges.hot, ranges.cold, ranges.committed
    );
    assert_eq!(ranges.cold.map(|r| r.end), Some(1000));

    // Consume from a timestamp into the live tail: the reader starts at the first record
    // at or after the timestamp, reads what is stored (from cold, warm or the WAL, as the
    // `Source` says), then waits for new appends.
    let mut reader = topic.reader_with_source(StartPosition::Timestamp(t0 + 950)).await?;
    let mut seen = 0;
    while let Some(item) = reader.next().await {
        let (source, record): (Source, _) = item?;
        seen += 1;
        if record.offset == 950 || record.offset >= 999 {
            let payload = String::from_utf8_lossy(&record.payload);
            println!("offset {} from {source:?}: {payload}", record.offset);
        }
        if record.offset == 999 {
            // Everything stored is read: the reader now follows the live tail (the
            // record appended here is read live, or from the WAL if it landed first).
            let late = topic.append(vec![NewRecord::new(t0 + 5000, "a late order")]).await?;
            assert_eq!(late.start, 1000);
        }
        if record.offset == 1000 {
            break;
        }
    }
    assert_eq!(seen, 51, "the reader saw offsets 950..=1000");

    drop(reader);
    drop(topic);
    store.close().await;
    Ok(())
}
