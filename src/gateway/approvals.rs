//! Lowers `[approvals]` into the router's [`ApprovalGate`] and the deciders' [`Approvers`]: the arguments of
//! held calls are sealed under the backend token key (`oauth-tokens.key` in the data directory, shared by the
//! replicas like the tokens themselves), read when a call first needs it.

use std::sync::Arc;

use crate::backend::oauth::TOKEN_KEY_FILE_NAME;
use crate::config::Config;
use crate::router::{Announce, ApprovalGate, Approvers, VaultFile};

use super::approval_hook::Notifier;
use crate::telemetry::Metrics;

use super::GatewayError;

/// The router's approval gate.
pub(super) fn gate(config: &Config, metrics: &Arc<Metrics>) -> Result<ApprovalGate, GatewayError> {
    let approvals = &config.approvals;
    let notifier = approvals
        .notify_url
        .clone()
        .map(|url| Notifier::new(url, Arc::clone(metrics)).map(|notifier| Arc::new(notifier) as Arc<dyn Announce>))
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
