//! tierlog's deterministic simulation (`cargo xtask sim`): the real router, WAL and cold
//! tier, driven by a seeded random schedule of appends, reads, background work and
//! compound faults against in-process stand-ins, with a reference model checked after
//! every step. The design, the invariants and the regression schedules are described in
//! `docs/simulation.md`.
//!
//! - [`schedule`]: a deployment and a list of steps, generated from a seed.
//! - [`run()`]: runs one schedule in simulated processes (one paused current-thread tokio
//!   runtime per process; a crash drops it) and checks the [`model`].
//! - [`warm`], [`cold`], [`disk`]: the stand-ins and fault injectors.
//! - [`shrink`]: drops steps of a failing schedule while it still fails.
//! - [`REGRESSION_SEEDS`]: shrunk schedules that each broke an invariant through a store
//!   (or model) bug; every run replays them first.

pub mod cold;
pub mod disk;
pub mod model;
pub mod rng;
pub mod run;
pub mod schedule;
pub mod shrink;
pub mod warm;

pub use model::Violation;
pub use run::{Outcome, Revert, Stats, run, run_reverting};
pub use schedule::Schedule;

/// Steps per schedule by default.
pub const DEFAULT_STEPS: u32 = 200;

/// A schedule that reaches a bug: a seed, the steps its shrunk schedule keeps, the bug it
/// guards against and the invariant that bug breaks.
#[derive(Clone, Copy, Debug)]
pub struct Regression {
    /// The seed (with [`DEFAULT_STEPS`] steps generated).
    pub seed: u64,
    /// The generation indices of the steps kept (the shrunk schedule).
    pub keep: &'static [u32],
    /// The bug it guards against: the faults in order and what went wrong.
    pub case: &'static str,
    /// The invariant the schedule breaks while the bug is present.
    pub invariant: &'static str,
    /// The version of the step generator it was found with ([`schedule::GENERATOR`]).
    pub generator: u32,
}

impl Regression {
    /// The shrunk schedule.
    pub fn schedule(&self) -> Schedule {
        Schedule::generate_with(self.generator, self.seed, DEFAULT_STEPS).keep(self.keep)
    }
}

/// Schedules that reach a bug of the store (or a gap of the model), one entry per bug
/// (`docs/simulation.md`, "Regression schedules"). Every run replays them first and each
/// must pass. Each replays with the generator version it was found with ([`schedule`]),
/// so a new generator version never changes their steps.
pub const REGRESSION_SEEDS: &[Regression] = &[
    Regression {
        seed: 30336,
        keep: &[138, 141, 144, 157, 159, 163, 165, 174],
        case: "an unconfirmed, age-rotated batch is exported; after a lost disk its offsets are handed out again",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 30033,
        keep: &[22, 23, 73],
        case: "the background exporter uploads a batch warm refused (never committed)",
        invariant: model::inv::EXPORT_UNCOMMITTED,
        generator: 1,
    },
    Regression {
        seed: 30016,
        keep: &[3, 8, 9],
        case: "a power cut tears acknowledged records off the WAL; their offsets are reused, nothing reported",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 30004,
        keep: &[168, 169, 172, 186, 187],
        case: "hot+cold, lost WAL: the new WAL starts above cold's end without a gap; export wedged",
        invariant: model::inv::LIVENESS_EXPORT,
        generator: 1,
    },
    Regression {
        seed: 30899,
        keep: &[58, 60, 61, 66, 68, 70, 72, 73, 167, 172],
        case: "torn tail past the checkpoint, then export through a cold wrapper that forwards only the required methods: \
               the WAL gap never recorded in cold, export wedged",
        invariant: model::inv::LIVENESS_EXPORT,
        generator: 1,
    },
    Regression {
        seed: 30081,
        keep: &[16, 18, 19, 40],
        case: "whole data directory lost, cold holds a prefix: the next append reuses an acknowledged offset",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 30480,
        keep: &[7, 8, 11, 12, 23, 27],
        case: "fail, warm's stream empty and down: refused records served after a restart",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 30010,
        keep: &[7, 9, 14, 27],
        case: "fail, WAIT short: a batch warm never confirmed is served after a restart",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 30027,
        keep: &[114, 115, 166, 167, 168, 169, 173, 177],
        case: "degrade, warm outage longer than retention: the store refuses to open",
        invariant: model::inv::OPEN_FAILED,
        generator: 1,
    },
    Regression {
        seed: 5013,
        keep: &[8, 9],
        case: "hot+cold, the data directory lost before the first export: the topic restarts at 0",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 5021,
        keep: &[31, 32, 38],
        case: "fsync never, the state directory lost, then a power cut: offsets reused",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 5000,
        keep: &[131, 133, 135, 136, 137, 139, 140, 142, 144, 145],
        case: "hot+cold: a lost WAL leaves a trailing gap in cold, a power cut a second maybe-lost range; cold refuses it",
        invariant: model::inv::LIVENESS_EXPORT,
        generator: 1,
    },
    Regression {
        seed: 5044,
        keep: &[3, 8, 15, 21, 22],
        case: "hot+cold, lost data directory: cold refuses the gap marker's PUT once and resume_topic cannot be retried",
        invariant: model::inv::OPEN_FAILED,
        generator: 1,
    },
    Regression {
        seed: 5001,
        keep: &[107, 110, 112, 113, 117],
        case: "cold behind `PagedCold` (reads paged as a custom tier's), the object after [0, 1) damaged, WAL and warm \
               gone by retention: a read from 0 fails before delivering the intact record 0 (paged_records)",
        invariant: model::inv::READ_FAILED,
        generator: 1,
    },
    Regression {
        seed: 5015,
        keep: &[103, 111, 113, 115],
        case: "a model gap, not a store bug: the model's reader, after failing in a recorded gap, skipped to the end of \
               an older, longer maybe-lost report, past records acknowledged after the operator resumed the topic",
        invariant: model::inv::MISSING,
        generator: 1,
    },
    Regression {
        seed: 5069,
        keep: &[21, 22],
        case: "degrade, lost WAL: warm lacks the maybe-lost offsets no tier holds and refuses every later batch",
        invariant: model::inv::LIVENESS_FLUSH,
        generator: 1,
    },
    Regression {
        seed: 5046,
        keep: &[137, 139, 167, 168, 184, 185, 188, 190, 191, 193],
        case: "degrade, lost data dir, resumed topic: the WAL is not moved to the resume point; a refused batch is \
               served once retention empties the WAL",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 5184,
        keep: &[167, 169, 170, 171, 172],
        case: "degrade, power cut with warm down: opened from the WAL alone, warm's records skipped as maybe lost; \
               warm can never be continued",
        invariant: model::inv::LIVENESS_FLUSH,
        generator: 1,
    },
    Regression {
        seed: 5022,
        keep: &[143, 152, 154, 155],
        case: "fail, WAIT short, then the whole data directory lost: the batch replayed from warm is served unconfirmed",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 5085,
        keep: &[143, 147, 148, 157, 159],
        case: "fail, WAIT short, then the state directory lost: the WAL's unconfirmed batch is served",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 7183,
        keep: &[196, 197, 199],
        case: "hot only, a lost WAL then a lost state directory: the empty WAL kept no record of \
               where it continued and the topic restarted at 0",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 9015,
        keep: &[103, 105, 111, 117, 118],
        case: "a lost WAL; the open fails recording the gap in cold after starting the WAL past \
               the loss, and the next open reports nothing",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 9325,
        keep: &[84, 85, 86, 88, 90, 93],
        case: "degrade, fsync never, a power cut, the open refused (warm down), the state \
               directory lost: the WAL's cut-back end was taken as exact and acknowledged offsets reused",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 11735,
        keep: &[10, 17, 18, 23, 25, 27, 32, 33, 34],
        case: "a lost WAL; the open fails reading cold for warm's back-fill after the WAL was \
               already started past the loss, and the next open reports nothing",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 11800,
        keep: &[32, 33, 47, 48, 63, 64, 70, 73, 75, 76, 79],
        case: "degrade, warm behind a WAL gap after a restart, nothing queued for it: WAL \
               retention deleted records only the WAL held",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 20066,
        keep: &[101, 102, 103, 112, 115, 116, 121],
        case: "degrade, warm restarted past a gap (dropping what the WAL held), then the WAL \
               lost: the offsets below warm's empty stream went unreported",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 30000671,
        keep: &[69, 70, 73, 74, 75, 84, 98, 99],
        case: "degrade, a power cut and a lost state directory with warm down: the store opened \
               without warm, which alone held acknowledged records, and the resume skipped them",
        invariant: model::inv::MISSING,
        generator: 1,
    },
    Regression {
        seed: 30000943,
        keep: &[125, 126, 127, 136, 137, 138, 140],
        case: "a lost WAL; the open fails recording cold's gap after replaying warm into the WAL, and \
               the next open, finding the WAL holding the topic, reports nothing",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 11119,
        keep: &[152, 159, 160, 175],
        case: "degrade, acks warm never confirmed (WAIT short, failover), then a lost data directory; the topic reopened at 0",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 40000846,
        keep: &[9, 30, 32, 33, 34, 37, 39, 65, 70, 78, 79],
        case: "degrade, a WAIT short, a clean restart: WAL retention trusted warm's range, a failover took the only copy",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 50001453,
        keep: &[72, 74, 75, 76, 78, 80, 82, 88, 125, 139],
        case: "fail, a refused batch, warm trimmed and failed over, a lost state directory: the resume served the refused batch",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 60001204,
        keep: &[28, 29, 38, 39, 44, 45, 56, 57, 58, 61, 63, 83, 84, 85, 86, 87, 88, 90, 96, 156, 157],
        case: "a damaged sealed WAL segment was exported as it was; with warm down, cold's damaged copy failed the read",
        invariant: model::inv::READ_FAILED,
        generator: 1,
    },
    Regression {
        seed: 70001527,
        keep: &[55, 56, 58, 60, 63, 64, 65],
        case: "degrade, a resume with warm's batches queued to be confirmed again: the commit point stayed below the skipped offsets, the live tail hit the gap",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 70005541,
        keep: &[0, 1, 18, 24, 26, 31, 32, 34, 39, 50, 51],
        case: "a damaged WAL batch with warm (holding it intact) down: the read failed Corruption, not Unavailable",
        invariant: model::inv::READ_FAILED,
        generator: 1,
    },
    Regression {
        seed: 80003588,
        keep: &[8, 9, 11, 17, 27, 29, 31],
        case: "degrade, a lost data directory, an open that failed after replaying warm: the next took the replayed WAL for evidence of the end",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 90014473,
        keep: &[0, 2, 3, 5, 12, 27, 28],
        case: "fail, a live tail from a commit point inside a WAL segment whose first batch is damaged: the tail failed Corruption though warm held the records",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 90005027,
        keep: &[13, 15, 20, 38, 40, 43, 44, 47, 48, 49, 54, 62, 68, 69, 71],
        case: "the WAL's and cold's copies of a batch damaged, warm (holding it intact) down: the read failed Corruption, not Unavailable",
        invariant: model::inv::READ_FAILED,
        generator: 1,
    },
    Regression {
        seed: 100012370,
        keep: &[157, 158, 159, 170, 171, 180, 181],
        case: "fail, a refused batch in a WAL segment then damaged, warm empty: the commit point jumped over the never-confirmed records when warm took the next batch",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 200013426,
        keep: &[54, 55, 56, 57, 60, 72, 73],
        case: "fail, a damaged WAL batch warm never confirmed: the commit point jumped over it, the live tail met the damage",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 200013780,
        keep: &[2, 6, 10, 15, 18, 19, 20, 28, 29],
        case: "as seed 200013426 (a damaged WAL batch warm never confirmed: the commit point jumped over it), fsync always, background exporter on",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 200028642,
        keep: &[151, 153, 156, 158, 165, 169, 172, 173, 174, 176],
        case: "fail, the commit point stopped at a recorded WAL gap, the live tail started inside it",
        invariant: model::inv::LIVE_TAIL,
        generator: 1,
    },
    Regression {
        seed: 200016869,
        keep: &[0, 1, 2, 7, 9, 10, 11],
        case: "degrade, a warm marker found on the primary but never confirmed; a failover took it, a lost data directory restarted the topic at 0",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 200083186,
        keep: &[8, 18, 28, 33, 34, 41, 42, 48, 54, 56],
        case: "a recovery that failed after finding maybe-lost offsets; the next one, over a WAL replayed from warm, handed them out again",
        invariant: model::inv::TWO_CONTENTS,
        generator: 1,
    },
    Regression {
        seed: 300006155,
        keep: &[108, 109, 110, 116, 117, 119, 122, 135, 137, 166],
        case: "a recovery that found a hole between cold and warm failed; the state directory (its kept losses) was lost; the next never reported the hole",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 400028696,
        keep: &[6, 38, 46, 50, 53, 55, 56, 59],
        case: "a WAL gap over offsets warm still held: the read ended NotFound instead of serving warm's records",
        invariant: model::inv::READ_FAILED,
        generator: 1,
    },
    Regression {
        seed: 400078426,
        keep: &[14, 18, 19, 20, 22, 24, 26, 27, 33, 34, 39, 44, 46],
        case: "warm restarted past a refused batch whose WAL copy was damaged and past the refused batch after it; the next recovery took the restarted stream's start for committed and served it",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 500091248,
        keep: &[43, 44, 46, 47, 59, 74, 75, 76],
        case: "a model gap, not a store bug: warm's confirmed payloads shared a WAL segment's bytes, which a later damage step changed in place",
        invariant: model::inv::UNACKED_SERVED,
        generator: 1,
    },
    Regression {
        seed: 500055659,
        keep: &[10, 11, 14, 16, 17, 19, 20, 43, 44, 45, 48, 51],
        case: "warm restarted at the next batch past intact WAL records after a damaged segment; a power cut of the WAL's unsynced tail then left the WAL ending below warm's start and the store refused to open",
        invariant: model::inv::OPEN_FAILED,
        generator: 1,
    },
    Regression {
        seed: 500021117,
        keep: &[146, 150, 152, 153, 156, 157, 163, 164, 168, 169, 172, 175, 179],
        case: "a failover emptied warm; recovery's back-fill stopped at a WAL gap, and with the stream empty no floor was held: warm took a later batch and WAL retention deleted records it never got",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 600064489,
        keep: &[93, 94, 111, 112, 114, 127, 128, 129, 145, 148, 149, 150, 151, 152, 153, 158, 159],
        case: "warm was down when the store opened; once it answered, its back-fill stopped at offsets no tier holds and no floor was held, so WAL retention deleted the records after them, which only the WAL had",
        invariant: model::inv::UNREPORTED,
        generator: 1,
    },
    Regression {
        seed: 800000677,
        keep: &[170, 171, 192, 193, 194, 199],
        case: "warm's back-fill stopped at a reported loss and the writer held the warm floor there; with no more appends the hold kept every WAL segment after it, although cold held them all",
        invariant: model::inv::LIVENESS_RETENTION,
        generator: 1,
    },
    Regression {
        seed: 800031343,
        keep: &[151, 152, 159, 161, 170, 186],
        case: "as seed 800000677 (hot + warm + cold, degrade)",
        invariant: model::inv::LIVENESS_RETENTION,
        generator: 1,
    },
    Regression {
        seed: 800078152,
        keep: &[170, 171, 183, 184, 185, 194],
        case: "WAIT short, export, power cut (a maybe-lost gap), failover empties warm; after the reopen the held warm floor kept the WAL segment cold held",
        invariant: model::inv::LIVENESS_RETENTION,
        generator: 1,
    },
    Regression {
        seed: 5000000,
        keep: &[167, 168, 170, 173],
        case: "a group met a rotation that failed on the lost WAL directory; the WAL stored the first batch and refused the second, and the writer answered both producers with an error, though the first was committed",
        invariant: model::inv::UNACKED_SERVED,
        generator: 3,
    },
    Regression {
        seed: 8000183,
        keep: &[36, 59, 60, 64, 68, 69, 71, 72, 79, 82, 99],
        case: "under degrade a group the WAL refused (its fsync failed) that warm took, warm down, a crash with a power cut; the store reopened degraded at the WAL's end and handed out offsets warm held other records at",
        invariant: model::inv::TWO_CONTENTS,
        generator: 4,
    },
    Regression {
        seed: 8001416,
        keep: &[192, 194, 195, 196, 197, 198],
        case: "a lost WAL replayed from warm, the replay failed half-way (a WAL fsync failure); the next recovery trusted the WAL replayed in part (fsync always) and reused offsets acknowledged on the lost WAL alone",
        invariant: model::inv::TWO_CONTENTS,
        generator: 4,
    },
    Regression {
        seed: 8000976,
        keep: &[180, 185, 187, 190, 193, 195, 196, 199],
        case: "a degraded open skipped offsets (RecoveryReport::skipped); the model's reader must move past them as past a reported loss (a model gap, not a store bug)",
        invariant: model::inv::UNREPORTED,
        generator: 4,
    },
    Regression {
        seed: 1796426533093494512,
        keep: &[79, 86, 88, 92, 98, 99, 105],
        case: "hot+cold, fsync always; a batch whose fsync failed, a crash (state dir lost), the reopened WAL served the unsynced batch without making it durable; a power cut took it, and its offsets went to other records",
        invariant: model::inv::TWO_CONTENTS,
        generator: 4,
    },
    Regression {
        seed: 12024072,
        keep: &[33, 34, 35, 36, 39, 44, 45, 47, 48, 49],
        case: "a degraded open of a WAL that ended before the checkpoint (an open that failed after replaying part of warm) reported records warm held as lost and skipped past them; later a replay into a lost WAL stopped at the skipped offsets and left an acknowledged record in warm alone",
        invariant: model::inv::UNREPORTED,
        generator: 4,
    },
    Regression {
        seed: 12005592,
        keep: &[66, 76, 78, 81, 83],
        case: "the armed WAL fsync failure fired during an open (the interval timer after a replay) and failed the new writer; the model took it for the old process's (a model gap, not a store bug)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 4,
    },
    Regression {
        seed: 12005914,
        keep: &[115, 116, 119, 120, 137],
        case: "a second WalFsyncFails re-armed the fault and reset its count before the model noted that the first had fired (a model gap, not a store bug)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 4,
    },
    Regression {
        seed: 13006174,
        keep: &[3, 4, 7, 12, 13, 14, 18],
        case: "acknowledged on a WAL that was then lost (degrade, warm behind); a recovery replayed warm into the new WAL and failed (cold down); the state directory was lost; the next recovery took the WAL rebuilt in part for one vouching for its end and reused offsets acknowledged on the lost WAL",
        invariant: model::inv::TWO_CONTENTS,
        generator: 4,
    },
    Regression {
        seed: 14005661,
        keep: &[0, 120, 123, 125, 132, 134, 145, 149, 150, 156, 159],
        case: "a group the WAL refused (its fsync failed) that warm took, warm down, the state directory lost; the degraded open continued at the WAL's end (no reservation to continue at) and handed out offsets warm held other records at",
        invariant: model::inv::TWO_CONTENTS,
        generator: 4,
    },
    Regression {
        seed: 14008894,
        keep: &[10, 23, 27, 28, 29, 31, 32, 41, 42],
        case: "the armed WAL fsync failure fired between an open and the operator's resume of the fenced topic (the interval timer after a replay); the resume was refused until a reopen, as it must be, and the runner called that a failed open (a model gap, not a store bug)",
        invariant: model::inv::OPEN_FAILED,
        generator: 4,
    },
    Regression {
        seed: 14012903,
        keep: &[84, 86, 108, 110, 114, 115, 117, 118, 132],
        case: "a degraded open skipped offsets and cold recorded them as its trailing gap; the data directory was lost; recovery replayed warm's never-acknowledged records inside that gap into the empty WAL, and the export (and WAL retention) stopped there for good",
        invariant: model::inv::LIVENESS_EXPORT,
        generator: 4,
    },
    Regression {
        seed: 14003001,
        keep: &[160, 163, 164, 167, 187, 189, 192, 193],
        case: "hot+warm; warm restarted past offsets a degraded open skipped, then a power cut; recovery's back-fill of the empty warm stream stopped at the WAL's maybe-lost gap and held the warm floor there for good, so WAL retention kept every later segment",
        invariant: model::inv::LIVENESS_RETENTION,
        generator: 4,
    },
    Regression {
        seed: 26015746,
        keep: &[
            0, 2, 4, 7, 8, 11, 12, 16, 19, 23, 25, 29, 32, 33, 39, 40, 44, 50, 53, 54, 55, 56, 60, 63, 64,
            65, 68, 69, 70, 71, 72, 80, 85, 86, 88, 91, 101, 102, 108, 109, 110, 111, 112, 113, 121, 122,
            123, 124, 132, 133, 134, 135, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 152,
            153, 154, 155, 156, 157, 158, 159,
        ],
        case: "degrade, warm behind after an outage, the WAL's copy deleted by retention (cold held it), then cold's object damaged; the full check's read failed loudly on the damaged object, and the writer back-filled warm from its pending batches while the reader ran, so the model, looking after the read, took warm's new copy for one the reader had missed (a model gap, not a store bug)",
        invariant: model::inv::MISSING,
        generator: 4,
    },
    Regression {
        seed: 30000028,
        keep: &[22, 30, 31, 35, 36, 38, 40, 41, 42],
        case: "a warm-outage burst: degrade, a group the WAL refused (its fsync failed) that warm took, warm down, a crash; the degraded open skipped [1, 1025); the state directory was lost (its `.unacked` file with it); warm answered, and the read from the start served warm's never-acknowledged record at 1 (the WAL's `unacked` marker keeps the skip)",
        invariant: model::inv::SKIPPED_SERVED,
        generator: 5,
    },
    Regression {
        seed: 60000000,
        keep: &[71, 72, 74, 75, 85, 86, 89, 93, 97],
        case: "fsync never, a power cut by page: a page past the durable length not written back, the size persisted, an intact batch in a later page; recovery called the hole damage inside the data and kept the topic aside (a hole before written pages wedged the topic)",
        invariant: model::inv::REFUSED_UNDAMAGED,
        generator: 6,
    },
    Regression {
        seed: 60000010,
        keep: &[165, 166],
        case: "fsync never, a power cut before a rotation's seal ran: the new segment, never fsynced, came back with its size and no data (zeros, header included); recovery refused it as not a segment (bad magic) and kept the topic aside",
        invariant: model::inv::REFUSED_UNDAMAGED,
        generator: 6,
    },
    Regression {
        seed: 64000015,
        keep: &[22, 23, 28, 29],
        case: "fsync never, degrade: [6, 12) acknowledged by the WAL alone while warm was down, a power cut before a rotation's seal took the first segment's data; the next open removed the segment (cutting the log back) and failed on the unreachable warm; the open after it found a log that looked whole, took its end as exact and reported nothing of [6, 12) (the WAL's `cut` marker keeps the evidence until recovery records it)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 64000066,
        keep: &[77, 78, 80, 84],
        case: "fsync never, degrade: a crash with a power cut left [2, 1026) skipped as maybe lost (a WAL gap); [1026, 1032) acknowledged into the segment after it, a power cut before its seal took them (a torn point, its gap merged with the skip's); warm held them, but the export asked warm for the merged gap from its start, found warm starting later and recorded all of [2, 1032) lost in cold (the export now splits a WAL gap where warm's copy starts)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 64001801,
        keep: &[155, 163, 165, 177, 195, 199],
        case: "fail, fsync never: [3, 8) refused (warm's WAIT fell short: the entries on the primary, unconfirmed); a power cut before a seal took the WAL's first segment, so the WAL started at 8; recovery took that start for committed (as after retention) and a close and reopen served warm's unconfirmed [3, 8) (a cut WAL's start is no evidence of commitment, and the cut stays on record until the commit point passes it)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 6,
    },
    Regression {
        seed: 64001801,
        keep: &[153, 155, 158, 159, 160, 162, 175, 176, 177, 188, 190, 195, 198, 199],
        case: "as the schedule above, with WAL retention after the cut: the commit point held at 5 before the torn point [5, 42) warm had not confirmed, and retention deleted the segment [0, 5) with the gap after it, so the reopened WAL started at 42 and recovery took that start for committed (retention no longer moves the WAL's start past the commit point)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 6,
    },
    Regression {
        seed: 5000114,
        keep: &[8, 9, 10],
        case: "hot alone, fsync interval: [0, 4) acknowledged, the timer's fsync failed and lost its pages, the state directory was lost; the reopened WAL cut its zeroed tail back to nothing, and recovery took the topic for one never written and handed offset 0 out again (a WAL cut back to nothing with no state file now fences the topic)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 8,
    },
    Regression {
        seed: 66000462,
        keep: &[159, 161, 167, 169, 176, 179],
        case: "hot+warm (no cold), fsync never: a power cut before a seal left a torn point [21, 24) that warm held; the warm trim kept only the newest sealed segment's offsets and trimmed warm's copy, the only one (without cold, warm is never trimmed past a WAL gap it holds)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 66000829,
        keep: &[186, 190, 191, 192, 193, 194, 195, 196, 197],
        case: "hot+cold, fsync never: a power cut before a rotation's seal ran kept the sealed segment's footer pages and lost a page of its batches; the segment opened as sealed (its footer whole), was exported to cold, and reading it failed inside the committed range (the last sealed segment's batches are now checked at open under never/interval)",
        invariant: model::inv::READ_FAILED,
        generator: 6,
    },
    Regression {
        seed: 9000178,
        keep: &[10, 13, 23, 44],
        case: "fail, fsync never: a power cut before a seal took the WAL's first segment [0, 21), which warm held; with warm down the export let cold's first segment start at 21, past warm's only copy (cold's first segment now waits for warm to answer)",
        invariant: model::inv::UNREPORTED,
        generator: 8,
    },
    Regression {
        seed: 98001912,
        keep: &[13, 15, 16, 19, 21, 23, 86, 88, 89, 90],
        case: "hot+cold, degrade, fsync never: a power cut before a seal took [18, 43); the open that found it recorded the loss in cold (the gap marker's PUT applied, its answer lost) and failed; the state directory was lost; the next open reported nothing, cold's trailing gap the only record (cold's trailing gap is now reported again when the state directory is lost, as when the WAL is)",
        invariant: model::inv::UNREPORTED,
        generator: 9,
    },
    Regression {
        seed: 104002451,
        keep: &[135, 136, 139, 142, 143, 144],
        case: "a model gap, not a store bug: hot+warm, fail, fsync interval, failed fsyncs lose pages: [3, 18) acknowledged, a failover to a replica behind took warm's confirmed copies, then a clean close's fsync failed and lost the WAL's; with no append refused the model never noted the failure and called the reuse of offset 3 a violation (a failure is now noted whenever the process ends)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 11,
    },
    Regression {
        seed: 104002057,
        keep: &[0, 1, 2, 28, 30, 37],
        case: "a model gap, not a store bug: hot+warm, degrade, warm down: [0, 16) acknowledged on the WAL alone, the state directory lost, a failover to a replica behind took warm's confirmed topic marker, then the WAL was lost: every copy and every piece of evidence gone, in an order the model did not excuse",
        invariant: model::inv::TWO_CONTENTS,
        generator: 11,
    },
    Regression {
        seed: 100009087,
        keep: &[33, 40, 41, 42, 43],
        case: "a model gap, not a store bug: hot+warm, fail, fsync interval, failed fsyncs lose pages: a failover to a replica behind took warm's confirmed copy of [1, 2) while the WAL held it unsynced, then the interval's fsync failed while a rotation was awaited and lost its pages; no append was refused to show the failure, so the model never counted the WAL's copy lost and called the reuse of offset 1 a violation (the model now notes a failed fsync after such a wait too)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 11,
    },
    Regression {
        seed: 100008752,
        keep: &[3, 4, 6, 7, 57],
        case: "a model gap, not a store bug: hot+warm, degrade, warm down: [0, 8) acknowledged on the WAL alone, the data directory lost, then a failover to a replica behind took warm's confirmed topic marker, the last evidence that offsets were handed out; the model excused that double fault only when the state directory went after the marker, and called the reuse of offset 0 a violation (either order is excused now)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 11,
    },
    Regression {
        seed: 100003362,
        keep: &[
            32, 35, 46, 50, 53, 54, 59, 61, 62, 64, 66, 68, 70, 73, 77, 87, 88, 90, 92, 93, 94, 95, 109, 112,
            114, 115, 119,
        ],
        case: "hot+warm+cold, degrade, cold behind a defaults-only wrapper: the LIST lagged the export of [21, 111) but showed [0, 21) and [111, 134); after WAL retention and warm's trim a reopened store's manifest had a hole there, and reads of [21, 111) failed inside the committed range (the pointer chain now completes a hole between two listed segments)",
        invariant: model::inv::READ_FAILED,
        generator: 8,
    },
    Regression {
        seed: 73001299,
        keep: &[47, 49, 56, 58],
        case: "hot+warm+cold, fail, fsync never: batches refused (warm's WAIT fell short, the entries on the primary), then a power cut before a seal took the WAL's first segments, so the WAL started at 27 past warm's end 13; warm could be restarted past [13, 27) only once cold held its copy of [0, 13), and the exporter stored nothing before the WAL's first segment was committed, which waited for warm (the exporter now stores what lies below a segment once the commit point reaches the segment's start)",
        invariant: model::inv::LIVENESS_EXPORT,
        generator: 6,
    },
    Regression {
        seed: 99000913,
        keep: &[182, 184, 186, 187],
        case: "hot+warm+cold, fail, fsync never: batches refused during a warm outage, then a power cut before a seal left the WAL empty at 7 past warm's end 4; the offsets between, reported maybe lost and held by no tier, were no WAL gap, so the commit point stopped at 4 and nothing below the WAL's segment was exported (the commit point now passes the losses recovery found no tier holding)",
        invariant: model::inv::LIVENESS_FLUSH,
        generator: 6,
    },
    Regression {
        seed: 99000913,
        keep: &[177, 182, 184, 186, 187],
        case: "hot+warm+cold, fail, fsync never: as the schedule above, but the power cut left a torn point [5, 22) in the WAL whose [5, 19) only warm held; the exporter stored warm's copy in cold, yet warm was never restarted past [19, 22): a WAL gap counted as held only by warm even where cold held its records (cold's records now count)",
        invariant: model::inv::LIVENESS_FLUSH,
        generator: 6,
    },
    Regression {
        seed: 97002125,
        keep: &[66, 84, 92, 94, 96, 103, 105, 106, 108, 110],
        case: "hot+warm+cold, degrade: cold's LIST showed the second exported segment [21, 26) before the first [0, 21) (each object's listing lagging its own write); after a lost WAL the manifest started at 21, warm was trimmed to it, and reads of [0, 21) answered that no tier held them (the pointers from 0 now complete a listing before its first segment)",
        invariant: model::inv::READ_FAILED,
        generator: 8,
    },
    Regression {
        seed: 5000307,
        keep: &[142, 143, 154, 158, 160, 161],
        case: "degrade, fsync never: cold held [0, 1), [1, 7) acknowledged into a rebuilt WAL and warm; a power cut before a seal took the WAL's first segment and recovery skipped the WAL to the reservation; it recorded [1, 1027) lost in cold, warm's copy of [1, 7) included, because warm's copy ended before the WAL's new first offset (warm's copy now keeps the gap out of cold until the exporter stores it)",
        invariant: model::inv::UNREPORTED,
        generator: 8,
    },
    Regression {
        seed: 63001250,
        keep: &[120, 121, 129, 133, 134, 136],
        case: "fail, fsync never: batches refused (warm's WAIT fell short, the entries on the primary) and a power cut before a seal left them as a torn point warm held; recovery queued warm's copies to be confirmed again, and the commit point passed over the WAL's gap as over offsets that hold no record, so readers served warm's unconfirmed copies (the commit point no longer passes a batch still waiting for warm)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 6,
    },
    Regression {
        seed: 67000739,
        keep: &[96, 98, 118, 138, 139],
        case: "fail, fsync never: a power cut before a seal left a torn point [8, 24) warm held; the open that recorded it was not the one that exported it: after a restart, with warm down, the export recorded [8, 24) lost in cold, since only the open that found a torn point knew it for one (the WAL's gap marker now says it records a torn point, and the export waits for warm's copy)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 67000580,
        keep: &[72, 74, 75, 141, 145, 147, 152, 161, 162, 163, 164],
        case: "degrade, fsync interval: a power cut before a seal, warm restarted past the offsets the open skipped (dropping its copy of [12, 20), which cold lacked), the WAL lost while warm was down; an open replaying warm into the lost WAL recorded [12, 1036) lost in cold and failed (cold errors), and the state directory, with its record of the losses, was lost; the next open found the WAL rebuilt and reported nothing of [12, 1036) (cold's trailing gap is now reported again while the WAL is lost or rebuilt)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 73001098,
        keep: &[130, 141, 145, 146, 147],
        case: "degrade, fsync never: the WAL lost while running, rebuilt from warm at the next open, then cut by a power cut before a seal (its replayed segment never fsynced), so it started at 45 with cold ending at 12 and warm holding [0, 46); the state directory lost, the topic fenced, and the operator's resume recorded [12, 45) lost in cold, warm's acknowledged copy included (a resume now skips in cold only what warm does not hold)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 73000473,
        keep: &[0, 1, 3, 5, 6, 23, 25],
        case: "fail, fsync never: refused batches and a power cut before a seal left a torn point [10, 28) no tier held; the reopened topic kept its commit point at 10, below the gap, with no batch to commit, so a live tail opened from the latest offset started inside the gap and ended NotFound instead of receiving the next append (the commit point now moves over the holes it reaches when the topic opens)",
        invariant: model::inv::LIVE_TAIL,
        generator: 6,
    },
    Regression {
        seed: 9000092,
        keep: &[40, 41, 42, 43, 44, 48, 50, 54, 88],
        case: "fail: three batches refused (warm's WAIT fell short, the entries on the primary alone); warm's answers lost dropped the connection, and the writer's identical retry confirmed them on the fresh connection, where a WAIT with no write of its own counts nothing; they were served; a failover lost them, and after a lost data directory recovery from warm handed their offsets out again (the retry's WAIT follows a SET of its own, tier-warm's `confirm_held`; `Revert::WarmWaitAlone` puts WAIT alone back)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 9,
    },
    Regression {
        seed: 200002882,
        keep: &[87, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 119, 127, 128, 129, 139],
        case: "a model gap, not a store bug: hot+warm, degrade, interval: [1032, 1037) acknowledged on warm and the WAL, a power cut took the WAL's copy and the reopen wrote warm's back into it; warm was then trimmed, and the model, which counts every WAL copy a power cut may reach as destroyed, had the full check's reader restart after a failure past the WAL's copy and called [1032, 1037) lost unreported (the reader now never restarts past an offset the WAL's range claims)",
        invariant: model::inv::UNREPORTED,
        generator: 13,
    },
    Regression {
        seed: 200013768,
        keep: &[38, 39, 40, 41, 42, 44, 45, 46, 47, 48, 49, 50, 51, 55, 57, 58, 59, 60, 61, 62, 64, 79],
        case: "a model gap, not a store bug: as 200002882 with the WAL's own copy: degrade, warm down, [1028, 1037) acknowledged on the WAL alone and sealed (fsynced) by the next open; a later power cut did not reach it, but the model counted it destroyed and its reader restarted past it",
        invariant: model::inv::UNREPORTED,
        generator: 13,
    },
    Regression {
        seed: 200007126,
        keep: &[4, 6, 9, 12, 16, 17, 20, 31],
        case: "a model gap, not a store bug: hot+cold, fail, never: a WAL segment damaged, exported as it was under refused cold writes (the object stored, its successor pointer refused, so the running store's cold did not list it), then the cold object damaged again: the read failed with `Corruption` naming the WAL's damaged segment, and the model demanded cold's object be named (either damaged copy is a true answer when cold's was exported from the damaged segment)",
        invariant: model::inv::READ_FAILED,
        generator: 13,
    },
    Regression {
        seed: 220023971,
        keep: &[0, 1, 4, 18],
        case: "two topics, hot+cold, degrade, fsync interval: [0, 12) acknowledged, a power cut took every batch; the reopen recovered topic u (maybe lost [0, 1036) up to the reservation, kept in the state directory; the emptied WAL made to continue at 1036) while the other topic's recovery failed on cold's errors, which failed the whole open; the state directory was then lost, and the next open found a WAL starting at 1036 with nothing below it, fenced the topic and reported nothing of [0, 1036) (recovery now keeps its losses in the WAL's directory too, the `losses` marker; `Repair::LossesInWal` reverted puts the state directory's copy alone back)",
        invariant: model::inv::UNREPORTED,
        generator: 13,
    },
    Regression {
        seed: 220092267,
        keep: &[0, 14, 30, 34, 35, 43, 45, 53, 54, 55, 93, 94],
        case: "hot+warm+cold, degrade, fsync always, WAIT short: [0, 6) exported, [6, 14) acknowledged on the WAL (warm's copy unconfirmed), a failover to a replica behind emptied warm and took its topic marker, the state directory and the WAL lost; an open found no marker, took the topic for a new one and wrote its commit point of 0, then failed recording warm's marker (WAIT short); the next open took that checkpoint for a surviving state directory and continued at cold's end, handing [6, 14) out again (a topic cold or warm holds is never taken for a new one: its end is unknown, the topic fenced; `Repair::NewTopicOnlyWhenNoTierHolds` reverted puts it back)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 13,
    },
    Regression {
        seed: 230048725,
        keep: &[1, 2, 3, 42, 72, 90, 91, 107, 124, 125],
        case: "hot+warm+cold, fail, WAIT short: [0, 24) refused and kept in one WAL segment, which was then damaged; a failover to a replica behind emptied warm's stream (no next key: it takes any base); after a crash warm's back-fill stopped at the damage, and the next batch, [24, 29), was refused but sent to warm, which took it and started at 24; the next open took warm's start for committed and served the refused [0, 8) (the writer no longer sends warm a batch past records it lacks that no tier gives it; `Repair::WarmContinuesItsHold` reverted puts it back)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 13,
    },
    Regression {
        seed: 74010453,
        keep: &[0, 1, 5, 7, 16, 19, 22],
        case: "hot+warm+cold, fail, fsync never: [0, 2) refused during a warm outage and kept in one WAL segment, which was then damaged; the reopen's back-fill of the empty stream stopped at the damage, and the next batch, [2, 4), was taken by warm, which started there; the next open took warm's start for committed and served the refused record at 0 (as 230048725)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 6,
    },
    Regression {
        seed: 220082574,
        keep: &[120, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 138, 139, 142, 148],
        case: "a model gap, not a store bug: hot+warm, fail, fsync interval: after a WAL fsync failed (losing its pages), refused batches [34, 46) were confirmed by warm's retries and committed; a failover to a replica behind took warm's copy of [42, 46), and the crash after it the WAL's (the next open cut the pages the failed fsync lost): both copies gone, a double fault beyond the guarantee, after which 42 was handed out again; the model counted the WAL as holding [42, 46) at the failover because the running WAL still served it (the WAL's copies a failed fsync lost since the open are now counted destroyed at a failover)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 13,
    },
    Regression {
        seed: 140000660,
        keep: &[16, 21, 30, 31, 37],
        case: "two topics, hot+cold, fsync never: a power cut before a seal took [30, 41) of topic t; the reopen recovered t (the loss recorded as a WAL gap, a gap marker in cold and the state directory's kept losses) while topic u's recovery failed on cold's errors, which failed the whole open; then the state directory was lost, and the next open reported nothing: cold's trailing gap lay inside the WAL's range, which counted its recorded gaps as held (the WAL's torn points are now reported again once the state directory is lost)",
        invariant: model::inv::UNREPORTED,
        generator: 13,
    },
    Regression {
        seed: 140000052,
        keep: &[96, 98, 99],
        case: "two topics, hot+cold, fsync interval: a power cut took [0, 3) of topic t; the reopen recovered t (its losses recorded, the report handed out with the topic) while topic u's recovery failed on cold's errors, which failed the whole open; the next open reported nothing of t's loss (a topic's kept losses are removed only once the store's open succeeds)",
        invariant: model::inv::UNREPORTED,
        generator: 13,
    },
    Regression {
        seed: 130015493,
        keep: &[8, 9, 16, 17, 20, 21, 24, 25, 26, 38, 39, 40, 55, 56, 67, 127, 131],
        case: "degrade, WAIT short: [14, 17) acknowledged on the WAL alone (warm's copy on the primary, unconfirmed); the WAL lost, recoveries failing on cold's errors while the state directory was lost too; one of them saw warm's copy and recorded only [12, 14) and [17, 1041) as losses; a failover took warm's copy, and the next open reported nothing of [14, 17) (with the WAL lost, every offset below the next one past cold's log that no tier holds and no report names is now reported maybe lost)",
        invariant: model::inv::UNREPORTED,
        generator: 9,
    },
    Regression {
        seed: 130000656,
        keep: &[1, 11, 21, 31, 33, 40, 55, 56, 87, 94, 96, 114, 117],
        case: "a model gap, not a store bug: degrade, a failover to a replica behind took warm's confirmed topic marker, the WAL was lost under the running store with [1, 16) acknowledged on it alone (warm down), then the state directory: a double fault beyond the guarantee, after which [1, 7) were handed out again; a degraded open then skipped [7, 1031) as unused, and the model called the lost acknowledged record at 7 unreported (records lost beyond the guarantee inside a skip are now forgotten, as when their offsets are reused)",
        invariant: model::inv::UNREPORTED,
        generator: 11,
    },
    Regression {
        seed: 120000015,
        keep: &[70, 71, 133, 136],
        case: "hot only, fsync interval: a store whose data directory is a sibling of this one's opened on the same topic with the default state directory `<parent>/router`, appended and closed cleanly, overwriting this store's checkpoint and offset reservation; a power cut before a seal took the WAL's unsynced tail, and recovery, bounded by the other store's reservation, handed out acknowledged offsets again (the state directory is locked by the store that holds it and names its owner; `Revert::SharedStateDir` puts the shared directory back)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 12,
    },
    Regression {
        seed: 9000139,
        keep: &[1, 2, 7, 8, 11, 12],
        case: "never: warm restarted past a gap, then a failover to a replica behind emptied its stream (its batches were the stream's only entries); the empty stream took the next group past the batches it lost, which only the WAL held, and a power cut took the WAL's tail: recovery found offsets no tier held and refused to open (each append names the offset it continues, the stream's next key, checked with the write in one server-side step; `Revert::WarmIgnoresNext` puts the unchecked append back)",
        invariant: model::inv::OPEN_FAILED,
        generator: 9,
    },
    Regression {
        seed: 91003425,
        keep: &[170, 171, 172, 183, 184, 191, 193, 199],
        case: "fail: a group whose WAIT fell short (on warm's primary, unconfirmed, above the commit point); the warm trim, bounded by the sealed segments and cold's end only, removed warm's copy of it, and a restart served the refused records (the warm trim never passes the commit point)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 9,
    },
    Regression {
        seed: 92004736,
        keep: &[14, 16, 18, 20, 24, 32, 33, 34, 39],
        case: "fail: as 91003425 in another shape: refused batches trimmed from warm by the warm trim, then served after a restart (the warm trim never passes the commit point)",
        invariant: model::inv::UNACKED_SERVED,
        generator: 9,
    },
    Regression {
        seed: 9001117,
        keep: &[90, 91, 93, 115, 117, 118, 119],
        case: "hot+warm: a failover to a replica behind took batches warm had confirmed; WAL retention, bounded by what the writer last knew warm held, deleted their segment: 18 acknowledged records gone, nothing reported (retention asks warm's range at each pass)",
        invariant: model::inv::UNREPORTED,
        generator: 9,
    },
    Regression {
        seed: 90006350,
        keep: &[56, 58, 98, 99],
        case: "as 9001117 in another shape: WAL retention deleted what a failover behind took from warm",
        invariant: model::inv::UNREPORTED,
        generator: 9,
    },
    Regression {
        seed: 91000153,
        keep: &[106, 113, 114, 117, 119],
        case: "as 9001117 in another shape: WAL retention deleted what a failover behind took from warm",
        invariant: model::inv::UNREPORTED,
        generator: 9,
    },
    Regression {
        seed: 80000357,
        keep: &[133, 134, 135, 136, 139],
        case: "hot+warm, degrade, fsync never: acknowledged [0, 9) on the WAL with warm holding [0, 3); a power cut before a seal took the WAL's first segment and left it starting, empty, at 9; without cold, recovery reported nothing between warm's end and the WAL's start (a cut WAL's start above warm's end is now reported without cold as with it)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 80004094,
        keep: &[48, 49, 53, 55, 56, 76, 78, 79],
        case: "hot+warm, degrade, fsync never: a WAIT short, [2, 9) acknowledged on the WAL alone; a power cut before a seal left a torn point [2, 9) whose only copy was warm's, never confirmed, and recovery did not report it; a failover took it (warm's unconfirmed copy of what a cut took from the WAL is now reported maybe lost under degrade)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 74002404,
        keep: &[34, 35, 37, 40, 41],
        case: "hot+warm+cold, degrade, fsync never: a WAIT short, [0, 12) acknowledged on the WAL alone; a power cut before a seal took the WAL's first segment; recovery reported [4, 12) but not [0, 4), held only by warm's unconfirmed copy, which a failover took (as 80004094, below the WAL's start)",
        invariant: model::inv::UNREPORTED,
        generator: 6,
    },
    Regression {
        seed: 60000269,
        keep: &[
            2, 9, 22, 23, 24, 28, 32, 34, 38, 40, 41, 44, 46, 48, 49, 54, 56, 57, 58, 59, 61, 70, 74, 81, 82,
        ],
        case: "a model gap, not a store bug: a lost data directory kept the durable lengths the old segment files' fsyncs had recorded, so a power cut treated bytes of a new file at the same path (replayed from warm, never fsynced) as durable and zeroed the page after them from mid-sector: recovery rightly called the hole damage (a removed directory's files now take their durable lengths with them)",
        invariant: model::inv::REFUSED_UNDAMAGED,
        generator: 6,
    },
    Regression {
        seed: 80051470,
        keep: &[
            0, 1, 2, 5, 6, 23, 25, 26, 30, 31, 38, 39, 40, 44, 47, 49, 51, 55, 61, 62, 63, 65, 67, 69, 75,
            76, 81, 96, 98, 106, 109, 114, 120, 122, 124, 127, 128, 130, 133, 134, 147, 148, 149, 150, 152,
            159,
        ],
        case: "a model gap, not a store bug: as 60000269 (a lost data directory, then a power cut)",
        invariant: model::inv::REFUSED_UNDAMAGED,
        generator: 6,
    },
    Regression {
        seed: 80090935,
        keep: &[
            0, 2, 3, 4, 5, 9, 10, 12, 13, 14, 15, 17, 19, 29, 30, 31, 52, 56, 58, 61, 62, 63, 65, 66, 68, 71,
            75, 78, 81, 82, 85, 92, 94, 98, 99, 101, 110, 118, 119, 120, 121, 123, 124, 125, 126,
        ],
        case: "a model gap, not a store bug: as 60000269 (a lost WAL, then a power cut)",
        invariant: model::inv::REFUSED_UNDAMAGED,
        generator: 6,
    },
    Regression {
        seed: 80018257,
        keep: &[22, 36, 38, 53, 56, 74, 99, 147],
        case: "fail, fsync never: refused batches [10, 13) kept on the primary by a WAIT that fell short; a power cut before a seal took the WAL's first segment and left it starting, empty, at 16, past warm's end; recovery took the start for committed and served the refused batches, and after a failover took them and the data directory was lost, their offsets were handed out again (under fail a cut WAL's start is no evidence of commitment when warm holds batches past the known point, wherever warm ends)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 6,
    },
    Regression {
        seed: 80039024,
        keep: &[16, 17, 18, 19, 22, 25, 26, 28, 29, 31, 65, 66, 128],
        case: "as 80018257: refused [78, 81) served after a cut left the WAL starting at 87, past warm's end; reused after a failover and a lost data directory",
        invariant: model::inv::TWO_CONTENTS,
        generator: 6,
    },
    Regression {
        seed: 5100210,
        keep: &[42, 44, 48, 50, 51, 52, 57],
        case: "hot+warm+cold, fail, warm owner epochs: the second topic's open found warm unreachable behind a cold outage and claimed its epoch; when its writer reached warm it claimed again, the answer lost while the server applied the INCR; the writer kept writing under the epoch it held, and warm's owner check refused every write — the topic fenced by its own claim, with no other writer (a claim whose answer is lost while the writer holds an earlier epoch is now `Unavailable`, retried as warm not reached; `Repair::ClaimAnswered` reverted puts it back)",
        invariant: model::inv::SELF_FENCED,
        generator: 14,
    },
    Regression {
        seed: 280001450,
        keep: &[9, 10, 12, 13, 14, 17, 18, 28, 29],
        case: "hot+warm+cold, fail, `always`, warm owner epochs: the open after a crash claims the topic's owner epoch, and the answer is lost while the server applies the INCR; the WAL still records the epoch before; [43, 61) is acknowledged; a failover to a replica behind takes [49, 61), which WAIT confirmed and whose only other copy is the WAL; the next open finds an epoch skipped and discards the WAL as if another node had claimed the topic in between: [49, 61) is gone and its offsets are handed out again (a claim records its claimer with the epoch, and an open keeps its WAL when this node claimed every skipped epoch; `Repair::OwnClaimsKeepWal` reverted puts the discard back)",
        invariant: model::inv::TWO_CONTENTS,
        generator: 14,
    },
];
