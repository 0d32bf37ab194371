//! The console page's static files (`src/front/ui/`), embedded in the binary: no build step, no CDN, no external
//! library — the page is plain HTML, CSS and JavaScript that reads the console API and draws its charts itself.
//!
//! Rules: `/ui` redirects to `/ui/` so the page's relative URLs (its files, and `../admin/api/…`) work under any
//! path prefix a reverse proxy adds. Every file is sent with a Content-Security-Policy that allows only this
//! origin's scripts, styles and API (no inline script, no other host, no framing), `nosniff` and no referrer.
//! An unknown file is 404.

use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(super) const ROOT: &str = "/ui";
pub(super) const PAGE: &str = "/ui/";
pub(super) const ASSETS: &str = "/ui/{file}";

const INDEX: &str = include_str!("../ui/index.html");
const STYLE: &str = include_str!("../ui/console.css");
const SCRIPT: &str = include_str!("../ui/console.js");

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                                       connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub(super) async fn to_page() -> Response {
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, HeaderValue::from_static(PAGE))]).into_response()
}

pub(super) async fn page() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

pub(super) async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "index.html" => file("text/html; charset=utf-8", INDEX),
        "console.css" => file("text/css; charset=utf-8", STYLE),
        "console.js" => file("text/javascript; charset=utf-8", SCRIPT),
        _ => (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    }
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, HeaderValue); 6] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body).into_response()
}
