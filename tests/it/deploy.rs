//! `deploy/` (issue 13 deliverable 6): the Prometheus scrape configuration and the Grafana dashboard are valid, and
//! the dashboard's queries name only the metrics the issue defines, with their labels and outcome values.
//!
//! YAML is read by a small reader of the subset Prometheus configurations use ([`yaml`]); the PromQL of every
//! panel and variable by a small scanner ([`promql`]) that refuses what it cannot read. The metric names here are
//! the issue's; the gateway's own `/metrics` output is compared with them where metrics are served.

mod promql;
mod yaml;

use std::collections::HashSet;

use serde_json::Value;

/// The metrics the issue names, and the labels it gives each family.
const METRICS: [(&str, &[&str]); 3] = [
    ("mcp_server_operation_duration_seconds", &["mcp_method_name", "gen_ai_tool_name", "error_type"]),
    ("mcp_client_operation_duration_seconds", &["backend", "mcp_method_name", "error_type"]),
    ("switchyard_tool_calls_total", &["backend", "tool", "outcome"]),
];
/// The outcomes of `switchyard_tool_calls_total`.
const OUTCOMES: [&str; 6] = ["completed", "tool_error", "not_delivered", "unknown", "replayed", "denied"];

fn deploy_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_prometheus_config_scrapes_metrics() {
    let config = yaml::parse(&deploy_file("prometheus.yml")).expect("deploy/prometheus.yml is YAML");
    let interval = config["global"]["scrape_interval"].as_str().expect("global.scrape_interval");
    assert!(is_duration(interval), "{interval}");
    let jobs = config["scrape_configs"].as_array().expect("scrape_configs");
    let job = jobs.iter().find(|job| job["job_name"] == "switchyard").expect("a switchyard job");
    assert_eq!(job["metrics_path"], "/metrics");
    assert_eq!(job["scheme"], "http");
    for key in ["scrape_interval", "scrape_timeout"] {
        assert!(job[key].as_str().is_some_and(is_duration), "{key}: {}", job[key]);
    }
    let targets = job["static_configs"][0]["targets"].as_array().expect("static_configs[0].targets");
    assert!(!targets.is_empty());
    for target in targets {
        let (host, port) = target.as_str().and_then(|t| t.rsplit_once(':')).expect("host:port");
        assert!(!host.is_empty() && port.parse::<u16>().is_ok(), "{target}");
    }
}

fn is_duration(text: &str) -> bool {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && ["ms", "s", "m", "h", "d"].contains(&unit)
}

/// Every PromQL expression of the dashboard, with where it is.
fn expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr").to_owned();
            found.push((format!("panel {:?}", panel["title"]), expr));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().expect("templating.list") {
        if variable["type"] != "query" {
            continue;
        }
        let query = variable["query"]["query"].as_str().expect("a query variable's query");
        // `label_values(metric, label)` is Grafana's, not PromQL: its metric is checked like any other.
        let inner = query.strip_prefix("label_values(").and_then(|rest| rest.strip_suffix(')')).expect("label_values");
        let (metric, label) = inner.split_once(',').expect("label_values(metric, label)");
        found.push((format!("variable {:?}", variable["name"]), format!("{} by ({})", metric.trim(), label.trim())));
    }
    found
}

#[test]
fn the_grafana_dashboard_is_valid_and_queries_only_the_issues_metrics() {
    let dashboard: Value = serde_json::from_str(&deploy_file("grafana-dashboard.json")).expect("valid JSON");
    assert!(dashboard["title"].as_str().is_some_and(|title| !title.is_empty()));
    assert!(dashboard["uid"].as_str().is_some_and(|uid| !uid.is_empty() && uid.len() <= 40));
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|version| version >= 30));
    let variables: HashSet<&str> =
        dashboard["templating"]["list"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert!(variables.contains("datasource") && variables.contains("backend"), "{variables:?}");

    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = HashSet::new();
    for panel in panels {
        assert!(ids.insert(panel["id"].as_u64().expect("id")), "panel ids are unique");
        assert!(panel["title"].as_str().is_some_and(|title| !title.is_empty()));
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        let grid = &panel["gridPos"];
        let (x, w, h) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap(), grid["h"].as_u64().unwrap());
        assert!(w > 0 && h > 0 && x + w <= 24, "{}: {grid}", panel["title"]);
        let refs: HashSet<&str> =
            panel["targets"].as_array().unwrap().iter().map(|t| t["refId"].as_str().unwrap()).collect();
        assert_eq!(refs.len(), panel["targets"].as_array().unwrap().len(), "refIds are unique per panel");
    }

    let labels: HashSet<&str> = METRICS.iter().flat_map(|(_, labels)| labels.iter().copied()).chain(["le"]).collect();
    let mut used = HashSet::new();
    for (place, expression) in expressions(&dashboard) {
        let named = promql::scan(&expression).unwrap_or_else(|error| panic!("{place}: {error}"));
        assert!(!named.metrics.is_empty(), "{place} names no metric: {expression}");
        for metric in &named.metrics {
            let family = METRICS.iter().find(|(name, _)| {
                metric == name
                    || ["_bucket", "_sum", "_count"].iter().any(|suffix| *metric == format!("{name}{suffix}"))
            });
            let (family, _) = family.unwrap_or_else(|| panic!("{place}: `{metric}` is not a metric of the issue"));
            assert!(!family.ends_with("_total") || metric == family, "{place}: `{metric}` is a counter's");
            used.insert(*family);
        }
        for label in &named.labels {
            assert!(labels.contains(label.as_str()), "{place}: label `{label}` is not one of the issue's");
        }
        for (label, _, value) in named.matchers.iter().filter(|(label, _, _)| label == "outcome") {
            for outcome in value.split('|') {
                assert!(OUTCOMES.contains(&outcome), "{place}: {label} `{outcome}` is not an outcome of the issue");
            }
        }
    }
    assert_eq!(used.len(), METRICS.len(), "every metric of the issue has a panel: {used:?}");
}
