//! Errors as the API answers them: `{"error": {"kind", "message"[, "may_commit"]}}` with the status of
//! the kind ([`tierlog_api::ErrorKind::status`]).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tier_router::{ErrorKind as TierKind, TierError};
use tierlog_api::{ApiError, ErrorKind, RangeJson};

/// An error answer.
#[derive(Debug)]
pub(crate) struct HttpError(pub(crate) ApiError);

impl HttpError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(ApiError::new(kind, message))
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
}

/// A JSON request body as `T`; `400 invalid_input` naming what is wrong otherwise.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, HttpError> {
    serde_json::from_slice(body).map_err(|e| HttpError::invalid(format!("malformed JSON: {e}")))
}

/// The API's kind for a store error.
pub(crate) fn kind_of(e: &TierError) -> ErrorKind {
    match e.kind() {
        TierKind::InvalidInput => ErrorKind::InvalidInput,
        TierKind::NotFound => ErrorKind::NotFound,
        TierKind::Trimmed => ErrorKind::Trimmed,
        TierKind::Fenced => ErrorKind::Fenced,
        TierKind::Unavailable => ErrorKind::Unavailable,
        TierKind::Closed => ErrorKind::Closed,
        TierKind::Corruption => ErrorKind::Corruption,
        _ => ErrorKind::Internal,
    }
}

/// The API's error for a store error: its kind, its report (each cause once) and, of a
/// refused append whose outcome is unknown, the offsets it may still be committed at.
pub(crate) fn api_error(e: &TierError) -> ApiError {
    let error = ApiError::new(kind_of(e), e.report().to_string());
    match e.may_commit() {
        Some(range) => error.with_may_commit(RangeJson { start: range.start, end: range.end }),
        None => error,
    }
}

impl From<TierError> for HttpError {
    fn from(e: TierError) -> Self {
        Self(api_error(&e))
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let kind = self.0.kind();
        let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self.0)).into_response();
        match kind {
            ErrorKind::Unavailable => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ErrorKind::Unauthorized => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}
