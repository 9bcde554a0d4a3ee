//! The KV mirror: what an agent's Durable Object must still make KV hold
//! after a commit, in which order, and how long to wait after a failure.
//!
//! KV is where every read comes from, and it is eventually consistent with
//! no transactions, so the order of the puts is the only guarantee readers
//! get: the new entry first, then the index that names it, then the record
//! (head.json / capsule.json), and pruned entries are deleted last. A reader
//! therefore never finds an index naming an entry that is not there yet. The
//! pending ops are stored with the state in the same atomic commit, so a
//! failed or interrupted sync loses nothing: the alarm retries what is left.

use crate::core::crypto::AgentId;
use crate::core::record::{entry_kv_key, history_kv_key, kv_key};
use serde::{Deserialize, Serialize};

/// First retry delay for a failed sync; doubles per failure up to the cap.
pub const RETRY_BASE_MS: u64 = 1_000;
/// Longest wait between two sync attempts.
pub const RETRY_CAP_MS: u64 = 5 * 60 * 1_000;

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

    /// Adds a put of the published record alone (a change that is not a
    /// write, such as a credited upgrade, which head.json must show).
    pub fn push_record(&mut self, agent: &AgentId, record: &str) {
        self.failures = 0;
        self.push(kv_key(agent), Some(record));
    }

    fn push(&mut self, key: String, value: Option<&str>) {
        self.ops.retain(|o| o.key != key);
        self.ops.push(MirrorOp {
            key,
            value: value.map(str::to_owned),
        });
    }

    /// Records a sync that got `done` ops into KV before failing: drops
    /// those, counts the failure, and returns the delay before the next try.
    pub fn failed_after(&mut self, done: usize) -> u64 {
        self.ops.drain(..done.min(self.ops.len()));
        self.failures = self.failures.saturating_add(1);
        RETRY_BASE_MS
            .saturating_mul(1u64 << self.failures.min(16))
            .min(RETRY_CAP_MS)
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
        assert_eq!(m.failed_after(1), 2 * RETRY_BASE_MS);
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

    #[test]
    fn retries_back_off_to_a_cap() {
        let mut m = Mirror::default();
        let delays: Vec<u64> = (0..20).map(|_| m.failed_after(0)).collect();
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
            }],
            failures: 2,
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text, r#"{"ops":[{"key":"k","value":null}],"failures":2}"#);
        assert_eq!(serde_json::from_str::<Mirror>(&text).unwrap(), m);
    }
}
