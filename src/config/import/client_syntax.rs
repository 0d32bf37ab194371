//! The MCP clients' side of an imported server's values: which ones are secrets, and how the clients' variable
//! references (`${VAR}`, VS Code's `${env:VAR}` and `${input:ID}`) are written in Switchyard's `${VAR}` syntax.
//!
//! Rules: secret environment variables are those whose name contains KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL;
//! secret headers are `Authorization`, `Proxy-Authorization` and those whose name contains key, token, secret,
//! password or auth (any case). A client variable with no environment equivalent (`${workspaceFolder}`,
//! `${config:…}`) is an error, never copied as text the gateway would misread; `${userHome}` is `${HOME}`.

use crate::config::expand::is_variable_name;

/// Whether a server's environment variable `name` holds a secret.
pub(super) fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"].iter().any(|word| upper.contains(word))
}

/// Whether a header `name` carries a secret.
pub(super) fn is_secret_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["key", "token", "secret", "password", "auth"].iter().any(|word| lower.contains(word))
}

/// VS Code's predefined variables that name editor state (the open folder or file): nothing in the gateway's
/// environment stands for them.
const EDITOR_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "file",
    "fileBasename",
    "fileDirname",
    "relativeFile",
    "cwd",
    "pathSeparator",
];

/// A value in Switchyard's syntax, and a note for each `${input:ID}` it turned into a variable.
pub(super) struct Translated {
    pub(super) text: String,
    pub(super) notes: Vec<String>,
}

/// Rewrites the references in `value`; text around them is kept.
pub(super) fn translate(value: &str) -> Result<Translated, String> {
    let mut text = String::with_capacity(value.len());
    let mut notes = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        text.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let close = after.find('}').ok_or_else(|| format!("an unterminated ${{ in {value:?}"))?;
        let body = &after[..close];
        let variable = if let Some(name) = body.strip_prefix("env:") {
            env_name(name)
        } else if let Some(id) = body.strip_prefix("input:") {
            let name = env_name(id);
            notes.push(format!("`${{input:{id}}}` (a value the client asks for) is read from the variable {name}"));
            name
        } else if body == "userHome" {
            "HOME".to_owned()
        } else if is_reference(body) && !EDITOR_VARIABLES.contains(&body) {
            body.to_owned()
        } else {
            return Err(format!(
                "`${{{body}}}` is a client variable with no equivalent here; replace it and import again"
            ));
        };
        text.push_str(&format!("${{{variable}}}"));
        rest = &after[close + 1..];
    }
    text.push_str(rest);
    Ok(Translated { text, notes })
}

/// The variable a value consists of, when it is exactly one `${NAME}`.
pub(super) fn whole_reference(text: &str) -> Option<&str> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    is_variable_name(name).then_some(name)
}

/// `text` as an environment variable name: upper case, other characters as `_`, never starting with a digit.
pub(super) fn env_name(text: &str) -> String {
    let name: String =
        text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) { format!("_{name}") } else { name }
}

fn is_reference(body: &str) -> bool {
    is_variable_name(body.split_once(":-").map_or(body, |(name, _)| name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_name() {
        for secret in ["GITHUB_TOKEN", "api_key", "DB_PASSWORD", "CLIENT_SECRET", "GOOGLE_CREDENTIALS"] {
            assert!(is_secret_env(secret), "{secret}");
        }
        assert!(!is_secret_env("LOG_LEVEL") && !is_secret_env("NODE_ENV"));
        for header in ["Authorization", "X-API-Key", "x-auth-token", "Proxy-Authorization"] {
            assert!(is_secret_header(header), "{header}");
        }
        assert!(!is_secret_header("X-Team") && !is_secret_header("Accept-Language"));
    }

    #[test]
    fn client_references_become_switchyard_references() {
        let plain = translate("Bearer ${env:GH_TOKEN} ${HOME} ${X:-y}").unwrap();
        assert_eq!(plain.text, "Bearer ${GH_TOKEN} ${HOME} ${X:-y}");
        assert!(plain.notes.is_empty());
        let input = translate("${input:api-key}").unwrap();
        assert_eq!(input.text, "${API_KEY}");
        assert_eq!(input.notes.len(), 1);
        assert_eq!(translate("${userHome}/x").unwrap().text, "${HOME}/x");
        for editor in ["${workspaceFolder}/x", "${workspaceFolder:docs}", "${config:mcp.path}"] {
            let error = translate(editor).err().unwrap();
            assert!(error.contains("no equivalent"), "{error}");
        }
        assert!(translate("${open").is_err());
        assert_eq!(translate("no refs").unwrap().text, "no refs");
    }

    #[test]
    fn whole_references_and_names() {
        assert_eq!(whole_reference("${TOKEN}"), Some("TOKEN"));
        assert_eq!(whole_reference("Bearer ${TOKEN}"), None);
        assert_eq!(whole_reference("${A:-b}"), None);
        assert_eq!(env_name("my-server.key"), "MY_SERVER_KEY");
        assert_eq!(env_name("1x"), "_1X");
    }
}
