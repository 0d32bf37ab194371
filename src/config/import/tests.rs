//! Tests of `switchyard import`'s conversion: each client's format, secrets, names, and every refusal.

use super::*;
use crate::config::{Config, CredentialSource, EnvValue, Transport};

fn import(text: &str) -> Imported {
    import_servers(text, "client.json", &[]).unwrap()
}

/// The imported tables, loaded by the configuration parser with `env` (and a PATH finding `sh`).
fn load(imported: &Imported, env: &[(&str, &str)]) -> Config {
    let env = env.iter().copied().chain([("PATH", "/bin:/usr/bin")]);
    Config::from_toml_str(&imported.toml, "imported.toml", env)
        .unwrap_or_else(|error| panic!("{error}\n{}", imported.toml))
}

#[test]
fn claude_desktop_processes_keep_their_arguments_and_move_secrets_to_variables() {
    let imported = import(
        r#"{"mcpServers": {"github": {"command": "sh", "args": ["-c", "exec server"],
            "env": {"GITHUB_TOKEN": "ghp_inline_secret", "LOG_LEVEL": "debug"}}}}"#,
    );
    assert!(!imported.toml.contains("ghp_inline_secret"), "{}", imported.toml);
    assert_eq!(imported.backends, 1);
    let secret_note = imported.notes.iter().find(|note| note.contains("GITHUB_TOKEN")).expect("a note");
    assert!(secret_note.contains("not copied") && !secret_note.contains("ghp_"), "{secret_note}");
    let config = load(&imported, &[("GITHUB_TOKEN", "from-env")]);
    let backend = config.backend("github").unwrap();
    assert_eq!(backend.transport, Transport::Stdio);
    let crate::config::Endpoint::Process(process) = &backend.endpoint else { panic!("a process") };
    assert_eq!(process.args, ["-c", "exec server"]);
    assert!(matches!(&process.env[0], (name, EnvValue::Secret { source: CredentialSource::Env(var), .. })
        if name == "GITHUB_TOKEN" && var == "GITHUB_TOKEN"));
    assert!(matches!(&process.env[1], (name, EnvValue::Plain(value)) if name == "LOG_LEVEL" && value == "debug"));
}

#[test]
fn cursor_urls_become_http_backends_with_a_credential() {
    let imported = import(
        r#"{"mcpServers": {"Remote Docs": {"url": "https://docs.example.com/mcp",
            "headers": {"Authorization": "Bearer sk-live-123", "X-Team": "platform", "X-Api-Key": "k-456"}},
            "legacy": {"url": "http://127.0.0.1:9000/sse"}}}"#,
    );
    for secret in ["sk-live-123", "k-456"] {
        assert!(!imported.toml.contains(secret), "{}", imported.toml);
        assert!(imported.notes.iter().all(|note| !note.contains(secret)));
    }
    assert!(imported.notes.iter().any(|note| note.contains("\"Remote Docs\" is the backend `remote-docs`")));
    let config = load(&imported, &[("REMOTE_DOCS_AUTHORIZATION", "sk"), ("REMOTE_DOCS_X_API_KEY", "k")]);
    let docs = config.backend("remote-docs").unwrap();
    let credential = docs.credential.as_ref().unwrap();
    assert_eq!(credential.source, CredentialSource::Env("REMOTE_DOCS_AUTHORIZATION".into()));
    assert_eq!(credential.value.expose(), "Bearer sk");
    assert_eq!(docs.headers["x-team"], "platform");
    assert_eq!(docs.headers["x-api-key"], "k");
    assert_eq!(config.backend("legacy").unwrap().transport, Transport::Sse);
}

#[test]
fn vscode_files_with_comments_types_and_references_convert() {
    let text = r#"{
        // settings.json
        "editor.fontSize": 14,
        "mcp": { "servers": {
            "gh": { "type": "http", "url": "https://api.example.com/mcp/",
                    "headers": { "Authorization": "Bearer ${input:gh-pat}" } },
            "local": { "type": "stdio", "command": "sh", "env": { "API_KEY": "${env:MY_KEY}", "HOME_DIR": "${env:HOME}" } },
        } },
    }"#;
    let imported = import(text);
    assert!(imported.notes.iter().any(|note| note.contains("${input:gh-pat}") && note.contains("GH_PAT")));
    let config = load(&imported, &[("GH_PAT", "p"), ("MY_KEY", "m"), ("HOME", "/home/x")]);
    let gh = config.backend("gh").unwrap();
    assert_eq!(gh.transport, Transport::Mcp);
    assert_eq!(gh.credential.as_ref().unwrap().source, CredentialSource::Env("GH_PAT".into()));
    let crate::config::Endpoint::Process(local) = &config.backend("local").unwrap().endpoint else { panic!() };
    assert!(matches!(&local.env[0].1, EnvValue::Secret { source: CredentialSource::Env(var), .. } if var == "MY_KEY"));
    assert!(matches!(&local.env[1].1, EnvValue::Plain(home) if home == "/home/x"));
    let vscode = import(r#"{"servers": {"x": {"type": "sse", "url": "https://h/events"}}}"#);
    assert_eq!(load(&vscode, &[]).backend("x").unwrap().transport, Transport::Sse);
    let mcp_json = import(r#"{"mcpServers": {"y": {"type": "http", "url": "https://h/sse"}}}"#);
    assert_eq!(load(&mcp_json, &[]).backend("y").unwrap().transport, Transport::Mcp, "`type` wins over the path");
}

#[test]
fn names_are_made_valid_and_unique_and_existing_ones_are_refused() {
    let text = r#"{"mcpServers": {"My_Server": {"command": "sh"}, "my.server": {"command": "sh"},
        "@scope/Pkg": {"command": "sh"}, "!!!": {"command": "sh"}}}"#;
    let config = load(&import(text), &[]);
    let names: Vec<&str> = config.backends.iter().map(|backend| backend.name.as_str()).collect();
    assert_eq!(names, ["my-server", "my-server-2", "scope-pkg", "server"]);
    let long = format!(r#"{{"mcpServers": {{"{}": {{"command": "sh"}}}}}}"#, "a".repeat(40));
    assert_eq!(load(&import(&long), &[]).backends[0].name, "a".repeat(32));
    let error = import_servers(text, "c.json", &["scope-pkg".into()]).unwrap_err().to_string();
    assert!(
        error.starts_with(
            "c.json: server \"@scope/Pkg\" would be the backend `scope-pkg`, which the configuration already has"
        ),
        "{error}"
    );
}

#[test]
fn disabled_servers_and_unknown_keys_are_noted() {
    let imported = import(
        r#"{"mcpServers": {"off": {"command": "sh", "disabled": true}, "on": {"command": "sh", "autoApprove": []}}}"#,
    );
    assert_eq!(imported.backends, 1);
    assert!(imported.notes.iter().any(|note| note.contains("\"off\" is disabled")));
    assert!(imported.notes.iter().any(|note| note.contains("key `autoApprove` is not imported")));
}

#[test]
fn bad_input_is_refused_with_where_and_why() {
    let error = |text: &str| import_servers(text, "c.json", &[]).unwrap_err().to_string();
    let json = error("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n    oops\n}");
    assert!(json.starts_with("c.json: not valid JSON at line 4, column 5:"), "{json}");
    assert!(error(r#"{"other": {}}"#).contains("no MCP servers: expected a top-level `mcpServers`"));
    for (entry, problem) in [
        (r#""s""#, "expected an object with `command`"),
        (r#"{"type": "ws", "url": "x"}"#, "`type` \"ws\" is not a transport"),
        (r#"{"command": "x", "url": "y"}"#, "has both `command` and `url`"),
        (r#"{"args": []}"#, "has neither `command`"),
        (r#"{"command": "x", "args": [1]}"#, "`args[0]` must be a string"),
        (r#"{"command": "x", "env": {"A": 1}}"#, "`env.A` must be a string"),
        (r#"{"type": "http"}"#, "`url` must be a string"),
        (r#"{"command": "${workspaceFolder:x}/run"}"#, "no equivalent"),
    ] {
        let message = error(&format!(r#"{{"mcpServers": {{"bad one": {entry}}}}}"#));
        assert!(message.starts_with("c.json: server \"bad one\": ") && message.contains(problem), "{message}");
    }
}
