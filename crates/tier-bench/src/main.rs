//! `tier-bench`: tierlog measured against baselines taken in the same run on the same
//! machine (raw file writes and reads, raw `XADD`+`WAIT`, raw object-store GETs), so the
//! ratios hold on a noisy machine. Run it through `cargo xtask bench [--quick]`.
//!
//! It starts its own Valkey pair and moto S3 server (tier-testkit's harness), prints a
//! markdown table on stdout and writes JSON to `target/bench/<unix time>.json` and
//! `target/bench/latest.json`. Workloads whose peak memory matters (each hot-append case
//! of workload 7, cold catch-up) run in child processes (this binary re-executed with a
//! hidden workload subcommand) so each reports its own `VmHWM`. The workloads and how to read the results are described in
//! `docs/benchmarks.md`.

// Tooling: a benchmark measures real time.
#![allow(clippy::disallowed_methods)]

mod cold;
mod hot;
mod open;
mod peak;
mod reopen;
mod report;
mod router;
mod server;
mod soak;
mod tail;
mod util;
mod warm;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde::Deserialize;
use tier_testkit::servers::{S3Server, ValkeyPair, workspace_root};

use crate::{
    cold::{Backend, CatchUpMode},
    report::Row,
};

/// tierlog's benchmarks.
#[derive(Debug, Parser)]
#[command(name = "tier-bench")]
struct Cli {
    /// Smaller data sets and shorter cases (finishes in about 3 minutes).
    #[arg(long, global = true)]
    quick: bool,
    /// Run only these workloads (numbers 1-12, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<u32>,
    /// Directory for the JSON results (default `<workspace>/target/bench`).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(subcommand)]
    child: Option<Child>,
}

/// Workloads run in a child process (internal).
#[derive(Debug, Subcommand)]
enum Child {
    /// Internal: workload 1 in this process, rows as JSON on stdout.
    #[command(hide = true)]
    HotAppend {
        /// Scratch directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Internal: one hot-append case of workload 7, its peak RSS as JSON on stdout.
    #[command(hide = true)]
    HotAppendPeak {
        /// Scratch directory.
        #[arg(long)]
        dir: PathBuf,
        /// Record size in bytes.
        #[arg(long)]
        size: usize,
        /// Records per batch.
        #[arg(long)]
        batch: usize,
        /// fsync every append (else never).
        #[arg(long)]
        always: bool,
        /// The record cache's budget.
        #[arg(long)]
        cache_bytes: u64,
        /// Through the router (a hot-only `TieredStore`) instead of `HotTier` alone.
        #[arg(long)]
        router: bool,
    },
    /// One append case of workload 1 on its own, for profiling (`strace -c -f`, `perf`):
    /// 1 KiB records, `--per` a batch, `--count` appends, through the router (hot only)
    /// or, with `--tier`, `HotTier` alone; `--producers N` shares the appends among N
    /// concurrent producer tasks (router only).
    #[command(hide = true)]
    RouterCase {
        /// Scratch directory.
        #[arg(long)]
        dir: PathBuf,
        /// Records per append.
        #[arg(long, default_value_t = 100)]
        per: usize,
        /// Appends.
        #[arg(long, default_value_t = 10_000)]
        count: u64,
        /// fsync every append (else never).
        #[arg(long)]
        always: bool,
        /// `HotTier` alone instead of the router.
        #[arg(long)]
        tier: bool,
        /// Producer tasks, each awaiting its own appends (router only; 1: sequential,
        /// with p50/p99 per append).
        #[arg(long, default_value_t = 1)]
        producers: usize,
    },
    /// Internal: workload 11 (the server soak) in this process, rows as JSON on stdout.
    #[command(hide = true)]
    ServerSoak {
        /// Scratch directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Internal: one catch-up read of workload 4, result as JSON on stdout.
    #[command(hide = true)]
    CatchUp {
        /// The backend, as JSON.
        #[arg(long)]
        backend: String,
        /// How to read: through the cold tier's record or batch stream, or raw GETs.
        #[arg(long, value_enum)]
        mode: cold::CatchUpMode,
    },
}

/// Sizes and durations of a run.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    quick: bool,
    /// Longest time one throughput case runs through tierlog.
    pub(crate) case_budget: Duration,
    /// Most payload bytes one append case writes.
    pub(crate) append_bytes: u64,
    /// Payload bytes of the topic read in workload 2.
    pub(crate) read_bytes: u64,
    /// Most payload bytes one warm case writes.
    pub(crate) warm_bytes: u64,
    /// Payload bytes of the cold catch-up data.
    pub(crate) catchup_bytes: u64,
    /// Random points per seek workload.
    pub(crate) seek_points: usize,
    /// Records of the topic-scaling workload.
    pub(crate) scale_records: u64,
    /// Records of each live-tail run and their rate per second.
    pub(crate) tail_records: u64,
    pub(crate) tail_rate: u64,
    /// Alternating rounds of tierlog and baseline per throughput case (best kept).
    pub(crate) rounds: u32,
}

impl Settings {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                quick,
                case_budget: Duration::from_secs(1),
                append_bytes: 64 << 20,
                read_bytes: 64 << 20,
                warm_bytes: 32 << 20,
                catchup_bytes: 256 << 20,
                seek_points: 20,
                scale_records: 500_000,
                tail_records: 3000,
                tail_rate: 2000,
                rounds: 2,
            }
        } else {
            Self {
                quick,
                case_budget: Duration::from_secs(2),
                append_bytes: 512 << 20,
                read_bytes: 256 << 20,
                warm_bytes: 256 << 20,
                catchup_bytes: 1 << 30,
                seek_points: 100,
                scale_records: 2_000_000,
                tail_records: 20_000,
                tail_rate: 2000,
                rounds: 3,
            }
        }
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let settings = Settings::new(cli.quick);
    match &cli.child {
        Some(Child::HotAppend { dir }) => {
            let mut rows = runtime.block_on(hot::append(&settings, dir))?;
            rows.extend(runtime.block_on(router::append(&settings, dir))?);
            println!("{}", serde_json::to_string(&rows)?);
            Ok(())
        }
        Some(Child::HotAppendPeak { dir, size, batch, always, cache_bytes, router }) => {
            let case = peak::Case { size: *size, batch: *batch, always: *always, router: *router };
            let out = runtime.block_on(peak::run_case(&settings, dir, case, *cache_bytes))?;
            println!("{}", serde_json::to_string(&out)?);
            Ok(())
        }
        Some(Child::RouterCase { dir, per, count, always, tier, producers }) => {
            let case = router::OneCase {
                per: *per,
                count: *count,
                always: *always,
                tier: *tier,
                producers: *producers,
            };
            let out = runtime.block_on(router::one_case(dir, case))?;
            println!("{out}");
            Ok(())
        }
        Some(Child::ServerSoak { dir }) => {
            let rows = runtime.block_on(soak::server_soak(&settings, dir))?;
            println!("{}", serde_json::to_string(&rows)?);
            Ok(())
        }
        Some(Child::CatchUp { backend, mode }) => {
            let backend: Backend = serde_json::from_str(backend)?;
            let out = runtime.block_on(cold::catch_up_child(&backend, *mode))?;
            println!("{}", serde_json::to_string(&out)?);
            Ok(())
        }
        None => runtime.block_on(run(&cli, &settings)),
    }
}

/// Runs this binary again with `args` (plus `--quick` when set) and parses the last
/// line of its stdout as JSON.
fn run_child<T: for<'de> Deserialize<'de>>(settings: &Settings, args: &[&str]) -> Result<T> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    if settings.quick {
        cmd.arg("--quick");
    }
    cmd.args(args);
    let out = cmd.output().context("running a benchmark child process")?;
    anyhow::ensure!(
        out.status.success(),
        "child {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout)?;
    let last = stdout.lines().last().context("child printed nothing")?;
    Ok(serde_json::from_str(last)?)
}

fn note(msg: &str) {
    eprintln!("tier-bench: {msg}");
}

async fn run(cli: &Cli, settings: &Settings) -> Result<()> {
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let wall = Instant::now();
    let root = workspace_root();
    let out_dir = cli.out.clone().unwrap_or_else(|| root.join("target/bench"));
    let work = out_dir.join("work");
    std::fs::create_dir_all(&work)?;
    let scratch = tempfile::tempdir_in(&work)?;
    let dir = scratch.path();
    let want = |n: u32| cli.only.is_empty() || cli.only.contains(&n);
    let mut rows: Vec<Row> = Vec::new();

    let d = dir.to_str().context("non-UTF-8 scratch path")?;
    if want(1) {
        note("workload 1: hot append (child process)");
        let out: Vec<Row> = run_child(settings, &["hot-append", "--dir", d])?;
        rows.extend(out);
    }
    if want(7) {
        for cache_bytes in peak::BUDGETS {
            note(&format!(
                "workload 7: hot append peak RSS, cache {} MiB (a child per case)",
                cache_bytes >> 20
            ));
            let router = if cache_bytes == peak::BUDGETS[0] { peak::Case::router() } else { Vec::new() };
            for case in peak::Case::all().into_iter().chain(router) {
                let (size, batch, cache) =
                    (case.size.to_string(), case.batch.to_string(), cache_bytes.to_string());
                let mut args = vec!["hot-append-peak", "--dir", d, "--size", &size, "--batch", &batch];
                args.extend(["--cache-bytes", &cache]);
                if case.always {
                    args.push("--always");
                }
                if case.router {
                    args.push("--router");
                }
                let out: peak::Peak = run_child(settings, &args)?;
                rows.push(peak::row(case, cache_bytes, &out));
            }
        }
    }
    if want(2) {
        note("workload 2: hot read");
        rows.extend(hot::read(settings, dir).await?);
    }
    if want(3) || want(6) || want(9) {
        note("starting Valkey primary + replica");
        let valkey = ValkeyPair::start().await?;
        let url = valkey.primary_url();
        if want(3) {
            note("workload 3: warm dual write");
            rows.extend(warm::dual_write(settings, dir, &url).await?);
        }
        if want(6) {
            note("workload 6: live tail");
            rows.push(tail::hot_only(settings, dir).await?);
            rows.push(
                router::tail_latest(settings, dir).await?.with_floor(tail::wake_floor(settings).await?),
            );
            rows.push(tail::with_warm(settings, dir, &url).await?);
        }
        if want(9) {
            note("workload 9: open over 1,000 topics");
            rows.extend(open::many_topics(settings, dir, &url).await?);
        }
    } else if want(6) {
        rows.push(tail::hot_only(settings, dir).await?);
        rows.push(router::tail_latest(settings, dir).await?.with_floor(tail::wake_floor(settings).await?));
    }
    if want(4) || want(5) || want(7) {
        rows.extend(cold_workloads(settings, dir, want(4) || want(7), want(5)).await?);
    }
    if want(8) {
        note("workload 8: scaling");
        rows.extend(hot::scale_topics(settings, dir).await?);
        for segments in [10, 100, 1000] {
            rows.extend(cold::scale_segments(dir, segments, settings.seek_points).await?);
        }
    }
    if want(10) {
        note("workload 10: server loopback");
        rows.extend(server::append(settings, dir).await?);
        rows.push(server::live_tail(settings, dir).await?);
    }
    if want(12) {
        note("workload 12: reopening a large WAL");
        rows.extend(reopen::large_wal(settings, dir).await?);
    }
    if want(11) {
        note("workload 11: server soak (child process: its memory is its own)");
        let out: Vec<Row> = run_child(settings, &["server-soak", "--dir", d])?;
        rows.extend(out);
    }

    let table = report::markdown(&rows);
    println!("{table}");
    let report = report::RunReport {
        started_unix: started,
        quick: settings.quick,
        cpus: std::thread::available_parallelism().map_or(0, usize::from),
        wall_secs: wall.elapsed().as_secs_f64(),
        rows: &rows,
    };
    report::write_json(&out_dir, &report)?;
    note(&format!("done in {:.0} s; JSON in {}", report.wall_secs, out_dir.join("latest.json").display()));
    Ok(())
}

/// Workloads 4 (with its peak RSS, workload 7) and 5 on one prepared data set.
async fn cold_workloads(settings: &Settings, dir: &Path, catch_up: bool, seek: bool) -> Result<Vec<Row>> {
    note("starting moto S3 server");
    let s3 = S3Server::start().await?;
    s3.create_bucket("bench").await?;
    let backends = [Backend::S3 { endpoint: s3.endpoint() }, Backend::Local { path: dir.join("cold-local") }];
    note(&format!("preparing {} MiB of cold data (export to moto and local)", settings.catchup_bytes >> 20));
    let prep = Instant::now();
    let records = cold::prepare(&dir.join("cold-src"), settings.catchup_bytes, &backends).await?;
    note(&format!("prepared {records} records in {:.0} s", prep.elapsed().as_secs_f64()));
    let mut rows = Vec::new();
    if catch_up {
        for backend in &backends {
            note(&format!("workload 4: catch-up from {}", backend.label()));
            let json = serde_json::to_string(backend)?;
            let child = |mode: CatchUpMode| -> Result<cold::CatchUp> {
                run_child(settings, &["catch-up", "--backend", &json, "--mode", mode.arg()])
            };
            // Best of `rounds` for each mode, the modes interleaved round by round.
            let mut best: Vec<Option<cold::CatchUp>> = vec![None, None, None];
            for _ in 0..settings.rounds {
                for (i, mode) in
                    [CatchUpMode::Records, CatchUpMode::Batches, CatchUpMode::Raw].into_iter().enumerate()
                {
                    let got = child(mode)?;
                    if best[i].as_ref().is_none_or(|b| got.secs < b.secs) {
                        best[i] = Some(got);
                    }
                }
            }
            let [Some(tier), Some(batches), Some(raw)] = <[Option<cold::CatchUp>; 3]>::try_from(best)
                .map_err(|_| anyhow::anyhow!("three catch-up modes"))?
            else {
                anyhow::bail!("no catch-up round ran");
            };
            anyhow::ensure!(tier.records == records, "catch-up read {} of {records} records", tier.records);
            anyhow::ensure!(
                batches.records == records,
                "batch catch-up read {} of {records}",
                batches.records
            );
            let case = format!("{} MiB from {}", settings.catchup_bytes >> 20, backend.label());
            rows.push(
                Row::new("4 cold catch-up", format!("{case}, records"))
                    .throughput(
                        tier.records,
                        tier.bytes,
                        tier.secs,
                        Some(raw.secs * tier.bytes as f64 / raw.bytes as f64),
                    )
                    .target_at_least(0.8, ">= 0.8x raw GET")
                    .detail(format!(
                        "ColdTier::stream (a Record per record); {} GETs (raw {}); raw object MB/s {:.1}; best of {}",
                        tier.gets,
                        raw.gets,
                        raw.bytes as f64 / 1e6 / raw.secs,
                        settings.rounds
                    )),
            );
            rows.push(
                Row::new("4 cold catch-up", format!("{case}, batches"))
                    .throughput(
                        batches.records,
                        batches.bytes,
                        batches.secs,
                        Some(raw.secs * batches.bytes as f64 / raw.bytes as f64),
                    )
                    .target_at_least(0.8, ">= 0.8x raw GET")
                    .detail(format!(
                        "ColdTier::stream_batches (verified batches, MB/s of batch bytes); {} GETs; best of {}",
                        batches.gets, settings.rounds
                    )),
            );
            rows.push(Row::new("7 peak RSS", format!("workload 4 from {}", backend.label())).detail(format!(
                "VmHWM {} MiB streaming records through ColdTier ({} MiB batches, raw GETs {} MiB); read_buffer 1 MiB x read_ahead 4",
                tier.vm_hwm_kib >> 10,
                batches.vm_hwm_kib >> 10,
                raw.vm_hwm_kib >> 10
            )));
        }
    }
    if seek {
        for backend in &backends {
            note(&format!("workload 5: seeks on {}", backend.label()));
            rows.extend(
                cold::seeks("5 cold seek", backend.label(), backend.config(), settings.seek_points).await?,
            );
        }
    }
    Ok(rows)
}
