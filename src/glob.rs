//! A tiny glob matcher for name lists (`tools.allow`, `tools.deny`, allowed origins and hosts, policies). It
//! lives outside `config` because the parts configuration is lowered into (auth's policies) match with it too.
//!
//! Rules: `*` matches any run of characters (including none), `?` exactly one character, everything else
//! itself; there is no escape and no character class, so a pattern reads the same to every operator. Matching
//! works on Unicode scalar values, allocates nothing, and is bounded by pattern length × name length (a `*`
//! only ever backtracks to the most recent star). Whether some, or every, name with a given prefix matches
//! (names not known yet) is a set-of-states walk over the prefix, bounded by pattern length × prefix length.

use std::fmt;

/// A validated, non-empty glob pattern.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Glob(String);

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// An empty pattern matches nothing and is always a mistake (often a stray `""` in a list).
    #[error("a glob pattern must not be empty")]
    Empty,
}

impl Glob {
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        Ok(Self(pattern.to_owned()))
    }

    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, name: &str) -> bool {
        glob_match(&self.0, name)
    }

    /// Whether some name that starts with `prefix` matches (names not known yet, like the tools of a backend
    /// nobody has listed, judged by their prefix).
    pub fn matches_some_name_starting(&self, prefix: &str) -> bool {
        after_prefix(&self.0, prefix).iter().any(|&reachable| reachable)
    }

    /// Whether every name that starts with `prefix` matches (the pattern is `prefix`'s start, then only stars).
    pub fn matches_every_name_starting(&self, prefix: &str) -> bool {
        let reached = after_prefix(&self.0, prefix);
        let only_stars = |at: usize| at < self.0.len() && self.0[at..].bytes().all(|byte| byte == b'*');
        reached.iter().enumerate().any(|(at, &reachable)| reachable && only_stars(at))
    }
}

/// The pattern offsets a match can have reached once `prefix` is consumed (indexed by byte offset; every offset
/// is a character boundary): a set-of-states simulation, so bounded by pattern length × prefix length.
fn after_prefix(pattern: &str, prefix: &str) -> Vec<bool> {
    let chars: Vec<(usize, char)> = pattern.char_indices().collect();
    let end = pattern.len();
    // A star may match nothing: whoever stands on one also stands just after it.
    let close = |states: &mut Vec<bool>| {
        for &(at, c) in &chars {
            if states[at] && c == '*' {
                states[at + 1] = true;
            }
        }
    };
    let mut states = vec![false; end + 1];
    states[0] = true;
    close(&mut states);
    for got in prefix.chars() {
        let mut next = vec![false; end + 1];
        for &(at, wanted) in chars.iter().filter(|(at, _)| states[*at]) {
            match wanted {
                '*' => next[at] = true,
                '?' => next[at + wanted.len_utf8()] = true,
                _ if wanted == got => next[at + wanted.len_utf8()] = true,
                _ => {}
            }
        }
        close(&mut next);
        states = next;
    }
    states
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.0)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `name` matches `pattern` in full.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    // Byte offsets into both strings; always on character boundaries.
    let (mut p, mut n) = (0, 0);
    // After a `*`: where the pattern resumes and the name offset the star has consumed up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        let pattern_char = pattern[p..].chars().next();
        let name_char = name[n..].chars().next();
        match (pattern_char, name_char) {
            (None, None) => return true,
            (Some('*'), _) => {
                p += 1;
                star = Some((p, n));
            }
            (Some(wanted), Some(got)) if wanted == '?' || wanted == got => {
                p += wanted.len_utf8();
                n += got.len_utf8();
            }
            _ => {
                // Mismatch: let the last star swallow one more character and retry from just after it.
                let Some((resume, consumed)) = star else {
                    return false;
                };
                let Some(swallowed) = name[consumed..].chars().next() else {
                    return false;
                };
                let consumed = consumed + swallowed.len_utf8();
                star = Some((resume, consumed));
                p = resume;
                n = consumed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_match_exactly() {
        assert!(glob_match("search", "search"));
        assert!(!glob_match("search", "searches"));
        assert!(!glob_match("search", "sear"));
        assert!(!glob_match("Search", "search"));
    }

    #[test]
    fn star_matches_any_run() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("delete_*", "delete_repo"));
        assert!(glob_match("delete_*", "delete_"));
        assert!(!glob_match("delete_*", "undelete_repo"));
        assert!(glob_match("*_admin", "repo_admin"));
        assert!(glob_match("a*b*c", "a__b__b__c"));
        assert!(!glob_match("a*b*c", "a__b__b__"));
        assert!(glob_match("**", "x"));
    }

    #[test]
    fn question_mark_matches_one_character() {
        assert!(glob_match("v?", "v1"));
        assert!(!glob_match("v?", "v"));
        assert!(!glob_match("v?", "v10"));
        assert!(glob_match("?é?", "aéb"));
        assert!(glob_match("é*", "été"));
        assert!(glob_match("??", "ßü"));
    }

    #[test]
    fn pathological_patterns_stay_fast() {
        let name = "a".repeat(10_000);
        assert!(!glob_match("*a*a*a*a*a*a*b", &name));
        assert!(glob_match("*a*a*a*a*a*a*", &name));
    }

    #[test]
    fn prefixes_are_judged_for_names_not_known_yet() {
        let glob = |pattern: &str| Glob::new(pattern).expect("valid");
        for (pattern, prefix, some, every) in [
            ("docs__*", "docs__", true, true),
            ("docs__*", "docs", true, false),
            ("docs__*", "github__", false, false),
            ("docs__search", "docs__", true, false),
            ("*", "gh__", true, true),
            ("*_admin", "gh__", true, false),
            ("gh__?*", "gh__", true, false),
            ("g?__*", "gh__", true, true),
            ("gh", "gh__", false, false),
            ("é*", "é", true, true),
            ("a*b*", "a_b", true, true),
        ] {
            assert_eq!(glob(pattern).matches_some_name_starting(prefix), some, "{pattern} / {prefix}: some");
            assert_eq!(glob(pattern).matches_every_name_starting(prefix), every, "{pattern} / {prefix}: every");
        }
    }

    #[test]
    fn empty_patterns_are_refused() {
        assert_eq!(Glob::new(""), Err(GlobError::Empty));
        let glob = Glob::new("get_*").expect("valid");
        assert!(glob.matches("get_issue"));
        assert_eq!(glob.as_str(), "get_*");
        assert_eq!(format!("{glob:?}"), "Glob(\"get_*\")");
    }
}
