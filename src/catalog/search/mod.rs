//! The tool search index: BM25 over each tool's words, for `[catalog] mode = "search"` (docs/tool-search.md).
//!
//! Rules:
//! - A tool is one document of weighted fields: its name split into words, its backend's name, its title, its
//!   description, its parameters' names and their descriptions ([`WEIGHTS`]). An occurrence counts its field's
//!   weight towards the term's frequency and the document's length (BM25F's simple form), so a word in the name
//!   outweighs the same word in a parameter's description. The weights were chosen by the retrieval benchmark in
//!   `bench/search/` (BENCHMARKS.md).
//! - The caller's filter runs before ranking: which tools exist for the ranking (the collection size, the
//!   document frequencies, the average length) is decided by what the caller may see, so a tool the caller may
//!   not use never appears and never changes the answer.
//! - One index per catalog snapshot, built on the first search after a change, so a catalog nobody searches
//!   (`mode = "full"`) never pays for one.
//! - Ties keep catalog order (configuration order, then each backend's), so an answer is reproducible.

mod words;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::Route;

/// Weight of an occurrence in each field: name, backend name, title, description, parameter name, parameter
/// description.
const WEIGHTS: Weights =
    Weights { name: 3.0, backend: 1.0, title: 2.0, description: 1.0, parameter: 1.5, parameter_description: 0.5 };

/// BM25's term-frequency saturation and length normalization, at their usual values.
const K1: f32 = 1.2;
const B: f32 = 0.75;

struct Weights {
    name: f32,
    backend: f32,
    title: f32,
    description: f32,
    parameter: f32,
    parameter_description: f32,
}

/// An inverted index over a list of routes, by position in that list.
pub(super) struct Index {
    /// Each stem's number: its place in `postings`.
    terms: HashMap<String, u32>,
    /// Each term's documents, in document order, with the term's weighted frequency in each.
    postings: Vec<Vec<(u32, f32)>>,
    /// Each document's weighted length.
    lengths: Vec<f32>,
}

impl Index {
    pub(super) fn build(routes: &[Arc<Route>]) -> Index {
        let mut index =
            Index { terms: HashMap::new(), postings: Vec::new(), lengths: Vec::with_capacity(routes.len()) };
        // One document's (term, weight) occurrences, reused from one document to the next.
        let mut occurrences: Vec<(u32, f32)> = Vec::new();
        for (document, route) in (0u32..).zip(routes) {
            let mut length = 0.0;
            each_field(route, |weight, text| {
                words::each_stem(text, |stem| {
                    occurrences.push((index.term(stem), weight));
                    length += weight;
                });
            });
            occurrences.sort_unstable_by_key(|(term, _)| *term);
            for run in occurrences.chunk_by(|a, b| a.0 == b.0) {
                let frequency = run.iter().map(|(_, weight)| weight).sum();
                index.postings[run[0].0 as usize].push((document, frequency));
            }
            occurrences.clear();
            index.lengths.push(length);
        }
        index
    }

    /// The number of `stem`, given it now if it has none.
    fn term(&mut self, stem: &str) -> u32 {
        if let Some(&term) = self.terms.get(stem) {
            return term;
        }
        let term = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
        self.terms.insert(stem.to_owned(), term);
        self.postings.push(Vec::new());
        term
    }

    /// The positions of at most `limit` documents `candidate` accepts, best first, ranked by BM25 against
    /// `query` among the accepted documents alone; none when no query word occurs in any.
    pub(super) fn search(&self, query: &str, limit: usize, candidate: impl Fn(usize) -> bool) -> Vec<usize> {
        let accepted: Vec<bool> = (0..self.lengths.len()).map(candidate).collect();
        let count = accepted.iter().filter(|&&accepted| accepted).count();
        if count == 0 {
            return Vec::new();
        }
        let total: f32 = self.lengths.iter().zip(&accepted).filter(|(_, accepted)| **accepted).map(|(l, _)| l).sum();
        let average = (total / count as f32).max(f32::EPSILON);
        let mut terms: Vec<u32> =
            words::stems(query).iter().filter_map(|stem| self.terms.get(stem.as_str()).copied()).collect();
        terms.sort_unstable();
        terms.dedup();
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in terms {
            let postings = &self.postings[term as usize];
            let shown: Vec<&(u32, f32)> =
                postings.iter().filter(|(document, _)| accepted[*document as usize]).collect();
            let frequency = shown.len() as f32;
            let idf = (1.0 + (count as f32 - frequency + 0.5) / (frequency + 0.5)).ln();
            for &&(document, tf) in &shown {
                let norm = K1 * (1.0 - B + B * self.lengths[document as usize] / average);
                *scores.entry(document).or_default() += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(u32, f32)> = scores.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.into_iter().take(limit).map(|(document, _)| document as usize).collect()
    }
}

/// Calls `field` with each searchable text of a tool and its weight.
fn each_field(route: &Route, mut field: impl FnMut(f32, &str)) {
    let definition = &route.bare;
    let text = |pointer: &str| definition.pointer(pointer).and_then(Value::as_str);
    field(WEIGHTS.name, &route.name);
    field(WEIGHTS.backend, &route.backend);
    if let Some(title) = text("/title").or_else(|| text("/annotations/title")) {
        field(WEIGHTS.title, title);
    }
    if let Some(description) = text("/description") {
        field(WEIGHTS.description, description);
    }
    let properties = definition.pointer("/inputSchema/properties").and_then(Value::as_object);
    for (parameter, schema) in properties.into_iter().flatten() {
        field(WEIGHTS.parameter, parameter);
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            field(WEIGHTS.parameter_description, description);
        }
    }
}

#[cfg(test)]
mod tests;
