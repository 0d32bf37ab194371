//! `switchyard calls approve KEY` / `deny KEY`: an approver decides a tool call that awaits approval, straight in
//! the ledger every replica shares; and the decision lines of `switchyard calls show`.
//!
//! Rules: with `[approvals] approvers` configured, `--as NAME` says who decides and must be an approver (by name,
//! or by a group its API keys give it); without, any operator with the ledger decides (recorded as `--as`, else
//! `operator`). The caller itself never decides its own call. Only `[server]`, `[ledger]`, `[approvals]` and
//! `[auth]` are read (no backend's secret is needed). The running gateways learn of the decision from the ledger
//! and announce it (count it, audit it). Everything printed goes through [`super::terminal`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use switchyard::auth::Principal;
use switchyard::backend::oauth::{TOKEN_KEY_FILE_NAME, Vault};
use switchyard::config::Config;
use switchyard::ledger::{ApprovalRow, ClaimKey};
use switchyard::router::{approval_arguments, decide};

use super::calls::timestamp;
use super::open_ledger_of;
use super::terminal::{escaped, shell_word};

/// Who decides when `--as` is not given and no approvers are configured.
const OPERATOR: &str = "operator";

/// What an approver typed.
pub struct Decide {
    pub key: String,
    pub approve: bool,
    pub note: Option<String>,
    pub by: Option<String>,
}

pub async fn run(decide_this: Decide, config_path: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    // The decider's groups come from the API keys; nothing else of the file (no backend's secret) is needed.
    let config = Config::find_sections(config_path.as_deref(), &["server", "ledger", "approvals", "auth"])?;
    let approvers = switchyard::gateway::approvals::approvers(&config);
    let name = match (&decide_this.by, config.approvals.approvers.is_empty()) {
        (Some(name), _) => name.clone(),
        (None, true) => OPERATOR.to_owned(),
        (None, false) => {
            bail!("say who decides with `--as NAME`: `[approvals] approvers` lists who may approve or deny")
        }
    };
    let groups = config
        .auth
        .api_keys
        .iter()
        .filter(|key| key.principal == name)
        .flat_map(|key| key.groups.iter().cloned())
        .collect();
    let decider = Principal { name, groups };
    let store = open_ledger_of(&config).await?;
    let key = ClaimKey::parse(&decide_this.key)?;
    let row = decide(&store, None, &approvers, &decider, &key, decide_this.approve, decide_this.note).await?;
    let effect = match decide_this.approve {
        true => "approved: the agent's next retry with its key runs the call (once)",
        false => "denied: the call will not run under this key",
    };
    println!("{}: {effect}", shell_word(row.key.as_str()));
    Ok(ExitCode::SUCCESS)
}

/// The approval lines of `calls show` for `row`, with its arguments when the token key is at hand.
pub fn fields(row: &ApprovalRow, data_dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let now = std::time::SystemTime::now();
    // Only an existing key file is read: showing a call never creates one.
    let key_file = data_dir.join(TOKEN_KEY_FILE_NAME);
    let arguments = (key_file.is_file().then(|| Vault::load_or_create(&key_file).ok()))
        .flatten()
        .and_then(|vault| approval_arguments(&vault, row))
        .map_or_else(|| "(sealed; the token key is not at hand)".to_owned(), |arguments| arguments.to_string());
    vec![
        ("approval", row.state_at(now).as_str().to_owned()),
        ("requested", timestamp(row.requested_at)),
        ("expires", timestamp(row.expires_at)),
        ("decided by", row.decided_by.clone().unwrap_or_default()),
        ("decided", row.decided_at.map(timestamp).unwrap_or_default()),
        ("note", row.note.clone().unwrap_or_default()),
        ("arguments", arguments),
    ]
}

/// Prints `fields` as `calls show` prints every line of a call: the name right-aligned, the value escaped.
pub fn print(fields: &[(&'static str, String)]) {
    for (name, value) in fields {
        println!("{name:>17}: {}", escaped(value));
    }
}
