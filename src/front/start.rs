//! `/oauth/start`: the gateway's own page an agent sends its user to when a backend needs the principal's
//! authorization (the URL in a URL-mode elicitation, or in the sentence an agent without it gets). It binds the
//! authorization to the browser that opens it and asks that person to confirm before anything reaches the
//! authorization server (RFC 6749 §10.12, RFC 9700 §4.7.1; MCP security best practices, "confused deputy":
//! without it, principal B's link opened by someone else links that person's account to B).
//!
//! Rules:
//! - `GET /oauth/start?flow=…` sets a cookie named after the flow (so that flows in several tabs do not evict
//!   each other) and shows a consent page naming the principal and the backend, with a form that `POST`s the
//!   flow and the page's consent token back here. Loading the page never redirects by itself, and opening it
//!   again binds the flow to the newer browser.
//! - The cookie is `__Host-` prefixed and `Secure` when the public URL is `https`; on plain `http` (a loopback
//!   setup, where browsers refuse both) it is host-only without the prefix. Always `HttpOnly`, `SameSite=Lax`,
//!   `Path=/`, and it lives no longer than the authorization.
//! - `POST /oauth/start` answers `303 See Other` to the authorization server only when the form's consent token
//!   and the cookie are the bound browser's. A cross-site page cannot get there: the `SameSite=Lax` cookie is not
//!   sent with a cross-site `POST`, and the consent token is on a page no other origin can read (nor frame:
//!   [`super::callback::PAGE_HEADERS`]).
//! - The flow is the only value in the start URL; the `state` exists only in the authorization server's URL.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Front;
use super::callback::{CallbackRefusal, ConsentPage, authorization, escape, page};

/// The start page's path under the gateway's public URL.
pub const START_PATH: &str = "/oauth/start";

/// The cookie of a flow is this prefix followed by the flow (`__Host-` in front of it on `https`).
const COOKIE_PREFIX: &str = "switchyard-oauth-";
const HOST_PREFIX: &str = "__Host-";

#[derive(Debug, Deserialize)]
pub(super) struct StartQuery {
    flow: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ConsentForm {
    flow: Option<String>,
    consent: Option<String>,
}

pub(super) async fn show(
    State(front): State<Arc<Front>>,
    Query(query): Query<StartQuery>,
) -> Result<Response, CallbackRefusal> {
    let callback = authorization(&front)?;
    let flow = query.flow.ok_or(CallbackRefusal::Incomplete("`flow`"))?;
    let consent = callback.consent(&flow).map_err(CallbackRefusal::Failed)?;
    let mut response = page(StatusCode::OK, "Authorize a backend", &consent_body(&flow, &consent));
    response.headers_mut().append(header::SET_COOKIE, set_cookie(&flow, &consent, callback.serves_https()));
    Ok(response)
}

pub(super) async fn proceed(
    State(front): State<Arc<Front>>,
    headers: HeaderMap,
    Form(form): Form<ConsentForm>,
) -> Result<Response, CallbackRefusal> {
    let callback = authorization(&front)?;
    let (Some(flow), Some(consent)) = (form.flow, form.consent) else {
        return Err(CallbackRefusal::Incomplete("`flow` and `consent`"));
    };
    let cookies = browser_cookies(&headers, callback.serves_https());
    let url = callback.proceed(&flow, &consent, &cookies).map_err(CallbackRefusal::Failed)?;
    let location = HeaderValue::try_from(url).map_err(|_| {
        CallbackRefusal::Failed("the authorization server's URL cannot be sent as a redirect".to_owned())
    })?;
    let headers = [
        (header::LOCATION, location),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ];
    Ok((StatusCode::SEE_OTHER, headers).into_response())
}

fn consent_body(flow: &str, consent: &ConsentPage) -> String {
    let (principal, backend) = (escape(&consent.principal), escape(&consent.backend));
    let minutes = consent.expires_in.as_secs().div_ceil(60);
    format!(
        "<p>The agent principal <b>{principal}</b> asks Switchyard to use the backend <b>{backend}</b> on its \
         behalf, with the account you sign in with at that backend's authorization server.</p>\
         <p>Continue only if you started this from your own agent, as <b>{principal}</b>: whoever acts as that \
         principal will use your account. If someone sent you this link, close this page.</p>\
         <form method=\"post\" action=\"start\">\
         <input type=\"hidden\" name=\"flow\" value=\"{}\">\
         <input type=\"hidden\" name=\"consent\" value=\"{}\">\
         <button type=\"submit\">Continue to the authorization server</button></form>\
         <p>This page works in this browser only, for about {minutes} minute(s).</p>",
        escape(flow),
        escape(&consent.consent),
    )
}

fn cookie_name(flow: &str, https: bool) -> String {
    let host = if https { HOST_PREFIX } else { "" };
    format!("{host}{COOKIE_PREFIX}{flow}")
}

fn cookie(flow: &str, value: &str, max_age: u64, https: bool) -> HeaderValue {
    let secure = if https { "; Secure" } else { "" };
    let text =
        format!("{}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}", cookie_name(flow, https));
    // Flows and cookie values are base64url; anything else (a forged flow) cannot have reached here.
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static("switchyard-oauth-invalid=; Max-Age=0"))
}

fn set_cookie(flow: &str, consent: &ConsentPage, https: bool) -> HeaderValue {
    cookie(flow, &consent.cookie, consent.expires_in.as_secs().max(1), https)
}

/// Removes the cookie of a completed flow.
pub(super) fn clear_cookie(flow: &str, https: bool) -> HeaderValue {
    cookie(flow, "", 0, https)
}

/// The values of the flow cookies the browser sent (only `__Host-` ones on `https`).
pub(super) fn browser_cookies(headers: &HeaderMap, https: bool) -> Vec<String> {
    let prefix = cookie_name("", https);
    let pairs = headers.get_all(header::COOKIE).into_iter().filter_map(|value| value.to_str().ok());
    pairs
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| name.starts_with(&prefix))
        .map(|(_, value)| value.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn consent() -> ConsentPage {
        ConsentPage {
            principal: "<alice>".to_owned(),
            backend: "docs".to_owned(),
            cookie: "c00kie".to_owned(),
            consent: "t0ken".to_owned(),
            expires_in: Duration::from_secs(599),
        }
    }

    #[test]
    fn https_cookies_are_host_prefixed_and_secure() {
        let cookie = set_cookie("f1", &consent(), true);
        assert_eq!(
            cookie.to_str().expect("ascii"),
            "__Host-switchyard-oauth-f1=c00kie; Path=/; Max-Age=599; HttpOnly; SameSite=Lax; Secure"
        );
        let plain = set_cookie("f1", &consent(), false);
        assert_eq!(
            plain.to_str().expect("ascii"),
            "switchyard-oauth-f1=c00kie; Path=/; Max-Age=599; HttpOnly; SameSite=Lax"
        );
        assert!(clear_cookie("f1", true).to_str().expect("ascii").contains("Max-Age=0"));
    }

    #[test]
    fn only_the_schemes_flow_cookies_are_read() {
        let mut headers = HeaderMap::new();
        let sent = "other=1; switchyard-oauth-a=plain; __Host-switchyard-oauth-b=host";
        headers.insert(header::COOKIE, HeaderValue::from_static(sent));
        headers.append(header::COOKIE, HeaderValue::from_static("__Host-switchyard-oauth-c=second"));
        assert_eq!(browser_cookies(&headers, true), ["host", "second"]);
        assert_eq!(browser_cookies(&headers, false), ["plain"]);
    }

    #[test]
    fn the_consent_page_names_principal_and_backend_and_posts_back() {
        let body = consent_body("f1", &consent());
        assert!(body.contains("<b>&lt;alice&gt;</b>") && body.contains("<b>docs</b>"), "{body}");
        assert!(body.contains("method=\"post\" action=\"start\""), "{body}");
        assert!(body.contains("name=\"consent\" value=\"t0ken\"") && !body.contains("c00kie"), "{body}");
        assert!(!body.contains("<script"), "{body}");
    }
}
