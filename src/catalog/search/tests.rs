//! The search index's rules, through the catalog: fields, filtering before ranking, views, quarantine, changes.

use serde_json::{Value, json};

use crate::catalog::{BackendSpec, Catalog, Listing, Quarantined, View};

fn spec(name: &str, prefix: &str) -> BackendSpec {
    BackendSpec { name: name.into(), prefix: prefix.into(), exposes: Box::new(|_| true), resource_prefix: None }
}

fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": parameters}})
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|tool| tool["name"].as_str()).collect()
}

fn catalog() -> Catalog {
    let catalog = Catalog::new(vec![spec("github", "github__"), spec("weather", "weather__")]);
    catalog.update(
        "github",
        Ok(Listing::tools(vec![
            tool("create_issue", "Open a new issue in a repository", json!({"title": {"type": "string"}})),
            tool("listPullRequests", "List pull requests of a repository", json!({"state": {"type": "string"}})),
            tool(
                "get-file-contents",
                "Read a file",
                json!({"path": {"type": "string", "description": "Path inside the repository"}}),
            ),
        ])),
    );
    catalog.update(
        "weather",
        Ok(Listing::tools(vec![tool(
            "forecast",
            "Weather forecast for a place",
            json!({"latitude": {"type": "number", "description": "Degrees north"}}),
        )])),
    );
    catalog
}

#[test]
fn finds_tools_by_words_of_name_description_and_parameters() {
    let catalog = catalog();
    let search = |query| catalog.search_tools(View::All, query, 5, |_| true);
    assert_eq!(names(&search("open issues")[..1]), ["github__create_issue"], "description and a plural");
    assert_eq!(names(&search("pull request")[..1]), ["github__listPullRequests"], "camelCase name");
    assert_eq!(names(&search("file contents")[..1]), ["github__get-file-contents"], "kebab-case name");
    assert_eq!(names(&search("latitude degrees")), ["weather__forecast"], "parameter name and description");
    assert_eq!(names(&search("weather")), ["weather__forecast"], "the backend's name");
    assert!(search("the of a").is_empty(), "function words alone match nothing");
    assert!(search("kubernetes").is_empty(), "no word in common: no hit");
}

#[test]
fn a_refused_tool_never_appears_and_the_limit_holds() {
    let catalog = catalog();
    let found = catalog.search_tools(View::All, "repository issue pull file", 5, |name| name != "github__create_issue");
    assert!(!names(&found).contains(&"github__create_issue"), "{found:?}");
    assert_eq!(found.len(), 2);
    assert_eq!(catalog.search_tools(View::All, "repository", 1, |_| true).len(), 1);
}

#[test]
fn the_ranking_among_allowed_tools_ignores_refused_ones() {
    let catalog = catalog();
    let allowed = |name: &str| name != "github__create_issue";
    let before = catalog.search_tools(View::All, "repository pull file", 5, allowed);
    catalog.update(
        "github",
        Ok(Listing::tools(vec![
            tool("create_issue", "repository repository pull pull", json!({})),
            tool("listPullRequests", "List pull requests of a repository", json!({"state": {"type": "string"}})),
            tool(
                "get-file-contents",
                "Read a file",
                json!({"path": {"type": "string", "description": "Path inside the repository"}}),
            ),
        ])),
    );
    assert_eq!(catalog.search_tools(View::All, "repository pull file", 5, allowed), before);
}

#[test]
fn a_backend_view_searches_its_own_tools_under_bare_names() {
    let catalog = catalog();
    let found = catalog.search_tools(View::Backend("github"), "repository weather", 5, |_| true);
    let mut found = names(&found);
    found.sort_unstable();
    assert_eq!(found, ["create_issue", "get-file-contents", "listPullRequests"], "no weather tool, bare names");
}

#[test]
fn quarantined_tools_and_changed_listings_are_seen_at_once() {
    let catalog = catalog();
    assert_eq!(names(&catalog.search_tools(View::All, "forecast", 5, |_| true)), ["weather__forecast"]);
    catalog.quarantine("weather", Quarantined::from([("tool", "forecast".to_owned())]));
    assert!(catalog.search_tools(View::All, "forecast", 5, |_| true).is_empty(), "quarantined: not found");
    catalog.quarantine("weather", Quarantined::new());
    catalog.update("weather", Ok(Listing::tools(vec![tool("alerts", "Severe weather alerts", json!({}))])));
    assert_eq!(names(&catalog.search_tools(View::All, "weather", 5, |_| true)), ["weather__alerts"]);
}
