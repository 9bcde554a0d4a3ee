//! Tamper-evident history: every accepted write becomes one entry in a
//! per-agent hash chain, sealed by the service.
//!
//! - An **entry** is `{sequence, previous_hash, agent_id, seq, cursor,
//!   prev_cursor, capsule, public_key, signature, accepted_at}` plus the seal
//!   `{hash, service_signature, signed_by}`.
//! - `hash` = lowercase hex of SHA3-256 over the RFC 8785 bytes of the entry
//!   *without* its three seal fields; `service_signature` = Ed25519 by the
//!   service key over the ASCII bytes of that hex string; `signed_by` = the
//!   first 16 hex characters of the service public key (its fingerprint).
//! - The **chain head** (length, head hash, first retained sequence and its
//!   `previous_hash`) is sealed the same way, so a truncated tail or a
//!   dropped window start is detectable offline.
//!
//! Both are a [`Sealed`] body: the hashed fields ([`EntryFields`],
//! [`HeadFields`]) followed by one [`Seal`], written flat on the wire.
//!
//! Submodules: [`verify`] (the checks and the report), [`index`] (appending,
//! pruning, `since` selection: what the Durable Object runs) and [`export`]
//! (the offline bundle and `verify_export`), [`timeline`] (an export laid out
//! for reading: each entry with the checks that failed at it). Without the
//! `core-full` feature (the entry Worker) only what reads need is compiled:
//! the index, its selection and the stored report, not the checks that make
//! one (appending, verifying a chain or an export, the timeline).

#![warn(missing_docs)]

#[cfg(feature = "core-full")]
pub mod export;
pub mod index;
pub mod privacy;
#[cfg(feature = "core-full")]
pub mod timeline;
pub mod verify;

use crate::core::crypto::{is_lower_hex, AgentKey, PublicKey};
use crate::core::jcs;
use crate::core::json::Json;
use serde::{Deserialize, Serialize};
use sha3::{Digest, Sha3_256};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};

#[cfg(feature = "core-full")]
pub use export::{verify_export, verify_export_with, ExportBundle, VerifyOptions};
#[cfg(feature = "core-full")]
pub use index::{append, NewVersion};
pub use index::{HistoryIndex, IndexItem, Query, QueryError, Selection};
pub use privacy::{Access, Viewer, Withheld};
#[cfg(feature = "core-full")]
pub use timeline::{timeline, Flag, Timeline, TimelineEntry};
#[cfg(feature = "core-full")]
pub use verify::{verify_chain, WriteChecked};
pub use verify::{AgentKeys, Check, CheckName, Checks, Failure, Level, Report};

/// The hash of entries and heads.
pub const HASH_ALG: &str = "sha3-256";
/// The seal signature algorithm.
pub const SEAL_ALG: &str = "ed25519";
/// The fields that make up a seal; everything else is hashed.
pub const SEAL_FIELDS: [&str; 3] = ["hash", "service_signature", "signed_by"];
/// The hashed fields of an entry, in the order the service writes them.
pub const ENTRY_FIELDS: [&str; 10] = [
    "sequence",
    "previous_hash",
    "agent_id",
    "seq",
    "cursor",
    "prev_cursor",
    "capsule",
    "public_key",
    "signature",
    "accepted_at",
];
/// The hashed fields of a chain head.
pub const HEAD_FIELDS: [&str; 7] = [
    "agent_id",
    "length",
    "head_hash",
    "seq",
    "cursor",
    "first_sequence",
    "first_previous_hash",
];

/// Length of the seal suffix [`Entry::stored_text`] appends.
pub const STORED_SUFFIX_LEN: usize = 9 + 64 + 23 + 128 + 15 + 16 + 2;

/// Splits an [`Entry::stored_text`] into the canonical text it was made from
/// and its seal. `None` if the text does not end in a well-formed suffix.
pub fn canonical_of_stored(stored: &str) -> Option<(String, Seal)> {
    let cut = stored.len().checked_sub(STORED_SUFFIX_LEN)?;
    let suffix = stored.get(cut..)?;
    let hash = suffix.strip_prefix(",\"hash\":\"")?.get(..64)?;
    let rest = &suffix[9 + 64..];
    let sig = rest
        .strip_prefix("\",\"service_signature\":\"")?
        .get(..128)?;
    let rest = &rest[23 + 128..];
    let by = rest.strip_prefix("\",\"signed_by\":\"")?.get(..16)?;
    if &rest[15 + 16..] != "\"}"
        || !is_lower_hex(hash, 64)
        || !is_lower_hex(sig, 128)
        || !is_lower_hex(by, 16)
    {
        return None;
    }
    let canonical = format!("{}}}", &stored[..cut]);
    Some((
        canonical,
        Seal {
            hash: hash.to_owned(),
            service_signature: sig.to_owned(),
            signed_by: by.to_owned(),
        },
    ))
}

/// The service's signing key: the same Ed25519 implementation agents use.
pub type ServiceKey = AgentKey;

/// Lowercase hex of SHA3-256.
pub fn sha3_hex(bytes: &[u8]) -> String {
    hex::encode(Sha3_256::digest(bytes))
}

/// A key's fingerprint: the first 16 hex characters of its public key.
pub fn fingerprint(key: &PublicKey) -> String {
    key.to_hex()[..16].to_owned()
}

/// Why untrusted history JSON (an entry, a head, a bundle item) cannot be
/// read. The text names the field and what it must be; verify reports carry
/// it verbatim as a failure's `detail`, so it is part of the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(String);

impl Malformed {
    /// A reading error with this text (for other sealed bodies, such as the
    /// key log's records).
    #[cfg(feature = "core-full")]
    pub(crate) fn new(text: impl Into<String>) -> Malformed {
        Malformed(text.into())
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Malformed {}

/// Why a seal does not verify. The `Display` text is a verify report's
/// `seal` failure detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// `signed_by` names no key in the keyring (an unknown or forged signer).
    UnknownKey(String),
    /// `hash` is not 64 lowercase hex characters.
    MalformedHash,
    /// `service_signature` is not 128 lowercase hex characters.
    MalformedSignature,
    /// Well-formed, but the signature does not verify under the named key.
    BadSignature(String),
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::UnknownKey(fp) => write!(f, "signed_by {fp:?} is not in the keyring"),
            SealError::MalformedHash => f.write_str("hash is not 64 lowercase hex characters"),
            SealError::MalformedSignature => {
                f.write_str("service_signature is not 128 lowercase hex characters")
            }
            SealError::BadSignature(fp) => {
                write!(f, "service_signature does not verify under key {fp}")
            }
        }
    }
}

impl std::error::Error for SealError {}

/// The seal over some canonical bytes: the three fields every sealed object
/// ends with on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// Lowercase hex of SHA3-256 over the body's canonical bytes.
    pub hash: String,
    /// Lowercase hex of the service's Ed25519 signature over the ASCII of `hash`.
    pub service_signature: String,
    /// Fingerprint of the service key that signed ([`fingerprint`]).
    pub signed_by: String,
}

impl Seal {
    /// Hashes `canonical` and signs the hash's hex text.
    pub fn make(key: &ServiceKey, canonical: &[u8]) -> Seal {
        let hash = sha3_hex(canonical);
        let signature = key.sign(hash.as_bytes());
        Seal {
            service_signature: hex::encode(signature),
            signed_by: fingerprint(&key.public_key()),
            hash,
        }
    }

    /// Whether `service_signature` verifies over the *claimed* `hash` under
    /// the key `signed_by` names. (Whether the hash matches the bytes is a
    /// separate, chain-level question.)
    pub fn verify(&self, keyring: &Keyring) -> Result<(), SealError> {
        let key = keyring
            .get(&self.signed_by)
            .ok_or_else(|| SealError::UnknownKey(self.signed_by.clone()))?;
        if !is_lower_hex(&self.hash, 64) {
            return Err(SealError::MalformedHash);
        }
        let mut sig = [0u8; 64];
        if !is_lower_hex(&self.service_signature, 128)
            || hex::decode_to_slice(&self.service_signature, &mut sig).is_err()
        {
            return Err(SealError::MalformedSignature);
        }
        if key.verify(self.hash.as_bytes(), &sig) {
            Ok(())
        } else {
            Err(SealError::BadSignature(self.signed_by.clone()))
        }
    }
}

/// A body the service seals: it has one hashed JSON form, and it can be read
/// back from untrusted JSON.
pub trait Hashed: Sized {
    /// What error messages call it (`"entry"`, `"head"`).
    const NAME: &'static str;

    /// The hashed JSON object: every field but the seal, in wire order.
    fn unsealed(&self) -> Json;

    /// RFC 8785 text of [`Hashed::unsealed`]: the bytes a seal's `hash` covers.
    fn canonical(&self) -> String {
        jcs::canonicalize(&self.unsealed())
    }

    /// Reads exactly the hashed fields, with their types and formats, from
    /// untrusted JSON.
    fn from_unsealed(v: &Json) -> Result<Self, Malformed>;
}

/// A body with the seal over its canonical bytes, written flat: the body's
/// fields, then `hash`, `service_signature`, `signed_by`.
///
/// Carrying a seal is not the seal verifying: values read from untrusted
/// JSON keep whatever seal they claim, and editing the body (through
/// `DerefMut`, as the tamper tests do) leaves the seal as it was. Checking
/// is [`verify`]'s job; the service builds sealed values with
/// [`Sealed::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed<T> {
    /// The hashed fields.
    #[serde(flatten)]
    pub body: T,
    /// The seal over the body's canonical bytes.
    #[serde(flatten)]
    pub seal: Seal,
}

impl<T> Deref for Sealed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.body
    }
}

impl<T> DerefMut for Sealed<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.body
    }
}

impl<T: Hashed> Sealed<T> {
    /// Seals `body` with `key`.
    pub fn new(body: T, key: &ServiceKey) -> Sealed<T> {
        let seal = Seal::make(key, body.canonical().as_bytes());
        Sealed { body, seal }
    }

    /// RFC 8785 text of the body: the bytes `seal.hash` claims to cover.
    /// (Inherent, so callers need not import [`Hashed`].)
    pub fn canonical(&self) -> String {
        self.body.canonical()
    }

    /// Reads the hashed fields from untrusted JSON and attaches `seal` as
    /// claimed (not checked).
    pub fn from_unsealed(v: &Json, seal: Seal) -> Result<Sealed<T>, Malformed> {
        Ok(Sealed {
            body: T::from_unsealed(v)?,
            seal,
        })
    }

    /// Reads a whole sealed object (the hashed fields plus the three seal
    /// fields) from untrusted JSON, e.g. one of history.json's `versions`.
    pub fn from_json(v: &Json) -> Result<Sealed<T>, Malformed> {
        let (unsealed, seal) = split_seal(v, T::NAME)?;
        Sealed::from_unsealed(&unsealed, seal)
    }
}

/// The hashed fields of one accepted write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryFields {
    /// 0-based position in the agent's chain.
    pub sequence: u64,
    /// `hash` of the entry at `sequence - 1`; null only at genesis.
    pub previous_hash: Option<String>,
    /// The agent, 64 lowercase hex (sha256 of its public key).
    pub agent_id: String,
    /// The agent's write counter for this capsule.
    pub seq: u64,
    /// `sha256:` + hex of the canonical capsule.
    pub cursor: String,
    /// The previous write's `cursor` (null for the agent's first write).
    pub prev_cursor: Option<String>,
    /// The capsule as accepted.
    pub capsule: Json,
    /// The agent's public key, lowercase hex.
    pub public_key: String,
    /// The agent's signature, exactly as sent.
    pub signature: String,
    /// RFC 3339, when the service accepted the write.
    pub accepted_at: String,
}

impl Hashed for EntryFields {
    const NAME: &'static str = "entry";

    fn unsealed(&self) -> Json {
        let opt = |s: &Option<String>| s.as_deref().map_or(Json::Null, Json::from);
        Json::Object(vec![
            ("sequence".into(), Json::from(self.sequence)),
            ("previous_hash".into(), opt(&self.previous_hash)),
            ("agent_id".into(), Json::from(self.agent_id.as_str())),
            ("seq".into(), Json::from(self.seq)),
            ("cursor".into(), Json::from(self.cursor.as_str())),
            ("prev_cursor".into(), opt(&self.prev_cursor)),
            ("capsule".into(), self.capsule.clone()),
            ("public_key".into(), Json::from(self.public_key.as_str())),
            ("signature".into(), Json::from(self.signature.as_str())),
            ("accepted_at".into(), Json::from(self.accepted_at.as_str())),
        ])
    }

    fn from_unsealed(v: &Json) -> Result<EntryFields, Malformed> {
        let f = Fields::new(v, &ENTRY_FIELDS, Self::NAME)?;
        let capsule = f.get("capsule");
        if capsule.as_object().is_none() {
            return Err(Malformed("entry.capsule must be an object".into()));
        }
        Ok(EntryFields {
            sequence: f.uint("sequence")?,
            previous_hash: f.opt_hex("previous_hash", 64)?,
            agent_id: f.hex("agent_id", 64)?,
            seq: f.uint("seq")?,
            cursor: f.cursor("cursor")?,
            prev_cursor: f.opt_cursor("prev_cursor")?,
            capsule: capsule.clone(),
            public_key: f.hex("public_key", 64)?,
            signature: f.hex("signature", 128)?,
            accepted_at: f.timestamp("accepted_at")?,
        })
    }
}

/// One accepted write, as stored, served and exported.
pub type Entry = Sealed<EntryFields>;

impl Sealed<EntryFields> {
    /// The form the service stores and serves: the canonical text with the
    /// three seal fields appended before its closing brace. A JSON object
    /// like any other, and the exact hashed bytes are recovered by cutting
    /// the fixed-length seal suffix off again ([`canonical_of_stored`]), with
    /// no parsing or re-canonicalising.
    pub fn stored_text(&self) -> String {
        let canonical = self.canonical();
        let mut out = String::with_capacity(canonical.len() + STORED_SUFFIX_LEN);
        out.push_str(&canonical[..canonical.len() - 1]);
        out.push_str(",\"hash\":\"");
        out.push_str(&self.seal.hash);
        out.push_str("\",\"service_signature\":\"");
        out.push_str(&self.seal.service_signature);
        out.push_str("\",\"signed_by\":\"");
        out.push_str(&self.seal.signed_by);
        out.push_str("\"}");
        out
    }
}

/// The hashed fields of a chain head: how long the chain is, what its newest
/// entry is, and where the retained window starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadFields {
    /// The chain's agent.
    pub agent_id: String,
    /// Entries ever appended (the next entry's `sequence`).
    pub length: u64,
    /// `hash` of the newest entry.
    pub head_hash: String,
    /// `seq` of the newest entry.
    pub seq: u64,
    /// `cursor` of the newest entry.
    pub cursor: String,
    /// `sequence` of the oldest retained entry (= entries pruned so far).
    pub first_sequence: u64,
    /// That entry's `previous_hash` (null when the genesis is retained).
    pub first_previous_hash: Option<String>,
}

impl Hashed for HeadFields {
    const NAME: &'static str = "head";

    fn unsealed(&self) -> Json {
        Json::Object(vec![
            ("agent_id".into(), Json::from(self.agent_id.as_str())),
            ("length".into(), Json::from(self.length)),
            ("head_hash".into(), Json::from(self.head_hash.as_str())),
            ("seq".into(), Json::from(self.seq)),
            ("cursor".into(), Json::from(self.cursor.as_str())),
            ("first_sequence".into(), Json::from(self.first_sequence)),
            (
                "first_previous_hash".into(),
                self.first_previous_hash
                    .as_deref()
                    .map_or(Json::Null, Json::from),
            ),
        ])
    }

    fn from_unsealed(v: &Json) -> Result<HeadFields, Malformed> {
        let f = Fields::new(v, &HEAD_FIELDS, Self::NAME)?;
        Ok(HeadFields {
            agent_id: f.hex("agent_id", 64)?,
            length: f.uint("length")?,
            head_hash: f.hex("head_hash", 64)?,
            seq: f.uint("seq")?,
            cursor: f.cursor("cursor")?,
            first_sequence: f.uint("first_sequence")?,
            first_previous_hash: f.opt_hex("first_previous_hash", 64)?,
        })
    }
}

/// The sealed summary of an agent's chain (history.json's `chain_head`,
/// also kept in the agent's state).
pub type ChainHead = Sealed<HeadFields>;

/// The service's public keys by fingerprint, and which one signs today.
/// Rotation moves the old key to the retired list; it stays here so seals
/// made with it still verify.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keyring {
    /// Fingerprint of the key that seals new entries (absent: none configured).
    pub current: Option<String>,
    /// Fingerprint -> public key (64 lowercase hex).
    pub keys: BTreeMap<String, String>,
}

impl Keyring {
    /// The current key plus retired ones (duplicates collapse).
    pub fn new(current: Option<&PublicKey>, retired: &[PublicKey]) -> Keyring {
        let mut keys = BTreeMap::new();
        for k in retired.iter().chain(current) {
            keys.insert(fingerprint(k), k.to_hex());
        }
        Keyring {
            current: current.map(fingerprint),
            keys,
        }
    }

    /// The key with fingerprint `fp`, if listed and well-formed (a listed
    /// key must also really have that fingerprint).
    pub fn get(&self, fp: &str) -> Option<PublicKey> {
        let hex = self.keys.get(fp)?;
        let key = PublicKey::from_hex(hex).ok()?;
        (fingerprint(&key) == fp).then_some(key)
    }

    /// Reads `{fingerprint: public_key}` from untrusted JSON; malformed
    /// members are reported and left out.
    pub fn from_json(keys: &Json, current: Option<&str>) -> (Keyring, Vec<String>) {
        let mut ring = Keyring {
            current: current.map(str::to_owned),
            keys: BTreeMap::new(),
        };
        let mut problems = Vec::new();
        let Some(members) = keys.as_object() else {
            problems.push("keys must be an object {fingerprint: public_key}".to_owned());
            return (ring, problems);
        };
        for (fp, v) in members {
            match v.as_str().map(PublicKey::from_hex) {
                Some(Ok(k)) if fingerprint(&k) == *fp => {
                    ring.keys.insert(fp.clone(), k.to_hex());
                }
                _ => problems.push(format!(
                    "keys[{fp:?}] is not a valid public key with that fingerprint"
                )),
            }
        }
        (ring, problems)
    }

    /// The keyring a `GET /api/v1/self/keys` body (`{"current", "keys"}`,
    /// [`KeysDoc`]) publishes, or every problem with it.
    pub fn from_keys_doc(doc: &Json) -> Result<Keyring, Vec<String>> {
        let (ring, problems) = Keyring::from_json(
            doc.get("keys").unwrap_or(&Json::Null),
            doc.get("current").and_then(Json::as_str),
        );
        if problems.is_empty() {
            Ok(ring)
        } else {
            Err(problems)
        }
    }
}

/// The body of `GET /api/v1/self/keys`.
#[derive(Debug, Clone, Serialize)]
pub struct KeysDoc {
    /// Fingerprint of the key that seals new entries.
    pub current: String,
    /// Fingerprint -> public key (64 lowercase hex), retired keys included.
    pub keys: BTreeMap<String, String>,
    /// Fingerprints of keys that no longer seal new entries.
    pub retired: Vec<String>,
    /// [`SEAL_ALG`].
    pub signature_alg: &'static str,
    /// [`HASH_ALG`].
    pub hash_alg: &'static str,
    /// How a seal is made, in one line, for readers without this code.
    pub seal: &'static str,
}

impl KeysDoc {
    /// `None` without a current key (the service must not pretend to have one).
    pub fn new(ring: &Keyring) -> Option<KeysDoc> {
        let current = ring.current.clone()?;
        Some(KeysDoc {
            retired: ring.keys.keys().filter(|k| **k != current).cloned().collect(),
            keys: ring.keys.clone(),
            current,
            signature_alg: SEAL_ALG,
            hash_alg: HASH_ALG,
            seal: "hash = hex(sha3-256(JCS(entry without hash, service_signature, signed_by))); service_signature = hex(ed25519(service key, ascii(hash))); signed_by = first 16 hex of the service public key",
        })
    }
}

/// Splits a sealed object into its hashed part and its seal.
fn split_seal(v: &Json, what: &str) -> Result<(Json, Seal), Malformed> {
    let members = v
        .as_object()
        .ok_or_else(|| Malformed(format!("{what} must be an object")))?;
    let get = |k: &str| -> Result<String, Malformed> {
        match v.get(k) {
            Some(Json::String(s)) => Ok(s.clone()),
            _ => Err(Malformed(format!("{what}.{k} must be a string"))),
        }
    };
    let seal = Seal {
        hash: get("hash")?,
        service_signature: get("service_signature")?,
        signed_by: get("signed_by")?,
    };
    let rest = members
        .iter()
        .filter(|(k, _)| !SEAL_FIELDS.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok((Json::Object(rest), seal))
}

/// Typed access to exactly the expected members of an untrusted object.
struct Fields<'a> {
    v: &'a Json,
    what: &'a str,
}

impl<'a> Fields<'a> {
    fn new(v: &'a Json, expected: &[&str], what: &'a str) -> Result<Fields<'a>, Malformed> {
        let members = v
            .as_object()
            .ok_or_else(|| Malformed(format!("{what} must be an object")))?;
        for (k, _) in members {
            if !expected.contains(&k.as_str()) {
                return Err(Malformed(format!("{what} has an unknown field {k:?}")));
            }
        }
        for k in expected {
            if v.get(k).is_none() {
                return Err(Malformed(format!("{what}.{k} is missing")));
            }
        }
        Ok(Fields { v, what })
    }
    fn get(&self, k: &str) -> &'a Json {
        self.v.get(k).unwrap_or(&Json::Null)
    }
    fn err(&self, k: &str, want: &str) -> Malformed {
        Malformed(format!("{}.{k} must be {want}", self.what))
    }
    fn uint(&self, k: &str) -> Result<u64, Malformed> {
        self.get(k)
            .as_safe_u64()
            .ok_or_else(|| self.err(k, "an integer 0..2^53-1"))
    }
    fn hex(&self, k: &str, len: usize) -> Result<String, Malformed> {
        match self.get(k).as_str() {
            Some(s) if is_lower_hex(s, len) => Ok(s.to_owned()),
            _ => Err(self.err(k, &format!("{len} lowercase hex characters"))),
        }
    }
    fn opt_hex(&self, k: &str, len: usize) -> Result<Option<String>, Malformed> {
        match self.get(k) {
            Json::Null => Ok(None),
            _ => self.hex(k, len).map(Some),
        }
    }
    fn cursor(&self, k: &str) -> Result<String, Malformed> {
        match self.get(k).as_str() {
            Some(s) if jcs::is_cursor(s) => Ok(s.to_owned()),
            _ => Err(self.err(k, "\"sha256:\" + 64 lowercase hex characters")),
        }
    }
    fn opt_cursor(&self, k: &str) -> Result<Option<String>, Malformed> {
        match self.get(k) {
            Json::Null => Ok(None),
            _ => self.cursor(k).map(Some),
        }
    }
    fn timestamp(&self, k: &str) -> Result<String, Malformed> {
        match self.get(k).as_str() {
            Some(s) if is_timestamp(s) => Ok(s.to_owned()),
            _ => Err(self.err(k, "an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SSZ)")),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`, the form the service writes.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[b.len() - 1] == b'Z'
        && (b.len() == 20 || (b[19] == b'.' && b.len() > 21 && digits(20..b.len() - 1)))
}

#[cfg(test)]
mod tests;
