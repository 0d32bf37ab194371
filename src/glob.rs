//! A tiny glob matcher for name lists (`tools.allow`, `tools.deny`, allowed origins and hosts, policies). It
//! lives outside `config` because the parts configuration is lowered into (auth's policies) match with it too.
//!
//! Rules: `*` matches any run of characters (including none), `?` exactly one character, everything else
//! itself; there is no escape and no character class, so a pattern reads the same to every operator. Matching
//! works on Unicode scalar values, allocates nothing, and is bounded by pattern length × name length (a `*`
//! only ever backtracks to the most recent star).

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

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, name: &str) -> bool {
        glob_match(&self.0, name)
    }
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
    fn empty_patterns_are_refused() {
        assert_eq!(Glob::new(""), Err(GlobError::Empty));
        let glob = Glob::new("get_*").expect("valid");
        assert!(glob.matches("get_issue"));
        assert_eq!(glob.as_str(), "get_*");
        assert_eq!(format!("{glob:?}"), "Glob(\"get_*\")");
    }
}
