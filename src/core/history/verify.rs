//! The checks every entry and head goes through, and the report they add up
//! to. The same code runs in the Durable Object when it appends an entry, in
//! [`verify_chain`] over parsed entries, and in `verify_export` over a bundle.
//!
//! Five checks, three levels (each level needs the ones before it):
//!
//! | level       | check       | what it measures |
//! |-------------|-------------|------------------|
//! | `structure` | `schema`    | entries and head are well-formed; every capsule passes the `self_capsule_v0` schema |
//! |             | `safety`    | every capsule passes the safety scanner (as of this build's rules) |
//! | `integrity` | `chain`     | every `hash` recomputes; `cursor` recomputes; `sequence` is contiguous, `previous_hash` links, `seq` strictly increases, `prev_cursor` links; `agent_id` binds to the chain's agent; the head matches the window's ends |
//! | `auth`      | `signature` | `sha256(public_key) == agent_id` and the agent's Ed25519 signature verifies over `SHA-256(JCS({agent_id, seq, capsule}))` |
//! |             | `seal`      | every `service_signature` (entries and head) verifies under the keyring key `signed_by` names |

#[cfg(feature = "core-full")]
use super::{ChainHead, Entry, Keyring, Withheld};
#[cfg(feature = "core-full")]
use crate::core::crypto::AgentId;
use crate::core::crypto::PublicKey;
#[cfg(feature = "core-full")]
use crate::core::jcs;
#[cfg(feature = "core-full")]
use crate::core::json::Json;
#[cfg(feature = "core-full")]
use crate::core::safety;
#[cfg(feature = "core-full")]
use crate::core::time::rfc3339;
#[cfg(feature = "core-full")]
use crate::core::validate;
use serde::{Deserialize, Serialize};
#[cfg(feature = "core-full")]
use std::collections::BTreeMap;

/// The five checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckName {
    /// Entries and head are well-formed; capsules pass the schema.
    Schema,
    /// Capsules pass the safety scanner.
    Safety,
    /// Hashes, links and the head agree.
    Chain,
    /// The agent's signatures verify under its own key.
    Signature,
    /// The service's seals verify under the keyring.
    Seal,
}

impl CheckName {
    /// Every check, in the order reports list them.
    pub const ALL: [CheckName; 5] = [
        CheckName::Schema,
        CheckName::Safety,
        CheckName::Chain,
        CheckName::Signature,
        CheckName::Seal,
    ];
    /// The wire name (`"schema"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Schema => "schema",
            CheckName::Safety => "safety",
            CheckName::Chain => "chain",
            CheckName::Signature => "signature",
            CheckName::Seal => "seal",
        }
    }
    /// The check with this wire name.
    pub fn from_wire(s: &str) -> Option<CheckName> {
        CheckName::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// How far verification got: each level needs every check of the levels
/// below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Not even well-formed (or unsafe content).
    None,
    /// `schema` and `safety` pass.
    Structure,
    /// ... and `chain`.
    Integrity,
    /// ... and `signature` and `seal`: everything.
    Auth,
}

/// One problem found; `sequence` is null for the head or the bundle itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The entry's `sequence` (null: the head, or the bundle as a whole).
    pub sequence: Option<u64>,
    /// What is wrong, for a human.
    pub detail: String,
}

/// One check's measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// No failures.
    pub ok: bool,
    /// Entries this check examined.
    pub checked: u64,
    /// What it found, in the order found.
    pub failures: Vec<Failure>,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            ok: true,
            checked: 0,
            failures: Vec::new(),
        }
    }
}

/// The five measurements, one field per [`CheckName`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checks {
    /// [`CheckName::Schema`].
    pub schema: Check,
    /// [`CheckName::Safety`].
    pub safety: Check,
    /// [`CheckName::Chain`].
    pub chain: Check,
    /// [`CheckName::Signature`].
    pub signature: Check,
    /// [`CheckName::Seal`].
    pub seal: Check,
}

impl Checks {
    /// The measurement of `c`.
    pub fn get(&self, c: CheckName) -> &Check {
        match c {
            CheckName::Schema => &self.schema,
            CheckName::Safety => &self.safety,
            CheckName::Chain => &self.chain,
            CheckName::Signature => &self.signature,
            CheckName::Seal => &self.seal,
        }
    }
    /// The measurement of `c`, to record into.
    pub fn get_mut(&mut self, c: CheckName) -> &mut Check {
        match c {
            CheckName::Schema => &mut self.schema,
            CheckName::Safety => &mut self.safety,
            CheckName::Chain => &mut self.chain,
            CheckName::Signature => &mut self.signature,
            CheckName::Seal => &mut self.seal,
        }
    }
    /// The checks that failed, in the fixed order.
    pub fn failing(&self) -> Vec<CheckName> {
        CheckName::ALL
            .into_iter()
            .filter(|c| !self.get(*c).ok)
            .collect()
    }
    /// The highest level whose checks (and those below) all pass.
    pub fn level(&self) -> Level {
        let ok = |c: CheckName| self.get(c).ok;
        if !(ok(CheckName::Schema) && ok(CheckName::Safety)) {
            Level::None
        } else if !ok(CheckName::Chain) {
            Level::Structure
        } else if !(ok(CheckName::Signature) && ok(CheckName::Seal)) {
            Level::Integrity
        } else {
            Level::Auth
        }
    }
}

/// What was verified: the window and the head it was checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Entries examined.
    pub entries: u64,
    /// `sequence` of the oldest examined entry.
    pub first_sequence: Option<u64>,
    /// The head's chain length (entries ever appended).
    pub length: Option<u64>,
    /// The head's `head_hash` (the newest entry's `hash`).
    pub head_hash: Option<String>,
}

/// The verify report (also the body of verify.json). Measurements only:
/// what each check examined and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The chain's agent.
    pub agent_id: String,
    /// Every check passed.
    pub valid: bool,
    /// How far verification got.
    pub level: Level,
    /// `cursor` of the newest entry (null if there is none).
    pub cursor: Option<String>,
    /// `seq` of the newest entry (null if there is none).
    pub seq: Option<u64>,
    /// Each check's measurement.
    pub checks: Checks,
    /// Facts worth knowing that are not failures (pruning, retired keys,
    /// keys taken from the bundle itself).
    pub warnings: Vec<String>,
    /// When the measurement was taken (absent offline unless given a clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<String>,
    /// What was examined.
    pub window: Window,
    /// `sequence`s of the versions withheld from this reader (written
    /// private; docs/PROTOCOL.md §9): their place in the chain and their
    /// seals were checked, their content could not be. Not a failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<u64>,
    /// `sequence`s of the disputed versions (docs/PROTOCOL.md §14): a
    /// thief's, written with a key the owner has since rotated out after its
    /// last good write. They stay in the chain and verify; they are not the
    /// owner's. Not a failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disputed: Vec<u64>,
}

impl Report {
    /// The checks that failed, in the fixed order.
    pub fn failing(&self) -> Vec<CheckName> {
        self.checks.failing()
    }

    /// This report (the owner's: every version measured) as a reader from
    /// whom the versions at `withheld` are withheld may have it: what that
    /// reader's export would verify to. A withheld version's content was
    /// not shown, so its schema, safety and signature results are not
    /// reported (offline they cannot be checked); its place and seal were,
    /// so a failure of those stays, without its detail. `checked` no longer
    /// counts withheld versions, and they are listed in `withheld` with
    /// the verifier's warning.
    pub fn for_reader(&self, withheld: &[u64]) -> Report {
        let mut r = self.clone();
        if withheld.is_empty() {
            return r;
        }
        let hidden = |f: &Failure| f.sequence.is_some_and(|s| withheld.contains(&s));
        for c in CheckName::ALL {
            let check = r.checks.get_mut(c);
            match c {
                CheckName::Schema | CheckName::Safety | CheckName::Signature => {
                    check.failures.retain(|f| !hidden(f));
                }
                CheckName::Chain | CheckName::Seal => {
                    for f in check.failures.iter_mut().filter(|f| hidden(f)) {
                        f.detail = WITHHELD_FAILURE.to_owned();
                    }
                }
            }
            check.ok = check.failures.is_empty();
            check.checked = check.checked.saturating_sub(withheld.len() as u64);
        }
        r.valid = r.checks.failing().is_empty();
        r.level = r.checks.level();
        r.withheld = withheld.to_vec();
        r.warnings.push(withheld_warning(withheld.len()));
        r
    }
}

/// The detail of a place or seal failure at a version withheld from the
/// reader (what failed is told; nothing of the version's content).
const WITHHELD_FAILURE: &str = "a version withheld from this reader failed this check";

/// The warning of a report with withheld versions.
fn withheld_warning(n: usize) -> String {
    format!(
        "{n} version(s) are withheld from this reader (written private): their place in the chain and their seals were checked, their content could not be"
    )
}

/// How a failure names a bundle item it could not read (no `sequence` to
/// name it by): every such detail starts with this.
#[cfg(feature = "core-full")]
pub(crate) fn item_label(position: usize) -> String {
    format!("entries[{position}]")
}

/// What an entry is checked against: where the head says the window
/// starts, or its predecessor in the window.
#[cfg(feature = "core-full")]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Prev<'a> {
    Start {
        sequence: u64,
        previous_hash: Option<&'a str>,
    },
    Entry {
        sequence: u64,
        hash: &'a str,
        seq: u64,
        cursor: &'a str,
    },
    /// A withheld predecessor: its place and hash, not its seq or cursor.
    Withheld { sequence: u64, hash: &'a str },
    /// The predecessor could not be read (already reported).
    Unknown,
}

#[cfg(feature = "core-full")]
impl<'a> Prev<'a> {
    pub(crate) fn of(e: &'a Entry) -> Prev<'a> {
        Prev::Entry {
            sequence: e.sequence,
            hash: &e.seal.hash,
            seq: e.seq,
            cursor: &e.cursor,
        }
    }
    pub(crate) fn withheld(w: &'a Withheld) -> Prev<'a> {
        Prev::Withheld {
            sequence: w.sequence,
            hash: &w.seal.hash,
        }
    }
    pub(crate) fn start(head: Option<&'a ChainHead>) -> Prev<'a> {
        head.map_or(Prev::Unknown, |h| Prev::Start {
            sequence: h.first_sequence,
            previous_hash: h.first_previous_hash.as_deref(),
        })
    }
}

/// What the write check established about one exact version before it is
/// appended: its capsule passed the schema and the safety scan, and its
/// signature verified (in [`crate::core::write::check`], or in the
/// Worker's `precheck` of the same bytes, which the agent's object trusts
/// to accept the write at all). Only `write::check` makes one.
///
/// Appending with it spares the Durable Object a second run of the three
/// costliest checks over the same bytes in the same build (the schema, the
/// scan and an Ed25519 verification: about a third of an accepted write's
/// CPU in the object). It vouches only for the version it names: the entry's
/// cursor, seq and signature must equal its own, and the cursor must be the
/// one recomputed from the entry's capsule, so it cannot vouch for another
/// capsule. Everything else (hashes, links, the seal) is checked as always.
#[cfg(feature = "core-full")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteChecked {
    cursor: String,
    seq: u64,
    signature: String,
}

#[cfg(feature = "core-full")]
impl WriteChecked {
    pub(crate) fn new(cursor: &str, seq: u64, signature: &str) -> WriteChecked {
        WriteChecked {
            cursor: cursor.to_owned(),
            seq,
            signature: signature.to_owned(),
        }
    }

    /// Whether this is the check of `e`'s version (given that `e.cursor`
    /// is its capsule's).
    fn covers(&self, e: &Entry) -> bool {
        self.cursor == e.cursor && self.seq == e.seq && self.signature == e.signature
    }
}

/// The newest item of a window, as the head is checked against it.
#[cfg(feature = "core-full")]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Newest<'a> {
    /// A readable entry.
    Entry(&'a Entry),
    /// A withheld one: its place and hash only.
    Withheld(&'a Withheld),
    /// It could not be read (already reported).
    Unreadable,
    /// There is none.
    Missing,
}

#[cfg(feature = "core-full")]
impl<'a> Newest<'a> {
    pub(crate) fn entry(&self) -> Option<&'a Entry> {
        match self {
            Newest::Entry(e) => Some(e),
            _ => None,
        }
    }
}

/// Which key spoke for the agent at each place of its chain, and which
/// versions are disputed: what the agent's key log says (docs/PROTOCOL.md
/// §14). Without one, the genesis key (`sha256(public_key) == agent_id`)
/// signs every entry.
pub trait AgentKeys: std::fmt::Debug {
    /// The key that may sign the entry at chain position `sequence`.
    fn key_at(&self, sequence: u64) -> &PublicKey;
    /// Whether the version at `sequence` with `seq` is disputed (a thief's,
    /// after the owner's last good write).
    fn disputed(&self, sequence: u64, seq: u64) -> bool;
}

/// Accumulates check results.
#[cfg(feature = "core-full")]
pub(crate) struct Verifier<'a> {
    agent_id: &'a str,
    keyring: &'a Keyring,
    /// The key log's answer to who signs where (`None`: the genesis key).
    keys: Option<&'a dyn AgentKeys>,
    /// The `seq` of the newest undisputed version seen: after disputed
    /// versions, the owner's next one need only exceed this.
    good_seq: Option<u64>,
    pub(crate) checks: Checks,
    /// Entries sealed per key fingerprint (for rotation warnings).
    signers: BTreeMap<String, u64>,
    /// Withheld versions seen.
    withheld: Vec<u64>,
    /// Disputed versions seen.
    disputed: Vec<u64>,
}

#[cfg(feature = "core-full")]
impl<'a> Verifier<'a> {
    pub(crate) fn new(agent_id: &'a str, keyring: &'a Keyring) -> Verifier<'a> {
        Verifier::with_checks(agent_id, keyring, Checks::default())
    }

    pub(crate) fn with_checks(
        agent_id: &'a str,
        keyring: &'a Keyring,
        checks: Checks,
    ) -> Verifier<'a> {
        Verifier {
            agent_id,
            keyring,
            keys: None,
            good_seq: None,
            checks,
            signers: BTreeMap::new(),
            withheld: Vec::new(),
            disputed: Vec::new(),
        }
    }

    /// Checks signers against `keys` (the agent's key log) instead of the
    /// genesis key; `good_seq` is the newest undisputed `seq` before the
    /// first entry this verifier sees, if known.
    pub(crate) fn with_keys(
        mut self,
        keys: Option<&'a dyn AgentKeys>,
        good_seq: Option<u64>,
    ) -> Self {
        self.keys = keys;
        self.good_seq = good_seq;
        self
    }

    /// A withheld version: what can be checked without its content. Its
    /// place (`sequence` follows, `previous_hash` links) and its seal over
    /// its hash; its schema, safety, hash and signature cannot be, and are not
    /// failures.
    pub(crate) fn withheld(&mut self, w: &Withheld, prev: Prev<'_>) {
        use CheckName::*;
        let at = Some(w.sequence);
        self.withheld.push(w.sequence);
        *self.signers.entry(w.seal.signed_by.clone()).or_default() += 1;
        self.place(at, w.sequence, w.previous_hash.as_deref(), prev);
        if let Err(d) = w.seal.verify(self.keyring) {
            self.fail(Seal, at, d.to_string());
        }
    }

    /// An item's place in the chain, whether its content is shown or
    /// withheld: `previous_hash` null exactly at genesis, and `sequence`
    /// and `previous_hash` following `prev` (where the window starts, or the
    /// item before it).
    fn place(
        &mut self,
        at: Option<u64>,
        sequence: u64,
        previous_hash: Option<&str>,
        prev: Prev<'_>,
    ) {
        use CheckName::Chain;
        if (sequence == 0) != previous_hash.is_none() {
            self.fail(
                Chain,
                at,
                "previous_hash must be null exactly at genesis (sequence 0)",
            );
        }
        match prev {
            Prev::Start {
                sequence: start,
                previous_hash: first,
            } => {
                if sequence != start {
                    self.fail(
                        Chain,
                        at,
                        format!("the head says the window starts at sequence {start}"),
                    );
                }
                if previous_hash != first {
                    self.fail(
                        Chain,
                        at,
                        "previous_hash is not the head's first_previous_hash",
                    );
                }
            }
            Prev::Entry {
                sequence: before,
                hash,
                ..
            }
            | Prev::Withheld {
                sequence: before,
                hash,
            } => {
                if sequence != before + 1 {
                    self.fail(
                        Chain,
                        at,
                        format!("sequence does not follow the previous entry's {before}"),
                    );
                }
                if previous_hash != Some(hash) {
                    self.fail(
                        Chain,
                        at,
                        format!("previous_hash is not the hash of the entry before it (sequence {before})"),
                    );
                }
            }
            Prev::Unknown => {}
        }
    }

    pub(crate) fn fail(&mut self, c: CheckName, sequence: Option<u64>, detail: impl Into<String>) {
        let check = self.checks.get_mut(c);
        check.ok = false;
        check.failures.push(Failure {
            sequence,
            detail: detail.into(),
        });
    }

    fn count_entry(&mut self) {
        for c in CheckName::ALL {
            self.checks.get_mut(c).checked += 1;
        }
    }

    /// An entry that could not even be read: a schema failure, and the chain
    /// cannot be followed through it.
    pub(crate) fn unreadable(&mut self, position: usize, sequence: Option<u64>, detail: &str) {
        let item = item_label(position);
        self.count_entry();
        self.fail(CheckName::Schema, sequence, format!("{item}: {detail}"));
        self.fail(
            CheckName::Chain,
            sequence,
            format!("{item} is unreadable, so the chain cannot be followed through it"),
        );
    }

    /// All five checks of one entry. `hashed`: the bytes its `hash` claims
    /// to cover (an export's given text, or the entry's canonical form).
    pub(crate) fn entry(&mut self, e: &Entry, hashed: &[u8], prev: Prev<'_>) {
        self.entry_checked(e, hashed, prev, None)
    }

    /// [`Verifier::entry`], taking the schema, safety and agent-signature
    /// results from `checked` when it covers this entry's version.
    pub(crate) fn entry_checked(
        &mut self,
        e: &Entry,
        hashed: &[u8],
        prev: Prev<'_>,
        checked: Option<&WriteChecked>,
    ) {
        use CheckName::*;
        let at = Some(e.sequence);
        // The token names a cursor; it vouches for this capsule only if the
        // capsule is what that cursor hashes.
        let cursor_ok = jcs::cursor(&e.capsule) == e.cursor;
        let vouched = cursor_ok && checked.is_some_and(|c| c.covers(e));
        self.count_entry();
        *self.signers.entry(e.seal.signed_by.clone()).or_default() += 1;

        // structure
        if vouched {
            // Passed in the write check; nothing to record.
        } else if let Err(violations) = validate::validate_capsule(&e.capsule) {
            let codes: Vec<&str> = validate::codes(&violations)
                .into_iter()
                .map(|c| c.as_str())
                .collect();
            self.fail(
                Schema,
                at,
                format!(
                    "capsule fails the self_capsule_v0 schema: {}",
                    codes.join(", ")
                ),
            );
        }
        let findings = if vouched {
            Vec::new()
        } else {
            safety::scan(&e.capsule)
        };
        if !findings.is_empty() {
            let mut rules: Vec<&str> = findings.iter().map(|f| f.rule).collect();
            rules.dedup();
            self.fail(
                Safety,
                at,
                format!(
                    "safety scanner flags {} string(s) (rules: {})",
                    findings.len(),
                    rules.join(", ")
                ),
            );
        }

        // integrity
        if super::sha3_hex(hashed) != e.seal.hash {
            self.fail(Chain, at, "hash does not match the entry's canonical bytes");
        }
        if !cursor_ok {
            self.fail(Chain, at, "cursor is not sha256 of the canonical capsule");
        }
        if e.agent_id != self.agent_id {
            self.fail(Chain, at, "agent_id is not the chain's agent");
        }
        if e.capsule.get("agent_id").and_then(Json::as_str) != Some(e.agent_id.as_str()) {
            self.fail(
                Chain,
                at,
                "capsule.agent_id differs from the entry's agent_id",
            );
        }
        self.place(at, e.sequence, e.previous_hash.as_deref(), prev);
        // A withheld predecessor shows no seq or cursor to link to.
        if let Prev::Entry {
            sequence: before,
            seq,
            cursor,
            ..
        } = prev
        {
            // After disputed versions (a thief's, §14) the owner continues
            // from its own last good write, not from the thief's seq.
            let floor = match self.keys {
                Some(k) if k.disputed(before, seq) => self.good_seq,
                _ => Some(seq),
            };
            if let Some(floor) = floor.filter(|f| e.seq <= *f) {
                self.fail(
                    Chain,
                    at,
                    format!(
                        "seq {} is not greater than the previous entry's {floor}",
                        e.seq
                    ),
                );
            }
            if e.prev_cursor.as_deref() != Some(cursor) {
                self.fail(Chain, at, "prev_cursor is not the previous entry's cursor");
            }
        }

        // auth
        if self.keys.is_some_and(|k| k.disputed(e.sequence, e.seq)) {
            self.disputed.push(e.sequence);
        } else {
            self.good_seq = Some(e.seq);
        }
        match PublicKey::from_hex(&e.public_key) {
            Err(k) => self.fail(Signature, at, format!("public_key: {k}")),
            Ok(pk) => {
                let mut sig = [0u8; 64];
                let agent = AgentId::parse(&e.agent_id);
                let signer_ok = match (self.keys, &agent) {
                    (_, None) => false,
                    (None, Some(a)) => *a == pk.agent_id(),
                    (Some(k), Some(_)) => *k.key_at(e.sequence) == pk,
                };
                if !signer_ok && self.keys.is_some() {
                    self.fail(
                        Signature,
                        at,
                        "public_key is not the key the agent's key log names for this place in the chain",
                    );
                } else if !signer_ok {
                    self.fail(
                        Signature,
                        at,
                        "sha256(public_key) is not agent_id: signed by another key",
                    );
                } else if hex::decode_to_slice(&e.signature, &mut sig).is_err() {
                    self.fail(Signature, at, "signature is not 128 hex characters");
                } else if !vouched {
                    let agent = agent.expect("checked above");
                    let digest = crate::core::crypto::write_digest(&agent, e.seq, &e.capsule);
                    if !pk.verify(&digest, &sig) {
                        self.fail(
                            Signature,
                            at,
                            "the agent's signature does not verify over sha256(JCS({agent_id, seq, capsule}))",
                        );
                    }
                }
            }
        }
        if let Err(d) = e.seal.verify(self.keyring) {
            self.fail(Seal, at, d.to_string());
        }
    }

    /// The head: its hash recomputes, it names this agent, it matches the
    /// newest entry (so a truncated or extended tail shows), and its seal.
    pub(crate) fn head(&mut self, h: &ChainHead, newest: Newest<'_>) {
        use CheckName::*;
        if super::sha3_hex(h.canonical().as_bytes()) != h.seal.hash {
            self.fail(
                Chain,
                None,
                "head: hash does not match the head's canonical bytes",
            );
        }
        if h.agent_id != self.agent_id {
            self.fail(Chain, None, "head: agent_id is not the chain's agent");
        }
        let (sequence, hash) = match newest {
            Newest::Missing => {
                self.fail(Chain, None, "head: there are no entries");
                (None, None)
            }
            Newest::Unreadable => (None, None),
            Newest::Entry(l) => {
                if l.seq != h.seq || l.cursor != h.cursor {
                    self.fail(Chain, None, "head: seq/cursor are not the newest entry's");
                }
                (Some(l.sequence), Some(l.seal.hash.as_str()))
            }
            Newest::Withheld(w) => (Some(w.sequence), Some(w.seal.hash.as_str())),
        };
        if let Some(s) = sequence {
            if s.checked_add(1) != Some(h.length) {
                self.fail(
                    Chain,
                    None,
                    format!(
                        "head: length is {} but the newest entry is sequence {s} (entries missing at the tail, or added)",
                        h.length
                    ),
                );
            }
        }
        if hash.is_some_and(|x| x != h.head_hash) {
            self.fail(
                Chain,
                None,
                "head: head_hash is not the newest entry's hash",
            );
        }
        if let Err(d) = h.seal.verify(self.keyring) {
            self.fail(Seal, None, format!("head: {d}"));
        }
    }

    /// Warnings about the window and the keys (facts worth knowing that are
    /// not failures).
    pub(crate) fn warnings(&self, head: Option<&ChainHead>) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(h) = head {
            if h.first_sequence > 0 {
                w.push(format!(
                    "{} older entries are no longer retained; the window starts at sequence {} and is tied to them only by its previous_hash",
                    h.first_sequence, h.first_sequence
                ));
            }
        }
        if let Some(current) = &self.keyring.current {
            for (fp, n) in &self.signers {
                if fp != current && self.keyring.keys.contains_key(fp) && *n > 0 {
                    w.push(format!("{n} entries are sealed by the retired key {fp}"));
                }
            }
        }
        w
    }

    pub(crate) fn report(
        self,
        head: Option<&ChainHead>,
        newest: Option<&Entry>,
        entries: u64,
        first_sequence: Option<u64>,
        mut warnings: Vec<String>,
        verified_at_ms: Option<u64>,
    ) -> Report {
        let mut all = self.warnings(head);
        if !self.withheld.is_empty() {
            all.push(withheld_warning(self.withheld.len()));
        }
        all.append(&mut warnings);
        Report {
            agent_id: self.agent_id.to_owned(),
            valid: self.checks.failing().is_empty(),
            level: self.checks.level(),
            cursor: newest
                .map(|e| e.cursor.clone())
                .or_else(|| head.map(|h| h.cursor.clone())),
            seq: newest.map(|e| e.seq).or_else(|| head.map(|h| h.seq)),
            checks: self.checks,
            warnings: all,
            verified_at: verified_at_ms.map(rfc3339),
            window: Window {
                entries,
                first_sequence,
                length: head.map(|h| h.length),
                head_hash: head.map(|h| h.head_hash.clone()),
            },
            withheld: self.withheld,
            disputed: self.disputed,
        }
    }
}

/// Verifies parsed entries (oldest first, e.g. history.json's `versions`
/// reversed) against a head and a keyring. Hashes are recomputed over each
/// entry's canonical form.
#[cfg(feature = "core-full")]
pub fn verify_chain(
    agent_id: &str,
    head: &ChainHead,
    entries: &[Entry],
    keyring: &Keyring,
    now_ms: Option<u64>,
) -> Report {
    let mut v = Verifier::new(agent_id, keyring);
    let mut prev = Prev::start(Some(head));
    for e in entries {
        v.entry(e, e.canonical().as_bytes(), prev);
        prev = Prev::of(e);
    }
    v.head(head, entries.last().map_or(Newest::Missing, Newest::Entry));
    v.report(
        Some(head),
        entries.last(),
        entries.len() as u64,
        entries.first().map(|e| e.sequence),
        Vec::new(),
        now_ms,
    )
}
