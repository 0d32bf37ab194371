//! The backend health board: transitions, what leaves the health alone, idleness, and tracking by configuration.

use super::*;

fn board(backends: &[&str]) -> (HealthBoard, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let board = HealthBoard::new(Arc::clone(&metrics));
    board.track(&backends.iter().map(|name| Arc::from(*name)).collect::<Vec<_>>());
    (board, metrics)
}

fn up_metric(metrics: &Metrics, backend: &str) -> Option<String> {
    let series = format!("switchyard_backend_up{{backend=\"{backend}\"}} ");
    let text = metrics.encode();
    text.lines().find_map(|line| line.strip_prefix(&series).map(str::to_owned))
}

fn target() -> BackendTarget {
    let url = reqwest::Url::parse("http://127.0.0.1:9/mcp").unwrap();
    BackendTarget::Http(crate::backend::mcp_client::BackendEndpoint::new(url, Duration::from_secs(1)))
}

fn refused() -> McpError {
    McpError::NotDelivered { cause: NotDeliveredCause::Connect, reason: "connection refused".into() }
}

#[test]
fn a_backend_is_unknown_then_down_on_a_refused_connection_and_up_on_any_answer() {
    let (board, metrics) = board(&["files"]);
    assert_eq!(board.healths()["files"], BackendHealth::Unknown);
    assert_eq!(up_metric(&metrics, "files").as_deref(), Some("0"));
    board.exchanged::<()>("files", &target(), &Err(refused()));
    assert!(
        matches!(&board.healths()["files"], BackendHealth::Down { error, .. } if error.contains("connection refused"))
    );
    assert_eq!(up_metric(&metrics, "files").as_deref(), Some("0"));
    let rpc = McpError::Rpc { code: -32601, message: "no such method".into(), data: None };
    board.exchanged::<()>("files", &target(), &Err(rpc));
    assert_eq!(board.healths()["files"], BackendHealth::Up);
    assert_eq!(up_metric(&metrics, "files").as_deref(), Some("1"));
}

#[test]
fn failures_that_say_nothing_of_reachability_keep_the_health() {
    let (board, _) = board(&["files"]);
    board.exchanged("files", &target(), &Ok(()));
    let unusable = McpError::AfterDelivery { cause: AfterDeliveryCause::Malformed, reason: "not JSON".into() };
    for error in [unusable, McpError::HttpStatus { status: 500, body: String::new() }, McpError::Cancelled] {
        board.exchanged::<()>("files", &target(), &Err(error));
        assert_eq!(board.healths()["files"], BackendHealth::Up);
    }
    let cut = McpError::AfterDelivery { cause: AfterDeliveryCause::Ended, reason: "the process exited".into() };
    board.exchanged::<()>("files", &target(), &Err(cut));
    assert!(matches!(board.healths()["files"], BackendHealth::Down { .. }));
}

#[test]
fn a_backend_that_stays_down_keeps_when_it_went_down_and_says_the_newest_failure() {
    let (board, _) = board(&["files"]);
    board.exchanged::<()>("files", &target(), &Err(refused()));
    let BackendHealth::Down { since: first, .. } = board.healths()["files"].clone() else { panic!("not down") };
    board.set_down("files", "discovery failed: no tools".into());
    let BackendHealth::Down { since, error } = board.healths()["files"].clone() else { panic!("not down") };
    assert_eq!((since, error.as_str()), (first, "discovery failed: no tools"));
}

#[test]
fn untracked_backends_have_no_health_and_a_forgotten_one_loses_its_metric() {
    let (board, metrics) = board(&["kept", "gone"]);
    board.exchanged("stranger", &target(), &Ok(()));
    board.set_down("stranger", "x".into());
    assert!(!board.healths().contains_key("stranger"));
    board.track(&[Arc::from("kept")]);
    board.exchanged("gone", &target(), &Ok(()));
    assert_eq!(board.healths().keys().map(|name| name.to_string()).collect::<Vec<_>>(), ["kept"]);
    assert_eq!(up_metric(&metrics, "gone"), None);
    assert_eq!(up_metric(&metrics, "kept").as_deref(), Some("0"));
}

#[test]
fn the_probe_asks_backends_that_are_down_or_idle_for_the_interval() {
    let (board, _) = board(&["busy", "broken"]);
    board.exchanged("busy", &target(), &Ok(()));
    board.exchanged::<()>("broken", &target(), &Err(refused()));
    let hour = Duration::from_secs(3600);
    assert!(!board.needs_probe("busy", hour));
    assert!(board.needs_probe("broken", hour));
    std::thread::sleep(Duration::from_millis(20));
    assert!(board.needs_probe("busy", Duration::from_millis(10)));
    assert!(!board.needs_probe("stranger", Duration::ZERO));
}
