//! The signed claim that ties an on-chain payment to an agent.
//!
//! The agent signs `SHA-256(JCS(message))` with its Ed25519 key, where
//! `message = {"domain": "self_capsule_upgrade_claim_v1", "agent_id",
//! "invoice_id", "tx_hash", "seq"}`. A capsule write signs
//! `SHA-256(JCS({"agent_id", "seq", "capsule"}))`: the two objects never have
//! the same members (a claim has `domain` and no `capsule`), so their
//! canonical bytes never coincide and a signature made for one can never be
//! replayed as the other.

use super::evm::parse_tx_hash;
use crate::core::crypto::{is_lower_hex, AgentId, AgentKey, PublicKey};
use crate::core::jcs;
use crate::core::json::{self, Json};
use crate::core::key_log::KeysSummary;
use crate::core::reason::{ReasonCode, Refusal};
use sha2::{Digest, Sha256};

/// The `domain` member of every claim message.
pub const CLAIM_DOMAIN: &str = "self_capsule_upgrade_claim_v1";
/// The members of a claim body.
const FIELDS: [&str; 6] = [
    "invoice_id",
    "agent_id",
    "public_key",
    "tx_hash",
    "seq",
    "signature",
];

/// A claim whose shape and signature checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The invoice being paid.
    pub invoice_id: String,
    /// The claiming agent.
    pub agent_id: AgentId,
    /// The key that signed: the agent's genesis key (its SHA-256 is the
    /// agent id) or, after a rotation, its current key; which one may sign
    /// is [`signer_stands`]'s call, against the agent's key log.
    pub signer: PublicKey,
    /// The payment transaction, `0x` + 64 lowercase hex.
    pub tx_hash: String,
    /// Any integer 0..2^53-1 the agent chose; part of the signed message.
    pub seq: u64,
}

/// Why a claim body was refused before anything stored was looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// Not a JSON object of exactly the six members with their types.
    Malformed(String),
    /// The signature does not verify under the given key.
    BadSignature(String),
}

/// The 32 bytes a claim signs.
pub fn claim_digest(agent_id: &AgentId, invoice_id: &str, tx_hash: &str, seq: u64) -> [u8; 32] {
    let message = Json::Object(vec![
        ("domain".into(), Json::from(CLAIM_DOMAIN)),
        ("agent_id".into(), Json::from(agent_id.as_str())),
        ("invoice_id".into(), Json::from(invoice_id)),
        ("tx_hash".into(), Json::from(tx_hash)),
        ("seq".into(), Json::from(seq)),
    ]);
    Sha256::digest(jcs::canonicalize(&message).as_bytes()).into()
}

/// A whole claim body, signed by `key` as its own agent (the genesis key).
pub fn sign_claim(key: &AgentKey, invoice_id: &str, tx_hash: &str, seq: u64) -> Json {
    sign_claim_as(key, &key.agent_id(), invoice_id, tx_hash, seq)
}

/// A whole claim body for `agent_id`, signed by `key`: after a rotation
/// (§14) the agent's current key signs for it.
pub fn sign_claim_as(
    key: &AgentKey,
    agent_id: &AgentId,
    invoice_id: &str,
    tx_hash: &str,
    seq: u64,
) -> Json {
    let sig = key.sign(&claim_digest(agent_id, invoice_id, tx_hash, seq));
    Json::Object(vec![
        ("invoice_id".into(), Json::from(invoice_id)),
        ("agent_id".into(), Json::from(agent_id.as_str())),
        ("public_key".into(), Json::from(key.public_key().to_hex())),
        ("tx_hash".into(), Json::from(tx_hash)),
        ("seq".into(), Json::from(seq)),
        ("signature".into(), Json::from(hex::encode(sig))),
    ])
}

/// Whether `s` looks like an invoice id the service issues (`inv_` + 32
/// lowercase hex).
pub fn is_invoice_id(s: &str) -> bool {
    s.strip_prefix("inv_").is_some_and(|h| is_lower_hex(h, 32))
}

/// Reads and authenticates a claim body. Stateless: whether the invoice
/// exists and belongs to this agent is the agent's Durable Object's call.
pub fn read_claim(body: &[u8]) -> Result<Claim, ClaimError> {
    let bad = |why: &str| ClaimError::Malformed(why.to_owned());
    let v = json::parse(body).map_err(|_| bad("body is not acceptable JSON"))?;
    let members = v
        .as_object()
        .ok_or_else(|| bad("body must be a JSON object"))?;
    if let Some((k, _)) = members.iter().find(|(k, _)| !FIELDS.contains(&k.as_str())) {
        return Err(ClaimError::Malformed(format!(
            "unknown field {:?}; a claim has exactly {}",
            k.chars().take(32).collect::<String>(),
            FIELDS.join(", ")
        )));
    }
    let text = |k: &str| v.get(k).and_then(Json::as_str);
    let invoice_id = text("invoice_id")
        .filter(|s| is_invoice_id(s))
        .ok_or_else(|| bad("invoice_id must be the id a quote returned (inv_ + 32 hex)"))?;
    let agent_id = text("agent_id")
        .and_then(AgentId::parse)
        .ok_or_else(|| bad("agent_id must be 64 lowercase hex"))?;
    let tx_hash = text("tx_hash")
        .and_then(parse_tx_hash)
        .ok_or_else(|| bad("tx_hash must be 0x + 64 hex"))?;
    let seq = v
        .get("seq")
        .and_then(Json::as_safe_u64)
        .ok_or_else(|| bad("seq must be an integer 0..2^53-1"))?;
    let key = text("public_key")
        .ok_or_else(|| bad("public_key must be 64 lowercase hex"))
        .and_then(|k| {
            PublicKey::from_hex(k).map_err(|e| ClaimError::BadSignature(e.to_string()))
        })?;
    let signature = text("signature")
        .filter(|s| is_lower_hex(s, 128))
        .ok_or_else(|| bad("signature must be 128 lowercase hex"))?;
    let mut sig = [0u8; 64];
    hex::decode_to_slice(signature, &mut sig).map_err(|_| bad("signature is not hex"))?;
    if !key.verify(&claim_digest(&agent_id, invoice_id, &tx_hash, seq), &sig) {
        return Err(ClaimError::BadSignature(
            "signature does not verify over the claim message".into(),
        ));
    }
    Ok(Claim {
        invoice_id: invoice_id.to_owned(),
        agent_id,
        signer: key,
        tx_hash,
        seq,
    })
}

/// Whether the claim's signer speaks for its agent: its genesis key while
/// the agent has no key log (`keys`, head.json's summary), else the key its
/// log made current. A rotated-out genesis key gets `key_rotated` (a thief
/// holding it must not be able to spend the owner's payments on itself);
/// any other key `bad_signature`.
pub fn signer_stands(claim: &Claim, keys: Option<&KeysSummary>) -> Result<(), Refusal> {
    let genesis = claim.signer.agent_id() == claim.agent_id;
    match keys {
        None if genesis => Ok(()),
        Some(k) if k.public_key == claim.signer.to_hex() => Ok(()),
        Some(_) if genesis => Err(Refusal::new(
            ReasonCode::KeyRotated,
            "this key was rotated out of the agent's key log: sign the claim with its current key",
        )),
        _ => Err(Refusal::new(
            ReasonCode::BadSignature,
            "public_key is not the agent's key (its genesis key, or the current key of its key log)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::crypto::write_digest;

    const INV: &str = "inv_0123456789abcdef0123456789abcdef";

    fn tx() -> String {
        format!("0x{}", "ab".repeat(32))
    }

    fn body(v: &Json) -> Vec<u8> {
        jcs::canonicalize(v).into_bytes()
    }

    fn set(v: &Json, k: &str, x: Json) -> Json {
        let Json::Object(mut m) = v.clone() else {
            panic!()
        };
        m.retain(|(n, _)| n != k);
        m.push((k.into(), x));
        Json::Object(m)
    }

    #[test]
    fn a_signed_claim_reads_back() {
        let key = AgentKey::from_seed(&[3; 32]);
        let c = read_claim(&body(&sign_claim(&key, INV, &tx(), 7))).unwrap();
        assert_eq!(c.agent_id, key.agent_id());
        assert_eq!((c.invoice_id.as_str(), c.seq), (INV, 7));
        // The message holds the hash normalised to lowercase: an upper-case
        // spelling in the body is the same transaction and the same claim.
        let upper = set(
            &sign_claim(&key, INV, &tx(), 7),
            "tx_hash",
            Json::from(format!("0x{}", "AB".repeat(32))),
        );
        assert_eq!(read_claim(&body(&upper)).unwrap().tx_hash, tx());
    }

    #[test]
    fn every_signed_member_is_bound() {
        let key = AgentKey::from_seed(&[3; 32]);
        let good = sign_claim(&key, INV, &tx(), 7);
        for (k, x) in [
            (
                "invoice_id",
                Json::from("inv_ffffffffffffffffffffffffffffffff"),
            ),
            ("tx_hash", Json::from(format!("0x{}", "cd".repeat(32)))),
            ("seq", Json::from(8u64)),
        ] {
            let r = read_claim(&body(&set(&good, k, x)));
            assert!(matches!(r, Err(ClaimError::BadSignature(_))), "{k}: {r:?}");
        }
        // Another agent's key over the same message: refused.
        let thief = AgentKey::from_seed(&[4; 32]);
        let stolen = set(&good, "public_key", Json::from(thief.public_key().to_hex()));
        assert!(matches!(
            read_claim(&body(&stolen)),
            Err(ClaimError::BadSignature(_))
        ));
    }

    #[test]
    fn only_the_agents_current_key_stands_behind_a_claim() {
        let genesis = AgentKey::from_seed(&[3; 32]);
        let id = genesis.agent_id();
        let rotated_to = AgentKey::from_seed(&[5; 32]);
        // A claim for agent `id` signed by another key: the signature itself
        // verifies under the key it names.
        let as_agent = |k: &AgentKey| {
            let sig = k.sign(&claim_digest(&id, INV, &tx(), 7));
            let mut b = sign_claim(&genesis, INV, &tx(), 7);
            b = set(&b, "public_key", Json::from(k.public_key().to_hex()));
            set(&b, "signature", Json::from(hex::encode(sig)))
        };
        let by_other = read_claim(&body(&as_agent(&rotated_to))).unwrap();
        let by_genesis = read_claim(&body(&sign_claim(&genesis, INV, &tx(), 7))).unwrap();
        let code = |c: &Claim, k: Option<&KeysSummary>| signer_stands(c, k).err().map(|r| r.code);
        // No key log: the genesis key only.
        assert_eq!(code(&by_genesis, None), None);
        assert_eq!(code(&by_other, None), Some(ReasonCode::BadSignature));
        // Rotated to key 5: it stands, the genesis key is rotated out.
        let summary = KeysSummary {
            index: 1,
            public_key: rotated_to.public_key().to_hex(),
            length: 2,
            head_hash: "00".repeat(32),
            next_committed: true,
            recovery_committed: false,
            final_at: None,
            pending_recommit: None,
            disputed: 0,
        };
        assert_eq!(code(&by_other, Some(&summary)), None);
        assert_eq!(
            code(&by_genesis, Some(&summary)),
            Some(ReasonCode::KeyRotated)
        );
        let stranger = read_claim(&body(&as_agent(&AgentKey::from_seed(&[6; 32])))).unwrap();
        assert_eq!(
            code(&stranger, Some(&summary)),
            Some(ReasonCode::BadSignature)
        );
    }

    #[test]
    fn a_capsule_signature_is_never_a_claim_signature() {
        let key = AgentKey::from_seed(&[3; 32]);
        let id = key.agent_id();
        // The claim digest differs from every write digest of the same
        // agent and seq (the messages have different members).
        let claim = claim_digest(&id, INV, &tx(), 7);
        assert_ne!(claim, write_digest(&id, 7, &Json::Object(vec![])));
        // A write signature placed in a claim does not verify.
        let write_sig = key.sign(&write_digest(&id, 7, &Json::Object(vec![])));
        let forged = set(
            &sign_claim(&key, INV, &tx(), 7),
            "signature",
            Json::from(hex::encode(write_sig)),
        );
        assert!(matches!(
            read_claim(&body(&forged)),
            Err(ClaimError::BadSignature(_))
        ));
    }

    #[test]
    fn malformed_bodies_are_refused_before_any_crypto() {
        let key = AgentKey::from_seed(&[3; 32]);
        let good = sign_claim(&key, INV, &tx(), 7);
        for bad in [
            b"not json".to_vec(),
            b"[]".to_vec(),
            body(&set(&good, "extra", Json::from(1u64))),
            body(&set(&good, "invoice_id", Json::from("inv_1"))),
            body(&set(&good, "tx_hash", Json::from("0x12"))),
            body(&set(&good, "seq", Json::Number(-1.0))),
            body(&set(&good, "signature", Json::from("00"))),
            body(&set(&good, "agent_id", Json::from("x"))),
        ] {
            assert!(
                matches!(read_claim(&bad), Err(ClaimError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(&bad)
            );
        }
    }
}
