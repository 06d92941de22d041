//! tierlog's shared vocabulary.
//!
//! Every tier crate depends on this one and on nothing else of tierlog's; this crate
//! depends on no backend. It holds:
//!
//! - the data model: [`Offset`], [`OffsetRange`], [`StartPosition`], [`Record`],
//!   [`Header`] and [`RecordBatch`] (the encoded batch that is the unit of write,
//!   replication and checksum, see [`batch`]);
//! - [`TopicName`], the validated topic name every tier may use as a directory name,
//!   stream key or object-key prefix;
//! - [`TierError`], the coarse error every tier returns;
//! - the [`Tier`] trait and its contract (batch reads, [`Tier::read_batches`], are
//!   required), and [`TierExt`], the conveniences every tier gets from it (record
//!   reads, [`TierExt::read`]);
//! - the [`segment`] format shared by the hot tier's files and the cold tier's objects;
//! - [`Secret`], the credential type of the warm and cold tiers' configurations;
//! - [`clock`]: the injected wall clock ([`clock::Clock`]) the store reads time from,
//!   and what a clock going backwards does;
//! - [`metrics`]: the names of the metrics the tier crates and the router record.
//!
//! The byte grammar of batches and segments is written once, in `docs/format.md`.

pub mod batch;
pub mod blocking;
pub mod clock;
mod error;
pub mod metrics;
mod offset;
pub mod position;
mod record;
mod secret;
pub mod segment;
mod tier;
mod topic;

pub use batch::{RecordBatch, RecordBatchBuilder};
pub use error::{BoxError, ErrorContext, ErrorKind, Report, TierError, TierKind};
pub use offset::{Offset, OffsetRange, StartPosition, Timestamp, format_range_lines, parse_range_lines};
pub use record::{Header, Record};
pub use secret::Secret;
pub use tier::{Capabilities, ReadLimit, Tier, TierExt};
pub use topic::{IntoTopicName, MAX_TOPIC_NAME_LEN, TopicName};
