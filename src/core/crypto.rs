//! Identity and signatures: `agent_id` derivation, strict public-key parsing,
//! the exact message a write signs, Ed25519 verification with
//! `verify_strict`, and signing helpers for tests and the CLI.

use crate::core::jcs;
use crate::core::json::Json;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;

/// The only accepted `signature_alg` (also assumed when absent).
pub const SIGNATURE_ALG: &str = "ed25519";

/// A well-formed agent id: 64 lowercase hex characters (SHA-256 of the raw
/// 32-byte public key). Constructing one proves the format, nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(String);

impl AgentId {
    /// Accepts exactly `^[0-9a-f]{64}$` (no upper case, no `sha256:` prefix),
    /// so every agent has exactly one spelling in paths and storage keys.
    pub fn parse(s: &str) -> Option<AgentId> {
        is_lower_hex(s, 64).then(|| AgentId(s.to_owned()))
    }
    /// The agent id that belongs to a public key.
    pub fn of_key(key: &PublicKey) -> AgentId {
        AgentId(hex::encode(Sha256::digest(key.0.as_bytes())))
    }
    /// The 64 lowercase hex characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for AgentId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// `s` is exactly `len` lowercase hex digits.
pub fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why a public key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// Not hex/base64/base64url, or not 32 bytes.
    Encoding,
    /// Not the encoding of a curve point.
    NotAPoint,
    /// A point, but not in its canonical encoding (y >= p, or sign bit on x = 0).
    NonCanonical,
    /// A small-order ("weak") point: signatures under it prove nothing.
    Weak,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyError::Encoding => "public key must be 32 bytes as hex, base64 or base64url",
            KeyError::NotAPoint => "public key is not a valid Ed25519 point",
            KeyError::NonCanonical => "public key is not canonically encoded",
            KeyError::Weak => "public key is a weak (small-order) point",
        })
    }
}

/// An Ed25519 public key that is canonically encoded and not of small order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Validates raw key bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<PublicKey, KeyError> {
        let key = VerifyingKey::from_bytes(bytes).map_err(|_| KeyError::NotAPoint)?;
        // dalek accepts some non-canonical encodings; re-encoding shows them.
        if key.to_edwards().compress().as_bytes() != bytes {
            return Err(KeyError::NonCanonical);
        }
        if key.is_weak() {
            return Err(KeyError::Weak);
        }
        Ok(PublicKey(key))
    }
    /// The envelope form: exactly 64 lowercase hex characters.
    pub fn from_hex(s: &str) -> Result<PublicKey, KeyError> {
        if !is_lower_hex(s, 64) {
            return Err(KeyError::Encoding);
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(s, &mut bytes).map_err(|_| KeyError::Encoding)?;
        PublicKey::from_bytes(&bytes)
    }
    /// The bootstrap form: hex (either case), base64 or base64url, padded or not.
    pub fn parse_any(s: &str) -> Result<PublicKey, KeyError> {
        let s = s.trim();
        let bytes: Vec<u8> = if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(s).map_err(|_| KeyError::Encoding)?
        } else {
            use base64::engine::general_purpose::{
                STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
            };
            [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
                .iter()
                .find_map(|engine| engine.decode(s).ok())
                .ok_or(KeyError::Encoding)?
        };
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Encoding)?;
        PublicKey::from_bytes(&bytes)
    }
    /// The envelope form: 64 lowercase hex characters of the 32 raw bytes.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0.as_bytes())
    }
    /// The raw 32-byte RFC 8032 encoding (what `agent_id` hashes).
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }
    /// The agent id this key owns: lowercase hex of SHA-256 over the 32 raw bytes.
    pub fn agent_id(&self) -> AgentId {
        AgentId::of_key(self)
    }
    /// Strict verification (RFC 8032 plus the checks `verify_strict` adds:
    /// small-order R rejected, non-canonical S rejected by the parser).
    pub fn verify(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let sig = Signature::from_bytes(signature);
        self.0.verify_strict(message, &sig).is_ok()
    }
}

/// The 32 bytes a write signs:
/// `SHA-256(JCS({"agent_id": id, "seq": seq, "capsule": capsule}))`.
pub fn write_digest(agent_id: &AgentId, seq: u64, capsule: &Json) -> [u8; 32] {
    write_digest_of_canonical(agent_id, seq, &jcs::canonicalize(capsule))
}

/// [`write_digest`] of a capsule already in its RFC 8785 form
/// (`canonical`), which a write needs anyway (size, cursor): the message's
/// members sort as `agent_id`, `capsule`, `seq`, so its canonical text is
/// the capsule's between two fixed parts, hashed without copying it.
pub fn write_digest_of_canonical(agent_id: &AgentId, seq: u64, canonical: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"{\"agent_id\":");
    h.update(jcs::canonicalize(&Json::from(agent_id.as_str())).as_bytes());
    h.update(b",\"capsule\":");
    h.update(canonical.as_bytes());
    h.update(b",\"seq\":");
    h.update(jcs::canonicalize(&Json::from(seq)).as_bytes());
    h.update(b"}");
    h.finalize().into()
}

/// An agent's private key, for tests and the CLI. Never serialised or printed.
pub struct AgentKey(SigningKey);

impl AgentKey {
    /// A new random key from the OS (or, in wasm, Web Crypto) RNG.
    pub fn generate() -> Result<AgentKey, getrandom::Error> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed)?;
        Ok(AgentKey::from_seed(&seed))
    }
    /// The RFC 8032 32-byte secret seed.
    pub fn from_seed(seed: &[u8; 32]) -> AgentKey {
        AgentKey(SigningKey::from_bytes(seed))
    }
    /// The 32-byte secret seed (the client stores it, as hex, in its key file); a secret.
    pub fn seed(&self) -> [u8; 32] {
        self.0.to_bytes()
    }
    /// The public half, as a validated [`PublicKey`].
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }
    /// The agent id of this key's public half.
    pub fn agent_id(&self) -> AgentId {
        self.public_key().agent_id()
    }
    /// The 64-byte Ed25519 signature over `message`; a write signs the 32 bytes of
    /// [`write_digest`].
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }
    /// A complete PUT envelope for `capsule` at `seq`, by the genesis key
    /// (this key's own agent id).
    pub fn sign_envelope(&self, seq: u64, capsule: &Json) -> Json {
        self.sign_envelope_as(&self.agent_id(), seq, capsule)
    }
    /// A complete PUT envelope for `capsule` at `seq` as `agent_id`: after a
    /// key rotation (§14) the current key signs, and the agent id stays the
    /// genesis key's hash, so the two differ.
    pub fn sign_envelope_as(&self, agent_id: &AgentId, seq: u64, capsule: &Json) -> Json {
        let signature = self.sign(&write_digest(agent_id, seq, capsule));
        Json::Object(vec![
            ("agent_id".into(), Json::from(agent_id.as_str())),
            ("public_key".into(), Json::from(self.public_key().to_hex())),
            ("seq".into(), Json::from(seq)),
            ("signature_alg".into(), Json::from(SIGNATURE_ALG)),
            ("signature".into(), Json::from(hex::encode(signature))),
            ("capsule".into(), capsule.clone()),
        ])
    }
}

impl fmt::Debug for AgentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentKey({})", self.agent_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8032 §7.1 TEST 1.
    const RFC8032_SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    const RFC8032_PUB: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    const RFC8032_SIG_EMPTY: &str = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

    fn rfc_key() -> AgentKey {
        let mut seed = [0u8; 32];
        hex::decode_to_slice(RFC8032_SEED, &mut seed).unwrap();
        AgentKey::from_seed(&seed)
    }

    #[test]
    fn rfc8032_test1() {
        let key = rfc_key();
        assert_eq!(key.public_key().to_hex(), RFC8032_PUB);
        assert_eq!(hex::encode(key.sign(b"")), RFC8032_SIG_EMPTY);
        let sig: [u8; 64] = hex::decode(RFC8032_SIG_EMPTY).unwrap().try_into().unwrap();
        assert!(key.public_key().verify(b"", &sig));
        assert!(!key.public_key().verify(b"x", &sig));
    }

    #[test]
    fn the_write_digest_of_canonical_text_is_that_of_the_whole_message() {
        let agent = rfc_key().agent_id();
        for (seq, capsule) in [
            (0, r#"{}"#),
            (7, r#"{"b":[1,2.5,"x\u0001"],"a":{"z":null,"é":true}}"#),
            (
                9_007_199_254_740_991,
                r#"{"self_motto":"\ud83d\ude00 \"q\""}"#,
            ),
        ] {
            let capsule = crate::core::json::parse_str(capsule).unwrap();
            let message = Json::Object(vec![
                ("agent_id".into(), Json::from(agent.as_str())),
                ("seq".into(), Json::from(seq)),
                ("capsule".into(), capsule.clone()),
            ]);
            let whole: [u8; 32] = Sha256::digest(jcs::canonicalize(&message).as_bytes()).into();
            assert_eq!(write_digest(&agent, seq, &capsule), whole);
            assert_eq!(
                write_digest_of_canonical(&agent, seq, &jcs::canonicalize(&capsule)),
                whole
            );
        }
    }

    #[test]
    fn agent_id_is_sha256_of_raw_key_bytes() {
        let key = rfc_key();
        let want = hex::encode(Sha256::digest(hex::decode(RFC8032_PUB).unwrap()));
        assert_eq!(key.agent_id().as_str(), want);
        assert!(AgentId::parse(&want).is_some());
        assert!(AgentId::parse(&want.to_uppercase()).is_none());
        assert!(AgentId::parse(&format!("sha256:{want}")).is_none());
        assert!(AgentId::parse(&want[..63]).is_none());
    }

    #[test]
    fn parse_any_accepts_hex_base64_base64url() {
        let raw = hex::decode(RFC8032_PUB).unwrap();
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        for form in [
            RFC8032_PUB.to_string(),
            RFC8032_PUB.to_uppercase(),
            STANDARD.encode(&raw),
            URL_SAFE_NO_PAD.encode(&raw),
        ] {
            assert_eq!(
                PublicKey::parse_any(&form).unwrap().to_hex(),
                RFC8032_PUB,
                "{form}"
            );
        }
        assert_eq!(PublicKey::parse_any("abcd"), Err(KeyError::Encoding));
        assert_eq!(
            PublicKey::from_hex(&RFC8032_PUB.to_uppercase()),
            Err(KeyError::Encoding)
        );
    }

    #[test]
    fn weak_and_non_canonical_keys_are_refused() {
        // The identity point (small order).
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(PublicKey::from_bytes(&identity), Err(KeyError::Weak));
        // All-zero bytes decode to a point of order 4.
        assert_eq!(PublicKey::from_bytes(&[0u8; 32]), Err(KeyError::Weak));
        // y = p + 1 (non-canonical spelling of y = 1).
        let mut non_canonical = [0xffu8; 32];
        non_canonical[0] = 0xee;
        non_canonical[31] = 0x7f;
        assert!(matches!(
            PublicKey::from_bytes(&non_canonical),
            Err(KeyError::NonCanonical | KeyError::NotAPoint)
        ));
    }

    #[test]
    fn envelope_signature_verifies_over_the_digest() {
        let key = rfc_key();
        let capsule = crate::core::json::parse_str(r#"{"b":1,"a":"x"}"#).unwrap();
        let env = key.sign_envelope(7, &capsule);
        let sig: [u8; 64] = hex::decode(env.get("signature").unwrap().as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        let digest = write_digest(&key.agent_id(), 7, &capsule);
        assert!(key.public_key().verify(&digest, &sig));
        assert!(!key
            .public_key()
            .verify(&write_digest(&key.agent_id(), 8, &capsule), &sig));
        // The digest is over canonical bytes, so key order in the capsule does not matter.
        let reordered = crate::core::json::parse_str(r#"{"a":"x","b":1}"#).unwrap();
        assert_eq!(digest, write_digest(&key.agent_id(), 7, &reordered));
    }

    #[test]
    fn non_canonical_s_is_rejected() {
        let key = rfc_key();
        let mut sig: [u8; 64] = hex::decode(RFC8032_SIG_EMPTY).unwrap().try_into().unwrap();
        // S + L (the group order) verifies under a lax check; strict must refuse.
        const L: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
            0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut carry = 0u16;
        for i in 0..32 {
            let v = sig[32 + i] as u16 + L[i] as u16 + carry;
            sig[32 + i] = v as u8;
            carry = v >> 8;
        }
        assert!(!key.public_key().verify(b"", &sig));
    }
}
