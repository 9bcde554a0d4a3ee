//! Signed reads: who is asking, proven with an RFC 9421 HTTP Message
//! Signature (Ed25519). A read of a non-public capsule needs one; this
//! module checks the signature and the rules around it (which components it
//! covers, `created` window, key binding), with no I/O. Whether the signer may
//! read is [`crate::core::access`]'s question; whether the nonce is fresh is
//! the Worker's (a strongly consistent store), with [`Reader::replay_until_s`]
//! as how long to remember it.
//!
//! The RFC 9421 machinery (structured fields, the signature base, the
//! Ed25519 check) is Cloudflare's `web-bot-auth`; the policy is ours:
//!
//! - covered components: at least `@method` and `@target-uri`; request header
//!   fields may be covered too (their values are looked up); other derived
//!   components are refused;
//! - `created` required, at most [`MAX_AGE_S`] old and at most
//!   [`MAX_SKEW_S`] in the future; `expires`, when present, in the future;
//! - `keyid` required: the reader's agent id (64 lowercase hex);
//! - `nonce` required, 8 to 128 characters, single use per `keyid` while
//!   the signature could still be accepted;
//! - `alg` absent or `ed25519`;
//! - the key: the `Self-Public-Key` request header (64 hex), which passes
//!   the key checks of every other door ([`PublicKey::from_bytes`]:
//!   canonical, not of small order), and must be the reader's current key:
//!   its genesis key (SHA-256 = `keyid`, nothing to register) while it has
//!   no key log, else the key its log made current (docs/PROTOCOL.md §14;
//!   [`standing`] decides from the reader's summary, which the Worker reads);
//! - the Ed25519 check is [`PublicKey::verify`] (`verify_strict`) over the
//!   signature base the library builds, not the library's own looser one.

use crate::core::crypto::{AgentId, PublicKey};
use crate::core::reason::ReasonCode;
use std::fmt;
use web_bot_auth::components::{CoveredComponent, DerivedComponent, HTTPField};
use web_bot_auth::keyring::Algorithm;
use web_bot_auth::message_signatures::{MessageVerifier, SignedMessage};
use web_bot_auth::ImplementationError;

/// The oldest `created` accepted, in seconds before now.
pub const MAX_AGE_S: u64 = 300;
/// How far `created` may be ahead of the service's clock.
pub const MAX_SKEW_S: u64 = 30;
/// The request header that carries the reader's public key.
pub const PUBLIC_KEY_HEADER: &str = "self-public-key";
/// Nonce length bounds (characters).
pub const NONCE_LEN: (usize, usize) = (8, 128);

/// A request as far as a signed read needs it. The Worker fills it from the
/// HTTP request; the target URI is the full URL as the service received it.
pub struct SignedRead<'a> {
    /// `GET`, `HEAD`, or `POST` (the remote MCP door).
    pub method: &'a str,
    /// The absolute request URL (`@target-uri`).
    pub target_uri: &'a str,
    /// A request header's value by lower-case name (`signature-input`,
    /// `signature`, `self-public-key`, and any covered field).
    pub header: &'a dyn Fn(&str) -> Option<String>,
}

impl SignedRead<'_> {
    /// Whether the request carries a signature at all (an unsigned read is
    /// not an error: it is an anonymous read).
    pub fn is_signed(&self) -> bool {
        carries_signature(self.header)
    }
}

/// Whether a request with these headers carries a signature at all: what
/// [`SignedRead::is_signed`] decides, askable before the method and URL are
/// looked at (an unsigned poll, the common case, needs neither).
pub fn carries_signature(header: &dyn Fn(&str) -> Option<String>) -> bool {
    header("signature-input").is_some() || header("signature").is_some()
}

/// A verified signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    /// The signer's agent id (`keyid`).
    pub agent_id: AgentId,
    /// The key that signed (`Self-Public-Key`); whether it speaks for
    /// `agent_id` now is [`standing`]'s question.
    pub key: PublicKey,
    /// The signature's nonce: refuse it if seen for this reader before
    /// [`Reader::replay_until_s`].
    pub nonce: String,
    /// `created`, Unix seconds.
    pub created_s: u64,
    /// Until when this signature could be accepted again (Unix seconds): the
    /// nonce must be remembered at least that long.
    pub replay_until_s: u64,
}

/// Why a signed read is refused (each maps to a reason code in
/// `core::reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadAuthError {
    /// Not a usable signature: malformed headers, a missing parameter, an
    /// unsupported component or algorithm, no or a wrong public key, or a
    /// signature that does not verify. (`read_signature_invalid`)
    Invalid(String),
    /// `created` outside the window, or `expires` passed. (`read_signature_expired`)
    Expired(String),
}

impl fmt::Display for ReadAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadAuthError::Invalid(m) | ReadAuthError::Expired(m) => f.write_str(m),
        }
    }
}

impl ReadAuthError {
    /// The reason code the service answers with.
    pub fn code(&self) -> ReasonCode {
        match self {
            ReadAuthError::Invalid(_) => ReasonCode::ReadSignatureInvalid,
            ReadAuthError::Expired(_) => ReasonCode::ReadSignatureExpired,
        }
    }
}

fn invalid(m: impl Into<String>) -> ReadAuthError {
    ReadAuthError::Invalid(m.into())
}

/// The adapter `web-bot-auth` reads the message through.
struct Message<'a>(&'a SignedRead<'a>);

impl SignedMessage for Message<'_> {
    fn lookup_component(&self, c: &CoveredComponent) -> Vec<String> {
        match c {
            CoveredComponent::Derived(DerivedComponent::Method { req: false }) => {
                vec![self.0.method.to_string()]
            }
            CoveredComponent::Derived(DerivedComponent::TargetUri { req: false }) => {
                vec![self.0.target_uri.to_string()]
            }
            // Header fields as sent, without structured-field parameters.
            CoveredComponent::HTTP(HTTPField { name, parameters }) if parameters.0.is_empty() => {
                (self.0.header)(&name.to_ascii_lowercase())
                    .into_iter()
                    .collect()
            }
            // Anything else cannot be looked up: the library reports it.
            _ => Vec::new(),
        }
    }
}

/// Checks a signed read at `now_s` (Unix seconds). The nonce's freshness is
/// the caller's to check.
pub fn verify(req: &SignedRead<'_>, now_s: u64) -> Result<Reader, ReadAuthError> {
    let msg = Message(req);
    // One signature per request: the first label in Signature-Input.
    let v = MessageVerifier::parse(&msg, |_| true).map_err(|e| invalid(describe(&e)))?;
    let covered: Vec<&CoveredComponent> = v.parsed.base.components.keys().collect();
    let has = |d: DerivedComponent| covered.contains(&&CoveredComponent::Derived(d));
    if !has(DerivedComponent::Method { req: false })
        || !has(DerivedComponent::TargetUri { req: false })
    {
        return Err(invalid(
            "the signature must cover \"@method\" and \"@target-uri\"",
        ));
    }
    let d = v.parsed.base.parameters.details.clone();
    if !matches!(d.algorithm, None | Some(Algorithm::Ed25519)) {
        return Err(invalid("alg must be ed25519 (or absent)"));
    }
    let created = d
        .created
        .ok_or_else(|| invalid("the created parameter is required"))?;
    let created_s = u64::try_from(created).map_err(|_| invalid("created is negative"))?;
    if created_s.saturating_add(MAX_AGE_S) < now_s {
        return Err(ReadAuthError::Expired(format!(
            "created is more than {MAX_AGE_S} s old: sign each read afresh"
        )));
    }
    if created_s > now_s.saturating_add(MAX_SKEW_S) {
        return Err(ReadAuthError::Expired(format!(
            "created is more than {MAX_SKEW_S} s ahead of the service's clock: check the clock"
        )));
    }
    if let Some(e) = d.expires {
        if u64::try_from(e).map_or(true, |e| e <= now_s) {
            return Err(ReadAuthError::Expired("the signature has expired".into()));
        }
    }
    let keyid = d
        .keyid
        .clone()
        .ok_or_else(|| invalid("the keyid parameter is required (the reader's agent id)"))?;
    let agent_id = AgentId::parse(&keyid)
        .ok_or_else(|| invalid("keyid must be the reader's agent id (64 lowercase hex)"))?;
    let nonce = d
        .nonce
        .clone()
        .ok_or_else(|| invalid("the nonce parameter is required"))?;
    let n = nonce.chars().count();
    if n < NONCE_LEN.0 || n > NONCE_LEN.1 {
        return Err(invalid(format!(
            "nonce must be {} to {} characters",
            NONCE_LEN.0, NONCE_LEN.1
        )));
    }
    let public_key = (req.header)(PUBLIC_KEY_HEADER).ok_or_else(|| {
        invalid("the Self-Public-Key header (the reader's Ed25519 public key, 64 hex) is required")
    })?;
    let mut pk = [0u8; 32];
    if hex::decode_to_slice(public_key.trim(), &mut pk).is_err() {
        return Err(invalid("Self-Public-Key must be 64 hex characters"));
    }
    // The key checks every door applies (canonical encoding, a curve point,
    // not of small order): a weak key would let anyone "sign" as its id.
    let key = PublicKey::from_bytes(&pk).map_err(|e| invalid(format!("Self-Public-Key: {e}")))?;
    // RFC 9421 builds the base; the Ed25519 check is ours, strict like every
    // other (the library's own check is not: it takes small-order R).
    let (base, _) = v
        .parsed
        .base
        .into_ascii()
        .map_err(|e| invalid(describe(&e)))?;
    let signature: [u8; 64] = v
        .parsed
        .signature
        .as_slice()
        .try_into()
        .map_err(|_| invalid(describe(&ImplementationError::InvalidSignatureLength)))?;
    if !key.verify(base.as_bytes(), &signature) {
        return Err(invalid(
            "the signature does not verify (check the signed method and full URL)",
        ));
    }
    Ok(Reader {
        agent_id,
        key,
        nonce,
        created_s,
        replay_until_s: created_s.saturating_add(MAX_AGE_S),
    })
}

/// Whether a verified signature's key speaks for its `keyid` now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The reader's current key: its genesis key without a key log, or the
    /// key its log made current.
    Current,
    /// Its genesis key, rotated out by its key log (`key_rotated`).
    Rotated,
    /// Not its genesis key and not its current one: an earlier key of the
    /// reader if its log names it (`key_rotated`), else none of its keys
    /// (`read_signature_invalid`). Only the log can tell.
    AskTheLog,
    /// Not its genesis key, and it has no key log: none of its keys.
    Foreign,
}

/// Where `reader`'s key stands, given the current key of `keyid`'s key log
/// (`current`, lowercase hex, from its head.json summary; `None`: it has no
/// log).
pub fn standing(reader: &Reader, current: Option<&str>) -> Standing {
    let genesis = reader.key.agent_id() == reader.agent_id;
    match current {
        None if genesis => Standing::Current,
        None => Standing::Foreign,
        Some(c) if c == reader.key.to_hex() => Standing::Current,
        Some(_) if genesis => Standing::Rotated,
        Some(_) => Standing::AskTheLog,
    }
}

/// Most nonces one reader may have live at once (one signed read a second,
/// sustained over the whole window): bounds what one key can make the
/// service store.
pub const MAX_LIVE_NONCES: usize = 300;

/// One reader's recently used nonces, each until its signature expires.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NonceBook {
    seen: Vec<(String, u64)>,
}

/// What [`NonceBook::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// First use: recorded.
    Fresh,
    /// Used before, and its signature could still be accepted.
    Replayed,
    /// The reader has [`MAX_LIVE_NONCES`] live nonces: refused until some expire.
    Full,
}

impl NonceBook {
    /// Admits `nonce` (remembered until `until_s`) at `now_s`, forgetting
    /// nonces whose signatures can no longer be accepted anyway.
    pub fn admit(&mut self, nonce: &str, until_s: u64, now_s: u64) -> Admit {
        self.seen.retain(|(_, until)| *until >= now_s);
        if self.seen.iter().any(|(n, _)| n == nonce) {
            return Admit::Replayed;
        }
        if self.seen.len() >= MAX_LIVE_NONCES {
            return Admit::Full;
        }
        self.seen.push((nonce.to_owned(), until_s));
        Admit::Fresh
    }
}

/// One line for a library error (never echoes the request back at length).
fn describe(e: &ImplementationError) -> String {
    match e {
        ImplementationError::ParsingError(m) => format!("malformed signature headers: {m}"),
        ImplementationError::LookupError(c) => {
            format!("the signature covers a component this service does not support or the request lacks: {c:?}")
        }
        ImplementationError::UnsupportedAlgorithm(_) => "alg must be ed25519".into(),
        ImplementationError::InvalidKeyLength => "the public key is not an Ed25519 key".into(),
        ImplementationError::InvalidSignatureLength => "the signature is not 64 bytes".into(),
        ImplementationError::FailedToVerify(_) => {
            "the signature does not verify (check the signed method and full URL)".into()
        }
        other => format!("unusable signature: {other:?}"),
    }
}

// Natively always; in wasm only for the npm package (feature `sign-reads`),
// not in the Worker, which only verifies.
#[cfg(any(not(target_arch = "wasm32"), feature = "sign-reads"))]
mod sign;
#[cfg(any(not(target_arch = "wasm32"), feature = "sign-reads"))]
pub use sign::{fresh_nonce, sign_read, sign_read_as, LABEL, TAG, VALIDITY};

#[cfg(test)]
mod tests;
