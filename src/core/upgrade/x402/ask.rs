//! The x402 endpoint's query: `plan=pro|plus&agent_id=<64 hex>`, and
//! `renew=1` to buy again within an invoice's lifetime of a credit (without
//! it, an unpaid retry after a credit gets that credit back: a framework
//! retrying a request whose 200 was lost would otherwise pay twice).

use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::reason::{ReasonCode as R, Refusal};

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The agent credited.
    pub agent_id: AgentId,
    /// `pro` or `plus`.
    pub plan: Tier,
    /// `renew=1`: a new purchase even right after one.
    pub renew: bool,
}

fn bad(why: impl Into<String>) -> Refusal {
    Refusal::new(R::BadUpgradeRequest, why)
}

/// Reads the query: each parameter at most once, nothing else.
pub fn parse_query<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<Ask, Refusal> {
    let (mut agent, mut plan, mut renew) = (None, None, None);
    for (k, v) in pairs {
        let (k, v) = (k.as_ref(), v.as_ref().to_owned());
        let slot = match k {
            "agent_id" => &mut agent,
            "plan" => &mut plan,
            "renew" => &mut renew,
            other => {
                return Err(bad(format!(
                "unknown parameter {other:?}: the query is plan, agent_id and optionally renew=1"
            )))
            }
        };
        if slot.replace(v).is_some() {
            return Err(bad(format!("{k} is given twice")));
        }
    }
    let plan = match plan.as_deref() {
        Some("pro") => Tier::Pro,
        Some("plus") => Tier::Plus,
        _ => return Err(bad("plan must be pro or plus: ?plan=pro&agent_id=<64 hex>")),
    };
    let agent_id = agent
        .as_deref()
        .and_then(AgentId::parse)
        .ok_or_else(|| bad("agent_id must be the agent's id, 64 lowercase hex"))?;
    let renew = match renew.as_deref() {
        None => false,
        Some("1") => true,
        Some(_) => return Err(bad("renew takes only 1")),
    };
    Ok(Ask {
        agent_id,
        plan,
        renew,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";

    fn ask(q: &[(&str, &str)]) -> Result<Ask, Refusal> {
        parse_query(q.iter().copied())
    }

    #[test]
    fn plan_agent_and_renew() {
        let a = ask(&[("plan", "plus"), ("agent_id", ID)]).unwrap();
        assert_eq!(
            (a.plan, a.agent_id.as_str(), a.renew),
            (Tier::Plus, ID, false)
        );
        assert!(
            ask(&[("agent_id", ID), ("plan", "pro"), ("renew", "1")])
                .unwrap()
                .renew
        );
    }

    #[test]
    fn everything_else_is_a_bad_request() {
        for q in [
            vec![("plan", "pro")],
            vec![("agent_id", ID)],
            vec![("plan", "free"), ("agent_id", ID)],
            vec![("plan", "PRO"), ("agent_id", ID)],
            vec![("plan", "pro"), ("agent_id", &ID[1..])],
            vec![("plan", "pro"), ("agent_id", ID), ("renew", "true")],
            vec![("plan", "pro"), ("agent_id", ID), ("plan", "pro")],
            vec![("plan", "pro"), ("agent_id", ID), ("chain", "base")],
        ] {
            let r = ask(&q).unwrap_err();
            assert_eq!(r.code, R::BadUpgradeRequest, "{q:?}");
            assert!(r.detail.is_some(), "{q:?}");
        }
    }
}
