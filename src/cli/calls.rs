//! `switchyard calls`: the operator's view of the ledger — list and filter claims, show one (with its approval,
//! if it needed one, and its history of resolutions), settle an `unknown` one (recording who, when and why), and approve or deny one awaiting approval (`super::approvals`). Part of the binary's edge, like `main.rs`.
//!
//! Rules: agents choose keys, principals and tool names, backends choose error texts and results; all of it is
//! printed through [`super::terminal`]: keys as shell words (a pasted key runs nothing), the rest escaped.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use switchyard::config::Config;
use switchyard::ledger::{
    ApprovalState, ClaimKey, ClaimRecord, ClaimState, LedgerStore, ListFilter, Resolution, ResolutionRecord, Resolve,
};

use clap::Subcommand;

use super::open_ledger;
use super::table::print_table;
use super::terminal::{escaped, shell_word};

#[derive(clap::Args)]
pub struct CallsFilter {
    /// Only calls in this state: in_flight, completed, unknown, or awaiting_approval (the approval requests
    /// nobody has decided yet).
    #[arg(long)]
    pub state: Option<String>,
    /// Only calls made by this principal (an API key's `principal`; a JWT's `principal_prefix` and claim).
    #[arg(long)]
    pub principal: Option<String>,
    /// Only calls routed to this backend.
    #[arg(long)]
    pub backend: Option<String>,
    /// Only calls of this tool (the backend's own name).
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls started within this long, e.g. "1h".
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many calls, the latest first [default: 100].
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Subcommand)]
pub enum CallsAction {
    /// Everything the ledger knows about one call, its approval decision included.
    Show { key: String },
    /// Approve a call awaiting approval: the agent's next retry with its key runs it, once.
    Approve {
        key: String,
        /// Why, recorded with the decision and shown to the agent.
        #[arg(long)]
        note: Option<String>,
        /// Who decides (an approver of `[approvals] approvers`).
        #[arg(long = "as")]
        by: Option<String>,
    },
    /// Deny a call awaiting approval: it never runs under its key.
    Deny {
        key: String,
        /// Why, recorded with the decision and shown to the agent.
        #[arg(long)]
        note: Option<String>,
        /// Who decides (an approver of `[approvals] approvers`).
        #[arg(long = "as")]
        by: Option<String>,
    },
    /// Settle an `unknown` call: `--completed` (it ran; retries are answered without running) or `--failed`
    /// (it did not run; a retry runs it). Who (the OS user), when and the note are kept in the call's history,
    /// which `show` prints.
    // One group, so a missing flag names both and two flags are refused.
    #[command(group(clap::ArgGroup::new("resolution").required(true).args(["completed", "failed"])))]
    Resolve {
        key: String,
        #[arg(long)]
        completed: bool,
        #[arg(long)]
        failed: bool,
        /// Why, kept in the call's history.
        #[arg(long)]
        note: Option<String>,
    },
}

/// How many calls `switchyard calls` lists without `--limit`.
const DEFAULT_LIST_LIMIT: usize = 100;

/// `config`: the global `--config`.
pub async fn run(
    action: Option<CallsAction>,
    filter: CallsFilter,
    config: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    // Checked here rather than by clap's `args_conflicts_with_subcommands`, which would refuse the global
    // `--config` too (`switchyard calls --config X show KEY`).
    if action.is_some() && filters_anything(&filter) {
        bail!(
            "--state, --principal, --backend, --tool, --since and --limit filter the list of calls; `show`, `resolve`, `approve` and `deny` take a key"
        );
    }
    match action {
        None => list(filter, config).await,
        Some(CallsAction::Show { key }) => show(&key, config).await,
        Some(CallsAction::Approve { key, note, by }) => {
            super::approvals::run(super::approvals::Decide { key, approve: true, note, by }, config).await
        }
        Some(CallsAction::Deny { key, note, by }) => {
            super::approvals::run(super::approvals::Decide { key, approve: false, note, by }, config).await
        }
        Some(CallsAction::Resolve { key, completed, note, .. }) => {
            let resolution = if completed { Resolution::Completed } else { Resolution::Failed };
            resolve(&key, Resolve { resolution, by: super::os_user(), note }, config).await
        }
    }
}

async fn list(filter: CallsFilter, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let store = open_ledger(config).await?;
    let since = match filter.since.as_deref() {
        Some(text) => Some(SystemTime::now() - switchyard::config::parse_duration(text).map_err(anyhow::Error::msg)?),
        None => None,
    };
    if filter.state.as_deref() == Some(ApprovalState::AwaitingApproval.as_str()) {
        return list_awaiting(&store, &filter, since).await;
    }
    let state = filter.state.as_deref().map(parse_state).transpose()?;
    let query = ListFilter {
        state,
        principal: filter.principal,
        backend: filter.backend,
        tool: filter.tool,
        since,
        limit: filter.limit.unwrap_or(DEFAULT_LIST_LIMIT),
    };
    let rows = store.list(&query).await?.iter().map(row).collect();
    print_table(["STARTED (UTC)", "STATE", "PRINCIPAL", "BACKEND", "TOOL", "KEY"], rows);
    Ok(ExitCode::SUCCESS)
}

/// The approval requests still awaiting a decision, newest first, with the same filters as the calls.
async fn list_awaiting(
    store: &LedgerStore,
    filter: &CallsFilter,
    since: Option<SystemTime>,
) -> anyhow::Result<ExitCode> {
    let limit = filter.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    let wanted = |wanted: &Option<String>, value: &str| wanted.as_deref().is_none_or(|wanted| wanted == value);
    let rows = store
        .awaiting_approvals(limit)
        .await?
        .into_iter()
        .filter(|row| since.is_none_or(|since| row.requested_at >= since))
        .filter(|row| wanted(&filter.principal, &row.principal))
        .filter(|row| wanted(&filter.backend, &row.backend) && wanted(&filter.tool, &row.tool))
        .map(|row| {
            let key = shell_word(row.key.as_str()).into_owned();
            [timestamp(row.requested_at), timestamp(row.expires_at), row.principal, row.backend, row.tool, key]
        })
        .collect();
    print_table(["REQUESTED (UTC)", "EXPIRES (UTC)", "PRINCIPAL", "BACKEND", "TOOL", "KEY"], rows);
    Ok(ExitCode::SUCCESS)
}

async fn show(key: &str, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let data_dir = Config::find_ledger(config.as_deref())?.server.data_dir;
    let store = open_ledger(config).await?;
    let key = ClaimKey::parse(key)?;
    let approval = store.approval(&key).await?.map(|row| super::approvals::fields(&row, &data_dir));
    let history = store.resolutions(&key).await?;
    let Some(record) = store.get(&key).await? else {
        if let Some(kept) = history.last() {
            print_kept(kept);
            print_history(&history);
            return Ok(ExitCode::SUCCESS);
        }
        let Some(approval) = approval else { bail!("no call with key {}", shell_word(key.as_str())) };
        println!("{:>17}: {}", "key", shell_word(key.as_str()));
        super::approvals::print(&approval);
        return Ok(ExitCode::SUCCESS);
    };
    let call = [&record.principal, &record.session, &record.backend, &record.tool, &record.args_digest];
    let mut fields = call_fields(&record.key, record.state.as_str(), call, record.created_at);
    fields.extend([
        ("updated", timestamp(record.updated_at)),
        ("owner", record.owner.clone()),
        ("error", record.error.clone().unwrap_or_default()),
        ("result sha256", record.result_digest.clone().unwrap_or_default()),
    ]);
    super::approvals::print(&fields);
    if let Some(approval) = &approval {
        super::approvals::print(approval);
    }
    print_history(&history);
    if let Some(result) = &record.result {
        let pretty = serde_json::to_string_pretty(&result.to_value()).context("result")?;
        let lines: Vec<Cow<'_, str>> = pretty.lines().map(escaped).collect();
        println!("{:>17}: {}", "result", lines.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

async fn resolve(key: &str, resolve: Resolve, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let store = open_ledger(config).await?;
    let key = ClaimKey::parse(key)?;
    store.resolve(&key, &resolve).await?;
    println!("{}: {}", shell_word(key.as_str()), resolve.resolution.effect());
    Ok(ExitCode::SUCCESS)
}

/// The call's resolutions, oldest first, one line each (`resolved_failed 2026-12-04 16:20:30 by ann: note`).
fn print_history(history: &[ResolutionRecord]) {
    for (index, row) in history.iter().enumerate() {
        let name = if index == 0 { "history" } else { "" };
        let note = row.note.as_deref().map(|note| format!(": {note}")).unwrap_or_default();
        let line = format!("{} {} by {}{note}", row.resolution.state(), timestamp(row.at), row.by);
        println!("{name:>17}: {}", escaped(&line));
    }
}

/// A call whose claim an operator's `--failed` deleted, as its last resolution kept it.
fn print_kept(kept: &ResolutionRecord) {
    let call = [&kept.principal, &kept.session, &kept.backend, &kept.tool, &kept.args_digest];
    let mut fields = call_fields(&kept.key, kept.resolution.state(), call, kept.started);
    fields.push(("error", kept.error.clone().unwrap_or_default()));
    super::approvals::print(&fields);
}

/// The names of what a live claim and a kept one both hold, after the key and the state.
const CALL_FIELDS: [&str; 5] = ["principal", "session", "backend", "tool", "arguments sha256"];

/// The first lines `calls show` prints of a call, live or kept: its key, its state, `call` (the values of
/// [`CALL_FIELDS`]) and when it started.
fn call_fields(key: &ClaimKey, state: &str, call: [&String; 5], started: SystemTime) -> Vec<(&'static str, String)> {
    let mut fields = vec![("key", shell_word(key.as_str()).into_owned()), ("state", state.to_owned())];
    fields.extend(CALL_FIELDS.into_iter().zip(call.map(String::clone)));
    fields.push(("started", timestamp(started)));
    fields
}

fn filters_anything(filter: &CallsFilter) -> bool {
    let CallsFilter { state, principal, backend, tool, since, limit } = filter;
    state.is_some() || principal.is_some() || backend.is_some() || tool.is_some() || since.is_some() || limit.is_some()
}

fn parse_state(text: &str) -> anyhow::Result<ClaimState> {
    ClaimState::parse(text)
        .with_context(|| format!("--state `{text}`: expected in_flight, completed, unknown or awaiting_approval"))
}

fn row(record: &ClaimRecord) -> [String; 6] {
    [
        timestamp(record.created_at),
        record.state.as_str().to_owned(),
        record.principal.clone(),
        record.backend.clone(),
        record.tool.clone(),
        shell_word(record.key.as_str()).into_owned(),
    ]
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub(crate) fn timestamp(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let (year, month, day) = switchyard::civil_date::civil_date(seconds / 86_400);
    let rest = seconds % 86_400;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01 00:00:00");
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29 00:00:00");
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(1_795_969_230)), "2026-11-29 16:20:30");
    }
}
