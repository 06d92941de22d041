use std::fmt;

use crate::{Offset, TopicName};

/// A boxed error used as the `source` of a [`TierError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which tier an error or a read came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TierKind {
    /// The local write-ahead log.
    Hot,
    /// Valkey / Redis Streams.
    Warm,
    /// Object storage.
    Cold,
    /// The in-memory tier of tier-testkit.
    Memory,
    /// Composition of tiers (tier-router).
    Router,
    /// A user-supplied implementation.
    Custom(&'static str),
}

impl fmt::Display for TierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierKind::Hot => f.write_str("hot"),
            TierKind::Warm => f.write_str("warm"),
            TierKind::Cold => f.write_str("cold"),
            TierKind::Memory => f.write_str("memory"),
            TierKind::Router => f.write_str("router"),
            TierKind::Custom(name) => f.write_str(name),
        }
    }
}

/// Where an error happened: every field optional, printed in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorContext {
    /// The tier that failed.
    pub tier: Option<TierKind>,
    /// The topic concerned.
    pub topic: Option<TopicName>,
    /// The offset concerned.
    pub offset: Option<Offset>,
    /// A file path or object key, with a byte position where known (`path@1234`).
    pub location: Option<String>,
}

impl ErrorContext {
    /// Context naming a tier.
    pub fn tier(tier: TierKind) -> Self {
        Self { tier: Some(tier), ..Self::default() }
    }

    /// Adds the topic.
    pub fn topic(mut self, topic: &TopicName) -> Self {
        self.topic = Some(topic.clone());
        self
    }

    /// Adds the offset.
    pub fn offset(mut self, offset: Offset) -> Self {
        self.offset = Some(offset);
        self
    }

    /// Adds a path or object key.
    pub fn location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}

impl fmt::Display for ErrorContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(tier) = &self.tier {
            write!(f, "{tier} tier")?;
            sep = ", ";
        }
        if let Some(topic) = &self.topic {
            write!(f, "{sep}topic '{topic}'")?;
            sep = ", ";
        }
        if let Some(offset) = self.offset {
            write!(f, "{sep}offset {offset}")?;
            sep = ", ";
        }
        if let Some(location) = &self.location {
            write!(f, "{sep}at {location}")?;
            sep = ", ";
        }
        if sep.is_empty() {
            f.write_str("tierlog")?;
        }
        Ok(())
    }
}

/// What a caller can do about a [`TierError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The backend could not be reached or did not confirm in time: retry later.
    Unavailable,
    /// The offsets asked for are no longer (or not yet) held: read elsewhere.
    Trimmed,
    /// The named thing does not exist.
    NotFound,
    /// Stored bytes failed a check: do not trust them; repair or restore.
    Corruption,
    /// The request was malformed: fix the caller.
    InvalidInput,
    /// Another writer or different data already owns this position: stop writing.
    Fenced,
    /// A bug or an unexpected backend answer.
    Internal,
}

/// The error every [`Tier`](crate::Tier) returns.
///
/// Coarse by design: the variant says what the caller can do, the [`ErrorContext`] says
/// where, and `source` keeps the backend's own error for the logs. The context is boxed so
/// `Result<_, TierError>` stays small on hot paths.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    /// The backend is unreachable or did not confirm in time. Retrying may succeed.
    #[error("{ctx}: unavailable: {message}")]
    Unavailable {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What happened.
        message: String,
        /// The backend's error.
        #[source]
        source: Option<BoxError>,
    },
    /// The requested offset is outside what the tier holds.
    #[error("{ctx}: offset {requested} is not held; this tier holds {held}")]
    Trimmed {
        /// Where.
        ctx: Box<ErrorContext>,
        /// The offset asked for.
        requested: Offset,
        /// What the tier holds now.
        held: crate::OffsetRange,
    },
    /// A topic, object or key does not exist.
    #[error("{ctx}: not found: {message}")]
    NotFound {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What is missing.
        message: String,
    },
    /// Stored bytes failed a check (CRC, length, magic, continuity).
    #[error("{ctx}: corruption: {message}")]
    Corruption {
        /// Where, with the file or key and byte position.
        ctx: Box<ErrorContext>,
        /// What check failed.
        message: String,
        /// An underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The caller asked for something malformed.
    #[error("{ctx}: invalid input: {message}")]
    InvalidInput {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What is wrong with the input.
        message: String,
    },
    /// Different data or another writer already holds this position.
    #[error("{ctx}: fenced: {message}")]
    Fenced {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What conflicted.
        message: String,
    },
    /// Anything else: a bug or an unexpected backend answer.
    #[error("{ctx}: internal error: {message}")]
    Internal {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What happened.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl TierError {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TierError::Unavailable { .. } => ErrorKind::Unavailable,
            TierError::Trimmed { .. } => ErrorKind::Trimmed,
            TierError::NotFound { .. } => ErrorKind::NotFound,
            TierError::Corruption { .. } => ErrorKind::Corruption,
            TierError::InvalidInput { .. } => ErrorKind::InvalidInput,
            TierError::Fenced { .. } => ErrorKind::Fenced,
            TierError::Internal { .. } => ErrorKind::Internal,
        }
    }

    /// True when retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// Where the error happened.
    pub fn context(&self) -> &ErrorContext {
        match self {
            TierError::Unavailable { ctx, .. }
            | TierError::Trimmed { ctx, .. }
            | TierError::NotFound { ctx, .. }
            | TierError::Corruption { ctx, .. }
            | TierError::InvalidInput { ctx, .. }
            | TierError::Fenced { ctx, .. }
            | TierError::Internal { ctx, .. } => ctx,
        }
    }

    /// Mutable access to the context, to add what an outer layer knows.
    pub fn context_mut(&mut self) -> &mut ErrorContext {
        match self {
            TierError::Unavailable { ctx, .. }
            | TierError::Trimmed { ctx, .. }
            | TierError::NotFound { ctx, .. }
            | TierError::Corruption { ctx, .. }
            | TierError::InvalidInput { ctx, .. }
            | TierError::Fenced { ctx, .. }
            | TierError::Internal { ctx, .. } => ctx,
        }
    }

    /// An [`Unavailable`](TierError::Unavailable) error.
    pub fn unavailable(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Unavailable { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// A [`Corruption`](TierError::Corruption) error.
    pub fn corruption(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Corruption { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// An [`InvalidInput`](TierError::InvalidInput) error.
    pub fn invalid(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::InvalidInput { ctx: Box::new(ctx), message: message.into() }
    }

    /// A [`Fenced`](TierError::Fenced) error.
    pub fn fenced(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Fenced { ctx: Box::new(ctx), message: message.into() }
    }

    /// A [`NotFound`](TierError::NotFound) error.
    pub fn not_found(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::NotFound { ctx: Box::new(ctx), message: message.into() }
    }

    /// An [`Internal`](TierError::Internal) error.
    pub fn internal(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Internal { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// A [`Trimmed`](TierError::Trimmed) error for `requested` outside `held`.
    pub fn trimmed(ctx: ErrorContext, requested: Offset, held: crate::OffsetRange) -> Self {
        TierError::Trimmed { ctx: Box::new(ctx), requested, held }
    }

    /// Attaches a source error (kept for variants that carry one, dropped otherwise).
    pub fn with_source(mut self, err: impl Into<BoxError>) -> Self {
        match &mut self {
            TierError::Unavailable { source, .. }
            | TierError::Corruption { source, .. }
            | TierError::Internal { source, .. } => *source = Some(err.into()),
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_stay_small_and_print_their_context() {
        assert!(std::mem::size_of::<TierError>() <= 64, "{}", std::mem::size_of::<TierError>());
        let topic = TopicName::new("orders").unwrap();
        let err = TierError::corruption(
            ErrorContext::tier(TierKind::Hot).topic(&topic).offset(42).location("/d/0.seg@17"),
            "CRC mismatch",
        );
        assert_eq!(err.kind(), ErrorKind::Corruption);
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            "hot tier, topic 'orders', offset 42, at /d/0.seg@17: corruption: CRC mismatch"
        );
        let trimmed =
            TierError::trimmed(ErrorContext::tier(TierKind::Cold), 3, crate::OffsetRange::new(5, 9));
        assert_eq!(trimmed.to_string(), "cold tier: offset 3 is not held; this tier holds [5, 9)");
        assert!(TierError::unavailable(ErrorContext::default(), "down").is_retryable());
    }
}
