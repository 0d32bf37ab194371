//! The approvals page's signed texts, both sealed ([`crate::seal`]) under keys derived from the session secret,
//! so every replica that shares the secret accepts what another one issued:
//! - the **form token** (`x-csrf-token`) that a decision must carry: issued with the list of requests to the
//!   approver who reads it, naming that approver and the time, good for [`FORM_TOKEN_TTL`]. A page of another
//!   site never reads the list, so it cannot post a decision even where the console lets callers of this machine
//!   in without a credential;
//! - the **link ticket** in the `notify_url` announcement's `page_url`: it names one request, and lets whoever
//!   holds it see that request (never its arguments) until it is decided or expires, so it serves once. Deciding
//!   still takes an approver's credential: a chat channel's readers are not approvers.

use crate::seal::{KEY_LEN, Seal, derive_key};

/// How long a form token is accepted after it was issued.
pub const FORM_TOKEN_TTL: u64 = 12 * 3600;
/// The longest token or ticket opened (a claim key is at most 1 KiB; base64 and the tag add under half).
const MAX_TEXT_LEN: usize = 2048;

/// Issues and checks the approvals page's form tokens and link tickets.
#[derive(Clone)]
pub struct ConsoleTickets {
    form: Seal,
    link: Seal,
}

impl std::fmt::Debug for ConsoleTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleTickets(<keyed>)")
    }
}

impl ConsoleTickets {
    /// Tickets keyed by `secret` (the session secret).
    pub fn new(secret: &[u8; KEY_LEN]) -> ConsoleTickets {
        let form = derive_key(secret, b"switchyard/console-form-key/v1");
        let link = derive_key(secret, b"switchyard/approval-link-key/v1");
        ConsoleTickets {
            form: Seal::new(&form, b"switchyard/console-form/v1\n"),
            link: Seal::new(&link, b"switchyard/approval-link/v1\n"),
        }
    }

    /// The form token of `decider` at `now_unix`.
    pub fn form_token(&self, decider: &str, now_unix: u64) -> String {
        let mut payload = now_unix.to_be_bytes().to_vec();
        payload.extend_from_slice(decider.as_bytes());
        self.form.seal(&payload)
    }

    /// Whether `token` is a form token of `decider`, issued at most [`FORM_TOKEN_TTL`] before `now_unix`.
    pub fn form_token_admits(&self, token: &str, decider: &str, now_unix: u64) -> bool {
        let Some(payload) = open(&self.form, token) else { return false };
        let Some((issued, name)) = payload.split_first_chunk::<8>() else { return false };
        let issued = u64::from_be_bytes(*issued);
        name == decider.as_bytes() && issued <= now_unix && now_unix - issued <= FORM_TOKEN_TTL
    }

    /// The link ticket of the request under the claim key `key`.
    pub fn link_ticket(&self, key: &str) -> String {
        self.link.seal(key.as_bytes())
    }

    /// The claim key a link ticket names, if this gateway's secret signed it.
    pub fn open_link(&self, ticket: &str) -> Option<String> {
        let payload = open(&self.link, ticket)?;
        String::from_utf8(payload).ok()
    }
}

fn open(seal: &Seal, text: &str) -> Option<Vec<u8>> {
    (text.len() <= MAX_TEXT_LEN).then(|| seal.open(text).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn a_form_token_names_its_decider_and_lasts_its_ttl() {
        let tickets = ConsoleTickets::new(&[3; KEY_LEN]);
        let token = tickets.form_token("alice", NOW);
        assert!(tickets.form_token_admits(&token, "alice", NOW + FORM_TOKEN_TTL));
        assert!(!tickets.form_token_admits(&token, "alice", NOW + FORM_TOKEN_TTL + 1), "expired");
        assert!(!tickets.form_token_admits(&token, "alic", NOW), "another decider");
        assert!(!tickets.form_token_admits(&token, "alice", NOW - 1), "issued in the future");
        let other = ConsoleTickets::new(&[4; KEY_LEN]);
        assert!(!other.form_token_admits(&token, "alice", NOW), "another secret");
        assert!(!tickets.form_token_admits("", "alice", NOW) && !tickets.form_token_admits("a.b", "alice", NOW));
    }

    #[test]
    fn a_link_ticket_opens_to_its_key_and_is_no_form_token() {
        let tickets = ConsoleTickets::new(&[3; KEY_LEN]);
        let key = "idem:3:bob:k-1";
        let ticket = tickets.link_ticket(key);
        assert_eq!(tickets.open_link(&ticket).as_deref(), Some(key));
        assert!(!tickets.form_token_admits(&ticket, "idem:3:bob:k-1", NOW), "a ticket is not a form token");
        assert_eq!(tickets.open_link(&tickets.form_token("idem:3:bob:k", NOW)), None, "nor a token a ticket");
        assert_eq!(ConsoleTickets::new(&[4; KEY_LEN]).open_link(&ticket), None);
        assert_eq!(tickets.open_link(&"x".repeat(MAX_TEXT_LEN + 1)), None);
    }
}
