//! Every number the service enforces, in one place: the tier table and the
//! fixed protocol bounds. The Worker may override tier numbers from
//! `wrangler.toml` vars (see `TierTable::with_overrides`); nothing else should
//! hard-code a limit.

use serde::{Deserialize, Serialize};

/// Hard cap on a PUT body, checked before parsing.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Polling hint in head.json.
pub const HEAD_TTL_SEC: u64 = 600;
/// The rolling quota window.
pub const WINDOW_SEC: u64 = 24 * 60 * 60;
/// Consecutive signed-but-rejected writes before the cooldown starts.
pub const COOLDOWN_AFTER_REJECTS: u32 = 5;
/// First cooldown; doubles with every further reject.
pub const COOLDOWN_BASE_SEC: u64 = 10;
/// Longest cooldown.
pub const COOLDOWN_CAP_SEC: u64 = 60 * 60;

/// A paid level. Every agent is `Free` until upgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// `"free"`, every agent's tier until upgraded. Defaults: 4096-byte capsules, 5 writes
    /// and 20 new agents per IP per 24 h, the latest history entry kept.
    #[default]
    Free,
    /// `"pro"`. Defaults: 24 576-byte capsules, 50 writes and 200 new agents per IP per
    /// 24 h, 100 history entries kept.
    Pro,
    /// `"plus"`. Defaults: pro's numbers, with 1000 history entries kept.
    Plus,
}

impl Tier {
    /// Every tier, free first (the order overrides are read in).
    pub const ALL: [Tier; 3] = [Tier::Free, Tier::Pro, Tier::Plus];
    /// The wire and storage name (`"free"`, `"pro"`, `"plus"`); upper-cased, the prefix
    /// of its `wrangler.toml` overrides (`FREE_…`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Pro => "pro",
            Tier::Plus => "plus",
        }
    }
    /// The tier of a wire name (`"free"`, `"pro"`, `"plus"`), if it is one.
    pub fn from_name(name: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// The numbers that differ between tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierLimits {
    /// Byte length of JCS(capsule).
    pub max_capsule_bytes: usize,
    /// Accepted writes per agent per rolling 24 h.
    pub writes_per_24h: u32,
    /// New agent ids whose first capsule is accepted, per client IP per rolling 24 h.
    pub new_agents_per_ip_24h: u32,
    /// History entries kept per agent (at least 1: the latest).
    pub history_retained: u32,
}

/// Limits for every tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierTable {
    /// The free tier (default 4096 B, 5 writes, 20 new agents per IP, 1 entry kept).
    pub free: TierLimits,
    /// The pro tier (default 24 576 B, 50 writes, 200 new agents per IP, 100 entries kept).
    pub pro: TierLimits,
    /// The plus tier (default 24 576 B, 50 writes, 200 new agents per IP, 1000 entries kept).
    pub plus: TierLimits,
}

impl Default for TierTable {
    /// The spec's numbers: free 4096 B / 5 writes / 20 new agents per IP;
    /// pro 24 576 B / 50 / 200; plus the same with ten times the history
    /// kept (see each field for the entries retained).
    fn default() -> Self {
        TierTable {
            free: TierLimits {
                max_capsule_bytes: 4096,
                writes_per_24h: 5,
                new_agents_per_ip_24h: 20,
                history_retained: 1,
            },
            pro: TierLimits {
                max_capsule_bytes: 24 * 1024,
                writes_per_24h: 50,
                new_agents_per_ip_24h: 200,
                history_retained: 100,
            },
            plus: TierLimits {
                max_capsule_bytes: 24 * 1024,
                writes_per_24h: 50,
                new_agents_per_ip_24h: 200,
                history_retained: 1000,
            },
        }
    }
}

impl TierTable {
    /// The limits of `tier`.
    pub fn get(&self, tier: Tier) -> &TierLimits {
        match tier {
            Tier::Free => &self.free,
            Tier::Pro => &self.pro,
            Tier::Plus => &self.plus,
        }
    }

    /// Applies overrides named `<TIER>_<FIELD>` in upper case, e.g.
    /// `FREE_WRITES_PER_24H = "10"`. Unparsable or zero values are ignored
    /// (and reported back) rather than silently disabling a limit.
    pub fn with_overrides(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> (Self, Vec<String>) {
        let mut ignored = Vec::new();
        for tier in Tier::ALL {
            let prefix = tier.as_str().to_ascii_uppercase();
            let limits = match tier {
                Tier::Free => &mut self.free,
                Tier::Pro => &mut self.pro,
                Tier::Plus => &mut self.plus,
            };
            let mut set = |field: &str, slot: &mut u64| {
                let name = format!("{prefix}_{field}");
                if let Some(raw) = lookup(&name) {
                    match raw.trim().parse::<u64>() {
                        Ok(v) if v > 0 && v <= u32::MAX as u64 => *slot = v,
                        _ => ignored.push(name),
                    }
                }
            };
            let mut bytes = limits.max_capsule_bytes as u64;
            set("MAX_CAPSULE_BYTES", &mut bytes);
            limits.max_capsule_bytes = bytes as usize;
            let mut writes = limits.writes_per_24h as u64;
            set("WRITES_PER_24H", &mut writes);
            limits.writes_per_24h = writes as u32;
            let mut ips = limits.new_agents_per_ip_24h as u64;
            set("NEW_AGENTS_PER_IP_24H", &mut ips);
            limits.new_agents_per_ip_24h = ips as u32;
            let mut kept = limits.history_retained as u64;
            set("HISTORY_RETAINED", &mut kept);
            limits.history_retained = kept as u32;
        }
        (self, ignored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_names_round_trip() {
        for t in Tier::ALL {
            assert_eq!(Tier::from_name(t.as_str()), Some(t));
        }
        assert_eq!(Tier::from_name("Free"), None);
        assert_eq!(Tier::from_name("gold"), None);
    }

    #[test]
    fn spec_numbers() {
        let t = TierTable::default();
        assert_eq!(t.get(Tier::Free).max_capsule_bytes, 4096);
        assert_eq!(t.get(Tier::Free).writes_per_24h, 5);
        assert_eq!(t.get(Tier::Free).new_agents_per_ip_24h, 20);
        assert_eq!(t.get(Tier::Pro).max_capsule_bytes, 24576);
        assert_eq!(t.get(Tier::Pro).writes_per_24h, 50);
        assert_eq!(t.get(Tier::Pro).new_agents_per_ip_24h, 200);
    }

    #[test]
    fn overrides_apply_and_bad_values_are_reported() {
        let (t, ignored) = TierTable::default().with_overrides(|k| match k {
            "FREE_WRITES_PER_24H" => Some("7".into()),
            "PRO_MAX_CAPSULE_BYTES" => Some("zero".into()),
            "PLUS_HISTORY_RETAINED" => Some("0".into()),
            _ => None,
        });
        assert_eq!(t.free.writes_per_24h, 7);
        assert_eq!(t.pro.max_capsule_bytes, 24576);
        assert_eq!(t.plus.history_retained, 1000);
        assert_eq!(ignored, ["PRO_MAX_CAPSULE_BYTES", "PLUS_HISTORY_RETAINED"]);
    }
}
