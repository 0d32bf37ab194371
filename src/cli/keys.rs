//! `switchyard keys new | list | revoke`: the lifecycle of agent API keys. `new` makes a key and prints it once,
//! with the `[[auth.api_keys]]` lines to paste into `switchyard.toml`; `list` shows the configured keys;
//! `revoke` removes keys from the file and asks the running gateway to reload it.
//!
//! Rules: the key itself is printed only by `new` and stored nowhere (the configuration keeps its SHA-256
//! digest); lines `new` prints, and a file `revoke` edited, are checked by the configuration loader itself
//! before anything is printed or written, so what the configuration would refuse is refused here with the same
//! message. `revoke` edits text, not a re-serialized document: it removes each matching `[[auth.api_keys]]`
//! table from its header to its last value line, keeping every comment and everything else byte for byte, and
//! replaces the file atomically with the same permissions.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, bail};
use switchyard::auth::{api_key_digest, generate_api_key, hex};
use switchyard::config::{ApiKeyConfig, Config};
use switchyard::gateway::control::{self, Answer};

use super::calls::timestamp;
use super::table::print_table;

/// The shortest digest prefix `revoke --sha256` takes.
const MIN_PREFIX: usize = 8;

/// Prints a fresh key for `principal` in `groups`.
pub fn new(principal: &str, groups: &[String]) -> anyhow::Result<ExitCode> {
    let key = generate_api_key()
        .map_err(|error| anyhow::anyhow!("cannot get random bytes from the operating system: {error}"))?;
    let lines = config_lines(principal, groups, &hex(&api_key_digest(&key)));
    Config::from_toml_str(&lines, "the generated lines", Vec::<(String, String)>::new())?;
    println!("API key for `{principal}` (shown only now; the gateway keeps only its digest):\n");
    println!("  {key}\n");
    println!("Agents send it as `Authorization: Bearer {key}`. Add these lines to switchyard.toml:\n");
    print!("{lines}");
    Ok(ExitCode::SUCCESS)
}

fn config_lines(principal: &str, groups: &[String], digest: &str) -> String {
    let quoted = |text: &str| toml::Value::String(text.to_owned()).to_string();
    let groups: Vec<String> = groups.iter().map(|group| quoted(group)).collect();
    format!(
        "[[auth.api_keys]]\nprincipal = {}\nsha256 = \"{digest}\"\ngroups = [{}]\n",
        quoted(principal),
        groups.join(", ")
    )
}

/// `switchyard keys list`.
pub fn list(config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let (path, config) = configured(config_path)?;
    let now = UNIX_EPOCH.elapsed().map_or(0, |elapsed| elapsed.as_secs());
    let rows = config.auth.api_keys.iter().map(|key| {
        let expires = key.expires.map(|at| timestamp(UNIX_EPOCH + Duration::from_secs(at)));
        let state = match key.expires {
            Some(at) if now >= at => "expired",
            _ => "active",
        };
        [
            key.principal.clone(),
            key.groups.join(","),
            hex(&key.sha256)[..12].to_owned(),
            expires.unwrap_or_else(|| "never".into()),
            state.into(),
        ]
    });
    let rows: Vec<[String; 5]> = rows.collect();
    if rows.is_empty() {
        println!("{} has no [[auth.api_keys]]", path.display());
    } else {
        print_table(["PRINCIPAL", "GROUPS", "SHA256", "EXPIRES", "STATE"], rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// Which keys `revoke` removes.
pub enum Revoke {
    Principal(String),
    DigestPrefix(String),
}

impl Revoke {
    /// From the command line, where clap makes exactly one of them present.
    pub fn of(principal: Option<String>, sha256: Option<String>) -> Revoke {
        match (principal, sha256) {
            (Some(principal), _) => Revoke::Principal(principal),
            (None, prefix) => Revoke::DigestPrefix(prefix.unwrap_or_default().to_ascii_lowercase()),
        }
    }

    fn matches(&self, key: &ApiKeyConfig) -> bool {
        match self {
            Revoke::Principal(principal) => key.principal == *principal,
            Revoke::DigestPrefix(prefix) => hex(&key.sha256).starts_with(prefix.as_str()),
        }
    }
}

/// `switchyard keys revoke`.
pub async fn revoke(which: Revoke, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    if let Revoke::DigestPrefix(prefix) = &which
        && (prefix.len() < MIN_PREFIX || !prefix.bytes().all(|byte| byte.is_ascii_hexdigit()))
    {
        bail!("--sha256 takes at least {MIN_PREFIX} hex digits of the key's digest (see `switchyard keys list`)");
    }
    let (path, config) = configured(config_path)?;
    let doomed: Vec<&ApiKeyConfig> = config.auth.api_keys.iter().filter(|key| which.matches(key)).collect();
    match (&which, doomed.len()) {
        (_, 0) => bail!("no key of {} matches (see `switchyard keys list`)", path.display()),
        (Revoke::DigestPrefix(prefix), found) if found > 1 => {
            bail!("{found} keys' digests start with {prefix}: give more digits")
        }
        _ => {}
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let edited = without_keys(&text, &|table| doomed.iter().any(|key| names_key(table, key)))
        .with_context(|| format!("{}", path.display()))?;
    let source = path.display().to_string();
    Config::from_toml_str(&edited, &source, std::env::vars())
        .context("the file without these keys would not load, so it was left as it was")?;
    replace_file(&path, &edited)?;
    for key in &doomed {
        println!("revoked the key of `{}` ({}…) in {}", key.principal, &hex(&key.sha256)[..12], path.display());
    }
    reload(&path, &config).await
}

/// The configuration file and what it says; refused when there is none.
fn configured(config_path: Option<&Path>) -> anyhow::Result<(PathBuf, Config)> {
    match Config::find(config_path)? {
        Some((path, config)) => Ok((path, config)),
        None => bail!("no configuration file: API keys live in one (give --config PATH or set SWITCHYARD_CONFIG)"),
    }
}

/// Whether the `[[auth.api_keys]]` table `table` (its text) is `key`'s.
fn names_key(table: &str, key: &ApiKeyConfig) -> bool {
    let Ok(parsed) = table.parse::<toml::Table>() else { return false };
    let entry = &parsed["auth"]["api_keys"][0];
    let digest = entry.get("sha256").and_then(toml::Value::as_str).map(str::to_ascii_lowercase);
    entry.get("principal").and_then(toml::Value::as_str) == Some(key.principal.as_str())
        && digest.as_deref() == Some(hex(&key.sha256).as_str())
}

/// `text` without the `[[auth.api_keys]]` tables `doomed` says to remove; refused when it removes none.
fn without_keys(text: &str, doomed: &dyn Fn(&str) -> bool) -> anyhow::Result<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let is_header = |line: &str| line.trim_start().starts_with('[');
    let is_value = |line: &str| !line.trim().is_empty() && !line.trim_start().starts_with('#');
    let (mut kept, mut removed, mut at) = (String::new(), 0, 0);
    while at < lines.len() {
        let line = lines[at];
        if line.trim().replace(' ', "") != "[[auth.api_keys]]" {
            kept.push_str(line);
            at += 1;
            continue;
        }
        let next = (at + 1..lines.len()).find(|&index| is_header(lines[index])).unwrap_or(lines.len());
        // The table ends at its last value line; the comments and blank lines after it belong to what follows.
        let end = (at + 1..next).rev().find(|&index| is_value(lines[index])).map_or(at + 1, |last| last + 1);
        let table = lines[at..end].concat();
        if doomed(&table) {
            removed += 1;
        } else {
            kept.push_str(&table);
        }
        at = end;
    }
    if removed == 0 {
        bail!("the key is not written as an [[auth.api_keys]] table, so it cannot be removed here: edit the file");
    }
    Ok(kept)
}

/// Writes `text` over `path` atomically (a sibling file renamed over it), with `path`'s permissions.
fn replace_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let permissions = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.permissions();
    let mut staged = path.as_os_str().to_owned();
    staged.push(".revoking");
    let staged = PathBuf::from(staged);
    std::fs::write(&staged, text).with_context(|| format!("cannot write {}", staged.display()))?;
    std::fs::set_permissions(&staged, permissions)
        .with_context(|| format!("cannot set the mode of {}", staged.display()))?;
    std::fs::rename(&staged, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// Asks the running gateway to reload `path`; without one, says the change applies at its next start.
async fn reload(path: &Path, config: &Config) -> anyhow::Result<ExitCode> {
    let socket = control::socket_path(&config.server.data_dir);
    let file = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    match control::request_reload(&socket, Some(&file)).await {
        Ok(Answer::Applied(_)) => {
            println!("the running gateway reloaded: the key is refused from now on");
            Ok(ExitCode::SUCCESS)
        }
        Ok(Answer::Refused(why)) => bail!("the running gateway refused to reload: {why}"),
        Err(_) => {
            println!("no running gateway answered at {}: the key is refused when it starts", socket.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# the gateway\n[server]\nlisten = \"127.0.0.1:8808\"\n\n# ci\n[[auth.api_keys]]\nprincipal = \"ci\"\nsha256 = \"aa\"\n\n# people\n[[auth.api_keys]]\nprincipal = \"bob\"\n# bob's groups\ngroups = [\"ops\"]\nsha256 = \"bb\"\n\n# the identity provider\n[auth.jwt]\nissuer = \"x\"\n";

    fn principal_is(name: &'static str) -> impl Fn(&str) -> bool {
        move |table: &str| table.contains(&format!("principal = \"{name}\""))
    }

    #[test]
    fn a_removed_table_takes_its_lines_and_leaves_every_comment_and_other_line() {
        let edited = without_keys(FILE, &principal_is("bob")).expect("removed");
        assert_eq!(
            edited,
            FILE.replace(
                "[[auth.api_keys]]\nprincipal = \"bob\"\n# bob's groups\ngroups = [\"ops\"]\nsha256 = \"bb\"\n",
                ""
            )
        );
        assert!(edited.contains("# people\n\n# the identity provider\n[auth.jwt]"), "{edited}");
        let first = without_keys(FILE, &principal_is("ci")).expect("removed");
        assert!(first.contains("# ci\n\n# people\n[[auth.api_keys]]\nprincipal = \"bob\""), "{first}");
    }

    #[test]
    fn nothing_to_remove_is_refused() {
        let refused = without_keys(FILE, &principal_is("carol")).expect_err("no such table");
        assert!(refused.to_string().contains("edit the file"), "{refused}");
    }
}
