//! Reading Rust source for the layering check: which paths a file names, and where.
//!
//! Rules: comments and the contents of string and character literals are blanked first (newlines kept, so line
//! numbers stay true), so a path in a message or a doc is never taken for an import. `use` trees are expanded
//! (`use crate::{a, b::{c}}` names `crate::a` and `crate::b::c`) and reported at the line of their `use`; any
//! other path (`crate::x::f()`, `reqwest::Client::new()`) is reported where it stands. `super::` is resolved
//! against the file's module path, inline `mod x { … }` blocks included. A path's first segment that names
//! something the file declares or imports is local, not a crate.

/// A path a file names, as written, and the line it is on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub line: usize,
    /// The segments, `crate`/`super`/`self` included, e.g. `["crate", "backend", "mcp_client", "Relay"]`.
    pub segments: Vec<String>,
    /// The module the path is written in, from the crate root (`["front", "guard"]`).
    pub module: Vec<String>,
}

/// Every path `source` names, and the names it binds locally (imports, aliases, `mod` declarations).
pub fn named_paths(source: &str, file_module: &[String]) -> (Vec<Named>, Vec<String>) {
    let text: Vec<char> = mask(source).chars().collect();
    let mut scan = Scanner { text: &text, at: 0, line: 1, depth: 0, inline: Vec::new(), found: Vec::new() };
    let mut locals = Vec::new();
    while let Some(&c) = scan.text.get(scan.at) {
        match c {
            '\n' => scan.line += 1,
            '{' => scan.depth += 1,
            '}' => {
                if scan.inline.last().is_some_and(|(_, depth)| *depth == scan.depth) {
                    scan.inline.pop();
                }
                scan.depth = scan.depth.saturating_sub(1);
            }
            c if is_ident_start(c) && !scan.follows_ident() => {
                scan.word(file_module, &mut locals);
                continue;
            }
            _ => {}
        }
        scan.at += 1;
    }
    (scan.found, locals)
}

struct Scanner<'a> {
    text: &'a [char],
    at: usize,
    line: usize,
    depth: usize,
    /// Inline `mod name {` blocks the scanner is in, with the brace depth inside each.
    inline: Vec<(String, usize)>,
    found: Vec<Named>,
}

impl Scanner<'_> {
    fn follows_ident(&self) -> bool {
        self.at > 0 && is_ident_char(self.text[self.at - 1])
    }

    fn module(&self, file_module: &[String]) -> Vec<String> {
        file_module.iter().cloned().chain(self.inline.iter().map(|(name, _)| name.clone())).collect()
    }

    fn ident(&mut self) -> String {
        let start = self.at;
        while self.text.get(self.at).copied().is_some_and(is_ident_char) {
            self.at += 1;
        }
        self.text[start..self.at].iter().collect()
    }

    /// Moves the cursor past blanks, counting lines.
    fn pass_blank(&mut self) {
        let at = skip_blank(self.text, self.at);
        self.line += self.text[self.at..at].iter().filter(|c| **c == '\n').count();
        self.at = at;
    }

    /// The previous character that is not blank, if any.
    fn before(&self, start: usize) -> Option<char> {
        self.text[..start].iter().rev().find(|c| !c.is_whitespace()).copied()
    }

    /// Handles the word at the cursor: a `use` statement, a `mod` declaration or the first segment of a path.
    fn word(&mut self, file_module: &[String], locals: &mut Vec<String>) {
        let start = self.at;
        let line = self.line;
        let word = self.ident();
        match word.as_str() {
            "use" => self.use_statement(line, file_module, locals),
            "mod" => {
                self.pass_blank();
                let name = self.ident();
                self.pass_blank();
                if self.text.get(self.at) == Some(&'{') {
                    self.inline.push((name.clone(), self.depth + 1));
                }
                locals.push(name);
            }
            _ => {
                let mut segments = vec![word];
                while let Some(next) = self.next_segment() {
                    segments.push(next);
                }
                // A word after `.`, `$` or `::` continues something else (a method, `$crate`, a qualified path).
                let continues = matches!(self.before(start), Some('.' | '$' | ':')) && !self.starts_absolute(start);
                if !continues && segments.len() > 1 {
                    self.found.push(Named { line, segments, module: self.module(file_module) });
                }
            }
        }
    }

    /// `:: ident` after the cursor, consumed, if there.
    fn next_segment(&mut self) -> Option<String> {
        let at = skip_blank(self.text, self.at);
        if self.text.get(at..at + 2) != Some(&[':', ':']) {
            return None;
        }
        let at = skip_blank(self.text, at + 2);
        if !self.text.get(at).copied().is_some_and(is_ident_start) {
            return None;
        }
        self.line += self.text[self.at..at].iter().filter(|c| **c == '\n').count();
        self.at = at;
        Some(self.ident())
    }

    /// Whether the word at `start` follows a leading `::` (an absolute path such as `::reqwest::Client`) rather
    /// than continuing a path or a qualified type.
    fn starts_absolute(&self, start: usize) -> bool {
        let before: Vec<char> =
            self.text[..start].iter().rev().filter(|c| !c.is_whitespace()).take(3).copied().collect();
        matches!(before.as_slice(), [':', ':'] | [':', ':', _])
            && !matches!(before.get(2), Some(c) if is_ident_char(*c) || matches!(c, '>' | ':'))
    }

    fn use_statement(&mut self, line: usize, file_module: &[String], locals: &mut Vec<String>) {
        let start = self.at;
        while self.text.get(self.at).is_some_and(|c| *c != ';') {
            if self.text[self.at] == '\n' {
                self.line += 1;
            }
            self.at += 1;
        }
        let tree: String = self.text[start..self.at].iter().collect();
        let module = self.module(file_module);
        for (segments, binding) in expand(&tree) {
            locals.push(binding);
            self.found.push(Named { line, segments, module: module.clone() });
        }
    }
}

/// The paths of a `use` tree, each with the name it binds (its alias or its last segment, `self` meaning the
/// segment before).
pub fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut compact = String::new();
    for (index, word) in words.iter().enumerate() {
        if index > 0 && (*word == "as" || words[index - 1] == "as") {
            compact.push(' ');
        }
        compact.push_str(word);
    }
    expand_compact(&compact, &[])
}

fn expand_compact(tree: &str, prefix: &[String]) -> Vec<(Vec<String>, String)> {
    let tree = tree.trim().trim_start_matches("::");
    if tree.is_empty() {
        return Vec::new();
    }
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path, Some(alias.trim())),
            None => (tree, None),
        };
        let mut segments = prefix.to_vec();
        segments.extend(path.split("::").map(str::to_owned));
        let last = match segments.as_slice() {
            [.., before, last] if last == "self" => before.clone(),
            [.., last] => last.clone(),
            [] => String::new(),
        };
        let binding = alias.map_or(last, str::to_owned);
        return vec![(segments, binding)];
    };
    let mut segments = prefix.to_vec();
    segments.extend(tree[..open].trim_end_matches("::").split("::").filter(|s| !s.is_empty()).map(str::to_owned));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    split_top_level(inner).into_iter().flat_map(|part| expand_compact(part, &segments)).collect()
}

/// Splits `a, b::{c, d}` at the commas outside braces.
fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (at, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&list[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts
}

fn skip_blank(text: &[char], mut at: usize) -> usize {
    while text.get(at).is_some_and(|c| c.is_whitespace()) {
        at += 1;
    }
    at
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `source` with comments and the contents of string and character literals replaced by spaces.
pub fn mask(source: &str) -> String {
    let text: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut at = 0;
    while at < text.len() {
        let c = text[at];
        let next = text.get(at + 1).copied();
        let after_ident = at > 0 && is_ident_char(text[at - 1]);
        if c == '/' && next == Some('/') {
            while at < text.len() && text[at] != '\n' {
                blank(&mut out, text[at]);
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                if text[at..].starts_with(&['/', '*']) {
                    depth += 1;
                    out.push_str("  ");
                    at += 2;
                } else if text[at..].starts_with(&['*', '/']) {
                    depth -= 1;
                    out.push_str("  ");
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else if at < text.len() {
                    blank(&mut out, text[at]);
                    at += 1;
                } else {
                    break;
                }
            }
        } else if !after_ident && let Some(hashes) = raw_string_start(&text[at..]) {
            let opening = text[at..].iter().position(|c| *c == '"').unwrap_or(0) + 1;
            out.extend(&text[at..at + opening]);
            at += opening;
            let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while at < text.len() && !text[at..].starts_with(&closing) {
                blank(&mut out, text[at]);
                at += 1;
            }
            out.extend(&closing);
            at += closing.len();
        } else if c == '"' {
            out.push('"');
            at += 1;
            while at < text.len() && text[at] != '"' {
                let width = if text[at] == '\\' { 2 } else { 1 };
                for &skipped in &text[at..(at + width).min(text.len())] {
                    blank(&mut out, skipped);
                }
                at += width;
            }
            out.push('"');
            at += 1;
        } else if c == '\''
            && let Some(width) = char_literal_width(&text[at..])
        {
            out.push('\'');
            out.extend(std::iter::repeat_n(' ', width - 2));
            out.push('\'');
            at += width;
        } else {
            out.push(c);
            at += 1;
        }
    }
    out
}

/// The number of `#` of a raw string (`r"…"`, `br#"…"#`) starting here.
fn raw_string_start(text: &[char]) -> Option<usize> {
    let (['b', 'r', rest @ ..] | ['r', rest @ ..]) = text else {
        return None;
    };
    let hashes = rest.iter().take_while(|c| **c == '#').count();
    (rest.get(hashes) == Some(&'"')).then_some(hashes)
}

/// The length of the character literal starting here (`'x'`, `'\n'`, `'\u{1F600}'`), or `None` for a lifetime.
fn char_literal_width(text: &[char]) -> Option<usize> {
    match text {
        ['\'', '\\', ..] => text.iter().skip(3).position(|c| *c == '\'').map(|end| end + 4),
        ['\'', _, '\'', ..] => Some(3),
        _ => None,
    }
}
