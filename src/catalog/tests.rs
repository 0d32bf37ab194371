//! The catalog's rules, one test each: names, collisions, withheld names, filters, failures, prompts and templates.

use super::*;
use serde_json::json;

fn spec(name: &str, prefix: &str) -> BackendSpec {
    BackendSpec { name: name.into(), prefix: prefix.into(), exposes: Box::new(|_| true), resource_prefix: None }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}, "_meta": {"x": 1}, "icons": []})
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|tool| tool["name"].as_str().unwrap()).collect()
}

#[test]
fn prefixes_names_and_passes_definitions_through() {
    let catalog = Catalog::new(vec![spec("github", "github__"), spec("bare", "")]);
    assert!(catalog.update("github", Ok(Listing::tools(vec![tool("search")]))));
    assert!(catalog.update("bare", Ok(Listing::tools(vec![tool("echo")]))));
    let all = catalog.tools(View::All);
    assert_eq!(names(&all), ["github__search", "echo"]);
    assert_eq!(all[0]["_meta"], json!({"x": 1}), "unknown members pass through verbatim");
    assert_eq!(all[0]["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(names(&catalog.tools(View::Backend("github"))), ["search"]);
    let route = catalog.resolve(View::All, "github__search").unwrap();
    assert_eq!((&*route.backend, route.name.as_str()), ("github", "search"));
    assert!(catalog.resolve(View::All, "search").is_none());
    assert!(catalog.resolve(View::Backend("github"), "search").is_some());
}

#[test]
fn collision_keeps_the_first_backend_and_names_both() {
    let catalog = Catalog::new(vec![spec("a", ""), spec("b", "")]);
    catalog.update("b", Ok(Listing::tools(vec![tool("echo")])));
    catalog.update("a", Ok(Listing::tools(vec![tool("echo")])));
    assert_eq!(&*catalog.resolve(View::All, "echo").unwrap().backend, "a", "configuration order decides");
    let withheld = catalog.withheld();
    assert_eq!(withheld.len(), 1);
    assert_eq!(&*withheld[0].backend, "b");
    assert!(withheld[0].reason.contains("backend `a`"), "{}", withheld[0].reason);
    assert_eq!(names(&catalog.tools(View::All)), ["echo"]);
    assert_eq!(names(&catalog.tools(View::Backend("b"))), ["echo"], "bare view of b still has it");
}

#[test]
fn invalid_or_long_names_are_withheld_not_renamed() {
    let long = "x".repeat(60);
    let catalog = Catalog::new(vec![spec("svc", "svc__")]);
    catalog.update("svc", Ok(Listing::tools(vec![tool("dotted.name"), tool(&long), tool("ok")])));
    assert_eq!(names(&catalog.tools(View::All)), ["svc__ok"]);
    let reasons: Vec<String> = catalog.withheld().into_iter().map(|w| w.name).collect();
    assert_eq!(reasons, ["dotted.name", long.as_str()]);
    assert!(is_valid_tool_name(&long), "valid bare, too long only with the prefix");
    assert_eq!(catalog.tools(View::Backend("svc")).len(), 2, "the bare view keeps the valid bare name");
}

#[test]
fn allow_and_deny_filter_what_is_exposed() {
    let only_read = BackendSpec {
        name: "fs".into(),
        prefix: "fs__".into(),
        exposes: Box::new(|name| name.starts_with("read")),
        resource_prefix: None,
    };
    let catalog = Catalog::new(vec![only_read]);
    catalog.update("fs", Ok(Listing::tools(vec![tool("read_file"), tool("write_file")])));
    assert_eq!(names(&catalog.tools(View::All)), ["fs__read_file"]);
    assert!(catalog.resolve(View::Backend("fs"), "write_file").is_none());
    let [state] = catalog.statuses().try_into().expect("one backend");
    assert_eq!((state.status, state.tools), (BackendStatus::Discovered, 1), "the filtered-out tool is not counted");
}

#[test]
fn a_failure_keeps_the_last_good_list_and_reports_the_error() {
    let catalog = Catalog::new(vec![spec("a", "a__")]);
    assert_eq!(catalog.statuses()[0].status, BackendStatus::Pending);
    catalog.update("a", Ok(Listing::tools(vec![tool("t")])));
    assert!(!catalog.update("a", Err("connection refused".into())));
    assert_eq!(names(&catalog.tools(View::All)), ["a__t"]);
    let failed = &catalog.statuses()[0];
    assert_eq!(failed.status, BackendStatus::Failed { error: "connection refused".into() });
    assert_eq!(failed.tools, 1, "the last good listing is still served, and counted");
    assert!(!catalog.update("a", Ok(Listing::tools(vec![tool("t")]))), "same list: the view did not change");
    assert!(catalog.update("a", Ok(Listing::tools(vec![tool("t"), tool("u")]))));
}

#[test]
fn prompts_are_prefixed_and_templates_route_uris() {
    let catalog = Catalog::new(vec![spec("a", "a__"), spec("b", "b__")]);
    let listing = |template: &str| Listing {
        capabilities: json!({"prompts": {}, "resources": {}}),
        prompts: vec![json!({"name": "review", "arguments": [{"name": "code"}]})],
        templates: vec![json!({"uriTemplate": template, "name": "t"})],
        ..Listing::default()
    };
    catalog.update("a", Ok(listing("test://template/{id}/data")));
    catalog.update("b", Ok(listing("other://{id}")));
    assert_eq!(names(&catalog.prompts(View::All)), ["a__review", "b__review"]);
    assert_eq!(catalog.prompts(View::All)[0]["arguments"][0]["name"], "code");
    assert_eq!(&*catalog.resolve_prompt(View::All, "b__review").unwrap().backend, "b");
    assert_eq!(catalog.template_owners(View::All, "test://template/123/data"), [Arc::from("a")]);
    assert!(catalog.template_owners(View::Backend("b"), "test://template/123/data").is_empty());
    assert_eq!(catalog.backends_with(View::All, "resources").len(), 2);
    assert!(catalog.backends_with(View::All, "logging").is_empty());
}

#[test]
fn resource_prefixes_split_uris_and_identical_templates_are_withheld() {
    let mut prefixed = spec("gh", "gh__");
    prefixed.resource_prefix = Some("gh+".into());
    let catalog = Catalog::new(vec![spec("a", "a__"), spec("b", "b__"), prefixed]);
    let listing = || Listing {
        capabilities: json!({"resources": {}}),
        templates: vec![json!({"uriTemplate": "repo://{name}", "name": "t"})],
        ..Listing::default()
    };
    for backend in ["a", "b", "gh"] {
        catalog.update(backend, Ok(listing()));
    }
    let withheld = catalog.withheld();
    assert_eq!(withheld.len(), 1, "{withheld:?}");
    assert_eq!((&*withheld[0].backend, withheld[0].kind), ("b", "resource template"));
    assert!(withheld[0].reason.contains("resource_prefix"));
    assert_eq!(catalog.template_owners(View::All, "repo://x"), [Arc::from("a")]);
    assert_eq!(catalog.template_owners(View::All, "gh+repo://x"), [Arc::from("gh")]);
    assert_eq!(catalog.split_resource_prefix(View::All, "gh+repo://x"), Some((Arc::from("gh"), "repo://x")));
    assert_eq!(catalog.split_resource_prefix(View::All, "repo://x"), None);
    assert_eq!(catalog.resource_prefix("gh"), Some("gh+".to_owned()));
}

#[test]
fn usable_lists_judge_both_views_by_the_exposed_name() {
    let catalog = Catalog::new(vec![spec("github", "github__")]);
    assert!(catalog.update("github", Ok(Listing::tools(vec![tool("search"), tool("delete_repo")]))));
    let usable = |exposed: &str| exposed != "github__delete_repo";
    assert_eq!(names(&catalog.usable_tools(View::All, usable)), ["github__search"]);
    assert_eq!(names(&catalog.usable_tools(View::Backend("github"), usable)), ["search"]);
    assert_eq!(catalog.usable_prompts(View::All, |_| false), Vec::<Value>::new());
}

#[test]
fn reconfigure_keeps_listings_of_kept_backends_and_names_what_agents_see_change() {
    let catalog = Catalog::new(vec![spec("a", "a__"), spec("b", "b__"), spec("c", "c__")]);
    for backend in ["a", "b", "c"] {
        catalog.update(backend, Ok(Listing::tools(vec![tool("echo")])));
    }
    let changed = catalog.reconfigure(vec![spec("a", "a__"), spec("c", "new__"), spec("d", "d__")]);
    assert_eq!(changed.iter().map(|name| &**name).collect::<Vec<_>>(), ["b", "c"], "removed b, renamed c");
    assert_eq!(names(&catalog.tools(View::All)), ["a__echo", "new__echo"], "a kept its listing without rediscovery");
    assert!(catalog.resolve(View::All, "b__echo").is_none(), "a removed backend's tools are gone");
    assert_eq!(names(&catalog.tools(View::Backend("c"))), ["echo"]);
    let statuses: Vec<(String, BackendStatus, usize)> =
        catalog.statuses().into_iter().map(|state| (state.name.to_string(), state.status, state.tools)).collect();
    assert_eq!(
        statuses,
        [
            ("a".into(), BackendStatus::Discovered, 1),
            ("c".into(), BackendStatus::Discovered, 1),
            ("d".into(), BackendStatus::Pending, 0),
        ]
    );
    assert!(
        !catalog.update("b", Ok(Listing::tools(vec![tool("late")]))),
        "a late result of a removed backend is dropped"
    );
    assert!(catalog.reconfigure(vec![spec("a", "a__"), spec("c", "new__"), spec("d", "d__")]).is_empty());
}

#[test]
fn a_name_under_a_pending_backends_prefix_is_starting_until_its_discovery_ends() {
    let catalog = Catalog::new(vec![spec("fs", "fs__"), spec("web", "web__")]);
    let mut changes = catalog.changes();
    assert_eq!(catalog.starting_owner(View::All, "fs__read").as_deref(), Some("fs"));
    assert_eq!(catalog.starting_owner(View::Backend("web"), "anything").as_deref(), Some("web"));
    assert_eq!(catalog.starting_owner(View::All, "mail__send"), None, "no backend has that prefix");
    catalog.update("fs", Err("refused".into()));
    assert!(changes.has_changed().unwrap(), "a failed discovery is a change too");
    assert_eq!(catalog.starting_owner(View::All, "fs__read"), None, "discovery ended, if badly");
    changes.mark_unchanged();
    catalog.update("web", Ok(Listing::tools(vec![tool("get")])));
    assert!(changes.has_changed().unwrap());
    assert_eq!(catalog.starting_owner(View::Backend("web"), "missing"), None);
}

#[test]
fn quarantined_items_leave_listings_and_resolution_and_take_no_name() {
    let catalog = Catalog::new(vec![spec("a", ""), spec("b", "")]);
    catalog
        .update("a", Ok(Listing { prompts: vec![tool("brief")], ..Listing::tools(vec![tool("echo"), tool("read")]) }));
    catalog.update("b", Ok(Listing::tools(vec![tool("echo")])));
    assert_eq!(&*catalog.resolve(View::All, "echo").unwrap().backend, "a");
    let held: Quarantined = [("tool", "echo".to_owned()), ("prompt", "brief".to_owned())].into();
    assert!(catalog.quarantine("a", held.clone()), "what agents see of `a` changed");
    assert!(!catalog.quarantine("a", held), "the same quarantine again changes nothing");
    assert_eq!(names(&catalog.tools(View::All)), ["read", "echo"]);
    assert_eq!(&*catalog.resolve(View::All, "echo").unwrap().backend, "b", "a quarantined tool takes no name");
    assert!(catalog.resolve(View::Backend("a"), "echo").is_none());
    assert!(catalog.prompts(View::All).is_empty());
    let found = catalog.quarantined_tool(View::Backend("a"), "echo").expect("findable to say why");
    assert_eq!((&*found.backend, found.name.as_str()), ("a", "echo"));
    assert!(catalog.quarantine("a", Quarantined::new()), "lifting it serves the tool again");
    assert!(catalog.quarantined_tool(View::Backend("a"), "echo").is_none());
    assert!(!catalog.quarantine("nobody", Quarantined::new()));
}
