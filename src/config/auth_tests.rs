//! Tests of the `[auth]` and `[[policies]]` sections: API keys, JWT settings, anonymous serving and their errors.

use super::super::Config;
use super::super::error::ConfigError;
use super::super::policy::PolicySubject;
use super::*;

const FILE: &str = "test.toml";
const DIGEST: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const JWT: &str = "[auth.jwt]\nissuer = \"https://login.example.com/realms/a\"\n\
                   jwks_url = \"https://login.example.com/certs\"\n";

fn parse_with_env(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, FILE, env.iter().copied())
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_with_env(text, &[])
}

fn error_naming(text: &str, expected: &str) {
    let message = parse(text).expect_err("refused").to_string();
    assert!(message.starts_with(FILE) && message.contains(expected), "{message}\n(expected {expected:?})");
}

#[test]
fn the_example_documents_every_auth_key() {
    let config = super::super::tests::parse_example();
    assert_eq!(config.auth.anonymous, AnonymousAgents::Refused);
    assert_eq!(config.auth.api_keys[0].groups, ["automation"]);
    assert_eq!(config.auth.api_keys[0].expires, Some(1_893_456_000), "2030-01-01T00:00:00Z");
    assert_eq!(config.auth.admin_principals, [PolicySubject::Principal("sso:alice@example.com".into())]);
    let jwt = config.auth.jwt.as_ref().expect("jwt");
    assert_eq!(jwt.principal_prefix, "sso:");
    assert_eq!((jwt.groups_claim.as_deref(), jwt.leeway), (Some("groups"), DEFAULT_JWT_LEEWAY));
    assert_eq!(config.policies.len(), 2);
    assert_eq!(config.policies[1].principals[0], PolicySubject::Group("automation".into()));
    assert!(config.check_serving().is_ok());
    let unknown: Vec<String> =
        config.principal_notes().into_iter().filter(|note| note.contains("no principal")).collect();
    assert!(unknown.is_empty(), "the example names only principals agents can be: {unknown:?}");
}

#[test]
fn without_auth_agents_are_anonymous_on_loopback() {
    let config = parse("").expect("valid");
    assert_eq!(config.auth, AuthConfig::default());
    assert_eq!(config.auth.anonymous, AnonymousAgents::LoopbackOnly);
    assert!(config.auth.serves_anonymous() && !config.auth.has_credentials());
    assert!(config.policies.is_empty());
    assert_eq!(config.server.public_url(), "http://127.0.0.1:8808");
}

#[test]
fn every_auth_key_is_read() {
    let config = parse(&format!(
        "[auth]\nanonymous = true\n[[auth.api_keys]]\nprincipal = \"alice@example.com\"\nsha256 = \"{}\"\n\
         groups = [\"ops\"]\n[auth.jwt]\nissuer = \"https://login.example.com/\"\naudiences = [\"api://gw\"]\n\
         jwks_file = \"/etc/sy/jwks.json\"\nprincipal_claim = \"email\"\ngroups_claim = \"realm_access.roles\"\n\
         scopes_supported = [\"mcp:tools\", \"mcp:admin\"]\nrequired_scopes = [\"mcp:tools\"]\n\
         authorization_servers = [\"https://as.example.com\"]\nleeway = \"5s\"\n",
        DIGEST.to_uppercase()
    ))
    .expect("valid");
    let auth = &config.auth;
    assert_eq!(auth.anonymous, AnonymousAgents::Allowed);
    assert_eq!(auth.api_keys[0].principal, "alice@example.com");
    assert_eq!(auth.api_keys[0].sha256[..2], [0xe3, 0xb0]);
    assert_eq!(auth.api_keys[0].groups, ["ops"]);
    let jwt = auth.jwt.as_ref().expect("jwt");
    assert_eq!(jwt.issuer, "https://login.example.com/", "kept as written");
    assert_eq!(jwt.audiences, ["api://gw"]);
    assert_eq!(jwt.jwks, JwksLocation::File(PathBuf::from("/etc/sy/jwks.json")));
    assert_eq!((jwt.principal_claim.as_str(), jwt.groups_claim.as_deref()), ("email", Some("realm_access.roles")));
    assert_eq!(jwt.scopes_supported, ["mcp:tools", "mcp:admin"]);
    assert_eq!(jwt.required_scopes, ["mcp:tools"]);
    assert_eq!(jwt.authorization_servers, ["https://as.example.com"]);
    assert_eq!(jwt.leeway, Duration::from_secs(5));
}

#[test]
fn a_key_expires_at_an_rfc_3339_time() {
    let key = |expires: &str| {
        format!("[auth]\n[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{DIGEST}\"\nexpires = \"{expires}\"\n")
    };
    let expiry = |expires: &str| parse(&key(expires)).expect("valid").auth.api_keys[0].expires;
    assert_eq!(expiry("2027-03-01T00:00:00Z"), Some(1_803_859_200));
    assert_eq!(expiry("2027-03-01T01:30:00+01:30"), Some(1_803_859_200), "an offset is east of UTC");
    assert_eq!(expiry("2027-02-28T22:00:00.999-02:00"), Some(1_803_859_200), "a fraction is dropped");
    for bad in ["2027-03-01", "2027-02-29T00:00:00Z", "2027-03-01T24:00:00Z", "2027-03-01T00:00:00", "tomorrow"] {
        error_naming(&key(bad), "auth.api_keys[0].expires");
    }
}

#[test]
fn admin_principals_are_names_and_groups_never_everyone() {
    let keyed = format!("[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{DIGEST}\"\n");
    let config = parse(&format!("[auth]\nadmin_principals = [\"alice\", \"group:ops\"]\n{keyed}")).expect("valid");
    let expected = [PolicySubject::Principal("alice".into()), PolicySubject::Group("ops".into())];
    assert_eq!(config.auth.admin_principals, expected);
    assert!(parse(&keyed).expect("valid").auth.admin_principals.is_empty(), "default: nobody listed");
    let refused = |entry: &str| format!("[auth]\nadmin_principals = [\"ok\", {entry:?}]\n{keyed}");
    for entry in ["*", "anonymous", "group:", ""] {
        error_naming(&refused(entry), &format!("auth.admin_principals[1] = {entry:?}: expected a principal name"));
    }
    error_naming(&format!("[auth]\nadmin_principals = \"alice\"\n{keyed}"), "auth.admin_principals: invalid type");
}

#[test]
fn console_loopback_is_an_opt_in_flag() {
    let keyed = format!("[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{DIGEST}\"\n");
    assert!(!parse(&format!("[auth]\n{keyed}")).expect("valid").auth.console_loopback, "default false");
    assert!(!parse("").expect("valid").auth.console_loopback, "no [auth] section");
    let opted = parse(&format!("[auth]\nconsole_loopback = true\n{keyed}")).expect("valid");
    assert!(opted.auth.console_loopback);
    error_naming(&format!("[auth]\nconsole_loopback = \"yes\"\n{keyed}"), "auth.console_loopback: invalid type");
    error_naming(&format!("[auth]\nconsole_loopbak = true\n{keyed}"), "unknown key auth.console_loopbak");
}

#[test]
fn jwt_defaults_apply() {
    let config = parse(JWT).expect("valid");
    assert_eq!(config.auth.anonymous, AnonymousAgents::Refused);
    let jwt = config.auth.jwt.expect("jwt");
    assert!(jwt.audiences.is_empty(), "worked out from public_url when assembled");
    assert_eq!(jwt.principal_claim, "sub");
    assert_eq!(jwt.groups_claim, None);
    assert_eq!(jwt.authorization_servers, ["https://login.example.com/realms/a"]);
    assert_eq!(jwt.leeway, DEFAULT_JWT_LEEWAY);
    let loopback = parse("[auth.jwt]\nissuer = \"http://127.0.0.1:9/\"\njwks_url = \"http://127.0.0.1:9/jwks\"\n");
    assert!(loopback.is_ok(), "plain http is fine on loopback");
}

#[test]
fn bad_auth_values_are_named() {
    let key = |principal: &str, sha: &str| format!("[[auth.api_keys]]\nprincipal = {principal:?}\nsha256 = {sha:?}\n");
    error_naming("[auth]\n", "test.toml: auth: expected at least one of `[[auth.api_keys]]`");
    error_naming("[auth]\nanonymous = \"yes\"\n", "auth.anonymous: invalid type");
    error_naming(&key("a", "abc"), "auth.api_keys[0].sha256 = \"abc\": expected the SHA-256 digest");
    error_naming(&key("a", &"g".repeat(64)), "auth.api_keys[0].sha256");
    error_naming(&key("", DIGEST), "auth.api_keys[0].principal = \"\": expected a name");
    error_naming("[[auth.api_keys]]\nsha256 = \"x\"\n", "auth.api_keys[0].principal: expected a name");
    error_naming(&format!("{}groups = [\"\"]\n", key("a", DIGEST)), "auth.api_keys[0].groups[0] = \"\"");
    error_naming(&format!("{}{}", key("a", DIGEST), key("b", DIGEST)), "auth.api_keys[1].sha256: expected the digest");
    error_naming(&format!("{}key = \"sy_x\"\n", key("a", DIGEST)), "unknown key auth.api_keys[0].key");
    error_naming("[auth.jwt]\njwks_url = \"https://a/\"\n", "auth.jwt.issuer: expected an http or https URL");
    error_naming("[auth.jwt]\nissuer = \"login\"\njwks_url = \"https://a/\"\n", "auth.jwt.issuer = \"login\"");
    error_naming("[auth.jwt]\nissuer = \"https://a\"\n", "auth.jwt.jwks_url: expected the issuer's JWKS URL");
    error_naming(&format!("{JWT}jwks_file = \"k.json\"\n"), "auth.jwt.jwks_file = \"k.json\": expected either");
    error_naming(
        "[auth.jwt]\nissuer = \"https://a\"\njwks_url = \"http://idp.example.com/certs\"\n",
        "auth.jwt.jwks_url = \"http://idp.example.com/certs\": expected an https URL",
    );
    error_naming(&format!("{JWT}audiences = []\n"), "auth.jwt.audiences = []: expected at least one audience");
    error_naming(&format!("{JWT}authorization_servers = []\n"), "auth.jwt.authorization_servers = []");
    error_naming(&format!("{JWT}authorization_servers = [\"x\"]\n"), "auth.jwt.authorization_servers[0] = \"x\"");
    error_naming(&format!("{JWT}required_scopes = [\"a b\"]\n"), "auth.jwt.required_scopes[0] = \"a b\"");
    error_naming(&format!("{JWT}leeway = \"1h\"\n"), "auth.jwt.leeway = \"1h\": expected a duration");
    error_naming(&format!("{JWT}leeway = 60\n"), "auth.jwt.leeway: invalid type: integer `60`");
    error_naming(&format!("{JWT}principal_claim = \"\"\n"), "auth.jwt.principal_claim = \"\"");
    error_naming(&format!("{JWT}audience = \"x\"\n"), "unknown key auth.jwt.audience");
}

#[test]
fn policies_are_read_and_checked_against_backends() {
    let backends = "[[backends]]\nname = \"github\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
    let config = parse(&format!(
        "{backends}[[policies]]\nprincipals = [\"alice\", \"group:ops\", \"*\"]\nallow = [\"github__*\"]\n\
         deny = [\"*delete*\"]\nbackends = [\"github\"]\n[[policies]]\nprincipals = [\"bob\"]\nbackends = [\"*\"]\n"
    ))
    .expect("valid");
    let policy = &config.policies[0];
    assert_eq!(
        policy.principals,
        [PolicySubject::Principal("alice".into()), PolicySubject::Group("ops".into()), PolicySubject::Anyone]
    );
    assert!(policy.allow[0].matches("github__get") && policy.deny[0].matches("github__delete_repo"));
    assert_eq!(policy.backends, ["github"]);
    assert_eq!(config.policies[1].backends, ["*"]);
    for (body, expected) in [
        ("allow = [\"x\"]", "policies[0].principals: expected a list of principals"),
        ("principals = [\"group:\"]\nallow = [\"x\"]", "policies[0].principals[0] = \"group:\": expected"),
        ("principals = [\"\"]\nallow = [\"x\"]", "policies[0].principals[0] = \"\""),
        ("principals = [\"a\"]\nallow = [\"\"]", "policies[0].allow[0] = \"\": expected a non-empty glob"),
        (
            "principals = [\"a\"]\nbackends = [\"gh\"]",
            "policies[0].backends[0] = \"gh\": expected the name of a configured backend (\"github\")",
        ),
        ("principals = [\"a\"]", "policies[0]: expected a policy with at least one of"),
        ("principals = [\"a\"]\nallow = [\"x\"]\ntools = [\"y\"]", "unknown key policies[0].tools"),
    ] {
        error_naming(&format!("{backends}[[policies]]\n{body}\n"), expected);
    }
}

#[test]
fn public_url_is_canonical_and_overridable() {
    let config = parse("[server]\npublic_url = \"HTTPS://GW.Example.com/\"\n").expect("valid");
    assert_eq!(config.server.public_url(), "https://gw.example.com");
    let prefixed = parse("server.public_url = \"https://host.example.com/switchyard/\"\n").expect("valid");
    assert_eq!(prefixed.server.public_url(), "https://host.example.com/switchyard");
    let env = parse_with_env("", &[("SWITCHYARD_PUBLIC_URL", "https://env.example.com")]).expect("valid");
    assert_eq!(env.server.public_url(), "https://env.example.com");
    let listen = parse_with_env("", &[("SWITCHYARD_LISTEN", "[::1]:9")]).expect("valid");
    assert_eq!(listen.server.public_url(), "http://[::1]:9");
    for bad in ["gw.example.com", "ftp://gw", "https://u:p@gw", "https://gw/?q=1", "https://gw/#x"] {
        error_naming(&format!("server.public_url = {bad:?}\n"), "server.public_url");
    }
    let message = parse_with_env("", &[("SWITCHYARD_PUBLIC_URL", "nope")]).expect_err("bad").to_string();
    assert!(message.contains("(overrides server.public_url)"), "{message}");
}

#[test]
fn serving_beyond_loopback_needs_authentication_or_an_explicit_anonymous() {
    let exposed = [("SWITCHYARD_LISTEN", "0.0.0.0:8808")];
    let message = parse_with_env("", &exposed).expect("loads").check_serving().expect_err("refused").to_string();
    assert!(message.contains("refusing to serve on 0.0.0.0:8808") && message.contains("anonymous = true"), "{message}");
    let lan = parse_with_env("", &[("SWITCHYARD_LISTEN", "192.0.2.7:1")]).expect("loads");
    assert!(matches!(lan.check_serving(), Err(ConfigError::Unprotected { .. })));
    assert!(parse("").expect("loads").check_serving().is_ok(), "loopback needs nothing");
    assert!(parse_with_env("[auth]\nanonymous = true\n", &exposed).expect("loads").check_serving().is_ok());
    let keyed = format!("[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{DIGEST}\"\n");
    assert!(parse_with_env(&keyed, &exposed).expect("loads").check_serving().is_ok());
}

#[test]
fn a_jwt_gateway_on_a_wildcard_address_needs_its_public_url() {
    let exposed = [("SWITCHYARD_LISTEN", "0.0.0.0:8808")];
    let message = parse_with_env(JWT, &exposed).expect("loads").check_serving().expect_err("refused").to_string();
    assert!(message.starts_with("`server.public_url` (or SWITCHYARD_PUBLIC_URL) is required"), "{message}");
    let with_url = [exposed[0], ("SWITCHYARD_PUBLIC_URL", "https://gw.example.com")];
    assert!(parse_with_env(JWT, &with_url).expect("loads").check_serving().is_ok());
}

#[test]
fn jwt_principals_are_qualified_by_the_issuer_unless_a_prefix_is_configured() {
    let jwt = parse(JWT).expect("valid").auth.jwt.expect("jwt");
    assert_eq!(jwt.principal_prefix, "https://login.example.com/realms/a#");
    assert!(jwt.names_principal("https://login.example.com/realms/a#alice"));
    assert!(!jwt.names_principal("alice") && !jwt.names_principal("https://login.example.com/realms/a#"));
    let prefixed = parse(&format!("{JWT}principal_prefix = \"sso:\"\n")).expect("valid").auth.jwt.expect("jwt");
    assert_eq!(prefixed.principal_prefix, "sso:");
    let bare = parse(&format!("{JWT}principal_prefix = \"\"\n")).expect("valid").auth.jwt.expect("jwt");
    assert!(bare.principal_prefix.is_empty() && bare.names_principal("alice"));
    for bad in ["\"group:sso:\"", "\"a\\u0007\""] {
        error_naming(&format!("{JWT}principal_prefix = {bad}\n"), "auth.jwt.principal_prefix = ");
    }
    error_naming(&format!("{JWT}principal_prefix = 1\n"), "auth.jwt.principal_prefix: invalid type");
}

#[test]
fn api_key_principals_never_share_a_name_with_anonymous_or_a_jwt() {
    let key = |principal: &str| format!("[[auth.api_keys]]\nprincipal = {principal:?}\nsha256 = \"{DIGEST}\"\n");
    error_naming(&key("anonymous"), "auth.api_keys[0].principal = \"anonymous\": expected a name other than");
    let issuer_form = format!("{JWT}{}", key("https://login.example.com/realms/a#alice"));
    error_naming(
        &issuer_form,
        "auth.api_keys[0].principal = \"https://login.example.com/realms/a#alice\": expected a name that does not start with \"https://login.example.com/realms/a#\"",
    );
    error_naming(
        &format!("{JWT}principal_prefix = \"sso:\"\n{}", key("sso:bob")),
        "auth.api_keys[0].principal = \"sso:bob\"",
    );
    let bare = format!("{JWT}principal_prefix = \"\"\n{}", key("alice"));
    error_naming(
        &bare,
        "auth.jwt.principal_prefix = \"\": expected a non-empty prefix such as \"sso:\" while `[[auth.api_keys]]`",
    );
    let fine = parse(&format!("{JWT}principal_prefix = \"sso:\"\n{}", key("alice"))).expect("valid");
    assert_eq!(fine.auth.api_keys[0].principal, "alice");
    assert!(parse(&key("https://login.example.com/realms/a#alice")).is_ok(), "without [auth.jwt] no form is taken");
}

const PER_PRINCIPAL: &str = "[[backends]]\nname = \"docs\"\nurl = \"https://docs.example.com/mcp\"\n\
                             oauth = { grant = \"authorization_code\" }\n";

#[test]
fn authorization_code_backends_need_agents_with_credentials_once_auth_is_configured() {
    let message = parse(&format!("{PER_PRINCIPAL}[auth]\nanonymous = true\n")).expect_err("refused").to_string();
    assert!(
        message.contains("backends[0].oauth.grant = \"authorization_code\": expected \"client_credentials\", or credentials for the agents"),
        "{message}"
    );
    assert!(message.contains("refused to `anonymous`"), "{message}");
    let single_user = parse(PER_PRINCIPAL).expect("no [auth]: the one user on loopback is `anonymous`");
    assert_eq!(
        single_user.principal_notes(),
        ["backend `docs` authorizes each principal (`authorization_code`): without `[auth]` every agent is \
          `anonymous` (loopback only): they share one authorization of it"]
    );
    let keyed = format!(
        "{PER_PRINCIPAL}[auth]\nanonymous = true\n[[auth.api_keys]]\nprincipal = \"a\"\nsha256 = \"{DIGEST}\"\n"
    );
    let notes = parse(&keyed).expect("valid").principal_notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("it is refused to agents without credentials (`anonymous`)"), "{notes:?}");
    let machine = PER_PRINCIPAL.replace("authorization_code\" }", "client_credentials\", client_id = \"c\" }");
    assert!(parse(&format!("{machine}[auth]\nanonymous = true\n")).expect("valid").principal_notes().is_empty());
}

#[test]
fn check_names_policy_and_admin_entries_no_agent_can_be() {
    let text = format!(
        "[auth]\nadmin_principals = [\"alice\"]\n{JWT}[[auth.api_keys]]\nprincipal = \"bot\"\nsha256 = \"{DIGEST}\"\n\
         [[policies]]\nprincipals = [\"bot\", \"alice\", \"https://login.example.com/realms/a#alice\", \"group:x\", \"*\", \
         \"anonymous\"]\nallow = [\"*\"]\n"
    );
    let notes = parse(&text).expect("valid").principal_notes();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes[0].starts_with("policies[0].principals: \"alice\" is no principal an agent can be"), "{notes:?}");
    assert!(notes[0].contains("JWT principals are named \"https://login.example.com/realms/a#\" + the `sub` claim"));
    assert!(notes[1].starts_with("policies[0].principals: \"anonymous\""), "anonymous agents are refused: {notes:?}");
    assert!(notes[2].starts_with("auth.admin_principals: \"alice\""), "{notes:?}");
}

#[test]
fn token_exchange_backends_need_jwt_agents() {
    let exchange = "[[backends]]\nname = \"docs\"\nurl = \"https://docs.example.com/mcp\"\n\
                    oauth = { grant = \"token_exchange\", client_id = \"gw\", authorization_server = \"https://as.example\" }\n";
    let message = parse(exchange).expect_err("refused").to_string();
    assert!(
        message.contains("backends[0].oauth.grant = \"token_exchange\": expected `[auth.jwt]` beside it"),
        "{message}"
    );
    assert!(parse(&format!("{exchange}{JWT}")).is_ok());
}
