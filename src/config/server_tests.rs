//! Unit tests of the `[server]` section: the file's keys and their `SWITCHYARD_*` overrides, parsed alike.

use super::*;

fn server(listen: &str, origins: &[&str], hosts: &[&str]) -> ServerConfig {
    ServerConfig {
        listen: listen.parse().expect("address"),
        allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        ..ServerConfig::default()
    }
}

#[test]
fn loopback_listen_addresses_are_recognised() {
    assert!(server("[::1]:8808", &[], &[]).binds_loopback());
}

#[test]
fn patterns_are_validated_and_lowercased() {
    assert_eq!(parse_origin_pattern("HTTPS://A.Example"), Ok("https://a.example".to_owned()));
    assert_eq!(parse_origin_pattern("*"), Ok("*".to_owned()));
    assert!(parse_origin_pattern("https://a.example/").is_err());
    assert!(parse_origin_pattern("https://").is_err());
    assert!(parse_origin_pattern("ws://a.example").is_err());
    assert_eq!(parse_host_pattern("GW.Internal:8808"), Ok("gw.internal:8808".to_owned()));
    assert!(parse_host_pattern("a b").is_err());
    assert!(parse_host_pattern("user@host").is_err());
}

/// What `read` finds in the `[server]` section the file `text` and the environment `env` give, or the error.
fn loaded<T>(text: &str, env: &[(&str, &str)], read: impl Fn(&ServerConfig) -> T) -> Result<T, String> {
    let config = crate::config::Config::from_toml_str(text, "t.toml", env.iter().copied());
    config.map(|config| read(&config.server)).map_err(|error| error.to_string())
}

fn per_principal(text: &str, env: &[(&str, &str)]) -> Result<usize, String> {
    loaded(text, env, |server| server.max_backend_sessions_per_principal)
}

#[test]
fn the_session_table_size_is_a_bounded_count() {
    let size = |text: &str, env: &[(&str, &str)]| loaded(text, env, |server| server.max_backend_sessions);
    assert_eq!(size("", &[]), Ok(BACKEND_SESSION_TABLE_SIZE));
    assert_eq!(size("[server]\nmax_backend_sessions = 16384\n", &[]), Ok(16384));
    assert_eq!(size("", &[("SWITCHYARD_MAX_BACKEND_SESSIONS", "20000")]), Ok(20000));
    for bad in ["0", "-1", "1000001"] {
        let message = size(&format!("[server]\nmax_backend_sessions = {bad}\n"), &[]).expect_err(bad);
        assert!(message.starts_with(&format!("t.toml: server.max_backend_sessions = {bad}: expected")), "{message}");
    }
    let message = size("", &[("SWITCHYARD_MAX_BACKEND_SESSIONS", "lots")]).expect_err("text");
    assert!(message.contains("overrides server.max_backend_sessions"), "{message}");
}

#[test]
fn the_per_principal_cap_is_a_bounded_count() {
    assert_eq!(per_principal("", &[]), Ok(DEFAULT_MAX_SESSIONS_PER_OWNER));
    assert_eq!(per_principal("[server]\nmax_backend_sessions_per_principal = 16\n", &[]), Ok(16));
    let overridden = [("SWITCHYARD_MAX_BACKEND_SESSIONS_PER_PRINCIPAL", " 32 ")];
    assert_eq!(per_principal("[server]\nmax_backend_sessions_per_principal = 16\n", &overridden), Ok(32));
    for bad in ["0", "-1", "1000001"] {
        let text = format!("[server]\nmax_backend_sessions_per_principal = {bad}\n");
        let message = per_principal(&text, &[]).expect_err(bad);
        let named = format!("t.toml: server.max_backend_sessions_per_principal = {bad}: expected a whole number");
        assert!(message.starts_with(&named), "{message}");
    }
    let message = per_principal("[server]\nmax_backend_sessions_per_principal = \"8\"\n", &[]).expect_err("text");
    assert!(message.contains("server.max_backend_sessions_per_principal: invalid type"), "{message}");
    for bad in ["many", "0", "1000001"] {
        let message = per_principal("", &[("SWITCHYARD_MAX_BACKEND_SESSIONS_PER_PRINCIPAL", bad)]).expect_err(bad);
        assert!(message.contains("overrides server.max_backend_sessions_per_principal"), "{message}");
        assert!(message.contains("from 1 to 1000000"), "{message}");
    }
}

#[test]
fn the_per_principal_connection_cap_defaults_to_a_quarter_of_max_connections() {
    let server = |text: &str, env: &[(&str, &str)]| {
        loaded(text, env, |server| (server.connections_per_principal(), server.max_streams_per_session))
    };
    assert_eq!(server("", &[]), Ok((DEFAULT_MAX_CONNECTIONS / 4, DEFAULT_MAX_STREAMS_PER_SESSION)));
    assert_eq!(server("[server]\nmax_connections = 100\n", &[]), Ok((25, 4)), "follows max_connections");
    assert_eq!(server("[server]\nmax_connections = 3\n", &[]), Ok((1, 4)), "never zero");
    assert_eq!(server("", &[("SWITCHYARD_MAX_CONNECTIONS", "40")]), Ok((10, 4)), "and its override");
    let set = "[server]\nmax_connections_per_principal = 7\nmax_streams_per_session = 2\n";
    assert_eq!(server(set, &[]), Ok((7, 2)));
    let overridden = [("SWITCHYARD_MAX_CONNECTIONS_PER_PRINCIPAL", "9"), ("SWITCHYARD_MAX_STREAMS_PER_SESSION", "1")];
    assert_eq!(server(set, &overridden), Ok((9, 1)));
    for (line, expected) in [
        ("max_connections_per_principal = 0", "from 1 to 1000000 connections"),
        ("max_streams_per_session = 0", "from 1 to 1000 streams"),
        ("max_streams_per_session = 1001", "from 1 to 1000 streams"),
    ] {
        let message = server(&format!("[server]\n{line}\n"), &[]).expect_err(line);
        assert!(message.starts_with(&format!("t.toml: server.{line}: expected")), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    let message = server("", &[("SWITCHYARD_MAX_STREAMS_PER_SESSION", "many")]).expect_err("text");
    assert!(message.contains("overrides server.max_streams_per_session"), "{message}");
}

#[test]
fn cors_credentials_is_off_unless_configured() {
    let credentials = |text: &str, env: &[(&str, &str)]| loaded(text, env, |server| server.cors_credentials);
    assert_eq!(credentials("", &[]), Ok(false));
    assert_eq!(credentials("[server]\ncors_credentials = true\n", &[]), Ok(true));
    assert_eq!(
        credentials("[server]\ncors_credentials = true\n", &[("SWITCHYARD_CORS_CREDENTIALS", "False")]),
        Ok(false)
    );
    let message = credentials("[server]\ncors_credentials = \"yes\"\n", &[]).expect_err("a string");
    assert!(message.contains("server.cors_credentials: invalid type"), "{message}");
    let message = credentials("", &[("SWITCHYARD_CORS_CREDENTIALS", "yes")]).expect_err("not a boolean");
    assert!(message.contains("overrides server.cors_credentials"), "{message}");
    assert!(message.contains("\"true\" or \"false\""), "{message}");
}

#[test]
fn tls_files_come_in_pairs_from_the_file_and_the_environment() {
    let tls = |text: &str, env: &[(&str, &str)]| loaded(text, env, |server| server.tls.clone());
    let pair = |cert: &str, key: &str| Some(TlsFiles { cert: cert.into(), key: key.into() });
    assert_eq!(tls("", &[]), Ok(None));
    let both = "[server]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n";
    assert_eq!(tls(both, &[]), Ok(pair("c.pem", "k.pem")));
    assert_eq!(tls(both, &[("SWITCHYARD_TLS_KEY", "/k2.pem")]), Ok(pair("c.pem", "/k2.pem")), "one file replaced");
    let env = [("SWITCHYARD_TLS_CERT", "/c.pem"), ("SWITCHYARD_TLS_KEY", "/k.pem")];
    assert_eq!(tls("", &env), Ok(pair("/c.pem", "/k.pem")));
    let message = tls("[server]\ntls_cert = \"c.pem\"\n", &[]).expect_err("no key");
    assert!(message.starts_with("t.toml: server.tls_key: expected the private key of `tls_cert`"), "{message}");
    let message = tls("[server]\ntls_key = \"k.pem\"\n", &[]).expect_err("no certificate");
    assert!(message.starts_with("t.toml: server.tls_cert: expected the certificate chain"), "{message}");
    let message = tls("", &[("SWITCHYARD_TLS_CERT", "/c.pem")]).expect_err("half from the environment");
    assert!(
        message.contains(
            "SWITCHYARD_TLS_CERT = \"/c.pem\" (overrides server.tls_cert): expected to be set with SWITCHYARD_TLS_KEY"
        ),
        "{message}"
    );
    let scheme = |text: &str| loaded(text, &[], |server| server.public_url());
    assert_eq!(scheme(both), Ok("https://127.0.0.1:8808".to_owned()));
}

#[test]
fn metrics_tls_needs_its_listener_and_the_certificate() {
    let metrics_tls = |text: &str| {
        crate::config::Config::from_toml_str(text, "t.toml", Vec::<(String, String)>::new())
            .map(|config| config.telemetry.metrics_tls)
            .map_err(|error| error.to_string())
    };
    let tls = "[server]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n";
    let listen = "[telemetry]\nmetrics_listen = \"127.0.0.1:9464\"\n";
    assert_eq!(metrics_tls(&format!("{tls}{listen}metrics_tls = true\n")), Ok(true));
    let message = metrics_tls(&format!("{tls}[telemetry]\nmetrics_tls = true\n")).expect_err("no listener");
    assert!(message.starts_with("t.toml: telemetry.metrics_tls = true: expected `metrics_listen`"), "{message}");
    let message = metrics_tls(&format!("{listen}metrics_tls = true\n")).expect_err("no certificate");
    assert!(message.contains("expected `[server] tls_cert` and `tls_key`"), "{message}");
}

#[test]
fn comma_lists_skip_blank_items() {
    assert_eq!(parse_comma_list(" a, ,b ,", parse_host_pattern), Ok(vec!["a".to_owned(), "b".to_owned()]));
}
