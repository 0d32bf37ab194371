//! Tests of credential values: literals, environment variables, files, and their limits and errors.

use super::*;

fn raw(header: &str, env: Option<&str>, file: Option<&str>, prefix: Option<&str>) -> RawCredential {
    RawCredential {
        header: Some(header.to_owned()),
        scheme: None,
        env: env.map(str::to_owned),
        file: file.map(str::to_owned),
        prefix: prefix.map(str::to_owned),
    }
}

fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn key() -> KeyPath {
    KeyPath::root().key("backends").index(0).key("credential")
}

#[test]
fn env_credentials_get_the_prefix_and_stay_hidden() {
    let env = env_of(&[("TOKEN", "s3cret\n")]);
    let credential =
        resolve(&key(), "gh", &raw("Authorization", Some("TOKEN"), None, Some("Bearer ")), &env).expect("resolves");
    assert_eq!(credential.header(), Some(&http::header::AUTHORIZATION));
    assert_eq!(credential.value.expose(), "Bearer s3cret");
    assert!(credential.value.expose().is_sensitive());
    assert_eq!(credential.source, CredentialSource::Env("TOKEN".into()));
    let debug = format!("{credential:?}");
    assert!(debug.contains("<redacted>"));
    assert!(!debug.contains("s3cret"));
}

#[test]
fn unset_and_empty_variables_name_backend_and_key() {
    let unset = resolve(&key(), "gh", &raw("Authorization", Some("NOPE"), None, None), &env_of(&[]))
        .expect_err("unset")
        .in_file("f.toml")
        .to_string();
    assert_eq!(
        unset,
        "f.toml: backends[0].credential.env: credential of backend `gh`: environment variable NOPE is not set"
    );
    let empty = resolve(&key(), "gh", &raw("Authorization", Some("E"), None, None), &env_of(&[("E", " ")]))
        .expect_err("empty")
        .in_file("f.toml")
        .to_string();
    assert!(empty.ends_with("environment variable E is empty"), "{empty}");
}

#[test]
fn exactly_one_source_is_required() {
    let env = env_of(&[("T", "x")]);
    let both = resolve(&key(), "gh", &raw("Authorization", Some("T"), Some("/f"), None), &env)
        .expect_err("both")
        .in_file("f.toml")
        .to_string();
    assert!(both.starts_with("f.toml: backends[0].credential.file: expected exactly one of"), "{both}");
    let neither = resolve(&key(), "gh", &raw("Authorization", None, None, None), &env)
        .expect_err("neither")
        .in_file("f.toml")
        .to_string();
    assert!(neither.starts_with("f.toml: backends[0].credential.env: expected exactly one of"), "{neither}");
}

#[test]
fn bad_variable_names_and_headers_are_refused() {
    let env = env_of(&[]);
    let bad_var = resolve(&key(), "gh", &raw("Authorization", Some("A=B"), None, None), &env)
        .expect_err("bad name")
        .in_file("f.toml")
        .to_string();
    assert!(bad_var.starts_with("f.toml: backends[0].credential.env = \"A=B\": expected"), "{bad_var}");
    let bad_header = resolve(&key(), "gh", &raw("Bad Header", Some("T"), None, None), &env)
        .expect_err("bad header")
        .in_file("f.toml")
        .to_string();
    assert!(bad_header.starts_with("f.toml: backends[0].credential.header = \"Bad Header\""), "{bad_header}");
    let missing_header = RawCredential { header: None, ..raw("x", Some("T"), None, None) };
    let missing =
        resolve(&key(), "gh", &missing_header, &env).expect_err("missing header").in_file("f.toml").to_string();
    assert!(missing.starts_with("f.toml: backends[0].credential.header: expected"), "{missing}");
}

#[test]
fn values_that_are_not_header_values_are_refused_without_echoing_them() {
    let env = env_of(&[("T", "line1\u{7}line2")]);
    let message = resolve(&key(), "gh", &raw("Authorization", Some("T"), None, None), &env)
        .expect_err("control character")
        .in_file("f.toml")
        .to_string();
    assert!(message.contains("backends[0].credential.env"), "{message}");
    assert!(message.contains("backend `gh`"), "{message}");
    assert!(!message.contains("line1"), "{message}");
}

#[test]
fn bad_prefixes_are_refused() {
    let env = env_of(&[("T", "x")]);
    let message = resolve(&key(), "gh", &raw("Authorization", Some("T"), None, Some("Bearer\n")), &env)
        .expect_err("bad prefix")
        .in_file("f.toml")
        .to_string();
    assert!(message.starts_with("f.toml: backends[0].credential.prefix = \"Bearer\\n\": expected"), "{message}");
}

#[test]
fn files_are_read_trimmed_and_bounded() {
    let dir = crate::config::tests::scratch_dir("credential-files");
    let good = dir.join("token");
    std::fs::write(&good, "abc\n").expect("write");
    let credential =
        resolve(&key(), "gh", &raw("X-Api-Key", None, good.to_str(), None), &env_of(&[])).expect("resolves");
    assert_eq!(credential.value.expose(), "abc");
    assert_eq!(credential.source, CredentialSource::File(good));

    let missing = dir.join("missing");
    let message = resolve(&key(), "gh", &raw("X-Api-Key", None, missing.to_str(), None), &env_of(&[]))
        .expect_err("missing file")
        .in_file("f.toml")
        .to_string();
    assert!(
        message.starts_with("f.toml: backends[0].credential.file: credential of backend `gh`: cannot read file"),
        "{message}"
    );

    let empty = dir.join("empty");
    std::fs::write(&empty, "\n").expect("write");
    let message = resolve(&key(), "gh", &raw("X-Api-Key", None, empty.to_str(), None), &env_of(&[]))
        .expect_err("empty file")
        .in_file("f.toml")
        .to_string();
    assert!(message.ends_with("is empty"), "{message}");

    let huge = dir.join("huge");
    std::fs::write(&huge, vec![b'a'; 70_000]).expect("write");
    let message = resolve(&key(), "gh", &raw("X-Api-Key", None, huge.to_str(), None), &env_of(&[]))
        .expect_err("huge file")
        .in_file("f.toml")
        .to_string();
    assert!(message.contains("larger than 65536 bytes"), "{message}");
}

#[test]
fn a_scheme_takes_the_place_of_header_and_prefix() {
    let env = env_of(&[("K", "k3y")]);
    let scheme = |name: &str, header: Option<&str>, prefix: Option<&str>| RawCredential {
        header: header.map(str::to_owned),
        scheme: Some(name.to_owned()),
        env: Some("K".into()),
        file: None,
        prefix: prefix.map(str::to_owned),
    };
    let credential = resolve(&key(), "pets", &scheme("api_key", None, None), &env).expect("resolves");
    assert_eq!(credential.target, CredentialTarget::Scheme("api_key".into()));
    assert_eq!(credential.header(), None);
    assert_eq!(credential.value.expose(), "k3y", "the bare secret: the scheme decides its form");
    let refused =
        |raw: RawCredential| resolve(&key(), "pets", &raw, &env).expect_err("refused").in_file("f.toml").to_string();
    let both = refused(scheme("api_key", Some("X-Key"), None));
    assert!(both.starts_with("f.toml: backends[0].credential.scheme: expected either `header` or `scheme`"), "{both}");
    let prefixed = refused(scheme("api_key", None, Some("Bearer ")));
    assert!(
        prefixed.starts_with("f.toml: backends[0].credential.prefix: expected no `prefix` with `scheme`"),
        "{prefixed}"
    );
    let bad = refused(scheme("api key", None, None));
    assert!(
        bad.starts_with("f.toml: backends[0].credential.scheme = \"api key\": expected the name of one of"),
        "{bad}"
    );
    assert!(refused(scheme("", None, None)).contains("credential.scheme = \"\""));
}
