//! Coinbase CDP authentication for its hosted x402 facilitator
//! (`https://api.cdp.coinbase.com/platform/v2/x402`): a Bearer JWT per
//! request, signed with a CDP Secret API key. Pure: the caller brings the
//! clock and the nonce, and sends the header.
//!
//! The token is what npm `@coinbase/cdp-sdk`'s `generateJwt` makes
//! (1.57.0, `_cjs/auth/utils/jwt.js` `buildEdwardsJWT`; npm `@coinbase/x402`
//! 2.1.0 `createAuthHeader` calls it for `/verify` and `/settle`), and the
//! tests reproduce that library's tokens byte for byte
//! (`tests/vectors/x402/cdp-jwt.json`, made by `make-cdp-jwt.mjs`):
//!
//! - header `{"alg":"EdDSA","kid":<key id>,"typ":"JWT","nonce":<32 hex>}`
//!   (16 random bytes, hex);
//! - claims `{"sub":<key id>,"iss":"cdp","uris":["<METHOD> <host><path>"],
//!   "iat":now,"nbf":now,"exp":now+120}`: `uris` (an array of one) binds
//!   the token to the request, the host keeping a non-default port and the
//!   path no query, e.g. `"POST api.cdp.coinbase.com/platform/v2/x402/settle"`;
//!   no `aud` (the SDK leaves it out unless asked for one);
//! - `base64url(header).base64url(claims).base64url(Ed25519 signature)`,
//!   without padding (RFC 7515/7519, RFC 8037 for EdDSA).
//!
//! The same SDK's Python half (coinbase/cdp-sdk `python/cdp/auth/utils/jwt.py`)
//! sends the same fields but `"aud":null` and a nonce of 16 decimal digits,
//! so CDP takes either; `uris` is the array form there too (the Coinbase
//! App / Advanced Trade APIs take a single `uri` string instead, e.g.
//! coinbase-advanced-py's `build_rest_jwt`: not this API's form).
//!
//! Keys: a CDP Ed25519 secret is the base64 of 64 bytes, the 32-byte seed
//! then the public key (the SDK's `buildEdwardsJWT`; docs.cdp.coinbase.com
//! /api-reference/v2/authentication). Older ECDSA keys (a PEM EC private key,
//! ES256) are refused with a clear error: signing them would need a P-256
//! crate the Worker does not carry.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use ed25519_dalek::{Signer, SigningKey};
use serde::Serialize;

/// The Worker secret holding the CDP API key's id (`kid` and `sub`): a UUID
/// or `organizations/…/apiKeys/…`.
pub const KEY_ID_SECRET: &str = "CDP_API_KEY_ID";
/// The Worker secret holding the CDP API key's secret (base64 Ed25519).
pub const KEY_SECRET_SECRET: &str = "CDP_API_KEY_SECRET";
/// How long a token is valid: the SDK's default `expiresIn`, the two
/// minutes of CDP's JWT guide
/// (docs.cdp.coinbase.com/get-started/authentication/jwt-authentication).
pub const JWT_LIFETIME_SECONDS: u64 = 120;
/// Bytes of randomness in the header's `nonce` (the SDK's `nonce()`).
pub const NONCE_BYTES: usize = 16;

/// Standard base64, padding optional (the secret as the CDP portal shows it
/// ends in `==`; a copy without it still reads).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A CDP Secret API key: its id and its Ed25519 signing key. Its `Debug`
/// shows the id only.
#[derive(Clone)]
pub struct CdpKey {
    id: String,
    signing: SigningKey,
}

impl std::fmt::Debug for CdpKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdpKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl PartialEq for CdpKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.signing.verifying_key() == other.signing.verifying_key()
    }
}

impl Eq for CdpKey {}

#[derive(Serialize)]
struct Header<'a> {
    alg: &'a str,
    kid: &'a str,
    typ: &'a str,
    nonce: &'a str,
}

#[derive(Serialize)]
struct Claims<'a> {
    sub: &'a str,
    iss: &'a str,
    uris: [&'a str; 1],
    iat: u64,
    nbf: u64,
    exp: u64,
}

impl CdpKey {
    /// Reads the two secrets. `Err` lists what is wrong with each, by the
    /// secret's name and never with its value.
    pub fn from_secrets(id: Option<&str>, secret: Option<&str>) -> Result<CdpKey, Vec<String>> {
        let mut problems = Vec::new();
        let id = match id.map(str::trim).filter(|s| !s.is_empty()) {
            None => {
                problems.push(format!(
                    "{KEY_ID_SECRET}: missing (X402_FACILITATOR_AUTH=cdp)"
                ));
                None
            }
            Some(id) if id.len() > 512 || id.chars().any(|c| c.is_control() || c == ' ') => {
                problems.push(format!(
                    "{KEY_ID_SECRET}: not a CDP key id (a UUID or organizations/…/apiKeys/…)"
                ));
                None
            }
            Some(id) => Some(id.to_owned()),
        };
        let signing = match secret.map(str::trim).filter(|s| !s.is_empty()) {
            None => {
                problems.push(format!(
                    "{KEY_SECRET_SECRET}: missing (X402_FACILITATOR_AUTH=cdp)"
                ));
                None
            }
            Some(s) => parse_secret(s)
                .map_err(|why| problems.push(format!("{KEY_SECRET_SECRET}: {why}")))
                .ok(),
        };
        match (id, signing) {
            (Some(id), Some(signing)) => Ok(CdpKey { id, signing }),
            _ => Err(problems),
        }
    }

    /// The key's id (`kid`, `sub`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The Bearer token for one request: `method` (`POST`) to `host_path`
    /// (`api.cdp.coinbase.com/platform/v2/x402/settle`: the URL's host, with
    /// its port if not the scheme's default, then its path), issued at `now`
    /// (Unix seconds), with `nonce` (fresh random bytes per token).
    pub fn jwt(
        &self,
        method: &str,
        host_path: &str,
        now: u64,
        nonce: &[u8; NONCE_BYTES],
    ) -> String {
        let nonce = hex::encode(nonce);
        let uri = format!("{method} {host_path}");
        let header = Header {
            alg: "EdDSA",
            kid: &self.id,
            typ: "JWT",
            nonce: &nonce,
        };
        let claims = Claims {
            sub: &self.id,
            iss: "cdp",
            uris: [&uri],
            iat: now,
            nbf: now,
            exp: now + JWT_LIFETIME_SECONDS,
        };
        // serde_json writes fields in declaration order, as JSON.stringify
        // writes the SDK's objects; plain strings escape alike in both.
        let signing_input = format!("{}.{}", part(&header), part(&claims));
        let signature = self.signing.sign(signing_input.as_bytes());
        format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }
}

/// One part of the token: base64url (no padding) of its JSON.
fn part(v: &impl Serialize) -> String {
    // Strings and integers only: serializing cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap_or_default())
}

/// The signing key in a CDP secret: base64 of seed ‖ public key, the two
/// halves agreeing. A PEM key is an ECDSA (ES256) one: refused by name.
fn parse_secret(secret: &str) -> Result<SigningKey, &'static str> {
    if secret.contains("-----BEGIN") || secret.contains("PRIVATE KEY") {
        return Err(
            "an ECDSA (ES256) PEM key: ES256 keys are not supported; create an Ed25519 CDP key",
        );
    }
    let compact: String = secret
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let bytes = LENIENT
        .decode(&compact)
        .map_err(|_| "not base64 (an Ed25519 CDP secret is the base64 of 64 bytes)")?;
    let pair: [u8; 64] = bytes
        .try_into()
        .map_err(|_| "not 64 bytes (an Ed25519 CDP secret is the base64 of seed and public key)")?;
    SigningKey::from_keypair_bytes(&pair)
        .map_err(|_| "its public key does not match its seed (a truncated or altered secret)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signature, Verifier};
    use serde_json::Value;

    /// What `@coinbase/cdp-sdk`'s generateJwt made (make-cdp-jwt.mjs).
    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../../../tests/vectors/x402/cdp-jwt.json")).unwrap()
    }

    fn nonce(hex_text: &str) -> [u8; NONCE_BYTES] {
        hex::decode(hex_text).unwrap().try_into().unwrap()
    }

    #[test]
    fn reproduces_the_official_sdks_tokens_byte_for_byte() {
        let v = vectors();
        let secret = v["key"]["secret"].as_str().unwrap();
        let cases = v["cases"].as_array().unwrap();
        assert!(cases.len() >= 4);
        for c in cases {
            let key = CdpKey::from_secrets(c["key_id"].as_str(), Some(secret)).unwrap();
            let host_path = format!(
                "{}{}",
                c["request_host"].as_str().unwrap(),
                c["request_path"].as_str().unwrap()
            );
            let jwt = key.jwt(
                c["method"].as_str().unwrap(),
                &host_path,
                c["now"].as_u64().unwrap(),
                &nonce(c["nonce"].as_str().unwrap()),
            );
            assert_eq!(jwt, c["jwt"].as_str().unwrap(), "{}", c["url"]);
        }
        // The settle case, field by field, as CDP reads it.
        let c = &cases[0];
        assert_eq!(
            c["payload"]["uris"][0],
            "POST api.cdp.coinbase.com/platform/v2/x402/settle"
        );
        assert_eq!(c["header"]["alg"], "EdDSA");
    }

    #[test]
    fn the_token_reads_back_and_verifies() {
        let v = vectors();
        let key = CdpKey::from_secrets(Some("k-1"), v["key"]["secret"].as_str()).unwrap();
        assert_eq!(
            hex::encode(key.signing.verifying_key().as_bytes()),
            v["key"]["public_key_hex"].as_str().unwrap()
        );
        let jwt = key.jwt("POST", "127.0.0.1:4022/verify", 1_000, &[0xab; 16]);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let read = |s: &str| -> Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap()
        };
        let (h, p) = (read(parts[0]), read(parts[1]));
        assert_eq!(
            h,
            serde_json::json!({"alg":"EdDSA","kid":"k-1","typ":"JWT","nonce":"ab".repeat(16)})
        );
        assert_eq!(
            p,
            serde_json::json!({"sub":"k-1","iss":"cdp","uris":["POST 127.0.0.1:4022/verify"],
                "iat":1000,"nbf":1000,"exp":1120})
        );
        let sig: [u8; 64] = URL_SAFE_NO_PAD
            .decode(parts[2])
            .unwrap()
            .try_into()
            .unwrap();
        key.signing
            .verifying_key()
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &Signature::from_bytes(&sig),
            )
            .unwrap();
    }

    #[test]
    fn bad_secrets_are_named_never_shown() {
        let good = vectors()["key"]["secret"].as_str().unwrap().to_owned();
        let err =
            |id: Option<&str>, secret: Option<&str>| CdpKey::from_secrets(id, secret).unwrap_err();
        let e = err(None, None);
        assert!(
            e[0].starts_with(KEY_ID_SECRET) && e[1].starts_with(KEY_SECRET_SECRET),
            "{e:?}"
        );
        assert_eq!(err(Some("  "), Some(&good)).len(), 1);
        let pem = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIAbc\n-----END EC PRIVATE KEY-----\n";
        let e = err(Some("k"), Some(pem));
        assert!(
            e[0].contains("ES256 keys are not supported; create an Ed25519 CDP key"),
            "{e:?}"
        );
        // Too short, not base64, halves that disagree: each named, none shown.
        let mut pair = LENIENT.decode(&good).unwrap();
        pair[40] ^= 1;
        let swapped = LENIENT.encode(&pair);
        for bad in [&good[..44], "not base64!!", swapped.as_str()] {
            let e = err(Some("k"), Some(bad));
            assert_eq!(e.len(), 1, "{e:?}");
            assert!(e[0].starts_with(KEY_SECRET_SECRET), "{e:?}");
            assert!(!e[0].contains(bad), "{e:?}");
        }
        assert!(err(Some("a b"), Some(&good))[0].starts_with(KEY_ID_SECRET));
        // Padding optional, surrounding whitespace ignored; Debug shows no secret.
        let key = CdpKey::from_secrets(
            Some(" k "),
            Some(&format!(" {} \n", good.trim_end_matches('='))),
        )
        .unwrap();
        assert_eq!(key.id(), "k");
        let shown = format!("{key:?}");
        assert!(
            shown.contains("\"k\"") && !shown.contains(&good[..20]),
            "{shown}"
        );
    }
}
