//! Topics whose recovery failed at [`HotTier::open`](crate::HotTier::open).
//!
//! One damaged topic must not keep the others from opening, and must never look like an
//! empty topic (which would accept appends at offset 0 and reuse offsets). The tier keeps
//! such a topic aside with the error its recovery gave; every operation on it answers
//! that error again ([`Damaged::answer`]) until the directory is repaired and the tier
//! reopened. Nothing runs for it: no writer, no retention, no segment events.

use std::sync::Arc;

use tier_core::{TierError, TopicName};

/// A topic kept aside at open, and why.
#[derive(Debug, Clone)]
pub(crate) struct Damaged {
    pub(crate) topic: TopicName,
    /// What recovering the topic answered.
    pub(crate) error: Arc<TierError>,
}

impl Damaged {
    /// The error an operation on the topic answers: the recovery's kind (`Corruption`
    /// for damaged files), its context (topic, file and byte position) and its message,
    /// saying that the topic was not opened.
    pub(crate) fn answer(&self) -> TierError {
        let e = self.error.as_ref();
        let ctx = e.context().clone();
        let why = |message: &str| {
            format!(
                "the topic was not opened: recovering it failed ({message}); repair or move the damaged file \
                 away and reopen (see docs/hot.md, \"A damaged topic\")"
            )
        };
        match e {
            TierError::Corruption { message, .. } => TierError::corruption(ctx, why(message)),
            TierError::Unavailable { message, .. } => TierError::unavailable(ctx, why(message)),
            TierError::InvalidInput { message, .. } => TierError::invalid(ctx, why(message)),
            TierError::Fenced { message, .. } => TierError::fenced(ctx, why(message)),
            TierError::NotFound { message, .. } => TierError::not_found(ctx, why(message)),
            TierError::Internal { message, .. } => TierError::internal(ctx, why(message)),
            other => TierError::internal(ctx, why(&other.to_string())),
        }
    }
}
