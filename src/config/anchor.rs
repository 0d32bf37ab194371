//! Anchors the relative paths of a configuration file to the file's directory, so a file means the same whatever
//! directory the gateway is started from (docs/configuration.md, "Relative paths").
//!
//! Rules:
//! - Runs on the parsed (and expanded) TOML tree, before deserializing: every path-typed key is rewritten there,
//!   so each section's rules see the anchored path and messages show it.
//! - Path-typed keys: `server.data_dir`, `server.session_secret_file`, `server.tls_cert`, `server.tls_key`, a relative `sqlite://PATH` ledger URL,
//!   `auth.jwt.jwks_file`, and per backend `cwd`, a `spec` that is no URL, a `command` containing a `/`, and every secret's `file`
//!   (`credential`, `env` values, `oauth.client_secret`, `oauth.private_key`). A bare `command` is looked up on
//!   `PATH`, as before.
//! - Absolute paths, empty strings and values of the wrong type are left alone (the deserializer and the rules
//!   report the latter). Defaults (`./switchyard-data`) and `SWITCHYARD_*` overrides are not in the file and stay
//!   relative to the working directory.

use std::path::Path;

/// Rewrites the relative paths of `table` as paths under `base` (the file's directory).
pub(super) fn anchor(table: &mut toml::Table, base: &Path) {
    let Some(base) = base.to_str().filter(|base| !base.is_empty()) else {
        // The file is in the working directory (nothing to do), or its directory cannot be written in TOML text.
        return;
    };
    let join = |text: &str| Path::new(base).join(text.strip_prefix("./").unwrap_or(text)).display().to_string();
    for keys in
        [["server", "data_dir"], ["server", "session_secret_file"], ["server", "tls_cert"], ["server", "tls_key"]]
    {
        rewrite(table, &keys, |text| is_relative(text).then(|| join(text)));
    }
    rewrite(table, &["audit", "file"], |text| is_relative(text).then(|| join(text)));
    rewrite(table, &["auth", "jwt", "jwks_file"], |text| is_relative(text).then(|| join(text)));
    rewrite(table, &["ledger", "url"], |url| {
        let path = url.strip_prefix("sqlite://")?;
        is_relative(path).then(|| format!("sqlite://{}", join(path)))
    });
    let Some(toml::Value::Array(backends)) = table.get_mut("backends") else { return };
    for backend in backends.iter_mut().filter_map(toml::Value::as_table_mut) {
        anchor_backend(backend, &join);
    }
}

fn anchor_backend(backend: &mut toml::Table, join: &dyn Fn(&str) -> String) {
    rewrite(backend, &["cwd"], |text| is_relative(text).then(|| join(text)));
    rewrite(backend, &["spec"], |text| (!text.contains("://") && is_relative(text)).then(|| join(text)));
    rewrite(backend, &["command"], |text| (text.contains('/') && is_relative(text)).then(|| join(text)));
    for secret in [&["credential", "file"][..], &["oauth", "client_secret", "file"], &["oauth", "private_key", "file"]]
    {
        rewrite(backend, secret, |text| is_relative(text).then(|| join(text)));
    }
    if let Some(toml::Value::Table(env)) = backend.get_mut("env") {
        for value in env.iter_mut().filter_map(|(_, value)| value.as_table_mut()) {
            rewrite(value, &["file"], |text| is_relative(text).then(|| join(text)));
        }
    }
}

fn is_relative(text: &str) -> bool {
    !text.is_empty() && Path::new(text).is_relative()
}

/// Replaces the string at `keys` (a path of nested tables) with what `change` makes of it, if anything.
fn rewrite(table: &mut toml::Table, keys: &[&str], change: impl Fn(&str) -> Option<String>) {
    let Some((last, parents)) = keys.split_last() else { return };
    let mut table = table;
    for key in parents {
        match table.get_mut(*key) {
            Some(toml::Value::Table(inner)) => table = inner,
            _ => return,
        }
    }
    if let Some(toml::Value::String(text)) = table.get_mut(*last)
        && let Some(changed) = change(text)
    {
        *text = changed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchored(text: &str, base: &str) -> toml::Table {
        let mut table: toml::Table = text.parse().unwrap();
        anchor(&mut table, Path::new(base));
        table
    }

    #[test]
    fn every_path_typed_key_is_anchored() {
        let table = anchored(
            r#"
            server = { data_dir = "data", session_secret_file = "keys/session.key" }
            ledger = { url = "sqlite://state/ledger.db" }
            auth = { jwt = { jwks_file = "jwks.json" } }
            [[backends]]
            command = "./bin/server"
            cwd = "work"
            env = { TOKEN = { file = "secrets/token" }, PLAIN = "relative/not/a/path" }
            [[backends]]
            credential = { file = "secrets/gh" }
            oauth = { client_secret = { file = "s" }, private_key = { file = "k.pem" } }
            "#,
            "/etc/sy",
        );
        assert_eq!(table["server"]["data_dir"].as_str(), Some("/etc/sy/data"));
        assert_eq!(table["server"]["session_secret_file"].as_str(), Some("/etc/sy/keys/session.key"));
        assert_eq!(table["ledger"]["url"].as_str(), Some("sqlite:///etc/sy/state/ledger.db"));
        assert_eq!(table["auth"]["jwt"]["jwks_file"].as_str(), Some("/etc/sy/jwks.json"));
        let stdio = &table["backends"][0];
        assert_eq!(stdio["command"].as_str(), Some("/etc/sy/bin/server"));
        assert_eq!(stdio["cwd"].as_str(), Some("/etc/sy/work"));
        assert_eq!(stdio["env"]["TOKEN"]["file"].as_str(), Some("/etc/sy/secrets/token"));
        assert_eq!(stdio["env"]["PLAIN"].as_str(), Some("relative/not/a/path"), "plain values are not paths");
        let http = &table["backends"][1];
        assert_eq!(http["credential"]["file"].as_str(), Some("/etc/sy/secrets/gh"));
        assert_eq!(http["oauth"]["client_secret"]["file"].as_str(), Some("/etc/sy/s"));
        assert_eq!(http["oauth"]["private_key"]["file"].as_str(), Some("/etc/sy/k.pem"));
    }

    #[test]
    fn absolute_bare_and_mistyped_values_are_left_alone() {
        let table = anchored(
            "server = { data_dir = \"/var/lib/sy\", session_secret_file = 5 }\nledger = { url = \"sqlite\" }\n\
             [[backends]]\ncommand = \"npx\"\ncwd = \"\"\n",
            "/etc/sy",
        );
        assert_eq!(table["server"]["data_dir"].as_str(), Some("/var/lib/sy"));
        assert_eq!(table["server"]["session_secret_file"].as_integer(), Some(5));
        assert_eq!(table["ledger"]["url"].as_str(), Some("sqlite"));
        assert_eq!(table["backends"][0]["command"].as_str(), Some("npx"), "a bare name is looked up on PATH");
        assert_eq!(table["backends"][0]["cwd"].as_str(), Some(""));
        let unchanged = anchored("server = { data_dir = \"data\" }\n", "");
        assert_eq!(unchanged["server"]["data_dir"].as_str(), Some("data"), "a file in the working directory");
    }
}
