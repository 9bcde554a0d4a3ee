//! The service side of history: appending a sealed entry, pruning to the
//! tier's retention, the index readers are served from, and `since` /
//! pagination selection over it.
//!
//! The index is small (one summary per retained entry plus the sealed head
//! and the verify report); the entries themselves are stored one per key, so
//! a read touches only the entries it returns.

use super::privacy::{self, Access, PrunedCursors, Viewer};
use super::verify::Report;
#[cfg(feature = "core-full")]
use super::verify::{AgentKeys, Checks, Prev, Verifier, WriteChecked};
use super::ChainHead;
#[cfg(feature = "core-full")]
use super::{Entry, EntryFields, Hashed, HeadFields, Keyring, Seal, ServiceKey};
use crate::core::access::Audience;
use crate::core::jcs::normalize_cursor;
#[cfg(feature = "core-full")]
use crate::core::json::Json;
#[cfg(feature = "core-full")]
use crate::core::time::rfc3339;
use crate::core::urls::Doc;
use serde::{Deserialize, Serialize};

/// history.json page size when `limit` is absent: the largest page, so a
/// client that ignores `next` still sees every retained version on the free
/// and pro tiers (at most 100 kept); only plus (1000 kept) pages. One KV bulk
/// read fetches a whole page.
pub const DEFAULT_LIMIT: usize = MAX_LIMIT;
/// The largest `limit` history.json accepts (a page stays one bounded read).
pub const MAX_LIMIT: usize = 100;

/// Everything about an agent's history except the entries' bodies: what the
/// Durable Object keeps next to its state and mirrors into KV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryIndex {
    /// The chain's agent.
    pub agent_id: String,
    /// The sealed chain head (history.json's `chain_head`).
    pub head: ChainHead,
    /// Accepted writes ever.
    pub total_writes: u64,
    /// The retention that applied at the last append.
    pub retained_limit: u32,
    /// The retained entries, oldest first.
    pub items: Vec<IndexItem>,
    /// The verify report as of the last append (verify.json).
    pub report: Report,
    /// The distinct audiences of the retained private versions (each item
    /// names its own by index: [`Access::Private`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<Audience>,
    /// The cursors of the newest pruned versions (`since` still knows them).
    #[serde(default, skip_serializing_if = "PrunedCursors::is_empty")]
    pub pruned_cursors: PrunedCursors,
    /// The agent's key log's length (§14): a key event changes who signed
    /// what and which versions are disputed without a new entry, so the
    /// history documents' entity tag names it ([`HistoryIndex::etag`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub key_events: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One retained entry, summarised: enough to select pages and follow
/// `since` without reading the entry itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexItem {
    /// The entry's position in the chain.
    pub sequence: u64,
    /// The agent's `seq` of that write.
    pub seq: u64,
    /// The capsule's cursor.
    pub cursor: String,
    /// The previous write's cursor (`since` may name the state just before
    /// the window).
    pub prev_cursor: Option<String>,
    /// The entry's `hash` (the next `first_previous_hash` once pruned).
    pub hash: String,
    /// The entry's `signed_by` (for key rotation warnings).
    pub signed_by: String,
    /// Who may see this version: what its own `access_control` said when it
    /// was appended (`privacy`).
    #[serde(default)]
    pub access: Access,
}

/// An accepted write, about to become an entry.
#[cfg(feature = "core-full")]
#[derive(Debug, Clone, Copy)]
pub struct NewVersion<'a> {
    /// The writing agent (64 lowercase hex).
    pub agent_id: &'a str,
    /// The write's `seq`.
    pub seq: u64,
    /// The accepted capsule's cursor.
    pub cursor: &'a str,
    /// The cursor it replaces (`None` for the agent's first write).
    pub prev_cursor: Option<&'a str>,
    /// The accepted capsule.
    pub capsule: &'a Json,
    /// The agent's public key, lowercase hex, as sent.
    pub public_key: &'a str,
    /// The agent's signature, lowercase hex, as sent.
    pub signature: &'a str,
    /// When the service accepted the write (ms since the epoch).
    pub accepted_at_ms: u64,
    /// What the write check already established about this version
    /// (`None`: the report measures everything itself).
    pub checked: Option<&'a WriteChecked>,
    /// The agent's key log, when it has one (who signs where, which
    /// versions are disputed; `None`: the genesis key signs everything).
    pub keys: Option<&'a dyn AgentKeys>,
}

#[cfg(feature = "core-full")]
/// The result of [`append`].
#[derive(Debug, Clone)]
pub struct Appended {
    /// The new sealed entry.
    pub entry: Entry,
    /// The index after the append (new head, pruned items, fresh report).
    pub index: HistoryIndex,
    /// `sequence`s of entries that fell out of the retained window.
    pub pruned: Vec<u64>,
}

/// Appends one sealed entry after `prev` (None: genesis), prunes to
/// `retained` entries (at least 1) and verifies the new entry against the
/// chain head with the same checks an offline verifier runs (the schema,
/// safety and agent-signature results taken from `v.checked` when it
/// covers this version: the write check ran them on the same bytes). Pruning keeps
/// the first retained entry's `previous_hash` in the sealed head, so the
/// window still verifies.
#[cfg(feature = "core-full")]
pub fn append(
    prev: Option<HistoryIndex>,
    v: NewVersion<'_>,
    key: &ServiceKey,
    keyring: &Keyring,
    retained: u32,
    total_writes: u64,
) -> Appended {
    let old_key_events = prev.as_ref().map_or(0, |p| p.key_events);
    let (mut items, old_head, old_checks, mut audiences, mut pruned_cursors) = match prev {
        Some(p) => (
            p.items,
            Some(p.head),
            p.report.checks,
            p.audiences,
            p.pruned_cursors,
        ),
        None => (
            Vec::new(),
            None,
            Checks::default(),
            Vec::new(),
            PrunedCursors::default(),
        ),
    };
    let sequence = old_head.as_ref().map_or(0, |h| h.length);
    let body = EntryFields {
        sequence,
        previous_hash: old_head.as_ref().map(|h| h.head_hash.clone()),
        agent_id: v.agent_id.to_owned(),
        seq: v.seq,
        cursor: v.cursor.to_owned(),
        prev_cursor: v.prev_cursor.map(str::to_owned),
        capsule: v.capsule.clone(),
        public_key: v.public_key.to_owned(),
        signature: v.signature.to_owned(),
        accepted_at: rfc3339(v.accepted_at_ms),
    };
    // What `Sealed::new` does, spelled out to keep the canonical bytes: the
    // check below needs them, and canonicalising a capsule is not free.
    let canonical = body.canonical();
    let entry = Entry {
        seal: Seal::make(key, canonical.as_bytes()),
        body,
    };

    items.push(IndexItem {
        sequence,
        seq: entry.seq,
        cursor: entry.cursor.clone(),
        prev_cursor: entry.prev_cursor.clone(),
        hash: entry.seal.hash.clone(),
        signed_by: entry.seal.signed_by.clone(),
        access: privacy::record_access(v.capsule, &mut audiences),
    });
    let keep = retained.max(1) as usize;
    let excess = items.len().saturating_sub(keep);
    let dropped: Vec<IndexItem> = items.drain(..excess).collect();
    let pruned: Vec<u64> = dropped.iter().map(|i| i.sequence).collect();
    // Anything but a version known to be public is remembered as private.
    pruned_cursors.push(&dropped, |i| i.access != Access::Public);
    privacy::compact_audiences(&mut items, &mut audiences);
    let first_previous_hash = match dropped.last() {
        Some(d) => Some(d.hash.clone()),
        None => old_head
            .as_ref()
            .and_then(|h| h.first_previous_hash.clone()),
    };
    let first_sequence = items[0].sequence;

    let head = ChainHead::new(
        HeadFields {
            agent_id: v.agent_id.to_owned(),
            length: sequence + 1,
            head_hash: entry.seal.hash.clone(),
            seq: entry.seq,
            cursor: entry.cursor.clone(),
            first_sequence,
            first_previous_hash,
        },
        key,
    );

    // The report: earlier entries' results (each measured when it was
    // appended) for those still retained, plus this entry's.
    let mut checks = old_checks;
    for c in super::CheckName::ALL {
        let check = checks.get_mut(c);
        check
            .failures
            .retain(|f| f.sequence.is_some_and(|s| s >= first_sequence));
        check.ok = check.failures.is_empty();
    }
    // The newest undisputed version before this one: after a thief's
    // versions the owner's seq continues from it (§14).
    let good_seq = v.keys.and_then(|k| {
        items[..items.len() - 1]
            .iter()
            .rev()
            .find(|i| !k.disputed(i.sequence, i.seq))
            .map(|i| i.seq)
    });
    let mut ver = Verifier::with_checks(v.agent_id, keyring, checks).with_keys(v.keys, good_seq);
    let link = match &old_head {
        Some(h) => Prev::Entry {
            sequence: h.length - 1,
            hash: &h.head_hash,
            seq: h.seq,
            cursor: &h.cursor,
        },
        None => Prev::Start {
            sequence: 0,
            previous_hash: None,
        },
    };
    ver.entry_checked(&entry, canonical.as_bytes(), link, v.checked);
    for c in super::CheckName::ALL {
        ver.checks.get_mut(c).checked = items.len() as u64;
    }
    let mut report = ver.report(
        Some(&head),
        Some(&entry),
        items.len() as u64,
        Some(first_sequence),
        Vec::new(),
        Some(v.accepted_at_ms),
    );
    // Rotation warnings need every retained entry's signer, not just this one.
    if let Some(current) = &keyring.current {
        let mut retired: Vec<(&str, u64)> = Vec::new();
        for it in &items {
            if it.signed_by != *current {
                match retired.iter_mut().find(|(fp, _)| *fp == it.signed_by) {
                    Some((_, n)) => *n += 1,
                    None => retired.push((&it.signed_by, 1)),
                }
            }
        }
        for (fp, n) in retired {
            report
                .warnings
                .push(format!("{n} entries are sealed by the retired key {fp}"));
        }
    }

    Appended {
        index: HistoryIndex {
            agent_id: v.agent_id.to_owned(),
            head,
            total_writes,
            retained_limit: retained,
            items,
            report,
            audiences,
            pruned_cursors,
            key_events: v.keys.map_or(0, |_| old_key_events),
        },
        entry,
        pruned,
    }
}

/// A parsed history.json query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Only versions newer than the newest retained entry with this cursor.
    pub since: Option<String>,
    /// Only versions with `sequence` greater than this (what `next` uses).
    pub after: Option<u64>,
    /// Only versions with `sequence` less than this (paging backwards).
    pub before: Option<u64>,
    /// Page size, 1..=[`MAX_LIMIT`].
    pub limit: usize,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            since: None,
            after: None,
            before: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// Why a query cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Malformed or contradictory parameters (400 `bad_query`).
    Bad(String),
    /// `since`/`after` names nothing retained (410 `cursor_not_found`).
    CursorNotFound,
}

impl Query {
    /// From the URL's query pairs. Unknown parameters are ignored; a known
    /// one given twice, malformed, or combined with its opposite is refused.
    pub fn parse<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Query, QueryError> {
        let mut q = Query::default();
        let mut seen: Vec<String> = Vec::new();
        let bad = |m: String| Err(QueryError::Bad(m));
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if !["since", "after", "before", "limit"].contains(&k) {
                continue;
            }
            if seen.iter().any(|s| s == k) {
                return bad(format!("{k} is given twice"));
            }
            seen.push(k.to_owned());
            let number = |what: &str| -> Result<u64, QueryError> {
                match v.parse::<u64>() {
                    Ok(n) if v.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
                    _ => Err(QueryError::Bad(format!(
                        "{what} must be a non-negative integer"
                    ))),
                }
            };
            match k {
                "since" => match normalize_cursor(v) {
                    Some(c) => q.since = Some(c),
                    None => return bad("since must be a cursor (sha256:<64 hex>)".into()),
                },
                "after" => q.after = Some(number("after")?),
                "before" => q.before = Some(number("before")?),
                _ => {
                    let n = number("limit")?;
                    if n == 0 || n > MAX_LIMIT as u64 {
                        return bad(format!("limit must be 1..{MAX_LIMIT}"));
                    }
                    q.limit = n as usize;
                }
            }
        }
        if q.since.is_some() && q.after.is_some() {
            return bad("since and after cannot be combined".into());
        }
        if q.before.is_some() && (q.since.is_some() || q.after.is_some()) {
            return bad("before pages backwards; it cannot be combined with since or after".into());
        }
        Ok(q)
    }
}

/// Which retained entries a query returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `sequence`s, newest first.
    pub sequences: Vec<u64>,
    /// The query string of the next page (without `?`), if there is one.
    pub next: Option<String>,
    /// Forward queries (`since`/`after`) only: nothing newer exists.
    pub up_to_date: Option<bool>,
    /// `since` named a pruned version: how many versions newer than it were
    /// pruned too (not in this answer, gone for good).
    pub pruned_since: Option<u64>,
    /// `seq` of the oldest retained version this viewer may see (a withheld
    /// version's seq is not shown, not even here).
    pub oldest_seen_seq: Option<u64>,
}

impl HistoryIndex {
    /// The entity tag of history.json, verify.json and export.json: the
    /// chain's head hash, and for an agent with a key log `-k` and its
    /// length (unchanged for every other agent).
    pub fn etag(&self) -> String {
        match self.key_events {
            0 => self.head.head_hash.clone(),
            n => format!("{}-k{n}", self.head.head_hash),
        }
    }

    /// Lists in the report the retained versions `keys` disputes (§14):
    /// after every append and every key event, so verify.json names them.
    #[cfg(feature = "core-full")]
    pub fn mark_disputed(&mut self, keys: &dyn AgentKeys, key_events: u64) {
        self.key_events = key_events;
        self.report.disputed = self
            .items
            .iter()
            .filter(|i| keys.disputed(i.sequence, i.seq))
            .map(|i| i.sequence)
            .collect();
    }

    /// The newest retained entry with this cursor (a republished capsule has
    /// the same cursor as before; the newest one is the state's latest).
    pub fn find_cursor(&self, cursor: &str) -> Option<&IndexItem> {
        self.items.iter().rev().find(|i| i.cursor == cursor)
    }

    /// Entries dropped so far (= the first retained entry's `sequence`).
    pub fn pruned(&self) -> u64 {
        self.head.first_sequence
    }

    /// Whether `viewer` may know this version's cursor: it sees the version.
    /// One appended before access was recorded counts only once recorded
    /// ([`HistoryIndex::record_unrecorded`] with its entry, as the Worker
    /// does for the ones a `since` names): unknown fails closed.
    fn knows(&self, item: &IndexItem, viewer: &Viewer<'_>) -> bool {
        viewer.sees(item.access, &self.audiences).unwrap_or(false)
    }

    /// The `sequence`s of unrecorded items a `since` of `cursor` could match
    /// (its own cursor, or its `prev_cursor`): what to record from their
    /// entries before selecting.
    pub fn unrecorded_matching(&self, cursor: &str) -> Vec<u64> {
        self.items
            .iter()
            .filter(|i| i.access == Access::Unrecorded)
            .filter(|i| i.cursor == cursor || i.prev_cursor.as_deref() == Some(cursor))
            .map(|i| i.sequence)
            .collect()
    }

    /// Whether the newest version is one this viewer may not see (the
    /// Worker's check of the current record can lag the index by KV's
    /// propagation: the head, the report and the export describe the newest
    /// version, so such a reader gets the miss of an agent that never
    /// published instead). Unrecorded: not known to be hidden.
    pub fn newest_hidden_from(&self, viewer: &Viewer<'_>) -> bool {
        self.items
            .last()
            .is_some_and(|i| viewer.sees(i.access, &self.audiences) == Some(false))
    }

    /// Where `since` points for `viewer`: the `sequence` versions newer than
    /// it start after, and how many newer ones were pruned. A cursor counts
    /// only where this viewer could have learnt it: a version it sees, or the
    /// `prev_cursor` of one; then a pruned version (one written private only
    /// for its owner). Anything else is as unknown as a cursor never published.
    fn since_point(&self, cursor: &str, viewer: &Viewer<'_>) -> Option<(u64, Option<u64>)> {
        let first = self.items.first().map_or(0, |i| i.sequence);
        if let Some(i) = self.find_cursor(cursor) {
            // Same cursor, same capsule, same audience: the newest decides.
            if self.knows(i, viewer) {
                return Some((i.sequence, None));
            }
        }
        if let Some(i) = self
            .items
            .iter()
            .rev()
            .find(|i| i.prev_cursor.as_deref() == Some(cursor) && self.knows(i, viewer))
        {
            return Some((i.sequence.wrapping_sub(1), None));
        }
        let p = self.pruned_cursors.find(cursor)?;
        if p.private && !viewer.is_owner() {
            return None;
        }
        // Everything retained is newer; what lies between was pruned.
        let missed = first.saturating_sub(p.sequence + 1);
        Some((first.wrapping_sub(1), Some(missed)))
    }

    /// The page `q` asks for `viewer`: newest first, with the query of the
    /// next page.
    pub fn select(&self, q: &Query, viewer: &Viewer<'_>) -> Result<Selection, QueryError> {
        let limit = q.limit.clamp(1, MAX_LIMIT);
        let oldest_seen_seq = self
            .items
            .iter()
            .find(|i| viewer.sees(i.access, &self.audiences) == Some(true))
            .map(|i| i.seq);
        let first = self.items.first().map_or(0, |i| i.sequence);
        let last = self.items.last().map(|i| i.sequence);
        let mut pruned_since = None;
        // Forward: from just after a known point, oldest first, so a client
        // following `next` sees every version exactly once.
        let from = if let Some(c) = &q.since {
            let (from, missed) = self
                .since_point(c, viewer)
                .ok_or(QueryError::CursorNotFound)?;
            pruned_since = missed;
            Some(from)
        } else if let Some(a) = q.after {
            // A gap (entries after `a` were pruned) or a sequence never
            // reached cannot be answered faithfully.
            if a.checked_add(1).is_none_or(|n| n < first) || last.is_none_or(|l| a > l) {
                return Err(QueryError::CursorNotFound);
            }
            Some(a)
        } else {
            None
        };
        if let Some(from) = from {
            let newer: Vec<&IndexItem> = self
                .items
                .iter()
                .filter(|i| from == u64::MAX || i.sequence > from)
                .collect();
            let page = &newer[..newer.len().min(limit)];
            let next = (newer.len() > page.len()).then(|| {
                format!(
                    "after={}&limit={limit}",
                    page.last().expect("non-empty").sequence
                )
            });
            return Ok(Selection {
                sequences: page.iter().rev().map(|i| i.sequence).collect(),
                next,
                up_to_date: Some(newer.is_empty()),
                pruned_since,
                oldest_seen_seq,
            });
        }
        // Backward (default): the newest first, older pages via `before`.
        let older: Vec<&IndexItem> = self
            .items
            .iter()
            .filter(|i| q.before.is_none_or(|b| i.sequence < b))
            .collect();
        let page = &older[older.len().saturating_sub(limit)..];
        let next = (older.len() > page.len())
            .then(|| format!("before={}&limit={limit}", page[0].sequence));
        Ok(Selection {
            sequences: page.iter().rev().map(|i| i.sequence).collect(),
            next,
            up_to_date: None,
            pruned_since: None,
            oldest_seen_seq,
        })
    }

    /// The retained item at `sequence` and the `hash` before it.
    fn item_at(&self, sequence: u64) -> Option<(&IndexItem, Option<&str>)> {
        let pos = self.items.iter().position(|i| i.sequence == sequence)?;
        let before = match pos {
            0 => self.head.first_previous_hash.as_deref(),
            p => Some(self.items[p - 1].hash.as_str()),
        };
        Some((&self.items[pos], before))
    }

    /// Whether `viewer` sees the version at `sequence`, stored as `stored`.
    pub fn sees(&self, sequence: u64, stored: &str, viewer: &Viewer<'_>) -> bool {
        self.item_at(sequence)
            .is_some_and(|(it, _)| viewer.sees_item(it.access, &self.audiences, stored))
    }

    /// `stored` (the entry at `sequence`) as `viewer` may have it: as it is,
    /// or withheld. `None` when it cannot be shown either way (not retained,
    /// or a stored text without its seal).
    pub fn shown(&self, sequence: u64, stored: String, viewer: &Viewer<'_>) -> Option<String> {
        let (it, before) = self.item_at(sequence)?;
        if viewer.sees_item(it.access, &self.audiences, &stored) {
            Some(stored)
        } else {
            serde_json::to_string(&privacy::Withheld::of_stored(sequence, before, &stored)?).ok()
        }
    }

    /// Records the access of items appended before it was recorded, from
    /// their stored texts (`sequence`, text); unreadable ones stay unrecorded.
    pub fn record_unrecorded(&mut self, stored: &[(u64, String)]) {
        for (sequence, text) in stored {
            let Some(pos) = self.items.iter().position(|i| i.sequence == *sequence) else {
                continue;
            };
            if self.items[pos].access != Access::Unrecorded {
                continue;
            }
            if let Some(audience) = privacy::audience_of_stored(text) {
                self.items[pos].access = privacy::access_of(audience, &mut self.audiences);
            }
        }
    }

    /// Whether verify.json's report may be given to `viewer` without
    /// reading the newest entry: the report describes the newest version,
    /// so that version must grant the viewer `READ_VERIFY` (§12). It does
    /// when the viewer is the owner, when it was written public, or when it
    /// is the version whose record the viewer was admitted by
    /// (`admitted_cursor`: the record's cursor; KV can lag either way).
    /// `false`: decide from the newest entry ([`Viewer::granted_by_entry`]).
    pub fn newest_verifiable_by(&self, viewer: &Viewer<'_>, admitted_cursor: &str) -> bool {
        let Some(newest) = self.items.last() else {
            return true;
        };
        viewer.is_owner() || newest.access == Access::Public || newest.cursor == admitted_cursor
    }

    /// verify.json's report as `viewer` may have it (§9, §12): the retained
    /// versions it may not see in history are withheld from the report as
    /// from an export (`Report::for_reader`); the newest is the version
    /// whose `READ_VERIFY` grant admitted the viewer, and is described.
    /// `stored`: the texts of the versions whose access was never recorded
    /// ([`HistoryIndex::unrecorded`]), by sequence; one missing is withheld.
    pub fn report_for(&self, viewer: &Viewer<'_>, stored: &[(u64, String)]) -> Report {
        let newest = self.items.last().map(|i| i.sequence);
        let withheld: Vec<u64> = self
            .items
            .iter()
            .filter(|i| Some(i.sequence) != newest)
            .filter(|i| match viewer.sees(i.access, &self.audiences) {
                Some(seen) => !seen,
                None => !stored
                    .iter()
                    .any(|(s, text)| *s == i.sequence && viewer.sees_entry(text)),
            })
            .map(|i| i.sequence)
            .collect();
        self.report.for_reader(&withheld)
    }

    /// The `sequence`s of retained items whose access was never recorded.
    pub fn unrecorded(&self) -> Vec<u64> {
        self.items
            .iter()
            .filter(|i| i.access == Access::Unrecorded)
            .map(|i| i.sequence)
            .collect()
    }

    /// The history.json body: the selected entries' stored JSON texts
    /// (`versions`, newest first, spliced in unparsed) and the summary.
    pub fn history_body(&self, sel: &Selection, versions: &[String]) -> String {
        #[derive(Serialize)]
        struct Meta<'a> {
            agent_id: &'a str,
            total_writes: u64,
            oldest_available_seq: Option<u64>,
            retained: usize,
            pruned: u64,
            chain_head: &'a ChainHead,
            #[serde(skip_serializing_if = "Option::is_none")]
            up_to_date: Option<bool>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pruned_since: Option<u64>,
            next: Option<String>,
        }
        let meta = Meta {
            agent_id: &self.agent_id,
            total_writes: self.total_writes,
            oldest_available_seq: sel.oldest_seen_seq,
            retained: self.items.len(),
            pruned: self.pruned(),
            chain_head: &self.head,
            up_to_date: sel.up_to_date,
            pruned_since: sel.pruned_since,
            next: sel
                .next
                .as_ref()
                .map(|q| format!("{}?{q}", history_url(&self.agent_id))),
        };
        let meta = serde_json::to_string(&meta).unwrap_or_else(|_| "{}".into());
        // `meta` starts with `{"agent_id":`; put versions right after agent_id.
        let split = meta.find(",\"total_writes\"").unwrap_or(meta.len() - 1);
        format!(
            "{},\"versions\":[{}]{}",
            &meta[..split],
            versions.join(","),
            &meta[split..]
        )
    }
}

/// Public path of an agent's history.
pub fn history_url(agent_id: &str) -> String {
    Doc::History.path(agent_id)
}
