//! Bearer-token authentication: with tokens configured, every request but `/healthz` and
//! `/readyz` needs `Authorization: Bearer <token>`; anything else is answered 401 before
//! a handler runs (so nothing is written). Tokens are compared in constant time and
//! never logged.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tierlog_api::ErrorKind;

use crate::AppState;
use crate::error::HttpError;

/// Paths served without a token (probes).
const OPEN_PATHS: &[&str] = &["/healthz", "/readyz"];

pub(crate) async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.tokens.is_empty() || OPEN_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if state.tokens.iter().any(|t| crate::token_matches(t, token.as_bytes())) => {
            next.run(request).await
        }
        Some(_) => HttpError::new(ErrorKind::Unauthorized, "the bearer token is not valid").into_response(),
        None => {
            HttpError::new(ErrorKind::Unauthorized, "a bearer token is required (Authorization: Bearer …)")
                .into_response()
        }
    }
}
