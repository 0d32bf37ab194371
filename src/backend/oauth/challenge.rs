//! The `Bearer` challenge of a backend's `WWW-Authenticate` header (RFC 6750 §3, RFC 9728 §5.1, RFC 9110 §11.6.1):
//! where its resource metadata lives, which scopes it wants, and why it refused.
//!
//! Rules:
//! - Only the `Bearer` challenge counts (scheme names ignore case); other schemes in the same or another header
//!   value are skipped. Parameter names ignore case; values are tokens or quoted strings with `\` escapes.
//! - Malformed input never fails: what can be read is kept, the rest is ignored (a challenge is a hint; the
//!   well-known locations remain). Each header value is read up to [`MAX_CHALLENGE`] bytes.
//! - `scope` is a space-separated list (RFC 6749 §3.3); an empty one counts as absent.

/// The longest header value read.
pub const MAX_CHALLENGE: usize = 8 * 1024;

/// What a `Bearer` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: the URL of the protected resource metadata (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs.
    pub scope: Option<Vec<String>>,
    /// `error`: `invalid_token`, `insufficient_scope`, ...
    pub error: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge among `values` (every `WWW-Authenticate` header value), if any.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<BearerChallenge> {
        values.into_iter().find_map(|value| parse_value(&value[..floor_boundary(value, MAX_CHALLENGE)]))
    }

    /// Whether the backend says the token lacks scope (RFC 6750 §3.1).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

fn floor_boundary(text: &str, max: usize) -> usize {
    (0..=max.min(text.len())).rev().find(|&index| text.is_char_boundary(index)).unwrap_or(0)
}

/// Reads the challenges of one header value; returns the first `Bearer` one.
fn parse_value(value: &str) -> Option<BearerChallenge> {
    let mut scanner = Scanner { rest: value };
    loop {
        scanner.skip_separators();
        let scheme = scanner.token()?;
        let params = scanner.params();
        if scheme.eq_ignore_ascii_case("bearer") {
            return Some(challenge_of(params));
        }
    }
}

fn challenge_of(params: Vec<(String, String)>) -> BearerChallenge {
    let mut challenge = BearerChallenge::default();
    for (name, value) in params {
        match name.to_ascii_lowercase().as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(value),
            "scope" => {
                let scopes: Vec<String> = value.split_ascii_whitespace().map(str::to_owned).collect();
                challenge.scope = (!scopes.is_empty()).then_some(scopes);
            }
            "error" => challenge.error = Some(value),
            _ => {}
        }
    }
    challenge
}

struct Scanner<'a> {
    rest: &'a str,
}

impl<'a> Scanner<'a> {
    fn skip_separators(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t', ',']);
    }

    fn skip_blanks(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    /// An RFC 9110 `token` (`tchar`s), or `None` when none starts here.
    fn token(&mut self) -> Option<&'a str> {
        let end = self.rest.find(|c: char| !is_tchar(c)).unwrap_or(self.rest.len());
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        (!token.is_empty()).then_some(token)
    }

    /// The `auth-param`s after a scheme, up to the start of the next challenge. A `token68` is skipped.
    fn params(&mut self) -> Vec<(String, String)> {
        let mut params = Vec::new();
        loop {
            self.skip_separators();
            let checkpoint = self.rest;
            let Some(name) = self.token() else {
                // A token68 (`Basic dXNlcg==`) or garbage: skip to the next comma.
                self.rest = self.rest.find(',').map_or("", |comma| &self.rest[comma..]);
                if self.rest.is_empty() {
                    return params;
                }
                continue;
            };
            self.skip_blanks();
            let Some(after_equals) = self.rest.strip_prefix('=') else {
                // A name without `=` starts the next challenge.
                self.rest = checkpoint;
                return params;
            };
            self.rest = after_equals;
            self.skip_blanks();
            let value = if self.rest.starts_with('"') { self.quoted() } else { self.token().unwrap_or("").to_owned() };
            params.push((name.to_owned(), value));
            if self.rest.trim_start_matches([' ', '\t']).is_empty() {
                return params;
            }
        }
    }

    /// A `quoted-string` starting at `"`; an unterminated one runs to the end.
    fn quoted(&mut self) -> String {
        let mut value = String::new();
        let mut chars = self.rest[1..].char_indices();
        while let Some((index, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &self.rest[1 + index + 1..];
                    return value;
                }
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                c => value.push(c),
            }
        }
        self.rest = "";
        value
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Option<BearerChallenge> {
        BearerChallenge::parse([value])
    }

    #[test]
    fn reads_the_mcp_challenges() {
        let challenge = parse(
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource\", \
             scope=\"files:read files:write\"",
        )
        .expect("bearer");
        assert_eq!(
            challenge.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(challenge.scope, Some(vec!["files:read".to_owned(), "files:write".to_owned()]));
        assert!(!challenge.insufficient_scope());
        let step_up = parse(
            "Bearer error=\"insufficient_scope\", scope=\"mcp:basic mcp:write\", resource_metadata=\"http://h/x\", \
             error_description=\"needs \\\"write\\\"\"",
        )
        .expect("bearer");
        assert!(step_up.insufficient_scope());
        assert_eq!(step_up.resource_metadata.as_deref(), Some("http://h/x"));
    }

    #[test]
    fn finds_bearer_among_other_schemes_and_values() {
        let challenge =
            parse("Basic realm=\"x\", DPoP algs=\"ES256\", bearer scope=a error=invalid_token").expect("found");
        assert_eq!(challenge.scope, Some(vec!["a".to_owned()]));
        assert_eq!(challenge.error.as_deref(), Some("invalid_token"));
        let second = BearerChallenge::parse(["Basic dXNlcg==", "Bearer scope=\"b\""]).expect("second value");
        assert_eq!(second.scope, Some(vec!["b".to_owned()]));
        assert_eq!(parse("Bearer").expect("bare"), BearerChallenge::default());
        assert_eq!(parse("Basic realm=\"x\""), None);
        assert_eq!(BearerChallenge::parse(Vec::<&str>::new()), None);
    }

    #[test]
    fn odd_input_keeps_what_can_be_read() {
        assert_eq!(parse("Bearer scope=\"\"").expect("bearer").scope, None, "an empty scope is absent");
        let unterminated = parse("Bearer resource_metadata=\"http://h/x").expect("bearer");
        assert_eq!(unterminated.resource_metadata.as_deref(), Some("http://h/x"));
        let names = parse("Bearer SCOPE=a, Resource_Metadata=\"u\"").expect("bearer");
        assert_eq!((names.scope.map(|s| s.len()), names.resource_metadata.as_deref()), (Some(1), Some("u")));
        for garbage in ["", ",,,", "=", "\"Bearer\"", "Bearer ==,=\"", "Bearer \u{e9}=1"] {
            let _ = parse(garbage);
        }
        let huge = format!("Bearer scope=\"{}\", resource_metadata=\"late\"", "s ".repeat(MAX_CHALLENGE));
        assert_eq!(parse(&huge).expect("bearer").resource_metadata, None, "read only up to the bound");
    }
}
