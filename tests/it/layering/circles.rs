//! Import circles between the files of a directory: a file that, through the files it imports, imports itself.
//! A circle means no file of it can be read (or changed) without the others, so the directories of
//! [`CIRCLE_FREE`] (`backend/` and `config/`) keep none.
//!
//! Rules: a node is one source file; test modules (`tests.rs`, `*_tests.rs`, inline `mod tests`) are not read. An
//! edge is a `use` or path (as [`super::scan`] finds them, `super::` resolved) that reaches an item of another file
//! of the same directory tree: the path is followed to the deepest module it names, and a name that module only
//! re-exports (`pub use x::Name`, `pub(crate) use …`) is followed on to the file that defines it — a facade's
//! re-exports are a table of names, not a dependency of the facade. A failure names every file of each circle
//! and, for each, the path that leads to the next.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::scan::{expand, mask, named_paths};
use super::{Place, source_files};

/// The directories under `src/` whose files import one another without a circle.
const CIRCLE_FREE: &[&str] = &["backend", "config"];

/// One file: where it is, the module it is, and the source.
struct File {
    name: String,
    module: Vec<String>,
    source: String,
}

/// An import from one file to another: the path as written, and its line.
struct Edge {
    to: usize,
    written: String,
    line: usize,
}

/// The files of a directory tree, and which of them import which.
struct Graph {
    files: Vec<File>,
    edges: Vec<Vec<Edge>>,
}

impl Graph {
    /// `sources` are (path under `src/`, text); test modules are left out.
    fn of(sources: Vec<(String, String)>) -> Graph {
        let files: Vec<File> = sources
            .into_iter()
            .map(|(relative, source)| File { module: Place::of(&relative, &[]).module, name: relative, source })
            .filter(|file| !file.module.iter().any(|segment| segment == "tests"))
            .collect();
        let modules: BTreeMap<Vec<String>, usize> =
            files.iter().enumerate().map(|(index, file)| (file.module.clone(), index)).collect();
        let reexports: Vec<Reexports> = files.iter().map(reexports).collect();
        let edges =
            files.iter().enumerate().map(|(index, file)| file_edges(index, file, &modules, &reexports)).collect();
        Graph { files, edges }
    }

    /// Every circle, as its files' indices (Tarjan's strongly connected components of more than one file).
    fn circles(&self) -> Vec<Vec<usize>> {
        let mut tarjan = Tarjan {
            graph: self,
            index: vec![None; self.files.len()],
            low: vec![0; self.files.len()],
            stack: Vec::new(),
            on_stack: vec![false; self.files.len()],
            next: 0,
            found: Vec::new(),
        };
        for node in 0..self.files.len() {
            if tarjan.index[node].is_none() {
                tarjan.visit(node);
            }
        }
        tarjan.found
    }

    /// A circle as a message: each file, and the import that leads to another file of the circle.
    fn describe(&self, circle: &[usize]) -> String {
        let members: BTreeSet<usize> = circle.iter().copied().collect();
        let mut lines = vec![format!(
            "circle of {} files: {}",
            circle.len(),
            circle.iter().map(|node| format!("src/{}", self.files[*node].name)).collect::<Vec<_>>().join(", ")
        )];
        for node in circle {
            for edge in self.edges[*node].iter().filter(|edge| members.contains(&edge.to)) {
                lines.push(format!(
                    "  src/{}:{}: `{}` → src/{}",
                    self.files[*node].name, edge.line, edge.written, self.files[edge.to].name
                ));
            }
        }
        lines.join("\n")
    }
}

struct Tarjan<'a> {
    graph: &'a Graph,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: Vec<bool>,
    next: usize,
    found: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, node: usize) {
        self.index[node] = Some(self.next);
        self.low[node] = self.next;
        self.next += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for edge in &self.graph.edges[node] {
            match self.index[edge.to] {
                None => {
                    self.visit(edge.to);
                    self.low[node] = self.low[node].min(self.low[edge.to]);
                }
                Some(index) if self.on_stack[edge.to] => self.low[node] = self.low[node].min(index),
                Some(_) => {}
            }
        }
        if Some(self.low[node]) != self.index[node] {
            return;
        }
        let mut component = Vec::new();
        while let Some(member) = self.stack.pop() {
            self.on_stack[member] = false;
            component.push(member);
            if member == node {
                break;
            }
        }
        if component.len() > 1 {
            component.sort_unstable();
            self.found.push(component);
        }
    }
}

/// A file's re-exports: the name each binds, the path (from the crate root) it names, and the lines they are on.
struct Reexports {
    names: BTreeMap<String, Vec<String>>,
    lines: BTreeSet<usize>,
}

/// The `pub use` / `pub(…) use` statements of a file.
fn reexports(file: &File) -> Reexports {
    let text = mask(&file.source);
    let mut names = BTreeMap::new();
    let mut lines = BTreeSet::new();
    for (at, _) in text.match_indices("use ") {
        let before = text[..at].trim_end();
        let public = before.ends_with("pub")
            || (before.ends_with(')') && before.rfind("pub(").is_some_and(|open| !before[open..].contains('\n')));
        let starts_word = at == 0 || !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        if !public || !starts_word {
            continue;
        }
        let Some(end) = text[at..].find(';') else { continue };
        lines.insert(text[..at].matches('\n').count() + 1);
        for (segments, binding) in expand(&text[at + 4..at + end]) {
            names.insert(binding, absolute(&segments, &file.module));
        }
    }
    Reexports { names, lines }
}

/// `segments` from the crate root, as written in `module` (`super` and `self` resolved); `None` for a path that
/// starts elsewhere (an external crate or a local name).
fn from_root(segments: &[String], module: &[String]) -> Option<Vec<String>> {
    match segments.first()?.as_str() {
        "crate" => Some(segments[1..].to_vec()),
        "super" => {
            let ups = segments.iter().take_while(|segment| *segment == "super").count();
            let base = &module[..module.len().checked_sub(ups)?];
            Some(base.iter().chain(&segments[ups..]).cloned().collect())
        }
        "self" => Some(module.iter().chain(&segments[1..]).cloned().collect()),
        _ => None,
    }
}

fn absolute(segments: &[String], module: &[String]) -> Vec<String> {
    from_root(segments, module).unwrap_or_else(|| module.iter().chain(segments).cloned().collect())
}

/// The file a crate-root path reaches: the deepest module it names, or, for a name that module re-exports, the
/// file the re-export leads to.
fn target(path: &[String], modules: &BTreeMap<Vec<String>, usize>, reexports: &[Reexports]) -> Option<usize> {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let depth = (0..=path.len()).rev().find(|depth| modules.contains_key(&path[..*depth]))?;
        let file = modules[&path[..depth]];
        let Some(name) = path.get(depth) else { return Some(file) };
        match reexports[file].names.get(name) {
            Some(reexported) => path = reexported.iter().chain(&path[depth + 1..]).cloned().collect(),
            None => return Some(file),
        }
    }
    None
}

fn file_edges(index: usize, file: &File, modules: &BTreeMap<Vec<String>, usize>, reexports: &[Reexports]) -> Vec<Edge> {
    let (paths, _) = named_paths(&file.source, &file.module);
    paths
        .iter()
        .filter(|named| !named.module.iter().any(|segment| segment == "tests"))
        .filter(|named| !reexports[index].lines.contains(&named.line))
        .filter_map(|named| {
            let path = from_root(&named.segments, &named.module)?;
            let to = target(&path, modules, reexports).filter(|to| *to != index)?;
            Some(Edge { to, written: named.segments.join("::"), line: named.line })
        })
        .collect()
}

#[test]
fn the_listed_directories_have_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for directory in CIRCLE_FREE {
        let mut paths = Vec::new();
        source_files(&src.join(directory), &mut paths);
        assert!(paths.len() > 5, "the walk found only {} files under src/{directory}", paths.len());
        let sources = paths
            .iter()
            .map(|path| {
                let relative = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
                (relative, fs::read_to_string(path).unwrap())
            })
            .collect();
        let graph = Graph::of(sources);
        broken.extend(graph.circles().iter().map(|circle| graph.describe(circle)));
    }
    assert!(broken.is_empty(), "{} import circles:\n{}", broken.len(), broken.join("\n"));
}

/// The detector on small trees, so it can be seen to find a circle and to pass a facade.
mod detector {
    use super::*;

    fn circles(files: &[(&str, &str)]) -> Vec<String> {
        let graph = Graph::of(files.iter().map(|(name, source)| (name.to_string(), source.to_string())).collect());
        graph.circles().iter().map(|circle| graph.describe(circle)).collect()
    }

    #[test]
    fn a_circle_through_two_files_is_named() {
        let found = circles(&[
            ("d/mod.rs", "//! d\nmod a;\nmod b;\n"),
            ("d/a.rs", "//! a\nuse super::b::B;\npub struct A;\n"),
            ("d/b.rs", "//! b\npub struct B;\nfn f() { let _ = super::a::A; }\n"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("circle of 2 files: src/d/a.rs, src/d/b.rs"), "{}", found[0]);
        assert!(found[0].contains("src/d/a.rs:2: `super::b::B` → src/d/b.rs"), "{}", found[0]);
        assert!(found[0].contains("src/d/b.rs:3: `super::a::A` → src/d/a.rs"), "{}", found[0]);
    }

    #[test]
    fn a_circle_through_a_facade_reexport_is_followed_to_the_defining_file() {
        let found = circles(&[
            ("d/mod.rs", "//! d\nmod a;\nmod b;\npub use a::A;\npub(crate) use b::{B, C as D};\n"),
            ("d/a.rs", "//! a\nuse super::D;\npub struct A;\n"),
            ("d/b.rs", "//! b\nuse crate::d::A;\npub struct C;\npub struct B;\n"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("src/d/a.rs, src/d/b.rs"), "{}", found[0]);
    }

    #[test]
    fn a_facade_and_the_files_below_it_are_no_circle() {
        let found = circles(&[
            ("d/mod.rs", "//! d\nmod a;\nmod b;\npub use a::A;\npub use b::B;\npub const LIMIT: usize = 1;\n"),
            ("d/a.rs", "//! a\nuse super::{B, LIMIT};\npub struct A;\n"),
            ("d/b.rs", "//! b\npub struct B;\n#[cfg(test)]\nmod tests {\n    use super::super::a::A;\n}\n"),
            ("d/b_tests.rs", "//! tests\nuse super::super::a::A;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }
}
