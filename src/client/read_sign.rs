//! Signing a read (docs/PROTOCOL.md §12): the RFC 9421 HTTP Message
//! Signature a private capsule's reader sends. The signing itself is the
//! core's ([`crate::core::read_auth::sign_read`], which the JavaScript
//! package's wasm runs too); this module adds the OS's randomness for the
//! nonce and the client's error type. The choices the core fixes:
//!
//! - covered components: `@method` and `@target-uri` (the full URL exactly as
//!   sent, query included), the minimum §12 asks for;
//! - `keyid`: the reader's agent id, with its public key in `Self-Public-Key`
//!   (the service checks that one hashes to the other);
//! - `nonce`: 16 fresh random bytes, base64url, so a signature is never
//!   valid twice; every attempt is signed anew (see `exchange`);
//! - `created` now and `expires` [`VALIDITY`] later (the service's window),
//!   `tag` [`TAG`], `alg` `ed25519` (the library writes all of them);
//! - label `sig1`.

use super::error::Error;
use super::identity::Signer;
use crate::core::read_auth;

pub use crate::core::read_auth::{LABEL, TAG, VALIDITY};

/// The three request headers of a signed read, names in lower case, with a
/// fresh nonce from the OS.
/// `keyid` is the agent id and `Self-Public-Key` the current key, which
/// differ after a key rotation (§14).
pub fn sign_read(key: &Signer, method: &str, url: &str) -> Result<Vec<(String, String)>, Error> {
    let nonce = read_auth::fresh_nonce()
        .map_err(|e| Error::local(format!("no randomness from the OS for a nonce: {e}")))?;
    read_auth::sign_read_as(key.key(), &key.agent_id(), method, url, nonce)
        .map_err(|e| Error::local(format!("cannot sign the read of {url}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::read_auth::{self, ReadAuthError, SignedRead};

    const URL: &str = "https://self.example.com/self/aaaa/history.json?since=sha256%3A00&limit=5";

    fn now_s() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn verify(
        headers: &[(String, String)],
        method: &str,
        url: &str,
    ) -> Result<read_auth::Reader, ReadAuthError> {
        let lookup = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let req = SignedRead {
            method,
            target_uri: url,
            header: &lookup,
        };
        assert!(req.is_signed());
        read_auth::verify(&req, now_s())
    }

    fn header<'a>(h: &'a [(String, String)], name: &str) -> &'a str {
        &h.iter().find(|(k, _)| k == name).unwrap().1
    }

    #[test]
    fn the_services_verifier_accepts_what_we_sign() {
        let key = Signer::genesis(crate::core::crypto::AgentKey::from_seed(&[7u8; 32]));
        let h = sign_read(&key, "GET", URL).unwrap();
        let reader = verify(&h, "GET", URL).unwrap();
        assert_eq!(reader.agent_id, key.agent_id());
        assert_eq!(reader.nonce.len(), 22);
        assert!(now_s().abs_diff(reader.created_s) <= 2);
        // The shape §12 shows, with the library's extra parameters.
        assert_eq!(header(&h, "self-public-key"), key.public_key().to_hex());
        let input = header(&h, "signature-input");
        assert!(
            input.starts_with(r#"sig1=("@method" "@target-uri");"#),
            "{input}"
        );
        for p in [
            format!(r#"keyid="{}""#, key.agent_id()),
            format!(r#"nonce="{}""#, reader.nonce),
            r#"tag="self-capsule""#.into(),
            r#"alg="ed25519""#.into(),
            format!("created={}", reader.created_s),
            format!("expires={}", reader.created_s + 300),
        ] {
            assert!(input.contains(&p), "{input} lacks {p}");
        }
        let sig = header(&h, "signature");
        assert!(sig.starts_with("sig1=:") && sig.ends_with(':'), "{sig}");
    }

    #[test]
    fn it_does_not_verify_for_another_url_or_method() {
        let key = Signer::genesis(crate::core::crypto::AgentKey::from_seed(&[7u8; 32]));
        let h = sign_read(&key, "GET", URL).unwrap();
        let other = URL.replace("history.json", "export.json");
        assert!(matches!(
            verify(&h, "GET", &other),
            Err(ReadAuthError::Invalid(_))
        ));
        let no_query = URL.split('?').next().unwrap();
        assert!(matches!(
            verify(&h, "GET", no_query),
            Err(ReadAuthError::Invalid(_))
        ));
        assert!(matches!(
            verify(&h, "POST", URL),
            Err(ReadAuthError::Invalid(_))
        ));
    }

    #[test]
    fn every_signature_has_its_own_nonce() {
        let key = Signer::genesis(crate::core::crypto::AgentKey::from_seed(&[7u8; 32]));
        let a = verify(&sign_read(&key, "GET", URL).unwrap(), "GET", URL).unwrap();
        let b = verify(&sign_read(&key, "GET", URL).unwrap(), "GET", URL).unwrap();
        assert_ne!(a.nonce, b.nonce);
        assert!(a
            .nonce
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn no_key_material_in_the_headers() {
        let key = Signer::genesis(crate::core::crypto::AgentKey::from_seed(&[7u8; 32]));
        let h = sign_read(&key, "GET", URL).unwrap();
        let seed_hex = hex::encode(key.key().seed());
        use base64::Engine as _;
        let seed_b64 = base64::engine::general_purpose::STANDARD.encode(key.key().seed());
        for (_, v) in &h {
            assert!(!v.contains(&seed_hex) && !v.contains(&seed_b64));
        }
    }
}
