//! A write's envelope, authenticated: steps 1–4 of the write check (body cap,
//! JSON, envelope shape, signature), which need no stored state.
//!
//! This is the read side's part of the core (it is compiled into every
//! build, the entry Worker's included): it only says *whether* and *why
//! not*. How a refusal is worded for the client ([`crate::core::write`]'s
//! `Rejection`, whose paths pass through the safety scanner's redaction) is
//! the write side's, made from [`EnvelopeError`] in one place.

use crate::core::crypto::{
    is_lower_hex, write_digest_of_canonical, AgentId, PublicKey, SIGNATURE_ALG,
};
use crate::core::jcs;
use crate::core::json::{self, Json, JsonError};
use crate::core::limits::MAX_BODY_BYTES;

/// The members an envelope may have.
pub const ENVELOPE_FIELDS: &[&str] = &[
    "agent_id",
    "public_key",
    "seq",
    "signature_alg",
    "signature",
    "capsule",
];

/// Whose key may sign a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// The genesis key: every agent without a key log.
    Genesis,
    /// Any key: the agent has a key log, and its object checks the key
    /// against it.
    KeyLog,
}

/// Whether the signature is verified again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    /// Verify it.
    Verify,
    /// The stateless pre-check verified these exact bytes already: the
    /// Worker runs it before handing a body to the agent's Durable Object,
    /// which nothing but the service's Workers can reach, so the object does
    /// not verify again (an Ed25519 verification is the largest single cost
    /// of a write check). Everything else, the envelope's shape and the
    /// key's hash included, is still checked.
    Prechecked,
}

/// The parsed envelope after the signature checked out.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The envelope's `seq`.
    pub seq: u64,
    /// The capsule as sent.
    pub capsule: Json,
    /// The capsule's RFC 8785 text (the signed message holds it; size and
    /// cursor are taken from it too).
    pub canonical: String,
    /// The key that signed.
    pub public_key: PublicKey,
    /// The signature, as sent (128 lowercase hex characters).
    pub signature: String,
    /// The signed digest, `sha256(JCS({agent_id, seq, capsule}))`.
    pub digest: [u8; 32],
}

/// One problem with the envelope's shape, in the order found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeProblem {
    /// A member that is not an envelope field (its key, as sent).
    UnknownField(String),
    /// `seq` missing or not an integer in 0..=2^53-1.
    BadSeq,
    /// `capsule` missing or not an object.
    NoCapsule,
    /// `agent_id` is not the path's agent.
    AgentId,
    /// `capsule.agent_id` is not the path's agent.
    CapsuleAgentId,
}

/// Why an envelope did not authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// The body is larger than the cap (its length).
    TooLarge(u64),
    /// The body is not acceptable JSON.
    Json(JsonError),
    /// The body is JSON but not an object.
    NotAnObject,
    /// The envelope's members are wrong (every problem found).
    Shape(Vec<ShapeProblem>),
    /// The signature does not check out, and why.
    BadSignature(String),
    /// `public_key` is not the agent's genesis key (its SHA-256 is not the
    /// agent id), where only the genesis key may sign.
    NotTheAgentsKey,
}

/// [`authenticate`] of `body`, after the cap and the JSON parse.
pub fn authenticate_body(
    body: &[u8],
    path_agent: &AgentId,
    signature: Signature,
    signer: Signer,
) -> Result<Signed, EnvelopeError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(EnvelopeError::TooLarge(body.len() as u64));
    }
    let envelope = json::parse(body).map_err(EnvelopeError::Json)?;
    authenticate(&envelope, path_agent, signature, signer)
}

/// The envelope's shape, then its signer and signature, for the agent
/// `path_agent` names.
pub fn authenticate(
    envelope: &Json,
    path_agent: &AgentId,
    check_signature: Signature,
    signer: Signer,
) -> Result<Signed, EnvelopeError> {
    let Some(entries) = envelope.as_object() else {
        return Err(EnvelopeError::NotAnObject);
    };
    let mut shape: Vec<ShapeProblem> = entries
        .iter()
        .filter(|(k, _)| !ENVELOPE_FIELDS.contains(&k.as_str()))
        .map(|(k, _)| ShapeProblem::UnknownField(k.clone()))
        .collect();
    let seq = envelope.get("seq").and_then(Json::as_safe_u64);
    if seq.is_none() {
        shape.push(ShapeProblem::BadSeq);
    }
    let capsule = envelope.get("capsule").filter(|c| c.as_object().is_some());
    if capsule.is_none() {
        shape.push(ShapeProblem::NoCapsule);
    }
    match envelope.get("agent_id") {
        Some(Json::String(s)) if s == path_agent.as_str() => {}
        None => {}
        Some(_) => shape.push(ShapeProblem::AgentId),
    }
    if let Some(Json::String(s)) = capsule.and_then(|c| c.get("agent_id")) {
        if s != path_agent.as_str() {
            shape.push(ShapeProblem::CapsuleAgentId);
        }
    }
    let (Some(seq), Some(capsule), true) = (seq, capsule, shape.is_empty()) else {
        return Err(EnvelopeError::Shape(shape));
    };

    let bad = |why: &str| EnvelopeError::BadSignature(why.to_owned());
    match envelope.get("signature_alg") {
        None => {}
        Some(Json::String(s)) if s == SIGNATURE_ALG => {}
        Some(_) => return Err(bad("signature_alg must be \"ed25519\" or absent")),
    }
    let public_key = envelope
        .get("public_key")
        .and_then(Json::as_str)
        .ok_or_else(|| bad("public_key is required (64 lowercase hex characters)"))
        .and_then(|s| PublicKey::from_hex(s).map_err(|e| bad(&e.to_string())))?;
    if signer == Signer::Genesis && &public_key.agent_id() != path_agent {
        return Err(EnvelopeError::NotTheAgentsKey);
    }
    let signature = envelope
        .get("signature")
        .and_then(Json::as_str)
        .filter(|s| is_lower_hex(s, 128))
        .ok_or_else(|| bad("signature is required (128 lowercase hex characters)"))?;
    let mut sig = [0u8; 64];
    hex::decode_to_slice(signature, &mut sig).map_err(|_| bad("signature is not hex"))?;
    let canonical = jcs::canonicalize(capsule);
    let digest = write_digest_of_canonical(path_agent, seq, &canonical);
    if check_signature == Signature::Verify && !public_key.verify(&digest, &sig) {
        return Err(bad(
            "signature does not verify over sha256(JCS({agent_id, seq, capsule}))",
        ));
    }
    Ok(Signed {
        seq,
        capsule: capsule.clone(),
        canonical,
        public_key,
        signature: signature.to_owned(),
        digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::crypto::AgentKey;
    use crate::core::testing;

    fn body(envelope: &Json) -> Vec<u8> {
        serde_json::to_vec(envelope).unwrap()
    }

    #[test]
    fn a_signed_envelope_authenticates_and_keeps_what_the_check_needs() {
        let k = AgentKey::from_seed(&[7; 32]);
        let capsule = testing::example_for(k.agent_id());
        let signed = authenticate_body(
            &body(&k.sign_envelope(3, &capsule)),
            &k.agent_id(),
            Signature::Verify,
            Signer::Genesis,
        )
        .unwrap();
        assert_eq!(signed.seq, 3);
        assert_eq!(signed.public_key, k.public_key());
        assert_eq!(signed.canonical, jcs::canonicalize(&capsule));
    }

    #[test]
    fn every_shape_problem_is_reported_in_order() {
        let k = AgentKey::from_seed(&[7; 32]);
        let other = AgentKey::from_seed(&[8; 32]).agent_id();
        let envelope = Json::Object(vec![
            ("extra".into(), Json::Null),
            ("agent_id".into(), Json::from(other.as_str())),
            ("seq".into(), Json::from("1")),
        ]);
        assert_eq!(
            authenticate(&envelope, &k.agent_id(), Signature::Verify, Signer::Genesis).unwrap_err(),
            EnvelopeError::Shape(vec![
                ShapeProblem::UnknownField("extra".into()),
                ShapeProblem::BadSeq,
                ShapeProblem::NoCapsule,
                ShapeProblem::AgentId,
            ])
        );
    }

    #[test]
    fn another_key_is_refused_only_where_the_genesis_key_must_sign() {
        let owner = AgentKey::from_seed(&[7; 32]);
        let rotated = AgentKey::from_seed(&[9; 32]);
        let capsule = testing::example_for(owner.agent_id());
        let envelope = rotated.sign_envelope_as(&owner.agent_id(), 2, &capsule);
        let at = |signer| {
            authenticate(&envelope, &owner.agent_id(), Signature::Verify, signer).map(|s| s.seq)
        };
        assert_eq!(at(Signer::Genesis), Err(EnvelopeError::NotTheAgentsKey));
        assert_eq!(at(Signer::KeyLog), Ok(2));
        let mut tampered = envelope.clone();
        if let Json::Object(m) = &mut tampered {
            m.retain(|(k, _)| k != "seq");
            m.push(("seq".into(), Json::from(3)));
        }
        assert!(matches!(
            authenticate(
                &tampered,
                &owner.agent_id(),
                Signature::Verify,
                Signer::KeyLog
            ),
            Err(EnvelopeError::BadSignature(_))
        ));
        // The object's own pass over bytes the Worker verified skips only the
        // verification.
        assert_eq!(
            authenticate(
                &tampered,
                &owner.agent_id(),
                Signature::Prechecked,
                Signer::KeyLog
            )
            .map(|s| s.seq),
            Ok(3)
        );
    }
}
