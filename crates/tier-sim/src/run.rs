//! Running one schedule: the world (directories, bucket, warm stand-in, the current
//! simulated process), the steps, and the checks after each step. See
//! `docs/simulation.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use tier_core::clock::{Clock, ManualClock};
use tier_core::segment::SegmentHeader;
use tier_core::{ErrorKind, Offset, OffsetRange, StartPosition, Tier, TierError, TopicName};
use tier_hot::HotConfig;
use tier_router::{NewRecord, RouterConfig, TieredStore, Topic, WarmFailurePolicy};
use tokio::runtime::Runtime;

use crate::cold::{self, Bucket};
use crate::disk::{self, Disk};
use crate::model::{Model, Rec, Violation, inv, lossy};
use crate::rng::{Rng, step_seed};
use crate::schedule::{ColdShape, ReadFrom, Schedule, Step};
use crate::warm::SimWarm;

/// What a power cut at some moment keeps: each WAL file's durable length and each
/// directory's durable listing.
type Durable = (std::collections::HashMap<PathBuf, u64>, Vec<tier_hot::faults::DirListings>);

/// [`Durable`] as of now, for the WAL's directory `hot_dir` and the router's
/// `state_dir`.
fn durable_state(hot_dir: &std::path::Path, state_dir: &std::path::Path) -> Durable {
    let listings = [hot_dir, state_dir].into_iter().map(tier_hot::faults::dir_listings).collect();
    (tier_hot::faults::durable_lengths(hot_dir), listings)
}

/// Where every schedule's wall clock starts (2096-10-02), far from the real time, so that
/// a time read from the system clock instead of the injected one shows.
pub fn sim_epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000)
}

/// The topic every schedule writes.
pub const TOPIC: &str = "t";
/// The second topic of generator 13's schedules ([`SimConfig::second_topic`](crate::schedule::SimConfig::second_topic)).
pub const SECOND_TOPIC: &str = "u";
/// Simulated time a step may take before it counts as hung.
const STEP_LIMIT: Duration = Duration::from_secs(3600);

/// Real time a step may take. A task that never waits (a busy loop) keeps the paused
/// clock from advancing, so [`STEP_LIMIT`] alone would never fire and the run would hang;
/// a step takes milliseconds of real time, so this fires only on such a loop.
const REAL_STEP_LIMIT: Duration = Duration::from_secs(120);

/// `fut`'s output, or `None` once [`REAL_STEP_LIMIT`] of real time passed: the thread's
/// watchdog wakes the runtime then (the busy task yields to it at its cooperative budget).
/// A call inside another is covered by the outer one's limit.
async fn within_real_time<T>(fut: impl Future<Output = T>) -> Option<T> {
    let Some(armed) = Watchdog::arm() else { return Some(fut.await) };
    let out = tokio::select! {
        biased;
        out = fut => Some(out),
        _ = armed.expiry => None,
    };
    drop(armed.guard);
    out
}

/// One thread per simulation thread that times the steps in real time (a thread per step
/// would cost a thread's creation and exit every step).
struct Watchdog {
    orders: std::sync::mpsc::Sender<Order>,
    armed: std::cell::Cell<bool>,
}

enum Order {
    /// Time a step: tell the sender if it is not disarmed within [`REAL_STEP_LIMIT`].
    Arm(tokio::sync::oneshot::Sender<()>),
    Disarm,
}

/// An armed watchdog: its expiry, and the guard that disarms it when dropped.
struct Armed {
    expiry: tokio::sync::oneshot::Receiver<()>,
    guard: Disarm,
}

struct Disarm;

impl Drop for Disarm {
    fn drop(&mut self) {
        WATCHDOG.with(|w| {
            w.armed.set(false);
            let _ = w.orders.send(Order::Disarm);
        });
    }
}

thread_local! {
    static WATCHDOG: Watchdog = Watchdog::start();
}

impl Watchdog {
    fn start() -> Watchdog {
        let (orders, rx) = std::sync::mpsc::channel::<Order>();
        std::thread::spawn(move || {
            while let Ok(order) = rx.recv() {
                let Order::Arm(expired) = order else { continue };
                match rx.recv_timeout(REAL_STEP_LIMIT) {
                    Ok(_) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        let _ = expired.send(());
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        Watchdog { orders, armed: std::cell::Cell::new(false) }
    }

    /// Arms this thread's watchdog; `None` when it is armed already (a nested call).
    fn arm() -> Option<Armed> {
        WATCHDOG.with(|w| {
            if w.armed.replace(true) {
                return None;
            }
            let (expired, expiry) = tokio::sync::oneshot::channel();
            let _ = w.orders.send(Order::Arm(expired));
            Some(Armed { expiry, guard: Disarm })
        })
    }
}

/// Simulated time a reader may wait for its next record inside the committed range.
const READ_WAIT: Duration = Duration::from_secs(120);
/// A full check (read everything from the earliest offset) every this many steps.
pub const FULL_CHECK_EVERY: usize = 20;
/// Timestamps start here (milliseconds since the epoch).
const BASE_TS: i64 = 1_700_000_000_000;
/// Export/retention rounds allowed once the faults stop.
const LIVENESS_ROUNDS: usize = 4;

/// Counters of one or many runs.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Schedules run.
    pub schedules: u64,
    /// Steps run.
    pub steps: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Acknowledged records checked by full checks.
    pub checked: u64,
    /// Acknowledged records.
    pub acked: u64,
    /// Schedules that ended early because the store refused to open over damaged data.
    pub ended_on_damage: u64,
    /// Warm's owner epochs at work, by kind ([`SimWarm::owner_events`](crate::warm::SimWarm::owner_events)).
    pub owner_events: BTreeMap<&'static str, u64>,
}

impl Stats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Stats) {
        self.schedules += other.schedules;
        self.steps += other.steps;
        for (k, v) in &other.faults {
            *self.faults.entry(k).or_default() += v;
        }
        self.checked += other.checked;
        self.acked += other.acked;
        self.ended_on_damage += other.ended_on_damage;
        for (k, v) in &other.owner_events {
            *self.owner_events.entry(k).or_default() += v;
        }
    }
}

/// The result of one schedule.
#[derive(Debug)]
pub struct Outcome {
    /// The violations found (empty: the run passed).
    pub violations: Vec<Violation>,
    /// Counters.
    pub stats: Stats,
    /// A hash of everything observed, to check that a replay is exact.
    pub trace: u64,
    /// The step log (verbose runs only).
    pub log: Vec<String>,
}

/// One simulated process: its runtime (dropping it is the crash), the store, the topic.
struct Proc {
    /// Simulated time when the process started.
    started: tokio::time::Instant,
    rt: Runtime,
    store: TieredStore,
    topic: Topic,
}

/// Threads the simulation's runtimes started (blocking-pool threads), process-wide.
static THREADS_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many threads the simulation's runtimes have started in this process. None should:
/// a simulated process runs on its thread alone, its blocking jobs
/// [deferred](tier_core::blocking::defer_jobs_here) until every task is idle, so that no
/// step depends on when another thread ran.
pub fn threads_started() -> u64 {
    THREADS_STARTED.load(std::sync::atomic::Ordering::SeqCst)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        // The blocking jobs this thread queued run once every task is idle, before
        // simulated time moves.
        .on_thread_park(tier_core::blocking::on_park)
        .on_thread_start(|| {
            THREADS_STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .build()
        .expect("a current-thread runtime builds")
}

/// What a read observed, processed against the model afterwards.
enum Obs {
    Served(Offset, Bytes),
    Error(Option<Offset>, TierError),
    NotDense(Offset, Offset),
    Stalled(Option<Offset>),
}

/// What the tiers hold now, as the simulation sees it (not through the fault wrappers).
struct View {
    hot: OffsetRange,
    hot_gaps: Vec<OffsetRange>,
    /// Cold's range and the offsets inside it no object holds (recorded gaps, holes).
    cold: Option<(OffsetRange, Vec<OffsetRange>)>,
}

/// What the simulation knows of the second topic: the records appended to it (whatever
/// the answer) and the end of the offsets it handed out. Checked for isolation — it
/// serves only its own records, densely; the first topic's model never sees its
/// records — not for durability.
#[derive(Default)]
struct Side {
    appended: std::collections::HashSet<Bytes>,
    handed_out: Offset,
}

struct World<'a> {
    schedule: &'a Schedule,
    side: Side,
    root: tempfile::TempDir,
    data_dir: PathBuf,
    hot_dir: PathBuf,
    state_dir: PathBuf,
    topic_name: TopicName,
    bucket: Bucket,
    warm: Arc<SimWarm>,
    disk: Disk,
    proc: Option<Proc>,
    model: Model,
    stats: Stats,
    trace: DefaultHasher,
    log: Option<Vec<String>>,
    clock_minutes: u64,
    ts: i64,
    seq: u64,
    /// OS boots so far: a power cut restarts the machine, a crash does not (the router
    /// trusts a WAL written under `never`/`interval` only within the boot it was written in).
    boots: u64,
    header_len: u64,
    /// The store's wall clock ([`StoreBuilder::clock`](tier_router::StoreBuilder::clock)):
    /// moved only by the schedule's clock steps.
    clock: Arc<ManualClock>,
    /// The latest time `clock` has shown: retention at the end runs past every seal time
    /// even after the clock went back.
    wall_high: SystemTime,
    step: Option<u32>,
    cold_errors: bool,
    damaged: bool,
    /// A WAL segment was damaged: what the store should then do with it (export it,
    /// skip it, wedge) is not fixed, so the liveness checks are left out.
    wal_damaged: bool,
    /// The WAL segment files the schedule damaged: a topic refused as damaged must name
    /// one of them (or a cold object, after cold damage) — not a file a power cut left.
    damaged_files: Vec<PathBuf>,
    ended: Option<String>,
    max_hwm: Offset,
    /// The open process's topic is fenced (its acknowledged end unknown) and the
    /// simulated operator's `resume_topic` has not succeeded yet.
    resume_pending: bool,
    /// An injected WAL fsync failure fired since the store last opened: the WAL's writer
    /// fails every append until the next open.
    wal_failed: bool,
    /// The WAL's directory / the state directory was lost since an open last recorded
    /// the skipped offsets in both (see `Model::skipped_forgotten`).
    lost_since_open: (bool, bool),
    /// The state directory was lost since a failover to a replica behind took warm's
    /// confirmed topic marker ([`SimWarm::confirmed_marker_lost`]) and no open has
    /// succeeded since.
    state_lost_without_marker: bool,
    /// (offset, payload) of the acknowledged records whose every copy, and the evidence
    /// that their offsets were handed out, such a double fault took (see
    /// [`World::lost_with_the_marker`]).
    lost_with_marker: std::collections::BTreeSet<(Offset, Bytes)>,
    /// `model.wal_destroyed.len()` when the store last opened.
    open_epoch: usize,
    /// Writes warm's owner check refused so far ([`SimWarm::owner_events`]).
    fenced_seen: u64,
}

/// Runs `schedule` and checks the model after every step. `verbose` keeps a log of every
/// step and what it observed.
pub fn run(schedule: &Schedule, verbose: bool) -> Outcome {
    run_reverting::<Revert>(schedule, verbose, &[])
}

/// A repaired behaviour [`run_reverting`] puts back (`sim-runner --revert`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revert {
    /// A behaviour of the WAL ([`tier_hot::faults::Revert`]).
    Hot(tier_hot::faults::Revert),
    /// The warm stand-in's identical retry confirms with `WAIT` alone, with no write of
    /// its own before it (tier-warm's `confirm_held` without its `SET`): on a fresh
    /// connection that `WAIT` is met at once, whatever the replica holds.
    WarmWaitAlone,
    /// The warm stand-in's appends ignore the topic's next key (tier-warm's append
    /// without its conditional check): a stream that holds nothing takes any base at or
    /// past its end, so one a failover emptied takes a batch past the batches it lost.
    WarmIgnoresNext,
    /// A store opens on its state directory without locking it or checking its `owner`
    /// (`tier_router::testing::Repair::StateDirOfOneStore`): a store beside it
    /// ([`Step::Neighbour`]) overwrites its checkpoints and reservations.
    SharedStateDir,
    /// A repaired recovery behaviour of the router ([`tier_router::testing::Repair`]).
    Router(tier_router::testing::Repair),
}

impl From<tier_hot::faults::Revert> for Revert {
    fn from(behaviour: tier_hot::faults::Revert) -> Self {
        Self::Hot(behaviour)
    }
}

/// [`run`] with repaired behaviours put back ([`Revert`]: the WAL's,
/// [`tier_hot::faults::Revert`], or the warm stand-in's protocol): how a test shows that
/// the simulation finds the bug each repair removed.
pub fn run_reverting<R: Copy + Into<Revert>>(schedule: &Schedule, verbose: bool, reverts: &[R]) -> Outcome {
    let base = if std::path::Path::new("/dev/shm").is_dir() { Some("/dev/shm") } else { None };
    let root = match base {
        Some(b) => tempfile::Builder::new().prefix("tier-sim-").tempdir_in(b),
        None => tempfile::Builder::new().prefix("tier-sim-").tempdir(),
    }
    .expect("a temporary directory for the simulated disk");
    let data_dir = root.path().join("data");
    let topic_name = TopicName::new(TOPIC).expect("a valid topic name");
    let header_len = SegmentHeader::new(topic_name.clone(), 0, 0).encoded_len() as u64;
    // The store's clock starts at a fixed time, whatever the real one: a sealed segment
    // found on disk at open keeps the seal time the clock gave it (the seal sets it as the
    // file's modification time).
    let start = sim_epoch();
    let disk = Disk::new(schedule.config.cuts, vec![data_dir.join("router")]);
    let mut world = World {
        schedule,
        side: Side::default(),
        hot_dir: data_dir.join("hot"),
        state_dir: data_dir.join("router"),
        data_dir,
        root,
        topic_name,
        bucket: Bucket::new(),
        warm: Arc::new(SimWarm::new()),
        disk,
        proc: None,
        model: Model::default(),
        stats: Stats { schedules: 1, ..Stats::default() },
        trace: DefaultHasher::new(),
        log: verbose.then(Vec::new),
        clock_minutes: 0,
        ts: 0,
        seq: 0,
        boots: 0,
        header_len,
        clock: Arc::new(ManualClock::new(start)),
        wall_high: start,
        step: None,
        cold_errors: false,
        damaged: false,
        wal_damaged: false,
        damaged_files: Vec::new(),
        ended: None,
        max_hwm: 0,
        resume_pending: false,
        wal_failed: false,
        lost_since_open: (false, false),
        state_lost_without_marker: false,
        lost_with_marker: std::collections::BTreeSet::new(),
        open_epoch: 0,
        fenced_seen: 0,
    };
    world.warm.set_group_script(schedule.config.warm_group_script);
    world.warm.set_owner_epochs(schedule.config.warm_owner_epochs);
    world.disk.track(&world.hot_dir);
    tier_core::blocking::defer_jobs_here(true);
    for behaviour in reverts {
        match (*behaviour).into() {
            Revert::Hot(behaviour) => tier_hot::faults::revert(&world.hot_dir, behaviour),
            Revert::WarmWaitAlone => world.warm.set_wait_alone(true),
            Revert::WarmIgnoresNext => world.warm.set_ignore_next(true),
            Revert::SharedStateDir => {
                tier_router::testing::revert(
                    &world.state_dir,
                    tier_router::testing::Repair::StateDirOfOneStore,
                );
            }
            Revert::Router(repair) => tier_router::testing::revert(&world.state_dir, repair),
        }
    }
    world.run_all();
    tier_core::blocking::run_deferred();
    tier_core::blocking::defer_jobs_here(false);
    tier_router::testing::restore(&world.state_dir);
    world.disk.untrack(&world.hot_dir);
    tier_hot::faults::clear(&world.hot_dir);
    tier_hot::faults::restore(&world.hot_dir);
    // Forget the pages failed fsyncs lost (the files go with the temporary directory).
    let _ = tier_hot::faults::drop_page_cache(&world.hot_dir);
    world.stats.checked = world.model.checked;
    world.stats.acked = world.model.acked.len() as u64;
    for (kind, n) in world.warm.owner_events() {
        *world.stats.owner_events.entry(kind).or_default() += n;
    }
    Outcome {
        violations: std::mem::take(&mut world.model.violations),
        stats: world.stats.clone(),
        trace: world.trace.finish(),
        log: world.log.take().unwrap_or_default(),
    }
}

impl World<'_> {
    fn note(&mut self, what: impl AsRef<str>) {
        // Paths name the run's temporary directory: leave it out of the trace.
        let root = self.root.path().to_string_lossy().into_owned();
        let line = what.as_ref().replace(&root, "<disk>");
        line.hash(&mut self.trace);
        if let Some(log) = &mut self.log {
            log.push(line);
        }
    }

    fn violate(&mut self, invariant: &'static str, detail: String) {
        let root = self.root.path().to_string_lossy().into_owned();
        let detail = detail.replace(&root, "<disk>");
        self.note(format!("VIOLATION {invariant}: {detail}"));
        self.model.violate(invariant, detail, self.step);
    }

    /// True when the WAL's writer failed (an injected fsync failure fired) since the
    /// store last opened: a refusal then has an unknown outcome. When the failure is first
    /// seen, what the WAL says it wrote but could not make durable is kept for the model
    /// (a refused record served there was in the file).
    fn wal_failing(&mut self) -> bool {
        if !self.wal_failed && self.fsync_fired() {
            self.wal_failed = true;
            self.fsync_lost_pages();
            let unsynced =
                self.on_proc(async |store: &TieredStore, topic: &Topic| store.wal().unsynced(topic.name()));
            if let Some(Some(range)) = unsynced {
                self.note(format!("  the WAL's fsync failed: {range} written, not durable"));
                self.model.unsynced.push(range);
            }
        }
        self.wal_failed
    }

    /// Under generator 7 a failed fsync lost the pages it could not write: every byte the
    /// WAL wrote since its last successful fsync, acknowledged records among them under
    /// `interval` (over-approximated as every WAL copy, as for a power cut).
    fn fsync_lost_pages(&mut self) {
        if self.schedule.config.fsync_loses_pages {
            self.model.destroy_wal(OffsetRange::new(0, Offset::MAX), false, 0);
        }
    }

    /// True when the armed WAL fsync failure (`WalFsyncFails`) has fired.
    fn fsync_fired(&self) -> bool {
        tier_hot::faults::fired(&self.hot_dir, tier_hot::faults::FaultPoint::Fsync) > 0
    }

    fn transient_faults(&self) -> bool {
        self.warm.faulty() || self.cold_errors
    }

    fn sim_now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Retention at `now` deleted `deleted`: with the size limit out of reach (10 GiB),
    /// only by age, so each was sealed at least the retention time before `now` — never
    /// after it, whichever way the clock went.
    fn check_ages(&mut self, now: SystemTime, deleted: &[tier_hot::SegmentInfo]) {
        let cfg = &self.schedule.config;
        if cfg.retention_bytes < 1 << 30 {
            return;
        }
        let retention = cfg.retention_time;
        for info in deleted {
            if now.duration_since(info.sealed_at).is_ok_and(|age| age >= retention) {
                continue;
            }
            let detail = format!(
                "segment {} sealed at {:?}, deleted at {now:?} with a retention time of {retention:?}",
                info.range, info.sealed_at
            );
            self.violate(inv::YOUNG_DELETED, detail);
        }
    }

    /// One store writes the topic, so warm's owner check never has cause to refuse it: a
    /// refusal means the store wrote under an earlier epoch than a claim of its own.
    fn check_not_self_fenced(&mut self) {
        let [_, _, (_, fenced)] = self.warm.owner_events();
        if fenced > self.fenced_seen {
            self.fenced_seen = fenced;
            self.violate(
                inv::SELF_FENCED,
                format!("warm refused a write of the store's under an owner epoch older than its own latest claim ({fenced} so far)"),
            );
        }
    }

    fn run_all(&mut self) {
        let steps = self.schedule.steps.clone();
        for (index, step) in &steps {
            if self.ended.is_some() {
                break;
            }
            self.step = Some(*index);
            self.stats.steps += 1;
            if let Some(kind) = step.fault_kind() {
                *self.stats.faults.entry(kind).or_default() += 1;
            }
            self.note(format!("step {index}: {step:?}"));
            let mut rng = Rng::new(step_seed(self.schedule.seed, u64::from(*index)));
            self.run_step(*step, &mut rng);
            self.check_not_self_fenced();
            // By generation index, not position: dropping other steps while shrinking
            // does not move the full checks of the steps kept.
            self.after_step((*index as usize + 1).is_multiple_of(FULL_CHECK_EVERY));
        }
        self.step = None;
        if self.ended.is_none() {
            self.final_checks();
        }
        self.close();
        *self.stats.faults.entry("cold request failures").or_default() += self.bucket.faulty.injected();
    }

    // ---- the simulated process ----------------------------------------------------------

    async fn open_store(&self) -> Result<(TieredStore, Topic), TierError> {
        let cfg = &self.schedule.config;
        let mut hot = HotConfig::new(&self.hot_dir).with_fsync(cfg.fsync);
        hot.segment_bytes = cfg.segment_bytes;
        hot.segment_age = cfg.segment_age;
        hot.retention_time = cfg.retention_time;
        hot.retention_bytes = cfg.retention_bytes;
        hot.cache_bytes = 64 << 10;
        let year = Duration::from_secs(365 * 24 * 3600);
        let mut router = RouterConfig::default();
        router.warm_failure_policy = cfg.policy;
        router.max_cached_closed_segments = cfg.keep_segments;
        router.export_sweep_interval = year;
        router.retention_interval = year;
        router.warm_retry_interval = cfg.warm_retry;
        let mut builder = TieredStore::builder()
            .hot(hot)
            .router(router)
            .topics([self.topic_name.clone()])
            .background(cfg.background)
            .boot_id(format!("sim-boot-{}", self.boots))
            .clock(Arc::clone(&self.clock));
        if cfg.deployment.warm() {
            // A new process: its warm client has seen no next key yet.
            self.warm.new_client();
            builder = builder.warm(Arc::clone(&self.warm) as Arc<dyn tier_router::WarmBackend>);
        }
        if cfg.deployment.cold() {
            let tier = self.bucket.tier()?;
            builder = match cfg.cold_shape {
                ColdShape::Tier => builder.cold(Arc::new(tier)),
                // The shape of a custom tier with nothing better: reads paged through
                // `Tier::read_batches` (regression seed 30899 guards this shape).
                ColdShape::Defaults => builder.cold(Arc::new(tier_router::PagedCold(Arc::new(tier)))),
            };
        }
        let store = builder.open().await?;
        let topic = store.topic(TOPIC).await?;
        Ok((store, topic))
    }

    /// Opens the store if no process runs. `false` when it stays closed (a tier it needs
    /// is down, or the schedule ended).
    fn ensure_open(&mut self) -> bool {
        if self.proc.is_some() {
            if self.resume_pending {
                self.resume();
            }
            return true;
        }
        if self.ended.is_some() {
            return false;
        }
        // Whether the armed WAL fsync failure fired before this open (in an earlier
        // process, or an open that failed).
        let fired_before = self.fsync_fired();
        let rt = runtime();
        let opened = rt.block_on(async {
            within_real_time(async {
                let opened = tokio::time::timeout(STEP_LIMIT, self.open_store()).await;
                // Let what opening started in the background (seals, the exporter's first
                // sweep) finish before the next step: see `on_proc`.
                tokio::time::sleep(Duration::from_millis(1)).await;
                opened
            })
            .await
        });
        match opened {
            Some(Ok(Ok((store, topic)))) => {
                let mut reports = rt.block_on(store.recovery_reports());
                // The second topic is recovered when first used, and checked on its own.
                reports.retain(|r| r.topic.as_str() == TOPIC);
                // Recovery recorded the skipped offsets in both directories again — unless
                // the topic's end is unknown (it records nothing until the resume).
                if !reports.iter().any(|r| r.end_unknown) {
                    self.lost_since_open = (false, false);
                }
                for r in &reports {
                    for range in r.lost.iter().chain(&r.maybe_lost) {
                        self.model.report(*range);
                    }
                    if let Some(skipped) = r.skipped {
                        self.forget_lost_in_skip(skipped);
                        self.model.skip(skipped, self.step);
                    }
                    self.note(format!(
                        "opened: hot {} warm {:?} cold {:?} next {} lost {:?} maybe lost {:?}{}",
                        r.hot,
                        r.warm,
                        r.cold,
                        r.next_offset,
                        r.lost,
                        r.maybe_lost,
                        r.skipped.map(|s| format!(" skipped {s}")).unwrap_or_default()
                    ));
                }
                let started = rt.block_on(async { tokio::time::Instant::now() });
                self.proc = Some(Proc { started, rt, store, topic });
                self.state_lost_without_marker = false;
                self.open_epoch = self.model.wal_destroyed.len();
                // A WAL fsync failure that fired before this open is spent: the reopened
                // WAL's writer is new. One that fired during it (the timer's fsync under
                // `interval` after a replay's writes) failed the new writer.
                self.wal_failed = false;
                if self.fsync_fired() && !fired_before {
                    self.wal_failing();
                }
                if self.fsync_fired() {
                    tier_hot::faults::clear(&self.hot_dir);
                }
                self.resume_pending = reports.iter().any(|r| r.end_unknown);
                if self.resume_pending {
                    self.resume();
                }
                true
            }
            Some(Ok(Err(e))) => {
                drop(rt);
                if e.kind() == ErrorKind::Unavailable && (self.transient_faults() || self.fsync_fired()) {
                    self.note(format!("open refused while a tier is down: {e}"));
                } else if e.kind() == ErrorKind::Corruption && e.context().location.is_some() {
                    if self.damage_explains(e.context().location.as_deref().unwrap_or_default()) {
                        self.note(format!("open refused over damaged data: {e}"));
                        self.stats.ended_on_damage = 1;
                    } else {
                        // No damage was injected there: a power cut, a lost directory or
                        // a crash left the topic in a state its recovery refuses.
                        self.violate(inv::REFUSED_UNDAMAGED, e.report().to_string());
                    }
                    self.ended = Some(e.to_string());
                } else {
                    self.violate(inv::OPEN_FAILED, e.report().to_string());
                    self.ended = Some(e.to_string());
                }
                false
            }
            Some(Err(_)) | None => {
                drop(rt);
                self.violate(inv::HUNG, "opening the store did not finish".into());
                self.ended = Some("open hung".into());
                false
            }
        }
    }

    /// True when the schedule damaged what `location` (of a `Corruption` refusing the
    /// topic) names: a WAL segment it flipped a byte of, or — after damage to a cold
    /// object or to a WAL segment (exported as it is) — anything outside the WAL.
    fn damage_explains(&self, location: &str) -> bool {
        let hot = self.hot_dir.to_string_lossy();
        if location.starts_with(hot.as_ref()) {
            let file = location.rsplit_once('@').map_or(location, |(file, _)| file);
            self.damaged_files.iter().any(|p| p.to_string_lossy() == file)
        } else {
            self.damaged
        }
    }

    /// The operator's decision when nothing bounds the acknowledged end (the WAL and the
    /// state directory lost): resume past every offset ever handed out, as an operator
    /// with the producers' acknowledgements would. `resume_topic` records the skipped
    /// offsets before it lifts the fence, so while a tier it needs fails (cold refusing the
    /// gap marker's PUT) it answers `Unavailable` and the topic stays fenced: the
    /// operator runs it again at the next step (`tierlog recover --resume-at` again).
    fn resume(&mut self) {
        let handed_out = self.model.seen.keys().max().map_or(0, |o| o + 1);
        let result = self.on_proc(async |store: &TieredStore, _: &Topic| {
            let reports = store.recovery_reports().await;
            let Some(r) = reports.iter().find(|r| r.end_unknown && r.topic.as_str() == TOPIC) else {
                return Ok(None);
            };
            let at = r.next_offset.max(handed_out);
            store.resume_topic(TOPIC, at).await.map(|resumed| Some((at, resumed))).map_err(|e| (at, e))
        });
        match result {
            None => {}
            Some(Ok(None)) => self.resume_pending = false,
            Some(Ok(Some((at, resumed)))) => {
                self.resume_pending = false;
                for range in &resumed.maybe_lost {
                    self.model.report(*range);
                }
                self.note(format!("  resumed at {at} (end unknown): maybe lost {:?}", resumed.maybe_lost));
            }
            Some(Err((at, e))) if e.kind() == ErrorKind::Unavailable && self.transient_faults() => {
                self.note(format!(
                    "  resuming at {at} refused while a tier is down (retried next step): {e}"
                ));
            }
            // The armed WAL fsync failure fired since the open (the timer's fsync after a
            // replay): the WAL's writer refuses every write until the store reopens, the
            // resume's skip included; the operator resumes after the next reopen.
            Some(Err((at, e))) if e.kind() == ErrorKind::Unavailable && self.wal_failing() => {
                self.note(format!(
                    "  resuming at {at} refused: the WAL's writer failed (retried after a reopen): {e}"
                ));
            }
            Some(Err((at, e))) => {
                self.resume_pending = false;
                self.violate(inv::OPEN_FAILED, format!("resuming at {at}: {e}"));
            }
        }
    }

    /// Runs `f` on the current process's runtime (with a step time limit), then lets
    /// simulated time pass by 1 ms, which tokio does only once every task and blocking
    /// job is idle: the step's background effects (seal fsyncs, exports) are done.
    fn on_proc<T>(&mut self, f: impl AsyncFnOnce(&TieredStore, &Topic) -> T) -> Option<T> {
        let proc = self.proc.as_ref()?;
        let out = proc.rt.block_on(async {
            // The 1 ms is inside the watchdog: a task that never lets the runtime idle
            // stops simulated time, so the sleep would never end.
            within_real_time(async {
                let out = tokio::time::timeout(STEP_LIMIT, f(&proc.store, &proc.topic)).await;
                tokio::time::sleep(Duration::from_millis(1)).await;
                out
            })
            .await
        });
        match out {
            Some(Ok(v)) => Some(v),
            hung => {
                let why = match hung {
                    None => {
                        format!("a step spun for {REAL_STEP_LIMIT:?} of real time without letting time pass")
                    }
                    _ => "a step did not finish within an hour of simulated time".to_owned(),
                };
                self.violate(inv::HUNG, why);
                self.crash();
                self.ended = Some("hung".into());
                None
            }
        }
    }

    /// The process dies: its runtime is dropped (every task stops where it is), then
    /// its handles.
    fn crash(&mut self) {
        // A WAL fsync that failed since the open with no append refused to show it (the
        // `interval` timer's, or a clean close's) lost its pages all the same.
        if self.proc.is_some() && !self.wal_failed && self.fsync_fired() {
            self.wal_failed = true;
            self.note("  a WAL fsync failed before the process ended");
            self.fsync_lost_pages();
        }
        if let Some(Proc { rt, store, topic, .. }) = self.proc.take() {
            // An offset reservation written ahead runs on the blocking pool: whether it
            // reached the file before the runtime stops would depend on when a blocking
            // thread ran, and a replay would differ. The crash comes once they are done
            // (a crash in the middle of one leaves the earlier reservation, which covers
            // every acknowledged offset, as before it started).
            store.wait_for_state_writes();
            // The blocking jobs still queued are taken to have started: they finish, as
            // a dropped runtime waits for its running blocking jobs.
            tier_core::blocking::run_deferred();
            drop(rt);
            drop(topic);
            drop(store);
        }
    }

    fn close(&mut self) {
        if self.proc.is_some() {
            self.on_proc(async |store: &TieredStore, _: &Topic| store.close().await);
            self.crash();
            // A clean close fsyncs everything: all of it is durable.
            self.disk.settle(&self.hot_dir);
        }
    }

    fn remove(&mut self, dir: &std::path::Path) {
        // Pages a failed fsync lost in the files going away are forgotten, so that they
        // never zero a file created later at the same path (the files are gone: zeroing
        // them first is harmless; under a running store, which maps its files, it waits
        // for the removal after the close).
        if self.proc.is_none() {
            let _ = tier_hot::faults::drop_page_cache(dir);
        }
        if let Err(e) = std::fs::remove_dir_all(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            self.note(format!("removing {} failed: {e}", dir.display()));
        }
        self.disk.forget(dir);
        // A lost directory never comes back: what its directories held is not what
        // their last fsyncs left any more.
        for tracked in [&self.hot_dir, &self.state_dir] {
            if tracked.starts_with(dir) {
                self.disk.retrack_dirs(tracked);
            }
        }
        // The durable lengths recorded for its segment files go with them: a file created
        // later at the same path is a new inode no fsync has covered, and a power cut
        // keeps nothing of it that the old file's fsyncs made durable.
        if self.hot_dir.starts_with(dir) {
            tier_hot::faults::track_durability(&self.hot_dir);
        }
    }

    // ---- steps -----------------------------------------------------------------------

    fn records(&mut self, n: u8, rng: &mut Rng) -> Vec<Rec> {
        (0..n)
            .map(|_| {
                self.seq += 1;
                self.ts += 1;
                let pad = usize::try_from(rng.range(0, 48)).unwrap_or(0);
                let payload = Bytes::from(format!("r{:06}{}", self.seq, "x".repeat(pad)));
                Rec { payload, timestamp: BASE_TS + (self.clock_minutes * 60_000) as i64 + self.ts }
            })
            .collect()
    }

    fn run_step(&mut self, step: Step, rng: &mut Rng) {
        match step {
            Step::Append { producers, records } => {
                if !self.ensure_open() {
                    return;
                }
                self.append(producers, records, false, rng);
                if self.schedule.config.second_topic {
                    self.append_side(records, rng);
                }
            }
            Step::Read { from, max } => {
                if !self.ensure_open() {
                    return;
                }
                self.read(from, usize::from(max));
            }
            Step::LiveTail => {
                if !self.ensure_open() {
                    return;
                }
                let recs = self.records(1, rng);
                let rec = recs[0].clone();
                let got = self.on_proc(async |_: &TieredStore, topic: &Topic| {
                    let mut reader = match topic.reader_with_source(StartPosition::Latest).await {
                        Ok(r) => r,
                        Err(e) => return (None, Some(Err(e))),
                    };
                    let ack = topic.append(vec![NewRecord::new(rec.timestamp, rec.payload.clone())]).await;
                    let next = match tokio::time::timeout(Duration::from_secs(10), reader.next()).await {
                        Ok(Some(item)) => Some(item.map(|(_, r)| r)),
                        _ => None,
                    };
                    (Some(ack), next)
                });
                let Some((ack, next)) = got else { return };
                match ack {
                    Some(Ok(range)) => {
                        self.ack(range, &recs, self.step);
                        match next {
                            Some(Ok(r)) => self.served(r.offset, r.payload),
                            _ if self.transient_faults() => {}
                            other => self.violate(
                                inv::LIVE_TAIL,
                                format!(
                                    "appended at {range}, the tail gave {:?}",
                                    other.map(|r| r.map(|r| r.offset))
                                ),
                            ),
                        }
                    }
                    Some(Err(_)) => {
                        let wal_failing = self.wal_failing();
                        self.model.refuse(&recs, wal_failing);
                        if let Some(Ok(r)) = next {
                            self.served(r.offset, r.payload);
                        }
                    }
                    None => {}
                }
            }
            Step::Export => {
                if !self.ensure_open() {
                    return;
                }
                let r = self.on_proc(async |store: &TieredStore, _: &Topic| store.export_now(TOPIC).await);
                if let Some(r) = r {
                    self.note(format!("  export: {:?}", r.map(|v| v.len()).map_err(|e| e.to_string())));
                }
            }
            Step::Retention => {
                if !self.ensure_open() {
                    return;
                }
                let now = self.sim_now();
                let r =
                    self.on_proc(async |store: &TieredStore, _: &Topic| store.run_retention_now(now).await);
                if let Some(r) = r {
                    self.note(format!("  retention: {:?}", r.as_ref().map(Vec::len).map_err(|e| e.kind())));
                    self.check_ages(now, r.as_deref().unwrap_or_default());
                }
            }
            Step::TrimWarm => {
                if !self.ensure_open() {
                    return;
                }
                let r = self.on_proc(async |store: &TieredStore, _: &Topic| store.trim_warm_now().await);
                if let Some(r) = r {
                    self.note(format!("  trim: {:?}", r.map_err(|e| e.kind())));
                }
            }
            Step::Checkpoint => {
                if !self.ensure_open() {
                    return;
                }
                self.on_proc(async |store: &TieredStore, _: &Topic| store.checkpoint().await);
            }
            Step::Tick { ms } => {
                if !self.ensure_open() {
                    return;
                }
                self.on_proc(async |_: &TieredStore, _: &Topic| {
                    tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
                });
            }
            Step::ClockJump { minutes } => {
                self.clock_minutes += u64::from(minutes);
                self.clock.advance(Duration::from_secs(u64::from(minutes) * 60));
                self.wall_high = self.wall_high.max(self.clock.now());
            }
            Step::ClockBack { minutes } => self.clock.rewind(Duration::from_secs(u64::from(minutes) * 60)),
            Step::CloseReopen => {
                self.close();
                self.ensure_open();
            }
            Step::Crash { power_cut } => {
                self.crash();
                if power_cut {
                    let synced = self.durable_state();
                    self.power_cut(&synced, rng);
                }
                self.ensure_open();
            }
            Step::PowerCutBeforeSeal { records } => {
                let synced = self.crash_before_seal(records, rng);
                self.power_cut(&synced, rng);
                self.ensure_open();
            }
            Step::LoseWal { clean } | Step::LoseState { clean } | Step::LoseDataDir { clean } => {
                if clean {
                    self.close();
                } else {
                    self.crash();
                }
                let dir = match step {
                    Step::LoseWal { .. } => self.hot_dir.clone(),
                    Step::LoseState { .. } => self.state_dir.clone(),
                    _ => self.data_dir.clone(),
                };
                self.remove(&dir);
                if !matches!(step, Step::LoseState { .. }) {
                    self.model.destroy_wal(OffsetRange::new(0, Offset::MAX), false, 0);
                }
                self.lost(!matches!(step, Step::LoseState { .. }), !matches!(step, Step::LoseWal { .. }));
                self.ensure_open();
            }
            Step::LoseWalRunning { producers, records } => {
                if !self.ensure_open() {
                    return;
                }
                let hot_dir = self.hot_dir.clone();
                self.remove(&hot_dir);
                if producers > 0 {
                    // Appends into the unlinked segment are acknowledged until a rotation
                    // meets the missing directory; every producer must be answered by where
                    // its own batch went, and the read serves what was committed.
                    self.append(producers, records, true, rng);
                    self.read(ReadFrom::Earliest, 100_000);
                }
                // Past the segment age: the age rotation fails on the missing directory
                // and poisons the WAL's writer; the close after it must still finish.
                let passes = self.schedule.config.segment_age + Duration::from_millis(50);
                self.on_proc(async |_: &TieredStore, _: &Topic| tokio::time::sleep(passes).await);
                self.close();
                self.remove(&hot_dir);
                self.model.destroy_wal(OffsetRange::new(0, Offset::MAX), false, 0);
                self.lost(true, false);
                self.ensure_open();
            }
            Step::WarmOutage(on) => self.warm.set_outage(on),
            Step::WarmWaitShort(on) => self.warm.set_wait_short(on),
            Step::WarmFailover => {
                let lost = self.warm.fail_over();
                self.note(format!("  warm lost {lost:?}"));
            }
            Step::WarmAnswersLost { every } => self.warm.set_answers_lost(Some(every)),
            Step::WarmReconnect => self.warm.reconnect(),
            Step::WarmFailoverBehind { writes } => {
                // A WAL fsync that failed since (losing its pages under generator 7) took
                // the WAL's copies before this failover: note it first.
                self.wal_failing();
                let marker_lost = self.warm.confirmed_marker_lost(&self.topic_name);
                let (lost, confirmed) = self.warm.fail_over_behind(writes, &self.topic_name);
                if self.warm.confirmed_marker_lost(&self.topic_name) && !marker_lost {
                    self.note("  the confirmed topic marker is lost");
                    // The state directory went first (no open recorded the topic since):
                    // the marker was the last evidence, as in the other order (`lost`).
                    if self.lost_since_open.1 {
                        self.lost(false, true);
                    }
                }
                self.note(format!(
                    "  warm lost {lost:?}, {} confirmed record(s) among them",
                    confirmed.len()
                ));
                // Whether the WAL held each then: if it did, the store must give warm its
                // copy again; if not, warm's was the last copy (beyond what `WAIT`
                // promises, `docs/warm.md`). With no process to look through, what the
                // last open's WAL held; either way, unless the schedule destroyed it since
                // the open — a failed fsync that lost its pages took the copies the running
                // WAL still serves (`docs/hot.md`, "Failed fsyncs": nothing is cut in the
                // running process, the next open cuts them), committed records that were
                // never acknowledged among them.
                let view = self.view();
                let epoch = self.model.wal_destroyed.len();
                let destroyed_since_open = self.model.wal_destroyed[self.open_epoch.min(epoch)..].to_vec();
                for (offset, payload) in confirmed {
                    let wal_held = view.as_ref().is_none_or(|v| {
                        v.hot.contains(offset) && !v.hot_gaps.iter().any(|g| g.contains(offset))
                    }) && !destroyed_since_open.iter().any(|r| r.contains(offset))
                        && self
                            .model
                            .acked
                            .get(&offset)
                            .is_none_or(|a| !self.model.wal_copy_destroyed(offset, a));
                    self.model.warm_lost.insert((offset, payload), (wal_held, epoch));
                }
            }
            Step::ColdErrors(every) => {
                self.cold_errors = every.is_some();
                let faults =
                    tier_cold::testing::Faults { fail_every: every.map(u64::from), ..Default::default() };
                self.bucket.faulty.set_faults(faults);
            }
            Step::ColdLatency(ms) => {
                self.cold_errors = false;
                let latency = Duration::from_millis(u64::from(ms));
                self.bucket.faulty.set_faults(tier_cold::testing::Faults { latency, ..Default::default() });
            }
            Step::ColdAmbiguous { applied, every } => {
                self.cold_errors = true;
                let every = Some(u64::from(every));
                let faults = match applied {
                    true => tier_cold::testing::Faults { lose_answer_every: every, ..Default::default() },
                    false => tier_cold::testing::Faults { refuse_write_every: every, ..Default::default() },
                };
                self.bucket.faulty.set_faults(faults);
            }
            Step::ColdListLag { lists } => {
                self.cold_errors = false;
                let list_lag = Some(u64::from(lists));
                self.bucket.faulty.set_faults(tier_cold::testing::Faults { list_lag, ..Default::default() });
            }
            Step::DamageSegment => {
                // Media damage shows when the file is read from the disk again: the store
                // stops cleanly, a byte flips, the store opens again. (Flipping a byte of
                // a mapped file under a running store would be memory corruption.)
                self.close();
                let cold_end = self.cold_end();
                match disk::damage_sealed(&self.hot_dir, TOPIC, self.header_len, rng) {
                    Ok(Some((range, path))) => {
                        self.note(format!("  damaged the WAL segment of {range}"));
                        self.damaged = true;
                        self.wal_damaged = true;
                        self.damaged_files.push(path);
                        self.model.destroy_wal(range, true, cold_end);
                    }
                    Ok(None) => {}
                    Err(e) => self.note(format!("  damaging a segment failed: {e}")),
                }
                self.ensure_open();
            }
            Step::DamageCold => {
                let rt = runtime();
                if let Some(range) = rt.block_on(self.bucket.damage(TOPIC, rng)) {
                    self.note(format!("  damaged the cold object of {range}"));
                    self.damaged = true;
                    self.model.cold_damaged.push(range);
                }
            }
            Step::WalFsyncFails => {
                // Re-arming resets the count of failures fired: note first whether the one
                // armed before fired (it poisoned the WAL's writer until the next reopen).
                self.wal_failing();
                if self.schedule.config.fsync_loses_pages {
                    tier_hot::faults::fail_fsync_losing_pages(&self.hot_dir, 1, std::io::ErrorKind::Other);
                } else {
                    tier_hot::faults::fail_nth(
                        &self.hot_dir,
                        tier_hot::faults::FaultPoint::Fsync,
                        1,
                        std::io::ErrorKind::Other,
                    );
                }
            }
            Step::Heal => self.heal(),
            Step::Neighbour { records } => self.neighbour(records, rng),
        }
    }

    /// [`Step::Neighbour`]: a second store whose data directory is a sibling of this
    /// one's opens on the same topic, appends `records` records and closes, while this
    /// store runs or (half the time) after it closed cleanly. Its open must be refused
    /// (`Fenced`): the default state directory it would take, `<parent>/router`, is this
    /// store's — locked while it runs, naming it in its `owner` file when it does not.
    /// What the store beside it wrote, had it opened, is left for the checks to find.
    fn neighbour(&mut self, records: u8, rng: &mut Rng) {
        let recs = self.records(records, rng);
        // Beside a store that has claimed its state directory (a first open claims it).
        if !self.ensure_open() {
            return;
        }
        let stopped = rng.chance(1, 2);
        if stopped {
            self.close();
        }
        let mut hot = HotConfig::new(self.data_dir.join("beside")).with_fsync(self.schedule.config.fsync);
        hot.segment_bytes = self.schedule.config.segment_bytes;
        let year = Duration::from_secs(365 * 24 * 3600);
        let mut router = RouterConfig::default();
        router.export_sweep_interval = year;
        router.retention_interval = year;
        let builder = TieredStore::builder()
            .hot(hot)
            .router(router)
            .topics([self.topic_name.clone()])
            .background(false)
            .boot_id(format!("sim-boot-{}", self.boots))
            .clock(Arc::clone(&self.clock));
        let rt = runtime();
        let out = rt.block_on(within_real_time(async {
            let store = match builder.open().await {
                Ok(store) => store,
                Err(e) => return Err(e),
            };
            let topic = store.topic(TOPIC).await?;
            let new: Vec<NewRecord> =
                recs.iter().map(|r| NewRecord::new(r.timestamp, r.payload.clone())).collect();
            let acked = topic.append(new).await;
            drop(topic);
            store.close().await;
            Ok(acked)
        }));
        match out {
            None => {
                self.violate(inv::HUNG, "the store beside it did not finish".into());
                self.ended = Some("hung".into());
            }
            Some(Err(e)) if e.kind() == ErrorKind::Fenced => {
                self.note(format!("  the store beside it was refused: {e}"));
            }
            Some(Err(e)) => self.note(format!("  the store beside it failed: {e}")),
            Some(Ok(acked)) => {
                self.note(format!(
                    "  the store beside it opened and appended: {:?}",
                    acked.map_err(|e| e.kind())
                ));
                self.violate(
                    inv::SHARED_STATE,
                    format!(
                        "a store whose data directory is a sibling opened on {} ({})",
                        self.state_dir.display(),
                        if stopped { "its store stopped" } else { "its store running" }
                    ),
                );
            }
        }
        if stopped {
            self.ensure_open();
        }
    }

    /// The power is cut (the process is gone): every WAL file keeps what `synced` (the
    /// durable lengths at the moment of the cut) and the schedule's [`CutModel`](disk::CutModel)
    /// say, and the machine boots again.
    fn power_cut(&mut self, (synced, listings): &Durable, rng: &mut Rng) {
        self.boots += 1;
        // The machine restarts: pages a failed fsync lost read as zeros from now on.
        if let Err(e) = tier_hot::faults::drop_page_cache(&self.hot_dir) {
            self.note(format!("  dropping the page cache failed: {e}"));
        }
        let model = self.schedule.config.cuts;
        match self.disk.power_cut(&self.hot_dir, synced, listings, model, self.header_len, rng) {
            Ok(cut) => {
                let headers = if cut.headers > 0 {
                    format!(", {} new files zeroed, empty or gone", cut.headers)
                } else {
                    String::new()
                };
                let dirs = if cut.undone.is_empty() {
                    String::new()
                } else {
                    format!(", {} directory entries undone ({})", cut.undone.len(), cut.undone.join(" "))
                };
                self.note(format!("  power cut: {} files, {} bytes{headers}{dirs}", cut.files, cut.bytes));
                // Under `always` every acknowledged record was fsynced before its answer:
                // what the cut took was never acknowledged, so no acknowledged WAL copy
                // is destroyed (the store must keep them all, `inv::DURABLE_DROPPED`).
                // Otherwise, over-approximated: every WAL copy.
                if (cut.bytes > 0 || !cut.undone.is_empty())
                    && self.schedule.config.fsync != tier_hot::FsyncPolicy::Always
                {
                    self.model.destroy_wal(OffsetRange::new(0, Offset::MAX), false, 0);
                }
            }
            Err(e) => self.note(format!("  power cut failed: {e}")),
        }
    }

    /// What a power cut now would keep ([`Durable`]).
    fn durable_state(&self) -> Durable {
        durable_state(&self.hot_dir, &self.state_dir)
    }

    /// [`Step::PowerCutBeforeSeal`] up to the cut: holds the background seals (queued,
    /// their fsyncs not started: [`tier_core::blocking::hold_seals_here`]), lets the active
    /// segment rotate by age, appends `records` records into the new segment, and returns
    /// the durable lengths as of that moment; the process is gone when it returns, and the
    /// held seals run as it stops, after the cut's moment.
    fn crash_before_seal(&mut self, records: u8, rng: &mut Rng) -> Durable {
        let recs = self.records(records, rng);
        if !self.ensure_open() {
            return self.durable_state();
        }
        let hot_dir = self.hot_dir.clone();
        tier_core::blocking::hold_seals_here(true);
        // No append while warm fails: its retries would let simulated time pass (rotating
        // again, exporting) before the cut, which is to come right after the rotation.
        let append = !self.warm.faulty();
        let age = self.schedule.config.segment_age + Duration::from_millis(50);
        let proc = self.proc.as_ref().expect("ensure_open returned true");
        let state_dir = self.state_dir.clone();
        let out = proc.rt.block_on(within_real_time(async {
            // A rotation by age queues its seal before the sleep ends; the seal counts
            // as held once every task is idle (the rotation done).
            let rotated = tokio::select! {
                biased;
                () = tier_core::blocking::held_seal_at_idle() => true,
                () = tokio::time::sleep(age) => false,
            };
            let ack = if rotated && append {
                let new: Vec<NewRecord> =
                    recs.iter().map(|r| NewRecord::new(r.timestamp, r.payload.clone())).collect();
                Some(proc.topic.append(new).await)
            } else {
                None
            };
            // What the WAL wrote but could not fsync, should an armed fsync failure have
            // refused the append (see `wal_failing`, which would let time pass).
            let unsynced = proc.store.wal().unsynced(proc.topic.name());
            (rotated, ack, unsynced, durable_state(&hot_dir, &state_dir))
        }));
        tier_core::blocking::hold_seals_here(false);
        let Some((rotated, ack, unsynced, synced)) = out else {
            self.violate(inv::HUNG, "a rotation with its seal held did not finish".into());
            self.crash();
            self.ended = Some("hung".into());
            return self.durable_state();
        };
        self.note(format!("  rotated with the seal held: {rotated}"));
        match ack {
            Some(Ok(range)) => {
                self.note(format!("  acked {range}"));
                self.ack(range, &recs, self.step);
            }
            Some(Err(e)) => {
                self.note(format!("  refused: {:?}", e.kind()));
                if !self.wal_failed && self.fsync_fired() {
                    self.wal_failed = true;
                    self.fsync_lost_pages();
                    if let Some(range) = unsynced {
                        self.note(format!("  the WAL's fsync failed: {range} written, not durable"));
                        self.model.unsynced.push(range);
                    }
                }
                self.model.refuse(&recs, self.wal_failed);
            }
            None => {}
        }
        // An fsync of the WAL's interval that failed while the rotation was awaited (no
        // append refused to show it) lost its pages before the cut all the same.
        if !self.wal_failed && self.fsync_fired() {
            self.wal_failed = true;
            self.fsync_lost_pages();
            if let Some(range) = unsynced {
                self.note(format!("  the WAL's fsync failed: {range} written, not durable"));
                self.model.unsynced.push(range);
            }
        }
        // The seal's fsyncs run now, after the cut's moment: they do not count.
        self.crash();
        synced
    }

    fn heal(&mut self) {
        // An armed WAL fsync failure that has not fired is disarmed (one that fired has
        // poisoned the WAL's writer until the next reopen, as on a real disk).
        self.wal_failing();
        tier_hot::faults::clear(&self.hot_dir);
        self.warm.set_outage(false);
        self.warm.set_wait_short(false);
        self.warm.set_answers_lost(None);
        self.cold_errors = false;
        self.bucket.faulty.set_faults(tier_cold::testing::Faults::default());
    }

    /// `producers` concurrent appends (joined: they meet in the writer's groups) of
    /// `records` records each, told to the model as acknowledged or refused
    /// (`wal_failing`: the WAL's directory is gone).
    fn append(&mut self, producers: u8, records: u8, wal_failing: bool, rng: &mut Rng) {
        let batches: Vec<Vec<Rec>> = (0..producers).map(|_| self.records(records, rng)).collect();
        let results = self
            .on_proc(async |_: &TieredStore, topic: &Topic| {
                let appends = batches.iter().map(|recs| {
                    let new: Vec<NewRecord> =
                        recs.iter().map(|r| NewRecord::new(r.timestamp, r.payload.clone())).collect();
                    topic.append(new)
                });
                futures::future::join_all(appends).await
            })
            .unwrap_or_default();
        // A WAL fsync that failed during these appends (the batches written before it are in
        // the file though refused) or before them (the `interval` timer's: the writer fails).
        let failing = wal_failing || self.wal_failing();
        for (recs, result) in batches.iter().zip(results) {
            match result {
                Ok(range) => {
                    self.note(format!("  acked {range}"));
                    self.ack(range, recs, self.step);
                }
                Err(e) => {
                    self.note(format!("  refused: {:?}", e.kind()));
                    self.model.refuse(recs, failing);
                }
            }
        }
    }

    /// One batch of `n` records appended to the second topic. A topic fenced because
    /// nothing bounds its acknowledged end is resumed past every offset it handed out, as
    /// the operator does for the first one.
    fn append_side(&mut self, n: u8, rng: &mut Rng) {
        let recs = self.records(n, rng);
        for r in &recs {
            self.side.appended.insert(r.payload.clone());
        }
        let new: Vec<NewRecord> =
            recs.iter().map(|r| NewRecord::new(r.timestamp, r.payload.clone())).collect();
        let handed_out = self.side.handed_out;
        let out = self.on_proc(async |store: &TieredStore, _: &Topic| {
            let topic = store.topic(SECOND_TOPIC).await?;
            match topic.append(new).await {
                Err(e) if e.kind() == ErrorKind::Fenced => {
                    let reports = store.recovery_reports().await;
                    if let Some(r) =
                        reports.iter().find(|r| r.end_unknown && r.topic.as_str() == SECOND_TOPIC)
                    {
                        let _ = store.resume_topic(SECOND_TOPIC, r.next_offset.max(handed_out)).await;
                    }
                    Err(e)
                }
                other => other,
            }
        });
        match out {
            Some(Ok(range)) => {
                self.note(format!("  {SECOND_TOPIC}: acked {range}"));
                self.side.handed_out = self.side.handed_out.max(range.end);
            }
            Some(Err(e)) => self.note(format!("  {SECOND_TOPIC}: refused: {:?}", e.kind())),
            None => {}
        }
    }

    /// Reads the second topic from its earliest offset to its commit point: every record
    /// served was appended to it (none of the first topic's), at dense offsets. Reads
    /// past its reported losses; other failures are only noted (its durability is not
    /// modelled).
    fn check_side(&mut self) {
        let got = self.on_proc(async |store: &TieredStore, _: &Topic| {
            let topic = store.topic(SECOND_TOPIC).await?;
            let reports = store.recovery_reports().await;
            let skip: Vec<OffsetRange> = reports
                .iter()
                .filter(|r| r.topic.as_str() == SECOND_TOPIC)
                .flat_map(|r| r.lost.iter().chain(&r.maybe_lost).copied().chain(r.skipped))
                .collect();
            let hwm = topic.high_watermark();
            Ok::<_, TierError>(
                read_until(&topic, StartPosition::Earliest, hwm, usize::MAX, &skip, None).await,
            )
        });
        let obs = match got {
            Some(Ok(obs)) => obs,
            Some(Err(e)) => {
                self.note(format!("  {SECOND_TOPIC}: not read: {e}"));
                return;
            }
            None => return,
        };
        let mut served = 0u64;
        for o in obs {
            match o {
                Obs::Served(offset, payload) => {
                    served += 1;
                    if !self.side.appended.contains(&payload) {
                        self.violate(
                            inv::FOREIGN,
                            format!(
                                "{:?} served in topic {SECOND_TOPIC} at {offset}, never appended to it",
                                lossy(&payload)
                            ),
                        );
                    }
                }
                Obs::NotDense(want, got) => self.violate(
                    inv::NOT_DENSE,
                    format!("topic {SECOND_TOPIC}: expected offset {want}, got {got}"),
                ),
                Obs::Error(at, e) => self.note(format!("  {SECOND_TOPIC}: read error at {at:?}: {e}")),
                Obs::Stalled(at) => self.note(format!("  {SECOND_TOPIC}: reader stalled at {at:?}")),
            }
        }
        self.note(format!("  {SECOND_TOPIC}: {served} record(s) read"));
    }

    /// The WAL's directory (`wal`) and/or the state directory (`state`) is lost: once
    /// both are, since an open last recorded them, the store may no longer know the
    /// offsets degraded opens skipped. Also called when a failover took warm's confirmed
    /// topic marker after the state directory was lost (`state` again: the loss counts
    /// from then on).
    fn lost(&mut self, wal: bool, state: bool) {
        self.lost_since_open.0 |= wal;
        self.lost_since_open.1 |= state;
        if (state || self.state_lost_without_marker) && self.warm.confirmed_marker_lost(&self.topic_name) {
            // With the WAL's copy and the state directory gone, the marker was the only
            // evidence that these offsets were handed out.
            self.state_lost_without_marker = true;
            let gone: Vec<(Offset, Bytes)> = self
                .model
                .acked
                .iter()
                .filter(|(o, a)| {
                    self.model.wal_copy_destroyed(**o, a)
                        && self.warm.holds(&self.topic_name, **o).is_none_or(|(p, _)| p != a.rec.payload)
                })
                .map(|(o, a)| (*o, a.rec.payload.clone()))
                .collect();
            self.lost_with_marker.extend(gone);
        }
        if self.lost_since_open == (true, true) {
            self.model.skipped_forgotten = self.model.skipped.len();
        }
    }

    // ---- reads and checks --------------------------------------------------------------

    /// An append answered `Ok(range)` for `recs` (see [`Model::ack`]), after forgetting
    /// the acknowledged records it replaces that were lost beyond the guarantee.
    fn ack(&mut self, range: OffsetRange, recs: &[Rec], step: Option<u32>) {
        for (i, rec) in recs.iter().enumerate() {
            self.forget_lost_beyond_guarantee(range.start + i as u64, &rec.payload);
        }
        self.model.ack(range, recs, step);
    }

    /// Forgets the record acknowledged or served at `offset` when `payload` now takes its
    /// place and it was lost beyond the guarantee ([`Self::lost_beyond_warm_guarantee`]):
    /// once every copy and the evidence of them are gone, the offset may be handed out
    /// again.
    fn forget_lost_beyond_guarantee(&mut self, offset: Offset, payload: &Bytes) {
        let replaced = self.model.seen.get(&offset).is_some_and(|prev| prev != payload);
        if replaced && (self.lost_beyond_warm_guarantee(offset) || self.lost_with_the_marker(offset)) {
            self.note(format!(
                "  offset {offset} holds another record: the one before was lost beyond the guarantee"
            ));
            self.model.seen.remove(&offset);
            self.model.acked.remove(&offset);
        }
    }

    /// Forgets the acknowledged records in `skipped` (offsets a degraded open skipped as
    /// never handed out) that were lost beyond the guarantee
    /// ([`Self::lost_beyond_warm_guarantee`], [`Self::lost_with_the_marker`]): with every
    /// copy and the evidence of their offsets gone, the store cannot know of them.
    fn forget_lost_in_skip(&mut self, skipped: OffsetRange) {
        let gone: Vec<Offset> = self
            .model
            .acked
            .range(skipped.start..skipped.end)
            .map(|(o, _)| *o)
            .filter(|o| self.lost_beyond_warm_guarantee(*o) || self.lost_with_the_marker(*o))
            .collect();
        if let (Some(first), Some(last)) = (gone.first(), gone.last()) {
            self.note(format!(
                "  {} acknowledged record(s) in [{first}, {}] lost beyond the guarantee, inside the skip {skipped}",
                gone.len(),
                last + 1
            ));
        }
        for offset in gone {
            self.model.seen.remove(&offset);
            self.model.acked.remove(&offset);
        }
    }

    fn served(&mut self, offset: Offset, payload: Bytes) {
        self.forget_lost_beyond_guarantee(offset, &payload);
        let m = &self.model;
        let problem = if let Some(prev) = m.seen.get(&offset)
            && *prev != payload
        {
            Some((
                inv::TWO_CONTENTS,
                format!("offset {offset} served {:?}, earlier {:?}", lossy(&payload), lossy(prev)),
            ))
        } else if let Some(at) = m.acked_at.get(&payload)
            && *at != offset
        {
            Some((inv::FOREIGN, format!("{:?} served at {offset}, acknowledged at {at}", lossy(&payload))))
        } else if m.acked.contains_key(&offset) {
            None
        } else if let Some(range) = m.skipped_known(offset) {
            Some((
                inv::SKIPPED_SERVED,
                format!(
                    "{:?} served at {offset}, inside {range}, which a degraded open skipped",
                    lossy(&payload)
                ),
            ))
        } else if m.refused.contains_key(&payload) {
            let cfg = &self.schedule.config;
            // Outcome unknown: under `fail`, warm confirmed it (the writer's retry or a later
            // met `WAIT` committed it); under `degrade`, which commits on the WAL, the WAL
            // failed in its group while warm took it (confirmed or not), and recovery
            // replays warm into the WAL.
            let failing_wal = m.refused_by_failing_wal.contains(&payload);
            let excused = (cfg.deployment.warm()
                && match cfg.policy {
                    WarmFailurePolicy::Fail => {
                        self.warm.confirmed(&self.topic_name, offset).is_some_and(|(p, _)| p == payload)
                    }
                    _ => failing_wal && self.warm.landed(&self.topic_name, offset).is_some_and(|p| p == payload),
                })
                // Written to the WAL before its fsync failed: a reopened WAL holds it.
                || (failing_wal && m.unsynced.iter().any(|r| r.contains(offset)));
            (!excused).then(|| {
                (
                    inv::UNACKED_SERVED,
                    format!(
                        "{:?} (append refused) served at {offset}; warm never confirmed it (or, under degrade, took it while the WAL failed)",
                        lossy(&payload)
                    ),
                )
            })
        } else {
            Some((inv::FOREIGN, format!("{:?} served at {offset} was never appended", lossy(&payload))))
        };
        if let Some((which, detail)) = problem {
            self.violate(which, detail);
        }
        // A copy of its own: a record read from the WAL may share the bytes of a mapped
        // segment file, which the simulation later damages in place — the model would see
        // what it remembers change under it.
        self.model.seen.insert(offset, Bytes::copy_from_slice(&payload));
    }

    fn read(&mut self, from: ReadFrom, max: usize) {
        let elapsed_ms = (self.clock_minutes * 60_000) as i64 + self.ts;
        let reported = self.skippable();
        let obs = self.on_proc(async |_: &TieredStore, topic: &Topic| {
            let hwm = topic.high_watermark();
            let start = match from {
                ReadFrom::Earliest => StartPosition::Earliest,
                ReadFrom::Latest => return Vec::new(),
                ReadFrom::Offset(k) => StartPosition::Offset(hwm * u64::from(k) / 1000),
                ReadFrom::Timestamp(k) => {
                    StartPosition::Timestamp(BASE_TS + elapsed_ms * i64::from(k) / 1000)
                }
            };
            read_until(topic, start, hwm, max, &reported, None).await
        });
        if let Some(obs) = obs {
            self.observe(obs, false, None);
        }
    }

    /// Applies read observations to the model. `full`: the read went from the earliest
    /// offset to the commit point, so every acknowledged record must be among them.
    /// `readable`, for a full check: the acknowledged offsets some tier held intact when
    /// the read started ([`readable`](Self::readable)).
    fn observe(
        &mut self,
        obs: Vec<Obs>,
        full: bool,
        readable: Option<&BTreeSet<Offset>>,
    ) -> Option<BTreeSet<Offset>> {
        let mut served = BTreeSet::new();
        let view = self.view();
        for o in obs {
            match o {
                Obs::Served(offset, payload) => {
                    served.insert(offset);
                    self.served(offset, payload);
                }
                Obs::NotDense(want, got) => {
                    self.violate(inv::NOT_DENSE, format!("expected offset {want}, got {got}"));
                }
                Obs::Error(at, e) => {
                    self.note(format!("  read error at {at:?}: {e}"));
                    if self.transient_faults() && e.kind() == ErrorKind::Unavailable {
                        return None;
                    }
                    // A read may fail where the store reported a loss, where every copy
                    // was destroyed (loudly, if the last copy is a damaged cold object),
                    // or — before it knows an offset — on damaged bytes. Every copy
                    // destroyed when the read started counts too: under `degrade` the
                    // writer may back-fill warm from its pending batches while the reader
                    // runs, so a copy can appear after the reader passed the offset.
                    let gone_at_start = |at: Offset| readable.is_some_and(|r| !r.contains(&at));
                    let excused = match at {
                        Some(at) => {
                            self.model.reported(at)
                                || view.as_ref().is_some_and(|v| {
                                    (self.copies_gone(at, v).unwrap_or(false) || gone_at_start(at))
                                        && self.fails_loudly(at, &e, v)
                                })
                        }
                        None => self.damaged && e.kind() == ErrorKind::Corruption,
                    };
                    if !excused && (at.is_none() || at.is_some_and(|a| self.model.acked.contains_key(&a))) {
                        self.violate(inv::READ_FAILED, format!("at {at:?}: {e}"));
                    }
                }
                Obs::Stalled(at) => {
                    self.note(format!("  reader stalled at {at:?}"));
                    if full && !self.transient_faults() && at.is_some() {
                        self.violate(inv::HUNG, format!("a reader stalled at {at:?} below the commit point"));
                    }
                }
            }
        }
        Some(served)
    }

    /// Cold's end now, read straight from the bucket (0 when cold is off or empty).
    fn cold_end(&self) -> Offset {
        if !self.schedule.config.deployment.cold() {
            return 0;
        }
        let Ok(tier) = self.bucket.inspector() else { return 0 };
        runtime().block_on(tier.range(&self.topic_name)).map_or(0, |r| r.end)
    }

    /// What the tiers hold now (`None`: no process, or a tier did not answer).
    fn view(&self) -> Option<View> {
        let proc = self.proc.as_ref()?;
        let topic = &self.topic_name;
        let cold_on = self.schedule.config.deployment.cold();
        proc.rt.block_on(async {
            let hot = proc.store.wal().range(topic).await.ok()?;
            let hot_gaps = proc.store.wal().gaps(topic);
            let cold = if cold_on {
                let tier = self.bucket.inspector().ok()?;
                let range = tier.range(topic).await.ok()?;
                let mut holes = tier.gaps(topic).await.ok()?;
                holes.extend(tier.recorded_gaps(topic).await.ok()?);
                Some((range, holes))
            } else {
                None
            };
            Some(View { hot, hot_gaps, cold })
        })
    }

    /// Whether the acknowledged record at `offset` must still be in the WAL: under
    /// `fsync = always` it was fsynced before its answer, the schedule destroyed no WAL
    /// copy of it since (a lost directory, byte damage, pages a failed fsync dropped),
    /// and it lies at or past the WAL's start (retention deletes from the start, once
    /// another tier holds a segment or its age passed). No report excuses its loss.
    fn durable_in_wal(&self, offset: Offset, view: &View) -> bool {
        self.schedule.config.fsync == tier_hot::FsyncPolicy::Always
            && offset >= view.hot.start
            && self.model.acked.get(&offset).is_some_and(|a| !self.model.wal_copy_destroyed(offset, a))
    }

    /// Whether the schedule destroyed every copy of the acknowledged record at `offset`
    /// (no tier holds it intact). `None` when it is not an acknowledged record.
    fn copies_gone(&self, offset: Offset, view: &View) -> Option<bool> {
        let a = self.model.acked.get(&offset)?;
        let topic = &self.topic_name;
        let wal_gone = self.model.wal_copy_destroyed(offset, a)
            || !view.hot.contains(offset)
            || view.hot_gaps.iter().any(|g| g.contains(offset));
        let warm_gone = !(self.schedule.config.deployment.warm()
            && self.warm.holds(topic, offset).is_some_and(|(p, _)| p == a.rec.payload));
        let cold_gone = match &view.cold {
            None => true,
            Some((range, holes)) => {
                !range.contains(offset)
                    || self.model.cold_copy_damaged(offset)
                    || holes.iter().any(|g| g.contains(offset))
            }
        };
        Some(wal_gone && warm_gone && cold_gone)
    }

    /// Whether a read failing with `e` at `at`, where every copy is gone, fails as it
    /// must: when the copy cold still lists there is damaged (the schedule flipped a byte
    /// of the last copy), only `Corruption` naming the damaged object excuses the failure
    /// (a copy exported from a damaged WAL segment, damaged again in cold or not:
    /// `Corruption` naming a location — the WAL's damaged segment is as true an answer
    /// as cold's object), so a store that answered anything else over damage — or skipped
    /// it, which the density check catches — is not excused. Other lost copies may fail
    /// with any error.
    fn fails_loudly(&self, at: Offset, e: &TierError, view: &View) -> bool {
        let cold_lists = view
            .cold
            .as_ref()
            .is_some_and(|(range, holes)| range.contains(at) && !holes.iter().any(|g| g.contains(at)));
        if !cold_lists || !self.model.cold_copy_damaged(at) {
            return true;
        }
        let Some(location) = e.context().location.as_deref().filter(|_| e.kind() == ErrorKind::Corruption)
        else {
            return false;
        };
        self.model.exported_damaged(at)
            || self.model.damaged_object(at).is_none_or(|r| location.contains(&cold::object_name(r)))
    }

    /// The ranges a reader skips after failing inside one: reported losses, cold's gaps
    /// and, of each damaged WAL segment or cold object, the runs whose every copy is gone
    /// (another tier still serves the rest of it, which must be read).
    fn skippable(&self) -> Vec<OffsetRange> {
        let view = self.view();
        let mut out = self.model.reported.clone();
        out.extend(&self.model.skipped);
        let wal_damaged =
            self.model.wal_destroyed.iter().zip(&self.model.wal_damage).filter(|(_, d)| **d).map(|(r, _)| *r);
        let damaged: Vec<OffsetRange> = wal_damaged.chain(self.model.cold_damaged.iter().copied()).collect();
        for range in damaged {
            out.extend(self.gone_runs(range, view.as_ref()));
        }
        out.extend(view.and_then(|v| v.cold).map(|(_, holes)| holes).unwrap_or_default());
        out
    }

    /// The acknowledged offsets some tier still holds intact, which the full check
    /// demands (`readable`), and where its reader may go on after a failure
    /// (`resumable`): those, and the acknowledged offsets the WAL's range claims although
    /// the model counts its copy destroyed. The model over-approximates what a power cut
    /// takes (every WAL copy; a sealed segment's fsynced copy survives the cut) and does
    /// not follow recovery writing warm's copy of what the WAL lost back into it: what
    /// the store still serves there is checked like any other record, never skipped.
    fn readable_and_resumable(&self) -> (BTreeSet<Offset>, BTreeSet<Offset>) {
        let Some(view) = self.view() else { return (BTreeSet::new(), BTreeSet::new()) };
        let (mut readable, mut resumable) = (BTreeSet::new(), BTreeSet::new());
        for &o in self.model.acked.keys() {
            if self.copies_gone(o, &view) == Some(false) {
                readable.insert(o);
                resumable.insert(o);
            } else if view.hot.contains(o) && !view.hot_gaps.iter().any(|g| g.contains(o)) {
                resumable.insert(o);
            }
        }
        (readable, resumable)
    }

    /// The runs of `range` whose every copy is gone (or that hold no acknowledged record);
    /// all of it when the tiers cannot be inspected.
    fn gone_runs(&self, range: OffsetRange, view: Option<&View>) -> Vec<OffsetRange> {
        let Some(view) = view else { return vec![range] };
        let mut out: Vec<OffsetRange> = Vec::new();
        for offset in range.start..range.end {
            if self.copies_gone(offset, view) == Some(false) {
                continue;
            }
            match out.last_mut() {
                Some(run) if run.end == offset => run.end += 1,
                _ => out.push(OffsetRange::new(offset, offset + 1)),
            }
        }
        out
    }

    /// True when the record acknowledged or served at `offset` lost every copy to a double
    /// fault beyond the store's guarantee: a failover to a replica behind took warm's
    /// confirmed copy (one the replica `WAIT` counts held), no `WAIT` has confirmed it
    /// again since, and the WAL did not hold it at that failover or lost its copy after
    /// it. (Where the WAL held it, the store must give warm its copy again: not excused.)
    fn lost_beyond_warm_guarantee(&self, offset: Offset) -> bool {
        let Some(payload) = self.model.seen.get(&offset) else { return false };
        let Some(&(wal_held, epoch)) = self.model.warm_lost.get(&(offset, payload.clone())) else {
            return false;
        };
        self.warm.confirmed_copy_lost(&self.topic_name, offset, payload)
            && (!wal_held || self.model.wal_destroyed.iter().skip(epoch).any(|r| r.contains(offset)))
    }

    /// True when the acknowledged record at `offset` lost its WAL copy, warm did not hold
    /// it, and the evidence that its offset was handed out went with a double fault beyond
    /// the guarantee: a failover to a replica behind took warm's confirmed topic marker,
    /// and the state directory was lost after it, before an open recorded the topic again
    /// (with the WAL and the state directory gone, the marker is the only evidence,
    /// `docs/router.md`, "Topic markers").
    fn lost_with_the_marker(&self, offset: Offset) -> bool {
        let Some(a) = self.model.acked.get(&offset) else { return false };
        self.lost_with_marker.contains(&(offset, a.rec.payload.clone()))
    }

    /// True when the loss of the record at `offset` is a damage the store could not know
    /// of before reading (a flipped byte in the only copies), rather than a lost disk.
    fn lost_to_damage(&self, offset: Offset) -> bool {
        self.model
            .wal_destroyed
            .iter()
            .zip(&self.model.wal_damage)
            .any(|(r, damage)| *damage && r.contains(offset))
            || self.model.cold_copy_damaged(offset)
    }

    fn after_step(&mut self, full: bool) {
        if self.proc.is_none() {
            return;
        }
        let Some(hwm) = self.proc.as_ref().map(|p| p.topic.high_watermark()) else { return };
        // Verbose runs log the state after each step (to compare two replays line by line).
        if let Some(p) = self.proc.as_ref().filter(|_| self.log.is_some()) {
            let durable = tier_hot::faults::durable_lengths(&self.hot_dir);
            let mut durable: Vec<_> = durable
                .into_iter()
                .map(|(p, l)| (p.file_name().map(|n| n.to_string_lossy().into_owned()), l))
                .collect();
            durable.sort();
            let sealed: Vec<_> =
                p.store.wal().sealed_segments(&self.topic_name).iter().map(|s| s.range).collect();
            let gaps = p.store.wal().gaps(&self.topic_name);
            // Read the clock without driving the runtime: a `block_on` here would let
            // background tasks run (and the paused clock auto-advance) only in verbose
            // runs, so a replay would not be the run it replays.
            let now = {
                let _runtime = p.rt.enter();
                tokio::time::Instant::now() - p.started
            };
            let line =
                format!("  state: hwm {hwm} sealed {sealed:?} gaps {gaps:?} durable {durable:?} t {now:?}");
            self.note(line);
        }
        let cold = self.view().and_then(|v| v.cold).map(|(range, _)| range);
        self.max_hwm = self.max_hwm.max(hwm);
        if let Some(c) = cold
            && c.end > self.max_hwm
        {
            self.violate(
                inv::EXPORT_UNCOMMITTED,
                format!("cold holds {c}, but no commit point ever passed {}", self.max_hwm),
            );
        }
        if full && !self.transient_faults() {
            self.full_check(false);
        }
    }

    /// Reads everything from the earliest offset to the commit point and checks that
    /// every acknowledged record below it is there (or lost with every copy, reported).
    fn full_check(&mut self, last: bool) {
        if self.schedule.config.second_topic {
            self.check_side();
        }
        let reported = self.skippable();
        let (readable, resumable) = self.readable_and_resumable();
        let got = self.on_proc(async |_: &TieredStore, topic: &Topic| {
            let hwm = topic.high_watermark();
            // From the earliest offset any tier holds, named, so that a failure before
            // the first record still says where the reader was.
            let start = match topic.ranges().await {
                Ok(r) => {
                    let starts = [Some(r.hot), r.warm, r.cold];
                    let earliest = starts.iter().flatten().filter(|r| !r.is_empty()).map(|r| r.start).min();
                    earliest.map_or(StartPosition::Earliest, StartPosition::Offset)
                }
                Err(_) => StartPosition::Earliest,
            };
            (hwm, read_until(topic, start, hwm, usize::MAX, &reported, Some(&resumable)).await)
        });
        let Some((hwm, obs)) = got else { return };
        let Some(served) = self.observe(obs, true, Some(&readable)) else { return };
        let first = served.first().copied().unwrap_or(hwm);
        let cold_on = self.schedule.config.deployment.cold();
        let acked: Vec<Offset> = if last {
            self.model.acked.keys().copied().collect()
        } else {
            self.model.acked.range(..hwm).map(|(o, _)| *o).collect()
        };
        let Some(view) = self.view() else { return };
        let mut missing = Vec::new();
        let mut unreported = Vec::new();
        let mut dropped = Vec::new();
        for offset in acked {
            self.model.checked += 1;
            if served.contains(&offset) {
                continue;
            }
            match self.copies_gone(offset, &view) {
                None => {}
                // Held intact now, and when the read started: a copy that appeared while
                // the reader ran (warm back-filled from the writer's pending batches) may
                // have come after the reader passed the offset.
                Some(false) if readable.contains(&offset) => missing.push(offset),
                Some(false) => {}
                Some(true) if self.durable_in_wal(offset, &view) => dropped.push(offset),
                Some(true) => {
                    let expired = !cold_on && offset < first;
                    if !(expired
                        || self.model.reported(offset)
                        || self.lost_to_damage(offset)
                        || self.lost_beyond_warm_guarantee(offset)
                        || self.lost_with_the_marker(offset))
                    {
                        unreported.push(offset);
                    }
                }
            }
        }
        if !missing.is_empty() {
            self.violate(
                inv::MISSING,
                format!("{} acknowledged record(s) not served though a tier holds them, first at {} (commit point {hwm})", missing.len(), missing[0]),
            );
        }
        if !dropped.is_empty() {
            self.violate(
                inv::DURABLE_DROPPED,
                format!("{} acknowledged record(s) fsynced under `always` are gone, first at {} (WAL {}, reported {:?}, commit point {hwm})", dropped.len(), dropped[0], view.hot, self.model.reported),
            );
        }
        if !unreported.is_empty() {
            self.violate(
                inv::UNREPORTED,
                format!("{} acknowledged record(s) gone, first at {}, in no reported lost range (reported {:?}, commit point {hwm})", unreported.len(), unreported[0], self.model.reported),
            );
        }
    }

    /// Once the faults stop: a clean restart, a bounded number of export, retention and
    /// trim rounds, then cold must reach the commit point, the WAL keep no segment due for
    /// deletion, a flush succeed, and a full check pass.
    fn final_checks(&mut self) {
        self.heal();
        self.close();
        if !self.ensure_open() {
            return;
        }
        // Producers go on once the faults stop: one more record, so that the log
        // continues past any range the store declared lost (the segment before such a
        // gap is kept until cold holds one after it).
        let mut rng = Rng::new(step_seed(self.schedule.seed, u64::MAX));
        let recs = self.records(1, &mut rng);
        let new: Vec<NewRecord> =
            recs.iter().map(|r| NewRecord::new(r.timestamp, r.payload.clone())).collect();
        match self.on_proc(async |_: &TieredStore, topic: &Topic| topic.append(new).await) {
            Some(Ok(range)) => self.ack(range, &recs, None),
            Some(Err(_)) => {
                let wal_failing = self.wal_failing();
                self.model.refuse(&recs, wal_failing);
            }
            None => return,
        }
        let cfg = self.schedule.config.clone();
        let far = self.wall_high + cfg.retention_time + Duration::from_secs(3600);
        let retry = cfg.warm_retry * 2;
        let result = self.on_proc(async |store: &TieredStore, topic: &Topic| {
            let mut flushed = Err(None);
            for _ in 0..LIVENESS_ROUNDS {
                tokio::time::sleep(retry).await;
                flushed = topic.flush().await.map_err(Some);
                if cfg.deployment.cold() {
                    let _ = store.export_now(TOPIC).await;
                }
                let _ = store.run_retention_now(far).await;
                let _ = store.trim_warm_now().await;
            }
            let hwm = topic.high_watermark();
            let cold = match store.cold() {
                Some(c) => Some(c.range(topic.name()).await),
                None => None,
            };
            let sealed = store.wal().sealed_segments(topic.name()).len();
            (flushed, hwm, cold, sealed)
        });
        let Some((flushed, hwm, cold, sealed)) = result else { return };
        self.note(format!(
            "final: hwm {hwm} cold {cold:?} sealed {sealed} flush {:?}",
            flushed.as_ref().map_err(|e| e.as_ref().map(|e| e.kind()))
        ));
        if self.wal_damaged {
            self.note("final: liveness not checked (a WAL segment was damaged)");
            self.full_check(true);
            return;
        }
        if let Err(Some(e)) = flushed {
            self.violate(inv::LIVENESS_FLUSH, e.to_string());
        }
        // Cold must hold every committed offset a record occupies; a trailing range the
        // store declared lost has no record to export (cold records a gap only before
        // the segment that follows it).
        let unexported =
            |end: Offset| self.model.seen.keys().any(|o| (end..hwm).contains(o) && !self.model.reported(*o));
        match cold {
            Some(Ok(c)) if c.end < hwm && unexported(c.end) => self.violate(
                inv::LIVENESS_EXPORT,
                format!(
                    "cold ends at {} after {LIVENESS_ROUNDS} export rounds; the commit point is {hwm}",
                    c.end
                ),
            ),
            Some(Err(e)) => self.violate(inv::LIVENESS_EXPORT, format!("cold does not answer: {e}")),
            _ => {}
        }
        if sealed > 0 {
            self.violate(
                inv::LIVENESS_RETENTION,
                format!("{sealed} sealed WAL segment(s) left after retention ran past their age"),
            );
        }
        self.full_check(true);
    }
}

/// Reads from `start` until the commit point `hwm` or `max` records.
/// After a failed read at `a`, the reader restarts past the nearest end of the skippable
/// ranges holding `a` (from `skip`), or at `a + 1`. The nearest end, not the farthest:
/// a range reported lost earlier may since hold records acknowledged after an operator
/// resumed the topic inside it, and those must be read. A full check passes `resumable`
/// (the records some tier holds intact, which it demands, or that the WAL claims): its
/// reader never restarts past one, and restarts at the next one rather than at `a + 1`
/// where no skippable range holds `a` (every offset before it is gone), so a long
/// unreported loss does not use up its restarts.
async fn read_until(
    topic: &Topic,
    start: StartPosition,
    hwm: Offset,
    max: usize,
    skip: &[OffsetRange],
    resumable: Option<&BTreeSet<Offset>>,
) -> Vec<Obs> {
    let mut obs = Vec::new();
    let mut start = start;
    let mut restarts = 0;
    let mut count = 0usize;
    'open: loop {
        let mut expect = match start {
            StartPosition::Offset(o) => Some(o),
            _ => None,
        };
        if expect.is_some_and(|e| e >= hwm) {
            break;
        }
        let mut stream = match topic.reader_with_source(start).await {
            Ok(s) => s,
            Err(e) => {
                obs.push(Obs::Error(expect, e));
                break;
            }
        };
        loop {
            if count >= max || expect.is_some_and(|e| e >= hwm) {
                break 'open;
            }
            let wait = if expect.is_some() { READ_WAIT } else { Duration::from_secs(5) };
            match tokio::time::timeout(wait, stream.next()).await {
                Err(_) | Ok(None) => {
                    obs.push(Obs::Stalled(expect));
                    break 'open;
                }
                Ok(Some(Ok((_, r)))) => {
                    if let Some(e) = expect
                        && r.offset != e
                    {
                        obs.push(Obs::NotDense(e, r.offset));
                        break 'open;
                    }
                    if r.offset >= hwm {
                        break 'open;
                    }
                    obs.push(Obs::Served(r.offset, r.payload));
                    count += 1;
                    expect = Some(r.offset + 1);
                }
                Ok(Some(Err(e))) => {
                    let at = expect.or(e.context().offset);
                    obs.push(Obs::Error(at, e));
                    restarts += 1;
                    match at {
                        Some(a) if restarts < 512 => {
                            let past = skip.iter().filter(|r| r.contains(a)).map(|r| r.end).min();
                            let held = resumable.and_then(|r| r.range(a + 1..).next().copied());
                            let restart = match (past, held) {
                                (Some(p), Some(h)) => p.min(h),
                                (Some(p), None) => p,
                                (None, Some(h)) => h,
                                (None, None) => a + 1,
                            };
                            start = StartPosition::Offset(restart);
                            continue 'open;
                        }
                        _ => break 'open,
                    }
                }
            }
        }
    }
    obs
}
