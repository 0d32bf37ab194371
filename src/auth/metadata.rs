//! What the gateway tells OAuth clients about itself as a protected resource: the Protected Resource Metadata
//! documents (RFC 9728) and the `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9728 §5.1) that point to them
//! (MCP 2025-11-25 authorization, "Authorization Server Location" and "Error Handling").
//!
//! Rules:
//! - The gateway is three kinds of resource: `/mcp` (the aggregate), `/mcp/<backend>` (one backend), and the
//!   root (for clients that probe the root well-known URI). Each resource identifier is `public_url` plus the
//!   endpoint's path, exactly (RFC 9728 §3.3: clients compare it with the URL they used).
//! - A resource's metadata lives at the origin of `public_url` + `/.well-known/oauth-protected-resource` + the
//!   resource's path (the path-inserted form, RFC 9728 §3.1), so a gateway behind a path prefix
//!   (`https://host/switchyard`) advertises `https://host/.well-known/oauth-protected-resource/switchyard/mcp`.
//! - `scopes_supported` is the configured list, or the required scopes when none is configured (clients
//!   without a scope hint request all of `scopes_supported`).
//! - Challenge parameter values are quoted strings; `"` and `\` are escaped (RFC 9110 §5.6.4).

use serde_json::{Value, json};

use super::error::AuthError;

/// The well-known path prefix of RFC 9728.
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// One of the gateway's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    Root,
    Mcp,
    Backend(&'a str),
}

impl Endpoint<'_> {
    /// The endpoint's path below `public_url` (empty for the root).
    pub fn path(&self) -> String {
        match self {
            Self::Root => String::new(),
            Self::Mcp => "/mcp".to_owned(),
            Self::Backend(backend) => format!("/mcp/{backend}"),
        }
    }
}

/// The metadata of an OAuth-protected gateway (one with `[auth.jwt]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMetadata {
    /// `public_url` split at the start of its path.
    origin: String,
    base_path: String,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
}

impl ResourceMetadata {
    /// `public_url` is canonical (no trailing slash), as the configuration keeps it.
    pub fn new(
        public_url: &str,
        authorization_servers: Vec<String>,
        scopes_supported: Vec<String>,
        required_scopes: Vec<String>,
    ) -> Self {
        let authority_start = public_url.find("://").map_or(0, |index| index + 3);
        let path_start =
            public_url[authority_start..].find('/').map_or(public_url.len(), |index| authority_start + index);
        let (origin, base_path) = public_url.split_at(path_start);
        let scopes_supported = if scopes_supported.is_empty() { required_scopes.clone() } else { scopes_supported };
        Self {
            origin: origin.to_owned(),
            base_path: base_path.trim_end_matches('/').to_owned(),
            authorization_servers,
            scopes_supported,
            required_scopes,
        }
    }

    /// The resource identifier of `endpoint`.
    pub fn resource(&self, endpoint: Endpoint<'_>) -> String {
        format!("{}{}{}", self.origin, self.base_path, endpoint.path())
    }

    /// Where `endpoint`'s metadata document is served, as an absolute URL.
    pub fn metadata_url(&self, endpoint: Endpoint<'_>) -> String {
        format!("{}{WELL_KNOWN_PREFIX}{}{}", self.origin, self.base_path, endpoint.path())
    }

    /// The resource whose metadata a request for `WELL_KNOWN_PREFIX` + `suffix` asks for. A proxy may strip
    /// the gateway's path prefix or keep it, so both spellings are recognised; `None` for any other path.
    pub fn endpoint_for_metadata_path<'a>(&self, suffix: &'a str) -> Option<Endpoint<'a>> {
        let suffix = suffix
            .strip_prefix(self.base_path.as_str())
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .unwrap_or(suffix);
        match suffix.trim_end_matches('/') {
            "" => Some(Endpoint::Root),
            "/mcp" => Some(Endpoint::Mcp),
            rest => {
                rest.strip_prefix("/mcp/").filter(|name| !name.is_empty() && !name.contains('/')).map(Endpoint::Backend)
            }
        }
    }

    /// The metadata document (RFC 9728 §2) of `endpoint`.
    pub fn document(&self, endpoint: Endpoint<'_>) -> Value {
        let mut document = json!({
            "resource": self.resource(endpoint),
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes_supported.is_empty() {
            document["scopes_supported"] = json!(self.scopes_supported);
        }
        document
    }

    /// The `WWW-Authenticate` value answering `error` on `endpoint`.
    pub fn challenge(&self, endpoint: Endpoint<'_>, error: &AuthError) -> String {
        let mut parameters = vec![("resource_metadata", self.metadata_url(endpoint))];
        let scopes = match error {
            AuthError::InsufficientScope(required) => required.as_slice(),
            _ => self.required_scopes.as_slice(),
        };
        if !scopes.is_empty() {
            parameters.push(("scope", scopes.join(" ")));
        }
        challenge(parameters, error)
    }
}

/// The `WWW-Authenticate` value of a gateway without OAuth metadata (API keys only).
pub fn plain_challenge(error: &AuthError) -> String {
    challenge(Vec::new(), error)
}

fn challenge(mut parameters: Vec<(&'static str, String)>, error: &AuthError) -> String {
    if let Some(code) = error.error_code() {
        parameters.push(("error", code.to_owned()));
        parameters.push(("error_description", error.to_string()));
    }
    let rendered: Vec<String> =
        parameters.iter().map(|(name, value)| format!("{name}=\"{}\"", escape(value))).collect();
    if rendered.is_empty() { "Bearer".to_owned() } else { format!("Bearer {}", rendered.join(", ")) }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(public_url: &str) -> ResourceMetadata {
        ResourceMetadata::new(public_url, vec!["https://login.example.com".into()], vec![], vec!["mcp:tools".into()])
    }

    #[test]
    fn documents_name_the_exact_resource() {
        let gateway = metadata("https://gw.example.com");
        let document = gateway.document(Endpoint::Mcp);
        assert_eq!(
            document,
            json!({
                "resource": "https://gw.example.com/mcp",
                "authorization_servers": ["https://login.example.com"],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["mcp:tools"],
            })
        );
        assert_eq!(gateway.document(Endpoint::Backend("github"))["resource"], "https://gw.example.com/mcp/github");
        assert_eq!(gateway.document(Endpoint::Root)["resource"], "https://gw.example.com");
        let quiet = ResourceMetadata::new("http://127.0.0.1:1", vec!["http://127.0.0.1:2".into()], vec![], vec![]);
        assert!(quiet.document(Endpoint::Mcp).get("scopes_supported").is_none());
        let listed = ResourceMetadata::new("http://h", vec![], vec!["a".into(), "b".into()], vec!["a".into()]);
        assert_eq!(listed.document(Endpoint::Mcp)["scopes_supported"], json!(["a", "b"]));
    }

    #[test]
    fn metadata_urls_insert_the_well_known_path_before_the_resource_path() {
        let gateway = metadata("https://gw.example.com");
        assert_eq!(
            gateway.metadata_url(Endpoint::Mcp),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(gateway.metadata_url(Endpoint::Root), "https://gw.example.com/.well-known/oauth-protected-resource");
        let prefixed = metadata("https://host.example.com/switchyard");
        assert_eq!(prefixed.resource(Endpoint::Backend("docs")), "https://host.example.com/switchyard/mcp/docs");
        assert_eq!(
            prefixed.metadata_url(Endpoint::Backend("docs")),
            "https://host.example.com/.well-known/oauth-protected-resource/switchyard/mcp/docs"
        );
    }

    #[test]
    fn metadata_paths_map_back_to_endpoints() {
        let prefixed = metadata("https://host.example.com/sy");
        for (suffix, endpoint) in [
            ("", Some(Endpoint::Root)),
            ("/", Some(Endpoint::Root)),
            ("/mcp", Some(Endpoint::Mcp)),
            ("/sy/mcp", Some(Endpoint::Mcp)),
            ("/sy/mcp/docs", Some(Endpoint::Backend("docs"))),
            ("/mcp/docs", Some(Endpoint::Backend("docs"))),
            ("/sy", Some(Endpoint::Root)),
            ("/mcp/", Some(Endpoint::Mcp)),
            ("/mcp/a/b", None),
            ("/other", None),
            ("/syx/mcp", None),
        ] {
            assert_eq!(prefixed.endpoint_for_metadata_path(suffix), endpoint, "{suffix:?}");
        }
    }

    #[test]
    fn challenges_point_to_the_metadata_and_carry_the_error() {
        let gateway = metadata("https://gw.example.com");
        assert_eq!(
            gateway.challenge(Endpoint::Mcp, &AuthError::Missing),
            "Bearer resource_metadata=\"https://gw.example.com/.well-known/oauth-protected-resource/mcp\", \
             scope=\"mcp:tools\""
        );
        let expired = gateway.challenge(Endpoint::Backend("docs"), &AuthError::Expired);
        assert!(expired.contains("/.well-known/oauth-protected-resource/mcp/docs\""), "{expired}");
        assert!(expired.contains("error=\"invalid_token\", error_description=\"the token has expired\""), "{expired}");
        let scope = gateway.challenge(Endpoint::Mcp, &AuthError::InsufficientScope(vec!["a".into(), "b".into()]));
        assert!(scope.contains("scope=\"a b\", error=\"insufficient_scope\""), "{scope}");
        assert_eq!(plain_challenge(&AuthError::Missing), "Bearer");
        assert!(plain_challenge(&AuthError::UnknownKey).starts_with("Bearer error=\"invalid_token\""));
    }

    #[test]
    fn quoted_values_are_escaped() {
        let odd = plain_challenge(&AuthError::InvalidToken("the `a\"b\\` claim".into()));
        assert!(odd.contains(r#"the `a\"b\\` claim"#), "{odd}");
    }
}
