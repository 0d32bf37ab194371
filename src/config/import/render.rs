//! Writes imported backends as `[[backends]]` TOML text, one key per line in the order of
//! `switchyard.example.toml`, so the operator reads them like hand-written tables.
//!
//! Rules: every string goes through TOML's own quoting; keys TOML cannot write bare are quoted; secrets never
//! reach this module (only the names of the variables holding them).

/// One `[[backends]]` table to write.
pub(super) struct Table {
    /// Where it came from, written as a comment above it.
    pub(super) origin: String,
    /// `key = value` pairs, values already rendered.
    pub(super) lines: Vec<(&'static str, String)>,
}

impl Table {
    pub(super) fn render(&self) -> String {
        let mut text = format!("# {}\n[[backends]]\n", self.origin.replace('\n', " "));
        for (key, value) in &self.lines {
            text.push_str(&format!("{key} = {value}\n"));
        }
        text
    }
}

/// A TOML string.
pub(super) fn string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A TOML array of strings.
pub(super) fn strings(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|item| string(item)).collect();
    format!("[{}]", items.join(", "))
}

/// An inline table of already rendered values.
pub(super) fn inline(entries: &[(String, String)]) -> String {
    let entries: Vec<String> = entries.iter().map(|(name, value)| format!("{} = {value}", key(name))).collect();
    format!("{{ {} }}", entries.join(", "))
}

/// `{ env = "VAR" }`, the secret reference stdio `env` values and OAuth secrets take.
pub(super) fn env_reference(variable: &str) -> String {
    inline(&[("env".to_owned(), string(variable))])
}

fn key(name: &str) -> String {
    let bare = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { name.to_owned() } else { string(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render_as_valid_toml() {
        let table = Table {
            origin: "server \"a\nb\"".into(),
            lines: vec![
                ("name", string("a-b")),
                ("args", strings(&["-y".into(), "quote \" and \\".into()])),
                ("env", inline(&[("PLAIN".into(), string("x")), ("odd key".into(), env_reference("TOKEN"))])),
            ],
        };
        let text = table.render();
        assert!(text.starts_with("# server \"a b\"\n[[backends]]\nname = \"a-b\"\n"), "{text}");
        let parsed: toml::Table = text.parse().unwrap();
        let backend = &parsed["backends"][0];
        assert_eq!(backend["args"][1].as_str(), Some("quote \" and \\"));
        assert_eq!(backend["env"]["odd key"]["env"].as_str(), Some("TOKEN"));
    }
}
