//! `deploy/`: the configurations the container image and the Kubernetes base ship load and may serve on every
//! address with their demo backend; the Prometheus scrape configuration and the Grafana dashboard are valid, every
//! metric family the issue defines has a panel, and what the dashboard's queries name — metrics, labels, outcome
//! values — is really there in a live scrape: a gateway that served one tool call of each outcome, scraped at the
//! path `deploy/prometheus.yml` scrapes.
//!
//! YAML is read by a small reader of the subset Prometheus configurations use ([`yaml`]); the PromQL of every
//! panel and variable by a small scanner ([`promql`]) that refuses what it cannot read.

mod promql;
mod yaml;

use std::collections::HashSet;

use serde_json::Value;

use crate::telemetry::every_outcome;

/// The metric families the issue names; each must have a panel.
const FAMILIES: [&str; 3] =
    ["mcp_server_operation_duration_seconds", "mcp_client_operation_duration_seconds", "switchyard_tool_calls_total"];

fn deploy_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_packaged_configurations_serve_the_demo_backend_on_every_address() {
    for name in ["container/switchyard.toml", "kubernetes/base/switchyard.toml"] {
        // The file names the binary where the image puts it; here it is where cargo built it.
        let text = deploy_file(name).replace("/usr/local/bin/switchyard", env!("CARGO_BIN_EXE_switchyard"));
        let config = switchyard::config::Config::from_toml_str(&text, name, [("PATH", "/usr/bin")])
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(config.server.listen.ip().is_unspecified(), "{name}: {}", config.server.listen);
        config.check_serving().unwrap_or_else(|error| panic!("{name}: {error}"));
        let [demo] = config.backends.as_slice() else { panic!("{name}: one backend") };
        assert_eq!(demo.name.as_str(), "demo", "{name}");
    }
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
fn the_grafana_dashboard_is_valid_and_covers_the_issues_metrics() {
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

    let mut used: HashSet<&str> = HashSet::new();
    for (place, expression) in expressions(&dashboard) {
        let named = promql::scan(&expression).unwrap_or_else(|error| panic!("{place}: {error}"));
        assert!(!named.metrics.is_empty(), "{place} names no metric: {expression}");
        for metric in &named.metrics {
            used.extend(FAMILIES.iter().copied().filter(|family| metric.starts_with(family)));
        }
    }
    assert_eq!(used.len(), FAMILIES.len(), "every metric family of the issue has a panel: {used:?}");
}

/// One sample of the exposition: its metric name and labels.
struct Sample {
    metric: String,
    labels: Vec<(String, String)>,
}

/// The samples of a Prometheus text exposition (label values here never hold `,` or `"`).
fn samples(text: &str) -> Vec<Sample> {
    let lines = text.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty());
    lines
        .map(|line| {
            let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
            let (metric, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels.trim_end_matches('}').split(',').filter(|pair| !pair.is_empty());
            let labels = labels
                .filter_map(|pair| pair.split_once('='))
                .map(|(name, value)| (name.to_owned(), value.trim_matches('"').to_owned()))
                .collect();
            Sample { metric: metric.to_owned(), labels }
        })
        .collect()
}

#[tokio::test]
async fn every_metric_label_and_outcome_the_dashboard_queries_is_in_a_live_scrape() {
    let config = yaml::parse(&deploy_file("prometheus.yml")).expect("deploy/prometheus.yml is YAML");
    let jobs = config["scrape_configs"].as_array().expect("scrape_configs");
    let job = jobs.iter().find(|job| job["job_name"] == "switchyard").expect("a switchyard job");
    let path = job["metrics_path"].as_str().expect("metrics_path");
    let served = every_outcome().await;
    let response = reqwest::get(format!("{}{path}", served.gateway.base)).await.expect("the gateway answers");
    assert_eq!(response.status(), reqwest::StatusCode::OK, "Prometheus scrapes {path}");
    let text = response.text().await.expect("a text body");
    let live = samples(&text);

    let dashboard: Value = serde_json::from_str(&deploy_file("grafana-dashboard.json")).expect("valid JSON");
    for (place, expression) in expressions(&dashboard) {
        let named = promql::scan(&expression).unwrap_or_else(|error| panic!("{place}: {error}"));
        let of_query: Vec<&Sample> = live.iter().filter(|sample| named.metrics.contains(&sample.metric)).collect();
        for metric in &named.metrics {
            assert!(of_query.iter().any(|sample| &sample.metric == metric), "{place}: no `{metric}` in\n{text}");
        }
        for label in &named.labels {
            let carried = of_query.iter().any(|sample| sample.labels.iter().any(|(name, _)| name == label));
            assert!(carried, "{place}: no series of {:?} carries `{label}` in\n{text}", named.metrics);
        }
        let literal = |value: &str| !value.contains('$') && !value.contains('.') && !value.contains('*');
        for (label, operator, value) in named
            .matchers
            .iter()
            .filter(|(_, operator, value)| ["=", "=~"].contains(&operator.as_str()) && literal(value))
        {
            for wanted in value.split('|') {
                let seen =
                    of_query.iter().any(|sample| sample.labels.iter().any(|(name, v)| name == label && v == wanted));
                assert!(seen, "{place}: {label}{operator}`{wanted}` matches no live series in\n{text}");
            }
        }
    }
}
