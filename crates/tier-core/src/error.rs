use std::fmt;

use crate::{Offset, OffsetRange, TopicName};

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
#[non_exhaustive]
pub struct ErrorContext {
    /// The tier that failed.
    pub tier: Option<TierKind>,
    /// The topic concerned.
    pub topic: Option<TopicName>,
    /// The offset concerned.
    pub offset: Option<Offset>,
    /// A file path or object key, with a byte position where known (`path@1234`).
    pub location: Option<String>,
    /// Of a refused append: the offsets at which its records may still be committed (a
    /// tier holds or may hold them, and recovery after a restart may commit them there).
    /// Its outcome is unknown: appending the records again may store them twice. `None`
    /// when nothing of the append lasts, or for any other error. Not printed: the message
    /// says it.
    pub may_commit: Option<OffsetRange>,
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

    /// Adds the offsets at which a refused append's records may still be committed
    /// ([`ErrorContext::may_commit`]).
    pub fn may_commit(mut self, range: OffsetRange) -> Self {
        self.may_commit = Some(range);
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
    /// The store, topic or tier was closed (or its writer is gone): nothing will answer
    /// this handle again. Not retryable; open the store again.
    Closed,
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
        /// An underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// A topic, object or key does not exist.
    #[error("{ctx}: not found: {message}")]
    NotFound {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What is missing.
        message: String,
        /// An underlying error, if any.
        #[source]
        source: Option<BoxError>,
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
        /// An underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// Different data or another writer already holds this position.
    #[error("{ctx}: fenced: {message}")]
    Fenced {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What conflicted.
        message: String,
        /// An underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The store, topic or tier is closed: no later call on this handle succeeds.
    #[error("{ctx}: closed: {message}")]
    Closed {
        /// Where.
        ctx: Box<ErrorContext>,
        /// What is closed.
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
            TierError::Closed { .. } => ErrorKind::Closed,
        }
    }

    /// True when retrying the same call may succeed: only for
    /// [`Unavailable`](ErrorKind::Unavailable) (never for [`Closed`](ErrorKind::Closed):
    /// a closed store answers nothing else again).
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// Of a refused append whose outcome is unknown: the offsets at which its records may
    /// still be committed (see [`ErrorContext::may_commit`]). `None` when nothing of the
    /// append lasts — appending again is safe — or for any other error.
    pub fn may_commit(&self) -> Option<OffsetRange> {
        self.context().may_commit
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
            | TierError::Internal { ctx, .. }
            | TierError::Closed { ctx, .. } => ctx,
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
            | TierError::Internal { ctx, .. }
            | TierError::Closed { ctx, .. } => ctx,
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
        TierError::InvalidInput { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// A [`Fenced`](TierError::Fenced) error.
    pub fn fenced(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Fenced { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// A [`NotFound`](TierError::NotFound) error.
    pub fn not_found(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::NotFound { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// An [`Internal`](TierError::Internal) error.
    pub fn internal(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Internal { ctx: Box::new(ctx), message: message.into(), source: None }
    }

    /// A [`Closed`](TierError::Closed) error: `message` names what is closed ("the store
    /// is closed").
    pub fn closed(ctx: ErrorContext, message: impl Into<String>) -> Self {
        TierError::Closed { ctx: Box::new(ctx), message: message.into() }
    }

    /// A [`Trimmed`](TierError::Trimmed) error for `requested` outside `held`.
    pub fn trimmed(ctx: ErrorContext, requested: Offset, held: crate::OffsetRange) -> Self {
        TierError::Trimmed { ctx: Box::new(ctx), requested, held, source: None }
    }

    /// An error of `cause`'s kind (a `Trimmed` one keeps its offsets) saying `message` at
    /// `ctx`, with `cause` as its source: for a layer that passes a failure on with what it
    /// was doing, or hands one failure to several callers (hence the `Arc`). A `Closed`
    /// cause gives a `Closed` error with `message`, which has no source.
    pub fn caused_by(
        ctx: ErrorContext,
        message: impl Into<String>,
        cause: std::sync::Arc<TierError>,
    ) -> Self {
        let error = match &*cause {
            TierError::Unavailable { .. } => TierError::unavailable(ctx, message),
            TierError::Trimmed { requested, held, .. } => TierError::trimmed(ctx, *requested, *held),
            TierError::NotFound { .. } => TierError::not_found(ctx, message),
            TierError::Corruption { .. } => TierError::corruption(ctx, message),
            TierError::InvalidInput { .. } => TierError::invalid(ctx, message),
            TierError::Fenced { .. } => TierError::fenced(ctx, message),
            TierError::Internal { .. } => TierError::internal(ctx, message),
            TierError::Closed { .. } => return TierError::closed(ctx, message),
        };
        error.with_source(cause)
    }

    /// Attaches the error that caused this one. By the workspace's rule (see
    /// `docs/architecture.md`, "Errors") the message then says what was being done
    /// ("locking the data directory") and not the cause, which [`report`](Self::report)
    /// and every other walk of [`source`](std::error::Error::source) print after it.
    /// Every variant keeps it but [`Closed`](TierError::Closed), which has no cause.
    pub fn with_source(mut self, err: impl Into<BoxError>) -> Self {
        match &mut self {
            TierError::Unavailable { source, .. }
            | TierError::Trimmed { source, .. }
            | TierError::NotFound { source, .. }
            | TierError::Corruption { source, .. }
            | TierError::InvalidInput { source, .. }
            | TierError::Fenced { source, .. }
            | TierError::Internal { source, .. } => *source = Some(err.into()),
            TierError::Closed { .. } => {}
        }
        self
    }

    /// The error and its causes on one line, for logs and anything else that prints one
    /// message: see [`Report`].
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }
}

/// An error followed by each of its [`source`](std::error::Error::source)s, joined by
/// `": "` — what a log line or a command-line report prints, so that the cause, which a
/// [`TierError`]'s message does not repeat, is shown once. A cause whose text the one
/// before already contains (third-party errors that print their own source) is skipped.
#[derive(Clone, Copy)]
pub struct Report<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut previous = self.0.to_string();
        f.write_str(&previous)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !previous.contains(&text) {
                write!(f, ": {text}")?;
            }
            previous = text;
            cause = e.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
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

    #[test]
    fn a_closed_store_is_not_retryable() {
        let topic = TopicName::new("orders").unwrap();
        let err =
            TierError::closed(ErrorContext::tier(TierKind::Router).topic(&topic), "the store is closed");
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert!(!err.is_retryable());
        assert_eq!(err.to_string(), "router tier, topic 'orders': closed: the store is closed");
    }

    #[test]
    fn every_kind_keeps_its_source_and_the_report_prints_it_once() {
        let io = || std::io::Error::other("disk on fire");
        let ctx = ErrorContext::tier(TierKind::Hot);
        let errors = [
            TierError::unavailable(ctx.clone(), "writing a segment"),
            TierError::trimmed(ctx.clone(), 1, crate::OffsetRange::new(2, 3)),
            TierError::not_found(ctx.clone(), "reading a segment"),
            TierError::corruption(ctx.clone(), "checking a segment"),
            TierError::invalid(ctx.clone(), "parsing a name"),
            TierError::fenced(ctx.clone(), "appending"),
            TierError::internal(ctx.clone(), "joining a task"),
        ];
        for err in errors {
            let err = err.with_source(io());
            let source = std::error::Error::source(&err).map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("disk on fire"), "{err}");
            let report = err.report().to_string();
            assert_eq!(report.matches("disk on fire").count(), 1, "{report}");
            assert!(report.starts_with(&err.to_string()), "{report}");
        }
        // An error passed on keeps its cause's kind and the cause, printed once.
        let cause = std::sync::Arc::new(
            TierError::fenced(ErrorContext::tier(TierKind::Warm), "taken").with_source(io()),
        );
        let passed = TierError::caused_by(ErrorContext::tier(TierKind::Router), "appending", cause);
        assert_eq!(passed.kind(), ErrorKind::Fenced);
        assert_eq!(
            passed.report().to_string(),
            "router tier: fenced: appending: warm tier: fenced: taken: disk on fire"
        );
        // A cause already quoted by the error before it is not printed again.
        let quoting = TierError::unavailable(ctx, "writing: disk on fire").with_source(io());
        assert_eq!(quoting.report().to_string(), "hot tier: unavailable: writing: disk on fire");
    }
}
