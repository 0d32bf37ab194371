//! Text the operator commands print that agents or backends chose (tool names and descriptions, principals,
//! error texts, results, idempotency keys): made inert for the terminal that shows it and the shell it is pasted
//! into. Part of the binary's edge.
//!
//! Rules:
//! - [`escaped`]: every character a terminal would act on or that reorders what is shown is written as an escape
//!   — C0 controls and DEL (ESC included) as `\n`, `\r`, `\t` or `\u001b`, C1 controls (U+0080–U+009F, CSI
//!   included), the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069)
//!   and the line and paragraph separators (U+2028, U+2029) as `\uXXXX`. The escapes are JSON's, so an escaped
//!   line of JSON is still JSON of the same value (JSON writes no such character outside a string). Everything
//!   else, backslashes included, is shown as it is.
//! - [`shell_word`]: a key of plain characters (`[A-Za-z0-9._:/-]+`) is printed as it is; any other is
//!   shell-quoted, so pasting it into a POSIX shell passes exactly that key and runs nothing: in single quotes
//!   (`'` written `'\''`), or, when it holds a character [`escaped`] would escape, in ANSI-C quotes
//!   (`$'…'`, bash, zsh, ksh and POSIX.1-2024 sh) with `\\`, `\'`, `\xHH` and `\uXXXX` escapes.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every character a terminal would act on escaped (see the module rules).
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if needs_escape(c) => push_unicode_escape(&mut shown, c),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// `key` as a word a shell reads back as exactly `key` (see the module rules).
pub fn shell_word(key: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-');
    if !key.is_empty() && key.chars().all(plain) {
        return Cow::Borrowed(key);
    }
    if !key.chars().any(needs_escape) {
        return Cow::Owned(format!("'{}'", key.replace('\'', r"'\''")));
    }
    let mut word = String::from("$'");
    for c in key.chars() {
        match c {
            '\\' => word.push_str(r"\\"),
            '\'' => word.push_str(r"\'"),
            c if c.is_ascii() && needs_escape(c) => {
                let _ = write!(word, "\\x{:02x}", u32::from(c));
            }
            c if needs_escape(c) => push_unicode_escape(&mut word, c),
            c => word.push(c),
        }
    }
    word.push('\'');
    Cow::Owned(word)
}

/// Whether a terminal would act on `c`, or it reorders the text around it.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

fn push_unicode_escape(out: &mut String, c: char) {
    // Every character escaped is in the Basic Multilingual Plane, so four digits are enough.
    let _ = write!(out, "\\u{:04x}", u32::from(c));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_and_reordering_characters_are_shown_as_escapes() {
        assert_eq!(escaped("plain text, ünïcode ✓"), "plain text, ünïcode ✓");
        assert!(matches!(escaped("plain"), Cow::Borrowed(_)));
        assert_eq!(escaped("\u{1b}]0;owned\u{7}\u{1b}[2J"), r"\u001b]0;owned\u0007\u001b[2J");
        assert_eq!(escaped("a\nb\rc\td\u{7f}"), r"a\nb\rc\td\u007f");
        assert_eq!(escaped("\u{9b}31m C1 CSI"), r"\u009b31m C1 CSI");
        assert_eq!(escaped("abc\u{202e}fed\u{2066}\u{2069}\u{200f}\u{2028}"), r"abc\u202efed\u2066\u2069\u200f\u2028");
    }

    #[test]
    fn an_escaped_json_line_is_json_of_the_same_value() {
        let value = serde_json::json!({"text": "red \u{9b}31m \u{202e}evil"});
        let line = serde_json::to_string(&value).expect("JSON");
        let shown = escaped(&line);
        assert!(!shown.chars().any(needs_escape), "{shown}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&shown).expect("still JSON"), value);
    }

    #[test]
    fn plain_keys_stay_plain_and_others_are_quoted() {
        for key in ["idem:5:alice:order-42", "a/b.c_d-e:1"] {
            assert_eq!(shell_word(key), key);
        }
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("idem:1:a:$(touch /tmp/x)"), "'idem:1:a:$(touch /tmp/x)'");
        assert_eq!(shell_word("req:4:s-12:\"1\""), "'req:4:s-12:\"1\"'");
        assert_eq!(shell_word("it's; rm -rf ~"), r"'it'\''s; rm -rf ~'");
        assert_eq!(shell_word("k\u{1b}[2J'\\\u{202e}x"), r"$'k\x1b[2J\'\\\u202ex'");
    }

    /// What a real shell makes of the quoted word: exactly the key, and nothing run.
    #[test]
    fn a_pasted_key_reaches_the_command_as_it_is() {
        let Some(bash) = ["/bin/bash", "/usr/bin/bash"].into_iter().find(|path| std::path::Path::new(path).exists())
        else {
            return;
        };
        let marker = std::env::temp_dir().join(format!("switchyard-shell-word-{}", std::process::id()));
        let keys = [
            format!("idem:1:a:$(touch {})", marker.display()),
            format!("x'; touch {} #", marker.display()),
            format!("`touch {}`\u{1b}[31m\\'\u{202e}\n", marker.display()),
        ];
        for key in keys {
            let script = format!("printf '%s' {}", shell_word(&key));
            let output =
                std::process::Command::new(bash).args(["-c", &script]).env("LC_ALL", "C.UTF-8").output().expect("bash");
            assert_eq!(String::from_utf8(output.stdout).expect("UTF-8"), key, "{script}");
            assert!(!marker.exists(), "pasting {script} ran a command");
        }
    }
}
