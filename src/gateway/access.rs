//! Lowers `[auth]` (with `admin_principals`), `[[policies]]` and `server.public_url` into the auth module's own types (the composition
//! root's job: auth never reads configuration types).
//!
//! Rules: the default JWT audiences are every resource identifier the gateway advertises in its Protected
//! Resource Metadata (`public_url` + `/mcp`, + `/mcp/<backend>` for each backend, and `public_url` itself for
//! the root form), so a client that followed any of them gets a token the gateway accepts; they are worked out
//! here, after every override of `public_url` and `listen` has been applied.

use crate::auth::{
    Admins, ApiKey, AuthSettings, Endpoint, JWKS_REFETCH_INTERVAL, JWT_VERIFIED_CAPACITY, JWT_VERIFIED_FOR, JwksSource,
    JwtSettings, Policies, Policy, Subject,
};
use crate::config::{Config, JwksLocation, JwtConfig, PolicySubject};

/// How agents are authenticated.
pub fn auth_settings(config: &Config) -> AuthSettings {
    let public_url = config.server.public_url();
    AuthSettings {
        anonymous: config.auth.serves_anonymous(),
        api_keys: config
            .auth
            .api_keys
            .iter()
            .map(|key| ApiKey { principal: key.principal.clone(), digest: key.sha256, groups: key.groups.clone() })
            .collect(),
        jwt: config.auth.jwt.as_ref().map(|jwt| jwt_settings(jwt, &public_url, config)),
        public_url,
    }
}

fn jwt_settings(jwt: &JwtConfig, public_url: &str, config: &Config) -> JwtSettings {
    let audiences =
        if jwt.audiences.is_empty() { default_audiences(public_url, config) } else { jwt.audiences.clone() };
    JwtSettings {
        issuer: jwt.issuer.clone(),
        audiences,
        jwks: match &jwt.jwks {
            JwksLocation::Url(url) => JwksSource::Url(url.clone()),
            JwksLocation::File(path) => JwksSource::File(path.clone()),
        },
        principal_claim: jwt.principal_claim.clone(),
        groups_claim: jwt.groups_claim.clone(),
        scopes_supported: jwt.scopes_supported.clone(),
        required_scopes: jwt.required_scopes.clone(),
        authorization_servers: jwt.authorization_servers.clone(),
        leeway: jwt.leeway,
        refetch_interval: JWKS_REFETCH_INTERVAL,
        verified_for: JWT_VERIFIED_FOR,
        verified_capacity: JWT_VERIFIED_CAPACITY,
    }
}

fn default_audiences(public_url: &str, config: &Config) -> Vec<String> {
    let endpoints = [Endpoint::Mcp, Endpoint::Root]
        .into_iter()
        .chain(config.backends.iter().map(|backend| Endpoint::Backend(&backend.name)));
    endpoints.map(|endpoint| format!("{public_url}{}", endpoint.path())).collect()
}

/// What each principal may use.
pub fn policies(config: &Config) -> Policies {
    Policies::new(
        config
            .policies
            .iter()
            .map(|policy| Policy {
                subjects: policy.principals.iter().map(subject).collect(),
                allow: policy.allow.clone(),
                deny: policy.deny.clone(),
                backends: policy.backends.clone(),
            })
            .collect(),
    )
}

/// Who may read the operator's console besides loopback callers.
pub fn admins(config: &Config) -> Admins {
    Admins::new(config.auth.admin_principals.iter().map(subject).collect())
}

fn subject(subject: &PolicySubject) -> Subject {
    match subject {
        PolicySubject::Anyone => Subject::Anyone,
        PolicySubject::Principal(name) => Subject::Principal(name.clone()),
        PolicySubject::Group(group) => Subject::Group(group.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "test.toml", [("SWITCHYARD_PUBLIC_URL", "https://gw.example.com")]).expect("valid")
    }

    const BACKENDS: &str = "[[backends]]\nname = \"docs\"\nurl = \"http://127.0.0.1:1/mcp\"\n";

    #[test]
    fn default_audiences_are_the_advertised_resources() {
        let text = format!("{BACKENDS}[auth.jwt]\nissuer = \"https://as.example.com\"\njwks_file = \"k.json\"\n");
        let settings = auth_settings(&config(&text));
        let jwt = settings.jwt.expect("jwt");
        assert_eq!(
            jwt.audiences,
            ["https://gw.example.com/mcp", "https://gw.example.com", "https://gw.example.com/mcp/docs"]
        );
        assert_eq!(jwt.jwks, JwksSource::File("k.json".into()));
        assert!(!settings.anonymous);
        assert_eq!(settings.public_url, "https://gw.example.com");
        let explicit = format!("{text}audiences = [\"api://gw\"]\n");
        assert_eq!(auth_settings(&config(&explicit)).jwt.expect("jwt").audiences, ["api://gw"]);
    }

    #[test]
    fn api_keys_and_anonymous_carry_over() {
        let digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let text = format!("[auth]\nanonymous = true\n[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{digest}\"\n");
        let settings = auth_settings(&config(&text));
        assert!(settings.anonymous && settings.jwt.is_none());
        assert_eq!(settings.api_keys[0].digest, crate::auth::api_key_digest(""));
        assert!(auth_settings(&config("")).anonymous, "no [auth]: anonymous");
    }

    #[test]
    fn policies_keep_their_meaning() {
        let text = format!(
            "{BACKENDS}[[policies]]\nprincipals = [\"group:ops\"]\nallow = [\"docs__*\"]\nbackends = [\"docs\"]\n"
        );
        let policies = policies(&config(&text));
        let ops = Principal { name: "o".into(), groups: vec!["ops".into()] };
        assert!(policies.may_use_tool(&ops, "docs__search") && policies.may_use_backend_resources(&ops, "docs"));
        assert!(!policies.may_use_tool(&Principal::anonymous(), "docs__search"));
        assert_eq!(super::policies(&config("")), Policies::default());
    }

    #[test]
    fn admin_principals_become_admins() {
        let digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let text = format!(
            "[auth]\nadmin_principals = [\"alice\", \"group:ops\"]\n[[auth.api_keys]]\nprincipal = \"a\"\n\
             sha256 = \"{digest}\"\n"
        );
        let admins = admins(&config(&text));
        let named = |name: &str, groups: &[&str]| Principal {
            name: name.into(),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        };
        assert!(admins.admits(&named("alice", &[])) && admins.admits(&named("o", &["ops"])));
        assert!(!admins.admits(&named("bob", &[])));
        assert_eq!(super::admins(&config("")), Admins::default());
    }
}
