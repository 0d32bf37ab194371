//! Announcing new approval requests: each is POSTed as JSON to `[approvals] notify_url` (a chat webhook, a
//! paging tool) by a task of its own, so the call never waits for the hook.
//!
//! Rules: the body names the tool (exposed and backend names), the backend, the principal, the arguments'
//! digest (never the arguments), the key, the commands that decide it and `page_url`: the console's approvals
//! page opened on this request by a signed link ticket (`front::ConsoleTickets`); a failing hook (no answer, or not a
//! 2xx status) is retried [`ATTEMPTS`] times with a doubling pause, then logged and counted as given up.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use crate::front::ConsoleTickets;
use crate::ledger::{ApprovalRow, ClaimKey};
use crate::router::{Announce, decision_commands};
use crate::telemetry::Metrics;

/// How many times one announcement is tried.
const ATTEMPTS: u32 = 4;
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const TIMEOUT: Duration = Duration::from_secs(10);

/// Posts announcements to one URL.
#[derive(Debug, Clone)]
pub struct Notifier {
    url: Url,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    pages: Arc<PageLinks>,
}

/// Makes the `page_url` of an announcement.
#[derive(Debug)]
pub struct PageLinks {
    /// The gateway's URL as agents and operators reach it (`[server] public_url`).
    pub public_url: String,
    pub tickets: ConsoleTickets,
}

impl PageLinks {
    /// The approvals page opened on the request under `key`.
    fn page_url(&self, key: &ClaimKey) -> String {
        let ticket = self.tickets.link_ticket(key.as_str());
        format!("{}/ui/#approval={ticket}", self.public_url.trim_end_matches('/'))
    }
}

impl Announce for Notifier {
    /// Posts in a task of its own.
    fn announce(&self, row: &ApprovalRow, exposed: &str) {
        let body = body(row, exposed, self.pages.page_url(&row.key));
        let notifier = self.clone();
        tokio::spawn(async move { notifier.post(&body).await });
    }
}

impl Notifier {
    pub fn new(url: Url, metrics: Arc<Metrics>, pages: PageLinks) -> Result<Notifier, reqwest::Error> {
        let client = reqwest::Client::builder().timeout(TIMEOUT).build()?;
        Ok(Notifier { url, client, metrics, pages: Arc::new(pages) })
    }

    async fn post(&self, body: &Value) {
        let mut pause = FIRST_PAUSE;
        for attempt in 1..=ATTEMPTS {
            let request = self.client.post(self.url.clone()).header(reqwest::header::CONTENT_TYPE, "application/json");
            let sent = request.body(body.to_string()).send().await;
            let failure = match sent {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => format!("HTTP status {}", response.status().as_u16()),
                Err(error) => error.without_url().to_string(),
            };
            self.metrics.count_approval_notification_failure();
            tracing::warn!(attempt, %failure, "approvals: the notify_url hook failed");
            if attempt < ATTEMPTS {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        tracing::error!(key = body["key"].as_str().unwrap_or_default(), "approvals: gave up announcing a request");
    }
}

fn body(row: &ApprovalRow, exposed: &str, page_url: String) -> Value {
    let [approve, deny] = decision_commands(&row.key);
    json!({
        "key": row.key.as_str(),
        "tool": exposed,
        "backend": row.backend,
        "backend_tool": row.tool,
        "principal": row.principal,
        "arguments_sha256": row.args_digest,
        "approve_command": approve,
        "deny_command": deny,
        "page_url": page_url,
    })
}
