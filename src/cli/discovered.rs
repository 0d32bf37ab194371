//! `switchyard check`, `tools` and `tools search`: what one discovery of every backend found, printed for the
//! operator, on a gateway `main.rs` loaded for discovering only.
//!
//! Rules: the tables alone go to stdout for `tools` (what is missing from them, and why, goes to stderr); only a
//! failed discovery or a withheld tool makes `check` exit 1 — notes and screening findings are for the operator to
//! judge; agents' and backends' text is printed through [`super::terminal::escaped`]; the stdio processes
//! discovery started are stopped before returning.

use std::process::ExitCode;

use switchyard::catalog::BackendStatus;
use switchyard::catalog::screen::screen;
use switchyard::gateway::Gateway;

use super::table::{first_line, print_table};
use super::terminal::escaped;

/// Exit status 1 when a backend failed discovery or a tool was withheld: both need the operator's attention.
pub async fn check(gateway: Gateway) -> anyhow::Result<ExitCode> {
    Gateway::load_tls(&gateway.config)?;
    gateway.discover_once().await;
    let catalog = gateway.router.catalog();
    let rows = catalog
        .routes()
        .iter()
        .map(|route| [route.exposed.clone(), route.backend.to_string(), route.name.clone()])
        .collect();
    print_table(["EXPOSED NAME", "BACKEND", "TOOL"], rows);
    println!("data directory: {}", gateway.config.server.data_dir.display());
    // Rules the operator should know, not failures: the exit status stays as discovery decides.
    for note in gateway.config.principal_notes() {
        println!("note: {note}");
    }
    let failures = backend_failures(&gateway);
    for failure in &failures {
        println!("{failure}");
    }
    let mut healthy = failures.is_empty();
    for withheld in catalog.withheld() {
        healthy = false;
        println!(
            "withheld: {} `{}` of backend `{}`: {}",
            withheld.kind,
            escaped(&withheld.name),
            withheld.backend,
            escaped(&withheld.reason)
        );
    }
    // Findings are for the operator to judge (`screen` decides what they do); they leave the exit status alone.
    for finding in screening_findings(&gateway) {
        println!("{finding}");
    }
    gateway.stop_processes().await;
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What screening finds in the definitions of every tool discovered (served or quarantined), one line each.
fn screening_findings(gateway: &Gateway) -> Vec<String> {
    let catalog = gateway.router.catalog();
    let mut routes = catalog.routes();
    routes.extend(catalog.quarantined_tools());
    let mut lines = Vec::new();
    for route in routes {
        let Some(backend) = gateway.config.backends.iter().find(|backend| *backend.name == *route.backend) else {
            continue;
        };
        for finding in screen(&route.bare, backend.pins.max_description) {
            let (name, finding) = (escaped(&route.name), escaped(&finding.0));
            lines.push(format!("suspicious: tool `{name}` of backend `{}`: {finding}", route.backend));
        }
    }
    lines
}

/// Each backend's failure once, in the sentence that names the backend, its URL or command, and the cause: a failed
/// discovery, or else a stdio backend's failing starts.
fn backend_failures(gateway: &Gateway) -> Vec<String> {
    let mut failed = Vec::new();
    let mut lines = Vec::new();
    for backend in gateway.router.catalog().statuses() {
        if let BackendStatus::Failed { error } = backend.status {
            lines.push(format!("discovery failed: {}", escaped(&error)));
            failed.push(backend.name);
        }
    }
    for (backend, failures, error, _) in gateway.router.failing_starts() {
        if !failed.contains(&backend) {
            lines.push(format!("process does not start (failed starts in a row: {failures}): {}", escaped(&error)));
        }
    }
    lines
}

/// The discovered tools, one row each.
pub async fn tools(gateway: Gateway) -> anyhow::Result<ExitCode> {
    gateway.discover_once().await;
    let rows = gateway
        .router
        .catalog()
        .routes()
        .iter()
        .map(|route| {
            let description = route.definition.get("description").and_then(|d| d.as_str()).unwrap_or_default();
            [route.exposed.clone(), route.backend.to_string(), first_line(description, 60)]
        })
        .collect();
    print_table(["NAME", "BACKEND", "DESCRIPTION"], rows);
    // The table stays the only thing on stdout; what is missing from it, and why, goes to stderr.
    for failure in backend_failures(&gateway) {
        eprintln!("{failure}");
    }
    gateway.stop_processes().await;
    Ok(ExitCode::SUCCESS)
}

/// The discovered tools ranked for `query`, as an agent's search would rank them ([`super::search`]).
pub async fn search(gateway: Gateway, query: &str, principal: Option<&str>, limit: usize) -> anyhow::Result<ExitCode> {
    gateway.discover_once().await;
    let found = super::search::print(&gateway.router, &gateway.config, query, principal, limit);
    for failure in backend_failures(&gateway) {
        eprintln!("{failure}");
    }
    gateway.stop_processes().await;
    Ok(found)
}
