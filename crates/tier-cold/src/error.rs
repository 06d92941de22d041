//! Mapping `object_store` errors into [`TierError`]s that say what a caller can do.

use object_store::path::Path;
use tier_core::{ErrorContext, TierError, TierKind, TopicName};

/// Context naming the cold tier, `topic` and object `key`.
pub(crate) fn key_ctx(topic: &TopicName, key: &Path) -> ErrorContext {
    ErrorContext::tier(TierKind::Cold).topic(topic).location(key.to_string())
}

/// Context naming the cold tier and `topic`.
pub(crate) fn topic_ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Cold).topic(topic)
}

/// `err`, raised while doing `what`, as a [`TierError`] with `ctx`.
///
/// Not found → `NotFound`; already exists / precondition failed → `Fenced`; invalid
/// path, unsupported or unimplemented operations → `Internal`; anything else (HTTP
/// errors left after object_store's own retries, I/O, permission) → `Unavailable`. The
/// object_store error is kept as the source; it never contains credentials.
pub(crate) fn map_store_error(ctx: ErrorContext, what: &str, err: object_store::Error) -> TierError {
    use object_store::Error as E;
    let error = match err {
        E::NotFound { .. } => TierError::not_found(ctx, what),
        E::AlreadyExists { .. } | E::Precondition { .. } => TierError::fenced(ctx, what),
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => {
            TierError::internal(ctx, what)
        }
        _ => TierError::unavailable(ctx, what),
    };
    error.with_source(err)
}

/// A local I/O error while reading the segment file `path`.
pub(crate) fn file_error(
    topic: &TopicName,
    path: &std::path::Path,
    what: &str,
    err: std::io::Error,
) -> TierError {
    let ctx = topic_ctx(topic).location(path.display().to_string());
    let error = if err.kind() == std::io::ErrorKind::NotFound {
        TierError::not_found(ctx, what)
    } else {
        TierError::unavailable(ctx, what)
    };
    error.with_source(err)
}
