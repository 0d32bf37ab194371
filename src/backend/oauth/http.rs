//! Bounded, filtered HTTP for the OAuth exchanges: metadata documents, client registration and the token endpoint.
//!
//! Rules (no redirect is followed; every input is bounded):
//! - No redirect is ever followed: a metadata URL or token endpoint that redirects is answered as what it is,
//!   a non-success status, so a server cannot send the gateway (and a client secret) elsewhere, and only the
//!   URL the gateway chose is ever connected to.
//! - Every URL passes [`AddressPolicy`] before it is connected to (`address.rs`): the scheme and IP literals
//!   here, resolved names in the client's resolver; no proxy is used, so the address checked is the one
//!   connected to. A refusal is [`Failed::Refused`]: nothing was sent.
//! - Every exchange has one deadline ([`HttpLimits::timeout`]) and reads at most [`HttpLimits::max_body`] bytes.
//! - Answers are JSON objects or nothing: a body that is not one is reported by its status and size, never by
//!   its content (a server's text is not repeated into messages or the log).

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, RequestBuilder, StatusCode, Url};
use serde_json::{Map, Value};

use super::address::{AddressPolicy, GuardedResolver, Refused};
use super::error::OAuthError;

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
    /// The body's size, for messages about a body that was not a JSON object.
    pub(super) body_len: usize,
}

impl Answer {
    /// What the answer was, for a message: the status and what the body looked like.
    pub(super) fn describe(&self) -> String {
        match &self.json {
            Some(_) => format!("HTTP {}", self.status),
            None if self.body_len == 0 => format!("HTTP {} with an empty body", self.status),
            None => format!("HTTP {} with a {}-byte body that is not a JSON object", self.status, self.body_len),
        }
    }
}

/// Why an exchange produced no answer at all.
#[derive(Debug)]
pub(super) enum Failed {
    /// The URL or its address is not allowed: nothing was sent.
    Refused(Refused),
    Unreachable(String),
}

impl Failed {
    /// The error of an exchange with `url` (the `what` at that URL) that failed so.
    pub(super) fn error(self, what: &'static str, url: &Url) -> OAuthError {
        match self {
            Failed::Refused(refused) => {
                OAuthError::NotAllowed { what, url: url.to_string(), reason: refused.to_string() }
            }
            Failed::Unreachable(reason) => OAuthError::Unreachable { what, url: url.to_string(), reason },
        }
    }
}

/// The HTTP client of one backend's OAuth exchanges.
#[derive(Debug, Clone)]
pub(super) struct Http {
    client: Client,
    limits: HttpLimits,
    policy: Arc<AddressPolicy>,
}

impl Http {
    pub(super) fn new(limits: HttpLimits, policy: AddressPolicy) -> Result<Http, reqwest::Error> {
        let policy = Arc::new(policy);
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver(Arc::clone(&policy))))
            .timeout(limits.timeout)
            .connect_timeout(limits.timeout)
            .build()?;
        Ok(Http { client, limits, policy })
    }

    pub(super) async fn get(&self, url: &Url) -> Result<Answer, Failed> {
        self.send(self.client.get(url.clone()).header(reqwest::header::ACCEPT, "application/json")).await
    }

    pub(super) fn post(&self, url: &Url) -> RequestBuilder {
        self.client.post(url.clone()).header(reqwest::header::ACCEPT, "application/json")
    }

    pub(super) async fn send(&self, request: RequestBuilder) -> Result<Answer, Failed> {
        let request = request.build().map_err(|error| Failed::Unreachable(describe_error(&error)))?;
        self.policy.check_url(request.url()).await.map_err(Failed::Refused)?;
        let mut response = self.client.execute(request).await.map_err(failed)?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > self.limits.max_body {
                return Err(Failed::Unreachable(format!("answered more than {} bytes", self.limits.max_body)));
            }
            body.extend_from_slice(&chunk);
        }
        let json = match serde_json::from_slice(&body) {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        };
        Ok(Answer { status, json, body_len: body.len() })
    }
}

/// A refusal by the resolver, found among the causes; else the error as text.
fn failed(error: reqwest::Error) -> Failed {
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Failed::Refused(refused.clone());
        }
        source = cause.source();
    }
    Failed::Unreachable(describe_error(&error))
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
