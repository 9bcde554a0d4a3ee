//! The operator API (docs/PROTOCOL.md §17), as `selfcap admin` and the
//! local MCP server's operator tools ask it: a page of agents (or every
//! page, following cursors), one agent's record, the deployment's totals.
//!
//! The credential is a bearer token the caller hands over as an
//! [`AdminToken`] (the CLI and `selfcap mcp` read it from
//! `SELFCAP_ADMIN_TOKEN`, never from an argument, so it never lands in a
//! shell's history or a process listing). It is sent only in the
//! `Authorization` header of these requests and never appears in an error
//! or a `Debug` print. A token the service could never accept (shorter than
//! its minimum) is refused here, with nothing sent.

use super::exchange::{error_code, read_error};
use super::http::{Request, Response};
use super::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
pub use crate::core::operator::admin::{AgentRecord, AgentsPage, HeadFacts};
use crate::core::operator::auth::MIN_TOKEN_CHARS;
use crate::core::urls::ADMIN_PREFIX;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::fmt;

/// The environment variable the operator's token is read from.
pub const ADMIN_TOKEN_ENV: &str = "SELFCAP_ADMIN_TOKEN";

/// Most pages `--all` follows before it calls the list broken (a million
/// agents at the service's largest page size).
pub const MAX_PAGES: usize = 1000;

/// The deployment's operator token (the Worker secret `SELFCAP_ADMIN_TOKEN`).
#[derive(Clone)]
pub struct AdminToken(String);

impl AdminToken {
    /// The token as given (surrounding whitespace dropped: an `export` from
    /// a file often keeps a newline). One shorter than the service's
    /// minimum is refused: the service ignores such a token, so the API
    /// would answer as if it were off.
    pub fn new(token: &str) -> Result<AdminToken, Error> {
        let t = token.trim();
        if t.is_empty() {
            return Err(Error::local(format!(
                "{ADMIN_TOKEN_ENV} is empty: set it to the deployment's operator token"
            )));
        }
        if t.chars().count() < MIN_TOKEN_CHARS {
            return Err(Error::local(format!(
                "{ADMIN_TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters: no deployment \
                 accepts such a token (nothing was sent)"
            )));
        }
        Ok(AdminToken(t.to_owned()))
    }

    /// The token from `value` (an environment variable's), or the error
    /// that says how to provide it.
    pub fn from_env_value(value: Option<&str>) -> Result<AdminToken, Error> {
        match value {
            Some(v) => AdminToken::new(v),
            None => Err(Error::local(format!(
                "no operator token: set {ADMIN_TOKEN_ENV} in the environment (it is never \
                 taken as an argument); nothing was sent"
            ))),
        }
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(…)")
    }
}

/// What to ask `GET /api/v1/admin/agents` for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentsQuery {
    /// Where the page starts (the last page's `cursor`).
    pub cursor: Option<String>,
    /// Agents to read for the page (1..=1000; the service's default
    /// otherwise).
    pub limit: Option<u32>,
    /// Only agents on this tier now.
    pub tier: Option<Tier>,
    /// Only agents refused in the last 24 hours.
    pub refused_24h: bool,
}

impl AgentsQuery {
    /// The query string, `?` included (empty when nothing is asked).
    fn query(&self) -> String {
        let mut q = Vec::new();
        if let Some(c) = &self.cursor {
            q.push(format!("cursor={}", query_value(c)));
        }
        if let Some(n) = self.limit {
            q.push(format!("limit={n}"));
        }
        if let Some(t) = self.tier {
            q.push(format!("tier={}", t.as_str()));
        }
        if self.refused_24h {
            q.push("refused=24h".into());
        }
        if q.is_empty() {
            String::new()
        } else {
            format!("?{}", q.join("&"))
        }
    }
}

impl Client {
    /// One page of agents.
    pub fn admin_agents(&self, token: &AdminToken, q: &AgentsQuery) -> Result<AgentsPage, Error> {
        let body = self.admin_get(token, &format!("agents{}", q.query()), None)?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("the agents page is not what §17 says: {e}")))
    }

    /// Every page from `q.cursor` on, merged into one (the last page's
    /// `as_of`, `scanned` summed, `cursor` `None`). `on_page` sees each
    /// page as it arrives (progress). A cursor the service repeats is an
    /// error, not a loop.
    pub fn admin_agents_all(
        &self,
        token: &AdminToken,
        q: &AgentsQuery,
        mut on_page: impl FnMut(&AgentsPage),
    ) -> Result<AgentsPage, Error> {
        let mut q = q.clone();
        let mut all = AgentsPage {
            agents: Vec::new(),
            cursor: None,
            scanned: 0,
            as_of: String::new(),
        };
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let page = self.admin_agents(token, &q)?;
            on_page(&page);
            all.agents.extend(page.agents);
            all.scanned += page.scanned;
            all.as_of = page.as_of;
            match page.cursor {
                None => return Ok(all),
                Some(c) if !seen.insert(c.clone()) => {
                    return Err(Error::Protocol(format!(
                        "the agents list gave the cursor {c:?} twice"
                    )))
                }
                Some(c) => q.cursor = Some(c),
            }
        }
        Err(Error::Protocol(format!(
            "the agents list did not end within {MAX_PAGES} pages"
        )))
    }

    /// One agent's operator record.
    pub fn admin_agent(&self, token: &AdminToken, agent: &AgentId) -> Result<AgentRecord, Error> {
        let body = self.admin_get(token, &format!("agents/{agent}"), Some(agent))?;
        let r: AgentRecord = serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("the agent record is not what §17 says: {e}")))?;
        if r.agent_id != agent.as_str() {
            return Err(Error::Protocol(
                "the agent record is another agent's".into(),
            ));
        }
        Ok(r)
    }

    /// The deployment's totals (`GET /api/v1/admin/stats`), as served.
    pub fn admin_stats(&self, token: &AdminToken) -> Result<serde_json::Value, Error> {
        let body = self.admin_get(token, "stats", None)?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("the stats body is not JSON: {e}")))
    }

    /// `GET {ADMIN_PREFIX}{rest}` with the token; the 200's body, or the
    /// error its answer means (`agent`: the agent a 404 is about).
    fn admin_get(
        &self,
        token: &AdminToken,
        rest: &str,
        agent: Option<&AgentId>,
    ) -> Result<Vec<u8>, Error> {
        let req = Request::get(self.service_url(&format!("{ADMIN_PREFIX}{rest}"))?)
            .header("authorization", format!("Bearer {}", token.0));
        let (resp, _) = self.exchange(&req)?;
        if resp.status == 200 {
            return Ok(resp.body);
        }
        Err(admin_error(&req, &resp, agent))
    }
}

/// What a refused operator request means. The credential refusals have
/// their own error ([`Error::AdminAuth`], exit 6 like any refused
/// credential); a `not_found` is either an agent the service never heard
/// of or, for a list or the totals, an API that is off (a deployment
/// without a token or Access answers every admin path so) or older than
/// the route.
fn admin_error(req: &Request, resp: &Response, agent: Option<&AgentId>) -> Error {
    let code = error_code(resp);
    let detail = serde_json::from_slice::<serde_json::Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("detail").and_then(|d| d.as_str()).map(str::to_owned));
    let path = req.url.split('?').next().unwrap_or(&req.url);
    match (resp.status, code.as_deref()) {
        (401 | 403, Some(c @ ("admin_auth_required" | "admin_auth_invalid"))) => {
            Error::AdminAuth(format!(
                "the service refused the operator credential: GET {path} answered HTTP {} {c}{}: {}",
                resp.status,
                detail.map(|d| format!(" ({d})")).unwrap_or_default(),
                if c == "admin_auth_invalid" {
                    format!("{ADMIN_TOKEN_ENV} is not this deployment's operator token")
                } else {
                    format!("the token did not arrive; check {ADMIN_TOKEN_ENV} and any proxy in between")
                }
            ))
        }
        (404, Some("not_found")) => match agent {
            Some(a) => Error::NotFound(format!(
                "the service has never heard from agent {a} (not_found)"
            )),
            None => Error::NotFound(format!(
                "GET {path} answered 404 not_found: the operator API is off on this deployment \
                 (no SELFCAP_ADMIN_TOKEN secret there), or the deployment is older than this route"
            )),
        },
        (400, Some(c @ ("bad_query" | "bad_agent_id"))) => Error::local(format!(
            "the service refused the request ({c}){}",
            detail.map(|d| format!(": {d}")).unwrap_or_default()
        )),
        _ => read_error(req, resp),
    }
}

/// Everything but RFC 3986's unreserved characters is percent-encoded in a
/// query value (a list cursor is opaque text).
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` percent-encoded for a query value.
fn query_value(s: &str) -> String {
    utf8_percent_encode(s, QUERY_VALUE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::http::{Transport, TransportError};
    use crate::client::{BackoffPolicy, StateDir};
    use std::cell::RefCell;
    use std::rc::Rc;

    const BASE: &str = "http://svc.test";
    const TOKEN: &str = "op-7f3a9c7f3a9c7f3a9c7f3a9c7f3a9c7f3a9c";
    const A: &str = "aa34750f98bd59fcfc946da45aaabe933be154a4b5094e1c4abf42866505f3c9";
    const B: &str = "bb34750f98bd59fcfc946da45aaabe933be154a4b5094e1c4abf42866505f3c9";

    /// A stand-in operator API: three agents, pages of `limit` (the cursor
    /// is the index to start from), the stats route, the token checked as
    /// the service checks it.
    struct Fake {
        log: Rc<RefCell<Vec<Request>>>,
    }

    fn entry(id: &str, tier: &str, refused: u64) -> serde_json::Value {
        serde_json::json!({"agent_id": id, "tier": tier, "paid_until": null,
            "last_write_at": "2026-02-10T00:00:00Z", "refusals_24h": refused, "disputed_keys": 0})
    }

    fn json(status: u16, v: serde_json::Value) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: v.to_string().into_bytes(),
        }
    }

    impl Transport for Fake {
        fn send(&self, req: &Request) -> Result<Response, TransportError> {
            self.log.borrow_mut().push(req.clone());
            let auth = req
                .headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.as_str());
            match auth {
                None => {
                    return Ok(json(
                        401,
                        serde_json::json!({"error": "admin_auth_required"}),
                    ))
                }
                Some(a) if a != format!("Bearer {TOKEN}") => {
                    return Ok(json(
                        403,
                        serde_json::json!({"error": "admin_auth_invalid",
                        "detail": "the bearer token is not this deployment's operator token"}),
                    ))
                }
                _ => {}
            }
            let rest = req
                .url
                .strip_prefix(&format!("{BASE}{ADMIN_PREFIX}"))
                .unwrap();
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let param = |k: &str| {
                query
                    .split('&')
                    .find_map(|p| p.strip_prefix(&format!("{k}=")))
                    .map(str::to_owned)
            };
            let all = [
                entry(A, "free", 1),
                entry(B, "pro", 0),
                entry(&"cc".repeat(32), "free", 0),
            ];
            Ok(match path {
                "agents" => {
                    let from: usize = param("cursor")
                        .map(|c| c.strip_prefix("at%3A").unwrap().parse().unwrap())
                        .unwrap_or(0);
                    let limit: usize = param("limit").map_or(100, |l| l.parse().unwrap());
                    let end = (from + limit).min(all.len());
                    let agents: Vec<_> = all[from..end]
                        .iter()
                        .filter(|e| param("tier").is_none_or(|t| e["tier"] == t.as_str()))
                        .filter(|e| param("refused").is_none() || e["refusals_24h"] != 0)
                        .cloned()
                        .collect();
                    json(
                        200,
                        serde_json::json!({"agents": agents,
                        "cursor": (end < all.len()).then(|| format!("at:{end}")),
                        "scanned": end - from, "as_of": "2026-02-10T01:00:00Z"}),
                    )
                }
                "stats" => json(200, serde_json::json!({"agents": {"total": 3}})),
                p if p == format!("agents/{B}") => json(
                    200,
                    serde_json::json!({
                    "agent_id": B, "summary": entry(B, "pro", 0),
                    "meta": {"agent_id": B, "tier": "pro", "paid_until": "2026-03-10T00:00:00Z",
                        "writes": {"total": 2, "first_at": null, "last_at": null,
                            "in_window": {"used": 1, "limit": 500, "reset_at": null}},
                        "refusals": {"total": 1, "last_24h": 0,
                            "by_reason_code": {"unsafe_content": 1},
                            "last": {"at": "2026-02-08T00:00:00Z", "reason_codes": ["unsafe_content"]}},
                        "history": null, "keys": null, "as_of": "2026-02-10T00:00:00Z"},
                    "head": {"cursor": format!("sha256:{}", "0".repeat(64)), "seq": 2,
                        "updated_at": "2026-02-10T00:00:00Z", "private": true}}),
                ),
                _ => json(404, serde_json::json!({"error": "not_found"})),
            })
        }
    }

    fn client(log: &Rc<RefCell<Vec<Request>>>) -> Client {
        Client::new(StateDir::new("/nonexistent/selfcap"))
            .with_base_url(Some(BASE.into()))
            .with_transport(Box::new(Fake {
                log: Rc::clone(log),
            }))
            .with_policy(BackoffPolicy::no_retries())
    }

    fn token() -> AdminToken {
        AdminToken::new(TOKEN).unwrap()
    }

    #[test]
    fn a_missing_or_short_token_is_refused_before_anything_is_sent() {
        for e in [
            AdminToken::from_env_value(None).unwrap_err(),
            AdminToken::from_env_value(Some(" \n")).unwrap_err(),
            AdminToken::from_env_value(Some("too-short")).unwrap_err(),
        ] {
            assert_eq!(e.exit_code(), crate::client::ExitCode::Local, "{e}");
            assert!(e.to_string().contains(ADMIN_TOKEN_ENV), "{e}");
        }
        // Never printed, not even by Debug.
        let t = AdminToken::new(&format!("{TOKEN}\n")).unwrap();
        assert!(!format!("{t:?}").contains("7f3a"));
        assert_eq!(t.0, TOKEN);
    }

    #[test]
    fn a_page_with_filters_and_every_page_by_cursor() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let c = client(&log);
        let q = AgentsQuery {
            limit: Some(2),
            ..AgentsQuery::default()
        };
        let page = c.admin_agents(&token(), &q).unwrap();
        assert_eq!(page.agents.len(), 2);
        assert_eq!(page.cursor.as_deref(), Some("at:2"));
        assert_eq!(
            log.borrow()[0].url,
            format!("{BASE}/api/v1/admin/agents?limit=2")
        );

        let mut pages = 0;
        let all = c.admin_agents_all(&token(), &q, |_| pages += 1).unwrap();
        assert_eq!((pages, all.agents.len(), all.scanned), (2, 3, 3));
        assert_eq!(all.cursor, None);
        // The cursor went back percent-encoded.
        assert_eq!(
            log.borrow().last().unwrap().url,
            format!("{BASE}/api/v1/admin/agents?cursor=at%3A2&limit=2")
        );

        let q = AgentsQuery {
            tier: Some(Tier::Pro),
            refused_24h: false,
            ..AgentsQuery::default()
        };
        let pro = c.admin_agents(&token(), &q).unwrap();
        assert_eq!(pro.agents.len(), 1);
        assert_eq!(pro.agents[0].agent_id, B);
        let q = AgentsQuery {
            refused_24h: true,
            ..AgentsQuery::default()
        };
        let refused = c.admin_agents(&token(), &q).unwrap();
        assert_eq!(refused.agents[0].agent_id, A);
        assert!(log.borrow().last().unwrap().url.ends_with("?refused=24h"));
    }

    #[test]
    fn one_agent_and_the_totals() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let c = client(&log);
        let b = AgentId::parse(B).unwrap();
        let r = c.admin_agent(&token(), &b).unwrap();
        assert_eq!(r.meta.refusals.by_reason_code["unsafe_content"], 1);
        assert!(r.head.unwrap().private);
        let a = AgentId::parse(A).unwrap();
        let missing = c.admin_agent(&token(), &a).unwrap_err();
        assert_eq!(missing.exit_code(), crate::client::ExitCode::NotFound);
        assert!(missing.to_string().contains(A), "{missing}");
        let stats = c.admin_stats(&token()).unwrap();
        assert_eq!(stats["agents"]["total"], 3);
    }

    #[test]
    fn a_wrong_token_is_a_credential_refusal_that_never_shows_the_token() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let c = client(&log);
        let wrong = AdminToken::new(&"x".repeat(40)).unwrap();
        let e = c.admin_stats(&wrong).unwrap_err();
        assert!(matches!(e, Error::AdminAuth(_)), "{e:?}");
        assert_eq!(e.exit_code(), crate::client::ExitCode::Signature);
        assert!(e.to_string().contains("admin_auth_invalid"), "{e}");
        assert!(!e.to_string().contains("xxxx"), "{e}");
        // Sent once: a refused credential is never retried.
        assert_eq!(log.borrow().len(), 1);
    }
}
