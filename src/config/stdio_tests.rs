//! Tests of stdio backend settings: command, arguments, environment and limits, and their errors.

use super::*;

#[test]
fn bare_names_are_found_on_path_and_paths_must_be_executable() {
    let dir = crate::config::tests::scratch_dir("stdio-command");
    let program = dir.join("server");
    std::fs::write(&program, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let plain = dir.join("plain");
    std::fs::write(&plain, "").expect("write");
    let path = format!("/nonexistent:{}", dir.display());
    assert_eq!(resolve_command("server", Some(&path)), Ok(program.clone()));
    assert_eq!(resolve_command(program.to_str().expect("utf-8"), None), Ok(program));
    assert!(resolve_command("plain", Some(&path)).is_err_and(|e| e.0.contains("no executable `plain`")));
    assert!(resolve_command(plain.to_str().expect("utf-8"), None).is_err_and(|e| e.0.contains("is not one")));
    assert!(resolve_command("server", None).is_err_and(|e| e.0.contains("PATH is not set")));
    assert!(resolve_command(" ", Some(&path)).is_err());
}

use crate::config::{Config, Endpoint, Transport};

/// A scratch directory holding an executable `server`, for `PATH`.
fn bin_dir(name: &str) -> String {
    let dir = crate::config::tests::scratch_dir(name);
    let program = dir.join("server");
    std::fs::write(&program, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir.display().to_string()
}

fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, String> {
    Config::from_toml_str(text, "t.toml", env.iter().copied()).map_err(|error| error.to_string())
}

const STDIO: &str = "[[backends]]\nname = \"local\"\ntransport = \"stdio\"\ncommand = \"server\"\n";

#[test]
fn every_stdio_key_is_read_and_defaults_apply() {
    let path = bin_dir("stdio-keys");
    let defaults = load(STDIO, &[("PATH", &path)]).expect("valid");
    let Endpoint::Process(stdio) = &defaults.backends[0].endpoint else { panic!("a process") };
    assert_eq!(stdio.command, PathBuf::from(&path).join("server"));
    assert_eq!(
        (stdio.sessions, stdio.idle_timeout, stdio.max_processes),
        (StdioSessions::PerAgent, DEFAULT_PROCESS_IDLE_TIMEOUT, DEFAULT_MAX_PROCESSES)
    );
    assert_eq!(defaults.server.max_stdio_processes, DEFAULT_MAX_STDIO_PROCESSES);
    let text = format!(
        "server.max_stdio_processes = 9\n{STDIO}args = [\"--root\", \"/srv\"]\ncwd = \"/\"\nsessions = \"shared\"\n\
         idle_timeout = \"30s\"\nmax_processes = 3\nenv = {{ MODE = \"fast\", KEY = {{ env = \"LOCAL_KEY\" }} }}\n"
    );
    let config = load(&text, &[("PATH", &path), ("LOCAL_KEY", "hidden-value")]).expect("valid");
    let backend = &config.backends[0];
    assert_eq!(backend.transport, Transport::Stdio);
    assert!(backend.url().is_none());
    let Endpoint::Process(stdio) = &backend.endpoint else { panic!("a process") };
    assert_eq!(stdio.args, ["--root", "/srv"]);
    assert_eq!(stdio.cwd.as_deref(), Some(Path::new("/")));
    assert_eq!(
        (stdio.sessions, stdio.idle_timeout, stdio.max_processes),
        (StdioSessions::Shared, Duration::from_secs(30), 3)
    );
    let values: Vec<(&str, &str)> = stdio.env.iter().map(|(name, value)| (name.as_str(), value.value())).collect();
    assert_eq!(values, [("KEY", "hidden-value"), ("MODE", "fast")]);
    assert!(!format!("{config:?}").contains("hidden-value"), "a secret is never printed");
    assert_eq!(config.server.max_stdio_processes, 9);
    let overridden = load(&text, &[("PATH", &path), ("LOCAL_KEY", "k"), ("SWITCHYARD_MAX_STDIO_PROCESSES", "4")]);
    assert_eq!(overridden.expect("valid").server.max_stdio_processes, 4);
}

#[test]
fn bad_stdio_values_and_misplaced_keys_are_named() {
    let path = bin_dir("stdio-errors");
    let http = "[[backends]]\nname = \"web\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
    let cases = [
        (format!("{STDIO}url = \"http://x\"\n"), "t.toml: backends[0].url: expected no such key on this backend"),
        (
            format!("{STDIO}credential = {{ header = \"A\", env = \"B\" }}\n"),
            "backends[0].credential: expected no such key",
        ),
        (
            format!("{http}command = \"server\"\n"),
            "backends[0].command: expected no such key on this backend: it is only for transport = \"stdio\"",
        ),
        (format!("{http}transport = \"sse\"\nmax_processes = 2\n"), "backends[0].max_processes: expected no such key"),
        (
            "[[backends]]\nname = \"a\"\ntransport = \"stdio\"\n".to_owned(),
            "backends[0].command: expected a program name found on PATH",
        ),
        (STDIO.replace("\"server\"", "\"\""), "backends[0].command = \"\": expected a program name"),
        (format!("{STDIO}sessions = \"per-call\"\n"), "backends[0].sessions: unknown variant `per-call`"),
        (
            format!("{STDIO}max_processes = 0\n"),
            "backends[0].max_processes = 0: expected a whole number from 1 to 65536 processes",
        ),
        (format!("{STDIO}idle_timeout = \"0s\"\n"), "backends[0].idle_timeout = \"0s\""),
        (
            format!("{STDIO}cwd = \"/nonexistent/dir\"\n"),
            "backends[0].cwd = \"/nonexistent/dir\": expected an existing directory",
        ),
        (
            format!("{STDIO}env = {{ \"A=B\" = \"x\" }}\n"),
            "backends[0].env.\"A=B\" = \"A=B\": expected an environment variable name",
        ),
        (
            format!("{STDIO}env = {{ K = {{ env = \"UNSET_VAR\" }} }}\n"),
            "backends[0].env.K.env: credential of backend `local`: environment variable UNSET_VAR is not set",
        ),
        (
            format!("{STDIO}env = {{ K = {{ env = \"A\", file = \"/f\" }} }}\n"),
            "backends[0].env.K.file: expected exactly one of",
        ),
        (
            format!("{STDIO}env = {{ K = 1 }}\n"),
            "backends[0].env.K: invalid type: integer `1`, expected a string, or a secret",
        ),
        (format!("{STDIO}env = {{ K = {{ value = \"x\" }} }}\n"), "unknown key backends[0].env.K.value"),
        (
            "server.max_stdio_processes = -1\n".to_owned(),
            "server.max_stdio_processes = -1: expected a whole number from 1 to 65536 processes",
        ),
    ];
    for (text, expected) in cases {
        let message = load(&text, &[("PATH", &path)]).expect_err(expected);
        assert!(message.contains(expected), "{message}\n  does not contain\n{expected}");
    }
    let sse = load(&format!("{http}transport = \"sse\"\n"), &[]).expect("sse backends are configurable");
    assert_eq!(sse.backends[0].transport, Transport::Sse);
}

#[test]
fn process_caps_are_bounded() {
    assert_eq!(PROCESSES.parse("8"), Ok(8));
    for bad in ["0", "-1", "x", "65537"] {
        assert!(PROCESSES.parse(bad).is_err(), "{bad}");
    }
}
