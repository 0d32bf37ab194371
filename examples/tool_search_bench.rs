//! The tool-search retrieval benchmark (`bench/search/`): how often the gateway's ranking puts the tool that
//! solves a task first, or in the first five, against a plain substring baseline; what `tools/list` costs in
//! either mode; and how long building the index and searching take at 2,000 tools. Not part of the gateway.
//!
//!     tool_search_bench CATALOG.json TASKS.json
//!
//! CATALOG.json is `bench/search/catalog.json` (servers, each with its tools), TASKS.json `bench/search/tasks.json`
//! (`[{"task": "...", "tools": ["backend__tool", ...]}]`: any listed tool solves the task). Each server becomes a
//! backend of that name with the default prefix, so tools are named as an agent behind the gateway sees them.
//! Prints one line per figure.

use std::collections::HashSet;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard::catalog::{BackendSpec, Catalog, Listing, View};
use switchyard::router::tool_search::gateway_tools;

#[derive(Deserialize)]
struct Server {
    backend: String,
    tools: Vec<Value>,
}

#[derive(Deserialize)]
struct Task {
    task: String,
    tools: Vec<String>,
}

/// The size the index is timed at.
const LARGE: usize = 2000;
const TOP: usize = 5;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [catalog, tasks] = args.as_slice() else { bail!("usage: tool_search_bench CATALOG.json TASKS.json") };
    let servers: Vec<Server> = serde_json::from_str(&std::fs::read_to_string(catalog).context("CATALOG")?)?;
    let tasks: Vec<Task> = serde_json::from_str(&std::fs::read_to_string(tasks).context("TASKS")?)?;
    let gateway = catalog_of(&servers, 1);
    let exposed: HashSet<String> = gateway.routes().iter().map(|route| route.exposed.clone()).collect();
    for task in &tasks {
        if let Some(unknown) = task.tools.iter().find(|tool| !exposed.contains(*tool)) {
            bail!("task {:?} names {unknown}, which is not in the catalog", task.task);
        }
    }
    println!("catalog: {} servers, {} tools; {} tasks", servers.len(), exposed.len(), tasks.len());

    let definitions = listed(&gateway);
    let ranked = |query: &str| -> Vec<String> {
        gateway.search_tools(View::All, query, TOP, |_| true).iter().map(|hit| name(hit).to_owned()).collect()
    };
    report("bm25", &tasks, ranked);
    report("substring", &tasks, |query| substring_rank(&definitions, query));

    let full = serde_json::to_vec(&json!({"tools": definitions}))?.len();
    let search = serde_json::to_vec(&json!({"tools": gateway_tools()}))?.len();
    println!("tools/list bytes: full={full} search={search} ratio={:.1}", full as f64 / search as f64);

    time_large(&servers, &tasks);
    Ok(())
}

/// A catalog of `copies` of every server (the copies under numbered backend names), fully discovered.
fn catalog_of(servers: &[Server], copies: usize) -> Catalog {
    let names: Vec<String> =
        (0..copies).flat_map(|copy| servers.iter().map(move |server| backend_name(&server.backend, copy))).collect();
    let specs = names.iter().map(|name| BackendSpec {
        name: name.as_str().into(),
        prefix: format!("{name}__"),
        exposes: Box::new(|_| true),
        resource_prefix: None,
    });
    let catalog = Catalog::new(specs.collect());
    for (copy, server) in (0..copies).flat_map(|copy| servers.iter().map(move |server| (copy, server))) {
        let listing = Listing { capabilities: json!({"tools": {}}), tools: server.tools.clone(), ..Listing::default() };
        catalog.update(&backend_name(&server.backend, copy), Ok(listing));
    }
    catalog
}

fn backend_name(backend: &str, copy: usize) -> String {
    if copy == 0 { backend.to_owned() } else { format!("{backend}{copy}") }
}

/// Every definition a full-mode `tools/list` at `/mcp` carries.
fn listed(catalog: &Catalog) -> Vec<Value> {
    catalog.routes().iter().map(|route| route.definition.clone()).collect()
}

fn name(definition: &Value) -> &str {
    definition.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// recall@1, recall@5 and MRR (over the first five) of `rank` on `tasks`.
fn report(label: &str, tasks: &[Task], rank: impl Fn(&str) -> Vec<String>) {
    let (mut first, mut five, mut reciprocal) = (0usize, 0usize, 0.0);
    let mut missed = Vec::new();
    for task in tasks {
        let found = rank(&task.task);
        match found.iter().take(TOP).position(|hit| task.tools.contains(hit)) {
            Some(position) => {
                first += usize::from(position == 0);
                five += 1;
                reciprocal += 1.0 / (position + 1) as f64;
            }
            None => missed.push(task.task.as_str()),
        }
    }
    let count = tasks.len() as f64;
    println!(
        "{label}: recall@1={:.3} recall@5={:.3} mrr={:.3}",
        first as f64 / count,
        five as f64 / count,
        reciprocal / count
    );
    if std::env::var_os("SHOW_MISSES").is_some() {
        missed.iter().for_each(|task| println!("  {label} missed: {task}"));
    }
}

/// The baseline: tools ranked by how many of the query's words (three letters or more, lowercased) occur as
/// substrings of their name or description, ties in catalog order; tools containing none are not returned.
fn substring_rank(definitions: &[Value], query: &str) -> Vec<String> {
    let lowered = query.to_lowercase();
    let words: Vec<&str> = lowered.split(|c: char| !c.is_alphanumeric()).filter(|word| word.len() >= 3).collect();
    let mut scored: Vec<(usize, usize)> = definitions
        .iter()
        .enumerate()
        .map(|(position, definition)| {
            let description = definition.get("description").and_then(Value::as_str).unwrap_or_default();
            let text = format!("{} {description}", name(definition)).to_lowercase();
            (words.iter().filter(|word| text.contains(**word)).count(), position)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.iter().take(TOP).map(|(_, position)| name(&definitions[*position]).to_owned()).collect()
}

/// The index's build and one search's CPU time at [`LARGE`] tools (the catalog copied under new backend names),
/// the median of a few fresh catalogs (this thread's CPU, so a busy machine does not count).
fn time_large(servers: &[Server], tasks: &[Task]) {
    let per_copy: usize = servers.iter().map(|server| server.tools.len()).sum();
    let copies = LARGE.div_ceil(per_copy.max(1));
    let mut firsts = Vec::new();
    let mut searches = Vec::new();
    let mut tools = 0;
    for _ in 0..5 {
        let catalog = catalog_of(servers, copies);
        tools = catalog.routes().len();
        let started = thread_cpu();
        catalog.search_tools(View::All, "warm up", 1, |_| true);
        firsts.push(thread_cpu() - started);
        let started = thread_cpu();
        for task in tasks {
            std::hint::black_box(catalog.search_tools(View::All, &task.task, TOP, |_| true));
        }
        searches.push((thread_cpu() - started) / tasks.len() as f64);
    }
    let (first, search) = (median(&mut firsts), median(&mut searches));
    println!(
        "at {tools} tools: index build {:.1} ms CPU (the first search, less one search); one search {:.0} us CPU",
        (first - search) * 1e3,
        search * 1e6
    );
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// This thread's CPU time in seconds (`/proc/thread-self/schedstat`: nanoseconds on a CPU first).
fn thread_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()).unwrap_or(0.0) / 1e9
}
