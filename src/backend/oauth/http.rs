//! Bounded HTTP for the OAuth exchanges: metadata documents, client registration and the token endpoint.
//!
//! Rules (design §6: "redirects are not followed", "every input is bounded"):
//! - No redirect is ever followed: a metadata URL or token endpoint that redirects is answered as what it is,
//!   a non-success status, so a server cannot send the gateway (and a client secret) elsewhere.
//! - Every exchange has one deadline ([`HttpLimits::timeout`]) and reads at most [`HttpLimits::max_body`] bytes.
//! - Answers are JSON objects or nothing: a body that is not one is reported as such, with the status.

use std::time::Duration;

use reqwest::{Client, RequestBuilder, StatusCode, Url};
use serde_json::{Map, Value};

/// The bounds of every OAuth exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    pub timeout: Duration,
    pub max_body: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(10), max_body: 1 << 20 }
    }
}

/// An answer: its status and, when the body was a JSON object, the object.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) json: Option<Map<String, Value>>,
    /// The start of a body that was not a JSON object, for messages.
    pub(super) excerpt: String,
}

impl Answer {
    /// What the answer was, for a message: the status and what the body looked like.
    pub(super) fn describe(&self) -> String {
        match &self.json {
            Some(_) => format!("HTTP {}", self.status),
            None if self.excerpt.is_empty() => format!("HTTP {} with an empty body", self.status),
            None => format!("HTTP {} with a body that is not a JSON object ({:?})", self.status, self.excerpt),
        }
    }
}

/// Why an exchange produced no answer at all.
#[derive(Debug)]
pub(super) struct Failed(pub(super) String);

/// The HTTP client of the OAuth exchanges.
#[derive(Debug, Clone)]
pub(super) struct Http {
    client: Client,
    limits: HttpLimits,
}

impl Http {
    pub(super) fn new(limits: HttpLimits) -> Result<Http, reqwest::Error> {
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(limits.timeout)
            .connect_timeout(limits.timeout)
            .build()?;
        Ok(Http { client, limits })
    }

    pub(super) async fn get(&self, url: &Url) -> Result<Answer, Failed> {
        self.send(self.client.get(url.clone()).header(reqwest::header::ACCEPT, "application/json")).await
    }

    pub(super) fn post(&self, url: &Url) -> RequestBuilder {
        self.client.post(url.clone()).header(reqwest::header::ACCEPT, "application/json")
    }

    pub(super) async fn send(&self, request: RequestBuilder) -> Result<Answer, Failed> {
        let mut response = request.send().await.map_err(|error| Failed(describe_error(&error)))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| Failed(describe_error(&error)))? {
            if body.len() + chunk.len() > self.limits.max_body {
                return Err(Failed(format!("answered more than {} bytes", self.limits.max_body)));
            }
            body.extend_from_slice(&chunk);
        }
        let json = match serde_json::from_slice(&body) {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        };
        let excerpt = if json.is_some() {
            String::new()
        } else {
            String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned()
        };
        Ok(Answer { status, json, excerpt })
    }
}

/// reqwest's message with its causes, which hold the useful part ("connection refused").
fn describe_error(error: &reqwest::Error) -> String {
    let mut message = if error.is_timeout() { "timed out".to_owned() } else { error.to_string() };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}
