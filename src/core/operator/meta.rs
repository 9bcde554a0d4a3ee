//! meta.json (`GET /self/{agent_id}/meta.json`): why an agent's writes fail
//! and how it uses the service, for the bot's author and the operator.
//!
//! The agent's object mirrors a [`MetaRecord`] into KV (`self:meta:{id}`)
//! when it changes (after an accepted write at once with the write's mirror;
//! after refusals at most once a minute, from its alarm), and the read
//! evaluates it as of the request, as head.json's quota is: writes in the
//! window, refusals in the last 24 hours and the tier in force are the
//! request's, not the mirror's. A read never wakes the object.
//!
//! The same record carries the operator's list entry ([`Summary`]), small
//! enough to ride as the KV key's metadata, so listing agents reads no value.

use super::refusals::{self, Refusals};
use crate::core::key_log::KeysSummary;
use crate::core::limits::{Tier, TierTable};
use crate::core::quota::Window;
use crate::core::record::Record;
use crate::core::time::{parse_timestamp, rfc3339};
use crate::core::upgrade::entitlement::Entitlement;
#[cfg(feature = "core-full")]
use crate::core::write::AgentState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long after a refusal meta.json shows it at the latest (the agent's
/// object mirrors refusals from its alarm, at most once per this long).
pub const MIRROR_REFUSALS_WITHIN_MS: u64 = 60_000;

/// What the agent's object mirrors for meta.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaRecord {
    /// The agent.
    pub agent_id: String,
    /// The first accepted write (Unix ms); `None` for agents whose first
    /// write predates the record.
    #[serde(default)]
    pub first_write_ms: Option<u64>,
    /// The last accepted write (Unix ms).
    #[serde(default)]
    pub last_write_ms: Option<u64>,
    /// Accepted writes ever.
    #[serde(default)]
    pub total_writes: u64,
    /// Accepted writes in the rolling window (their times).
    #[serde(default)]
    pub window: Window,
    /// Refused writes that authenticated as the agent.
    #[serde(default)]
    pub refusals: Refusals,
    /// Paid time per plan.
    #[serde(default)]
    pub paid: Entitlement,
    /// The history chain: its length and the first retained sequence.
    #[serde(default)]
    pub history: Option<HistoryMeta>,
    /// The key log: its length and the keys whose writes are disputed.
    #[serde(default)]
    pub keys: Option<KeysMeta>,
    /// When the object made this record (Unix ms).
    pub as_of_ms: u64,
}

/// The history part of a [`MetaRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMeta {
    /// Entries ever appended.
    pub length: u64,
    /// The oldest retained entry's sequence (= entries pruned so far).
    pub first_sequence: u64,
}

/// The key-log part of a [`MetaRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysMeta {
    /// Events in the log.
    pub length: u64,
    /// Keys whose writes are (partly) disputed.
    pub disputed: u64,
}

impl KeysMeta {
    fn of(k: &KeysSummary) -> KeysMeta {
        KeysMeta {
            length: k.length,
            disputed: k.disputed as u64,
        }
    }
}

impl MetaRecord {
    /// The record of `state` at `now_ms`.
    #[cfg(feature = "core-full")]
    pub fn of(agent_id: &str, state: &AgentState, now_ms: u64) -> MetaRecord {
        MetaRecord {
            agent_id: agent_id.to_owned(),
            first_write_ms: state.first_write_ms,
            last_write_ms: state.published.as_ref().map(|p| p.updated_at_ms),
            total_writes: state.total_writes,
            window: state.writes.clone(),
            refusals: state.refusals.clone(),
            paid: state.paid.clone(),
            history: state.chain.as_ref().map(|c| HistoryMeta {
                length: c.length,
                first_sequence: c.first_sequence,
            }),
            keys: state.keys.as_ref().map(KeysMeta::of),
            as_of_ms: now_ms,
        }
    }

    /// Adds the put of `state`'s record at `now_ms`, with its list entry
    /// as the key's metadata, to `mirror`: what every commit that changes
    /// the figures (a write, a refusal, a credit, a key event) mirrors.
    #[cfg(feature = "core-full")]
    pub fn mirror(
        mirror: &mut crate::core::mirror::Mirror,
        agent: &crate::core::crypto::AgentId,
        state: &AgentState,
        now_ms: u64,
    ) {
        let record = MetaRecord::of(agent.as_str(), state, now_ms);
        // Both are plain structs of numbers and strings: serialising them
        // cannot fail.
        let text = serde_json::to_string(&record).unwrap_or_default();
        let meta = serde_json::to_string(&record.summary()).unwrap_or_default();
        mirror.push_meta(agent, &text, &meta);
    }

    /// What head.json's record alone says, for an agent whose object has
    /// not mirrored a meta record yet (it has not written since this
    /// service began keeping one): the last write, the window, the paid
    /// time and the key log; refusals and history unknown, so absent; the
    /// writes' total is those in the window (a lower bound).
    pub fn from_record(record: &Record) -> MetaRecord {
        let updated_ms = parse_timestamp(&record.updated_at).and_then(|ms| u64::try_from(ms).ok());
        MetaRecord {
            agent_id: record.agent_id.clone(),
            first_write_ms: None,
            last_write_ms: updated_ms,
            total_writes: record.writes.window.times_ms.len() as u64,
            window: record.writes.window.clone(),
            refusals: Refusals::default(),
            paid: record.paid.clone(),
            history: None,
            keys: record.keys.as_ref().map(KeysMeta::of),
            as_of_ms: updated_ms.unwrap_or(0),
        }
    }

    /// The operator's list entry of this record (the KV key's metadata).
    pub fn summary(&self) -> Summary {
        Summary {
            pro_until_ms: self.paid.pro_until_ms,
            plus_until_ms: self.paid.plus_until_ms,
            last_write_ms: self.last_write_ms,
            refusal_hours: self.refusals.hours.clone(),
            disputed: self.keys.map_or(0, |k| k.disputed),
        }
    }

    /// meta.json's body as of `now_ms`, with the tier limits in force.
    pub fn body(&self, tiers: &TierTable, now_ms: u64) -> MetaBody {
        let tier = self.paid.tier_at(now_ms);
        let usage = self.window.usage(now_ms, tiers.get(tier).writes_per_24h);
        MetaBody {
            agent_id: self.agent_id.clone(),
            tier,
            paid_until: self.paid.paid_until(now_ms).map(rfc3339),
            writes: WritesBody {
                total: self.total_writes,
                first_at: self.first_write_ms.map(rfc3339),
                last_at: self.last_write_ms.map(rfc3339),
                in_window: WindowBody {
                    used: usage.used,
                    limit: usage.limit,
                    reset_at: usage.reset_at_ms.map(rfc3339),
                },
            },
            refusals: RefusalsBody {
                total: self.refusals.total,
                last_24h: self.refusals.last_24h(now_ms),
                by_reason_code: self.refusals.by_code.clone(),
                last: self.refusals.last.as_ref().map(|l| LastBody {
                    at: rfc3339(l.at_ms),
                    reason_codes: l.reason_codes.clone(),
                }),
            },
            history: self.history.map(|h| HistoryBody {
                length: h.length,
                retained: h.length - h.first_sequence.min(h.length),
                pruned: h.first_sequence,
            }),
            keys: self.keys,
            as_of: rfc3339(self.as_of_ms),
        }
    }
}

/// meta.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaBody {
    /// The agent.
    pub agent_id: String,
    /// The tier in force now.
    pub tier: Tier,
    /// When it ends (null on free).
    pub paid_until: Option<String>,
    /// Accepted writes.
    pub writes: WritesBody,
    /// Refused writes that authenticated as the agent.
    pub refusals: RefusalsBody,
    /// The history chain (null before the first sealed write).
    pub history: Option<HistoryBody>,
    /// The key log (null without one).
    pub keys: Option<KeysMeta>,
    /// When the agent's object last mirrored these figures.
    pub as_of: String,
}

/// meta.json's `writes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritesBody {
    /// Accepted writes ever.
    pub total: u64,
    /// The first accepted write (null when it predates meta.json).
    pub first_at: Option<String>,
    /// The last accepted write.
    pub last_at: Option<String>,
    /// The rolling 24-hour window of the tier in force.
    pub in_window: WindowBody,
}

/// meta.json's `writes.in_window`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowBody {
    /// Accepted writes in the last 24 hours.
    pub used: u32,
    /// The tier's writes per 24 hours.
    pub limit: u32,
    /// When the oldest of them leaves the window (null when none).
    pub reset_at: Option<String>,
}

/// meta.json's `refusals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalsBody {
    /// Over the agent's life.
    pub total: u64,
    /// In the 24 hours up to now, counted by the hour.
    pub last_24h: u64,
    /// Over the agent's life, by reason code.
    pub by_reason_code: BTreeMap<String, u64>,
    /// The newest refusal.
    pub last: Option<LastBody>,
}

/// meta.json's `refusals.last`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastBody {
    /// When.
    pub at: String,
    /// Its reason codes.
    pub reason_codes: Vec<String>,
}

/// meta.json's `history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryBody {
    /// Entries ever appended.
    pub length: u64,
    /// Entries retained.
    pub retained: u64,
    /// Entries pruned.
    pub pruned: u64,
}

/// An agent as the operator's list shows it, kept as the metadata of its
/// meta key in KV (well under KV's 1024-byte metadata limit).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Pro paid until (Unix ms).
    #[serde(default, rename = "pro", skip_serializing_if = "Option::is_none")]
    pub pro_until_ms: Option<u64>,
    /// Plus paid until (Unix ms).
    #[serde(default, rename = "plus", skip_serializing_if = "Option::is_none")]
    pub plus_until_ms: Option<u64>,
    /// The last accepted write (Unix ms).
    #[serde(default, rename = "lw", skip_serializing_if = "Option::is_none")]
    pub last_write_ms: Option<u64>,
    /// Refusals by the hour, the last 24 hours.
    #[serde(default, rename = "rh", skip_serializing_if = "Vec::is_empty")]
    pub refusal_hours: Vec<(u64, u64)>,
    /// Keys whose writes are disputed.
    #[serde(default, rename = "d", skip_serializing_if = "is_zero")]
    pub disputed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Summary {
    /// The list entry of `agent_id` as of `now_ms`.
    pub fn entry(&self, agent_id: &str, now_ms: u64) -> ListEntry {
        let paid = Entitlement {
            pro_until_ms: self.pro_until_ms,
            plus_until_ms: self.plus_until_ms,
        };
        ListEntry {
            agent_id: agent_id.to_owned(),
            tier: paid.tier_at(now_ms),
            paid_until: paid.paid_until(now_ms).map(rfc3339),
            last_write_at: self.last_write_ms.map(rfc3339),
            refusals_24h: refusals::last_24h(&self.refusal_hours, now_ms),
            disputed_keys: self.disputed,
        }
    }
}

/// One agent in `GET /api/v1/admin/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// The agent.
    pub agent_id: String,
    /// The tier in force now.
    pub tier: Tier,
    /// When it ends.
    pub paid_until: Option<String>,
    /// The last accepted write.
    pub last_write_at: Option<String>,
    /// Refusals in the last 24 hours.
    pub refusals_24h: u64,
    /// Keys whose writes are disputed.
    pub disputed_keys: u64,
}

/// The list's filters (`?tier=free|pro|plus&refused=24h`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only agents on this tier now.
    pub tier: Option<Tier>,
    /// Only agents refused in the last 24 hours.
    pub refused_24h: bool,
}

impl Filter {
    /// Whether `e` passes.
    pub fn admits(&self, e: &ListEntry) -> bool {
        self.tier.is_none_or(|t| t == e.tier) && (!self.refused_24h || e.refusals_24h > 0)
    }
}

/// One reason code of meta.json's `refusals.by_reason_code`, as a reader is
/// shown it: how often, and what the bot should do about it (the spec's
/// table; `None` for a code this build does not know).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// The wire name.
    pub code: String,
    /// Refusals that named it, over the agent's life.
    pub count: u64,
    /// The bot action of the reason-code table.
    pub action: Option<&'static str>,
}

impl RefusalsBody {
    /// `by_reason_code` the most frequent first (ties by name), each with its
    /// bot action: what `selfcap meta` prints and the Explorer draws, so both
    /// show the same order and the same advice.
    pub fn by_count(&self) -> Vec<ReasonCount> {
        let mut out: Vec<ReasonCount> = self
            .by_reason_code
            .iter()
            .map(|(code, count)| ReasonCount {
                code: code.clone(),
                count: *count,
                action: crate::core::reason::ReasonCode::from_wire(code)
                    .map(crate::core::reason::ReasonCode::bot_action),
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.code.cmp(&b.code)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::operator::HOUR_MS;
    use crate::core::reason::ReasonCode;

    const T0: u64 = 1_780_000_000_000;

    fn record() -> MetaRecord {
        let mut state = AgentState {
            total_writes: 3,
            first_write_ms: Some(T0),
            ..AgentState::default()
        };
        for t in [T0, T0 + HOUR_MS, T0 + 2 * HOUR_MS] {
            state.writes.record(t);
        }
        state
            .refusals
            .note(&[ReasonCode::UnsafeContent], T0 + HOUR_MS);
        state.paid.pro_until_ms = Some(T0 + 30 * 24 * HOUR_MS);
        MetaRecord::of("ab", &state, T0 + 2 * HOUR_MS)
    }

    #[test]
    fn the_body_is_evaluated_as_of_the_read() {
        let r = record();
        let tiers = TierTable::default();
        let now = r.body(&tiers, T0 + 2 * HOUR_MS);
        assert_eq!(now.tier, Tier::Pro);
        assert_eq!(now.writes.total, 3);
        assert_eq!(now.writes.in_window.used, 3);
        assert_eq!(
            now.writes.in_window.limit,
            tiers.get(Tier::Pro).writes_per_24h
        );
        assert_eq!(now.refusals.total, 1);
        assert_eq!(now.refusals.last_24h, 1);
        assert_eq!(now.refusals.by_reason_code["unsafe_content"], 1);
        // Two days later: nothing in the window, no refusal in 24 h; a
        // month later the plan has lapsed.
        let later = r.body(&tiers, T0 + 48 * HOUR_MS);
        assert_eq!(later.writes.in_window.used, 0);
        assert_eq!(later.refusals.last_24h, 0);
        assert_eq!(later.refusals.total, 1);
        let lapsed = r.body(&tiers, T0 + 31 * 24 * HOUR_MS);
        assert_eq!(lapsed.tier, Tier::Free);
        assert_eq!(lapsed.paid_until, None);
    }

    #[test]
    fn the_list_entry_fits_in_kv_metadata_and_filters() {
        let r = record();
        let s = r.summary();
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.len() < 1024, "{text}");
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let e = s.entry("ab", T0 + 2 * HOUR_MS);
        assert_eq!((e.tier, e.refusals_24h), (Tier::Pro, 1));
        let pro = Filter {
            tier: Some(Tier::Pro),
            refused_24h: true,
        };
        assert!(pro.admits(&e));
        assert!(!Filter {
            tier: Some(Tier::Free),
            ..Filter::default()
        }
        .admits(&e));
        assert!(!pro.admits(&s.entry("ab", T0 + 30 * HOUR_MS)));
        // A full day of refusal hours still fits.
        let mut busy = s.clone();
        busy.refusal_hours = (0..24).map(|h| (hour(T0) + h, 99_999)).collect();
        assert!(serde_json::to_string(&busy).unwrap().len() < 1024);
    }

    fn hour(t: u64) -> u64 {
        t / HOUR_MS
    }

    #[test]
    fn the_body_reads_back_and_ranks_reason_codes() {
        let r = record();
        let mut body = r.body(&TierTable::default(), T0 + 2 * HOUR_MS);
        body.refusals
            .by_reason_code
            .insert("unknown_field".into(), 3);
        body.refusals
            .by_reason_code
            .insert("from_the_future".into(), 1);
        let text = serde_json::to_string(&body).unwrap();
        let back: MetaBody = serde_json::from_str(&text).unwrap();
        assert_eq!(back, body);
        let ranked = back.refusals.by_count();
        let codes: Vec<&str> = ranked.iter().map(|c| c.code.as_str()).collect();
        assert_eq!(
            codes,
            ["unknown_field", "from_the_future", "unsafe_content"]
        );
        assert_eq!(
            ranked[0].action,
            Some(ReasonCode::UnknownField.bot_action())
        );
        assert_eq!(ranked[1].action, None);
    }
}
