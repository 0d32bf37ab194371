//! JSON with comments (JSONC), as VS Code writes `settings.json` and `mcp.json`: comments and trailing commas are
//! blanked so a JSON parser reads the text, and every position it reports still points into the original.
//!
//! Rules: only bytes outside strings change; each becomes a space (newlines are kept), so lines and columns stay.

/// `text` with `// …` and `/* … */` comments and trailing commas replaced by spaces.
pub(super) fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut in_string = false;
    // A comma followed so far only by blanks and comments: trailing if a `}` or `]` comes next.
    let mut pending_comma = None;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if in_string {
            match byte {
                b'\\' => at += 1,
                b'"' => in_string = false,
                _ => {}
            }
            at += 1;
            continue;
        }
        match (byte, bytes.get(at + 1)) {
            (b'/', Some(b'/')) => {
                let end = text[at..].find('\n').map_or(bytes.len(), |newline| at + newline);
                blank(&mut out[at..end]);
                at = end;
                continue;
            }
            (b'/', Some(b'*')) => {
                let end = text[at + 2..].find("*/").map_or(bytes.len(), |close| at + 2 + close + 2);
                blank(&mut out[at..end]);
                at = end;
                continue;
            }
            (b'"', _) => {
                in_string = true;
                pending_comma = None;
            }
            (b',', _) => pending_comma = Some(at),
            (b'}' | b']', _) => {
                if let Some(comma) = pending_comma.take() {
                    out[comma] = b' ';
                }
            }
            (blank, _) if blank.is_ascii_whitespace() => {}
            _ => pending_comma = None,
        }
        at += 1;
    }
    // Only whole comments (which end at ASCII) and ASCII commas were blanked, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

fn blank(bytes: &mut [u8]) {
    bytes.iter_mut().filter(|byte| **byte != b'\n').for_each(|byte| *byte = b' ');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_become_spaces() {
        let text = "{\n  // a comment\n  \"a\": \"x // not a comment\", /* b */\n  \"b\": [1, 2,],\n}\n";
        let stripped = strip(text);
        assert_eq!(stripped.len(), text.len());
        assert_eq!(stripped.lines().count(), text.lines().count());
        let value: serde_json::Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(value, serde_json::json!({"a": "x // not a comment", "b": [1, 2]}));
    }

    #[test]
    fn strings_with_escaped_quotes_and_commas_are_kept() {
        let text = r#"{"a": "say \"hi\", /* there */",}"#;
        let value: serde_json::Value = serde_json::from_str(&strip(text)).unwrap();
        assert_eq!(value["a"], "say \"hi\", /* there */");
    }
}
