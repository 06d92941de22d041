//! The command line: global options and one struct per subcommand (clap derive).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Text appended to `--help`: the exit codes scripts can rely on.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error (bad configuration, unreachable server, I/O or storage error, offset beyond the end,
     a topic no tier holds, a data directory another process holds)
  2  usage (unknown flag, bad argument, invalid topic name)
  3  `tierlog verify` found problems (one line per problem on stdout),
     or `tierlog recover` found lost offsets
  130  `tierlog produce` was interrupted by Ctrl-C (what was acknowledged is printed)

Configuration: --config PATH, else ./tierlog.toml if present, else the embedded defaults
(WAL under ./data/hot, cold tier in ./data/cold); overrides TIERLOG_<SECTION>__<KEY>=VALUE,
e.g. TIERLOG_HOT__SEGMENT_BYTES=1MiB. Logs go to stderr (RUST_LOG, default `warn`).
See docs/configuration.md and docs/cli.md.";

/// tierlog: append-only logs stored across a local WAL (hot), Valkey (warm) and object
/// storage (cold), read back as one stream.
#[derive(Debug, Parser)]
#[command(name = "tierlog", version, about, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Global options.
    #[command(flatten)]
    pub(crate) global: Global,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The help heading of the options every subcommand takes, apart from its own.
const GLOBAL: &str = "Global options";

/// Options every subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Configuration file (TOML). Default: ./tierlog.toml if present, else embedded defaults.
    #[arg(long, global = true, value_name = "PATH", help_heading = GLOBAL)]
    pub(crate) config: Option<PathBuf>,
    /// Data directory: WAL in DIR/hot, a local cold tier in DIR/cold, checkpoints in DIR/router.
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics while the command runs.
    #[arg(long, global = true, value_name = "ADDR", help_heading = GLOBAL)]
    pub(crate) metrics_addr: Option<SocketAddr>,
    /// Never show progress bars (they are hidden anyway when stderr is not a terminal).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) no_progress: bool,
    /// produce, consume, status, export, verify and recover: talk to the `tierlog serve` at
    /// URL instead of opening the store.
    #[arg(long, global = true, value_name = "URL", help_heading = GLOBAL)]
    pub(crate) server: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write ~50k records, export them to cold, prune the WAL, read everything back
    /// across the tiers and print which tier served which offsets and the throughput.
    Demo(DemoArgs),
    /// Append records: lines of stdin or --file, or synthetic --count records.
    Produce(ProduceArgs),
    /// Read records from any start position, stitched across the tiers.
    Consume(ConsumeArgs),
    /// Each topic's offset range, size and segment count per tier, export lag, and what
    /// its next recovery acts on (appends waiting for an operator's --resume-at, losses
    /// not yet reported).
    Status(StatusArgs),
    /// Seal the active WAL segment and upload every sealed segment cold lacks.
    Export(ExportArgs),
    /// Once, what a running store's background tasks do: export (when cold is
    /// configured), then WAL retention and warm trimming; then exit.
    Maintain(ExportArgs),
    /// Check every WAL segment and cold object (CRCs, index, footer) and continuity
    /// across the tiers, without opening the store; it needs the data directory to
    /// itself (a running server is verified with --server).
    Verify(VerifyArgs),
    /// Run crash recovery on every topic and print what it found (with --server: the
    /// server's reports, and --resume-at resumes a served topic online).
    Recover(RecoverArgs),
    /// Print the effective configuration as TOML, secrets redacted.
    Config,
    /// Serve the log over HTTP (docs/server.md) until SIGTERM/SIGINT, then drain.
    Serve(crate::cmd::serve::ServeArgs),
}

/// `tierlog demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Records to write.
    #[arg(long, default_value_t = 50_000)]
    pub(crate) records: u64,
    /// Payload bytes per record.
    #[arg(long, default_value_t = 200)]
    pub(crate) size: usize,
}

/// `tierlog produce`.
#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// The topic.
    pub(crate) topic: String,
    /// Read lines from this file instead of stdin (one record per line, without the newline).
    #[arg(long, value_name = "PATH", conflicts_with = "count")]
    pub(crate) file: Option<PathBuf>,
    /// Write this many synthetic records instead of reading lines.
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
    /// Payload bytes of each synthetic record (e.g. 200, 1KiB).
    #[arg(long, value_name = "BYTES", default_value = "100", requires = "count")]
    pub(crate) size: String,
    /// At most this many records per second.
    #[arg(long, value_name = "R")]
    pub(crate) rate: Option<f64>,
    /// Records per appended batch (a batch is cut earlier at 8 MiB of payload).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) batch: u64,
    /// Key of every record.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Write one JSON line per acknowledged batch to this file (`-`: stdout) as soon as
    /// it is acknowledged: {"start":N,"end":M,"count":K}, offsets [N, M).
    #[arg(long, value_name = "FILE")]
    pub(crate) acks: Option<PathBuf>,
    /// Print the summary as one JSON object instead of text; after an error too, with
    /// `error`, `may_commit` ([a, b]: offsets the refused batch may still be committed
    /// at, or null) and `outcome_unknown`.
    #[arg(long)]
    pub(crate) json: bool,
    /// Keep a `\r` before each line's `\n` (by default CRLF lines lose both).
    #[arg(long, conflicts_with = "count")]
    pub(crate) keep_cr: bool,
}

/// `tierlog consume`.
#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// The topic.
    pub(crate) topic: String,
    /// Start position: earliest, latest, an offset, or -N for the last N records.
    #[arg(
        long,
        value_name = "earliest|latest|OFFSET|-N",
        default_value = "earliest",
        conflicts_with = "at",
        allow_hyphen_values = true
    )]
    pub(crate) from: String,
    /// Start at the first record at or after this time (RFC 3339 or ms since the epoch).
    #[arg(long, value_name = "TIME")]
    pub(crate) at: Option<String>,
    /// Keep waiting for new records at the end (until Ctrl-C or --max).
    #[arg(long)]
    pub(crate) follow: bool,
    /// With --follow and --server: wait for a topic that does not exist yet (polled every
    /// 200 ms; Ctrl-C ends the wait), then follow it from the start asked.
    #[arg(long, requires = "follow")]
    pub(crate) wait: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub(crate) max: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Raw)]
    pub(crate) output: Output,
    /// Write records to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub(crate) out: Option<PathBuf>,
}

/// How `consume` writes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Each payload followed by a newline.
    Raw,
    /// One JSON object per line: offset, timestamp, key, headers, payload.
    Json,
}

/// `tierlog status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Only this topic (default: every topic).
    pub(crate) topic: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `tierlog export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Only this topic (default: every topic).
    pub(crate) topic: Option<String>,
}

/// `tierlog verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Only this topic (default: every topic found in the WAL and the cold tier).
    pub(crate) topic: Option<String>,
}

/// `tierlog recover`.
#[derive(Debug, Args)]
pub(crate) struct RecoverArgs {
    /// Topics to recover besides those in the WAL (after a lost disk the WAL knows none).
    #[arg(long = "topic", value_name = "TOPIC")]
    pub(crate) topics: Vec<String>,
    /// After the WAL and the state directory were both lost, nothing bounds the offsets
    /// producers were acknowledged and the topic refuses appends: continue it at OFFSET
    /// (at least its next offset; choose one at or past the last offset any producer was
    /// told it holds). Needs exactly one --topic. With --server, the served topic is
    /// resumed online, without stopping the server.
    #[arg(long, value_name = "OFFSET", requires = "topics")]
    pub(crate) resume_at: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}
