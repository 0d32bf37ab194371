//! The binary's configuration files: which file is used (`--config`, `SWITCHYARD_CONFIG`, `./switchyard.toml`,
//! none), `init`, `import`, relative paths and `${VAR}` references, and `--version`.

use std::path::Path;
use std::process::{Command, Output};

use crate::cli::{run, scratch_dir, stdout, switchyard};

/// The binary run in `dir`.
fn switchyard_in(dir: &Path) -> Command {
    let mut command = switchyard();
    command.current_dir(dir);
    command
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn version_names_the_commit() {
    let output = run(switchyard().arg("--version")).await;
    let text = stdout(&output);
    assert!(output.status.success());
    let expected = format!("switchyard {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected) && text.trim_end().ends_with(')'), "{text}");
}

#[tokio::test]
async fn a_named_missing_file_is_one_error_naming_it_and_what_named_it() {
    let dir = scratch_dir("missing");
    let missing = dir.join("absent.toml");
    let by_flag = run(switchyard_in(&dir).arg("check").arg("--config").arg(&missing)).await;
    assert_eq!(by_flag.status.code(), Some(1));
    let said = stderr(&by_flag);
    assert_eq!(
        said.trim_end(),
        format!("error: {}: no such configuration file (named by --config)", missing.display())
    );
    let by_env = run(switchyard_in(&dir).arg("check").env("SWITCHYARD_CONFIG", &missing)).await;
    assert_eq!(by_env.status.code(), Some(1));
    assert!(stderr(&by_env).contains("no such configuration file (named by SWITCHYARD_CONFIG)"), "{by_env:?}");
    let unreadable = run(switchyard_in(&dir).arg("check").arg("--config").arg(&dir)).await;
    let said = stderr(&unreadable);
    assert_eq!(said.matches("Is a directory").count(), 1, "the cause is said once: {said}");
}

#[tokio::test]
async fn switchyard_config_names_the_file_and_the_flag_wins() {
    let dir = scratch_dir("env-config");
    std::fs::write(dir.join("switchyard.toml"), "[server]\ndata_dir = \"from-default\"\n").unwrap();
    std::fs::write(dir.join("env.toml"), "[server]\ndata_dir = \"from-env\"\n").unwrap();
    std::fs::write(dir.join("flag.toml"), "[server]\ndata_dir = \"from-flag\"\n").unwrap();
    let data_dir = |output: &Output| {
        let text = stdout(output);
        assert!(output.status.success(), "{text}{}", stderr(output));
        text.lines().find_map(|line| line.strip_prefix("data directory: ").map(str::to_owned)).unwrap()
    };
    let default = run(switchyard_in(&dir).arg("check")).await;
    assert!(data_dir(&default).ends_with("from-default"));
    let by_env = run(switchyard_in(&dir).arg("check").env("SWITCHYARD_CONFIG", dir.join("env.toml"))).await;
    assert!(data_dir(&by_env).ends_with("from-env"));
    let by_flag =
        run(switchyard_in(&dir).args(["check", "--config", "flag.toml"]).env("SWITCHYARD_CONFIG", "env.toml")).await;
    assert!(data_dir(&by_flag).ends_with("from-flag"));
}

#[tokio::test]
async fn check_without_a_file_says_so_instead_of_serving() {
    let dir = scratch_dir("no-file");
    let output = run(switchyard_in(&dir).arg("check")).await;
    let said = stderr(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("no configuration file") && said.contains("which `switchyard serve` would serve"), "{said}");
    assert!(!said.contains("serving"), "{said}");
    assert!(stdout(&output).lines().any(|line| line.starts_with("demo__echo")));
}

#[tokio::test]
async fn relative_paths_are_relative_to_the_file_not_the_working_directory() {
    let dir = scratch_dir("relative");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(dir.join("conf")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(dir.join("conf/switchyard.toml"), "[server]\ndata_dir = \"${DATA:-state}\"\n").unwrap();
    let config = Path::new("../conf/switchyard.toml");
    let checked = run(switchyard_in(&elsewhere).arg("check").arg("--config").arg(config)).await;
    let text = stdout(&checked);
    assert!(checked.status.success(), "{text}{}", stderr(&checked));
    assert!(text.contains("data directory: ../conf/state\n"), "{text}");
    let listed = run(switchyard_in(&elsewhere).arg("calls").arg("--config").arg(config)).await;
    assert!(
        stderr(&listed).contains("no ledger at ../conf/state/ledger.db"),
        "looked next to the file: {}",
        stderr(&listed)
    );
    assert!(!elsewhere.join("state").exists(), "nothing in the working directory");
    let unset = "[server]\ndata_dir = \"${STATE_DIRECTORY_FOR_TEST}\"\n";
    std::fs::write(dir.join("conf/switchyard.toml"), unset).unwrap();
    let refused = run(switchyard_in(&elsewhere).arg("check").arg("--config").arg(config)).await;
    assert_eq!(refused.status.code(), Some(1));
    let said = stderr(&refused);
    assert!(said.contains("server.data_dir: environment variable STATE_DIRECTORY_FOR_TEST is not set"), "{said}");
}

#[tokio::test]
async fn init_writes_a_file_check_accepts_and_never_overwrites() {
    let dir = scratch_dir("init");
    let written = run(switchyard_in(&dir).arg("init")).await;
    assert!(written.status.success(), "{}", stderr(&written));
    let path = dir.join("switchyard.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let checked = run(switchyard_in(&dir).arg("check")).await;
    assert!(checked.status.success(), "{}{}", stdout(&checked), stderr(&checked));
    assert!(stdout(&checked).lines().any(|line| line.starts_with("demo__echo")), "{}", stdout(&checked));

    std::fs::write(&path, "# mine\n").unwrap();
    let again = run(switchyard_in(&dir).arg("init")).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("already exists; it was left untouched"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    let elsewhere = dir.join("other.toml");
    let by_env = run(switchyard_in(&dir).arg("init").env("SWITCHYARD_CONFIG", &elsewhere)).await;
    assert!(by_env.status.success(), "{}", stderr(&by_env));
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), text);
}

const CLAUDE_DESKTOP: &str = r#"{"mcpServers": {
  "My Files": {"command": "sh", "args": ["-c", "exit 0"], "env": {"FILES_API_KEY": "sk-do-not-print", "MODE": "ro"}},
  "docs": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer tok-do-not-print"}}
}}"#;

#[tokio::test]
async fn import_prints_tables_without_secrets_and_write_appends_them() {
    let dir = scratch_dir("import");
    std::fs::write(dir.join("claude_desktop_config.json"), CLAUDE_DESKTOP).unwrap();
    let printed = run(switchyard_in(&dir).args(["import", "claude_desktop_config.json"])).await;
    let (tables, notes) = (stdout(&printed), stderr(&printed));
    assert!(printed.status.success(), "{notes}");
    for secret in ["sk-do-not-print", "tok-do-not-print"] {
        assert!(!tables.contains(secret) && !notes.contains(secret), "{tables}{notes}");
    }
    assert!(tables.contains("name = \"my-files\"") && tables.contains("FILES_API_KEY = { env = \"FILES_API_KEY\" }"));
    assert!(
        notes.contains("env FILES_API_KEY holds a secret") && notes.contains("header Authorization holds a secret")
    );
    assert!(notes.contains("\"My Files\" is the backend `my-files`"), "{notes}");

    let config = dir.join("switchyard.toml");
    std::fs::write(&config, "[server]\ndata_dir = \"data\"").unwrap();
    let written = run(switchyard_in(&dir).args(["import", "--write", "claude_desktop_config.json"])).await;
    assert!(written.status.success(), "{}", stderr(&written));
    let appended = std::fs::read_to_string(&config).unwrap();
    assert!(appended.starts_with("[server]\ndata_dir = \"data\"\n") && appended.ends_with(&tables), "{appended}");
    let env = [("FILES_API_KEY", "k"), ("DOCS_AUTHORIZATION", "t"), ("PATH", "/bin:/usr/bin")];
    switchyard::config::Config::from_toml_str(&appended, "switchyard.toml", env).unwrap();

    let again = run(switchyard_in(&dir).args(["import", "--write", "claude_desktop_config.json"])).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("would be the backend `my-files`, which the configuration already has"));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), appended, "a refused import writes nothing");
}

#[tokio::test]
async fn import_refuses_bad_json_with_its_line_and_column() {
    let dir = scratch_dir("import-bad");
    std::fs::write(dir.join("bad.json"), "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\"\n}").unwrap();
    let output = run(switchyard_in(&dir).args(["import", "bad.json"])).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("bad.json: not valid JSON at line 3, column 1: EOF while parsing an object"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).is_empty());
}
