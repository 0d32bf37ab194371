//! The one sentence that reports a backend's failure wherever it shows (`switchyard check`, `/readyz`, the
//! console, the log, an agent's error): the backend's name, where it is (its URL or command line, for an
//! operator), and the failure's root cause with what to do ([`super::McpError::render`]).
//!
//! Rules: a [`Place`] shows what an operator configured, minus what may be secret (a URL's user, password, query
//! and fragment); an agent's sentence ([`Audience::Agent`]) names the backend only.

use std::fmt;
use std::path::Path;

use reqwest::Url;

use super::error::McpError;
use super::fault::Audience;

/// The longest command line a sentence shows.
const COMMAND_SHOWN: usize = 300;

/// Where a backend is, as its sentence names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Its URL, without user, password, query or fragment.
    Url(String),
    /// Its command line, arguments quoted where they hold spaces.
    Command(String),
}

impl Place {
    pub fn url(url: &Url) -> Place {
        let mut shown = url.clone();
        // Neither call fails on a URL with a host, and a URL without one keeps nothing to hide.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        shown.set_fragment(None);
        Place::Url(shown.into())
    }

    pub fn command(program: &Path, args: &[String]) -> Place {
        let mut line = program.display().to_string();
        if !args.is_empty() {
            line.push(' ');
            line.push_str(&quoted(args));
        }
        if let Some((cut, _)) = line.char_indices().nth(COMMAND_SHOWN) {
            line.truncate(cut);
            line.push('…');
        }
        Place::Command(line)
    }
}

/// Arguments as one line, each in single quotes where it is empty or holds white space.
pub fn quoted(args: &[String]) -> String {
    let shown: Vec<_> = args
        .iter()
        .map(|arg| match arg.is_empty() || arg.contains(char::is_whitespace) {
            true => format!("'{arg}'"),
            false => arg.clone(),
        })
        .collect();
    shown.join(" ")
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Url(url) => f.write_str(url),
            Place::Command(line) => write!(f, "command `{line}`"),
        }
    }
}

/// One backend's failure as one sentence for `audience`.
pub struct Failure<'a> {
    pub backend: &'a str,
    pub place: &'a Place,
    pub error: &'a McpError,
    pub audience: Audience,
}

impl fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Failure { backend, place, error, audience } = self;
        match audience {
            Audience::Operator => write!(f, "backend `{backend}` ({place}): ")?,
            Audience::Agent => write!(f, "backend `{backend}`: ")?,
        }
        error.render(*audience, f)
    }
}
