//! The KV mirror: what an agent's Durable Object must still make KV hold
//! after a commit, in which order, and how long to wait after a failure.
//!
//! KV is where every read comes from, and it is eventually consistent with
//! no transactions, so the order of the puts is the only guarantee readers
//! get. The ops run in [`Stage`]s, each waiting for the one before: the new
//! entries, then the index that names them together with the record
//! (head.json / capsule.json), then the deletes of pruned entries. A reader
//! therefore never finds an index naming an entry that is not there yet, nor
//! one naming a pruned entry that is already gone. Index and record have no
//! order between them a reader could rely on (another location caches each
//! key on its own for up to 60 s anyway), so they share a round trip.
//!
//! A pruned entry's delete only has to wait for the index that stops naming
//! it. So a write ([`Pass::Commit`]) does not wait for its own deletes: once
//! its index has landed they are marked *unnamed* and kept, and the object's
//! next wake runs them: its alarm, which sends the write's counts to the
//! stats shard within a minute (`core::operator::stats`), or the agent's next
//! write, alongside its entry put, in a round trip it makes anyway. A write is
//! thus answered after two KV round trips, with its entry, index and record
//! in KV. Deletes still pending [`CLEANUP_AFTER_MS`] after the last write are
//! run by the alarm regardless, so an agent that stops writing leaves nothing
//! behind for long.
//!
//! The pending ops are stored with the state in the same atomic commit, so a
//! failed or interrupted sync loses nothing: the alarm retries what is left
//! ([`Pass::Retry`], every stage in order).

use crate::core::crypto::AgentId;
use crate::core::record::{
    entry_kv_key, history_kv_key, key_log_kv_key, kv_key, meta_kv_key, ENTRY_KV_PREFIX,
    KEY_LOG_KV_PREFIX, META_KV_PREFIX, RECORD_KV_PREFIX,
};
use serde::{Deserialize, Serialize};

/// First retry delay for a failed sync; doubles per failure up to the cap.
pub const RETRY_BASE_MS: u64 = 1_000;
/// Longest wait between two sync attempts.
pub const RETRY_CAP_MS: u64 = 5 * 60 * 1_000;
/// How long unnamed deletes may wait for the object's next wake (its stats
/// alarm, the agent's next write) before an alarm of their own runs them.
pub const CLEANUP_AFTER_MS: u64 = 24 * 60 * 60 * 1_000;

/// What KV must still be made to hold, in order. Ops of a later commit
/// supersede pending ops on the same key, so nothing a failed sync left
/// behind is lost and nothing stale is replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirror {
    /// Pending ops, oldest first.
    pub ops: Vec<MirrorOp>,
    /// Consecutive failed attempts, for the retry backoff.
    #[serde(default)]
    pub failures: u32,
}

/// One KV op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorOp {
    /// The KV key.
    pub key: String,
    /// The exact text to put; `None`: delete the key.
    pub value: Option<String>,
    /// The KV metadata put with it (JSON text; the meta record's list
    /// entry, which the operator's list of agents reads without values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// A delete no index in KV names any more (see the module comment).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unnamed: bool,
}

/// The texts one accepted write publishes.
pub struct Commit<'a> {
    /// The agent.
    pub agent: &'a AgentId,
    /// The new entry's chain position.
    pub sequence: u64,
    /// The entry's stored text.
    pub entry: &'a str,
    /// The history index text.
    pub index: &'a str,
    /// The published record text.
    pub record: &'a str,
    /// Chain positions pruned by this write.
    pub pruned: &'a [u64],
}

impl Mirror {
    /// Adds one commit's ops after whatever is still pending (a fresh commit
    /// also starts the failure count over).
    pub fn push_commit(&mut self, c: &Commit<'_>) {
        self.failures = 0;
        self.push(entry_kv_key(c.agent, c.sequence), Some(c.entry));
        self.push(history_kv_key(c.agent), Some(c.index));
        self.push(kv_key(c.agent), Some(c.record));
        for p in c.pruned {
            self.push(entry_kv_key(c.agent, *p), None);
        }
    }

    /// Adds a key event's puts: the key log (keys.json), then, if the
    /// agent has published, the record whose head.json summarises it, and
    /// the history index when the event disputed versions (its report
    /// lists them).
    pub fn push_key_event(
        &mut self,
        agent: &AgentId,
        log: &str,
        record: Option<&str>,
        index: Option<&str>,
    ) {
        self.failures = 0;
        self.push(key_log_kv_key(agent), Some(log));
        if let Some(index) = index {
            self.push(history_kv_key(agent), Some(index));
        }
        if let Some(record) = record {
            self.push(kv_key(agent), Some(record));
        }
    }

    /// Adds a put of the key log alone (before a commit that carries the
    /// rest: an event with its envelope).
    pub fn push_key_log(&mut self, agent: &AgentId, log: &str) {
        self.push(key_log_kv_key(agent), Some(log));
    }

    /// Adds a put of the published record alone (a change that is not a
    /// write, such as a credited upgrade, which head.json must show).
    pub fn push_record(&mut self, agent: &AgentId, record: &str) {
        self.failures = 0;
        self.push(kv_key(agent), Some(record));
    }

    /// Adds a put of the agent's meta record (`text`) with its list entry
    /// as the key's metadata (`metadata`). It lands with the heads, and a
    /// newer one replaces one still pending.
    pub fn push_meta(&mut self, agent: &AgentId, text: &str, metadata: &str) {
        self.push(meta_kv_key(agent), Some(text));
        if let Some(op) = self.ops.last_mut() {
            op.metadata = Some(metadata.to_owned());
        }
    }

    /// Whether a meta record put is pending (its alarm is then armed).
    pub fn meta_pending(&self) -> bool {
        self.ops.iter().any(|o| o.key.starts_with(META_KV_PREFIX))
    }

    fn push(&mut self, key: String, value: Option<&str>) {
        self.ops.retain(|o| o.key != key);
        self.ops.push(MirrorOp {
            key,
            value: value.map(str::to_owned),
            metadata: None,
            unnamed: false,
        });
    }

    /// Records that every pending index put has landed (a sync with no
    /// failure): the deletes still pending are named by no index any more.
    pub fn heads_landed(&mut self) {
        for op in self.ops.iter_mut().filter(|o| o.value.is_none()) {
            op.unnamed = true;
        }
    }

    /// The pending ops as stages to run in order: the indices into `ops` of
    /// each non-empty [`Stage`] that `pass` runs, in the order they were
    /// pushed. The ops of one stage may run concurrently; a stage starts
    /// only once every op of the one before has landed.
    pub fn stages(&self, pass: Pass) -> Vec<Vec<usize>> {
        Stage::ALL
            .iter()
            .filter(|stage| pass == Pass::Retry || **stage != Stage::Deletes)
            .map(|stage| {
                (0..self.ops.len())
                    .filter(|&i| self.ops[i].stage() == *stage)
                    .collect::<Vec<_>>()
            })
            .filter(|ops| !ops.is_empty())
            .collect()
    }

    /// Drops the ops that landed (`landed[i]` for `ops[i]`; missing flags
    /// count as not landed).
    pub fn drop_landed(&mut self, landed: &[bool]) {
        let mut i = 0;
        self.ops.retain(|_| {
            let keep = !landed.get(i).copied().unwrap_or(false);
            i += 1;
            keep
        });
    }

    /// Counts a failed sync and returns the delay before the next try.
    pub fn failed(&mut self) -> u64 {
        self.failures = self.failures.saturating_add(1);
        RETRY_BASE_MS
            .saturating_mul(1u64 << self.failures.min(16))
            .min(RETRY_CAP_MS)
    }
}

/// Which sync this is (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Right after a commit, before the write is answered: its puts, and
    /// the deletes earlier writes left unnamed; its own deletes wait.
    Commit,
    /// The alarm: everything still pending.
    Retry,
}

/// When an op may run, relative to the others (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Puts of history entries (nothing names them until the index does),
    /// and unnamed deletes.
    Entries,
    /// Puts of the index and the record.
    Heads,
    /// Deletes (pruned entries): only once no index put still names them.
    Deletes,
}

impl Stage {
    /// In the order they run.
    pub const ALL: [Stage; 3] = [Stage::Entries, Stage::Heads, Stage::Deletes];
}

impl MirrorOp {
    /// The put of an agent's published record (head.json, capsule.json):
    /// its text, once it has landed, is what watchers are sent.
    pub fn record_put(&self) -> Option<&str> {
        self.value
            .as_deref()
            .filter(|_| self.key.starts_with(RECORD_KV_PREFIX))
    }

    /// The stage this op runs in.
    pub fn stage(&self) -> Stage {
        match &self.value {
            None if self.unnamed => Stage::Entries,
            None => Stage::Deletes,
            // The key log lands before the record whose head.json names
            // its length, as an entry lands before the index naming it.
            Some(_) if self.key.starts_with(ENTRY_KV_PREFIX) => Stage::Entries,
            Some(_) if self.key.starts_with(KEY_LOG_KV_PREFIX) => Stage::Entries,
            Some(_) => Stage::Heads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentId {
        AgentId::parse(&"ab".repeat(32)).unwrap()
    }

    fn keys(m: &Mirror) -> Vec<(String, bool)> {
        m.ops
            .iter()
            .map(|o| (o.key.clone(), o.value.is_some()))
            .collect()
    }

    #[test]
    fn a_commit_puts_entry_then_index_then_record_then_deletes_pruned() {
        let a = agent();
        let mut m = Mirror::default();
        m.push_commit(&Commit {
            agent: &a,
            sequence: 7,
            entry: "e7",
            index: "i7",
            record: "r7",
            pruned: &[2, 3],
        });
        assert_eq!(
            keys(&m),
            vec![
                (entry_kv_key(&a, 7), true),
                (history_kv_key(&a), true),
                (kv_key(&a), true),
                (entry_kv_key(&a, 2), false),
                (entry_kv_key(&a, 3), false),
            ]
        );
    }

    #[test]
    fn a_later_commit_supersedes_pending_ops_on_the_same_keys() {
        let a = agent();
        let mut m = Mirror::default();
        m.push_commit(&Commit {
            agent: &a,
            sequence: 1,
            entry: "e1",
            index: "i1",
            record: "r1",
            pruned: &[],
        });
        m.drop_landed(&[true]);
        assert_eq!(m.failed(), 2 * RETRY_BASE_MS);
        m.push_commit(&Commit {
            agent: &a,
            sequence: 2,
            entry: "e2",
            index: "i2",
            record: "r2",
            pruned: &[],
        });
        assert_eq!(m.failures, 0);
        let values: Vec<_> = m.ops.iter().map(|o| o.value.as_deref()).collect();
        assert_eq!(values, vec![Some("e2"), Some("i2"), Some("r2")]);
        assert_eq!(m.ops[0].key, entry_kv_key(&a, 2));
    }

    fn commit(m: &mut Mirror, a: &AgentId, sequence: u64, pruned: &[u64]) {
        m.push_commit(&Commit {
            agent: a,
            sequence,
            entry: "e",
            index: "i",
            record: "r",
            pruned,
        });
    }

    #[test]
    fn a_commit_runs_entry_then_index_with_record_then_deletes() {
        let a = agent();
        let mut m = Mirror::default();
        commit(&mut m, &a, 7, &[2, 3]);
        assert_eq!(m.stages(Pass::Retry), vec![vec![0], vec![1, 2], vec![3, 4]]);
        assert_eq!(m.stages(Pass::Commit), vec![vec![0], vec![1, 2]]);
        let mut plain = Mirror::default();
        commit(&mut plain, &a, 0, &[]);
        assert_eq!(plain.stages(Pass::Retry), vec![vec![0], vec![1, 2]]);
    }

    #[test]
    fn pending_commits_put_every_entry_before_any_index_and_delete_last() {
        let a = agent();
        let mut m = Mirror::default();
        commit(&mut m, &a, 1, &[]);
        m.failed();
        // Retention 1: the second write prunes the first entry, whose put
        // never landed; only its delete is left, after the new index.
        commit(&mut m, &a, 2, &[1]);
        let stages: Vec<Vec<&str>> = m
            .stages(Pass::Retry)
            .iter()
            .map(|s| s.iter().map(|&i| m.ops[i].key.as_str()).collect())
            .collect();
        let (e1, e2) = (entry_kv_key(&a, 1), entry_kv_key(&a, 2));
        let (index, record) = (history_kv_key(&a), kv_key(&a));
        assert_eq!(
            stages,
            vec![vec![e2.as_str()], vec![&index, &record], vec![&e1]]
        );
        assert_eq!(m.ops.iter().find(|o| o.key == e1).unwrap().value, None);
    }

    #[test]
    fn a_failed_sync_keeps_exactly_the_ops_that_did_not_land() {
        let a = agent();
        let mut m = Mirror::default();
        commit(&mut m, &a, 4, &[1]);
        // Entry and index landed, the record did not; the delete never ran.
        m.drop_landed(&[true, true, false]);
        m.failed();
        let kept: Vec<_> = m.ops.iter().map(|o| o.key.clone()).collect();
        assert_eq!(kept, vec![kv_key(&a), entry_kv_key(&a, 1)]);
        assert_eq!(m.stages(Pass::Retry), vec![vec![0], vec![1]]);
        assert_eq!(m.failures, 1);
    }

    #[test]
    fn a_write_runs_the_deletes_its_predecessor_left_unnamed_with_its_entry() {
        let a = agent();
        let mut m = Mirror::default();
        commit(&mut m, &a, 4, &[3]);
        // The commit pass landed entry 4, index and record: entry 3's delete
        // is kept, unnamed, for the next write.
        m.drop_landed(&[true, true, true]);
        m.heads_landed();
        assert_eq!(m.ops.len(), 1);
        assert!(m.ops[0].unnamed);
        assert_eq!(m.stages(Pass::Commit), vec![vec![0]]);
        commit(&mut m, &a, 5, &[4]);
        let keys = |stage: &Vec<usize>| -> Vec<String> {
            stage.iter().map(|&i| m.ops[i].key.clone()).collect()
        };
        let stages = m.stages(Pass::Commit);
        assert_eq!(
            stages.iter().map(keys).collect::<Vec<_>>(),
            vec![
                vec![entry_kv_key(&a, 3), entry_kv_key(&a, 5)],
                vec![history_kv_key(&a), kv_key(&a)],
            ],
            "entry 3 goes with entry 5's put; entry 4 is still named until the new index lands"
        );
        assert_eq!(m.stages(Pass::Retry).len(), 3);
    }

    #[test]
    fn a_failed_index_put_leaves_its_deletes_named() {
        let a = agent();
        let mut m = Mirror::default();
        commit(&mut m, &a, 4, &[3]);
        m.drop_landed(&[true, false, true]);
        m.failed();
        // No heads_landed: the old index (naming entry 3) may still be in KV.
        assert!(m.ops.iter().all(|o| !o.unnamed));
        assert_eq!(m.stages(Pass::Commit), vec![vec![0]]);
        assert_eq!(m.stages(Pass::Retry), vec![vec![0], vec![1]]);
    }

    #[test]
    fn unnamed_marks_are_stored_and_old_mirrors_still_load() {
        let mut m = Mirror::default();
        m.ops.push(MirrorOp {
            key: "k".into(),
            value: None,
            metadata: None,
            unnamed: true,
        });
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            r#"{"ops":[{"key":"k","value":null,"unnamed":true}],"failures":0}"#
        );
        assert_eq!(serde_json::from_str::<Mirror>(&text).unwrap(), m);
        let old: Mirror = serde_json::from_str(r#"{"ops":[{"key":"k","value":null}]}"#).unwrap();
        assert!(!old.ops[0].unnamed);
    }

    #[test]
    fn a_record_alone_is_one_stage() {
        let a = agent();
        let mut m = Mirror::default();
        m.push_record(&a, "r");
        assert_eq!(m.stages(Pass::Commit), vec![vec![0]]);
        assert_eq!(m.ops[0].stage(), Stage::Heads);
    }

    #[test]
    fn retries_back_off_to_a_cap() {
        let mut m = Mirror::default();
        let delays: Vec<u64> = (0..20).map(|_| m.failed()).collect();
        assert_eq!(delays[0], 2_000);
        assert_eq!(delays[1], 4_000);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*delays.last().unwrap(), RETRY_CAP_MS);
    }

    #[test]
    fn the_stored_form_is_stable() {
        let m = Mirror {
            ops: vec![MirrorOp {
                key: "k".into(),
                value: None,
                metadata: None,
                unnamed: false,
            }],
            failures: 2,
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text, r#"{"ops":[{"key":"k","value":null}],"failures":2}"#);
        assert_eq!(serde_json::from_str::<Mirror>(&text).unwrap(), m);
    }

    #[test]
    fn a_meta_record_lands_with_the_heads_and_a_newer_one_replaces_it() {
        let a = agent();
        let mut m = Mirror::default();
        assert!(!m.meta_pending());
        m.push_meta(&a, "m1", "{\"l\":1}");
        m.push_commit(&Commit {
            agent: &a,
            sequence: 1,
            entry: "e1",
            index: "i1",
            record: "r1",
            pruned: &[],
        });
        m.push_meta(&a, "m2", "{\"l\":2}");
        assert!(m.meta_pending());
        let metas: Vec<_> = m.ops.iter().filter(|o| o.metadata.is_some()).collect();
        assert_eq!(metas.len(), 1, "{m:?}");
        assert_eq!(metas[0].value.as_deref(), Some("m2"));
        assert_eq!(metas[0].metadata.as_deref(), Some("{\"l\":2}"));
        assert_eq!(metas[0].stage(), Stage::Heads);
        // Stored and read back with its metadata (the alarm's retry).
        let back: Mirror = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        // The record put, not the meta put, is what watchers are sent.
        let records: Vec<_> = m.ops.iter().filter_map(MirrorOp::record_put).collect();
        assert_eq!(records, ["r1"]);
    }
}
