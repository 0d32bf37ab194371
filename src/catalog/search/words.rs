//! Words of a tool definition or a query, as the search index compares them.
//!
//! Rules: text is split at every character that is not a letter or digit, and inside a run at case changes
//! (`createIssue`, `HTMLPage` → `html page`), so snake_case, camelCase and kebab-case names read as the words
//! an agent would type. Words are lowercased, common English function words dropped, and a light suffix
//! stripping maps inflections of one word to one stem (`issues`, `issue` → `issu`; `listing`, `listed`, `lists` →
//! `list`). Query and documents go through the same function, so a stem only has to be consistent, not a word.

/// Words too common in tool descriptions and requests to tell tools apart, sorted (for a binary search).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please", "should", "so", "some",
    "than", "that", "the", "their", "them", "then", "there", "these", "this", "to", "us", "want", "was", "we", "what",
    "when", "which", "who", "will", "with", "you", "your",
];

/// Calls `emit` with each stem of `text`, in order. Allocates one buffer per call, whatever the text's length.
pub(crate) fn each_stem(text: &str, mut emit: impl FnMut(&str)) {
    let mut lowered = String::new();
    for run in text.split(|c: char| !c.is_alphanumeric()).filter(|run| !run.is_empty()) {
        each_case_word(run, |word| {
            lowered.clear();
            if word.is_ascii() {
                lowered.push_str(word);
                lowered.make_ascii_lowercase();
            } else {
                lowered.extend(word.chars().flat_map(char::to_lowercase));
            }
            if STOP_WORDS.binary_search(&lowered.as_str()).is_err() {
                emit(stem(&lowered));
            }
        });
    }
}

/// The stems of `text`, in order.
pub(crate) fn stems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_stem(text, |stem| out.push(stem.to_owned()));
    out
}

/// Splits one alphanumeric run at case changes: before an uppercase letter that follows a lowercase letter or
/// digit, and before the last capital of an acronym followed by lowercase (`HTMLPage` → `HTML`, `Page`).
fn each_case_word(run: &str, mut word: impl FnMut(&str)) {
    let mut start = 0;
    let mut previous: Option<char> = None;
    let mut chars = run.char_indices().peekable();
    while let Some((at, current)) = chars.next() {
        if let Some(previous) = previous {
            let next_is_lower = chars.peek().is_some_and(|(_, next)| next.is_lowercase());
            let acronym_ends = previous.is_uppercase() && next_is_lower;
            if current.is_uppercase() && (previous.is_lowercase() || previous.is_numeric() || acronym_ends) {
                word(&run[start..at]);
                start = at;
            }
        }
        previous = Some(current);
    }
    word(&run[start..]);
}

/// A light stemmer for English: plural and verb endings, then a final `y`, `e` or doubled consonant, with at
/// least three letters kept. A stem is always a prefix of its word.
fn stem(word: &str) -> &str {
    if word.len() <= 3 || !word.is_ascii() {
        return word;
    }
    let mut stem = plural(word);
    if stem.len() > 4 && stem.ends_with('y') {
        // `repositories` and `repository` meet at `repositor`.
        stem = &stem[..stem.len() - 1];
    }
    for ending in ["ing", "ed"] {
        if let Some(rest) = stem.strip_suffix(ending).filter(|rest| rest.len() >= 3) {
            stem = undouble(rest);
            break;
        }
    }
    match stem.strip_suffix('e') {
        Some(rest) if rest.len() >= 3 => rest,
        _ => stem,
    }
}

fn plural(word: &str) -> &str {
    if let Some(rest) = word.strip_suffix("ies").filter(|rest| rest.len() >= 2) {
        return rest;
    }
    for hissing in ["sses", "ches", "shes", "xes", "zes"] {
        if word.ends_with(hissing) {
            return &word[..word.len() - 2];
        }
    }
    match word.strip_suffix('s') {
        Some(rest) if !rest.ends_with('s') && !rest.ends_with('u') && !rest.ends_with('i') => rest,
        _ => word,
    }
}

/// `runn` → `run`, `stopp` → `stop`; `ll`, `ss` and `zz` stay (`pull`, `pass`).
fn undouble(rest: &str) -> &str {
    let bytes = rest.as_bytes();
    let [.., before, last] = bytes else { return rest };
    let keeps = matches!(last, b'l' | b's' | b'z') || !last.is_ascii_alphabetic() || b"aeiou".contains(last);
    if before == last && !keeps { &rest[..rest.len() - 1] } else { rest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_snake_camel_and_kebab_case() {
        assert_eq!(stems("create_issue"), ["creat", "issu"]);
        assert_eq!(stems("createIssue"), ["creat", "issu"]);
        assert_eq!(stems("create-issue"), ["creat", "issu"]);
        assert_eq!(stems("getHTMLPage"), ["get", "html", "pag"]);
        assert_eq!(stems("github__list_pull_requests"), ["github", "list", "pull", "request"]);
    }

    #[test]
    fn inflections_of_one_word_meet_at_one_stem() {
        for group in [
            &["issue", "issues"][..],
            &["list", "lists", "listing", "listed"],
            &["create", "creates", "created", "creating"],
            &["repository", "repositories"],
            &["branch", "branches"],
            &["run", "running"],
            &["stop", "stopped"],
            &["query", "queries"],
            &["array", "arrays"],
        ] {
            let first = stems(group[0]);
            for word in group {
                assert_eq!(stems(word), first, "{word} vs {}", group[0]);
            }
        }
        assert_eq!(stems("pull"), ["pull"], "a double l stays");
        assert_eq!(stems("status"), ["status"], "a word ending in -us is not a plural");
    }

    #[test]
    fn the_stop_words_are_sorted_for_their_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn function_words_are_dropped() {
        assert_eq!(stems("Get the contents of a file"), ["get", "content", "fil"]);
    }
}
