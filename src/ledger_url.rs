//! [`LedgerUrl`]: which store holds the ledger, parsed from the `[ledger] url` setting. A neutral leaf: the
//! configuration validates the setting with this grammar and the ledger opens its store with it, so neither
//! knows the other; it imports no crate module.
//!
//! Rules:
//! - `memory` (lost at exit: tests and demos), `sqlite://PATH` (`sqlite:///abs/ledger.db`, or relative: the
//!   configuration anchors a file's relative path to the file's directory), `sqlite` alone for
//!   `<data_dir>/ledger.db` (the default), `postgres://…` / `postgresql://…` (libpq URL syntax, plus an optional
//!   `schema=NAME` query parameter that Switchyard consumes: the ledger's tables then live in that schema, created
//!   if missing).
//! - A URL is only ever shown with its password replaced by `***` ([`LedgerUrl`]'s `Display` and `Debug`), so
//!   configuration errors and logs never leak it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The SQLite file's name inside the data directory when the URL names no path.
pub const SQLITE_FILE_NAME: &str = "ledger.db";

/// What a ledger URL should look like, for error messages.
pub const URL_EXPECTED: &str = "\"memory\", \"sqlite\" (the data directory's ledger.db), \"sqlite:///path/to/ledger.db\" \
     or \"postgres://user:password@host:port/database[?schema=name]\"";

/// Longest schema name accepted (Postgres identifiers are at most 63 bytes; the channel name adds a prefix).
const MAX_SCHEMA_LEN: usize = 40;

/// A ledger URL that does not parse; `url` is shown with its password redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ledger URL {url}: expected {expected}")]
pub struct InvalidLedgerUrl {
    pub url: String,
    pub expected: String,
}

/// A parsed ledger location.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum LedgerUrl {
    Memory,
    /// `<data_dir>/ledger.db`, wherever the data directory is configured.
    #[default]
    SqliteInDataDir,
    Sqlite(PathBuf),
    Postgres(PostgresUrl),
}

/// A Postgres connection URL and the schema the ledger uses.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    /// The URL handed to the driver (without `schema=`).
    pub(crate) connect: String,
    /// `None`: the connection's default (`search_path`, usually `public`).
    pub(crate) schema: Option<String>,
}

impl LedgerUrl {
    /// `"memory"`, `"sqlite"` or `"postgres"`: the store this URL opens, for logs, metrics and `/readyz`.
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerUrl::Memory => "memory",
            LedgerUrl::SqliteInDataDir | LedgerUrl::Sqlite(_) => "sqlite",
            LedgerUrl::Postgres(_) => "postgres",
        }
    }

    pub fn parse(text: &str) -> Result<LedgerUrl, InvalidLedgerUrl> {
        let text = text.trim();
        let invalid = || InvalidLedgerUrl { url: redact(text), expected: URL_EXPECTED.to_owned() };
        if text == "memory" {
            return Ok(LedgerUrl::Memory);
        }
        if matches!(text, "sqlite" | "sqlite:" | "sqlite://") {
            return Ok(LedgerUrl::SqliteInDataDir);
        }
        if let Some(path) = text.strip_prefix("sqlite://") {
            return Ok(LedgerUrl::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return PostgresUrl::parse(text)
                .map(LedgerUrl::Postgres)
                .map_err(|expected| InvalidLedgerUrl { url: redact(text), expected: expected.to_owned() });
        }
        Err(invalid())
    }

    /// The SQLite file this URL names, if it names one.
    pub fn sqlite_path(&self, data_dir: &Path) -> Option<PathBuf> {
        match self {
            LedgerUrl::SqliteInDataDir => Some(data_dir.join(SQLITE_FILE_NAME)),
            LedgerUrl::Sqlite(path) => Some(path.clone()),
            LedgerUrl::Memory | LedgerUrl::Postgres(_) => None,
        }
    }
}

impl FromStr for LedgerUrl {
    type Err = InvalidLedgerUrl;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl PostgresUrl {
    fn parse(text: &str) -> Result<PostgresUrl, &'static str> {
        let (connect, schema) = take_schema_parameter(text);
        if let Some(schema) = &schema {
            check_schema(schema)?;
        }
        tokio_postgres::Config::from_str(&connect)
            .map_err(|_| "a libpq connection URL such as \"postgres://user:password@host:5432/database\"")?;
        Ok(PostgresUrl { connect, schema })
    }
}

/// Removes `schema=NAME` from the query string (the driver would refuse an unknown parameter).
fn take_schema_parameter(text: &str) -> (String, Option<String>) {
    let Some((base, query)) = text.split_once('?') else {
        return (text.to_owned(), None);
    };
    let mut schema = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("schema=") {
            Some(name) => {
                schema = Some(name.to_owned());
                false
            }
            None => !pair.is_empty(),
        })
        .collect();
    let connect = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    (connect, schema)
}

/// Schema names are spliced into SQL and a channel name, so only plain lowercase identifiers are accepted.
fn check_schema(name: &str) -> Result<(), &'static str> {
    let mut bytes = name.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if first_ok && rest_ok && name.len() <= MAX_SCHEMA_LEN {
        Ok(())
    } else {
        Err("a schema name of 1–40 characters of a-z, 0-9 and '_', not starting with a digit")
    }
}

/// `text` with any password replaced by `***`: the `user:password@` part and a `password=` parameter.
pub fn redact(text: &str) -> String {
    let mut shown = redact_userinfo(text);
    if let Some(start) = shown.find("password=") {
        let value_start = start + "password=".len();
        let value_end = shown[value_start..].find('&').map_or(shown.len(), |end| value_start + end);
        shown.replace_range(value_start..value_end, "***");
    }
    shown
}

fn redact_userinfo(text: &str) -> String {
    let Some(scheme_end) = text.find("://").map(|index| index + 3) else {
        return text.to_owned();
    };
    let authority_end = text[scheme_end..].find(['/', '?']).map_or(text.len(), |end| scheme_end + end);
    let authority = &text[scheme_end..authority_end];
    let Some(at) = authority.rfind('@') else {
        return text.to_owned();
    };
    match authority[..at].find(':') {
        Some(colon) => format!("{}{}:***{}", &text[..scheme_end], &authority[..colon], &text[scheme_end + at..]),
        None => text.to_owned(),
    }
}

impl fmt::Display for LedgerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerUrl::Memory => f.write_str("memory"),
            LedgerUrl::SqliteInDataDir => write!(f, "sqlite://<data_dir>/{SQLITE_FILE_NAME}"),
            LedgerUrl::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            LedgerUrl::Postgres(url) => fmt::Display::fmt(url, f),
        }
    }
}

impl fmt::Debug for LedgerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LedgerUrl({self})")
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.connect))?;
        match &self.schema {
            Some(schema) => write!(f, " (schema {schema})"),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        assert_eq!(LedgerUrl::parse("memory").expect("memory"), LedgerUrl::Memory);
        assert_eq!(LedgerUrl::parse("sqlite").expect("default"), LedgerUrl::SqliteInDataDir);
        assert_eq!(LedgerUrl::parse("sqlite://").expect("default"), LedgerUrl::SqliteInDataDir);
        let absolute = LedgerUrl::parse("sqlite:///var/lib/sy/ledger.db").expect("absolute");
        assert_eq!(absolute.sqlite_path(Path::new("/d")), Some(PathBuf::from("/var/lib/sy/ledger.db")));
        let relative = LedgerUrl::parse("sqlite://data/l.db").expect("relative");
        assert_eq!(relative.sqlite_path(Path::new("/d")), Some(PathBuf::from("data/l.db")));
        assert_eq!(LedgerUrl::default().sqlite_path(Path::new("/d")), Some(PathBuf::from("/d/ledger.db")));
        let LedgerUrl::Postgres(pg) = LedgerUrl::parse("postgres://u@h/db?schema=sy&sslmode=disable").expect("pg")
        else {
            panic!("not postgres")
        };
        assert_eq!(pg.schema.as_deref(), Some("sy"));
        assert_eq!(pg.connect, "postgres://u@h/db?sslmode=disable");
        assert!(matches!(LedgerUrl::parse("postgresql://h/db"), Ok(LedgerUrl::Postgres(_))));
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        for bad in ["mysql://h/db", "", "sqlite:x", "postgres://u:secret@h/db?schema=Bad-Name"] {
            let message = LedgerUrl::parse(bad).expect_err(bad).to_string();
            assert!(message.starts_with("invalid ledger URL"), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
        let message = LedgerUrl::parse("postgres://u:secret@h/db?bogus_option=1").expect_err("unknown").to_string();
        assert!(!message.contains("secret"), "{message}");
    }

    #[test]
    fn passwords_are_redacted_when_shown() {
        assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u@h/db?password=pw&x=1"), "postgres://u@h/db?password=***&x=1");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        let url = LedgerUrl::parse("postgres://u:pw@h/db?schema=s").expect("valid");
        assert_eq!(url.to_string(), "postgres://u:***@h/db (schema s)");
        assert!(!format!("{url:?}").contains("pw"));
    }
}
