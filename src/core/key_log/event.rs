//! One key event as the agent signs it: its wire form (read strictly from
//! untrusted JSON, written in one canonical shape), the digest its
//! signatures cover, and the signatures' check.
//!
//! Every kind of event is a variant of [`Change`], so an inception can
//! never carry a `revealed_key` nor a recommit a `supersedes`: the JSON
//! reader refuses the members a kind does not have, and the writer has no
//! way to produce them.

use super::{Digest, KEYS_VERSION, MAX_WINDOW_SEC, MIN_WINDOW_SEC};
use crate::core::crypto::{is_lower_hex, AgentId, AgentKey, PublicKey};
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::reason::{ReasonCode, Refusal};
use sha2::{Digest as _, Sha256};

/// The owner's last good write, named by a disputing rotation: the
/// outgoing key's versions with a higher `seq` become disputed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LastGood {
    /// The write's `seq`.
    pub seq: u64,
    /// Its cursor (`sha256:` + 64 hex).
    pub cursor: String,
}

/// The event a recovery rotation voids, by index and sealed hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supersedes {
    /// The superseded event's index in the log.
    pub index: u64,
    /// Its sealed `hash`.
    pub hash: String,
}

/// Which committed key authorises a rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationAuthority {
    /// The key whose digest the last establishment event committed as next.
    Next,
    /// The operator's recovery key, committed by digest.
    Recovery,
}

/// What an event changes.
// A rotation carries a parsed key (about 200 bytes); events are handled one
// at a time and a log holds at most 256, so boxing it buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Event 0: the genesis key (whose SHA-256 is the agent id) commits its
    /// first next key, and optionally a recovery key and its window.
    Inception {
        /// Seconds within which a recovery may supersede a next-key rotation
        /// (fixed here for the agent's life).
        recovery_window_sec: u64,
    },
    /// A committed key takes over: `revealed_key` is the committed one; the
    /// event's `public_key` becomes current (it may be the same key).
    Rotation {
        /// Which commitment `revealed_key` answers.
        authority: RotationAuthority,
        /// The committed key, revealed.
        revealed_key: PublicKey,
        /// Recovery only: the next-key rotation this one voids.
        supersedes: Option<Supersedes>,
        /// The owner's last good write (the current key was stolen).
        disputes_after: Option<LastGood>,
    },
    /// The current key replaces the commitments (its owner lost the next
    /// key); matures after the window unless a rotation lands first.
    Recommit,
}

/// A key event, as signed by the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEvent {
    /// The agent (SHA-256 of its genesis key).
    pub agent_id: AgentId,
    /// Position in the log, from 0.
    pub index: u64,
    /// The sealed `hash` of the event at `index - 1`; `None` at index 0.
    pub previous_hash: Option<String>,
    /// The current key after this event.
    pub public_key: PublicKey,
    /// SHA-256 of the next key's 32 raw bytes (never absent: pre-rotation
    /// cannot be switched off).
    pub next_key_digest: Digest,
    /// SHA-256 of the recovery key's 32 raw bytes, if one is committed.
    pub recovery_key_digest: Option<Digest>,
    /// What the event changes.
    pub change: Change,
    /// The signatures, as sent.
    pub signatures: Signatures,
}

/// The signatures over [`KeyEvent::digest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signatures {
    /// By the revealed key, when it differs from `public_key`.
    pub revealed: Option<[u8; 64]>,
    /// By `public_key`: its holder's proof of possession (the only
    /// signature of an inception or a recommit).
    pub public: [u8; 64],
}

/// The members each kind of event has, in the order this module writes them.
const INCEPTION_FIELDS: &[&str] = &[
    "v",
    "type",
    "agent_id",
    "index",
    "previous_hash",
    "authority",
    "public_key",
    "next_key_digest",
    "recovery_key_digest",
    "recovery_window_sec",
    "signatures",
];
const ROTATION_FIELDS: &[&str] = &[
    "v",
    "type",
    "agent_id",
    "index",
    "previous_hash",
    "authority",
    "public_key",
    "revealed_key",
    "next_key_digest",
    "recovery_key_digest",
    "supersedes",
    "disputes_after",
    "signatures",
];
const RECOMMIT_FIELDS: &[&str] = &[
    "v",
    "type",
    "agent_id",
    "index",
    "previous_hash",
    "authority",
    "public_key",
    "next_key_digest",
    "recovery_key_digest",
    "signatures",
];

impl KeyEvent {
    /// The event's `type` on the wire.
    pub fn kind(&self) -> &'static str {
        match self.change {
            Change::Inception { .. } => "inception",
            Change::Rotation { .. } => "rotation",
            Change::Recommit => "recommit",
        }
    }

    /// The event's `authority` on the wire.
    pub fn authority(&self) -> &'static str {
        match &self.change {
            Change::Inception { .. } => "genesis",
            Change::Rotation {
                authority: RotationAuthority::Next,
                ..
            } => "next",
            Change::Rotation {
                authority: RotationAuthority::Recovery,
                ..
            } => "recovery",
            Change::Recommit => "current",
        }
    }

    /// What can be decided of the event's signers with no state: an
    /// inception (index 0) is the genesis key's, and the signatures verify.
    /// Whoever decides first (the Worker's pre-check, the service's
    /// acceptance) refuses alike.
    pub fn check_signers(&self) -> Result<(), Refusal> {
        self.check_inception_signer()?;
        self.check_signatures()
    }

    /// An inception (index 0) is signed by the genesis key.
    pub fn check_inception_signer(&self) -> Result<(), Refusal> {
        if self.index == 0 && self.public_key.agent_id() != self.agent_id {
            return Err(Refusal::new(
                ReasonCode::AgentId,
                "an inception is signed by the genesis key, whose SHA-256 is the agent id",
            ));
        }
        Ok(())
    }

    /// `signatures.public` by `public_key`, and `signatures.revealed` by
    /// `revealed_key` exactly when it differs.
    pub fn check_signatures(&self) -> Result<(), Refusal> {
        if !self.signatures_verify() {
            return Err(Refusal::new(
                ReasonCode::BadSignature,
                "the event's signatures do not verify over sha256(JCS(event without signatures)) (signatures.public by public_key, signatures.revealed by revealed_key when it differs)",
            ));
        }
        Ok(())
    }

    /// The revealed key of a rotation.
    pub fn revealed_key(&self) -> Option<&PublicKey> {
        match &self.change {
            Change::Rotation { revealed_key, .. } => Some(revealed_key),
            _ => None,
        }
    }

    /// The event without its signatures: what they cover.
    pub fn unsigned(&self) -> Json {
        let opt_digest = |d: &Option<Digest>| d.as_ref().map_or(Json::Null, |d| d.to_hex().into());
        let mut m: Vec<(String, Json)> = vec![
            ("v".into(), KEYS_VERSION.into()),
            ("type".into(), self.kind().into()),
            ("agent_id".into(), self.agent_id.as_str().into()),
            ("index".into(), self.index.into()),
            (
                "previous_hash".into(),
                self.previous_hash.as_deref().map_or(Json::Null, Json::from),
            ),
            ("authority".into(), self.authority().into()),
            ("public_key".into(), self.public_key.to_hex().into()),
        ];
        if let Change::Rotation { revealed_key, .. } = &self.change {
            m.push(("revealed_key".into(), revealed_key.to_hex().into()));
        }
        m.push((
            "next_key_digest".into(),
            self.next_key_digest.to_hex().into(),
        ));
        m.push((
            "recovery_key_digest".into(),
            opt_digest(&self.recovery_key_digest),
        ));
        match &self.change {
            Change::Inception {
                recovery_window_sec,
            } => m.push(("recovery_window_sec".into(), (*recovery_window_sec).into())),
            Change::Rotation {
                supersedes,
                disputes_after,
                ..
            } => {
                m.push((
                    "supersedes".into(),
                    supersedes.as_ref().map_or(Json::Null, |s| {
                        Json::Object(vec![
                            ("index".into(), s.index.into()),
                            ("hash".into(), s.hash.as_str().into()),
                        ])
                    }),
                ));
                m.push((
                    "disputes_after".into(),
                    disputes_after.as_ref().map_or(Json::Null, |d| {
                        Json::Object(vec![
                            ("seq".into(), d.seq.into()),
                            ("cursor".into(), d.cursor.as_str().into()),
                        ])
                    }),
                ));
            }
            Change::Recommit => {}
        }
        Json::Object(m)
    }

    /// The whole event, signatures included: the wire form.
    pub fn to_json(&self) -> Json {
        let Json::Object(mut m) = self.unsigned() else {
            unreachable!("unsigned() builds an object")
        };
        let mut sigs = Vec::new();
        if let Some(r) = &self.signatures.revealed {
            sigs.push(("revealed".into(), hex::encode(r).into()));
        }
        sigs.push(("public".into(), hex::encode(self.signatures.public).into()));
        m.push(("signatures".into(), Json::Object(sigs)));
        Json::Object(m)
    }

    /// The 32 bytes every signature of the event covers:
    /// `SHA-256(JCS(event without "signatures"))`, the construction writes
    /// use; `v` and `type` keep the two kinds of message apart.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(jcs::canonicalize(&self.unsigned()).as_bytes()).into()
    }

    /// Whether the signatures verify: `public` under `public_key`, and
    /// `revealed` under the revealed key exactly when that key differs.
    pub fn signatures_verify(&self) -> bool {
        let digest = self.digest();
        if !self.public_key.verify(&digest, &self.signatures.public) {
            return false;
        }
        match (self.revealed_key(), &self.signatures.revealed) {
            (Some(k), Some(sig)) if *k != self.public_key => k.verify(&digest, sig),
            (Some(k), None) => *k == self.public_key,
            (None, None) => true,
            _ => false,
        }
    }

    /// Signs the event: `public` with `current` (whose public key must be
    /// the event's `public_key`), `revealed` with `revealed` when given and
    /// different. For clients and tests; the service never signs events.
    pub fn sign(mut self, current: &AgentKey, revealed: Option<&AgentKey>) -> KeyEvent {
        debug_assert_eq!(current.public_key(), self.public_key);
        let digest = self.digest();
        self.signatures = Signatures {
            revealed: revealed
                .filter(|k| k.public_key() != self.public_key)
                .map(|k| k.sign(&digest)),
            public: current.sign(&digest),
        };
        self
    }

    /// Reads an event from untrusted JSON: exactly the members its kind
    /// has, each in its one spelling. The error names the member.
    pub fn from_json(v: &Json) -> Result<KeyEvent, String> {
        let members = v.as_object().ok_or("a key event must be a JSON object")?;
        let str_of = |k: &str| -> Result<&str, String> {
            v.get(k)
                .and_then(Json::as_str)
                .ok_or_else(|| format!("{k} must be a string"))
        };
        if str_of("v")? != KEYS_VERSION {
            return Err(format!("v must be {KEYS_VERSION:?}"));
        }
        let kind = str_of("type")?;
        let expected = match kind {
            "inception" => INCEPTION_FIELDS,
            "rotation" => ROTATION_FIELDS,
            "recommit" => RECOMMIT_FIELDS,
            _ => return Err("type must be inception, rotation or recommit".into()),
        };
        for (k, _) in members {
            if !expected.contains(&k.as_str()) {
                return Err(format!("{k} is not a member of a {kind} event"));
            }
        }
        for k in expected {
            if v.get(k).is_none() {
                return Err(format!("{k} is missing"));
            }
        }
        let agent_id = AgentId::parse(str_of("agent_id")?)
            .ok_or("agent_id must be 64 lowercase hex characters")?;
        let index = v
            .get("index")
            .and_then(Json::as_safe_u64)
            .ok_or("index must be an integer 0..2^53-1")?;
        let previous_hash = match v.get("previous_hash") {
            Some(Json::Null) => None,
            Some(Json::String(s)) if is_lower_hex(s, 64) => Some(s.clone()),
            _ => return Err("previous_hash must be null or 64 lowercase hex characters".into()),
        };
        let key = |k: &str| -> Result<PublicKey, String> {
            PublicKey::from_hex(str_of(k)?).map_err(|e| format!("{k}: {e}"))
        };
        let public_key = key("public_key")?;
        let next_key_digest = Digest::from_hex(str_of("next_key_digest")?)
            .ok_or("next_key_digest must be 64 lowercase hex characters")?;
        let recovery_key_digest = match v.get("recovery_key_digest") {
            Some(Json::Null) => None,
            Some(Json::String(s)) => Some(
                Digest::from_hex(s)
                    .ok_or("recovery_key_digest must be null or 64 lowercase hex characters")?,
            ),
            _ => return Err("recovery_key_digest must be null or a string".into()),
        };
        let authority = str_of("authority")?;
        let change = match (kind, authority) {
            ("inception", "genesis") => {
                let w = v
                    .get("recovery_window_sec")
                    .and_then(Json::as_safe_u64)
                    .filter(|w| (MIN_WINDOW_SEC..=MAX_WINDOW_SEC).contains(w))
                    .ok_or_else(|| {
                        format!(
                            "recovery_window_sec must be an integer {MIN_WINDOW_SEC}..{MAX_WINDOW_SEC}"
                        )
                    })?;
                Change::Inception {
                    recovery_window_sec: w,
                }
            }
            ("rotation", "next" | "recovery") => Change::Rotation {
                authority: if authority == "next" {
                    RotationAuthority::Next
                } else {
                    RotationAuthority::Recovery
                },
                revealed_key: key("revealed_key")?,
                supersedes: match v.get("supersedes") {
                    Some(Json::Null) => None,
                    Some(s) => Some(supersedes(s)?),
                    None => unreachable!("checked above"),
                },
                disputes_after: match v.get("disputes_after") {
                    Some(Json::Null) => None,
                    Some(d) => Some(last_good(d)?),
                    None => unreachable!("checked above"),
                },
            },
            ("recommit", "current") => Change::Recommit,
            _ => {
                return Err(format!(
                    "authority {authority:?} does not go with a {kind} event (inception: genesis; rotation: next or recovery; recommit: current)"
                ))
            }
        };
        if matches!(change, Change::Inception { .. }) != (index == 0) {
            return Err("an inception is event 0, and event 0 is an inception".into());
        }
        if previous_hash.is_none() != (index == 0) {
            return Err("previous_hash is null exactly at index 0".into());
        }
        if let Change::Rotation {
            authority: RotationAuthority::Next,
            supersedes: Some(_),
            ..
        } = change
        {
            return Err("only a recovery rotation supersedes".into());
        }
        let signatures = signatures(v.get("signatures").expect("checked above"))?;
        Ok(KeyEvent {
            agent_id,
            index,
            previous_hash,
            public_key,
            next_key_digest,
            recovery_key_digest,
            change,
            signatures,
        })
    }
}

fn exact_members(v: &Json, what: &str, names: &[&str]) -> Result<(), String> {
    let m = v
        .as_object()
        .ok_or_else(|| format!("{what} must be an object"))?;
    if m.len() != names.len() || names.iter().any(|n| v.get(n).is_none()) {
        return Err(format!("{what} must have exactly {}", names.join(", ")));
    }
    Ok(())
}

/// Member `k` of object `what`, read by `read`; the error says what it must be.
fn member<T>(
    v: &Json,
    what: &str,
    k: &str,
    read: impl Fn(&Json) -> Option<T>,
    must: &str,
) -> Result<T, String> {
    v.get(k)
        .and_then(read)
        .ok_or_else(|| format!("{what}.{k} must be {must}"))
}

fn supersedes(v: &Json) -> Result<Supersedes, String> {
    exact_members(v, "supersedes", &["index", "hash"])?;
    let hex64 = |h: &Json| {
        h.as_str()
            .filter(|h| is_lower_hex(h, 64))
            .map(str::to_owned)
    };
    Ok(Supersedes {
        index: member(v, "supersedes", "index", Json::as_safe_u64, "an integer")?,
        hash: member(
            v,
            "supersedes",
            "hash",
            hex64,
            "64 lowercase hex characters",
        )?,
    })
}

fn last_good(v: &Json) -> Result<LastGood, String> {
    exact_members(v, "disputes_after", &["seq", "cursor"])?;
    let cursor = |c: &Json| c.as_str().filter(|c| jcs::is_cursor(c)).map(str::to_owned);
    Ok(LastGood {
        seq: member(
            v,
            "disputes_after",
            "seq",
            Json::as_safe_u64,
            "an integer 0..2^53-1",
        )?,
        cursor: member(
            v,
            "disputes_after",
            "cursor",
            cursor,
            "a cursor (sha256: and 64 lowercase hex)",
        )?,
    })
}

fn signatures(v: &Json) -> Result<Signatures, String> {
    let m = v.as_object().ok_or("signatures must be an object")?;
    let sig = |k: &str| -> Result<Option<[u8; 64]>, String> {
        match v.get(k) {
            None => Ok(None),
            Some(Json::String(s)) if is_lower_hex(s, 128) => {
                let mut out = [0u8; 64];
                hex::decode_to_slice(s, &mut out).map_err(|_| "unreachable".to_owned())?;
                Ok(Some(out))
            }
            Some(_) => Err(format!(
                "signatures.{k} must be 128 lowercase hex characters"
            )),
        }
    };
    if m.iter().any(|(k, _)| k != "public" && k != "revealed") {
        return Err(
            "signatures has only public and, for a revealed key other than public_key, revealed"
                .into(),
        );
    }
    Ok(Signatures {
        public: sig("public")?.ok_or("signatures.public is missing")?,
        revealed: sig("revealed")?,
    })
}
