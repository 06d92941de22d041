//! Schedules: a deployment chosen by the seed and a list of steps generated up front
//! (so a failing schedule can be printed, replayed and shrunk). Each step keeps the index
//! it was generated at; the randomness a step uses while it runs comes from
//! [`step_seed`]`(seed, index)`, so dropping other steps does not
//! change what a kept step does.

use std::fmt;
use std::time::Duration;

use tier_hot::FsyncPolicy;
use tier_router::WarmFailurePolicy;

use crate::disk::{CutModel, PAGE};
use crate::rng::{Rng, step_seed};

/// Which tiers are enabled besides the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployment {
    /// The WAL alone.
    Hot,
    /// WAL + cold.
    HotCold,
    /// WAL + warm.
    HotWarm,
    /// WAL + warm + cold.
    HotWarmCold,
}

impl Deployment {
    /// Warm is enabled.
    pub fn warm(self) -> bool {
        matches!(self, Self::HotWarm | Self::HotWarmCold)
    }
    /// Cold is enabled.
    pub fn cold(self) -> bool {
        matches!(self, Self::HotCold | Self::HotWarmCold)
    }
}

impl fmt::Display for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hot => "hot",
            Self::HotCold => "hot+cold",
            Self::HotWarm => "hot+warm",
            Self::HotWarmCold => "hot+warm+cold",
        })
    }
}

/// How the cold tier is plugged in (see [`crate::cold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdShape {
    /// `ColdTier` itself.
    Tier,
    /// `ColdTier` behind a wrapper relying on `ColdBackend`'s default bodies (the CLI's
    /// metered wrapper's shape).
    Defaults,
}

/// Everything about a schedule that is fixed for the whole run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Tiers enabled.
    pub deployment: Deployment,
    /// How cold is plugged in.
    pub cold_shape: ColdShape,
    /// `router.warm_failure_policy`.
    pub policy: WarmFailurePolicy,
    /// `hot.fsync`.
    pub fsync: FsyncPolicy,
    /// `hot.segment_bytes`.
    pub segment_bytes: u64,
    /// `hot.segment_age`.
    pub segment_age: Duration,
    /// `hot.retention_time`.
    pub retention_time: Duration,
    /// `hot.retention_bytes`.
    pub retention_bytes: u64,
    /// `router.max_cached_closed_segments`.
    pub keep_segments: usize,
    /// `router.warm_retry_interval`.
    pub warm_retry: Duration,
    /// Whether the store runs its background exporter (event-driven; its sweep and the
    /// maintenance task are set to a year, so they never fire on their own).
    pub background: bool,
    /// What a power cut leaves of the bytes written since a file's last fsync (by
    /// generator version, see [`GENERATOR`]).
    pub cuts: CutModel,
    /// A failed WAL fsync loses the pages it could not write (generator 7,
    /// [`tier_hot::faults::fail_fsync_losing_pages`]); otherwise the bytes stay in the file.
    pub fsync_loses_pages: bool,
    /// Warm takes a group of batches as tier-warm's script does, every batch on the primary
    /// before the one `WAIT` (generator 9, `SimWarm::set_group_script`); otherwise one
    /// batch at a time, stopping at the first refusal.
    pub warm_group_script: bool,
    /// A second topic in the same store (generator 13, [`SECOND_TOPIC`](crate::run::SECOND_TOPIC)):
    /// every append step also appends a batch to it, and every full check reads it.
    pub second_topic: bool,
    /// Warm keeps owner epochs as tier-warm does (generator 14,
    /// `SimWarm::set_owner_epochs`): every open claims the topic, and the scripts refuse
    /// a writer holding an earlier epoch than the owner key's.
    pub warm_owner_epochs: bool,
}

impl fmt::Display for SimConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fsync = match self.fsync {
            FsyncPolicy::Always => "always".to_owned(),
            FsyncPolicy::Never => "never".to_owned(),
            FsyncPolicy::Interval(d) => format!("interval {d:?}"),
            // `FsyncPolicy` is non-exhaustive; a policy added later is shown as it prints.
            other => format!("{other:?}"),
        };
        write!(
            f,
            "{}{}, policy {:?}, fsync {fsync}, segments {} B / {:?}, retention {:?} / {} B, keep {}, \
             warm retry {:?}, background exporter {}{}{}{}",
            self.deployment,
            if self.deployment.cold() && self.cold_shape == ColdShape::Defaults {
                " (cold behind a defaults-only wrapper)"
            } else {
                ""
            },
            self.policy,
            self.segment_bytes,
            self.segment_age,
            self.retention_time,
            self.retention_bytes,
            self.keep_segments,
            self.warm_retry,
            if self.background { "on" } else { "off" },
            if self.second_topic { ", a second topic" } else { "" },
            if self.warm_owner_epochs && self.deployment.warm() { ", warm owner epochs" } else { "" },
            match (self.cuts, self.fsync_loses_pages) {
                (CutModel::PagesAndDirs, _) => {
                    ", power cuts by page and undoing directory operations, failed fsyncs lose pages"
                }
                (CutModel::Pages, true) => ", power cuts by page, failed fsyncs lose pages",
                (CutModel::Pages, false) => ", power cuts by page",
                _ => "",
            },
        )
    }
}

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// `StartPosition::Earliest`.
    Earliest,
    /// `StartPosition::Latest`.
    Latest,
    /// An offset: this many thousandths of the commit point (up to 1100).
    Offset(u16),
    /// A timestamp: this many thousandths of the simulated time elapsed (up to 1100).
    Timestamp(u16),
}

/// One step of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `producers` concurrent appends (joined futures) of `records` records each.
    Append { producers: u8, records: u8 },
    /// A read of up to `max` records from `from`, stopping at the commit point.
    Read { from: ReadFrom, max: u16 },
    /// A live-tail read: a reader at `Latest`, one append, the reader must deliver it.
    LiveTail,
    /// `export_now`.
    Export,
    /// `run_retention_now(simulated now)`.
    Retention,
    /// `trim_warm_now`.
    TrimWarm,
    /// `checkpoint`.
    Checkpoint,
    /// Simulated time passes (age rotation, warm retries, the background exporter).
    Tick { ms: u32 },
    /// The wall clock jumps forward (record timestamps, the store's clock: seal times,
    /// retention's "now").
    ClockJump { minutes: u32 },
    /// The store's wall clock goes back (generator 10): seal and segment creation times
    /// and retention's "now" go back; record timestamps (the producers' clock) do not.
    /// Nothing young may be deleted for it (see `tier_core::clock`).
    ClockBack { minutes: u32 },
    /// `close`, then reopen.
    CloseReopen,
    /// The process dies (dropped without `close`); with `power_cut`, every WAL file is
    /// cut back to its last fsync point or a random byte past it. Then reopen.
    Crash { power_cut: bool },
    /// The WAL directory is lost (after a clean close or a crash), then reopen.
    LoseWal { clean: bool },
    /// The WAL directory vanishes under the running store (a disk pulled out); `producers`
    /// concurrent appends of `records` records each meet the missing directory (the open
    /// segment, unlinked, still takes writes; a rotation inside their group fails), the
    /// store is read from the start, time passes (age rotation and the exporter meet the
    /// missing directory), then the store closes gracefully and reopens. Generator 2 made
    /// it with no appends (`producers == 0`).
    LoseWalRunning { producers: u8, records: u8 },
    /// The next fsync of the WAL's active segment fails (per group under `always`, the
    /// timer's under `interval`; under `never` none comes until a heal disarms it): the
    /// batch written before it is refused although its bytes are in the file, and the
    /// WAL's writer fails until the store is reopened.
    WalFsyncFails,
    /// A power cut while a rotation's background seal has not run: the background seals
    /// are held, queued ([`tier_core::blocking::hold_seals_here`]), simulated time passes
    /// until the active segment rotates by age, one append of `records` records lands in
    /// the new segment (left out while warm misbehaves: its retries would let time pass
    /// before the cut), then the power is cut — the sealed file's footer and the new file,
    /// header included, never fsynced — and the store reopens. Without a rotation (an
    /// empty active segment, a failed writer) it is a crash with a power cut.
    PowerCutBeforeSeal { records: u8 },
    /// The router's state directory is lost, then reopen.
    LoseState { clean: bool },
    /// The whole data directory (WAL and state) is lost, then reopen.
    LoseDataDir { clean: bool },
    /// Warm stops (true) or starts (false) answering.
    WarmOutage(bool),
    /// Warm's `WAIT` starts (true) or stops (false) falling short.
    WarmWaitShort(bool),
    /// Warm fails over to its lagging replica (the primary's newer entries vanish).
    WarmFailover,
    /// Every `every`th write pipeline warm receives (`XADD` + `WAIT`, the group script +
    /// `WAIT`, `SET` + `WAIT`) is applied by the server and its answer lost (generator 9,
    /// [`SimWarm::set_answers_lost`](crate::warm::SimWarm::set_answers_lost)): the caller
    /// gets `Unavailable` and the connection is dropped, the next call opens a fresh one.
    /// Lasts until a heal.
    WarmAnswersLost { every: u8 },
    /// Warm's connection is reset between calls (generator 9): the next call opens a
    /// fresh connection, whose `WAIT` counts no write of its own.
    WarmReconnect,
    /// Warm fails over to a replica lacking the primary's last `writes` writes, writes a
    /// met `WAIT` confirmed among them (generator 9,
    /// [`SimWarm::fail_over_behind`](crate::warm::SimWarm::fail_over_behind)): with two
    /// replicas and `WAIT 1` the promoted one need not be the one that acknowledged.
    WarmFailoverBehind { writes: u8 },
    /// Every `n`th object-store request fails (`None`: no more failures).
    ColdErrors(Option<u8>),
    /// Every object-store request takes this many milliseconds.
    ColdLatency(u16),
    /// Every `every`th mutating object-store request (a PUT, a multipart completion, a
    /// DELETE) is ambiguous (generator 8, [`Faults::lose_answer_every`] /
    /// [`Faults::refuse_write_every`]): with `applied` it takes effect and its answer is
    /// lost (a timeout or a connection reset after the store acted: the caller sees an
    /// error, a retry finds the object already there), without it the request fails
    /// before reaching the store. Reads are not affected.
    ///
    /// [`Faults::lose_answer_every`]: tier_cold::testing::Faults::lose_answer_every
    /// [`Faults::refuse_write_every`]: tier_cold::testing::Faults::refuse_write_every
    ColdAmbiguous { applied: bool, every: u8 },
    /// Object-store listings lag writes (generator 8, [`Faults::list_lag`]): an object
    /// created or deleted from now on stays unlisted / listed for the next `lists`
    /// listings (eventually consistent LIST); GET and HEAD stay consistent.
    ///
    /// [`Faults::list_lag`]: tier_cold::testing::Faults::list_lag
    ColdListLag { lists: u8 },
    /// One byte of a sealed WAL segment flips.
    DamageSegment,
    /// One byte of a cold object flips.
    DamageCold,
    /// A second store, hot only, whose data directory is a sibling of this one's (both
    /// under one parent, the state directory left to its default `<parent>/router`),
    /// opens on the same topic, appends `records` records and closes cleanly (generator
    /// 12). Its open must be refused: the state directory belongs to the store that wrote
    /// it (`docs/router.md`, "The state directory belongs to one store").
    Neighbour { records: u8 },
    /// Every injected fault stops.
    Heal,
}

impl Step {
    /// The fault kind this step injects, for the table (`None`: not a fault).
    pub fn fault_kind(&self) -> Option<&'static str> {
        Some(match self {
            Step::Crash { power_cut: false } => "crash",
            Step::Crash { power_cut: true } => "crash + power cut",
            Step::PowerCutBeforeSeal { .. } => "power cut before a seal's fsync",
            Step::LoseWal { .. } => "lost WAL dir",
            Step::LoseWalRunning { .. } => "lost WAL dir (running)",
            Step::WalFsyncFails => "WAL fsync failure",
            Step::LoseState { .. } => "lost state dir",
            Step::LoseDataDir { .. } => "lost data dir",
            Step::WarmOutage(true) => "warm outage",
            Step::WarmWaitShort(true) => "warm WAIT short",
            Step::WarmFailover => "warm entry loss",
            Step::WarmAnswersLost { .. } => "warm answers lost",
            Step::WarmReconnect => "warm reconnect",
            Step::WarmFailoverBehind { .. } => "warm failover losing confirmed writes",
            Step::ColdErrors(Some(_)) => "cold errors",
            Step::ColdLatency(ms) if *ms > 0 => "cold latency",
            Step::ColdAmbiguous { applied: true, .. } => "cold answers lost",
            Step::ColdAmbiguous { applied: false, .. } => "cold writes refused",
            Step::ColdListLag { .. } => "cold listing lag",
            Step::DamageSegment => "damaged WAL segment",
            Step::DamageCold => "damaged cold object",
            Step::ClockJump { .. } => "clock jump",
            Step::ClockBack { .. } => "clock back",
            Step::Neighbour { .. } => "a store beside it",
            _ => return None,
        })
    }
}

/// The version of the step generator [`Schedule::generate`] uses. A seed generates the
/// same schedule under one version forever; a regression schedule records the version
/// it was found with ([`crate::Regression::generator`]).
///
/// - 1: the first: appends, reads, background work, restarts, crashes, power cuts, lost
///   directories, warm and cold faults, damage, heals.
/// - 2: [`Step::LoseWalRunning`], taken from rolls that made [`Step::Heal`] under 1 and
///   drawing no randomness: every other step of every seed is the same as under 1.
/// - 3: `LoseWalRunning` appends while the directory is gone (2 to 4 producers of 3 to
///   11 records, from the roll, drawing no randomness): every other step of every seed
///   is the same as under 2.
/// - 4: [`Step::WalFsyncFails`], taken from rolls that made [`Step::Heal`] under 3 and
///   drawing no randomness: every other step of every seed is the same as under 3.
/// - 5: *warm-outage bursts* (`warm_outage_burst`), taken from rolls that made
///   [`Step::Heal`] under 4 (with warm deployed): the steps of a compound fault in a row —
///   warm down, maybe a refused WAL write, a restart while warm is down, a second fault
///   (a restart, a crash, the state or WAL directory lost), warm back, a read from the
///   start. A burst draws randomness, so the steps after the first burst of a seed
///   differ from version 4's.
/// - 6: power cuts by page ([`CutModel::Pages`]: the size persisted without the data,
///   new files zero-filled or gone); half the schedules get segments of 8–24 KiB
///   (several pages, so a page not written back can precede pages that were) and 5 times
///   the segment age, drawn from a generator of their own (`page_scale`);
///   [`Step::PowerCutBeforeSeal`] from rolls that made [`Step::Heal`] under 5, drawing no
///   randomness. Every other step of every seed is the same as under 5.
/// - 7: a failed WAL fsync ([`Step::WalFsyncFails`]) loses the pages it could not write,
///   as Linux does ([`tier_hot::faults::fail_fsync_losing_pages`]): they read as zeros
///   once the page cache is dropped (recovery, a power cut). The steps are version 6's.
///   Not the default.
/// - 8: object stores as they really fail, taken from rolls that made [`Step::Heal`]
///   under 7 where cold is deployed, drawing no randomness:
///   [`Step::ColdAmbiguous`] (answers lost after the store acted, or writes refused
///   before it did) and [`Step::ColdListLag`] (listings that lag writes). Every other
///   step of every seed, and the configuration, are version 7's. Not the default.
/// - 9: warm as Valkey really fails, taken from rolls that made [`Step::Heal`] under 8
///   where warm is deployed, drawing no randomness: [`Step::WarmAnswersLost`] (a
///   pipeline applied, its answer lost, the connection dropped),
///   [`Step::WarmReconnect`] (a fresh connection between calls) and
///   [`Step::WarmFailoverBehind`] (a replica promoted that lacks writes a `WAIT`
///   confirmed); and warm takes a group in one script + `WAIT`, as tier-warm does
///   ([`SimConfig::warm_group_script`]). Every other step of every seed, and the rest of
///   the configuration, are version 8's. Not the default.
/// - 10: [`Step::ClockBack`], the store's wall clock going back from 1 minute to a day
///   ([`CLOCK_BACK_MINUTES`], by the roll), taken from rolls that made [`Step::Heal`]
///   under 9, drawing no randomness. Every other step of every seed, and the
///   configuration, are version 9's. Not the default.
/// - 11: power cuts also undo directory operations ([`CutModel::PagesAndDirs`]: in each
///   directory, with even chances, every create, rename and unlink since its last
///   fsync). Its steps are version 10's; only what a power cut leaves differs. Not the
///   default.
/// - 12: [`Step::Neighbour`], a second store whose data directory is a sibling of this
///   one's, taken from rolls 972–979 of a heal step under 11, drawing no randomness
///   (1 to 8 records, from the roll). Every other step of every seed, and the
///   configuration, are version 11's. Not the default.
/// - 13: a second topic in the store ([`SimConfig::second_topic`]): every append step
///   also appends a batch of as many records to it, and every full check reads it from
///   its earliest offset, checking that it serves only its own records, densely. Its
///   steps are version 12's.
/// - 14: warm keeps owner epochs ([`SimConfig::warm_owner_epochs`]): each open claims
///   its topics (`INCR` + `WAIT`, whose answer the faults can lose), the WAL records the
///   epoch, and the append and trim scripts check it. Its steps are version 13's. The
///   default.
///
/// The default is the newest version whose long runs (`docs/simulation.md`, "Latest
/// runs") found nothing open, since `cargo xtask test`'s run must pass; other versions run
/// with `--generator N`, and their regression schedules run with every test.
pub const GENERATOR: u32 = 14;

/// The newest generator version (`--generator 14`).
pub const LATEST: u32 = 14;

/// How far back [`Step::ClockBack`] moves the clock, by its roll: within a minute of the
/// last seal, across retention times (at most 90.5 minutes in a schedule), and a day.
pub const CLOCK_BACK_MINUTES: [u32; 10] = [1, 2, 5, 15, 30, 59, 61, 90, 120, 1440];

/// A schedule: seed, configuration and steps (each with its generation index).
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The seed everything derives from.
    pub seed: u64,
    /// The deployment and settings.
    pub config: SimConfig,
    /// The steps, each with the index it was generated at.
    pub steps: Vec<(u32, Step)>,
}

impl Schedule {
    /// The schedule of `seed` with `steps` steps, from the current [`GENERATOR`].
    pub fn generate(seed: u64, steps: u32) -> Self {
        Self::generate_with(GENERATOR, seed, steps)
    }

    /// The schedule of `seed` with `steps` steps as version `generator` of the step
    /// generator makes it (see [`GENERATOR`]).
    pub fn generate_with(generator: u32, seed: u64, steps: u32) -> Self {
        let mut rng = Rng::new(seed);
        let mut config = gen_config(&mut rng);
        if generator >= 6 {
            page_scale(&mut config, seed);
        }
        config.fsync_loses_pages = generator >= 7;
        config.warm_group_script = generator >= 9;
        if generator >= 11 {
            config.cuts = CutModel::PagesAndDirs;
        }
        config.second_topic = generator >= 13;
        config.warm_owner_epochs = generator >= 14;
        let mut out = Vec::with_capacity(steps as usize);
        // The rest of a burst: one step per index, as any other.
        let mut burst = std::collections::VecDeque::new();
        for i in 0..steps {
            let step = match burst.pop_front() {
                Some(step) => step,
                None => gen_step(&mut rng, &config, generator, &mut burst),
            };
            out.push((i, step));
        }
        Self { seed, config, steps: out }
    }

    /// Only the steps whose generation index is in `keep`.
    pub fn keep(mut self, keep: &[u32]) -> Self {
        self.steps.retain(|(i, _)| keep.contains(i));
        self
    }

    /// Without the steps that destroy data or make warm misbehave (losses, power cuts,
    /// damage, warm faults): what a correct store must pass with no excuse needed. A
    /// sanity check of the model (`sim-runner --benign`).
    pub fn benign(mut self) -> Self {
        self.steps.retain(|(_, s)| {
            !matches!(
                s,
                Step::Crash { power_cut: true }
                    | Step::PowerCutBeforeSeal { .. }
                    | Step::LoseWal { .. }
                    | Step::LoseWalRunning { .. }
                    | Step::WalFsyncFails
                    | Step::LoseState { .. }
                    | Step::LoseDataDir { .. }
                    | Step::DamageSegment
                    | Step::DamageCold
                    | Step::WarmOutage(_)
                    | Step::WarmWaitShort(_)
                    | Step::WarmFailover
                    | Step::WarmAnswersLost { .. }
                    | Step::WarmFailoverBehind { .. }
            )
        });
        self
    }

    /// The indices of the steps, comma-separated (for `--keep`).
    pub fn indices(&self) -> String {
        self.steps.iter().map(|(i, _)| i.to_string()).collect::<Vec<_>>().join(",")
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {}: {}", self.seed, self.config)?;
        for (i, step) in &self.steps {
            writeln!(f, "  {i:>4}: {step:?}")?;
        }
        Ok(())
    }
}

fn gen_config(rng: &mut Rng) -> SimConfig {
    let deployment =
        *rng.pick(&[Deployment::Hot, Deployment::HotCold, Deployment::HotWarm, Deployment::HotWarmCold]);
    let fsync = match rng.below(3) {
        0 => FsyncPolicy::Always,
        1 => FsyncPolicy::Never,
        _ => FsyncPolicy::Interval(Duration::from_millis(rng.range(5, 50))),
    };
    SimConfig {
        deployment,
        cold_shape: if rng.chance(1, 4) { ColdShape::Defaults } else { ColdShape::Tier },
        policy: if rng.chance(1, 2) { WarmFailurePolicy::Fail } else { WarmFailurePolicy::Degrade },
        fsync,
        segment_bytes: rng.range(1, 6) * 512,
        segment_age: Duration::from_millis(rng.range(1, 20) * 50),
        // Minutes plus 30 s, so that clock jumps (whole minutes) never land on a boundary.
        retention_time: Duration::from_secs(rng.range(0, 90) * 60 + 30),
        retention_bytes: if rng.chance(1, 3) { rng.range(2, 8) * 1024 } else { 10 << 30 },
        keep_segments: usize::try_from(rng.range(1, 4)).unwrap_or(1),
        warm_retry: Duration::from_millis(rng.range(1, 10) * 20),
        background: rng.chance(2, 3),
        cuts: CutModel::Bytes,
        fsync_loses_pages: false,
        warm_group_script: false,
        warm_owner_epochs: false,
        second_topic: false,
    }
}

/// Generator 6's power cuts by page, and for half the schedules segments of several
/// pages (8–24 KiB, 5 times the age), so that a page not written back can precede pages
/// that were — KiB segments fit in one page. Drawn from a generator of their own (seeded
/// from the schedule's seed), so every other choice stays version 5's.
fn page_scale(config: &mut SimConfig, seed: u64) {
    config.cuts = CutModel::Pages;
    let mut rng = Rng::new(step_seed(seed, u64::MAX));
    if rng.chance(1, 2) {
        config.segment_bytes = rng.range(2, 6) * PAGE;
        config.segment_age *= 5;
    }
}

/// Makes one step; a burst's first step, with the rest queued on `burst`.
fn gen_step(
    rng: &mut Rng,
    config: &SimConfig,
    generator: u32,
    burst: &mut std::collections::VecDeque<Step>,
) -> Step {
    loop {
        let roll = rng.below(1000);
        let step = match roll {
            0..=329 => Step::Append {
                producers: u8::try_from(rng.range(1, 3)).unwrap_or(1),
                records: u8::try_from(rng.range(1, 8)).unwrap_or(1),
            },
            330..=399 => Step::Read {
                from: match rng.below(4) {
                    0 => ReadFrom::Earliest,
                    1 => ReadFrom::Latest,
                    2 => ReadFrom::Offset(u16::try_from(rng.below(1100)).unwrap_or(0)),
                    _ => ReadFrom::Timestamp(u16::try_from(rng.below(1100)).unwrap_or(0)),
                },
                max: u16::try_from(rng.range(1, 200)).unwrap_or(1),
            },
            400..=419 => Step::LiveTail,
            420..=479 => Step::Export,
            480..=529 => Step::Retention,
            530..=554 => Step::TrimWarm,
            555..=589 => Step::Checkpoint,
            590..=679 => Step::Tick { ms: u32::try_from(rng.range(1, 40) * 25).unwrap_or(25) },
            680..=699 => Step::ClockJump { minutes: u32::try_from(rng.range(1, 120)).unwrap_or(1) },
            700..=729 => Step::CloseReopen,
            730..=769 => Step::Crash { power_cut: rng.chance(2, 3) },
            770..=779 => Step::LoseWal { clean: rng.chance(1, 2) },
            780..=787 => Step::LoseState { clean: rng.chance(1, 2) },
            788..=795 => Step::LoseDataDir { clean: rng.chance(1, 2) },
            796..=829 => Step::WarmOutage(rng.chance(1, 2)),
            830..=849 => Step::WarmWaitShort(rng.chance(1, 2)),
            850..=862 => Step::WarmFailover,
            863..=884 => Step::ColdErrors(if rng.chance(1, 2) {
                Some(u8::try_from(rng.range(1, 4)).unwrap_or(1))
            } else {
                None
            }),
            885..=894 => Step::ColdLatency(if rng.chance(1, 2) {
                u16::try_from(rng.range(1, 20)).unwrap_or(1)
            } else {
                0
            }),
            // Rare: on damaged WAL data the store may refuse to open, which ends the
            // schedule (see docs/simulation.md).
            895..=896 => Step::DamageSegment,
            897..=900 => Step::DamageCold,
            // Version 2: taken from `Heal`'s rolls, drawing no randomness (see `GENERATOR`);
            // version 3: with appends, sized from the roll.
            901..=905 if generator >= 3 => Step::LoseWalRunning {
                producers: u8::try_from(2 + (roll - 901) % 3).unwrap_or(2),
                records: u8::try_from(3 + 2 * (roll - 901)).unwrap_or(3),
            },
            901..=905 if generator >= 2 => Step::LoseWalRunning { producers: 0, records: 0 },
            // Version 4: taken from `Heal`'s rolls, drawing no randomness.
            906..=910 if generator >= 4 => Step::WalFsyncFails,
            // Version 6: taken from `Heal`'s rolls, drawing no randomness.
            921..=930 if generator >= 6 => {
                Step::PowerCutBeforeSeal { records: u8::try_from(1 + (roll - 921) % 5).unwrap_or(1) }
            }
            // Version 8: taken from `Heal`'s rolls where cold is deployed, drawing no
            // randomness (where cold is not, the roll stays a `Heal`).
            931..=936 if generator >= 8 && config.deployment.cold() => {
                Step::ColdAmbiguous { applied: true, every: u8::try_from(2 + (roll - 931) % 3).unwrap_or(2) }
            }
            937..=940 if generator >= 8 && config.deployment.cold() => {
                Step::ColdAmbiguous { applied: false, every: u8::try_from(2 + (roll - 937) % 3).unwrap_or(2) }
            }
            941..=945 if generator >= 8 && config.deployment.cold() => {
                Step::ColdListLag { lists: u8::try_from(1 + (roll - 941) % 3).unwrap_or(1) }
            }
            // Version 9: taken from `Heal`'s rolls where warm is deployed, drawing no
            // randomness (where warm is not, the roll stays a `Heal`).
            946..=951 if generator >= 9 && config.deployment.warm() => {
                Step::WarmAnswersLost { every: u8::try_from(2 + (roll - 946) % 3).unwrap_or(2) }
            }
            952..=957 if generator >= 9 && config.deployment.warm() => Step::WarmReconnect,
            958..=961 if generator >= 9 && config.deployment.warm() => {
                Step::WarmFailoverBehind { writes: u8::try_from(1 + (roll - 958) % 4).unwrap_or(1) }
            }
            // Version 10: taken from `Heal`'s rolls, drawing no randomness.
            962..=971 if generator >= 10 => {
                let i = usize::try_from(roll - 962).unwrap_or(0);
                Step::ClockBack { minutes: CLOCK_BACK_MINUTES[i % CLOCK_BACK_MINUTES.len()] }
            }
            // Version 12: taken from `Heal`'s rolls, drawing no randomness.
            972..=979 if generator >= 12 => {
                Step::Neighbour { records: u8::try_from(1 + (roll - 972)).unwrap_or(1) }
            }
            // Version 5: taken from `Heal`'s rolls where warm is deployed.
            911..=920 if generator >= 5 && config.deployment.warm() => {
                burst.extend(warm_outage_burst(rng));
                burst.pop_front().unwrap_or(Step::Heal)
            }
            _ => Step::Heal,
        };
        let fits = match step {
            Step::TrimWarm
            | Step::WarmOutage(_)
            | Step::WarmWaitShort(_)
            | Step::WarmFailover
            | Step::WarmAnswersLost { .. }
            | Step::WarmReconnect
            | Step::WarmFailoverBehind { .. } => config.deployment.warm(),
            Step::Export
            | Step::ColdErrors(_)
            | Step::ColdLatency(_)
            | Step::ColdAmbiguous { .. }
            | Step::ColdListLag { .. }
            | Step::DamageCold => config.deployment.cold(),
            // With the WAL alone nothing survives a lost data directory: there is nothing
            // to check afterwards but that the store opens empty.
            Step::LoseDataDir { .. } => config.deployment != Deployment::Hot,
            _ => true,
        };
        if fits {
            return step;
        }
    }
}

/// A warm-outage burst (generator 5): the faults that together reach the states a single
/// fault does not — offsets a degraded open skipped while warm may hold records the WAL
/// never stored, then a second fault before warm answers — each step one of its own:
///
/// 1. warm stops answering;
/// 2. half the time, the WAL's next fsync fails (under `degrade` warm may take the group
///    the WAL refuses);
/// 3. an append;
/// 4. a crash (a third of them with a power cut): the reopen finds warm down, so under
///    `degrade` it opens degraded (skipping what warm may hold), under `fail` it waits;
/// 5. an append;
/// 6. a second fault: a crash, a clean restart, the state directory or the WAL directory
///    lost;
/// 7. half the time, the state directory lost as well (when 6 did not lose it);
/// 8. warm answers again;
/// 9. a read from the start, through whatever warm and the other tiers now hold.
fn warm_outage_burst(rng: &mut Rng) -> Vec<Step> {
    let append = |rng: &mut Rng| Step::Append {
        producers: u8::try_from(rng.range(1, 3)).unwrap_or(1),
        records: u8::try_from(rng.range(1, 8)).unwrap_or(1),
    };
    let mut steps = vec![Step::WarmOutage(true)];
    if rng.chance(1, 2) {
        steps.push(Step::WalFsyncFails);
    }
    steps.push(append(rng));
    steps.push(Step::Crash { power_cut: rng.chance(1, 3) });
    steps.push(append(rng));
    let second = match rng.below(4) {
        0 => Step::Crash { power_cut: rng.chance(1, 3) },
        1 => Step::CloseReopen,
        2 => Step::LoseState { clean: rng.chance(1, 2) },
        _ => Step::LoseWal { clean: rng.chance(1, 2) },
    };
    steps.push(second);
    if !matches!(second, Step::LoseState { .. }) && rng.chance(1, 2) {
        steps.push(Step::LoseState { clean: rng.chance(1, 2) });
    }
    steps.push(Step::WarmOutage(false));
    steps.push(Step::Read { from: ReadFrom::Earliest, max: 200 });
    steps
}
