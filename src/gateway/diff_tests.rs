//! Tests of `gateway::diff`: how each kind of change is classified, and what a reload applies.

use super::*;

const KEY_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn config(text: &str) -> Config {
    config_in_env(text, &[])
}

fn config_in_env(text: &str, env: &[(&str, &str)]) -> Config {
    let env = env.iter().map(|(name, value)| (name.to_string(), value.to_string()));
    Config::from_toml_str(text, "test.toml", env).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

fn backend(name: &str, extra: &str) -> String {
    format!("[[backends]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:9/{name}\"\n{extra}\n")
}

fn python() -> String {
    // Any absolute executable will do: the configuration only checks that the command exists.
    std::env::current_exe().unwrap().display().to_string()
}

fn stdio(name: &str, extra: &str) -> String {
    format!("[[backends]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {:?}\n{extra}\n", python())
}

#[test]
fn an_unchanged_file_changes_nothing() {
    let text = format!("[server]\nmax_body = \"1MiB\"\n{}{}", backend("a", ""), stdio("s", "args = [\"x\"]"));
    let diff = ConfigDiff::between(&config(&text), &config(&text));
    assert!(diff.is_empty(), "{diff:?}");
    assert_eq!(diff, ConfigDiff::default());
    assert!(diff.summary().is_empty());
}

#[test]
fn backends_are_added_removed_replaced_or_exposed_differently() {
    let running = config(&[backend("a", ""), backend("b", ""), backend("c", ""), backend("e", "")].concat());
    let file = config(
        &[
            backend("a", ""),
            "[[backends]]\nname = \"b\"\nurl = \"http://127.0.0.1:9/elsewhere\"\n".into(),
            backend("c", "prefix = \"cc_\"\ntools.deny = [\"secret*\"]"),
            backend("d", ""),
        ]
        .concat(),
    );
    let diff = ConfigDiff::between(&running, &file);
    assert_eq!(diff.added, ["d"]);
    assert_eq!(diff.removed, ["e"]);
    assert_eq!(diff.replaced, ["b"], "a new URL needs new sessions");
    assert_eq!(diff.re_exposed, ["c"], "a prefix and a filter need no new session");
    assert!(!diff.reordered && !diff.policies && !diff.auth && diff.restart_only.is_empty(), "{diff:?}");
    assert_eq!(
        diff.summary(),
        [
            "backends added: d",
            "backends removed (their running calls finish first): e",
            "backends replaced (new sessions, rediscovered): b",
            "backends exposed differently (prefix or tool filters): c",
        ]
    );
}

#[test]
fn how_a_backend_is_reached_replaces_it() {
    let cases = [
        ("timeout = \"5s\"", "timeout = \"6s\""),
        ("headers = { X-Team = \"a\" }", "headers = { X-Team = \"b\" }"),
        ("transport = \"mcp\"", "transport = \"sse\""),
    ];
    for (before, after) in cases {
        let diff = ConfigDiff::between(&config(&backend("a", before)), &config(&backend("a", after)));
        assert_eq!(diff.replaced, ["a"], "{before} → {after}");
    }
    let diff = ConfigDiff::between(
        &config(&stdio("s", "env = { MODE = \"1\" }")),
        &config(&stdio("s", "env = { MODE = \"2\" }")),
    );
    assert_eq!(diff.replaced, ["s"], "a stdio backend's environment starts its processes");
    let diff = ConfigDiff::between(&config(&stdio("s", "")), &config(&stdio("s", "sessions = \"shared\"")));
    assert_eq!(diff.replaced, ["s"]);
}

#[test]
fn a_rotated_credential_replaces_its_backend() {
    let text = backend("a", "credential = { header = \"Authorization\", prefix = \"Bearer \", env = \"A_TOKEN\" }");
    let running = config_in_env(&text, &[("A_TOKEN", "old")]);
    let same = config_in_env(&text, &[("A_TOKEN", "old")]);
    let rotated = config_in_env(&text, &[("A_TOKEN", "new")]);
    assert!(ConfigDiff::between(&running, &same).is_empty());
    assert_eq!(ConfigDiff::between(&running, &rotated).replaced, ["a"], "the same text with a new secret");
}

#[test]
fn the_order_of_kept_backends_is_noticed() {
    let running = config(&[backend("a", ""), backend("b", "")].concat());
    let swapped = config(&[backend("b", ""), backend("a", "")].concat());
    let diff = ConfigDiff::between(&running, &swapped);
    assert!(diff.reordered && diff.added.is_empty() && diff.replaced.is_empty(), "{diff:?}");
    let inserted = config(&[backend("a", ""), backend("n", ""), backend("b", "")].concat());
    assert!(!ConfigDiff::between(&running, &inserted).reordered, "a backend added in between moves nobody");
}

#[test]
fn policies_and_agent_authentication_are_flagged() {
    let keys = format!("[[auth.api_keys]]\nprincipal = \"alice\"\nsha256 = \"{KEY_DIGEST}\"\n");
    let policy = |deny: &str| format!("[[policies]]\nprincipals = [\"*\"]\nallow = [\"*\"]\ndeny = [{deny}]\n");
    let running = config(&format!("{keys}{}{}", policy(""), backend("a", "")));
    let denied = config(&format!("{keys}{}{}", policy("\"a__x\""), backend("a", "")));
    let diff = ConfigDiff::between(&running, &denied);
    assert!(diff.policies && !diff.auth, "{diff:?}");
    let more_keys = format!("{keys}[[auth.api_keys]]\nprincipal = \"bob\"\nsha256 = \"{}\"\n", "1".repeat(64));
    let diff = ConfigDiff::between(&running, &config(&format!("{more_keys}{}{}", policy(""), backend("a", ""))));
    assert!(diff.auth && !diff.policies, "{diff:?}");
    assert_eq!(diff.summary(), ["agent authentication changed"]);
}

#[test]
fn restart_only_keys_are_reported_and_kept_at_their_running_values() {
    let running = config("[server]\nsession_ttl = \"1h\"\nmax_body = \"1MiB\"\n");
    let file = config(
        "[server]\nlisten = \"127.0.0.1:9999\"\ndata_dir = \"/elsewhere\"\nsession_secret_file = \"/k\"\n\
         session_ttl = \"2h\"\nmax_revocations = 7\nmax_backend_sessions = 64\nmax_body = \"2MiB\"\nmax_connections = 9\n\
         [ledger]\nurl = \"memory\"\nretention = \"1h\"\nmax_result = 10\nlease = \"9s\"\n",
    );
    let diff = ConfigDiff::between(&running, &file);
    assert_eq!(
        diff.restart_only,
        [
            "server.listen",
            "server.data_dir",
            "server.session_secret_file",
            "server.session_ttl",
            "server.max_revocations",
            "server.max_backend_sessions",
            "ledger.url",
            "ledger.retention",
            "ledger.max_result",
            "ledger.lease",
        ]
    );
    assert_eq!(diff.server, ["server.max_body", "server.max_connections"]);
    let applied = applicable(&running, file.clone());
    assert_eq!((applied.server.max_body, applied.server.max_connections), (2 << 20, 9), "reloadable keys apply");
    assert_eq!(applied.server.session_ttl, running.server.session_ttl);
    assert_eq!(applied.ledger, running.ledger);
    let left = ConfigDiff::between(&running, &applied);
    assert!(left.restart_only.is_empty(), "applicable keeps every key `between` calls restart-only: {left:?}");
    assert_eq!(left.server, diff.server);
}

#[test]
fn every_reloadable_server_key_is_named() {
    let running = config("");
    let file = config(
        "[server]\nallowed_origins = [\"https://a.example\"]\nallowed_hosts = [\"gw.example\"]\nmax_body = \"1MiB\"\n\
         shutdown_drain = \"1s\"\nmax_backend_sessions_per_principal = 3\nheader_timeout = \"1s\"\n\
         body_timeout = \"1s\"\nidle_timeout = \"1s\"\nmax_connections = 3\nmax_stdio_processes = 3\n\
         public_url = \"https://gw.example\"\nmax_connections_per_principal = 2\nmax_streams_per_session = 1\n",
    );
    let diff = ConfigDiff::between(&running, &file);
    assert_eq!(diff.server.len(), 13, "{:?}", diff.server);
    assert!(diff.restart_only.is_empty());
}

#[test]
fn approvals_are_restart_only_and_approve_globs_reload_with_the_policies() {
    let running = config("");
    let file = config("[[policies]]\nprincipals = [\"bot\"]\napprove = [\"pay__*\"]\n[approvals]\nwait = \"5s\"\n");
    let diff = ConfigDiff::between(&running, &file);
    assert_eq!(diff.restart_only, ["approvals"]);
    assert!(diff.policies, "approve globs are part of the policies");
    let applied = applicable(&running, file);
    assert_eq!(applied.approvals, running.approvals, "kept at the running values");
    assert!(ConfigDiff::between(&running, &applied).restart_only.is_empty());
}

#[test]
fn tls_paths_and_the_grace_period_reload_but_turning_tls_on_or_off_needs_a_restart() {
    let tls = |cert: &str| format!("tls_cert = \"{cert}\"\ntls_key = \"k.pem\"\n");
    let plain = config("[server]\n");
    let served = config(&format!("[server]\n{}", tls("a.pem")));
    let renamed = config(&format!("[server]\n{}shutdown_grace = \"9s\"\n", tls("b.pem")));
    let diff = ConfigDiff::between(&served, &renamed);
    assert_eq!(diff.server, ["server.shutdown_grace", "server.tls_cert or tls_key"]);
    assert!(diff.restart_only.is_empty(), "{diff:?}");
    assert_eq!(applicable(&served, renamed).server.tls, config(&format!("[server]\n{}", tls("b.pem"))).server.tls);
    for (running, file) in [(&plain, &served), (&served, &plain)] {
        let diff = ConfigDiff::between(running, file);
        assert_eq!(diff.restart_only, ["server.tls_cert and tls_key (TLS on or off)"], "{diff:?}");
        assert_eq!(applicable(running, file.clone()).server.tls, running.server.tls, "the listener keeps its scheme");
    }
}
