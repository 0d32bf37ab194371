//! Backend credentials: the header a backend authenticates the gateway by, read from an environment variable
//! or a file when the configuration is loaded.
//!
//! Rules: a credential is resolved once, at load, so a missing secret fails startup instead of the first call;
//! the value lives in a [`SecretValue`] whose `Debug` prints `<redacted>` and whose header value is marked
//! sensitive; errors name the backend and the key (`backends[0].credential.env`) but never the value; a file is
//! read up to [`MAX_CREDENTIAL_FILE`] bytes and surrounding blanks (the usual trailing newline) are dropped.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use http::{HeaderName, HeaderValue};

use super::backend::parse_header_name;
use super::fields::{Expected, Fault, KeyPath, optional, quoted, required};
use super::raw::RawCredential;

/// Secrets are small; a larger file is almost certainly the wrong file.
pub const MAX_CREDENTIAL_FILE: u64 = 64 * 1024;

/// A resolved credential: send `header: value` on every request to the backend.
#[derive(Debug, Clone)]
pub struct BackendCredential {
    pub header: HeaderName,
    pub value: SecretValue,
    /// Where the secret came from, for `switchyard check` and logs (never the secret itself).
    pub source: CredentialSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    Env(String),
    File(PathBuf),
}

/// A header value that must never be printed.
#[derive(Clone)]
pub struct SecretValue(HeaderValue);

impl SecretValue {
    /// The value to put on the wire (already marked sensitive, so `http` and `reqwest` will not print it either).
    pub fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Resolves `backends[i].credential` for the backend named `backend`.
pub(super) fn resolve(
    key: &KeyPath,
    backend: &str,
    raw: &RawCredential,
    env: &HashMap<String, String>,
) -> Result<BackendCredential, Fault> {
    let header = required(
        &key.key("header"),
        raw.header.as_deref(),
        parse_header_name,
        "the header to send, such as \"Authorization\"",
    )?;
    let prefix = optional(&key.key("prefix"), raw.prefix.as_deref(), parse_prefix)?;
    let (source, secret, source_key) = read_source(key, backend, raw.env.as_deref(), raw.file.as_deref(), env)?;
    let value = combine(&source_key, backend, prefix.as_deref().unwrap_or(""), &secret)?;
    Ok(BackendCredential { header, value, source })
}

fn parse_prefix(text: &str) -> Result<String, Expected> {
    HeaderValue::from_str(text)
        .map(|_| text.to_owned())
        .map_err(|_| "a header value prefix such as \"Bearer \" (visible ASCII, spaces and tabs)".into())
}

/// Reads the secret named by exactly one of `env_var` and `file` (a credential's, or a secret in a stdio
/// backend's `env`); also returns the key it came from, to blame if the secret turns out unusable.
pub(super) fn read_source(
    key: &KeyPath,
    backend: &str,
    env_var: Option<&str>,
    file: Option<&str>,
    env: &HashMap<String, String>,
) -> Result<(CredentialSource, String, KeyPath), Fault> {
    match (env_var, file) {
        (Some(var), None) => {
            let key = key.key("env");
            let secret = read_env(&key, backend, var, env)?;
            Ok((CredentialSource::Env(var.to_owned()), secret, key))
        }
        (None, Some(file)) => {
            let key = key.key("file");
            let secret = read_file(&key, backend, Path::new(file))?;
            Ok((CredentialSource::File(PathBuf::from(file)), secret, key))
        }
        (env_var, _) => Err(Fault::invalid(
            &key.key(if env_var.is_some() { "file" } else { "env" }),
            None,
            "exactly one of `env` (an environment variable name) or `file` (a path)".into(),
        )),
    }
}

fn read_env(key: &KeyPath, backend: &str, var: &str, env: &HashMap<String, String>) -> Result<String, Fault> {
    if var.is_empty() || var.contains(['=', '\0']) {
        return Err(Fault::invalid(
            key,
            Some(quoted(var)),
            "an environment variable name such as \"GITHUB_TOKEN\"".into(),
        ));
    }
    let problem = match env.get(var).map(|value| value.trim()) {
        Some(secret) if !secret.is_empty() => return Ok(secret.to_owned()),
        Some(_) => format!("environment variable {var} is empty"),
        None => format!("environment variable {var} is not set"),
    };
    Err(credential_fault(key, backend, problem))
}

fn read_file(key: &KeyPath, backend: &str, path: &Path) -> Result<String, Fault> {
    let shown = path.display();
    let contents = read_bounded(path)
        .map_err(|error| credential_fault(key, backend, format!("cannot read file {shown}: {error}")))?;
    let secret = contents.trim();
    if secret.is_empty() {
        return Err(credential_fault(key, backend, format!("file {shown} is empty")));
    }
    Ok(secret.to_owned())
}

fn read_bounded(path: &Path) -> std::io::Result<String> {
    let mut contents = String::new();
    std::fs::File::open(path)?.take(MAX_CREDENTIAL_FILE + 1).read_to_string(&mut contents)?;
    if contents.len() as u64 > MAX_CREDENTIAL_FILE {
        return Err(std::io::Error::other(format!("larger than {MAX_CREDENTIAL_FILE} bytes; is this the right file?")));
    }
    Ok(contents)
}

fn combine(source_key: &KeyPath, backend: &str, prefix: &str, secret: &str) -> Result<SecretValue, Fault> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{secret}")).map_err(|_| {
        credential_fault(
            source_key,
            backend,
            "the secret is not a valid HTTP header value (only visible ASCII, spaces and tabs are allowed)".to_owned(),
        )
    })?;
    value.set_sensitive(true);
    Ok(SecretValue(value))
}

fn credential_fault(key: &KeyPath, backend: &str, problem: String) -> Fault {
    Fault::Credential { key: key.clone(), backend: backend.to_owned(), problem }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(header: &str, env: Option<&str>, file: Option<&str>, prefix: Option<&str>) -> RawCredential {
        RawCredential {
            header: Some(header.to_owned()),
            env: env.map(str::to_owned),
            file: file.map(str::to_owned),
            prefix: prefix.map(str::to_owned),
        }
    }

    fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn key() -> KeyPath {
        KeyPath::root().key("backends").index(0).key("credential")
    }

    #[test]
    fn env_credentials_get_the_prefix_and_stay_hidden() {
        let env = env_of(&[("TOKEN", "s3cret\n")]);
        let credential =
            resolve(&key(), "gh", &raw("Authorization", Some("TOKEN"), None, Some("Bearer ")), &env).expect("resolves");
        assert_eq!(credential.header, http::header::AUTHORIZATION);
        assert_eq!(credential.value.header_value(), "Bearer s3cret");
        assert!(credential.value.header_value().is_sensitive());
        assert_eq!(credential.source, CredentialSource::Env("TOKEN".into()));
        let debug = format!("{credential:?}");
        assert!(debug.contains("<redacted>"));
        assert!(!debug.contains("s3cret"));
    }

    #[test]
    fn unset_and_empty_variables_name_backend_and_key() {
        let unset = resolve(&key(), "gh", &raw("Authorization", Some("NOPE"), None, None), &env_of(&[]))
            .expect_err("unset")
            .in_file("f.toml")
            .to_string();
        assert_eq!(
            unset,
            "f.toml: backends[0].credential.env: credential of backend `gh`: environment variable NOPE is not set"
        );
        let empty = resolve(&key(), "gh", &raw("Authorization", Some("E"), None, None), &env_of(&[("E", " ")]))
            .expect_err("empty")
            .in_file("f.toml")
            .to_string();
        assert!(empty.ends_with("environment variable E is empty"), "{empty}");
    }

    #[test]
    fn exactly_one_source_is_required() {
        let env = env_of(&[("T", "x")]);
        let both = resolve(&key(), "gh", &raw("Authorization", Some("T"), Some("/f"), None), &env)
            .expect_err("both")
            .in_file("f.toml")
            .to_string();
        assert!(both.starts_with("f.toml: backends[0].credential.file: expected exactly one of"), "{both}");
        let neither = resolve(&key(), "gh", &raw("Authorization", None, None, None), &env)
            .expect_err("neither")
            .in_file("f.toml")
            .to_string();
        assert!(neither.starts_with("f.toml: backends[0].credential.env: expected exactly one of"), "{neither}");
    }

    #[test]
    fn bad_variable_names_and_headers_are_refused() {
        let env = env_of(&[]);
        let bad_var = resolve(&key(), "gh", &raw("Authorization", Some("A=B"), None, None), &env)
            .expect_err("bad name")
            .in_file("f.toml")
            .to_string();
        assert!(bad_var.starts_with("f.toml: backends[0].credential.env = \"A=B\": expected"), "{bad_var}");
        let bad_header = resolve(&key(), "gh", &raw("Bad Header", Some("T"), None, None), &env)
            .expect_err("bad header")
            .in_file("f.toml")
            .to_string();
        assert!(bad_header.starts_with("f.toml: backends[0].credential.header = \"Bad Header\""), "{bad_header}");
        let missing_header = RawCredential { header: None, ..raw("x", Some("T"), None, None) };
        let missing =
            resolve(&key(), "gh", &missing_header, &env).expect_err("missing header").in_file("f.toml").to_string();
        assert!(missing.starts_with("f.toml: backends[0].credential.header: expected"), "{missing}");
    }

    #[test]
    fn values_that_are_not_header_values_are_refused_without_echoing_them() {
        let env = env_of(&[("T", "line1\u{7}line2")]);
        let message = resolve(&key(), "gh", &raw("Authorization", Some("T"), None, None), &env)
            .expect_err("control character")
            .in_file("f.toml")
            .to_string();
        assert!(message.contains("backends[0].credential.env"), "{message}");
        assert!(message.contains("backend `gh`"), "{message}");
        assert!(!message.contains("line1"), "{message}");
    }

    #[test]
    fn bad_prefixes_are_refused() {
        let env = env_of(&[("T", "x")]);
        let message = resolve(&key(), "gh", &raw("Authorization", Some("T"), None, Some("Bearer\n")), &env)
            .expect_err("bad prefix")
            .in_file("f.toml")
            .to_string();
        assert!(message.starts_with("f.toml: backends[0].credential.prefix = \"Bearer\\n\": expected"), "{message}");
    }

    #[test]
    fn files_are_read_trimmed_and_bounded() {
        let dir = crate::config::tests::scratch_dir("credential-files");
        let good = dir.join("token");
        std::fs::write(&good, "abc\n").expect("write");
        let credential =
            resolve(&key(), "gh", &raw("X-Api-Key", None, good.to_str(), None), &env_of(&[])).expect("resolves");
        assert_eq!(credential.value.header_value(), "abc");
        assert_eq!(credential.source, CredentialSource::File(good));

        let missing = dir.join("missing");
        let message = resolve(&key(), "gh", &raw("X-Api-Key", None, missing.to_str(), None), &env_of(&[]))
            .expect_err("missing file")
            .in_file("f.toml")
            .to_string();
        assert!(
            message.starts_with("f.toml: backends[0].credential.file: credential of backend `gh`: cannot read file"),
            "{message}"
        );

        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").expect("write");
        let message = resolve(&key(), "gh", &raw("X-Api-Key", None, empty.to_str(), None), &env_of(&[]))
            .expect_err("empty file")
            .in_file("f.toml")
            .to_string();
        assert!(message.ends_with("is empty"), "{message}");

        let huge = dir.join("huge");
        std::fs::write(&huge, vec![b'a'; 70_000]).expect("write");
        let message = resolve(&key(), "gh", &raw("X-Api-Key", None, huge.to_str(), None), &env_of(&[]))
            .expect_err("huge file")
            .in_file("f.toml")
            .to_string();
        assert!(message.contains("larger than 65536 bytes"), "{message}");
    }
}
