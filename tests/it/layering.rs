//! The picture of `ARCHITECTURE.md`, checked on the source tree: agent → front → router → (ledger,
//! catalog) → backend client, each layer knowing only what it may know, and every source file saying what it owns
//! in a leading `//!` doc.
//!
//! Rules: the table [`RULES`] has one line per rule (the layer, what it must not import, why). A layer is a
//! top-level module of `src/` (`src/front/…` is `front`); an import is any `use` or path naming a crate module
//! (`crate::x`, `super::…` resolved) or an external crate. The binary (`main.rs` and its modules) is nobody's
//! dependency: its modules must not import items of `main.rs`. A layer `*` rule applies to every layer but the
//! one it forbids. `glob` is a leaf every layer may use; `ledger_url` is a leaf config and ledger share; `telemetry`
//! is a leaf (but for `mcp`) that the front, the router and the backend client report to; `swap` is a leaf for the
//! parts a reload replaces; `raw_json`, `civil_date`, `seal`, `sealed_box`, `secret`, `token_row`, `inline_wake`,
//! `hex` and `counted_ids` are leaves too. A failure names the file, the line, the path and the rule broken.

mod circles;
mod scan;

use std::fs;
use std::path::{Path, PathBuf};

use scan::{Named, expand, mask, named_paths};

/// What a layer must not import.
enum Forbidden {
    /// These top-level crate modules.
    Modules(&'static [&'static str]),
    /// Every top-level crate module except these.
    ModulesBut(&'static [&'static str]),
    /// These external crates (also when reached through another crate, e.g. `axum::http`).
    Crates(&'static [&'static str]),
}

struct Rule {
    layer: &'static str,
    forbidden: Forbidden,
    why: &'static str,
}

use Forbidden::{Crates, Modules, ModulesBut};

#[rustfmt::skip]
const RULES: &[Rule] = &[
    Rule { layer: "front",   forbidden: Modules(&["backend", "ledger", "catalog"]),         why: "the front knows HTTP, agent sessions, the router, auth and the MCP vocabulary" },
    Rule { layer: "router",  forbidden: Modules(&["front"]),                                why: "the router answers the front; it does not call it" },
    Rule { layer: "router",  forbidden: Crates(&["reqwest", "axum", "http", "hyper"]),      why: "the router knows tools and backends, not HTTP" },
    Rule { layer: "config",  forbidden: ModulesBut(&["config", "glob", "ledger_url", "secret", "civil_date"]), why: "configuration lowers to plain types and knows no part that consumes it" },
    Rule { layer: "ledger_url", forbidden: ModulesBut(&["ledger_url"]),                     why: "the ledger URL grammar is shared by config and ledger, so it depends on neither" },
    Rule { layer: "mcp",     forbidden: ModulesBut(&["mcp"]),                               why: "the MCP vocabulary is shared by every layer, so it depends on none" },
    Rule { layer: "swap",    forbidden: ModulesBut(&["swap"]),                              why: "the snapshot cell is shared by the parts a reload replaces, so it depends on none" },
    Rule { layer: "raw_json", forbidden: ModulesBut(&["raw_json"]),                         why: "raw JSON text is shared by the ledger, router and front, so it depends on none" },
    Rule { layer: "sys",     forbidden: ModulesBut(&["sys"]),                               why: "the crate's only unsafe code wraps system calls and SQLite's file layer; it knows no layer" },
    Rule { layer: "inline_wake", forbidden: ModulesBut(&["inline_wake"]),                  why: "the poll that keeps a task's own wake-ups is shared by the front's connections and the ledger's writers, so it depends on neither" },
    Rule { layer: "hex",     forbidden: ModulesBut(&["hex"]),                               why: "hex text of digests and ids is written by the ledger, router, front, auth, telemetry and backend, so it depends on none" },
    Rule { layer: "civil_date", forbidden: ModulesBut(&["civil_date"]),                     why: "the calendar arithmetic is shared by telemetry and the CLI, so it depends on none" },
    Rule { layer: "seal",    forbidden: ModulesBut(&["seal"]),                              why: "sealing is shared by the front's session ids and the router's request states, so it depends on neither" },
    Rule { layer: "sealed_box", forbidden: ModulesBut(&["sealed_box", "counted_ids"]),      why: "encryption at rest is shared by the backend OAuth vault and the ledger's results, so it depends on neither (its nonces are counted ids)" },
    Rule { layer: "counted_ids", forbidden: ModulesBut(&["counted_ids"]),                  why: "unique ids without a system call each are shared by the sealed box's nonces and the ledger's claim ids, so it depends on neither" },
    Rule { layer: "token_row", forbidden: ModulesBut(&["token_row"]),                       why: "the stored backend token row is shared by the backend OAuth client and the ledger, so it depends on neither" },
    Rule { layer: "secret",  forbidden: ModulesBut(&["secret"]),                            why: "the redacted secret is shared by config and the backend client, so it depends on neither" },
    Rule { layer: "ledger",  forbidden: Modules(&["router", "front", "backend", "mcp"]),    why: "the ledger stores claims; it knows neither MCP traffic nor HTTP" },
    Rule { layer: "catalog", forbidden: Modules(&["router", "front", "backend"]),           why: "the catalog names tools; it knows neither how they are found nor called" },
    Rule { layer: "backend", forbidden: Modules(&["front", "router", "ledger", "catalog"]), why: "the backend client knows backends, not agents, routing or storage" },
    Rule { layer: "auth",    forbidden: Modules(&["front", "router", "backend", "ledger", "catalog", "config"]), why: "auth turns header bytes into a principal; it knows no sessions, configuration types or backends" },
    Rule { layer: "auth",    forbidden: Crates(&["axum", "hyper"]),                         why: "auth knows no HTTP framework" },
    Rule { layer: "telemetry", forbidden: ModulesBut(&["telemetry", "mcp", "civil_date", "glob", "hex"]), why: "every layer reports to telemetry, so it knows none of them but the MCP vocabulary (and the leaves it writes with: glob, which the audit's redaction matches argument names with, and hex)" },
    Rule { layer: "telemetry", forbidden: Crates(&["axum", "hyper"]),                       why: "telemetry records plain values; serving /metrics over HTTP is the front's" },
    Rule { layer: "*",       forbidden: Modules(&["gateway"]),                              why: "the composition root wires the layers; none of them depends on it" },
];

/// What an import reaches.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A top-level module of the library.
    Module(String),
    /// An external crate.
    Crate(String),
    /// An item of the binary's root, `main.rs`.
    Main(String),
}

/// Where a source file sits: its layer and module path, and whether it belongs to the binary.
struct Place {
    /// `src/`-relative, with `/` separators, for messages.
    file: String,
    module: Vec<String>,
    in_binary: bool,
}

impl Place {
    /// `relative` is the path under `src/`; `binary_modules` are the modules `main.rs` declares.
    fn of(relative: &str, binary_modules: &[String]) -> Place {
        let stem = relative.trim_end_matches(".rs");
        let mut module: Vec<String> = stem.split('/').map(str::to_owned).collect();
        match module.last().map(String::as_str) {
            Some("mod" | "lib" | "main") => {
                module.pop();
            }
            Some(last) if last.ends_with("_tests") => {
                let owner = last.trim_end_matches("_tests").to_owned();
                module.pop();
                module.extend([owner, "tests".to_owned()]);
            }
            _ => {}
        }
        let in_binary = relative == "main.rs" || module.first().is_some_and(|top| binary_modules.contains(top));
        Place { file: format!("src/{relative}"), module, in_binary }
    }

    fn layer(&self) -> &str {
        self.module.first().map_or("", String::as_str)
    }
}

/// The target of `named`, if it leaves the file's own layer or names a crate.
fn resolve(named: &Named, place: &Place, locals: &[String], binary_modules: &[String]) -> Option<Target> {
    let segments = &named.segments;
    let first = segments.first()?;
    let from_root: Vec<String> = match first.as_str() {
        "crate" => segments[1..].to_vec(),
        "super" => {
            let ups = segments.iter().take_while(|segment| *segment == "super").count();
            let base = &named.module[..named.module.len().saturating_sub(ups)];
            base.iter().chain(&segments[ups..]).cloned().collect()
        }
        "self" => return None,
        name if locals.iter().any(|local| local == name) => return None,
        name => return Some(Target::Crate(name.to_owned())),
    };
    let top = from_root.first()?.clone();
    if place.in_binary && place.file != "src/main.rs" && !binary_modules.contains(&top) {
        return Some(Target::Main(top));
    }
    Some(Target::Module(top))
}

/// The broken rules of one file, one message each.
fn check_file(place: &Place, source: &str, binary_modules: &[String]) -> Vec<String> {
    let mut broken = Vec::new();
    if !source.starts_with("//!") {
        broken.push(format!("{}:1: does not start with a `//!` doc saying what the module owns", place.file));
    }
    let (paths, locals) = named_paths(source, &place.module);
    for named in &paths {
        let Some(target) = resolve(named, place, &locals, binary_modules) else { continue };
        let written = named.segments.join("::");
        if let Target::Main(item) = &target {
            let why = "main.rs is the command line's root; shared code belongs in a module";
            broken.push(format!("{}:{}: `{written}` imports `{item}` from main.rs ({why})", place.file, named.line));
            continue;
        }
        for rule in RULES.iter().filter(|rule| rule.layer == place.layer() || rule.layer == "*") {
            if rule.forbids(&target, place.layer()) {
                broken.push(format!("{}:{}: `{written}` breaks the rule {}", place.file, named.line, rule));
            }
        }
    }
    broken
}

impl Rule {
    fn forbids(&self, target: &Target, own_layer: &str) -> bool {
        match (&self.forbidden, target) {
            (Modules(modules), Target::Module(module)) => module != own_layer && modules.contains(&module.as_str()),
            (ModulesBut(allowed), Target::Module(module)) => module != own_layer && !allowed.contains(&module.as_str()),
            (Crates(crates), Target::Crate(name)) => crates.contains(&name.as_str()),
            _ => false,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, list) = match self.forbidden {
            Modules(list) => ("must not import", list),
            ModulesBut(list) => ("must import no crate module but", list),
            Crates(list) => ("must not use the crates", list),
        };
        write!(f, "`{}` {kind} {}: {}", self.layer, list.join(", "), self.why)
    }
}

fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The modules `main.rs` declares (`mod cli;`).
fn binary_modules(main: &str) -> Vec<String> {
    let (_, locals) = named_paths(main, &[]);
    locals.into_iter().filter(|name| main.contains(&format!("mod {name};"))).collect()
}

#[test]
fn every_layer_imports_only_what_it_may_know_and_every_file_has_its_doc() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let binary_modules = binary_modules(&fs::read_to_string(src.join("main.rs")).unwrap());
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "the walk found only {} files under {}", files.len(), src.display());
    let mut broken = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let place = Place::of(&relative, &binary_modules);
        broken.extend(check_file(&place, &fs::read_to_string(file).unwrap(), &binary_modules));
    }
    assert!(broken.is_empty(), "{} layering violations:\n{}", broken.len(), broken.join("\n"));
}

/// The checker on small sources, so it can be seen to catch what it must and pass what it may.
mod checker {
    use super::*;

    fn check(relative: &str, source: &str) -> Vec<String> {
        let binary = vec!["cli".to_owned()];
        check_file(&Place::of(relative, &binary), source, &binary)
    }

    fn assert_clean(relative: &str, source: &str) {
        let broken = check(relative, source);
        assert!(broken.is_empty(), "{relative}: {broken:?}");
    }

    #[test]
    fn a_forbidden_use_is_named_with_file_line_and_rule() {
        let broken = check("front/mod.rs", "//! doc\n\nuse crate::backend::mcp_client::Relay;\n");
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(broken[0].starts_with("src/front/mod.rs:3: `crate::backend::mcp_client::Relay`"), "{}", broken[0]);
        assert!(broken[0].contains("`front` must not import backend, ledger, catalog"), "{}", broken[0]);
        assert_clean("front/mod.rs", "//! doc\nuse crate::router::CallRouter;\nuse crate::glob;\n");
    }

    #[test]
    fn grouped_nested_and_aliased_uses_are_expanded() {
        let source = "//! doc\nuse crate::{\n    router::View,\n    ledger::{self, LedgerStore as Store},\n};\n";
        let broken = check("front/post.rs", source);
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(broken.iter().all(|line| line.starts_with("src/front/post.rs:2: `crate::ledger::")), "{broken:?}");
        let expanded = expand("crate::{a::{b, c as d}, e}");
        let bindings: Vec<&str> = expanded.iter().map(|(_, binding)| binding.as_str()).collect();
        assert_eq!(bindings, ["b", "d", "e"]);
        assert_eq!(expanded[1].0, ["crate", "a", "c"]);
    }

    #[test]
    fn inline_paths_and_super_chains_count_as_imports() {
        let inline = check("config/ledger.rs", "//! doc\nfn f() {\n    crate::ledger::redact_url(\"x\");\n}\n");
        assert_eq!(inline.len(), 1, "{inline:?}");
        assert!(inline[0].starts_with("src/config/ledger.rs:3:"), "{}", inline[0]);
        let up = check("front/session/key.rs", "//! doc\nuse super::super::super::catalog::Catalog;\n");
        assert_eq!(up.len(), 1, "{up:?}");
        assert_clean("front/session/key.rs", "//! doc\nuse super::super::guard::Admission;\nuse super::SessionRef;\n");
        let absolute = check("router/mod.rs", "//! doc\nfn f() { let _ = ::reqwest::Client::new(); }\n");
        assert_eq!(absolute.len(), 1, "{absolute:?}");
    }

    #[test]
    fn http_crates_are_caught_in_the_router_even_through_axum() {
        for line in [
            "use reqwest::Url;",
            "use axum::http::HeaderName;",
            "use http::HeaderValue;",
            "type C = hyper::body::Incoming;",
        ] {
            let broken = check("router/mod.rs", &format!("//! doc\n{line}\n"));
            assert_eq!(broken.len(), 1, "{line}: {broken:?}");
            assert!(broken[0].contains("must not use the crates reqwest, axum, http, hyper"), "{}", broken[0]);
        }
        // The front may speak HTTP, and a local module named like a crate is not that crate.
        assert_clean("front/mod.rs", "//! doc\nuse axum::http::StatusCode;\n");
        assert_clean("router/x.rs", "//! doc\nmod http;\nfn f() { http::go(); }\n");
    }

    #[test]
    fn comments_strings_and_chars_are_not_imports() {
        let source = "//! use crate::backend::x;\n// crate::ledger::y\nconst A: &str = \"crate::backend::z\";\n\
                      const B: char = '\"';\nconst C: &str = r#\"use crate::catalog::w;\"#;\n/* crate::ledger::v */\n";
        assert_clean("front/a.rs", source);
        let after_char = "//! doc\nfn f() { let _ = ('\"', crate::backend::x()); }\n";
        assert_eq!(check("front/a.rs", after_char).len(), 1, "a char literal hides nothing after it");
        assert_eq!(mask("a /* b\nc */ \"d\\\"e\" f"), "a     \n     \"    \" f");
    }

    #[test]
    fn config_and_mcp_know_no_other_module() {
        assert_eq!(
            check("config/server.rs", "//! doc\nuse crate::backend::mcp_client::DEFAULT_MAX_SESSIONS;\n").len(),
            1
        );
        assert_clean("config/backend.rs", "//! doc\nuse super::glob::Glob;\nuse crate::glob::glob_match;\n");
        assert_eq!(check("mcp/jsonrpc.rs", "//! doc\nuse crate::router::X;\n").len(), 1);
        assert_clean("mcp/mod.rs", "//! doc\nuse crate::mcp::jsonrpc;\nuse serde_json::Value;\n");
    }

    #[test]
    fn telemetry_knows_only_the_mcp_vocabulary() {
        assert_clean("telemetry/labels.rs", "//! doc\nuse crate::mcp::method;\nuse super::metrics::Metrics;\n");
        assert_eq!(check("telemetry/access.rs", "//! doc\nuse crate::router::Caller;\n").len(), 1);
        assert_eq!(check("telemetry/metrics.rs", "//! doc\nuse crate::backend::mcp_client::McpError;\n").len(), 1);
        assert_eq!(check("telemetry/metrics.rs", "//! doc\nuse axum::Router;\n").len(), 1);
        assert_clean("router/mod.rs", "//! doc\nuse crate::telemetry::RequestRecord;\n");
        assert_clean("backend/mcp_client/client.rs", "//! doc\nuse crate::telemetry::ErrorType;\n");
    }

    #[test]
    fn the_binary_root_is_nobodys_dependency() {
        let broken = check("cli/calls.rs", "//! doc\nuse crate::{CallsAction, print_table};\nuse crate::cli::keys;\n");
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(broken[0].contains("imports `CallsAction` from main.rs"), "{}", broken[0]);
        assert_clean("cli/keys.rs", "//! doc\nuse switchyard::auth::Key;\n");
        assert_eq!(binary_modules("//! doc\nmod cli;\nuse std::fmt;\n"), ["cli"]);
    }

    #[test]
    fn no_layer_depends_on_the_composition_root() {
        assert_eq!(check("router/mod.rs", "//! doc\nuse crate::gateway::Gateway;\n").len(), 1);
        assert_clean("gateway/access.rs", "//! doc\nuse crate::gateway::Gateway;\nuse super::X;\n");
    }

    #[test]
    fn a_file_without_its_doc_is_named() {
        assert_eq!(
            check("ledger/x.rs", "use std::fmt;\n"),
            ["src/ledger/x.rs:1: does not start with a `//!` doc saying what the module owns"]
        );
        assert_eq!(check("ledger/x.rs", "/// item doc\nfn f() {}\n").len(), 1);
    }

    #[test]
    fn inline_test_modules_resolve_super_to_their_file() {
        let source = "//! doc\n#[cfg(test)]\nmod tests {\n    use super::super::catalog::X;\n}\n";
        assert_clean("front/guard.rs", source);
        let test_file = Place::of("front/guard_tests.rs", &[]);
        assert_eq!(test_file.module, ["front", "guard", "tests"]);
    }
}
