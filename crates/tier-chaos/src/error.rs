//! [`ChaosError`]: why a scenario could not run (as opposed to a scenario that ran and
//! found lost or duplicated records, which is a [`ScenarioResult`](crate::ScenarioResult)).

use tier_core::TierError;
use tier_testkit::servers::HarnessError;

/// A scenario could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// A test server could not be started or reached.
    #[error("test server: {0}")]
    Harness(#[from] HarnessError),
    /// The store failed where the scenario needed it to work.
    #[error("{what}: {source}")]
    Tier {
        /// What the runner was doing.
        what: String,
        /// The store's error.
        #[source]
        source: TierError,
    },
    /// A local I/O operation (temp dir, config file, child process) failed.
    #[error("{what}: {source}")]
    Io {
        /// What the runner was doing.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else that stops a scenario.
    #[error("{0}")]
    Other(String),
}

impl ChaosError {
    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }

    /// A store error while doing `what`.
    pub fn tier(what: impl Into<String>, source: TierError) -> Self {
        Self::Tier { what: what.into(), source }
    }
}
