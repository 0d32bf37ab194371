//! The query strings of the console API: `?backend=&tool=&outcome=&principal=&limit=` for calls, `?limit=` for
//! unknown calls and approvals, `?ticket=` for an approval link.
//!
//! Rules: a parameter the endpoint does not know, or one given twice, is refused (a typo must not silently
//! widen the list); an empty value means "any" (a form's empty field); `limit` is a whole number from 1 to
//! `router::inspect::MAX_CALLS`, default `DEFAULT_CALLS`. Refusals are [`FrontError::BadAdminQuery`].

use super::super::error::FrontError;
use crate::router::inspect::{CallQuery, DEFAULT_CALLS, MAX_CALLS};

/// The parameters of `/admin/api/calls`.
const CALL_PARAMETERS: [&str; 5] = ["backend", "tool", "outcome", "principal", "limit"];

/// `/admin/api/calls`'s query.
pub(super) fn call_query(query: Option<&str>) -> Result<CallQuery, FrontError> {
    let mut found = parameters(query, &CALL_PARAMETERS)?;
    let mut take = |name: &str| found.iter_mut().find(|(key, _)| key == name).and_then(|(_, value)| value.take());
    Ok(CallQuery {
        backend: take("backend"),
        tool: take("tool"),
        outcome: take("outcome"),
        principal: take("principal"),
        limit: take("limit").map_or(Ok(DEFAULT_CALLS), |text| limit(&text))?,
    })
}

/// `/admin/api/calls/unknown`'s query: its limit.
pub(super) fn limit_query(query: Option<&str>) -> Result<usize, FrontError> {
    let found = parameters(query, &["limit"])?;
    found.into_iter().find_map(|(_, value)| value).map_or(Ok(DEFAULT_CALLS), |text| limit(&text))
}

/// `/admin/api/approvals/link`'s query: its ticket (required).
pub(super) fn ticket_query(query: Option<&str>) -> Result<String, FrontError> {
    let found = parameters(query, &["ticket"])?;
    let ticket = found.into_iter().find_map(|(_, value)| value);
    ticket.ok_or_else(|| FrontError::BadAdminQuery { parameter: "ticket".into(), expected: "the link's ticket".into() })
}

/// Each of `known` with its value (`None` when absent or empty); refuses unknown and repeated parameters.
fn parameters(query: Option<&str>, known: &[&str]) -> Result<Vec<(String, Option<String>)>, FrontError> {
    let mut found: Vec<(String, Option<String>)> = Vec::new();
    for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if !known.contains(&name.as_ref()) {
            let expected = format!("one of {}", known.join(", "));
            return Err(FrontError::BadAdminQuery { parameter: name.into_owned(), expected });
        }
        if found.iter().any(|(seen, _)| *seen == name) {
            return Err(FrontError::BadAdminQuery { parameter: name.into_owned(), expected: "given once".into() });
        }
        let value = (!value.is_empty()).then(|| value.into_owned());
        found.push((name.into_owned(), value));
    }
    Ok(found)
}

fn limit(text: &str) -> Result<usize, FrontError> {
    match text.parse::<usize>() {
        Ok(limit) if (1..=MAX_CALLS).contains(&limit) => Ok(limit),
        _ => Err(FrontError::BadAdminQuery {
            parameter: "limit".into(),
            expected: format!(
                "a whole number from 1 to {MAX_CALLS}, not `{}`",
                text.chars().take(40).collect::<String>()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<impl std::fmt::Debug, FrontError>) -> (String, String) {
        match result {
            Err(FrontError::BadAdminQuery { parameter, expected }) => (parameter, expected),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn call_filters_are_read_and_empty_means_any() {
        let query = call_query(Some("backend=docs&tool=search%20all&outcome=unknown&principal=a%2Bb&limit=7"));
        let expected = CallQuery {
            backend: Some("docs".into()),
            tool: Some("search all".into()),
            outcome: Some("unknown".into()),
            principal: Some("a+b".into()),
            limit: 7,
        };
        assert_eq!(query.expect("valid"), expected);
        let empty = call_query(Some("backend=&tool=&outcome=&principal=&limit=")).expect("valid");
        assert_eq!(empty, CallQuery { limit: DEFAULT_CALLS, ..CallQuery::default() });
        assert_eq!(call_query(None).expect("valid").limit, DEFAULT_CALLS);
        assert_eq!(limit_query(Some("limit=1000")).expect("valid"), 1000);
    }

    #[test]
    fn unknown_repeated_and_out_of_range_parameters_are_refused() {
        let (parameter, expected) = refusal(call_query(Some("outcom=unknown")));
        assert_eq!(parameter, "outcom");
        assert!(expected.contains("backend, tool, outcome, principal, limit"), "{expected}");
        assert_eq!(refusal(call_query(Some("tool=a&tool=b"))), ("tool".into(), "given once".into()));
        for bad in ["0", "1001", "ten", "-1", "1.5"] {
            let (parameter, expected) = refusal(call_query(Some(&format!("limit={bad}"))));
            assert_eq!(parameter, "limit");
            assert!(expected.contains("from 1 to 1000") && expected.contains(bad), "{expected}");
        }
        assert_eq!(refusal(limit_query(Some("backend=x"))).0, "backend");
        assert_eq!(refusal(ticket_query(None)), ("ticket".into(), "the link's ticket".into()));
        assert_eq!(ticket_query(Some("ticket=a.b")).expect("given"), "a.b");
    }
}
