//! Rolling 24-hour windows and the retry-storm cooldown. Pure bookkeeping over
//! timestamps; the Durable Objects persist these structs and call in.

use crate::core::limits::{
    COOLDOWN_AFTER_REJECTS, COOLDOWN_BASE_SEC, COOLDOWN_CAP_SEC, WINDOW_SEC,
};
use serde::{Deserialize, Serialize};

const WINDOW_MS: u64 = WINDOW_SEC * 1000;

/// Times (Unix ms) of the events still inside the rolling window, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Event times, Unix ms, oldest first; expired ones are dropped on the next `record`.
    pub times_ms: Vec<u64>,
}

/// How a window stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Events allowed per window (e.g. the tier's `writes_per_24h`).
    pub limit: u32,
    /// Events inside the window at that moment.
    pub used: u32,
    /// When the oldest counted event leaves the window (None when empty).
    pub reset_at_ms: Option<u64>,
}

impl Usage {
    /// Events still allowed: `limit - used`, never below 0.
    pub fn remaining(&self) -> u32 {
        self.limit.saturating_sub(self.used)
    }
    /// No event left: `used >= limit`.
    pub fn exhausted(&self) -> bool {
        self.used >= self.limit
    }
}

impl Window {
    /// The events that still count at `now_ms` (strictly younger than 24 h).
    fn live(&self, now_ms: u64) -> impl Iterator<Item = u64> + '_ {
        self.times_ms
            .iter()
            .copied()
            .filter(move |&t| t + WINDOW_MS > now_ms)
    }
    /// How the window stands at `now_ms` (Unix ms) against `limit`; an event exactly
    /// 24 h old no longer counts.
    pub fn usage(&self, now_ms: u64, limit: u32) -> Usage {
        let used = self.live(now_ms).count() as u32;
        let reset_at_ms = self.live(now_ms).min().map(|t| t + WINDOW_MS);
        Usage {
            limit,
            used,
            reset_at_ms,
        }
    }
    /// Drops expired events and records one at `now_ms`.
    pub fn record(&mut self, now_ms: u64) {
        self.times_ms.retain(|&t| t + WINDOW_MS > now_ms);
        self.times_ms.push(now_ms);
    }
}

/// The quota bucket of a client address (`CF-Connecting-IP`). IPv6 users
/// typically control a whole /64, so counting single v6 addresses would make
/// the quota meaningless: v6 is bucketed by /64, and a v4-mapped v6 address
/// counts as its v4 address. A missing or unparsable address (only possible
/// off Cloudflare, e.g. local dev) shares the one bucket `unknown`.
pub fn ip_bucket(connecting_ip: Option<&str>) -> String {
    use std::net::IpAddr;
    match connecting_ip.map(|raw| raw.trim().parse::<IpAddr>()) {
        Some(Ok(IpAddr::V4(v4))) => v4.to_string(),
        Some(Ok(IpAddr::V6(v6))) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
        _ => "unknown".to_owned(),
    }
}

/// New-agent slots of one client IP: which agents were created when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpWindow {
    /// One slot per new agent: (agent id, Unix ms the slot was taken). Expired slots are
    /// dropped on the next `reserve`.
    pub entries: Vec<(String, u64)>,
}

impl IpWindow {
    /// Reserves a slot for `agent_id` (idempotent: an agent already holding a
    /// live slot gets it again for free). `Err(reset_at_ms)` when full.
    pub fn reserve(&mut self, agent_id: &str, now_ms: u64, limit: u32) -> Result<(), u64> {
        self.entries.retain(|(_, t)| t + WINDOW_MS > now_ms);
        if self.entries.iter().any(|(a, _)| a == agent_id) {
            return Ok(());
        }
        if self.entries.len() as u32 >= limit {
            let oldest = self.entries.iter().map(|(_, t)| *t).min().unwrap_or(now_ms);
            return Err(oldest + WINDOW_MS);
        }
        self.entries.push((agent_id.to_owned(), now_ms));
        Ok(())
    }
}

/// Consecutive signed-but-rejected writes and the resulting cooldown.
///
/// Only rejections of *authenticated* requests count, and an attacker can
/// only replay envelopes the agent really sent. So a reject counts only when
/// its seq is above every seq counted so far, or equal to the highest with a
/// payload not yet counted at that seq: a bot that keeps producing new broken
/// writes is slowed down exponentially, while replays (which repeat an old
/// seq and digest) can neither start nor prolong a cooldown. (Replays of
/// accepted writes never get here at all: `replay_seq` is decided first.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cooldown {
    /// Counted rejects since the last accepted write; the cooldown starts at
    /// [`COOLDOWN_AFTER_REJECTS`] (5).
    pub consecutive_rejects: u32,
    /// End of the latest cooldown, Unix ms (may lie in the past); `None` until the 5th
    /// counted reject. 10 s then, doubling with each further one, capped at 1 h.
    pub until_ms: Option<u64>,
    /// The highest seq counted since the last accepted write.
    #[serde(default)]
    pub max_seq: Option<u64>,
    /// Hex digests counted at `max_seq` (bounded; when full, nothing more at
    /// that seq counts, which errs toward never locking anyone out).
    #[serde(default)]
    pub digests: Vec<String>,
}

/// How many payloads at one seq are remembered.
const DIGESTS_MAX: usize = 64;

impl Cooldown {
    /// When the cooldown in force at `now_ms` ends (Unix ms), if one is.
    pub fn active_until(&self, now_ms: u64) -> Option<u64> {
        self.until_ms.filter(|&u| u > now_ms)
    }
    /// Counts a rejected authenticated write of `seq` with signed digest
    /// `digest_hex`; returns whether anything changed.
    pub fn note_reject(&mut self, seq: u64, digest_hex: &str, now_ms: u64) -> bool {
        match self.max_seq {
            Some(max) if seq < max => return false,
            Some(max) if seq == max => {
                if self.digests.len() >= DIGESTS_MAX || self.digests.iter().any(|d| d == digest_hex)
                {
                    return false;
                }
            }
            _ => {
                self.max_seq = Some(seq);
                self.digests.clear();
            }
        }
        self.digests.push(digest_hex.to_owned());
        self.consecutive_rejects = self.consecutive_rejects.saturating_add(1);
        if self.consecutive_rejects >= COOLDOWN_AFTER_REJECTS {
            let doublings = (self.consecutive_rejects - COOLDOWN_AFTER_REJECTS).min(20);
            let secs = (COOLDOWN_BASE_SEC << doublings).min(COOLDOWN_CAP_SEC);
            self.until_ms = Some(now_ms + secs * 1000);
        }
        true
    }
    /// An accepted write clears everything.
    pub fn reset(&mut self) {
        *self = Cooldown::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;

    #[test]
    fn window_rolls() {
        let mut w = Window::default();
        w.record(0);
        w.record(H);
        let u = w.usage(2 * H, 5);
        assert_eq!((u.used, u.remaining(), u.reset_at_ms), (2, 3, Some(24 * H)));
        // At exactly 24 h the first write has left the window.
        let u = w.usage(24 * H, 5);
        assert_eq!((u.used, u.reset_at_ms), (1, Some(25 * H)));
        let u = w.usage(25 * H, 5);
        assert_eq!((u.used, u.reset_at_ms), (0, None));
        w.record(25 * H);
        assert_eq!(w.times_ms, [25 * H]);
    }

    #[test]
    fn ip_window_is_idempotent_per_agent_and_bounded() {
        let mut w = IpWindow::default();
        assert_eq!(w.reserve("a", 0, 2), Ok(()));
        assert_eq!(w.reserve("a", 10, 2), Ok(()));
        assert_eq!(w.reserve("b", 20, 2), Ok(()));
        assert_eq!(w.reserve("c", 30, 2), Err(24 * H));
        assert_eq!(w.reserve("c", 24 * H, 2), Ok(()));
    }

    #[test]
    fn cooldown_starts_at_fifth_counted_reject_and_doubles_to_cap() {
        let mut c = Cooldown::default();
        for seq in 0..4 {
            assert!(c.note_reject(seq, "d", 0));
            assert_eq!(c.active_until(0), None);
        }
        assert!(c.note_reject(4, "d", 0));
        assert_eq!(c.active_until(0), Some(10_000));
        c.note_reject(5, "d", 0);
        assert_eq!(c.until_ms, Some(20_000));
        for seq in 6..30 {
            c.note_reject(seq, "d", 0);
        }
        assert_eq!(c.until_ms, Some(3_600_000));
        c.reset();
        assert_eq!(c, Cooldown::default());
    }

    #[test]
    fn replayed_payloads_never_count_again() {
        let mut c = Cooldown::default();
        // Distinct payloads at one seq count; repeats do not.
        assert!(c.note_reject(7, "a", 0));
        assert!(c.note_reject(7, "b", 0));
        for _ in 0..10 {
            assert!(!c.note_reject(7, "a", 0));
        }
        // Anything below the highest counted seq is an old envelope.
        assert!(!c.note_reject(6, "z", 0));
        assert_eq!(c.consecutive_rejects, 2);
    }

    #[test]
    fn a_full_digest_memory_stops_counting_rather_than_forgetting() {
        let mut c = Cooldown::default();
        for i in 0..DIGESTS_MAX {
            c.note_reject(1, &format!("d{i}"), 0);
        }
        assert!(!c.note_reject(1, "one-more", 0));
        assert!(!c.note_reject(1, "d0", 0));
        assert!(c.note_reject(2, "next-seq", 0));
    }

    #[test]
    fn ip_buckets_group_a_v6_slash_64_and_unmap_v4() {
        let b = |raw: Option<&str>| ip_bucket(raw);
        assert_eq!(b(Some("203.0.113.7")), "203.0.113.7");
        assert_eq!(b(Some(" 203.0.113.7 ")), "203.0.113.7");
        assert_eq!(b(Some("::ffff:203.0.113.7")), "203.0.113.7");
        let one = b(Some("2001:db8:aa:bb:1:2:3:4"));
        assert_eq!(one, "2001:db8:aa:bb::/64");
        assert_eq!(b(Some("2001:0db8:00aa:00bb:ffff::9")), one);
        assert_ne!(b(Some("2001:db8:aa:bc::1")), one);
        for raw in [
            None,
            Some(""),
            Some("not an ip"),
            Some("203.0.113.7, 10.0.0.1"),
        ] {
            assert_eq!(b(raw), "unknown", "{raw:?}");
        }
    }
}
