//! The history as an auditor reads it (the Capsule Explorer's model): the
//! verify report of an export bundle, and beside it each bundle entry with
//! the checks that failed *at that entry*, so a page can put a badge on every
//! version and point at the one that broke.
//!
//! Verification itself is [`verify_export_with`], unchanged: this only sorts
//! its failures by where they were found.

use super::export::{read_item, verify_export_with, Item, VerifyOptions};
use super::privacy::Withheld;
use super::verify::{item_label, CheckName, Report};
use super::{ChainHead, Entry};
use crate::core::json::Json;
use crate::core::key_log::{Change, KeyEvent, LastGood, SealedKeyRecord};
use serde::Serialize;

/// One failed check, where the timeline shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flag {
    /// Which check failed.
    pub check: CheckName,
    /// What it found.
    pub detail: String,
}

/// One item of the bundle's `entries`, in bundle order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// Index in the bundle's `entries` (0 = oldest retained).
    pub position: usize,
    /// The entry as the bundle states it (its claims, checked or not; the
    /// capsule of that version), or `None` when it is withheld or cannot be
    /// read at all.
    pub entry: Option<Entry>,
    /// The version withheld from this reader (written private): its place
    /// and seal only. Not a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld: Option<Withheld>,
    /// Every check that failed at this entry; empty: all five pass here.
    pub failures: Vec<Flag>,
    /// Written by a key its owner rotated out after its last good write
    /// (docs/PROTOCOL.md §14): it verifies, and it is not the owner's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disputed: bool,
}

impl TimelineEntry {
    /// Every check passed at this entry.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// The `sequence` the item states, if it can be read.
    pub fn sequence(&self) -> Option<u64> {
        self.entry
            .as_ref()
            .map(|e| e.sequence)
            .or(self.withheld.as_ref().map(|w| w.sequence))
    }
}

/// An export bundle, verified and laid out for reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// The whole verify report, exactly as `selfcap verify` prints it.
    pub report: Report,
    /// The bundle's chain head, when it can be read.
    pub head: Option<ChainHead>,
    /// The bundle's entries, oldest first.
    pub entries: Vec<TimelineEntry>,
    /// Failures at no single entry: the head, the bundle's own fields.
    pub general: Vec<Flag>,
    /// The agent's key log as the bundle carries it, oldest first (empty:
    /// none, or unreadable; the report says which).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key_log: Vec<KeyLogRow>,
}

/// One key event, as an auditor reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLogRow {
    /// Its index in the log.
    pub index: u64,
    /// `inception`, `rotation` or `recommit`.
    pub kind: &'static str,
    /// Which key spoke: `genesis`, `next`, `recovery` or `current`.
    pub authority: &'static str,
    /// The agent's key after it.
    pub public_key: String,
    /// When the service accepted it.
    pub accepted_at: String,
    /// The first chain position the key it made current may sign.
    pub history_sequence: u64,
    /// A disputing rotation's owner's last good write: `{seq, cursor}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disputes_after: Option<LastGood>,
}

/// The rows of a bundle's `key_log`, as far as they can be read.
fn key_log_rows(bundle: &Json) -> Vec<KeyLogRow> {
    let records = bundle
        .get("key_log")
        .and_then(Json::as_array)
        .unwrap_or(&[]);
    records
        .iter()
        .map_while(|r| {
            let record = SealedKeyRecord::from_json(r).ok()?;
            let event = KeyEvent::from_json(&record.event).ok()?;
            let disputes_after = match &event.change {
                Change::Rotation { disputes_after, .. } => disputes_after.clone(),
                _ => None,
            };
            Some(KeyLogRow {
                index: event.index,
                kind: event.kind(),
                authority: event.authority(),
                public_key: event.public_key.to_hex(),
                accepted_at: record.accepted_at.clone(),
                history_sequence: record.history_sequence,
                disputes_after,
            })
        })
        .collect()
}

/// Verifies `bundle` and attributes every failure: to the entries with its
/// `sequence`, to an unreadable entry by its position, or to `general`.
pub fn timeline(bundle: &Json, opts: &VerifyOptions) -> Timeline {
    let report = verify_export_with(bundle, opts);
    let items: &[Json] = bundle
        .get("entries")
        .and_then(Json::as_array)
        .unwrap_or(&[]);
    let mut entries: Vec<TimelineEntry> = items
        .iter()
        .enumerate()
        .map(|(position, item)| {
            let (entry, withheld) = match read_item(item) {
                Ok(Item::Entry(e, _)) => (Some(*e), None),
                Ok(Item::Withheld(w)) => (None, Some(w)),
                Err(_) => (None, None),
            };
            let sequence = entry
                .as_ref()
                .map(|e| e.sequence)
                .or(withheld.as_ref().map(|w| w.sequence));
            TimelineEntry {
                position,
                disputed: sequence.is_some_and(|s| report.disputed.contains(&s)),
                entry,
                withheld,
                failures: Vec::new(),
            }
        })
        .collect();
    let mut general = Vec::new();
    for check in CheckName::ALL {
        for f in &report.checks.get(check).failures {
            let flag = Flag {
                check,
                detail: f.detail.clone(),
            };
            let at: Vec<usize> = match f.sequence {
                Some(s) => entries
                    .iter()
                    .filter(|t| t.sequence() == Some(s))
                    .map(|t| t.position)
                    .collect(),
                // The verifier names an unreadable item by its position.
                None => entries
                    .iter()
                    .filter(|t| {
                        t.sequence().is_none() && f.detail.starts_with(&item_label(t.position))
                    })
                    .map(|t| t.position)
                    .collect(),
            };
            if at.is_empty() {
                general.push(flag);
            } else {
                for i in at {
                    entries[i].failures.push(flag.clone());
                }
            }
        }
    }
    let head = bundle
        .get("head")
        .and_then(|h| ChainHead::from_json(h).ok());
    Timeline {
        report,
        head,
        entries,
        general,
        key_log: key_log_rows(bundle),
    }
}
