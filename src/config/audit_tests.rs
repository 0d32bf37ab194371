//! Tests of the `[audit]` section's rules.

use super::*;
use crate::config::Config;

fn load(text: &str) -> Result<Option<AuditConfig>, String> {
    Config::from_toml_str(text, "t.toml", Vec::<(String, String)>::new())
        .map(|config| config.audit)
        .map_err(|e| e.to_string())
}

#[test]
fn no_section_means_no_audit_trail() {
    assert_eq!(load("").expect("valid"), None);
}

#[test]
fn a_file_sink_takes_its_defaults() {
    let audit = load("[audit]\nfile = \"/var/log/audit.jsonl\"\n").expect("valid").expect("on");
    let file = audit.file.expect("file");
    assert_eq!((file.max_size, file.keep), (DEFAULT_AUDIT_MAX_SIZE, DEFAULT_AUDIT_KEEP));
    assert_eq!(audit.arguments, AuditArguments::Digest);
    assert!(!audit.otlp);
    assert_eq!(audit.redact.len(), DEFAULT_REDACT.len());
}

#[test]
fn every_key_is_read() {
    let text = "[audit]\nfile = \"a.jsonl\"\nmax_size = \"1MiB\"\nkeep = 3\narguments = \"redacted\"\n\
                redact = [\"*PIN*\"]\n";
    let audit = load(text).expect("valid").expect("on");
    let file = audit.file.expect("file");
    assert_eq!((file.path.to_str(), file.max_size, file.keep), (Some("a.jsonl"), 1 << 20, 3));
    assert_eq!(audit.arguments, AuditArguments::Redacted);
    assert!(audit.redact[0].matches("user_pin"), "globs are lowercased");
}

#[test]
fn bad_values_are_refused_naming_the_key() {
    for (text, key) in [
        ("[audit]\n", "audit.file"),
        ("[audit]\nkeep = 2\notlp = false\n", "audit.file"),
        ("[audit]\nfile = \"a\"\nmax_size = 10\n", "audit.max_size"),
        ("[audit]\nfile = \"a\"\nkeep = 0\n", "audit.keep"),
        ("[audit]\nfile = \"a\"\narguments = \"some\"\n", "audit.arguments"),
        ("[audit]\nfile = \"a\"\nredact = [\"x\"]\n", "audit.redact"),
        ("[audit]\nfile = \"a\"\narguments = \"redacted\"\nredact = [\"\"]\n", "audit.redact[0]"),
        ("[audit]\notlp = true\n", "audit.otlp"),
    ] {
        let error = load(text).expect_err(text);
        assert!(error.contains(key), "{text}: {error}");
    }
}

#[test]
fn otlp_uses_the_telemetry_endpoint() {
    let text = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n[audit]\notlp = true\n";
    let audit = load(text).expect("valid").expect("on");
    assert!(audit.otlp && audit.file.is_none());
}
