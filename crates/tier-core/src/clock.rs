//! Wall-clock time, injected: [`Clock`], the real [`SystemClock`], the settable
//! [`ManualClock`] of tests and the simulation, and [`SharedClock`], the handle a
//! configuration carries.
//!
//! The store reads the wall clock only through a [`Clock`]: a segment's creation time
//! (its header's `created_at`), a seal's time (`SegmentInfo::sealed_at`) and the "now"
//! the background retention passes. Clippy's `disallowed-methods` (the workspace's
//! `clippy.toml`) keeps `SystemTime::now` and `std::time::Instant::now` out of the rest
//! of the store's code; deadlines and waits use `tokio::time::Instant`, which a paused
//! runtime (the simulation's) controls.
//!
//! # A clock going backwards
//!
//! A wall clock may jump backwards (NTP, an operator, a VM restored from a snapshot).
//! Nothing the store does with it is unsafe then:
//!
//! 1. Retention by age never deletes a segment because the clock went back: a segment
//!    sealed "after" now has no age yet (`now.duration_since(sealed_at)` fails), so it
//!    is kept until the clock passes its seal time plus the retention time.
//! 2. Seal and creation times may go backwards from one segment to the next; nothing
//!    orders segments by them (segments are ordered by offset) and nothing asserts
//!    they increase.
//! 3. The timestamp index of a segment is built from record timestamps (a running
//!    maximum), not from the clock, so `offset_for_timestamp` is unaffected.

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::Timestamp;

/// A source of wall-clock time.
///
/// Contract: [`now`](Clock::now) may return any time, earlier or later than a previous
/// answer (see the module docs, "A clock going backwards"); it never blocks and never
/// fails.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
}

/// The operating system's wall clock (`SystemTime::now`): the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one place the store reads the real wall clock; everything else asks a `Clock`.
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that says what it is told: set it anywhere, move it forwards or backwards.
/// For tests and the simulation (it is public so that their crates can use it; a
/// deployment has no use for it).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tier_core::clock::{Clock, ManualClock};
///
/// let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
/// let clock = ManualClock::new(start);
/// clock.advance(Duration::from_secs(60));
/// clock.rewind(Duration::from_secs(3600));
/// assert_eq!(clock.now(), start - Duration::from_secs(3540));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock reading `start` until it is moved.
    pub fn new(start: SystemTime) -> Self {
        Self { now: Mutex::new(start) }
    }

    /// Sets the time to `t` (earlier or later than now).
    pub fn set(&self, t: SystemTime) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = t;
    }

    /// Moves the time forwards by `by` (saturating at the latest time `SystemTime` holds).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = now.checked_add(by) {
            *now = t;
        }
    }

    /// Moves the time backwards by `by` (saturating at the earliest time `SystemTime`
    /// holds).
    pub fn rewind(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = now.checked_sub(by) {
            *now = t;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A shared handle on a [`Clock`], as a configuration carries it. The default is the
/// [`SystemClock`].
///
/// Two handles are equal when they share one clock (the default handles all share
/// one), so a configuration holding one still compares by value.
#[derive(Clone)]
pub struct SharedClock(Arc<dyn Clock>);

static SYSTEM: LazyLock<SharedClock> = LazyLock::new(|| SharedClock(Arc::new(SystemClock)));

impl SharedClock {
    /// A handle on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self(clock)
    }

    /// The current time of the clock.
    pub fn now(&self) -> SystemTime {
        self.0.now()
    }
}

impl Default for SharedClock {
    fn default() -> Self {
        SYSTEM.clone()
    }
}

impl<C: Clock + 'static> From<Arc<C>> for SharedClock {
    fn from(clock: Arc<C>) -> Self {
        Self(clock)
    }
}

impl fmt::Debug for SharedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for SharedClock {
    fn eq(&self, other: &Self) -> bool {
        // Addresses only: the same object behind two vtables is the same clock.
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for SharedClock {}

/// `t` in milliseconds since the Unix epoch, as segment headers record times: negative
/// before the epoch, saturating at the ends of [`Timestamp`].
pub fn unix_millis(t: SystemTime) -> Timestamp {
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => millis(after),
        Err(e) => millis(e.duration()).saturating_neg(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_both_ways() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let clock = Arc::new(ManualClock::new(start));
        let shared = SharedClock::from(Arc::clone(&clock));
        clock.advance(Duration::from_secs(10));
        assert_eq!(shared.now(), start + Duration::from_secs(10));
        clock.rewind(Duration::from_secs(100));
        assert_eq!(shared.now(), start - Duration::from_secs(90));
        clock.set(SystemTime::UNIX_EPOCH - Duration::from_millis(1500));
        assert_eq!(unix_millis(shared.now()), -1500);
        assert_eq!(unix_millis(start), 1_000_000);
    }

    #[test]
    fn handles_are_equal_when_they_share_a_clock() {
        assert_eq!(SharedClock::default(), SharedClock::default());
        let manual = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let a = SharedClock::from(Arc::clone(&manual));
        assert_eq!(a, a.clone());
        assert_ne!(a, SharedClock::default());
        assert_ne!(a, SharedClock::from(Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH))));
    }
}
