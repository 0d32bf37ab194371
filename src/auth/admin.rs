//! Who may read the operator's console: principals listed in `[auth] admin_principals`
//! (by name or `group:NAME`) and every principal carrying the group [`ADMIN_GROUP`].
//!
//! Rules: `anonymous` — an agent that sent no credential — is never an administrator, whatever the list says, so
//! a console beyond loopback always needs a credential. Groups are those of the credential on this very request,
//! as for policies. Whether a loopback caller needs no credential at all is the front's rule (it knows peers).

use super::{Principal, Subject};

/// The group whose members are administrators without being listed.
pub const ADMIN_GROUP: &str = "admin";

/// The administrators, lowered from `[auth] admin_principals`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admins {
    listed: Vec<Subject>,
}

impl Admins {
    pub fn new(listed: Vec<Subject>) -> Self {
        Self { listed }
    }

    /// Whether `principal` may read the operator's console.
    pub fn admits(&self, principal: &Principal) -> bool {
        if principal.name == Principal::ANONYMOUS {
            return false;
        }
        principal.groups.iter().any(|group| group == ADMIN_GROUP) || self.listed.iter().any(|s| s.matches(principal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(name: &str, groups: &[&str]) -> Principal {
        Principal { name: name.into(), groups: groups.iter().map(|group| (*group).to_owned()).collect() }
    }

    #[test]
    fn listed_names_listed_groups_and_the_admin_group_are_admitted() {
        let admins = Admins::new(vec![Subject::Principal("alice".into()), Subject::Group("ops".into())]);
        assert!(admins.admits(&principal("alice", &[])));
        assert!(admins.admits(&principal("olga", &["ops"])));
        assert!(admins.admits(&principal("carol", &["readers", "admin"])));
        assert!(!admins.admits(&principal("bob", &["readers"])));
        assert!(!admins.admits(&principal("Alice", &[])), "names are compared exactly");
        assert!(Admins::default().admits(&principal("carol", &["admin"])), "the admin group needs no list");
        assert!(!Admins::default().admits(&principal("bob", &[])));
    }

    #[test]
    fn anonymous_is_never_an_administrator() {
        let admins = Admins::new(vec![Subject::Anyone, Subject::Principal(Principal::ANONYMOUS.into())]);
        assert!(!admins.admits(&Principal::anonymous()));
        assert!(!admins.admits(&principal(Principal::ANONYMOUS, &[ADMIN_GROUP])));
        assert!(admins.admits(&principal("bob", &[])), "`*` admits every authenticated principal");
    }
}
