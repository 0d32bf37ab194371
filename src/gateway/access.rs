//! Lowers `[auth]` (with `admin_principals`), `[[policies]]` and `server.public_url` into the auth module's own types (the composition
//! root's job: auth never reads configuration types).
//!
//! Rules: without `[auth.jwt] audiences` each endpoint accepts only tokens for the resource identifier its
//! Protected Resource Metadata advertises (`public_url` + `/mcp` at `/mcp`, + `/mcp/<backend>` at
//! `/mcp/<backend>`, `public_url` itself for the console, whose challenge names the root metadata), worked out
//! from `public_url` after every override of it and of `listen`; configured audiences are accepted at every
//! endpoint (`auth::Audiences`).

use crate::auth::{
    Admins, ApiKey, Audiences, AuthSettings, JWKS_REFETCH_INTERVAL, JWT_VERIFIED_CAPACITY, JWT_VERIFIED_FOR,
    JwksSource, JwtSettings, Policies, Policy, Subject,
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
            .map(|key| ApiKey {
                principal: key.principal.clone(),
                digest: key.sha256,
                groups: key.groups.clone(),
                expires: key.expires,
            })
            .collect(),
        jwt: config.auth.jwt.as_ref().map(|jwt| jwt_settings(jwt, &public_url)),
        public_url,
    }
}

fn jwt_settings(jwt: &JwtConfig, public_url: &str) -> JwtSettings {
    let audiences = match jwt.audiences.is_empty() {
        true => Audiences::PerEndpoint { public_url: public_url.to_owned() },
        false => Audiences::Everywhere(jwt.audiences.clone()),
    };
    JwtSettings {
        issuer: jwt.issuer.clone(),
        audiences,
        jwks: match &jwt.jwks {
            JwksLocation::Url(url) => JwksSource::Url(url.clone()),
            JwksLocation::File(path) => JwksSource::File(path.clone()),
        },
        principal_claim: jwt.principal_claim.clone(),
        principal_prefix: jwt.principal_prefix.clone(),
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
                approve: policy.approve.clone(),
                backends: policy.backends.clone(),
            })
            .collect(),
    )
}

/// Who may read the operator's console besides loopback callers.
pub fn admins(config: &Config) -> Admins {
    Admins::new(config.auth.admin_principals.iter().map(subject).collect())
}

pub(super) fn subject(subject: &PolicySubject) -> Subject {
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
    fn default_audiences_are_each_endpoints_resource_and_configured_ones_apply_everywhere() {
        let text = format!("{BACKENDS}[auth.jwt]\nissuer = \"https://as.example.com\"\njwks_file = \"k.json\"\n");
        let settings = auth_settings(&config(&text));
        let jwt = settings.jwt.expect("jwt");
        assert_eq!(jwt.audiences, Audiences::PerEndpoint { public_url: "https://gw.example.com".into() });
        assert_eq!(jwt.jwks, JwksSource::File("k.json".into()));
        assert_eq!(jwt.principal_prefix, "https://as.example.com#", "qualified by the issuer by default");
        assert!(!settings.anonymous);
        assert_eq!(settings.public_url, "https://gw.example.com");
        let explicit = format!("{text}audiences = [\"api://gw\"]\nprincipal_prefix = \"sso:\"\n");
        let jwt = auth_settings(&config(&explicit)).jwt.expect("jwt");
        assert_eq!(
            (jwt.audiences, jwt.principal_prefix.as_str()),
            (Audiences::Everywhere(vec!["api://gw".into()]), "sso:")
        );
    }

    #[test]
    fn the_configuration_and_the_front_call_agents_without_credentials_alike() {
        assert_eq!(crate::config::ANONYMOUS, Principal::ANONYMOUS);
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
