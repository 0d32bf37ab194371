//! Lowers `[approvals]` into the router's [`ApprovalGate`] and the deciders' [`Approvers`]: the arguments of
//! held calls are sealed under the backend token key (`oauth-tokens.key` in the data directory, shared by the
//! replicas like the tokens themselves), read when a call first needs it.

use std::sync::Arc;

use crate::backend::oauth::TOKEN_KEY_FILE_NAME;
use crate::config::Config;
use crate::front::ConsoleTickets;
use crate::router::{Announce, ApprovalGate, Approvers, VaultFile};

use super::approval_hook::{Notifier, PageLinks};
use crate::telemetry::Metrics;

use super::GatewayError;

/// The router's approval gate; its announcements link to the approvals page with `tickets`.
pub(super) fn gate(
    config: &Config,
    metrics: &Arc<Metrics>,
    tickets: ConsoleTickets,
) -> Result<ApprovalGate, GatewayError> {
    let approvals = &config.approvals;
    let notifier = approvals
        .notify_url
        .clone()
        .map(|url| {
            let pages = PageLinks { public_url: config.server.public_url(), tickets: tickets.clone() };
            Notifier::new(url, Arc::clone(metrics), pages).map(|notifier| Arc::new(notifier) as Arc<dyn Announce>)
        })
        .transpose()
        .map_err(|error| GatewayError::Approvals(format!("the notify_url client: {error}")))?;
    Ok(ApprovalGate {
        timeout: approvals.timeout,
        wait: approvals.wait,
        vault: VaultFile::new(config.server.data_dir.join(TOKEN_KEY_FILE_NAME)),
        notifier,
        metrics: Arc::clone(metrics),
    })
}

/// Who may decide approval requests.
pub fn approvers(config: &Config) -> Approvers {
    Approvers::new(config.approvals.approvers.iter().map(super::access::subject).collect())
}
