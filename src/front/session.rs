//! Sealed agent sessions: the `MCP-Session-Id` the front hands an agent (design §3, §6; MCP 2025-11-25 §A1.6,
//! §A4.7).
//!
//! Owns: the session key ([`SessionSecret`]) and sealing and opening session ids ([`Sealer`]); the sessions
//! ended early by `DELETE` are [`super::revocations`]'s. The gateway keeps no session table to serve a request:
//! the id is a token that any replica holding the key verifies,
//! `base64url(payload) "." base64url(HMAC-SHA256(key, domain || payload))`, where the payload binds a random
//! [`SessionRef`], the principal, the negotiated protocol version, the issue time and the agent's declared
//! capabilities.
//!
//! Rules:
//! - The id holds only visible ASCII, 0x21–0x7E (§A1.6): unpadded base64url and one `.`.
//! - The random part and the key come from the operating system's secure random source (§A4.7: secure,
//!   non-deterministic ids).
//! - The MAC is verified in constant time, and before a single byte of the payload is parsed. The domain prefix
//!   names this token type and the supported-version list, so a token cannot be replayed as another signed object
//!   and a change to that list (the payload stores an index into it) invalidates old tokens instead of
//!   misreading them.
//! - The token is signed, not encrypted: its holder can read the principal and the capabilities. Nothing secret
//!   goes in it.
//! - A verified token is not enough. The caller must also check [`AgentSession::belongs_to`] against the principal
//!   authenticated on this very request (§A4.7, design §6), and the revocations
//!   ([`super::revocations::Revocations::is_revoked`]). Malformed, forged, expired, foreign and revoked ids are
//!   all answered 404 (§A1.6); [`OpenError`] only tells them apart in logs.
//! - Everything read is bounded: a token's length before it is decoded, the key file's length before it is read.
//!
//! Must not know: HTTP, authentication, the backend sessions an agent session owns.

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::digest::{Key, KeyInit};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::mcp::SUPPORTED_PROTOCOL_VERSIONS;

/// The length of the session key, in bytes.
pub const SECRET_LEN: usize = 32;
/// The longest session id [`Sealer::open`] decodes, and [`Sealer::seal`] produces.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Names what the MAC signs, so no other HMAC the gateway might compute with this key can pass for a session id.
const DOMAIN: &[u8] = b"switchyard/agent-session/v1\n";
/// The payload's layout version: the first payload byte.
const FORMAT: u8 = 1;
/// The fixed part of a payload: format, version index, session ref, issue time, principal length.
const HEADER_LEN: usize = 1 + 1 + 16 + 8 + 2;
const MAC_LEN: usize = 32;
/// Unpadded base64 of the 32-byte MAC.
const MAC_TEXT_LEN: usize = 43;
/// How long a process that lost the race to create the key file waits for the winner to finish writing it.
const RACE_PATIENCE: Duration = Duration::from_secs(1);
const RACE_POLL: Duration = Duration::from_millis(20);

type HmacSha256 = Hmac<Sha256>;

/// The operating system's secure random source failed; no id or key can be made without it.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the operating system's secure random source failed: {0}")]
pub struct RandomUnavailable(getrandom::Error);

fn random_bytes<const N: usize>() -> Result<[u8; N], RandomUnavailable> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(RandomUnavailable)?;
    Ok(bytes)
}

/// Why the session key could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot read the session key file {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot create the session key file {}: {source}", .path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("the session key file {} must hold exactly {SECRET_LEN} raw bytes, but holds {len}", .path.display())]
    WrongLength { path: PathBuf, len: u64 },
    #[error("the session key file {} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    #[error(transparent)]
    Random(#[from] RandomUnavailable),
}

/// The key that signs session ids. Every replica that must accept a session id holds the same key.
pub struct SessionSecret([u8; SECRET_LEN]);

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl SessionSecret {
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// Reads the key from `path` (exactly [`SECRET_LEN`] raw bytes), or creates the file with fresh random bytes
    /// and mode 0600 when it does not exist. Two processes starting at once agree on one key: the file is created
    /// exclusively, and the loser reads the winner's key. Blocking; meant for startup.
    pub fn load_or_create(path: &Path) -> Result<Self, SessionError> {
        if let Some(key) = read_key(path)? {
            return Ok(Self(key));
        }
        match create_key(path)? {
            Some(key) => Ok(Self(key)),
            None => read_key_after_race(path).map(Self),
        }
    }
}

/// The key in `path`, or `None` when there is no such file.
fn read_key(path: &Path) -> Result<Option<[u8; SECRET_LEN]>, SessionError> {
    let read_error = |source| SessionError::Read { path: path.to_path_buf(), source };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(read_error(error)),
    };
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(SessionError::NotAFile { path: path.to_path_buf() });
    }
    // Checked before reading, so a wrong path (a log file, say) is refused without being read.
    if metadata.len() != SECRET_LEN as u64 {
        return Err(SessionError::WrongLength { path: path.to_path_buf(), len: metadata.len() });
    }
    warn_if_shared(path, &metadata);
    let mut key = [0u8; SECRET_LEN];
    file.read_exact(&mut key).map_err(read_error)?;
    Ok(Some(key))
}

/// Reads a key file another process has just created: it may still be shorter than a key for a moment.
fn read_key_after_race(path: &Path) -> Result<[u8; SECRET_LEN], SessionError> {
    let deadline = Instant::now() + RACE_PATIENCE;
    loop {
        match read_key(path) {
            Ok(Some(key)) => return Ok(key),
            Err(SessionError::WrongLength { len, .. }) if len < SECRET_LEN as u64 && Instant::now() < deadline => {
                std::thread::sleep(RACE_POLL);
            }
            // The creator failed to write its key and removed the file again.
            Ok(None) => {
                let source = io::Error::new(io::ErrorKind::NotFound, "the file vanished while being created");
                return Err(SessionError::Read { path: path.to_path_buf(), source });
            }
            Err(error) => return Err(error),
        }
    }
}

/// Creates the key file with a fresh key, or returns `None` when another process created it first.
fn create_key(path: &Path) -> Result<Option<[u8; SECRET_LEN]>, SessionError> {
    let create_error = |source| SessionError::Create { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        private_dir_builder().create(parent).map_err(create_error)?;
    }
    let key = random_bytes::<SECRET_LEN>()?;
    let mut file = match private_create_new().open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(error) => return Err(create_error(error)),
    };
    if let Err(error) = file.write_all(&key).and_then(|()| file.sync_all()) {
        // A short key file left behind would make every later start fail; removing it is best effort, the write
        // error is what the operator needs to see.
        let _ = fs::remove_file(path);
        return Err(create_error(error));
    }
    tracing::info!(path = %path.display(), "created a new session key file");
    Ok(Some(key))
}

/// Options that create a new file, failing if it exists, readable by its owner only.
fn private_create_new() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Directories the gateway creates for its key are its own.
fn private_dir_builder() -> fs::DirBuilder {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// Whoever can read the key can mint session ids for any principal; say so when others can.
#[cfg_attr(not(unix), allow(unused_variables))]
fn warn_if_shared(path: &Path, metadata: &Metadata) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = %format!("{mode:03o}"),
                "the session key file is accessible to group or others; it should be mode 0600"
            );
        }
    }
}

/// The random identifier of one agent session. Its [`Display`](fmt::Display) form, 32 lowercase hex digits, is the
/// key other layers use for the agent session (the backend client's slot key, for one).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionRef([u8; 16]);

impl SessionRef {
    pub fn random() -> Result<Self, RandomUnavailable> {
        random_bytes().map(Self)
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The ref whose [`Display`](fmt::Display) form is `text` (32 lowercase hex digits), if any.
    pub fn from_hex(text: &str) -> Option<Self> {
        let digits = text.as_bytes();
        if digits.len() != 32 || !digits.iter().all(|digit| matches!(digit, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Self(bytes))
    }
}

impl fmt::Display for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl fmt::Debug for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionRef({self})")
    }
}

/// What a session id carries.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSession {
    pub id: SessionRef,
    /// The authenticated principal that initialized the session.
    pub principal: String,
    /// The negotiated protocol version; one of [`SUPPORTED_PROTOCOL_VERSIONS`].
    pub version: &'static str,
    /// Unix seconds.
    pub issued_at: u64,
    /// The client capabilities the agent declared in `initialize`.
    pub capabilities: Value,
}

impl AgentSession {
    /// Whether the session was issued to `principal`. A session id is usable only with the credentials of the
    /// principal it was issued to (§A4.7); a stolen id is useless to anyone else.
    pub fn belongs_to(&self, principal: &str) -> bool {
        self.principal == principal
    }
}

/// Why a session could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("protocol version {version:?} is not supported")]
    UnsupportedVersion { version: &'static str },
    /// The principal or the declared capabilities are too large for a session id.
    #[error("the session id would be {len} bytes, more than the {max} allowed")]
    TooLarge { len: usize, max: usize },
}

/// Why a session id was refused. Callers answer 404 to every one of them (§A1.6); the variants are for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the session id is malformed")]
    Malformed,
    #[error("the session id's signature does not verify")]
    Forged,
    #[error("the session id has expired")]
    Expired,
}

/// Seals sessions into ids and opens ids back into sessions, with one key and one lifetime.
#[derive(Clone)]
pub struct Sealer {
    /// The HMAC already keyed and fed the domain prefix; cloned per token, so the key schedule runs once.
    primed: HmacSha256,
    ttl: Duration,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer").field("secret", &"<redacted>").field("ttl", &self.ttl).finish()
    }
}

impl Sealer {
    /// Session ids live `ttl` (whole seconds) after their issue time.
    pub fn new(secret: SessionSecret, ttl: Duration) -> Self {
        // HMAC pads a key shorter than the hash's block size with zeros (RFC 2104 §2); padding it here gives the
        // same MAC as the 32-byte key through the infallible fixed-size constructor.
        let mut key = Key::<HmacSha256>::default();
        key[..SECRET_LEN].copy_from_slice(&secret.0);
        let mut primed = <HmacSha256 as KeyInit>::new(&key);
        primed.update(DOMAIN);
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            primed.update(version.as_bytes());
            primed.update(b"\n");
        }
        Self { primed, ttl }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The last unix second at which `session`'s id still opens (what a revocation lasts until).
    pub fn expires_at(&self, session: &AgentSession) -> u64 {
        session.issued_at.saturating_add(self.ttl.as_secs())
    }

    /// The session id for `session`: visible ASCII, at most [`MAX_TOKEN_LEN`] bytes.
    pub fn seal(&self, session: &AgentSession) -> Result<String, SealError> {
        let payload = encode(session)?;
        let tag = self.mac_of(&payload).finalize().into_bytes();
        let token = format!("{}.{}", URL_SAFE_NO_PAD.encode(&payload), URL_SAFE_NO_PAD.encode(tag));
        // `open` refuses longer ids, so handing one out would strand the agent.
        if token.len() > MAX_TOKEN_LEN {
            return Err(SealError::TooLarge { len: token.len(), max: MAX_TOKEN_LEN });
        }
        Ok(token)
    }

    /// The session sealed in `token`, if this key sealed it and it has not expired at `now_unix`. The caller must
    /// still check the principal ([`AgentSession::belongs_to`]) and the revocations.
    pub fn open(&self, token: &str, now_unix: u64) -> Result<AgentSession, OpenError> {
        let (payload, tag) = split_token(token)?;
        self.mac_of(&payload).verify_slice(&tag).map_err(|_| OpenError::Forged)?;
        let session = decode(&payload)?;
        if now_unix > self.expires_at(&session) {
            return Err(OpenError::Expired);
        }
        Ok(session)
    }

    fn mac_of(&self, payload: &[u8]) -> HmacSha256 {
        let mut mac = self.primed.clone();
        mac.update(payload);
        mac
    }
}

/// The decoded payload and MAC of a token, checked for shape only.
fn split_token(token: &str) -> Result<(Vec<u8>, Vec<u8>), OpenError> {
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return Err(OpenError::Malformed);
    }
    let (payload, tag) = token.split_once('.').ok_or(OpenError::Malformed)?;
    if tag.len() != MAC_TEXT_LEN {
        return Err(OpenError::Malformed);
    }
    // The engine refuses padding and non-canonical trailing bits, so each payload has exactly one spelling.
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| OpenError::Malformed)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| OpenError::Malformed)?;
    if tag.len() != MAC_LEN {
        return Err(OpenError::Malformed);
    }
    Ok((payload, tag))
}

/// Payload layout (integers big-endian): format (1) | version index (1) | session ref (16) | issued_at (8) |
/// principal length (2) | principal (UTF-8) | capabilities (compact JSON, to the end).
fn encode(session: &AgentSession) -> Result<Vec<u8>, SealError> {
    let version = version_index(session.version).ok_or(SealError::UnsupportedVersion { version: session.version })?;
    let principal = session.principal.as_bytes();
    let too_large = SealError::TooLarge { len: principal.len(), max: MAX_TOKEN_LEN };
    let principal_len = u16::try_from(principal.len()).map_err(|_| too_large)?;
    let capabilities = session.capabilities.to_string();
    let mut payload = Vec::with_capacity(HEADER_LEN + principal.len() + capabilities.len());
    payload.push(FORMAT);
    payload.push(version);
    payload.extend_from_slice(&session.id.0);
    payload.extend_from_slice(&session.issued_at.to_be_bytes());
    payload.extend_from_slice(&principal_len.to_be_bytes());
    payload.extend_from_slice(principal);
    payload.extend_from_slice(capabilities.as_bytes());
    Ok(payload)
}

fn version_index(version: &str) -> Option<u8> {
    let index = SUPPORTED_PROTOCOL_VERSIONS.iter().position(|supported| *supported == version)?;
    u8::try_from(index).ok()
}

/// Reads a payload whose MAC has verified; a failure here means a gateway bug or an incompatible format.
fn decode(payload: &[u8]) -> Result<AgentSession, OpenError> {
    let mut reader = Reader(payload);
    let [format] = reader.array()?;
    if format != FORMAT {
        return Err(OpenError::Malformed);
    }
    let [version] = reader.array()?;
    let version = SUPPORTED_PROTOCOL_VERSIONS.get(usize::from(version)).copied().ok_or(OpenError::Malformed)?;
    let id = SessionRef(reader.array()?);
    let issued_at = u64::from_be_bytes(reader.array()?);
    let principal_len = u16::from_be_bytes(reader.array()?);
    let principal = reader.bytes(usize::from(principal_len))?;
    let principal = std::str::from_utf8(principal).map_err(|_| OpenError::Malformed)?.to_owned();
    let capabilities = serde_json::from_slice(reader.0).map_err(|_| OpenError::Malformed)?;
    Ok(AgentSession { id, principal, version, issued_at, capabilities })
}

/// Takes fields off the front of a payload.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], OpenError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(OpenError::Malformed)?;
        self.0 = rest;
        Ok(*head)
    }

    fn bytes(&mut self, len: usize) -> Result<&'a [u8], OpenError> {
        let (head, rest) = self.0.split_at_checked(len).ok_or(OpenError::Malformed)?;
        self.0 = rest;
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_760_000_000;
    const TTL: Duration = Duration::from_secs(3600);

    fn sealer(key_byte: u8) -> Sealer {
        Sealer::new(SessionSecret::from_bytes([key_byte; SECRET_LEN]), TTL)
    }

    fn session() -> AgentSession {
        AgentSession {
            id: SessionRef::random().unwrap(),
            principal: "alice@example.com".to_owned(),
            version: SUPPORTED_PROTOCOL_VERSIONS[1],
            issued_at: NOW,
            capabilities: json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}}),
        }
    }

    /// Replaces the character at `index` with another character of the base64url alphabet.
    fn flip_char(token: &str, index: usize) -> String {
        let mut bytes = token.as_bytes().to_vec();
        bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let unique = SessionRef::random().unwrap();
        std::env::temp_dir().join(format!("switchyard-session-{name}-{unique}"))
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let sealer = sealer(7);
        let original = session();
        let token = sealer.seal(&original).unwrap();
        assert_eq!(sealer.open(&token, NOW + 10).unwrap(), original);
    }

    #[test]
    fn every_supported_version_round_trips() {
        let sealer = sealer(7);
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            let original = AgentSession { version, ..session() };
            let token = sealer.seal(&original).unwrap();
            assert_eq!(sealer.open(&token, NOW).unwrap().version, version);
        }
    }

    #[test]
    fn token_is_visible_ascii_and_bounded() {
        let token = sealer(7).seal(&session()).unwrap();
        assert!(token.bytes().all(|byte| (0x21..=0x7e).contains(&byte)), "{token}");
        assert!(token.len() <= MAX_TOKEN_LEN);
    }

    #[test]
    fn two_sessions_get_different_ids() {
        let sealer = sealer(7);
        let first = sealer.seal(&session()).unwrap();
        let second = sealer.seal(&session()).unwrap();
        assert_ne!(first, second);
    }

    #[test]
    fn tampered_payload_is_forged() {
        let sealer = sealer(7);
        let token = sealer.seal(&session()).unwrap();
        for index in [0, 5, token.find('.').unwrap() - 2] {
            assert_eq!(sealer.open(&flip_char(&token, index), NOW), Err(OpenError::Forged), "index {index}");
        }
    }

    #[test]
    fn tampered_mac_is_forged() {
        let sealer = sealer(7);
        let token = sealer.seal(&session()).unwrap();
        let dot = token.find('.').unwrap();
        assert_eq!(sealer.open(&flip_char(&token, dot + 1), NOW), Err(OpenError::Forged));
    }

    #[test]
    fn re_signed_principal_swap_is_forged() {
        // An attacker who rewrites the principal in the payload cannot produce the matching MAC.
        let sealer = sealer(7);
        let token = sealer.seal(&session()).unwrap();
        let (payload, mac) = token.split_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
        let at = bytes.windows(5).position(|window| window == b"alice").unwrap();
        bytes[at..at + 5].copy_from_slice(b"mallo");
        let forged = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(sealer.open(&forged, NOW), Err(OpenError::Forged));
    }

    #[test]
    fn another_key_is_forged() {
        let token = sealer(7).seal(&session()).unwrap();
        assert_eq!(sealer(8).open(&token, NOW), Err(OpenError::Forged));
    }

    #[test]
    fn padded_key_gives_the_plain_hmac() {
        let secret = [42u8; SECRET_LEN];
        let mut expected = <HmacSha256 as Mac>::new_from_slice(&secret).unwrap();
        expected.update(DOMAIN);
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            expected.update(version.as_bytes());
            expected.update(b"\n");
        }
        expected.update(b"payload");
        let sealer = Sealer::new(SessionSecret::from_bytes(secret), TTL);
        assert_eq!(sealer.mac_of(b"payload").finalize().into_bytes(), expected.finalize().into_bytes());
    }

    #[test]
    fn garbage_is_malformed() {
        let sealer = sealer(7);
        let token = sealer.seal(&session()).unwrap();
        let (payload, mac) = token.split_once('.').unwrap();
        let cases = [
            String::new(),
            "no-dot-at-all".to_owned(),
            token.replace('.', ""),
            ".".to_owned(),
            format!("{payload}.{mac}.{mac}"),
            format!("{payload}.{}", &mac[..MAC_TEXT_LEN - 1]),
            format!("{payload}=.{mac}"),
            format!("{payload}.{mac}="),
            format!("{payload} .{mac}"),
            format!("{}.{mac}", payload.replace(|_: char| true, "+")),
            "A".repeat(MAX_TOKEN_LEN + 1),
            format!("{}.{mac}", "A".repeat(MAX_TOKEN_LEN)),
        ];
        for case in cases {
            assert_eq!(sealer.open(&case, NOW), Err(OpenError::Malformed), "{case:.80}");
        }
    }

    #[test]
    fn expires_after_ttl() {
        let sealer = sealer(7);
        let original = session();
        let token = sealer.seal(&original).unwrap();
        let last = original.issued_at + TTL.as_secs();
        assert_eq!(sealer.expires_at(&original), last);
        assert!(sealer.open(&token, last).is_ok());
        assert_eq!(sealer.open(&token, last + 1), Err(OpenError::Expired));
    }

    #[test]
    fn expiry_does_not_overflow() {
        let sealer = sealer(7);
        let original = AgentSession { issued_at: u64::MAX - 1, ..session() };
        let token = sealer.seal(&original).unwrap();
        assert!(sealer.open(&token, u64::MAX).is_ok());
    }

    #[test]
    fn session_is_bound_to_its_principal() {
        let sealer = sealer(7);
        let opened = sealer.open(&sealer.seal(&session()).unwrap(), NOW).unwrap();
        assert!(opened.belongs_to("alice@example.com"));
        assert!(!opened.belongs_to("mallory@example.com"));
        assert!(!opened.belongs_to("alice@example.co"));
        assert!(!opened.belongs_to(""));
    }

    #[test]
    fn unsupported_version_is_not_sealed() {
        let original = AgentSession { version: "1999-01-01", ..session() };
        assert_eq!(sealer(7).seal(&original), Err(SealError::UnsupportedVersion { version: "1999-01-01" }));
    }

    #[test]
    fn oversize_sessions_are_not_sealed() {
        let sealer = sealer(7);
        let big_capabilities =
            AgentSession { capabilities: json!({"experimental": "x".repeat(MAX_TOKEN_LEN)}), ..session() };
        assert!(matches!(sealer.seal(&big_capabilities), Err(SealError::TooLarge { .. })));
        let huge_principal = AgentSession { principal: "p".repeat(usize::from(u16::MAX) + 1), ..session() };
        assert!(matches!(sealer.seal(&huge_principal), Err(SealError::TooLarge { .. })));
    }

    #[test]
    fn session_ref_displays_as_lowercase_hex() {
        let id = SessionRef::from_bytes([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        let random = SessionRef::random().unwrap().to_string();
        assert_eq!(random.len(), 32);
        assert!(random.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)));
    }

    #[test]
    fn session_ref_reads_back_its_hex_form_only() {
        let id = SessionRef::random().unwrap();
        assert_eq!(SessionRef::from_hex(&id.to_string()), Some(id));
        let upper = SessionRef::from_bytes([0xab; 16]).to_string().to_uppercase();
        for bad in ["", "ab", &"g".repeat(32), &"a".repeat(33), &upper, &format!("+{}", "a".repeat(31))] {
            assert_eq!(SessionRef::from_hex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn secret_debug_is_redacted() {
        let secret = SessionSecret::from_bytes([0x5a; SECRET_LEN]);
        assert_eq!(format!("{secret:?}"), "<redacted>");
        let sealer = Sealer::new(secret, TTL);
        assert!(format!("{sealer:?}").contains("<redacted>"));
    }

    #[test]
    fn key_file_is_created_private_and_reread() {
        let dir = scratch_dir("create");
        let path = dir.join("nested").join("session.key");
        let created = SessionSecret::load_or_create(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), created.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let reread = SessionSecret::load_or_create(&path).unwrap();
        assert_eq!(reread.0, created.0);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn existing_key_file_is_read_even_when_shared() {
        let dir = scratch_dir("existing");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.key");
        fs::write(&path, [9u8; SECRET_LEN]).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        }
        assert_eq!(SessionSecret::load_or_create(&path).unwrap().0, [9u8; SECRET_LEN]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn racing_creators_agree_on_one_key() {
        let dir = scratch_dir("race");
        let path = dir.join("session.key");
        let keys: Vec<[u8; SECRET_LEN]> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                (0..4).map(|_| scope.spawn(|| SessionSecret::load_or_create(&path).unwrap().0)).collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|key| *key == keys[0]));
        assert_eq!(fs::read(&path).unwrap(), keys[0]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wrong_length_key_file_is_refused_naming_the_path() {
        let dir = scratch_dir("wrong");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("short.key");
        fs::write(&path, [1u8; 16]).unwrap();
        let error = SessionSecret::load_or_create(&path).unwrap_err();
        assert!(matches!(error, SessionError::WrongLength { len: 16, .. }), "{error:?}");
        assert!(error.to_string().contains(&path.display().to_string()), "{error}");
        fs::write(&path, [1u8; 33]).unwrap();
        assert!(matches!(SessionSecret::load_or_create(&path), Err(SessionError::WrongLength { len: 33, .. })));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directory_as_key_file_is_refused() {
        let dir = scratch_dir("dir");
        fs::create_dir_all(&dir).unwrap();
        assert!(matches!(SessionSecret::load_or_create(&dir), Err(SessionError::NotAFile { .. })));
        fs::remove_dir_all(&dir).unwrap();
    }
}
