//! Which credential an operation's request carries, and where: the document's security schemes
//! (`components.securitySchemes`) and requirements (`security`, the document's and each operation's; read by
//! [`super::schemes`]) matched with what the backend's configuration offers — its `credential` and its OAuth client. OpenAPI 3.0 §4.7.33 and 3.1
//! §4.8.27 (Security Scheme Object), §4.8.30 (Security Requirement Object).
//!
//! Rules (docs/openapi.md, *Credentials and security schemes*):
//! - An operation's own `security` replaces the document's; `security: []` asks for nothing, and the request
//!   carries no credential. An operation without either (the document declares nothing) carries what is configured,
//!   as configured: the credential in its header, the OAuth token in `Authorization`.
//! - A requirement lists alternatives, each a set of schemes that must all be filled. The first alternative
//!   (in the document's order) the configuration fills wholly is used; an empty alternative (`{}`, anonymous) only
//!   when no other is filled.
//! - A credential with `scheme` fills that scheme, in the place and form it says: `apiKey` in its header, query
//!   parameter or cookie under its `name`; `http` `bearer`, `oauth2` and `openIdConnect` as `Bearer`; `http`
//!   `basic` as `Basic` of the secret (`user:password`). A credential with `header` fills the `apiKey` scheme of
//!   that header, or — when its header is `Authorization` — an `http`, `oauth2` or `openIdConnect` one, and goes as
//!   configured. `[backends.oauth]` fills `http` `bearer`, `oauth2` and `openIdConnect` schemes.
//! - Found at load, never at a call: a `scheme` the document does not define or the gateway cannot fill, or a
//!   selected operation whose requirement the configuration cannot fill, is a [`SpecError`] naming the pointer and
//!   the fix.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use http::header::{self, HeaderName, HeaderValue};

use super::document::{SpecError, escape};
use super::operations::{Api, Operation};
use super::request::{Parts, encode};
use super::schemes::{Requirements, Scheme};
use crate::secret::Secret;

/// Where the configured credential is meant to go (the configuration's `credential.header` or `.scheme`).
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialPlace {
    Header(HeaderName),
    Scheme(String),
}

/// What the backend's configuration offers: a credential (where it goes, and its value) and an OAuth client.
#[derive(Debug, Clone)]
pub struct Offer {
    pub credential: Option<(CredentialPlace, Secret<HeaderValue>)>,
    pub oauth: bool,
}

/// What one operation's requests carry: the credential (where), the OAuth token (or not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    credential: Option<Placing>,
    pub oauth: bool,
}

/// Where one request's credential goes.
#[derive(Debug, Clone, PartialEq)]
enum Placing {
    /// In this header, the value as configured.
    AsConfigured(HeaderName),
    /// Where and how a scheme says.
    Scheme(Scheme),
}

/// Each selected operation's [`Plan`], and the credential they place.
#[derive(Debug, Clone, Default)]
pub struct Access {
    credential: Option<Secret<HeaderValue>>,
    plans: HashMap<String, Plan>,
    /// What an operation without requirements carries (and the health probe): everything configured.
    undeclared: Plan,
}

impl Access {
    /// The plans of `api`'s operations under `offer`, or why the configuration cannot call one of them.
    pub fn new(api: &Api, offer: Offer) -> Result<Access, SpecError> {
        let matcher = Matcher { schemes: &api.schemes, offer: &offer };
        let undeclared = matcher.undeclared()?;
        let mut plans = HashMap::new();
        for operation in &api.operations {
            if let Some(requirements) = &operation.security {
                plans.insert(operation.name.clone(), matcher.plan(operation, requirements)?);
            }
        }
        Ok(Access { credential: offer.credential.map(|(_, value)| value), plans, undeclared })
    }

    /// What a call of `operation` carries.
    pub fn plan(&self, operation: &Operation) -> &Plan {
        self.plans.get(&operation.name).unwrap_or(&self.undeclared)
    }

    /// What a request without an operation (the health probe) carries.
    pub fn undeclared(&self) -> &Plan {
        &self.undeclared
    }

    /// Puts the credential where `plan` says in `parts` (headers, query or cookie). The OAuth token is the
    /// session layer's business.
    pub fn place(&self, plan: &Plan, parts: &mut Parts) {
        let (Some(placing), Some(secret)) = (&plan.credential, &self.credential) else { return };
        let secret = secret.expose();
        match placing {
            Placing::AsConfigured(name) => parts.headers.push((name.clone(), secret.clone())),
            Placing::Scheme(Scheme::Header(name)) => parts.headers.push((name.clone(), secret.clone())),
            Placing::Scheme(Scheme::Query(name)) => {
                let separator = if parts.target.contains('?') { '&' } else { '?' };
                let value = encode(&String::from_utf8_lossy(secret.as_bytes()));
                parts.target.push_str(&format!("{separator}{}={value}", encode(name)));
            }
            Placing::Scheme(Scheme::Cookie(name)) => add_cookie(parts, name, secret),
            Placing::Scheme(Scheme::Bearer(_)) => authorize(parts, b"Bearer ", secret.as_bytes()),
            Placing::Scheme(Scheme::Basic) => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(secret.as_bytes());
                authorize(parts, b"Basic ", encoded.as_bytes());
            }
            Placing::Scheme(Scheme::Unusable(_)) => {}
        }
    }
}

fn authorize(parts: &mut Parts, kind: &[u8], secret: &[u8]) {
    if let Ok(mut value) = HeaderValue::from_bytes(&[kind, secret].concat()) {
        value.set_sensitive(true);
        parts.headers.push((header::AUTHORIZATION, value));
    }
}

/// Adds `name=secret` to the request's one `Cookie` header (the cookie parameters' or a new one).
fn add_cookie(parts: &mut Parts, name: &str, secret: &HeaderValue) {
    let pair = [name.as_bytes(), b"=", secret.as_bytes()].concat();
    let existing = parts.headers.iter().position(|(header, _)| header == header::COOKIE);
    let bytes = match existing {
        Some(index) => [parts.headers.remove(index).1.as_bytes(), b"; ", &pair].concat(),
        None => pair,
    };
    if let Ok(mut value) = HeaderValue::from_bytes(&bytes) {
        value.set_sensitive(true);
        parts.headers.push((header::COOKIE, value));
    }
}

/// Matches a document's schemes with an offer.
struct Matcher<'a> {
    schemes: &'a BTreeMap<String, Scheme>,
    offer: &'a Offer,
}

impl Matcher<'_> {
    /// The plan of an operation the document declares nothing for: everything configured, as configured; a
    /// `scheme` must name one the gateway can fill.
    fn undeclared(&self) -> Result<Plan, SpecError> {
        let credential = match &self.offer.credential {
            None => None,
            Some((CredentialPlace::Header(name), _)) => Some(Placing::AsConfigured(name.clone())),
            Some((CredentialPlace::Scheme(named), _)) => Some(Placing::Scheme(self.named(named)?.clone())),
        };
        let plan = Plan { credential, oauth: self.offer.oauth };
        if plan.oauth && matches!(plan.credential, Some(Placing::Scheme(Scheme::Bearer(_) | Scheme::Basic))) {
            let problem = "`credential.scheme` names a scheme sent in Authorization, where the tokens of \
                           `[backends.oauth]` go: name another scheme, or drop one of the two";
            return Err(SpecError::new("/components/securitySchemes", problem));
        }
        Ok(plan)
    }

    /// The scheme a credential's `scheme` names, if the gateway can fill it.
    fn named(&self, name: &str) -> Result<&Scheme, SpecError> {
        let Some(scheme) = self.schemes.get(name) else {
            let defined: Vec<String> = self.schemes.keys().map(|name| format!("`{name}`")).collect();
            let defined = if defined.is_empty() { "none".to_owned() } else { defined.join(", ") };
            let problem = format!(
                "`credential.scheme` names `{name}`, which the document does not define (its security schemes: \
                 {defined})"
            );
            return Err(SpecError::new("/components/securitySchemes", problem));
        };
        match scheme {
            Scheme::Unusable(why) => {
                let pointer = format!("/components/securitySchemes/{}", escape(name));
                Err(SpecError::new(&pointer, format!("`credential.scheme` names `{name}`, {why}")))
            }
            usable => Ok(usable),
        }
    }

    /// The plan of `operation`, from the first alternative of `requirements` the offer fills wholly.
    fn plan(&self, operation: &Operation, requirements: &Requirements) -> Result<Plan, SpecError> {
        let (anonymous, named): (Vec<_>, Vec<_>) =
            requirements.alternatives.iter().partition(|alternative| alternative.is_empty());
        if let Some(plan) = named.iter().find_map(|alternative| self.fill(alternative)) {
            return Ok(plan);
        }
        if !anonymous.is_empty() || requirements.alternatives.is_empty() {
            return Ok(Plan::default());
        }
        Err(SpecError::new(&requirements.pointer, self.unfilled(operation, &named)))
    }

    /// The plan that fills every scheme of `alternative`, if the offer can.
    fn fill(&self, alternative: &[String]) -> Option<Plan> {
        let mut plan = Plan::default();
        for name in alternative {
            let scheme = self.schemes.get(name)?;
            match self.placement(name, scheme) {
                Some(placing) => {
                    // One credential goes to one place: two schemes wanting it in two places cannot both be filled.
                    if plan.credential.as_ref().is_some_and(|known| *known != placing) {
                        return None;
                    }
                    plan.credential = Some(placing);
                }
                None if self.offer.oauth && matches!(scheme, Scheme::Bearer(_)) => plan.oauth = true,
                None => return None,
            }
        }
        let in_authorization = |placing: &Placing| match placing {
            Placing::AsConfigured(header) => header == header::AUTHORIZATION,
            Placing::Scheme(scheme) => matches!(scheme, Scheme::Bearer(_) | Scheme::Basic),
        };
        match plan.oauth && plan.credential.as_ref().is_some_and(in_authorization) {
            true => None,
            false => Some(plan),
        }
    }

    /// Where the configured credential goes to fill `scheme` (named `name`), if it fills it.
    fn placement(&self, name: &str, scheme: &Scheme) -> Option<Placing> {
        let (place, _) = self.offer.credential.as_ref()?;
        let as_configured = |header: &HeaderName| Placing::AsConfigured(header.clone());
        match (place, scheme) {
            (_, Scheme::Unusable(_)) => None,
            (CredentialPlace::Scheme(named), scheme) => (named == name).then(|| Placing::Scheme(scheme.clone())),
            (CredentialPlace::Header(header), Scheme::Header(wanted)) => {
                (header == wanted).then(|| as_configured(header))
            }
            (CredentialPlace::Header(header), Scheme::Bearer(_) | Scheme::Basic) => {
                (header == header::AUTHORIZATION).then(|| as_configured(header))
            }
            (CredentialPlace::Header(_), Scheme::Query(_) | Scheme::Cookie(_)) => None,
        }
    }

    /// Why no alternative of `named` is filled, and what to do.
    fn unfilled(&self, operation: &Operation, named: &[&Vec<String>]) -> String {
        let describe = |name: &String| match self.schemes.get(name) {
            Some(scheme) => format!("`{name}` ({scheme})"),
            None => format!("`{name}` (not defined in `components.securitySchemes`)"),
        };
        let alternatives: Vec<String> = named
            .iter()
            .map(|alternative| alternative.iter().map(describe).collect::<Vec<_>>().join(" and "))
            .collect();
        format!(
            "operation `{}` requires {}{}, and the backend's configuration fills none: configure \
             `credential = {{ scheme = \"<name>\", env = \"...\" }}` or `[backends.oauth]` for it, or leave it out \
             with `operations = {{ deny = [\"{}\"] }}`",
            operation.name,
            if alternatives.len() > 1 { "one of " } else { "" },
            alternatives.join(", or "),
            operation.name
        )
    }
}

#[cfg(test)]
#[path = "security_tests.rs"]
mod tests;
