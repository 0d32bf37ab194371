//! One OTLP/HTTP JSON `POST` to a collector, shared by the trace exporter and the audit trail's log records
//! (OTLP specification, "OTLP/HTTP").
//!
//! Rules: redirects are not followed (the endpoint comes from configuration only); the headers (often an API key)
//! are marked sensitive and never logged; a failing collector is logged once when it starts failing and once when
//! it answers again, naming what is lost (`signal`).

use std::time::Duration;

use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

/// Posts bodies to one collector endpoint.
pub(super) struct OtlpPost {
    http: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    /// What the bodies carry, for the log ("spans", "audit events").
    signal: &'static str,
    /// Whether the last post failed (so a failing collector is logged once, not per batch).
    failing: bool,
}

impl OtlpPost {
    /// A poster to `endpoint`; the error says why its HTTP client could not be built.
    pub(super) fn new(
        endpoint: Url,
        headers: &[(HeaderName, HeaderValue)],
        timeout: Duration,
        signal: &'static str,
    ) -> Result<OtlpPost, String> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .map_err(|error| error.to_string())?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let mut value = value.clone();
            value.set_sensitive(true);
            map.append(name.clone(), value);
        }
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(OtlpPost { http, endpoint, headers: map, signal, failing: false })
    }

    /// Posts `body`; whether the collector accepted it.
    pub(super) async fn post(&mut self, body: Vec<u8>) -> bool {
        let request = self.http.post(self.endpoint.clone()).headers(self.headers.clone()).body(body);
        let failure = match request.send().await {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("the collector answered HTTP {}", response.status().as_u16())),
            Err(error) => Some(error_chain(&error)),
        };
        let (endpoint, signal) = (&self.endpoint, self.signal);
        match failure {
            None => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(%endpoint, "OTLP export of {signal} works again");
                }
                true
            }
            Some(error) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(%endpoint, %error, "OTLP export failed; {signal} are dropped until the collector answers");
                }
                false
            }
        }
    }
}

/// reqwest's top-level message hides the cause ("error sending request"); the chain of sources names it.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let chain = std::iter::successors(Some(error), |error| error.source());
    chain.map(ToString::to_string).collect::<Vec<_>>().join(": ")
}
