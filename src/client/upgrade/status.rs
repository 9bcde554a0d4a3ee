//! The tier as best known locally, for `status` ([`tier_view`]): the last
//! head.json seen, or the last credited purchase when that is newer.

use super::now_ms;
use super::record::{load_record, Record};
use crate::client::wire::Head;
use crate::client::{Client, Error};
use crate::core::time::parse_rfc3339;
use serde_json::Value;

/// The tier as best known locally, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierView {
    /// `free`, `pro` or `plus`.
    pub tier: String,
    /// When the paid time ends (`None` on free).
    pub paid_until: Option<String>,
    /// When this was true (a head's `generated_at`, a claim's `credited_at`).
    pub as_of: String,
}

/// The tier from the last head.json seen, or from the last credited
/// purchase when that is newer (a head read before the claim, or none);
/// a plan whose `paid_until` has passed shows as `free`.
fn tier_view(head: Option<&Head>, record: Option<&Record>, now_ms: u64) -> Option<TierView> {
    let claimed = record.and_then(|r| r.claimed.as_ref()).and_then(|c| {
        let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
        Some((s("plan")?, s("paid_until")?, s("credited_at")?))
    });
    let (tier, paid_until, as_of) = match (head, claimed) {
        (Some(h), c) if c.as_ref().is_none_or(|(_, _, at)| h.generated_at >= *at) => (
            h.tier.as_str().to_owned(),
            h.paid_until.clone(),
            h.generated_at.clone(),
        ),
        (_, Some((plan, until, at))) => (plan, Some(until), at),
        (None, None) => return None,
        (Some(_), None) => unreachable!("matched by the first arm"),
    };
    let lapsed = paid_until
        .as_deref()
        .and_then(parse_rfc3339)
        .is_some_and(|until| until <= now_ms);
    Some(if lapsed || tier == "free" {
        TierView {
            tier: "free".into(),
            paid_until: None,
            as_of,
        }
    } else {
        TierView {
            tier,
            paid_until,
            as_of,
        }
    })
}

impl Client {
    /// The tier for `status` (see `tier_view`).
    pub fn tier(&self) -> Result<Option<TierView>, Error> {
        let head = self.state.head_cache()?.and_then(|c| c.head);
        let record = load_record(&self.state)?;
        Ok(tier_view(head.as_ref(), record.as_ref(), now_ms()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::upgrade::fixtures::*;
    use crate::core::limits::Tier;
    use serde_json::json;

    fn head(tier: Tier, paid_until: Option<&str>, generated_at: &str) -> Head {
        let mut h: Head = serde_json::from_value(json!({
            "agent_id": agent().as_str(), "cursor": format!("sha256:{}", "0".repeat(64)),
            "prev_cursor": null, "changed": true, "seq": 1, "generated_at": generated_at,
            "ttl_sec": 600, "capsule_url": "/self/x/capsule.json",
            "writes": {"limit_24h": 5, "used_24h": 1, "remaining_24h": 4, "reset_at": null}
        }))
        .unwrap();
        h.tier = tier;
        h.paid_until = paid_until.map(str::to_owned);
        h
    }

    #[test]
    fn status_shows_the_newest_tier_known_locally() {
        assert_eq!(tier_view(None, None, NOW), None);
        let until = "2026-03-12T00:00:00Z";
        let h = head(Tier::Pro, Some(until), "2026-02-10T00:00:00Z");
        let v = tier_view(Some(&h), None, NOW).unwrap();
        assert_eq!(
            (v.tier.as_str(), v.paid_until.as_deref()),
            ("pro", Some(until))
        );
        // A head read before the credit loses to the credit.
        let old = head(Tier::Free, None, "2026-02-09T00:00:00Z");
        let mut r = record("plus", LATER);
        r.claimed = Some(
            json!({"plan": "plus", "paid_until": until, "credited_at": "2026-02-09T12:00:00Z"}),
        );
        let v = tier_view(Some(&old), Some(&r), NOW).unwrap();
        assert_eq!(
            (v.tier.as_str(), v.as_of.as_str()),
            ("plus", "2026-02-09T12:00:00Z")
        );
        // A later head wins (e.g. Plus bought during Pro).
        let v = tier_view(Some(&h), Some(&r), NOW).unwrap();
        assert_eq!(v.tier, "pro");
        // Lapsed: free, no paid_until.
        let v = tier_view(Some(&h), None, parse_rfc3339(until).unwrap()).unwrap();
        assert_eq!((v.tier.as_str(), v.paid_until), ("free", None));
    }
}
