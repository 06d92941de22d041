//! `chaos-producer`: appends self-describing records to one topic of a `TieredStore`
//! (with its background exporter, deleter and warm trimmer running) and prints
//! `ACK <start> <end> <writer> <first_seq>` after every acknowledged append, flushed
//! line by line, so a parent that SIGKILLs it knows exactly what was acknowledged.
//!
//! Closing its stdin stops it gracefully (appends finish, the store closes, `CLOSED`).

// Tooling: a producer process; its record timestamps are real time.
#![allow(clippy::disallowed_methods)]

use std::{
    io::Write,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use clap::Parser;
use tier_chaos::{ack::Ack, payload, rng::Rng};
use tier_core::TopicName;
use tier_router::{NewRecord, StoreConfig, TieredStore, Topic};
use tokio::io::AsyncReadExt;

/// Appends chaos records and prints acknowledgements.
#[derive(Debug, Parser)]
struct Args {
    /// Store configuration (TOML).
    #[arg(long)]
    config: PathBuf,
    /// Topic to write.
    #[arg(long)]
    topic: String,
    /// Unique number of this start (writers are `incarnation * writers + i`).
    #[arg(long)]
    incarnation: u64,
    /// Concurrent appending tasks.
    #[arg(long, default_value_t = 2)]
    writers: u64,
    /// Most records per append.
    #[arg(long, default_value_t = 8)]
    max_batch: u64,
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A parent that went away is no reason to stop writing; the log is best effort.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn write_loop(topic: Topic, writer: u64, max_batch: u64, stop: Arc<AtomicBool>) {
    let mut rng = Rng::new(writer.wrapping_mul(0x9E37_79B9));
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let n = rng.between(1, max_batch);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let records = (seq..seq + n)
            .map(|s| NewRecord::new(now, payload::encode(payload::RecordId { writer, seq: s })))
            .collect();
        match topic.append(records).await {
            Ok(range) => print_line(&Ack { range, writer, first_seq: seq }.to_line()),
            Err(e) => {
                print_line(&format!("ERR {:?} {e}", e.kind()).replace('\n', " "));
                // Back off a little so an outage does not spin the CPU.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // Sequence numbers are never reused, even for a failed append whose records may
        // still become committed later.
        seq += n;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let config: StoreConfig = toml::from_str(&text).context("parsing the store config")?;
    let name = TopicName::new(&args.topic)?;
    let store = TieredStore::open_recovering(config, vec![name]).await?;
    let topic = store.topic(&args.topic).await?;
    print_line("READY");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..args.writers {
        let writer = args.incarnation * args.writers + i;
        tasks.push(tokio::spawn(write_loop(topic.clone(), writer, args.max_batch, Arc::clone(&stop))));
    }
    let mut stdin = tokio::io::stdin();
    let mut sink = Vec::new();
    let _ = stdin.read_to_end(&mut sink).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.context("a writer task panicked")?;
    }
    store.close().await;
    print_line("CLOSED");
    Ok(())
}
