//! `GET /oauth/callback`: where a backend's authorization server sends the user back after they authorized the
//! gateway (issue 12; OAuth 2.1 §4.1.2, RFC 6749 §4.1.2.1 for `error=`). The front owns only the HTTP page; the
//! exchange itself (state bound to principal and backend, single use, expiring; the token request; storing the
//! tokens) is the [`AuthorizationCallback`] the composition root provides over the backend OAuth client.
//!
//! Rules: the page is small static HTML with every interpolated value escaped; it names the backend on success
//! and the reason on failure, never a code, a token or the state. `error=` from the server, a missing `code` or
//! `state`, or a completion that fails → 400 with the reason ([`CallbackRefusal`], this page's one error table).
//! The callback needs no agent credentials: the browser carries none; the `state` is what binds it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Front;

/// The path of the callback under the gateway's public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// A completion in flight: the backend authorized, or why not.
pub type Completion<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// Completes an authorization: checks `iss` (RFC 9207), exchanges `code` for the tokens of the principal and
/// backend `state` was issued for, stores them, and returns the backend's name (or a sentence saying why not).
pub trait AuthorizationCallback: Send + Sync {
    fn complete<'a>(&'a self, state: &'a str, code: &'a str, iss: Option<&'a str>) -> Completion<'a>;
}

#[derive(Debug, Deserialize)]
pub(super) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    /// RFC 9207: the authorization server that answered (checked by the OAuth client).
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Why a callback is refused (each a 400 page).
#[derive(Debug)]
enum CallbackRefusal {
    /// The authorization server reported an error (the user declined, or the request was bad).
    Denied { error: String, description: Option<String> },
    /// `code` or `state` is missing.
    Incomplete,
    /// The gateway serves no OAuth backends.
    NotConfigured,
    /// The exchange failed (unknown, replayed or expired state; a wrong or missing `iss`; the token endpoint
    /// refused).
    Failed(String),
}

impl CallbackRefusal {
    fn status(&self) -> StatusCode {
        match self {
            CallbackRefusal::NotConfigured => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    fn reason(&self) -> String {
        match self {
            CallbackRefusal::Denied { error, description } => match description {
                Some(description) => format!("The authorization server answered `{error}`: {description}."),
                None => format!("The authorization server answered `{error}`."),
            },
            CallbackRefusal::Incomplete => "The request carries no `code` and `state`.".to_owned(),
            CallbackRefusal::NotConfigured => "This gateway has no backend that uses OAuth.".to_owned(),
            CallbackRefusal::Failed(reason) => format!("{reason}."),
        }
    }
}

impl IntoResponse for CallbackRefusal {
    fn into_response(self) -> Response {
        let body =
            format!("<p>Authorization failed. {}</p><p>Start again from your agent.</p>", escape(&self.reason()));
        page(self.status(), "Authorization failed", &body)
    }
}

pub(super) async fn complete(
    State(front): State<Arc<Front>>,
    Query(query): Query<CallbackQuery>,
) -> Result<Response, impl IntoResponse> {
    let Some(callback) = front.settings.load().authorization.clone() else {
        return Err(CallbackRefusal::NotConfigured);
    };
    if let Some(error) = query.error {
        return Err(CallbackRefusal::Denied { error, description: query.error_description });
    }
    let (Some(code), Some(state)) = (query.code, query.state) else { return Err(CallbackRefusal::Incomplete) };
    let backend = callback.complete(&state, &code, query.iss.as_deref()).await.map_err(CallbackRefusal::Failed)?;
    let body = format!(
        "<p>Switchyard may now use the backend <b>{}</b> on your behalf.</p><p>You may close this page and return to your agent.</p>",
        escape(&backend)
    );
    Ok(page(StatusCode::OK, "Authorized", &body))
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>\n"
    );
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (status, headers, html).into_response()
}

fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '&' => "&amp;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(escape("<b a=\"x\">&'"), "&lt;b a=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn refusals_name_the_reason() {
        let denied = CallbackRefusal::Denied { error: "access_denied".into(), description: None };
        assert_eq!(denied.status(), StatusCode::BAD_REQUEST);
        assert!(denied.reason().contains("access_denied"));
        assert_eq!(CallbackRefusal::NotConfigured.status(), StatusCode::NOT_FOUND);
    }
}
