//! `switchyard tools pins | diff | approve | reject`: the operator's side of pinned tool definitions, working on
//! the ledger directly (like `switchyard calls`: no backend secret needed, a missing ledger is an error). A
//! running gateway notices every decision within its poll of the pins and tells its agents.
//!
//! Rules: an approval or rejection applies to the offered definition the command read (its digest), never to one
//! a backend offered after; who approved is `--as`, else the OS user. Backends choose names and definitions, so
//! everything they wrote is printed [`escaped`].

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::Value;
use switchyard::ledger::{LedgerStore, PinRow, PinState};

use super::calls::timestamp;
use super::open_ledger;
use super::table::print_table;
use super::terminal::escaped;

#[derive(Subcommand)]
pub enum PinsAction {
    /// List the pinned definitions: state, digest, first seen, approved by.
    Pins {
        /// Only this backend's.
        #[arg(long)]
        backend: Option<String>,
        /// Only the quarantined ones.
        #[arg(long)]
        quarantined: bool,
    },
    /// Print the pinned and the offered definition of BACKEND/TOOL side by side.
    Diff { item: String },
    /// Accept the offered definition of BACKEND/TOOL (or of every item of `--backend B --all`): it is pinned and
    /// served.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["item", "all"])))]
    Approve {
        item: Option<String>,
        /// Every item of `--backend` with an offered definition.
        #[arg(long, requires = "backend")]
        all: bool,
        #[arg(long)]
        backend: Option<String>,
        /// Who approves (recorded); default: the OS user.
        #[arg(long = "as", value_name = "NAME")]
        by: Option<String>,
    },
    /// Keep BACKEND/TOOL quarantined with the offered definition (also under `pin = "warn"`).
    Reject { item: String },
}

pub async fn run(action: PinsAction, config: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let store = open_ledger(config).await?;
    match action {
        PinsAction::Pins { backend, quarantined } => list(&store, backend.as_deref(), quarantined).await,
        PinsAction::Diff { item } => diff(&find(&store, &item).await?),
        PinsAction::Approve { item: Some(item), by, .. } => {
            let row = find(&store, &item).await?;
            approve(&store, &[row], &approver(by)).await
        }
        PinsAction::Approve { backend, by, .. } => {
            let backend = backend.context("--all needs --backend")?;
            let offered: Vec<PinRow> =
                store.pins(Some(&backend)).await?.into_iter().filter(|row| row.offered_digest.is_some()).collect();
            if offered.is_empty() {
                bail!("backend `{}` has no offered definition waiting for approval", escaped(&backend));
            }
            approve(&store, &offered, &approver(by)).await
        }
        PinsAction::Reject { item } => {
            let row = find(&store, &item).await?;
            let Some(offered) = &row.offered_digest else {
                bail!("{} has no offered definition to reject", label(&row))
            };
            if !store.reject_pin(&row.key, offered).await? {
                bail!("{}: the backend offered another definition meanwhile; look at `tools diff` again", label(&row));
            }
            println!("{}: rejected; it stays quarantined", label(&row));
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn list(store: &LedgerStore, backend: Option<&str>, quarantined: bool) -> anyhow::Result<ExitCode> {
    let rows = store.pins(backend).await?;
    let shown = rows.iter().filter(|row| !quarantined || row.state == PinState::Quarantined);
    let cells = |row: &PinRow| {
        [
            row.key.backend.clone(),
            row.key.kind.clone(),
            row.key.name.clone(),
            row.state.as_str().to_owned(),
            short(&row.digest),
            row.offered_digest.as_deref().map(short).unwrap_or_default(),
            timestamp(UNIX_EPOCH + Duration::from_secs(row.first_seen)),
            row.approved_by.clone().unwrap_or_default(),
        ]
    };
    let header = ["BACKEND", "KIND", "NAME", "STATE", "DIGEST", "OFFERED", "FIRST SEEN (UTC)", "APPROVED BY"];
    print_table(header, shown.map(cells).collect());
    Ok(ExitCode::SUCCESS)
}

/// The pin of `BACKEND/NAME` (a tool, else a prompt of that name).
async fn find(store: &LedgerStore, item: &str) -> anyhow::Result<PinRow> {
    let Some((backend, name)) = item.split_once('/') else {
        bail!("`{}`: expected BACKEND/TOOL, e.g. github/create_issue", escaped(item))
    };
    let rows = store.pins(Some(backend)).await?;
    let mut named: Vec<PinRow> = rows.into_iter().filter(|row| row.key.name == name).collect();
    named.sort_by_key(|row| row.key.kind != "tool");
    named.into_iter().next().with_context(|| format!("no pinned tool or prompt `{}`", escaped(item)))
}

async fn approve(store: &LedgerStore, rows: &[PinRow], by: &str) -> anyhow::Result<ExitCode> {
    let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    for row in rows {
        let Some(offered) = &row.offered_digest else { bail!("{} has no offered definition to approve", label(row)) };
        if !store.approve_pin(&row.key, offered, by, at).await? {
            bail!("{}: the backend offered another definition meanwhile; look at `tools diff` again", label(row));
        }
        println!("{}: approved by {} (sha256 {})", label(row), escaped(by), short(offered));
    }
    Ok(ExitCode::SUCCESS)
}

fn approver(by: Option<String>) -> String {
    by.unwrap_or_else(super::os_user)
}

fn label(row: &PinRow) -> String {
    format!("{} `{}/{}`", row.key.kind, escaped(&row.key.backend), escaped(&row.key.name))
}

fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// Prints both definitions as indented JSON side by side, `|` marking lines that differ, `<` and `>` lines only
/// one side has.
fn diff(row: &PinRow) -> anyhow::Result<ExitCode> {
    let Some(offered) = &row.offered else {
        println!("{}: nothing offered; the pinned definition is served (sha256 {})", label(row), short(&row.digest));
        return Ok(ExitCode::SUCCESS);
    };
    let pinned = pretty_lines(&row.definition)?;
    let offered = pretty_lines(offered)?;
    let width = pinned.iter().map(|line| line.chars().count()).max().unwrap_or(0).clamp(24, 80);
    let pinned_title = match row.digest.is_empty() {
        true => "pinned: nothing (new)".to_owned(),
        false => format!("pinned (sha256 {})", short(&row.digest)),
    };
    let offered_title = format!("offered (sha256 {})", short(row.offered_digest.as_deref().unwrap_or_default()));
    println!("{}  state: {}", label(row), row.state.as_str());
    println!("{pinned_title:<width$}   {offered_title}");
    for (left, mark, right) in side_by_side(&pinned, &offered) {
        println!("{:<width$} {mark} {}", escaped(left), escaped(right));
    }
    Ok(ExitCode::SUCCESS)
}

fn pretty_lines(text: &str) -> anyhow::Result<Vec<String>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_json::from_str(text).context("a stored definition is not JSON")?;
    Ok(serde_json::to_string_pretty(&value)?.lines().map(str::to_owned).collect())
}

/// Aligns two line lists on their longest common subsequence.
fn side_by_side<'a>(left: &'a [String], right: &'a [String]) -> Vec<(&'a str, char, &'a str)> {
    let (n, m) = (left.len(), right.len());
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] =
                if left[i] == right[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut lines) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && left[i] == right[j] {
            lines.push((left[i].as_str(), ' ', right[j].as_str()));
            (i, j) = (i + 1, j + 1);
        } else if i < n && j < m && common[i + 1][j] == common[i][j + 1] {
            lines.push((left[i].as_str(), '|', right[j].as_str()));
            (i, j) = (i + 1, j + 1);
        } else if j == m || (i < n && common[i + 1][j] >= common[i][j + 1]) {
            lines.push((left[i].as_str(), '<', ""));
            i += 1;
        } else {
            lines.push(("", '>', right[j].as_str()));
            j += 1;
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_are_paired_and_extra_lines_marked() {
        let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
        let (left, right) = (lines("{\na\nb\n}"), lines("{\na\nB\nc\n}"));
        let marks: String = side_by_side(&left, &right).iter().map(|(_, mark, _)| *mark).collect();
        assert_eq!(marks, "  |> ");
    }
}
