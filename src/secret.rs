//! [`Secret`]: a value — a client secret, a private key's PEM, a credential's header value — that never shows
//! in `Debug` output, so no log line, error or panic message that prints its holder can leak it.
//!
//! Rules: `Debug` prints `<redacted>` and nothing of the value; the value is reached only through
//! [`Secret::expose`], so every place that uses it says so; a secret clones and compares like its value (a reload
//! compares configurations, and settings are shared by clone). It has no `Display` and no `Serialize`, so it cannot
//! be printed or written out by accident. A neutral leaf: it imports no crate module, and every layer may use it.

use std::fmt;
use std::sync::Arc;

/// A value that is never printed: by default a string (a client secret, a PEM), or any type that carries a secret
/// (a credential's header value).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T = String>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The secret itself, for the places that send or use it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The bearer token an agent presented (a JWT the gateway verified), held in memory from its request's
/// authentication to the backends that exchange it for a token of their own (RFC 8693 `subject_token`). It is
/// never stored, logged, or sent to a backend; it lives as long as the request (or the task) it came with.
pub type SubjectToken = Secret<Arc<str>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value_and_expose_gives_it() {
        let secret = Secret::new("hunter2".to_owned());
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(<redacted>)");
        assert_eq!(secret.expose(), "hunter2");
        assert_eq!(secret, Secret::new("hunter2".to_owned()));
    }
}
