//! The console page in headless Chromium: behind `[auth]` it asks for an administrator's key, and once given one
//! it loads without a console error, an uncaught exception or a failed load (CSP violations included) other than
//! the API's 401s before the key, shows the configured backends, a call made by the test, the unknown call with
//! its resolve commands, the catalog and a limit in use, draws a latency chart per backend, and filters the calls from its form.
//! A screenshot goes to `target/tmp/console.png` (never into the repository).

use std::time::Duration;

use serde_json::{Value, json};

use super::{ALICE_KEY, auth_section_with, demo_backend, down_toml, lost_call};
use crate::support::chromium::{Browser, chromium};
use crate::support::console::refused_api;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

/// What the page shows, read from its DOM; a chart's `dots` counts pixels in the sample colour (`--accent`).
const SNAPSHOT: &str = r##"(() => {
  if (!document.body || document.body.dataset.state !== "ready") {
    return { state: document.body ? document.body.dataset.state : null };
  }
  const rows = (selector) => [...document.querySelectorAll(selector)]
    .map((row) => [...row.cells].map((cell) => cell.textContent.trim()));
  const accent = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim();
  const [r, g, b] = [1, 3, 5].map((at) => parseInt(accent.slice(at, at + 2), 16));
  const charts = [...document.querySelectorAll("#charts .chart")].map((chart) => {
    const canvas = chart.querySelector("canvas");
    const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    let dots = 0;
    for (let i = 0; i < data.length; i += 4) {
      const near = Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 30;
      if (near && data[i + 3] > 200) dots += 1;
    }
    return { backend: chart.querySelector("h3").textContent, samples: Number(canvas.dataset.samples), dots };
  });
  const problem = document.getElementById("problem");
  return {
    state: document.body.dataset.state,
    problem: problem.hidden ? null : problem.textContent,
    backends: rows("#backends tbody tr[data-backend]"),
    calls: rows("#calls tbody tr[data-key]"),
    unknown: [...document.querySelectorAll("#unknown .unknown-call")].map((card) => card.textContent),
    catalog: rows("#catalog tbody tr").map((cells) => cells[0]),
    limits: rows("#limits tbody tr"),
    charts,
  };
})()"##;

fn rows(page: &Value, name: &str) -> Vec<Vec<String>> {
    serde_json::from_value(page[name].clone()).unwrap_or_default()
}

#[tokio::test]
async fn the_page_shows_backends_calls_and_charts_without_console_errors() {
    let Some(binary) = chromium() else { return };
    let (demo_url, _demo) = demo_backend().await;
    let lost = FaultBackend::start(Script { drop_after_call: true, ..Script::default() }).await;
    let backends = backend_toml("demo", &demo_url, "") + &backend_toml("fault", &lost.url(), "") + &down_toml("down");
    // Agents stay anonymous; the console is the administrators'.
    let limit = "[[limits]]\nname = \"demo-rate\"\nprincipals = [\"*\"]\ntools = [\"demo__*\"]\nrate = \"10/h\"\n";
    let sections = auth_section_with("anonymous = true") + limit;
    let gateway = TestGateway::start_with("", &sections, &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    agent.call_tool("demo__sleep", json!({"ms": 30})).await;
    agent.call_tool("demo__echo", json!({"text": "seen in the browser"})).await;
    lost_call(&agent, 100, "browser-lost").await;

    let mut browser = Browser::launch(&binary).await;
    browser.navigate(&format!("{}/ui/", gateway.base)).await;
    let asks = |page: &Value| page["state"] == "needs-credential";
    browser.wait_for(SNAPSHOT, Duration::from_secs(30), asks).await;
    let give_key = format!(
        r#"document.getElementById("token").value = "{ALICE_KEY}"; document.getElementById("credential").requestSubmit(); true"#
    );
    browser.evaluate(&give_key).await;
    let ready =
        |page: &Value| page["state"] == "ready" && page["calls"].as_array().is_some_and(|calls| calls.len() == 3);
    let page = browser.wait_for(SNAPSHOT, Duration::from_secs(30), ready).await;

    assert_eq!(page["problem"], Value::Null, "{page}");
    let shown = rows(&page, "backends");
    let names: Vec<&str> = shown.iter().map(|row| row[0].as_str()).collect();
    assert_eq!(names, ["demo", "fault", "down"]);
    assert_eq!(&shown[0][1..3], ["mcp", "up"], "{shown:?}");
    assert!(shown[2][2].starts_with("down") && shown[2][2].len() > "down".len(), "down, with why: {shown:?}");

    let calls = rows(&page, "calls");
    // Started, principal, backend, tool, outcome, duration, note; newest first.
    let echo = &calls[1];
    assert_eq!(&echo[1..5], ["anonymous", "demo", "echo", "completed"], "{calls:?}");
    assert!(echo[5].ends_with(" ms") || echo[5].ends_with(" s"), "a duration: {echo:?}");
    assert_eq!(&calls[2][3..5], ["sleep", "completed"]);
    assert_eq!(&calls[0][2..5], ["fault", "echo", "unknown"]);

    let unknown: Vec<String> = serde_json::from_value(page["unknown"].clone()).unwrap();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(unknown[0].contains("switchyard calls resolve idem:9:anonymous:browser-lost --completed"), "{unknown:?}");
    assert!(unknown[0].contains("--failed"), "{unknown:?}");

    let catalog: Vec<String> = serde_json::from_value(page["catalog"].clone()).unwrap();
    assert!(catalog.contains(&"demo__echo".to_owned()) && catalog.contains(&"fault__echo".to_owned()), "{catalog:?}");
    // Two demo calls of a bucket of ten that refills one token every six minutes.
    assert_eq!(rows(&page, "limits"), [["demo-rate", "anonymous@127.0.0.1", "8/10", "—", "—"]]);

    let charts = page["charts"].as_array().expect("charts");
    let chart = |name: &str| charts.iter().find(|chart| chart["backend"] == name).expect("a chart per backend").clone();
    assert_eq!(charts.len(), 3);
    assert_eq!(chart("demo")["samples"], 2);
    assert!(chart("demo")["dots"].as_u64().unwrap() > 0, "the demo's samples are drawn: {charts:?}");
    assert_eq!(chart("down")["dots"], 0, "no samples, no dots: {charts:?}");

    // The form filters: only the unknown call is left.
    browser
        .evaluate(r#"document.getElementById("filter-outcome").value = "unknown"; document.getElementById("filters").requestSubmit(); true"#)
        .await;
    let filtered = |page: &Value| page["calls"].as_array().is_some_and(|calls| calls.len() == 1);
    let page = browser.wait_for(SNAPSHOT, Duration::from_secs(10), filtered).await;
    assert_eq!(&rows(&page, "calls")[0][3..5], ["echo", "unknown"]);

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "a real screenshot");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console.png");
    std::fs::write(&path, png).expect("write the screenshot under target/");

    // Late errors (a refresh, a chart redraw) would have arrived by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    browser.evaluate("true").await;
    let problems: Vec<&Value> = browser.problems().iter().filter(|problem| !refused_api(problem, &["401"])).collect();
    assert!(problems.is_empty(), "the page logged problems: {problems:#?}");
}
