//! Signing a read (docs/PROTOCOL.md §12): the RFC 9421 HTTP Message
//! Signature a private capsule's reader sends, the other half of
//! [`super::verify`]. Every client (the native CLI, the JavaScript package's
//! wasm) signs here, so what they send is what the service accepts. The
//! RFC 9421 machinery (the signature base, structured-field serialisation)
//! is Cloudflare's `web-bot-auth`, the crate the service verifies with; this
//! module only fixes our choices:
//!
//! - covered components: `@method` and `@target-uri` (the full URL exactly as
//!   sent, query included), the minimum §12 asks for;
//! - `keyid`: the reader's agent id, with its public key in `Self-Public-Key`
//!   (the service checks that one hashes to the other);
//! - `nonce`: given by the caller, fresh random bytes for every attempt
//!   ([`fresh_nonce`]), so a signature is never valid twice;
//! - `created` now and `expires` [`VALIDITY`] later (the service's window),
//!   `tag` [`TAG`], `alg` `ed25519` (the library writes all of them);
//! - label [`LABEL`].

use super::{MAX_AGE_S, PUBLIC_KEY_HEADER};
use crate::core::crypto::{AgentId, AgentKey};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64URL, Engine as _};
use indexmap::IndexMap;
use std::time::Duration;
use web_bot_auth::components::{CoveredComponent, DerivedComponent};
use web_bot_auth::keyring::Algorithm;
use web_bot_auth::message_signatures::{GenerateSignature, MessageSigner, UnsignedMessage};
use web_bot_auth::ImplementationError;

/// The signature's label in `Signature-Input` and `Signature`.
pub const LABEL: &str = "sig1";
/// The `tag` parameter (informational; the service ignores it).
pub const TAG: &str = "self-capsule";
/// How long a signature claims to be valid (`expires - created`): the
/// service accepts `created` for 300 s, so claiming more would be a lie.
pub const VALIDITY: Duration = Duration::from_secs(MAX_AGE_S);
/// Random bytes in a nonce (22 base64url characters: inside §12's 8–128).
const NONCE_BYTES: usize = 16;

/// 16 random bytes (the OS's, or Web Crypto's in wasm), base64url without
/// padding (header-safe, and a valid structured-field string).
pub fn fresh_nonce() -> Result<String, getrandom::Error> {
    let mut b = [0u8; NONCE_BYTES];
    getrandom::getrandom(&mut b)?;
    Ok(B64URL.encode(b))
}

/// The three request headers of a signed read of `url` by `method`, names
/// in lower case: `self-public-key`, `signature-input`, `signature`. The
/// error is the library's, as text.
pub fn sign_read(
    key: &AgentKey,
    method: &str,
    url: &str,
    nonce: String,
) -> Result<Vec<(String, String)>, String> {
    sign_read_as(key, &key.agent_id(), method, url, nonce)
}

/// [`sign_read`] as `agent`: after a key rotation (§14) the `keyid` stays
/// the agent id (its genesis key's hash) while `key`, the current key of its
/// key log, signs and goes in `Self-Public-Key`.
pub fn sign_read_as(
    key: &AgentKey,
    agent: &AgentId,
    method: &str,
    url: &str,
    nonce: String,
) -> Result<Vec<(String, String)>, String> {
    let mut msg = Read {
        method,
        url,
        headers: None,
    };
    let signer = MessageSigner {
        keyid: agent.to_string(),
        nonce,
        tag: TAG.into(),
    };
    signer
        .generate_signature_headers_content(&mut msg, VALIDITY, Algorithm::Ed25519, &Signer(key))
        .map_err(|e| format!("{e:?}"))?;
    let (input, signature) = msg
        .headers
        .expect("the library registers the headers it made");
    Ok(vec![
        (PUBLIC_KEY_HEADER.into(), key.public_key().to_hex()),
        // The library gives the header values without a label; one
        // signature per request, so the label is fixed.
        ("signature-input".into(), format!("{LABEL}={input}")),
        ("signature".into(), format!("{LABEL}={signature}")),
    ])
}

/// The request as the library sees it: what it covers, and where it leaves
/// the header values.
struct Read<'a> {
    method: &'a str,
    url: &'a str,
    headers: Option<(String, String)>,
}

impl UnsignedMessage for Read<'_> {
    fn fetch_components_to_cover(&self) -> IndexMap<CoveredComponent, String> {
        IndexMap::from_iter([
            (
                CoveredComponent::Derived(DerivedComponent::Method { req: false }),
                self.method.to_string(),
            ),
            (
                CoveredComponent::Derived(DerivedComponent::TargetUri { req: false }),
                self.url.to_string(),
            ),
        ])
    }

    fn register_header_contents(&mut self, signature_input: String, signature_header: String) {
        self.headers = Some((signature_input, signature_header));
    }
}

/// Signs with the agent's key in place (the library's own signer for raw
/// bytes would need a copy of the secret seed).
struct Signer<'a>(&'a AgentKey);

impl GenerateSignature for Signer<'_> {
    fn generate_signature(
        &self,
        algorithm: Algorithm,
        msg: &[u8],
    ) -> Result<Vec<u8>, ImplementationError> {
        match algorithm {
            Algorithm::Ed25519 => Ok(self.0.sign(msg).to_vec()),
            other => Err(ImplementationError::UnsupportedAlgorithm(other)),
        }
    }
}
