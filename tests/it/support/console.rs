//! A client of the operator's console API (`/admin/api/`): one request, its answer read whole (status, headers,
//! JSON body, `Null` when the body is not JSON), and the browser log lines its refusals leave.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// One answer of the console API.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The refusal's `error.message`; empty when there is none.
    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

/// `GET base+path`, or `POST` of the JSON `body` when one is given, with `headers`.
pub async fn send(base: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Answer {
    let http = reqwest::Client::new();
    let url = format!("{base}{path}");
    let mut request = match body {
        Some(body) => http.post(url).header("content-type", "application/json").body(body.to_string()),
        None => http.get(url),
    };
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the gateway answers");
    let (status, headers) = (response.status(), response.headers().clone());
    let body = serde_json::from_str(&response.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    Answer { status, headers, body }
}

/// `GET base+path` with `headers`.
pub async fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(base, path, headers, None).await
}

/// `path` from `from` (a header saying it came through a proxy: another machine; `None`: this one), with
/// `Authorization: Bearer <key>` when a key is given.
pub async fn get_as(base: &str, path: &str, from: Option<(&str, &str)>, key: Option<&str>) -> Answer {
    let bearer = key.map(|key| format!("Bearer {key}"));
    let mut headers: Vec<(&str, &str)> = from.into_iter().collect();
    headers.extend(bearer.as_deref().map(|value| ("authorization", value)));
    get(base, path, &headers).await
}

/// Whether a headless browser's log line (`support::chromium`) is its own report of a console API answer with
/// one of `statuses`: what a page logs for a refusal it expects (before it is given a key, say).
pub fn refused_api(problem: &Value, statuses: &[&str]) -> bool {
    let entry = &problem["entry"];
    entry["source"] == "network"
        && entry["url"].as_str().is_some_and(|url| url.contains("/admin/api/"))
        && entry["text"].as_str().is_some_and(|text| statuses.iter().any(|status| text.contains(status)))
}
