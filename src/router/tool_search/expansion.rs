//! The tools searches added to each agent session's `tools/list` (`[catalog] expand`).
//!
//! Rules: a session keeps at most `expand_max` names, in the order found (a name found again moves to the
//! newest place; the oldest leaves first). The table holds at most [`MAX_SESSIONS`] sessions: past that, the
//! session expanded longest ago loses its list (it can still search and call; only its listing shrinks). An
//! ended session's list is forgotten with it. The table is this replica's alone: on another replica the same
//! session lists the gateway tools only, and calls by name work everywhere.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

use crate::mcp::SessionHolder;

/// The most sessions whose found tools are remembered at once.
const MAX_SESSIONS: usize = 10_000;

#[derive(Default)]
pub(in crate::router) struct Expansions {
    sessions: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Each session's found names, oldest first, and when it last gained one.
    lists: HashMap<SessionHolder, (VecDeque<String>, u64)>,
    clock: u64,
}

impl Expansions {
    /// Adds `names` to the session's list, keeping the newest `max`; whether the list changed.
    pub(in crate::router) fn add<'a>(
        &self,
        session: &SessionHolder,
        names: impl Iterator<Item = &'a str>,
        max: usize,
    ) -> bool {
        let mut table = self.sessions.lock();
        table.clock += 1;
        let now = table.clock;
        if !table.lists.contains_key(session) && table.lists.len() >= MAX_SESSIONS {
            let oldest = table.lists.iter().min_by_key(|(_, (_, touched))| *touched).map(|(key, _)| key.clone());
            oldest.map(|key| table.lists.remove(&key));
        }
        let (list, touched) = table.lists.entry(session.clone()).or_default();
        *touched = now;
        let before = list.clone();
        for name in names {
            list.retain(|known| known != name);
            list.push_back(name.to_owned());
        }
        while list.len() > max {
            list.pop_front();
        }
        *list != before
    }

    /// The session's found names, oldest first.
    pub(in crate::router) fn names(&self, session: &SessionHolder) -> Vec<String> {
        self.sessions.lock().lists.get(session).map(|(list, _)| list.iter().cloned().collect()).unwrap_or_default()
    }

    pub(in crate::router) fn forget(&self, session: &SessionHolder) {
        self.sessions.lock().lists.remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_max_names_and_says_when_the_list_changed() {
        let expansions = Expansions::default();
        let session = SessionHolder::agent("s");
        assert!(expansions.add(&session, ["a", "b"].into_iter(), 3));
        assert!(!expansions.add(&session, ["b"].into_iter(), 3), "the same newest name: no change");
        assert!(expansions.add(&session, ["a", "c", "d"].into_iter(), 3));
        assert_eq!(expansions.names(&session), ["a", "c", "d"], "b was the oldest once a was found again");
        assert!(expansions.names(&SessionHolder::agent("other")).is_empty(), "lists are per session");
        expansions.forget(&session);
        assert!(expansions.names(&session).is_empty());
    }
}
