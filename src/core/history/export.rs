//! The export bundle (`GET /self/{id}/export.json`) and its offline
//! verification. A bundle carries each retained entry's exact canonical
//! bytes (as a JSON string) with its seal, the sealed chain head and the
//! service keyring: everything needed to check it with no network.

use super::privacy::{is_withheld, Viewer, Withheld};
use super::verify::{Newest, Prev, Report, Verifier};
use super::{ChainHead, Entry, HistoryIndex, Keyring, Malformed, Seal, HASH_ALG, SEAL_ALG};
use crate::core::crypto::is_lower_hex;
use crate::core::json::{self, Json};
use serde::Serialize;
use std::collections::BTreeMap;

/// The `format` of bundles this code writes and reads.
pub const EXPORT_FORMAT: &str = "self-capsule-history/v0";

/// One entry in a bundle: the bytes that were hashed, and the seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportEntry {
    /// RFC 8785 text of the entry without its seal fields.
    pub canonical: String,
    /// The entry's seal, written flat after `canonical`.
    #[serde(flatten)]
    pub seal: Seal,
}

impl ExportEntry {
    /// From the stored form ([`Entry::stored_text`]) without parsing it.
    pub fn from_stored(stored: &str) -> Option<ExportEntry> {
        let (canonical, seal) = super::canonical_of_stored(stored)?;
        Some(ExportEntry { canonical, seal })
    }
}

/// One item of a bundle's `entries`: an entry, or one withheld from this
/// reader (written private; its place and seal only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ExportItem {
    /// The entry's exact hashed bytes and seal.
    Entry(ExportEntry),
    /// What a reader who may not see it gets instead.
    Withheld(Withheld),
}

/// The export.json body: everything needed to verify the retained window
/// offline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportBundle {
    /// [`EXPORT_FORMAT`].
    pub format: &'static str,
    /// The chain's agent.
    pub agent_id: String,
    /// [`HASH_ALG`].
    pub hash_alg: &'static str,
    /// [`SEAL_ALG`].
    pub signature_alg: &'static str,
    /// The sealed chain head the entries must end at.
    pub head: ChainHead,
    /// Fingerprint of the key sealing new entries at export time.
    pub current_key: Option<String>,
    /// Fingerprint -> public key: every key a retained seal may name.
    pub keys: BTreeMap<String, String>,
    /// The retained entries, oldest first (withheld ones in their place).
    pub entries: Vec<ExportItem>,
    /// The agent's whole key log (docs/PROTOCOL.md §14), sealed records
    /// oldest first: which key signed each entry, and which versions are
    /// disputed. Absent for an agent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_log: Option<Vec<Json>>,
}

impl ExportBundle {
    /// `entries` are the retained entries, oldest first.
    pub fn new(index: &HistoryIndex, entries: &[Entry], keyring: &Keyring) -> ExportBundle {
        let entries = entries
            .iter()
            .map(|e| {
                ExportItem::Entry(ExportEntry {
                    canonical: e.canonical(),
                    seal: e.seal.clone(),
                })
            })
            .collect();
        ExportBundle::from_parts(index, entries, keyring)
    }

    /// The bundle as `viewer` may have it, from the retained entries' stored
    /// texts (oldest first, one per index item): each version it may not see
    /// withheld. `None` if the texts do not match the index (count, seals).
    pub fn for_viewer(
        index: &HistoryIndex,
        stored: &[String],
        keyring: &Keyring,
        viewer: &Viewer<'_>,
    ) -> Option<ExportBundle> {
        if stored.len() != index.items.len() {
            return None;
        }
        let mut previous_hash = index.head.first_previous_hash.as_deref();
        let mut entries = Vec::with_capacity(stored.len());
        for (item, text) in index.items.iter().zip(stored) {
            // Each text must be the entry its index item names: a decision
            // about one version is never applied to another's bytes.
            if super::canonical_of_stored(text)?.1.hash != item.hash {
                return None;
            }
            entries.push(if index.sees(item.sequence, text, viewer) {
                ExportItem::Entry(ExportEntry::from_stored(text)?)
            } else {
                ExportItem::Withheld(Withheld::of_stored(item.sequence, previous_hash, text)?)
            });
            previous_hash = Some(&item.hash);
        }
        Some(ExportBundle::from_parts(index, entries, keyring))
    }

    /// From already-built items (e.g. [`ExportEntry::from_stored`]).
    pub fn from_parts(
        index: &HistoryIndex,
        entries: Vec<ExportItem>,
        keyring: &Keyring,
    ) -> ExportBundle {
        ExportBundle {
            format: EXPORT_FORMAT,
            agent_id: index.agent_id.clone(),
            hash_alg: HASH_ALG,
            signature_alg: SEAL_ALG,
            head: index.head.clone(),
            current_key: keyring.current.clone(),
            keys: keyring.keys.clone(),
            entries,
            key_log: None,
        }
    }

    /// The bundle with the agent's key log (its sealed records, oldest
    /// first; an empty log is left out).
    pub fn with_key_log(mut self, records: Vec<Json>) -> ExportBundle {
        self.key_log = (!records.is_empty()).then_some(records);
        self
    }
}

/// Optional inputs that make an offline verification stronger.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Keys to trust instead of the bundle's own `keys` (e.g. the service's
    /// published keyring, fetched or pinned separately).
    pub trusted_keys: Option<Keyring>,
    /// The agent the bundle must be about.
    pub agent_id: Option<String>,
    /// "Now", for `verified_at`.
    pub now_ms: Option<u64>,
}

/// Verifies a bundle with only what it carries (its keys are trusted as
/// given, which the report warns about).
pub fn verify_export(bundle: &Json) -> Report {
    verify_export_with(bundle, &VerifyOptions::default())
}

/// Verifies a bundle. Never panics on hostile input: anything malformed is a
/// `schema` failure and the rest is checked as far as it can be.
pub fn verify_export_with(bundle: &Json, opts: &VerifyOptions) -> Report {
    let mut warnings = Vec::new();
    let mut key_log_failures = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    if bundle.as_object().is_none() {
        problems.push("the bundle must be a JSON object".into());
    }
    match bundle.get("format").and_then(Json::as_str) {
        Some(EXPORT_FORMAT) => {}
        _ => problems.push(format!("format must be {EXPORT_FORMAT:?}")),
    }
    for (field, want) in [("hash_alg", HASH_ALG), ("signature_alg", SEAL_ALG)] {
        if bundle.get(field).and_then(Json::as_str) != Some(want) {
            problems.push(format!("{field} must be {want:?}"));
        }
    }
    let agent_id = match bundle.get("agent_id").and_then(Json::as_str) {
        Some(s) if is_lower_hex(s, 64) => s.to_owned(),
        _ => {
            problems.push("agent_id must be 64 lowercase hex characters".into());
            String::new()
        }
    };
    let bundle_keys = {
        let current = match bundle.get("current_key") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.as_str()),
            Some(_) => {
                problems.push("current_key must be a fingerprint or null".into());
                None
            }
        };
        let (ring, mut bad) =
            Keyring::from_json(bundle.get("keys").unwrap_or(&Json::Null), current);
        problems.append(&mut bad);
        if let Some(c) = current {
            if !ring.keys.contains_key(c) {
                problems.push(format!("current_key {c:?} is not in keys"));
            }
        }
        ring
    };
    let keyring = match &opts.trusted_keys {
        Some(t) => {
            for fp in bundle_keys.keys.keys() {
                if !t.keys.contains_key(fp) {
                    warnings.push(format!(
                        "the bundle lists key {fp}, which is not in the trusted keyring"
                    ));
                }
            }
            t.clone()
        }
        None => {
            warnings.push(
                "seals were checked against the keys inside the bundle; compare them with the service's published keyring (GET /api/v1/self/keys) or pin them".into(),
            );
            bundle_keys
        }
    };
    let head = match bundle.get("head").map(ChainHead::from_json) {
        Some(Ok(h)) => Some(h),
        Some(Err(e)) => {
            problems.push(e.to_string());
            None
        }
        None => {
            problems.push("head is missing".into());
            None
        }
    };
    let items: &[Json] = match bundle.get("entries").and_then(Json::as_array) {
        Some(a) => a,
        None => {
            problems.push("entries must be an array".into());
            &[]
        }
    };

    // The key log, when the bundle carries one: who signed each entry.
    let key_state = match bundle.get("key_log") {
        None => None,
        Some(log) => {
            let agent = crate::core::crypto::AgentId::parse(&agent_id);
            match (log.as_array(), agent) {
                (Some(records), Some(agent)) => {
                    let now = opts.now_ms.unwrap_or(0);
                    let (report, state) =
                        crate::core::key_log::verify_key_log(&agent, records, &keyring, now);
                    key_log_failures = report.failures;
                    state
                }
                _ => {
                    problems.push("key_log must be an array of sealed key records".into());
                    None
                }
            }
        }
    };
    let mut v = Verifier::new(&agent_id, &keyring).with_keys(
        key_state
            .as_ref()
            .map(|k| k as &dyn super::verify::AgentKeys),
        None,
    );
    for f in key_log_failures {
        // A broken key log leaves who signed what unproven; a bad seal on
        // it is a seal failure like any other.
        let check = if f.check == "seal" {
            super::CheckName::Seal
        } else {
            super::CheckName::Signature
        };
        let at = f
            .index
            .map_or("key_log".to_owned(), |i| format!("key_log[{i}]"));
        v.fail(check, None, format!("{at}: {} ({})", f.detail, f.check));
    }
    for p in problems {
        v.fail(super::CheckName::Schema, None, p);
    }
    if let (Some(want), false) = (&opts.agent_id, agent_id.is_empty()) {
        if *want != agent_id {
            v.fail(
                super::CheckName::Chain,
                None,
                "the bundle is about another agent",
            );
        }
    }

    let mut read: Vec<Item> = Vec::with_capacity(items.len());
    let mut prev_known = true;
    for (i, item) in items.iter().enumerate() {
        let prev = match (read.last(), prev_known) {
            (_, false) => Prev::Unknown,
            (Some(Item::Entry(p, _)), true) => Prev::of(p),
            (Some(Item::Withheld(w)), true) => Prev::withheld(w),
            (None, true) => Prev::start(head.as_ref()),
        };
        match read_item(item) {
            Err(e) => {
                v.unreadable(i, None, &e.to_string());
                prev_known = false;
            }
            Ok(Item::Withheld(w)) => {
                v.withheld(&w, prev);
                read.push(Item::Withheld(w));
                prev_known = true;
            }
            Ok(Item::Entry(entry, text)) => {
                if entry.canonical() != text {
                    v.fail(
                        super::CheckName::Chain,
                        Some(entry.sequence),
                        "canonical is not the RFC 8785 form of the entry",
                    );
                }
                v.entry(&entry, text.as_bytes(), prev);
                read.push(Item::Entry(entry, text));
                prev_known = true;
            }
        }
    }
    // The newest item as the head is checked against it.
    let newest = match (prev_known, read.last()) {
        (false, _) => Newest::Unreadable,
        (true, Some(Item::Entry(e, _))) => Newest::Entry(e),
        (true, Some(Item::Withheld(w))) => Newest::Withheld(w),
        (true, None) => Newest::Missing,
    };
    if let Some(h) = &head {
        v.head(h, newest);
    } else if items.is_empty() {
        v.fail(super::CheckName::Chain, None, "there are no entries");
    }
    let first_sequence = read.first().map(Item::sequence);
    v.report(
        head.as_ref(),
        newest.entry(),
        items.len() as u64,
        first_sequence,
        warnings,
        opts.now_ms,
    )
}

/// One readable bundle item.
pub(super) enum Item {
    /// An entry and the exact text that was hashed (boxed: most items are
    /// entries, and an entry is three times a withheld one).
    Entry(Box<Entry>, String),
    /// A version withheld from this reader.
    Withheld(Withheld),
}

impl Item {
    /// Its `sequence`.
    pub(super) fn sequence(&self) -> u64 {
        match self {
            Item::Entry(e, _) => e.sequence,
            Item::Withheld(w) => w.sequence,
        }
    }
}

/// One bundle item: an entry with the exact text that was hashed, or a
/// withheld one.
pub(super) fn read_item(item: &Json) -> Result<Item, Malformed> {
    if is_withheld(item) {
        return Withheld::from_json(item).map(Item::Withheld);
    }
    let s = |k: &str| -> Result<String, Malformed> {
        item.get(k)
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Malformed(format!("{k} must be a string")))
    };
    let text = s("canonical")?;
    let seal = Seal {
        hash: s("hash")?,
        service_signature: s("service_signature")?,
        signed_by: s("signed_by")?,
    };
    let value =
        json::parse_str(&text).map_err(|e| Malformed(format!("canonical is not JSON: {e}")))?;
    let entry = Entry::from_unsealed(&value, seal)?;
    Ok(Item::Entry(Box::new(entry), text))
}
