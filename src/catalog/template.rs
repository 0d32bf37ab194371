//! Matching resource URIs against the URI templates backends list (RFC 6570, as far as routing needs): literal
//! text must match exactly; `{var}` (and the other simple operators) matches one or more characters up to the
//! next `/`, `?` or `#`; `{+var}` and `{#var}` (reserved expansion) match any characters. This decides which
//! backend a `resources/read` for a templated URI goes to; it never expands templates.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// An expression; `reserved` when it may span `/`, `?` and `#`.
    Variable {
        reserved: bool,
    },
}

impl UriTemplate {
    pub fn parse(text: &str) -> UriTemplate {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|close| open + close) else { break };
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let operator = rest[open + 1..close].chars().next();
            parts.push(Part::Variable { reserved: matches!(operator, Some('+' | '#')) });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        UriTemplate { text: text.to_owned(), parts }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn matches(&self, uri: &str) -> bool {
        matches_from(&self.parts, uri)
    }
}

/// Backtracking match; templates are short, so the cost is negligible.
fn matches_from(parts: &[Part], uri: &str) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(literal), rest)) => {
            uri.strip_prefix(literal.as_str()).is_some_and(|tail| matches_from(rest, tail))
        }
        Some((Part::Variable { reserved }, rest)) => {
            let stop = |c: char| !reserved && matches!(c, '/' | '?' | '#');
            let limit = uri.find(stop).unwrap_or(uri.len());
            (1..=limit).filter(|&end| uri.is_char_boundary(end)).any(|end| matches_from(rest, &uri[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_variables_match_one_segment() {
        let template = UriTemplate::parse("test://template/{id}/data");
        assert!(template.matches("test://template/123/data"));
        assert!(!template.matches("test://template/1/2/data"));
        assert!(!template.matches("test://template//data"), "a variable matches at least one character");
        assert!(!template.matches("test://other/123/data"));
    }

    #[test]
    fn reserved_expansion_spans_slashes_and_literals_are_exact() {
        assert!(UriTemplate::parse("file:///{+path}").matches("file:///etc/hosts"));
        assert!(
            UriTemplate::parse("demo://resource/static/document/architecture.md")
                .matches("demo://resource/static/document/architecture.md")
        );
        assert!(UriTemplate::parse("a/{x}.{y}").matches("a/readme.md"));
        assert!(!UriTemplate::parse("a/{x}").matches("b/readme"));
    }
}
