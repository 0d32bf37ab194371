//! Backend credentials: the header a backend authenticates the gateway by (or, for an OpenAPI backend, the
//! security scheme of its document that says where the secret goes), read from an environment variable or a file
//! when the configuration is loaded.
//!
//! Rules: exactly one of `header` and `scheme`; `prefix` only with `header` (a scheme decides the secret's form
//! itself: docs/openapi.md, *Credentials and security schemes*); whether a scheme names one of the document's is
//! judged when the document is read, not here.
//! A credential is resolved once, at load, so a missing secret fails startup instead of the first call;
//! the header value lives in a [`Secret`], whose `Debug` prints `<redacted>`, and is marked sensitive; errors name
//! the backend and the key (`backends[0].credential.env`) but never the value; a file is read up to
//! [`MAX_CREDENTIAL_FILE`] bytes and surrounding blanks (the usual trailing newline) are dropped.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use http::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::fields::{Fault, KeyPath, optional, quoted, required};
use super::values::{Expected, parse_header_name};
use crate::secret::Secret;

/// Secrets are small; a larger file is almost certainly the wrong file.
pub const MAX_CREDENTIAL_FILE: u64 = 64 * 1024;

/// A resolved credential: `value`, sent where `target` says.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendCredential {
    pub target: CredentialTarget,
    /// The value to put on the wire (marked sensitive, so `http` and `reqwest` will not print it either); with a
    /// `scheme`, the bare secret.
    pub value: Secret<HeaderValue>,
    /// Where the secret came from, for `switchyard check` and logs (never the secret itself).
    pub source: CredentialSource,
}

/// Where a credential goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialTarget {
    /// `header`: in this header of every request, as configured.
    Header(HeaderName),
    /// `scheme` (OpenAPI backends only): where the document's security scheme of this name puts it.
    Scheme(String),
}

impl BackendCredential {
    /// The header the credential is configured for (`None` for a `scheme`).
    pub fn header(&self) -> Option<&HeaderName> {
        match &self.target {
            CredentialTarget::Header(header) => Some(header),
            CredentialTarget::Scheme(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    Env(String),
    File(PathBuf),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawCredential {
    header: Option<String>,
    scheme: Option<String>,
    env: Option<String>,
    file: Option<String>,
    prefix: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawSecretRef {
    pub(super) env: Option<String>,
    pub(super) file: Option<String>,
}

/// Resolves `backends[i].credential` for the backend named `backend`.
pub(super) fn resolve(
    key: &KeyPath,
    backend: &str,
    raw: &RawCredential,
    env: &HashMap<String, String>,
) -> Result<BackendCredential, Fault> {
    let target = match (raw.header.as_deref(), raw.scheme.as_deref()) {
        (header, None) => CredentialTarget::Header(required(
            &key.key("header"),
            header,
            parse_header_name,
            "the header to send, such as \"Authorization\" (or, for transport = \"openapi\", `scheme`)",
        )?),
        (None, Some(scheme)) => CredentialTarget::Scheme(
            parse_scheme(scheme)
                .map_err(|expected| Fault::invalid(&key.key("scheme"), Some(quoted(scheme)), expected))?,
        ),
        (Some(_), Some(_)) => {
            return Err(Fault::invalid(
                &key.key("scheme"),
                None,
                "either `header` or `scheme`, not both: a scheme of the OpenAPI document says where the secret goes"
                    .into(),
            ));
        }
    };
    let prefix = optional(&key.key("prefix"), raw.prefix.as_deref(), parse_prefix)?;
    if prefix.is_some() && matches!(target, CredentialTarget::Scheme(_)) {
        return Err(Fault::invalid(
            &key.key("prefix"),
            None,
            "no `prefix` with `scheme`: the scheme decides the form (`Bearer `, `Basic `, or the bare key)".into(),
        ));
    }
    let (source, secret, source_key) = read_source(key, backend, raw.env.as_deref(), raw.file.as_deref(), env)?;
    let value = combine(&source_key, backend, prefix.as_deref().unwrap_or(""), &secret)?;
    Ok(BackendCredential { target, value, source })
}

/// The name of a security scheme, as OpenAPI allows it in `components` (`^[a-zA-Z0-9.\-_]+$`).
fn parse_scheme(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    valid.then(|| text.to_owned()).ok_or_else(|| {
        "the name of one of the OpenAPI document's `components.securitySchemes`, such as \"api_key\" \
         (letters, digits, '.', '-' and '_')"
            .into()
    })
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

fn combine(source_key: &KeyPath, backend: &str, prefix: &str, secret: &str) -> Result<Secret<HeaderValue>, Fault> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{secret}")).map_err(|_| {
        credential_fault(
            source_key,
            backend,
            "the secret is not a valid HTTP header value (only visible ASCII, spaces and tabs are allowed)".to_owned(),
        )
    })?;
    value.set_sensitive(true);
    Ok(Secret::new(value))
}

fn credential_fault(key: &KeyPath, backend: &str, problem: String) -> Fault {
    Fault::Credential { key: key.clone(), backend: backend.to_owned(), problem }
}

#[cfg(test)]
#[path = "credential_tests.rs"]
mod tests;
