//! An agent's refused writes, as its own object counts them.
//!
//! Only a refusal of a body that authenticated as the agent (its current
//! key signed it) is counted: a stranger's forged write is refused before
//! it says anything about the agent, and counting it would let anyone
//! inflate another agent's numbers. Every code of a refusal counts once in
//! `by_code`; the refusal counts once in `total` and in its hour.

use super::{hour_of, HOUR_MS};
use crate::core::reason::ReasonCode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Hours kept for the rolling count (`last_24h`).
const HOURS_KEPT: u64 = 24;

/// The refusals of one agent's writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusals {
    /// Refusals over the agent's life.
    #[serde(default)]
    pub total: u64,
    /// Over the agent's life, by reason code (wire name).
    #[serde(default)]
    pub by_code: BTreeMap<String, u64>,
    /// `(Unix hour, refusals in it)` for the last 24 hours, oldest first.
    #[serde(default)]
    pub hours: Vec<(u64, u64)>,
    /// The newest refusal.
    #[serde(default)]
    pub last: Option<LastRefusal>,
}

/// The newest refusal: when, and its codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRefusal {
    /// When it was refused (Unix ms).
    pub at_ms: u64,
    /// Its reason codes, in reporting order.
    pub reason_codes: Vec<String>,
}

impl Refusals {
    /// Counts one refusal with `codes` at `now_ms`.
    pub fn note(&mut self, codes: &[ReasonCode], now_ms: u64) {
        self.total += 1;
        for c in codes {
            *self.by_code.entry(c.as_str().to_owned()).or_default() += 1;
        }
        let hour = hour_of(now_ms);
        self.drop_before(now_ms);
        match self.hours.last_mut() {
            Some((h, n)) if *h == hour => *n += 1,
            _ => self.hours.push((hour, 1)),
        }
        self.last = Some(LastRefusal {
            at_ms: now_ms,
            reason_codes: codes.iter().map(|c| c.as_str().to_owned()).collect(),
        });
    }

    /// Refusals in the 24 hours up to `now_ms`, counted by the hour (the
    /// current hour and the 23 before it).
    pub fn last_24h(&self, now_ms: u64) -> u64 {
        last_24h(&self.hours, now_ms)
    }

    fn drop_before(&mut self, now_ms: u64) {
        let first = first_hour(now_ms);
        self.hours.retain(|(h, _)| *h >= first);
    }
}

/// The oldest hour a 24-hour count at `now_ms` includes.
fn first_hour(now_ms: u64) -> u64 {
    hour_of(now_ms).saturating_sub(HOURS_KEPT - 1)
}

/// The sum of the `(hour, count)` pairs inside the 24 hours up to `now_ms`
/// (also what an operator's list entry counts from its summary).
pub fn last_24h(hours: &[(u64, u64)], now_ms: u64) -> u64 {
    let first = first_hour(now_ms);
    let now = hour_of(now_ms);
    hours
        .iter()
        .filter(|(h, _)| (first..=now).contains(h))
        .map(|(_, n)| n)
        .sum()
}

/// The start of hour `h` (Unix ms).
pub fn hour_start_ms(h: u64) -> u64 {
    h * HOUR_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_780_000_000_000;

    #[test]
    fn counts_by_code_by_hour_and_keeps_the_last() {
        let mut r = Refusals::default();
        r.note(&[ReasonCode::UnsafeContent], T0);
        r.note(
            &[ReasonCode::UnsafeContent, ReasonCode::UnknownField],
            T0 + 1,
        );
        r.note(&[ReasonCode::ReplaySeq], T0 + 2 * HOUR_MS);
        assert_eq!(r.total, 3);
        assert_eq!(r.by_code["unsafe_content"], 2);
        assert_eq!(r.by_code["unknown_field"], 1);
        assert_eq!(r.by_code["replay_seq"], 1);
        assert_eq!(r.last_24h(T0 + 2 * HOUR_MS), 3);
        assert_eq!(
            r.last.as_ref().map(|l| (l.at_ms, l.reason_codes.clone())),
            Some((T0 + 2 * HOUR_MS, vec!["replay_seq".to_owned()]))
        );
        // A day later only the last hour's is within 24 h.
        assert_eq!(r.last_24h(T0 + 24 * HOUR_MS), 1);
        assert_eq!(r.last_24h(T0 + 27 * HOUR_MS), 0);
        // Old hours are dropped as new ones come; life totals stay.
        r.note(&[ReasonCode::UnsafeContent], T0 + 30 * HOUR_MS);
        assert_eq!(r.hours.len(), 1);
        assert_eq!(r.total, 4);
        assert_eq!(r.by_code["unsafe_content"], 3);
    }
}
