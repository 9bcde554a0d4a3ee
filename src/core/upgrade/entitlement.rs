//! Paid time: what the payments bought, kept in the agent's record and read
//! by head.json (its `tier` and `paid_until`). The read path's part of the
//! upgrade, and the only one compiled without the `core-full` feature (the
//! entry Worker): quoting, invoices, claims and payment checks are the rest
//! of this module.

use crate::core::limits::Tier;
use serde::{Deserialize, Serialize};

/// Paid time per plan. Prepaid days, not a subscription: each payment adds
/// its days after whatever is left of that plan (renewals stack), and an
/// agent is on the highest plan with time left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entitlement {
    /// Pro paid until, Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pro_until_ms: Option<u64>,
    /// Plus paid until, Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plus_until_ms: Option<u64>,
}

impl Entitlement {
    /// Never paid.
    pub fn is_empty(&self) -> bool {
        self.pro_until_ms.is_none() && self.plus_until_ms.is_none()
    }

    fn until(&self, plan: Tier) -> Option<u64> {
        match plan {
            Tier::Free => None,
            Tier::Pro => self.pro_until_ms,
            Tier::Plus => self.plus_until_ms,
        }
    }

    /// The tier in force at `now_ms`.
    pub fn tier_at(&self, now_ms: u64) -> Tier {
        [Tier::Plus, Tier::Pro]
            .into_iter()
            .find(|t| self.until(*t).is_some_and(|u| u > now_ms))
            .unwrap_or(Tier::Free)
    }

    /// When the tier in force at `now_ms` ends (`None` on free).
    pub fn paid_until(&self, now_ms: u64) -> Option<u64> {
        self.until(self.tier_at(now_ms))
    }

    /// Adds `days` of `plan` and returns its new end. Paid time is never
    /// lost: Plus runs first, and Pro time waits behind it.
    /// - Plus: `plus_until = max(now, plus_until) + days`; Pro time still
    ///   left (scheduled after Plus) moves back by the same `days`.
    /// - Pro: `pro_until = max(now, plus_until, pro_until) + days`, so it
    ///   starts when any Plus time ends.
    ///
    /// Free is not sold (no change, `now_ms` returned).
    pub fn credit(&mut self, plan: Tier, days: u32, now_ms: u64) -> u64 {
        let add = u64::from(days) * 24 * 60 * 60 * 1000;
        let plus_end = self.plus_until_ms.unwrap_or(0).max(now_ms);
        match plan {
            Tier::Free => now_ms,
            Tier::Plus => {
                if let Some(pro) = self.pro_until_ms.as_mut().filter(|p| **p > plus_end) {
                    *pro = pro.saturating_add(add);
                }
                let until = plus_end.saturating_add(add);
                self.plus_until_ms = Some(until);
                until
            }
            Tier::Pro => {
                let until = self
                    .pro_until_ms
                    .unwrap_or(0)
                    .max(plus_end)
                    .saturating_add(add);
                self.pro_until_ms = Some(until);
                until
            }
        }
    }
}
