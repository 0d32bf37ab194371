//! Unit tests of the policy model: what a principal sees and may use, deny over allow, groups and approvals.

use super::*;

fn globs(patterns: &[&str]) -> Vec<Glob> {
    patterns.iter().map(|pattern| Glob::new(pattern).expect("valid")).collect()
}

fn policy(subjects: Vec<Subject>, allow: &[&str], deny: &[&str], backends: &[&str]) -> Policy {
    Policy {
        subjects,
        allow: globs(allow),
        deny: globs(deny),
        approve: Vec::new(),
        backends: backends.iter().map(|name| (*name).to_owned()).collect(),
    }
}

fn principal(name: &str, groups: &[&str]) -> Principal {
    Principal { name: name.to_owned(), groups: groups.iter().map(|group| (*group).to_owned()).collect() }
}

#[test]
fn no_policies_allow_everything() {
    let none = Policies::default();
    let anyone = Principal::anonymous();
    assert!(none.may_use_tool(&anyone, "github__delete_repo"));
    assert!(none.may_use_prompt(&anyone, "anything"));
    assert!(none.may_use_backend_resources(&anyone, "docs"));
}

#[test]
fn deny_wins_over_allow_from_any_applicable_policy() {
    let policies = Policies::new(vec![
        policy(vec![Subject::Anyone], &["github__*"], &[], &[]),
        policy(vec![Subject::Group("contractors".into())], &[], &["github__delete_*"], &[]),
    ]);
    let staff = principal("alice", &["staff"]);
    let contractor = principal("carol", &["contractors"]);
    assert!(policies.may_use_tool(&staff, "github__delete_repo"));
    assert!(policies.may_use_tool(&contractor, "github__get_issue"));
    assert!(!policies.may_use_tool(&contractor, "github__delete_repo"));
    assert!(!policies.may_use_tool(&staff, "docs__search"), "allowed by no policy");
}

#[test]
fn policies_apply_by_name_group_or_star() {
    let policies = Policies::new(vec![
        policy(vec![Subject::Principal("alice".into())], &["admin_*"], &[], &["github"]),
        policy(vec![Subject::Group("readers".into())], &["docs__*"], &[], &["docs"]),
    ]);
    let alice = principal("alice", &[]);
    let reader = principal("bob", &["readers"]);
    let stranger = principal("mallory", &["Readers"]);
    assert!(policies.may_use_tool(&alice, "admin_reset") && !policies.may_use_tool(&alice, "docs__search"));
    assert!(policies.may_use_prompt(&reader, "docs__summarize") && !policies.may_use_tool(&reader, "admin_x"));
    assert!(!policies.may_use_tool(&stranger, "docs__search"), "groups compare exactly");
    assert!(!policies.may_use_tool(&principal("alice2", &[]), "admin_reset"), "names compare exactly");
    assert!(policies.may_use_backend_resources(&alice, "github"));
    assert!(!policies.may_use_backend_resources(&alice, "docs"));
    assert!(policies.may_use_backend_resources(&reader, "docs"));
    assert!(!policies.may_use_backend_resources(&stranger, "docs"));
}

#[test]
fn star_backends_grant_every_backends_resources() {
    let policies = Policies::new(vec![policy(vec![Subject::Anyone], &[], &["*"], &["*"])]);
    let anyone = Principal::anonymous();
    assert!(policies.may_use_backend_resources(&anyone, "whatever"));
    assert!(!policies.may_use_tool(&anyone, "echo"), "deny `*` hides every tool");
}

#[test]
fn grants_answer_like_the_single_questions() {
    let policies = Policies::new(vec![policy(vec![Subject::Group("ops".into())], &["*"], &["rm_*"], &["a"])]);
    let ops = principal("o", &["ops"]);
    let grants = policies.for_principal(&ops);
    for name in ["ls", "rm_rf", "deploy"] {
        assert_eq!(grants.tool(name), policies.may_use_tool(&ops, name), "{name}");
    }
    assert!(grants.tool("ls") && !grants.tool("rm_rf") && grants.backend_resources("a"));
}

#[test]
fn approve_globs_apply_to_the_policys_principals_only() {
    let approving =
        Policy { approve: globs(&["pay__*"]), ..policy(vec![Subject::Group("agents".into())], &["*"], &[], &[]) };
    let policies = Policies::new(vec![approving, policy(vec![Subject::Anyone], &["*"], &[], &[])]);
    let agent = policies.for_principal(&principal("bot", &["agents"]));
    assert!(agent.needs_approval("pay__send") && !agent.needs_approval("docs__search"));
    assert!(!policies.for_principal(&principal("alice", &[])).needs_approval("pay__send"), "not in the group");
    let plain = Policies::new(vec![policy(vec![Subject::Anyone], &["*"], &[], &[])]);
    assert!(!plain.for_principal(&principal("bot", &["agents"])).needs_approval("pay__send"));
    assert!(!Policies::default().for_principal(&principal("bot", &[])).needs_approval("pay__send"));
}

#[test]
fn a_backend_not_listed_yet_is_granted_by_its_prefix() {
    let policies = Policies::new(vec![
        policy(vec![Subject::Principal("alice".into())], &["gh__*", "docs__search"], &[], &[]),
        policy(vec![Subject::Group("contractors".into())], &["*"], &["gh__*"], &[]),
    ]);
    let alice = policies.for_principal(&principal("alice", &[]));
    assert!(alice.some_name_under("gh__") && alice.some_name_under("docs__"));
    assert!(!alice.some_name_under("jira__"), "no allow names a jira__ tool");
    let contractor = policies.for_principal(&principal("carol", &["contractors"]));
    assert!(!contractor.some_name_under("gh__"), "every gh__ name is denied");
    assert!(contractor.some_name_under("jira__"));
    assert!(!policies.for_principal(&principal("mallory", &[])).some_name_under(""), "no policy applies");
    assert!(Policies::default().for_principal(&principal("anyone", &[])).some_name_under("x__"));
}
