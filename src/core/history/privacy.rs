//! Who sees which retained version, and what the others see instead.
//!
//! A version written private stays private for its whole life, on every
//! history path, whatever later versions say (docs/PROTOCOL.md §9, §12): the
//! index records, when a version is appended, the audience its own
//! `access_control` gave `READ_HISTORY` ([`Access`]), and every history read
//! asks [`Viewer::sees`] per version. A version the viewer may not see is
//! **withheld**: its position, hashes and seal stay ([`Withheld`]), so the
//! chain still verifies around it, and nothing of its content, cursor, seq or
//! time is shown.
//!
//! The index also remembers the cursors of pruned versions
//! ([`PrunedCursors`]), so `?since=` with a cursor the agent really published
//! is answered after its version is gone.

use super::{canonical_of_stored, IndexItem, Malformed, Seal};
use crate::core::access::Audience;
use crate::core::crypto::is_lower_hex;
use crate::core::json::{self, Json};
use crate::core::model::ReadScope;
use serde::{Deserialize, Serialize};

/// What the index recorded about who may read one retained version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "i64", into = "i64")]
pub enum Access {
    /// Appended before access was recorded: decided from the entry itself.
    #[default]
    Unrecorded,
    /// Written public: everyone who may read the history sees it.
    Public,
    /// Written private: the owner and this audience (an index into
    /// `HistoryIndex::audiences`) see it.
    Private(u32),
}

// On the wire (the index is stored and mirrored as JSON): -1 public, n >= 0
// an audience, anything else (and absent) unrecorded.
impl From<i64> for Access {
    fn from(n: i64) -> Access {
        match n {
            -1 => Access::Public,
            n => u32::try_from(n).map_or(Access::Unrecorded, Access::Private),
        }
    }
}

impl From<Access> for i64 {
    fn from(a: Access) -> i64 {
        match a {
            Access::Unrecorded => -2,
            Access::Public => -1,
            Access::Private(n) => i64::from(n),
        }
    }
}

/// Who is reading a history document, and when.
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    /// The agent whose history it is.
    pub owner: &'a str,
    /// The verified signer (`None`: unsigned).
    pub reader: Option<&'a str>,
    /// "Now" (grant expiry).
    pub now_ms: u64,
}

impl Viewer<'_> {
    /// Whether this viewer is the owner (who sees everything).
    pub fn is_owner(&self) -> bool {
        self.reader == Some(self.owner)
    }

    /// Whether this viewer sees a version of `access`; `None` when the index
    /// did not record it (ask [`Viewer::sees_entry`] with the entry).
    pub fn sees(&self, access: Access, audiences: &[Audience]) -> Option<bool> {
        match access {
            Access::Public => Some(true),
            _ if self.is_owner() => Some(true),
            // An audience index that names nothing fails closed.
            Access::Private(n) => Some(
                audiences
                    .get(n as usize)
                    .is_some_and(|a| a.admits(self.owner, self.reader, self.now_ms)),
            ),
            Access::Unrecorded => None,
        }
    }

    /// Whether this viewer sees the version stored as `stored` (an entry's
    /// stored text), decided from its own capsule. Anything unreadable is
    /// withheld.
    pub fn sees_entry(&self, stored: &str) -> bool {
        if self.is_owner() {
            return true;
        }
        audience_of_stored(stored).is_some_and(|a| match a {
            None => true,
            Some(a) => a.admits(self.owner, self.reader, self.now_ms),
        })
    }

    /// Whether the version stored as `stored` grants this viewer `scope`
    /// (its own `access_control`; the owner always). Unreadable: no.
    pub fn granted_by_entry(&self, stored: &str, scope: ReadScope) -> bool {
        self.is_owner()
            || scope_audience_of_stored(stored, scope).is_some_and(|a| match a {
                None => true,
                Some(a) => a.admits(self.owner, self.reader, self.now_ms),
            })
    }

    /// [`Viewer::sees`], falling back on the stored text.
    pub fn sees_item(&self, access: Access, audiences: &[Audience], stored: &str) -> bool {
        self.sees(access, audiences)
            .unwrap_or_else(|| self.sees_entry(stored))
    }
}

/// The `READ_HISTORY` audience of the capsule in a stored entry: `Some(None)`
/// public, `Some(Some(a))` private, `None` unreadable.
pub fn audience_of_stored(stored: &str) -> Option<Option<Audience>> {
    scope_audience_of_stored(stored, ReadScope::History)
}

/// [`audience_of_stored`] for any scope.
pub fn scope_audience_of_stored(stored: &str, scope: ReadScope) -> Option<Option<Audience>> {
    let (canonical, _) = canonical_of_stored(stored)?;
    let entry = json::parse_str(&canonical).ok()?;
    let capsule = entry.get("capsule")?;
    Some(Audience::of(capsule, scope))
}

/// The access to record for a version carrying `capsule`, adding its
/// audience to `audiences` unless an equal one is there already.
pub fn record_access(capsule: &Json, audiences: &mut Vec<Audience>) -> Access {
    access_of(Audience::of(capsule, ReadScope::History), audiences)
}

/// The access of a version with `audience` (`None`: public), sharing an
/// equal audience already in `audiences`.
pub fn access_of(audience: Option<Audience>, audiences: &mut Vec<Audience>) -> Access {
    match audience {
        None => Access::Public,
        Some(a) => {
            let at = match audiences.iter().position(|x| *x == a) {
                Some(i) => i,
                None => {
                    audiences.push(a);
                    audiences.len() - 1
                }
            };
            Access::Private(at as u32)
        }
    }
}

/// Drops the audiences no retained item names, renumbering the rest.
pub fn compact_audiences(items: &mut [IndexItem], audiences: &mut Vec<Audience>) {
    let mut used = vec![false; audiences.len()];
    for it in items.iter() {
        if let Access::Private(n) = it.access {
            if let Some(u) = used.get_mut(n as usize) {
                *u = true;
            }
        }
    }
    let mut renumber = vec![None; audiences.len()];
    let mut kept = Vec::new();
    for (i, a) in std::mem::take(audiences).into_iter().enumerate() {
        if used[i] {
            renumber[i] = Some(kept.len() as u32);
            kept.push(a);
        }
    }
    for it in items.iter_mut() {
        if let Access::Private(n) = it.access {
            it.access = renumber
                .get(n as usize)
                .copied()
                .flatten()
                .map_or(Access::Unrecorded, Access::Private);
        }
    }
    *audiences = kept;
}

/// A version in its withheld form (what a viewer who may not see it gets in
/// its place): its position, the hash before it, its hash and the service's
/// seal over that hash. On the wire: `{"sequence", "withheld": true,
/// "previous_hash", "hash", "service_signature", "signed_by"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// The entry's `sequence`.
    pub sequence: u64,
    /// The `hash` of the entry before it (`None` at genesis).
    pub previous_hash: Option<String>,
    /// The entry's own seal (its `hash` and the service's signature of it).
    pub seal: Seal,
}

impl Serialize for Withheld {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Withheld", 6)?;
        st.serialize_field("sequence", &self.sequence)?;
        st.serialize_field("withheld", &true)?;
        st.serialize_field("previous_hash", &self.previous_hash)?;
        st.serialize_field("hash", &self.seal.hash)?;
        st.serialize_field("service_signature", &self.seal.service_signature)?;
        st.serialize_field("signed_by", &self.seal.signed_by)?;
        st.end()
    }
}

impl Withheld {
    /// The withheld form of the entry stored as `stored` at `sequence`, after
    /// the entry whose hash is `previous_hash` (the head's
    /// `first_previous_hash` for the first retained one). `None` if the
    /// stored text has no seal.
    pub fn of_stored(sequence: u64, previous_hash: Option<&str>, stored: &str) -> Option<Withheld> {
        let (_, seal) = canonical_of_stored(stored)?;
        Some(Withheld {
            sequence,
            previous_hash: previous_hash.map(str::to_owned),
            seal,
        })
    }

    /// Reads one from untrusted JSON (a bundle item or a history version
    /// that says `"withheld": true`).
    pub fn from_json(v: &Json) -> Result<Withheld, Malformed> {
        const FIELDS: [&str; 6] = [
            "sequence",
            "withheld",
            "previous_hash",
            "hash",
            "service_signature",
            "signed_by",
        ];
        let bad = |m: &str| Malformed(format!("withheld entry: {m}"));
        let o = v.as_object().ok_or_else(|| bad("not an object"))?;
        if let Some((k, _)) = o.iter().find(|(k, _)| !FIELDS.contains(&k.as_str())) {
            return Err(bad(&format!("unexpected member {k:?}")));
        }
        if v.get("withheld").and_then(Json::as_bool) != Some(true) {
            return Err(bad("withheld must be true"));
        }
        let sequence = v
            .get("sequence")
            .and_then(Json::as_safe_u64)
            .ok_or_else(|| bad("sequence must be a non-negative integer"))?;
        let hex = |k: &str, n: usize| -> Result<String, Malformed> {
            match v.get(k).and_then(Json::as_str) {
                Some(h) if is_lower_hex(h, n) => Ok(h.to_owned()),
                _ => Err(bad(&format!("{k} must be {n} lowercase hex characters"))),
            }
        };
        let previous_hash = match v.get("previous_hash") {
            None | Some(Json::Null) => None,
            Some(_) => Some(hex("previous_hash", 64)?),
        };
        Ok(Withheld {
            sequence,
            previous_hash,
            seal: Seal {
                hash: hex("hash", 64)?,
                service_signature: hex("service_signature", 128)?,
                signed_by: hex("signed_by", 16)?,
            },
        })
    }
}

/// Whether a bundle item or history version is a withheld one.
pub fn is_withheld(v: &Json) -> bool {
    v.get("withheld").is_some()
}

/// Most pruned cursors remembered per agent (the newest ones): `since` with
/// an older cursor than these is treated as pruned beyond recall (410).
pub const PRUNED_CURSORS_MAX: usize = 1024;
/// Hex digits of a cursor kept per pruned version (64 bits: a random
/// cursor matches one of [`PRUNED_CURSORS_MAX`] by chance about once in 10^16).
const PREFIX_HEX: usize = 16;
/// One record: the cursor's first [`PREFIX_HEX`] hex digits and `p`
/// (written public) or `x` (written private).
const RECORD: usize = PREFIX_HEX + 1;

/// The cursors of the newest pruned versions, oldest first: record `i` is
/// the version at `sequence` `first + i`. Compact on purpose (17 bytes a
/// version): it lives in the index every history read loads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedCursors {
    /// `sequence` of the first record.
    pub first: u64,
    /// The records, concatenated.
    pub records: String,
}

/// A pruned version `since` named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrunedVersion {
    /// Its `sequence`.
    pub sequence: u64,
    /// Whether it was written private.
    pub private: bool,
}

impl PrunedCursors {
    /// Records the versions `dropped` (oldest first, contiguous, following
    /// the last record), forgetting the oldest past [`PRUNED_CURSORS_MAX`].
    pub fn push(&mut self, dropped: &[IndexItem], private: impl Fn(&IndexItem) -> bool) {
        let Some(first_dropped) = dropped.first() else {
            return;
        };
        if self.records.is_empty() || self.first + self.len() as u64 != first_dropped.sequence {
            // Nothing yet, or a gap (an index from before this record was kept).
            self.records.clear();
            self.first = first_dropped.sequence;
        }
        for it in dropped {
            let hex = it.cursor.strip_prefix("sha256:").unwrap_or(&it.cursor);
            let prefix = hex.get(..PREFIX_HEX).unwrap_or("0000000000000000");
            self.records.push_str(prefix);
            self.records.push(if private(it) { 'x' } else { 'p' });
        }
        let excess = self.len().saturating_sub(PRUNED_CURSORS_MAX);
        if excess > 0 {
            self.records.drain(..excess * RECORD);
            self.first += excess as u64;
        }
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.records.len() / RECORD
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The newest pruned version with `cursor` (normalised `sha256:<hex>`).
    pub fn find(&self, cursor: &str) -> Option<PrunedVersion> {
        let hex = cursor.strip_prefix("sha256:").unwrap_or(cursor);
        let prefix = hex.get(..PREFIX_HEX)?;
        (0..self.len()).rev().find_map(|i| {
            let rec = self.records.get(i * RECORD..(i + 1) * RECORD)?;
            (&rec[..PREFIX_HEX] == prefix).then(|| PrunedVersion {
                sequence: self.first + i as u64,
                private: rec.ends_with('x'),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(sequence: u64, cursor_byte: char) -> IndexItem {
        IndexItem {
            sequence,
            seq: sequence + 1,
            cursor: format!("sha256:{}", cursor_byte.to_string().repeat(64)),
            prev_cursor: None,
            hash: "0".repeat(64),
            signed_by: "0".repeat(16),
            access: Access::Public,
        }
    }

    #[test]
    fn access_round_trips_and_anything_odd_is_unrecorded() {
        for a in [Access::Public, Access::Private(0), Access::Private(7)] {
            let s = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<Access>(&s).unwrap(), a);
        }
        assert_eq!(Access::from(-2), Access::Unrecorded);
        assert_eq!(Access::from(-9), Access::Unrecorded);
        assert_eq!(Access::from(i64::MAX), Access::Unrecorded);
        #[derive(Deserialize)]
        struct Old {
            #[serde(default)]
            access: Access,
        }
        let old: Old = serde_json::from_str("{}").unwrap();
        assert_eq!(old.access, Access::Unrecorded);
    }

    #[test]
    fn pruned_cursors_keep_the_newest_and_find_the_newest_match() {
        let mut p = PrunedCursors::default();
        p.push(&[item(0, 'a'), item(1, 'b')], |_| false);
        p.push(&[item(2, 'a')], |_| true);
        assert_eq!(p.len(), 3);
        let a = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            p.find(&a),
            Some(PrunedVersion {
                sequence: 2,
                private: true
            })
        );
        assert_eq!(
            p.find(&format!("sha256:{}", "b".repeat(64)))
                .unwrap()
                .sequence,
            1
        );
        assert_eq!(p.find(&format!("sha256:{}", "c".repeat(64))), None);
        // A gap starts the record afresh (an index from before it was kept).
        p.push(&[item(9, 'c')], |_| false);
        assert_eq!((p.first, p.len()), (9, 1));
        // Bounded: the oldest go first.
        let many: Vec<IndexItem> = (10..10 + PRUNED_CURSORS_MAX as u64 + 5)
            .map(|s| item(s, 'd'))
            .collect();
        p.push(&many, |_| false);
        assert_eq!(p.len(), PRUNED_CURSORS_MAX);
        assert_eq!(p.first, 9 + 6);
    }

    #[test]
    fn audiences_are_shared_and_compacted() {
        let capsule = |readers: &str| {
            json::parse_str(&format!(
                r#"{{"access_control":{{"public":false,"authorized_readers":[{readers}]}}}}"#
            ))
            .unwrap()
        };
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let mut audiences = Vec::new();
        let one = record_access(&capsule(&format!("\"{a}\"")), &mut audiences);
        let same = record_access(&capsule(&format!("\"{a}\"")), &mut audiences);
        let two = record_access(&capsule(&format!("\"{b}\"")), &mut audiences);
        let public = record_access(&json::parse_str("{}").unwrap(), &mut audiences);
        assert_eq!(
            (one, same, two, public),
            (
                Access::Private(0),
                Access::Private(0),
                Access::Private(1),
                Access::Public
            )
        );
        let mut items = vec![item(0, 'a'), item(1, 'b')];
        items[0].access = two;
        items[1].access = public;
        compact_audiences(&mut items, &mut audiences);
        assert_eq!(audiences.len(), 1);
        assert_eq!(items[0].access, Access::Private(0));
        assert_eq!(audiences[0].0[0].agent_id, b);
    }
}
