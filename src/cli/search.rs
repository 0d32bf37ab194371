//! `switchyard tools search "QUERY" [--principal P] [--limit N]`: what an agent's `switchyard__search_tools` would
//! find, ranked the same way, after one discovery of every backend.
//!
//! Rules: with `--principal`, that principal's policies filter before ranking, with the groups its
//! `[[auth.api_keys]]` entries give it (a JWT principal's groups come from its token and are not known here);
//! without, every tool counts. Backends choose names and descriptions, so they are printed escaped (as every table is).

use std::process::ExitCode;

use switchyard::auth::Principal;
use switchyard::config::Config;
use switchyard::router::{CallRouter, View};

use super::table::{first_line, print_table};
use super::terminal::escaped;

/// Prints the ranked hits of `query`; exit status 1 when nothing matches.
pub fn print(router: &CallRouter, config: &Config, query: &str, principal: Option<&str>, limit: usize) -> ExitCode {
    let principal = principal.map(|name| principal_of(config, name));
    let hits = router.find_tools(principal.as_ref(), View::All, query, limit);
    let text = |hit: &serde_json::Value, member: &str| {
        hit.get(member).and_then(|text| text.as_str()).unwrap_or_default().to_owned()
    };
    let rows = (1..)
        .zip(&hits)
        .map(|(rank, hit)| [rank.to_string(), text(hit, "name"), first_line(&text(hit, "description"), 70)])
        .collect();
    print_table(["RANK", "NAME", "DESCRIPTION"], rows);
    match hits.is_empty() {
        true => {
            eprintln!("no tool matches {:?}", escaped(query));
            ExitCode::FAILURE
        }
        false => ExitCode::SUCCESS,
    }
}

/// The principal `name`, with the groups its API keys give it.
fn principal_of(config: &Config, name: &str) -> Principal {
    let keys = config.auth.api_keys.iter().filter(|key| key.principal == name);
    let mut groups: Vec<String> = keys.flat_map(|key| key.groups.iter().cloned()).collect();
    groups.sort_unstable();
    groups.dedup();
    Principal { name: name.to_owned(), groups }
}
