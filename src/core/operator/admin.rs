//! The operator API's routes and its gate (`/api/v1/admin/…`), decided
//! before any storage is read.
//!
//! Order: off (no credential configured) answers every admin path, method
//! and preflight with the `not_found` of an unknown route; on, the
//! credential is checked before the path, so nobody without it learns which
//! admin paths exist; then the path and method.

use super::auth::{bearer, read_access_token, AccessToken, AdminConfig};
use super::meta::{Filter, ListEntry, MetaBody};
use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::reason::{ReasonCode, Refusal};
use serde::{Deserialize, Serialize};

/// Agents per page when `limit` is not given.
pub const DEFAULT_PAGE: u64 = 100;
/// The most agents one page may ask for (KV lists at most 1000 keys a call).
pub const MAX_PAGE: u64 = 1000;

/// What an operator asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `GET /api/v1/admin/agents`: one page of agents.
    Agents,
    /// `GET /api/v1/admin/agents/{agent_id}`: one agent's operator record.
    Agent(AgentId),
    /// `GET /api/v1/admin/stats`: the deployment's totals.
    Stats,
}

/// A route the gate let through, and whether it is a `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminRequest {
    /// Which.
    pub route: AdminRoute,
    /// `HEAD`: the headers of the `GET` answer alone.
    pub head_only: bool,
}

/// The path after `core::urls::ADMIN_PREFIX` and the method (upper case) as an
/// operator request, or its refusal (404 `not_found`, 405, 400
/// `bad_agent_id`).
pub fn route(rest: &str, method: &str) -> Result<AdminRequest, Refusal> {
    let route = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["agents"] => AdminRoute::Agents,
        ["stats"] => AdminRoute::Stats,
        ["agents", id] if !id.is_empty() => match AgentId::parse(id) {
            Some(agent) => AdminRoute::Agent(agent),
            None => return Err(Refusal::code(ReasonCode::BadAgentId)),
        },
        _ => return Err(Refusal::code(ReasonCode::NotFound)),
    };
    match method {
        "GET" | "HEAD" => Ok(AdminRequest {
            route,
            head_only: method == "HEAD",
        }),
        _ => Err(Refusal::code(ReasonCode::MethodNotAllowed)),
    }
}

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No credential is configured: the API does not exist here.
    Off,
    /// The bearer token matched.
    Token,
    /// An Access token whose claims passed; the Worker verifies its
    /// signature against the team's keys before letting it through.
    Access(AccessToken),
    /// Refused: 401 `admin_auth_required` or 403 `admin_auth_invalid`.
    Refused(Refusal),
}

/// The gate for a request with these headers at `now_s` (Unix seconds).
/// A matching bearer token wins; otherwise an Access token, if Access is
/// configured, is read; otherwise a presented credential is invalid and an
/// absent one required.
pub fn gate(
    cfg: &AdminConfig,
    authorization: Option<&str>,
    access_jwt: Option<&str>,
    now_s: u64,
) -> Gate {
    if !cfg.is_on() {
        return Gate::Off;
    }
    let token = authorization.and_then(bearer);
    if token.is_some_and(|t| cfg.token_matches(t)) {
        return Gate::Token;
    }
    if let (Some(jwt), Some(access)) = (access_jwt, cfg.access.as_ref()) {
        return match read_access_token(jwt, access, now_s) {
            Ok(t) => Gate::Access(t),
            Err(p) => Gate::Refused(Refusal::new(ReasonCode::AdminAuthInvalid, p.detail())),
        };
    }
    if authorization.is_some() {
        return Gate::Refused(Refusal::new(
            ReasonCode::AdminAuthInvalid,
            "the bearer token is not this deployment's operator token",
        ));
    }
    Gate::Refused(Refusal::code(ReasonCode::AdminAuthRequired))
}

/// `GET /api/v1/admin/agents`'s query: `cursor` (the last page's), `limit`
/// (1..=1000, 100 by default), `tier` (`free`, `plus`, `pro`) and
/// `refused=24h`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Where the page starts (KV's list cursor, as the last page gave it).
    pub cursor: Option<String>,
    /// Keys to read for this page.
    pub limit: u64,
    /// Which agents of them to show.
    pub filter: Filter,
}

impl ListQuery {
    /// Reads the query pairs; a bad or repeated parameter is a 400
    /// `bad_query` naming it, an unknown one too.
    pub fn parse<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ListQuery, Refusal> {
        let bad = |d: &str| Refusal::new(ReasonCode::BadQuery, d.to_owned());
        let mut q = ListQuery {
            limit: DEFAULT_PAGE,
            ..ListQuery::default()
        };
        let mut seen = Vec::new();
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if seen.contains(&k.to_owned()) {
                return Err(bad(&format!("{k} is given twice")));
            }
            seen.push(k.to_owned());
            match k {
                "cursor" if !v.is_empty() => q.cursor = Some(v.to_owned()),
                "cursor" => {}
                "limit" => {
                    q.limit = v
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (1..=MAX_PAGE).contains(n))
                        .ok_or_else(|| bad("limit is 1..1000"))?
                }
                "tier" => {
                    q.filter.tier = Some(match v {
                        "free" => Tier::Free,
                        "plus" => Tier::Plus,
                        "pro" => Tier::Pro,
                        _ => return Err(bad("tier is free, plus or pro")),
                    })
                }
                "refused" if v == "24h" => q.filter.refused_24h = true,
                "refused" => return Err(bad("refused is 24h")),
                _ => {
                    return Err(bad(&format!(
                        "unknown parameter {k}: the list takes cursor, limit, tier and refused"
                    )))
                }
            }
        }
        Ok(q)
    }
}

/// `GET /api/v1/admin/agents`: one page of agents (the client merges every
/// page into one of these too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentsPage {
    /// The agents of the page that pass the filters, in agent-id order.
    pub agents: Vec<ListEntry>,
    /// The next page's cursor; `None` on the last page.
    pub cursor: Option<String>,
    /// Agents read for the page (a filtered page may show fewer).
    pub scanned: u64,
    /// When the service answered.
    pub as_of: String,
}

/// `GET /api/v1/admin/agents/{agent_id}`: one agent's operator record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent.
    pub agent_id: String,
    /// Its list entry.
    pub summary: ListEntry,
    /// Its meta.json as of the request.
    pub meta: MetaBody,
    /// What its head says (`None` before its first accepted write); private
    /// capsules included: the operator runs the service.
    pub head: Option<HeadFacts>,
}

/// The head facts of an [`AgentRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadFacts {
    /// The current cursor.
    pub cursor: String,
    /// The current seq.
    pub seq: u64,
    /// When it was written.
    pub updated_at: String,
    /// Whether the capsule is private.
    pub private: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef-operator";
    const ID: &str = "ab34750f98bd59fcfc946da45aaabe933be154a4b5094e1c4abf42866505f3c9";

    fn on() -> AdminConfig {
        AdminConfig::of(Some(TOKEN), None, None).0
    }

    #[test]
    fn off_answers_nothing_and_on_checks_the_credential_first() {
        let off = AdminConfig::of(None, None, None).0;
        assert_eq!(
            gate(&off, Some(&format!("Bearer {TOKEN}")), None, 0),
            Gate::Off
        );
        let cfg = on();
        assert_eq!(
            gate(&cfg, Some(&format!("Bearer {TOKEN}")), None, 0),
            Gate::Token
        );
        assert_eq!(
            gate(&cfg, Some(&format!("bearer  {TOKEN} ")), None, 0),
            Gate::Token
        );
        let code = |g: Gate| match g {
            Gate::Refused(r) => r.code,
            g => panic!("{g:?}"),
        };
        assert_eq!(
            code(gate(&cfg, None, None, 0)),
            ReasonCode::AdminAuthRequired
        );
        for wrong in [
            "Bearer nope",
            &format!("Bearer {TOKEN}x"),
            &format!("Basic {TOKEN}"),
            "Bearer",
        ] {
            assert_eq!(
                code(gate(&cfg, Some(wrong), None, 0)),
                ReasonCode::AdminAuthInvalid,
                "{wrong}"
            );
        }
        // Access not configured here: its header alone is no credential.
        assert_eq!(
            code(gate(&cfg, None, Some("a.b.c"), 0)),
            ReasonCode::AdminAuthRequired
        );
        let with_access =
            AdminConfig::of(None, Some("https://t.cloudflareaccess.com"), Some("aud"));
        assert_eq!(
            code(gate(&with_access.0, None, Some("a.b.c"), 0)),
            ReasonCode::AdminAuthInvalid
        );
    }

    #[test]
    fn routes_and_methods() {
        assert_eq!(route("agents", "GET").unwrap().route, AdminRoute::Agents);
        assert!(route("agents", "HEAD").unwrap().head_only);
        assert_eq!(route("stats", "GET").unwrap().route, AdminRoute::Stats);
        assert_eq!(
            route(&format!("agents/{ID}"), "GET").unwrap().route,
            AdminRoute::Agent(AgentId::parse(ID).unwrap())
        );
        let code = |r: Result<AdminRequest, Refusal>| r.unwrap_err().code;
        assert_eq!(code(route("agents/xyz", "GET")), ReasonCode::BadAgentId);
        for p in ["", "agents/", "agent", "stats/x", &format!("agents/{ID}/x")] {
            assert_eq!(code(route(p, "GET")), ReasonCode::NotFound, "{p}");
        }
        assert_eq!(code(route("agents", "POST")), ReasonCode::MethodNotAllowed);
    }

    #[test]
    fn the_list_query() {
        let q = ListQuery::parse([("limit", "2"), ("tier", "pro"), ("refused", "24h")]).unwrap();
        assert_eq!(q.limit, 2);
        assert_eq!(q.filter.tier, Some(Tier::Pro));
        assert!(q.filter.refused_24h);
        assert_eq!(
            ListQuery::parse(Vec::<(&str, &str)>::new()).unwrap().limit,
            DEFAULT_PAGE
        );
        assert_eq!(
            ListQuery::parse([("cursor", "abc")])
                .unwrap()
                .cursor
                .as_deref(),
            Some("abc")
        );
        for bad in [
            vec![("limit", "0")],
            vec![("limit", "1001")],
            vec![("limit", "x")],
            vec![("tier", "gold")],
            vec![("refused", "1")],
            vec![("limit", "1"), ("limit", "2")],
            vec![("sort", "x")],
        ] {
            assert_eq!(
                ListQuery::parse(bad.clone()).unwrap_err().code,
                ReasonCode::BadQuery,
                "{bad:?}"
            );
        }
    }
}
