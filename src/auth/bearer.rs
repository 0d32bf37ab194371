//! Reading the bearer token out of a request's `Authorization` header values (RFC 6750 §2.1).
//!
//! Rules: the size limit is checked before anything is parsed, so an oversized header costs nothing; exactly
//! one `Authorization` header; the scheme is `Bearer` in any case; the token is one `b64token` (letters,
//! digits, `-._~+/`, trailing `=`), so nothing else (a second token, a comma, a control character) is taken
//! for part of it.

use super::error::AuthError;

/// The largest bearer token accepted; real JWTs are a few KiB, API keys under 100 bytes.
pub const MAX_TOKEN: usize = 16 * 1024;
/// `Bearer` and the blanks around the token.
const MAX_SCHEME_OVERHEAD: usize = 64;

/// The bearer token of the request, `None` when it sent no `Authorization` header.
pub(super) fn bearer_token<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<&'a str>, AuthError> {
    let mut values = values.into_iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if value.len() > MAX_TOKEN + MAX_SCHEME_OVERHEAD {
        return Err(AuthError::TooLarge);
    }
    if values.next().is_some() {
        return Err(AuthError::Malformed("more than one Authorization header"));
    }
    let text = std::str::from_utf8(value).map_err(|_| AuthError::Malformed("the header is not ASCII text"))?;
    let (scheme, rest) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Malformed("expected the Bearer scheme: `Authorization: Bearer <token>`"));
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() {
        return Err(AuthError::Malformed("no token after `Bearer`"));
    }
    if token.len() > MAX_TOKEN {
        return Err(AuthError::TooLarge);
    }
    if !is_b64token(token) {
        return Err(AuthError::Malformed("the token contains characters a bearer token cannot contain"));
    }
    Ok(Some(token))
}

fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(value: &str) -> Result<Option<&str>, AuthError> {
        bearer_token([value.as_bytes()])
    }

    #[test]
    fn a_bearer_token_is_read_in_any_case() {
        assert_eq!(one("Bearer abc.def-ghi_~+/=="), Ok(Some("abc.def-ghi_~+/==")));
        assert_eq!(one("bearer  sy_key"), Ok(Some("sy_key")));
        assert_eq!(one("BEARER x"), Ok(Some("x")));
        assert_eq!(bearer_token(std::iter::empty()), Ok(None));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for bad in
            ["Basic dXNlcjpwdw==", "Bearer", "Bearer ", "Token abc", "Bearer a b", "Bearer a,b", "Bearer ==", "x"]
        {
            assert!(matches!(one(bad), Err(AuthError::Malformed(_))), "{bad:?}: {:?}", one(bad));
        }
        assert!(matches!(bearer_token([b"Bearer \xff".as_slice()]), Err(AuthError::Malformed(_))));
        let twice = bearer_token([b"Bearer a".as_slice(), b"Bearer b".as_slice()]);
        assert_eq!(twice, Err(AuthError::Malformed("more than one Authorization header")));
    }

    #[test]
    fn oversized_tokens_are_refused_before_parsing() {
        let at_limit = format!("Bearer {}", "a".repeat(MAX_TOKEN));
        assert_eq!(one(&at_limit).map(|token| token.map(str::len)), Ok(Some(MAX_TOKEN)));
        assert_eq!(one(&format!("Bearer {}", "a".repeat(MAX_TOKEN + 1))), Err(AuthError::TooLarge));
        // Not even valid UTF-8 or the right scheme: the size is checked first.
        let huge = vec![0xffu8; MAX_TOKEN * 4];
        assert_eq!(bearer_token([huge.as_slice()]), Err(AuthError::TooLarge));
    }
}
