//! Unit tests of the registry: the exposition's exact names, types and label sets.

use super::*;

/// The value of the sample written exactly `series` (name and labels as exposed), if any.
pub(crate) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_metric_is_exposed_with_its_type_and_exact_name() {
    let metrics = Metrics::new();
    // A family is exposed once it has a series.
    metrics.register_backends(["a"]);
    let name = metrics.name("a");
    metrics.observe_server("ping", None, ErrorType::None, Duration::ZERO);
    metrics.observe_client(&name, "ping", None, ErrorType::None, Duration::ZERO);
    metrics.count_tool_call(&name, &name, ToolOutcome::Completed);
    metrics.relayed_request("roots/list");
    metrics.auth_failure("missing");
    let text = metrics.encode();
    for (name, kind) in [
        (names::SERVER_DURATION, "histogram"),
        (names::CLIENT_DURATION, "histogram"),
        (names::TOOL_CALLS, "counter"),
        (names::LEDGER_CLAIMS, "counter"),
        (names::LEDGER_WAITING, "gauge"),
        (names::BACKEND_UP, "gauge"),
        (names::DISCOVERY_FAILURES, "counter"),
        (names::BACKEND_SESSIONS, "gauge"),
        (names::STDIO_PROCESSES, "gauge"),
        (names::AGENT_SESSIONS_OPENED, "counter"),
        (names::AGENT_SESSIONS_DELETED, "counter"),
        (names::RELAYED_REQUESTS, "counter"),
        (names::AUTH_FAILURES, "counter"),
    ] {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name} {kind} in:\n{text}");
        assert!(text.contains(&format!("# HELP {name} ")), "{name} has help");
    }
    // Fixed series exist from the start, at zero.
    assert_eq!(sample(&text, "switchyard_ledger_claims_total{state=\"in_flight\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_opened_total"), Some(0.0));
}

#[test]
fn histograms_observe_seconds_into_the_convention_buckets() {
    let metrics = Metrics::new();
    let tool = metrics.name("demo__echo");
    metrics.observe_server("tools/call", Some(&tool), ErrorType::None, Duration::from_millis(3));
    metrics.observe_server("tools/call", Some(&tool), ErrorType::ToolError, Duration::from_secs(400));
    let text = metrics.encode();
    let ok = "mcp_server_operation_duration_seconds_bucket{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"demo__echo\",error_type=\"\",le=";
    assert_eq!(sample(&text, &format!("{ok}\"0.0025\"}}")), Some(0.0));
    assert_eq!(sample(&text, &format!("{ok}\"0.005\"}}")), Some(1.0));
    assert_eq!(sample(&text, &format!("{ok}\"300\"}}")), Some(1.0));
    let failed = "mcp_server_operation_duration_seconds_bucket{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"demo__echo\",error_type=\"tool_error\",le=";
    assert_eq!(sample(&text, &format!("{failed}\"300\"}}")), Some(0.0), "400 s is past the last bucket");
    assert_eq!(sample(&text, &format!("{failed}\"+Inf\"}}")), Some(1.0));
    let backend = metrics.name("demo");
    let echo = metrics.name("echo");
    metrics.observe_client(&backend, "tools/call", Some(&echo), ErrorType::Failure("not_delivered"), Duration::ZERO);
    metrics.observe_client(&backend, "made/up", None, ErrorType::Rpc(-32601), Duration::ZERO);
    let text = metrics.encode();
    let sent = "mcp_client_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"echo\",error_type=\"not_delivered\",backend=\"demo\"}";
    assert_eq!(sample(&text, sent), Some(1.0), "{text}");
    let other = "mcp_client_operation_duration_seconds_count{mcp_method_name=\"_other\",gen_ai_tool_name=\"\",error_type=\"-32601\",backend=\"demo\"}";
    assert_eq!(sample(&text, other), Some(1.0), "{text}");
}

#[test]
fn backends_start_down_and_live_sessions_count_until_dropped() {
    let metrics = Metrics::new();
    metrics.register_backends(["a", "b"]);
    let text = metrics.encode();
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"a\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_backend_discovery_failures_total{backend=\"b\"}"), Some(0.0));
    metrics.backend_up("a", true);
    metrics.discovery_failed("b");
    metrics.discovery_failed("b");
    let a = metrics.name("a");
    let http = metrics.live_session(&a);
    let stdio = (metrics.live_session(&a), metrics.live_process(&a));
    let text = metrics.encode();
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"a\"}"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"b\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_backend_discovery_failures_total{backend=\"b\"}"), Some(2.0));
    assert_eq!(sample(&text, "switchyard_backend_sessions{backend=\"a\"}"), Some(2.0));
    assert_eq!(sample(&text, "switchyard_stdio_processes{backend=\"a\"}"), Some(1.0));
    drop((http, stdio));
    let text = metrics.encode();
    assert_eq!(sample(&text, "switchyard_backend_sessions{backend=\"a\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_stdio_processes{backend=\"a\"}"), Some(0.0));
}

#[test]
fn counters_take_only_bounded_labels() {
    let metrics = Metrics::new();
    metrics.count_claims(ClaimWrite::Released, 2);
    metrics.count_claims(ClaimWrite::Unknown, 1);
    metrics.relayed_request("elicitation/create");
    metrics.relayed_request("x/made-up-1");
    metrics.relayed_request("x/made-up-2");
    metrics.auth_failure("unknown_key");
    metrics.agent_session_opened();
    metrics.agent_session_deleted();
    let text = metrics.encode();
    assert_eq!(sample(&text, "switchyard_ledger_claims_total{state=\"released\"}"), Some(2.0));
    assert_eq!(sample(&text, "switchyard_ledger_claims_total{state=\"unknown\"}"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_relayed_requests_total{method=\"elicitation/create\"}"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_relayed_requests_total{method=\"_other\"}"), Some(2.0));
    assert_eq!(sample(&text, "switchyard_auth_failures_total{reason=\"unknown_key\"}"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_opened_total"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_deleted_total"), Some(1.0));
}

#[test]
fn a_call_is_counted_while_it_waits_on_the_ledger() {
    let metrics = Metrics::new();
    let first = metrics.waiting_on_ledger();
    let second = metrics.waiting_on_ledger();
    assert_eq!(sample(&metrics.encode(), "switchyard_ledger_calls_waiting"), Some(2.0));
    drop((first, second));
    assert_eq!(sample(&metrics.encode(), "switchyard_ledger_calls_waiting"), Some(0.0));
}

#[test]
fn a_forgotten_backend_leaves_no_series_and_the_others_keep_theirs() {
    let metrics = Metrics::new();
    metrics.register_backends(["gone", "kept"]);
    for name in ["gone", "kept"] {
        let backend = metrics.name(name);
        let echo = metrics.name("echo");
        metrics.observe_client(&backend, "tools/call", Some(&echo), ErrorType::None, Duration::ZERO);
        metrics.count_tool_call(&backend, &echo, ToolOutcome::Completed);
        metrics.backend_up(name, true);
    }
    metrics.forget_backend("gone");
    let text = metrics.encode();
    assert!(!text.contains("backend=\"gone\""), "{text}");
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"kept\"}"), Some(1.0), "{text}");
    let kept = "switchyard_tool_calls_total{backend=\"kept\",tool=\"echo\",outcome=\"completed\"}";
    assert_eq!(sample(&text, kept), Some(1.0), "{text}");
    assert!(text.contains("mcp_client_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"echo\",error_type=\"\",backend=\"kept\"}"), "{text}");

    let (gone, echo) = (metrics.name("gone"), metrics.name("echo"));
    metrics.observe_client(&gone, "tools/call", Some(&echo), ErrorType::None, Duration::ZERO);
    metrics.count_tool_call(&gone, &echo, ToolOutcome::Completed);
    assert!(!metrics.encode().contains("backend=\"gone\""), "a call that ran on over the removal starts no series");
    metrics.backend_up("gone", false);
    metrics.count_tool_call(&gone, &echo, ToolOutcome::Completed);
    assert!(metrics.encode().contains("switchyard_tool_calls_total{backend=\"gone\""), "configured again, it counts");
}
