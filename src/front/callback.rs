//! `GET /oauth/callback`: where a backend's authorization server sends the user back after they authorized the
//! gateway (OAuth 2.1 §4.1.2, RFC 6749 §4.1.2.1 for `error=`). The front owns only the HTTP pages (this one and
//! the start page of [`super::start`]); the exchange itself (state bound to principal, backend and browser,
//! single use, expiring; the token request; storing the tokens) is the [`AuthorizationCallback`] the composition
//! root provides over the backend OAuth client.
//!
//! Rules:
//! - The pages are small static HTML with every interpolated value escaped, and no script: each is sent with
//!   [`PAGE_HEADERS`] (a `Content-Security-Policy` that allows nothing, no framing, no sniffing, no caching, no
//!   referrer), so neither the `code` in this page's URL nor anything on it leaks or can be framed.
//! - The callback page names the backend on success and the reason on failure, never a code, a token or the
//!   state. `error=` from the server is shown only when it is one of RFC 6749's registered codes (§4.1.2.1), and
//!   its `error_description` never (it is whatever text the server, or whoever forged the redirect, chose).
//! - A missing `code` or `state`, or a completion that fails → 400 with the reason ([`CallbackRefusal`], this
//!   page's one error table). The callback needs no agent credentials: the browser carries none; the `state`
//!   and the browser's cookie set by the start page bind it (a browser without that cookie is refused, and
//!   nothing is exchanged). A completed authorization clears its cookie.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Front;
use super::start::{browser_cookies, clear_cookie};

/// The path of the callback under the gateway's public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// RFC 6749 §4.1.2.1: the error codes an authorization response may carry.
const AUTHORIZATION_ERRORS: [&str; 7] = [
    "invalid_request",
    "unauthorized_client",
    "access_denied",
    "unsupported_response_type",
    "invalid_scope",
    "server_error",
    "temporarily_unavailable",
];

/// Sent with every page of the authorization flow.
pub(super) const PAGE_HEADERS: [(HeaderName, &str); 6] = [
    (header::CONTENT_TYPE, "text/html; charset=utf-8"),
    (header::CONTENT_SECURITY_POLICY, "default-src 'none'; base-uri 'none'; frame-ancestors 'none'"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::CACHE_CONTROL, "no-store"),
    (header::REFERRER_POLICY, "no-referrer"),
];

/// A completion in flight: the backend authorized, or why not.
pub type Completion<'a> = Pin<Box<dyn Future<Output = Result<Authorized, String>> + Send + 'a>>;

/// A completed authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized {
    pub backend: String,
    /// The flow whose cookie the browser presented (cleared now).
    pub flow: String,
}

/// An authorization whose start page a browser opened, now bound to that browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentPage {
    pub principal: String,
    pub backend: String,
    /// The browser's cookie for this flow.
    pub cookie: String,
    /// The token the page's form sends back with the consent.
    pub consent: String,
    pub expires_in: Duration,
}

/// The backend OAuth client as the authorization pages use it; every refusal is a sentence for the user.
pub trait AuthorizationCallback: Send + Sync {
    /// Whether the gateway's public URL is `https` (cookies are then `Secure` and `__Host-` prefixed).
    fn serves_https(&self) -> bool;

    /// Binds the authorization of `flow` to the browser opening its start page now.
    fn consent(&self, flow: &str) -> Result<ConsentPage, String>;

    /// The authorization server URL of `flow`, for the browser it is bound to (its `consent` token and one of
    /// its `cookies`).
    fn proceed(&self, flow: &str, consent: &str, cookies: &[String]) -> Result<String, String>;

    /// Checks the browser's `cookies` and `iss` (RFC 9207), exchanges `code` for the tokens of the principal and
    /// backend `state` was issued for, and stores them.
    fn complete<'a>(
        &'a self,
        state: &'a str,
        code: &'a str,
        iss: Option<&'a str>,
        cookies: &'a [String],
    ) -> Completion<'a>;
}

#[derive(Debug, Deserialize)]
pub(super) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    /// RFC 9207: the authorization server that answered (checked by the OAuth client).
    iss: Option<String>,
    error: Option<String>,
}

/// Why an authorization page refuses (each a 400 page, but for [`CallbackRefusal::NotConfigured`]).
#[derive(Debug)]
pub(super) enum CallbackRefusal {
    /// The authorization server reported an error (the user declined, or the request was bad).
    Denied { error: String },
    /// `code` and `state` (or the start page's `flow`) are missing.
    Incomplete(&'static str),
    /// The gateway serves no OAuth backends.
    NotConfigured,
    /// The OAuth client refused: an unknown, replayed or expired state or flow; another browser; a wrong or
    /// missing `iss`; the token endpoint refused.
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
            CallbackRefusal::Denied { error } if AUTHORIZATION_ERRORS.contains(&error.as_str()) => {
                format!("The authorization server answered `{error}`.")
            }
            CallbackRefusal::Denied { .. } => "The authorization server did not authorize the gateway.".to_owned(),
            CallbackRefusal::Incomplete(what) => format!("The request carries no {what}."),
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

/// The authorization pages' client, when any backend uses OAuth.
pub(super) fn authorization(front: &Front) -> Result<Arc<dyn AuthorizationCallback>, CallbackRefusal> {
    front.settings.load().authorization.clone().ok_or(CallbackRefusal::NotConfigured)
}

pub(super) async fn complete(
    State(front): State<Arc<Front>>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Result<Response, CallbackRefusal> {
    let callback = authorization(&front)?;
    if let Some(error) = query.error {
        return Err(CallbackRefusal::Denied { error });
    }
    let (Some(code), Some(state)) = (query.code, query.state) else {
        return Err(CallbackRefusal::Incomplete("`code` and `state`"));
    };
    let https = callback.serves_https();
    let cookies = browser_cookies(&headers, https);
    let authorized =
        callback.complete(&state, &code, query.iss.as_deref(), &cookies).await.map_err(CallbackRefusal::Failed)?;
    let body = format!(
        "<p>Switchyard may now use the backend <b>{}</b> on your behalf.</p><p>You may close this page and return to your agent.</p>",
        escape(&authorized.backend)
    );
    let mut response = page(StatusCode::OK, "Authorized", &body);
    response.headers_mut().append(header::SET_COOKIE, clear_cookie(&authorized.flow, https));
    Ok(response)
}

/// An HTML page of the authorization flow, with [`PAGE_HEADERS`]; `body` is already escaped.
pub(super) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>\n"
    );
    let headers = PAGE_HEADERS.map(|(name, value)| (name, HeaderValue::from_static(value)));
    (status, headers, html).into_response()
}

pub(super) fn escape(text: &str) -> String {
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
        let denied = CallbackRefusal::Denied { error: "access_denied".into() };
        assert_eq!(denied.status(), StatusCode::BAD_REQUEST);
        assert!(denied.reason().contains("access_denied"));
        assert_eq!(CallbackRefusal::NotConfigured.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn an_unregistered_error_code_is_not_repeated() {
        let forged = CallbackRefusal::Denied { error: "call_+1-555-0100_to_restore_access".into() };
        let reason = forged.reason();
        assert!(!reason.contains("555"), "{reason}");
        assert_eq!(reason, "The authorization server did not authorize the gateway.");
    }

    #[test]
    fn pages_forbid_scripts_framing_sniffing_caching_and_referrers() {
        let response = page(StatusCode::OK, "t", "<p>b</p>");
        let header = |name: HeaderName| response.headers()[name].to_str().expect("ascii").to_owned();
        assert!(header(header::CONTENT_SECURITY_POLICY).starts_with("default-src 'none'"));
        assert_eq!(header(header::X_FRAME_OPTIONS), "DENY");
        assert_eq!(header(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert_eq!(header(header::CACHE_CONTROL), "no-store");
        assert_eq!(header(header::REFERRER_POLICY), "no-referrer");
    }
}
