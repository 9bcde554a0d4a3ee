//! The contract between the Worker and its Durable Objects, both halves in
//! one file: every internal call is a typed value here, encoded into a
//! request by the caller and decoded by the object, so no URL, header name
//! or body shape of the internal protocol is spelled anywhere else.
//!
//! | call                 | from            | to                      |
//! |----------------------|-----------------|-------------------------|
//! | [`AgentCall::Write`] | write handler   | the agent's object      |
//! | [`AgentCall::Export`]| export handler  | the agent's object      |
//! | [`Reserve`]          | the agent object| the client address's quota object |
//!
//! The objects are not reachable from outside the Worker, so they trust
//! these headers (the agent and "now" in particular).

use super::clock;
use super::config::{AGENT_DO_BINDING, IP_QUOTA_DO_BINDING};
use crate::core::crypto::AgentId;
use serde::{Deserialize, Serialize};
use worker::js_sys::Uint8Array;
use worker::{Env, Headers, Method, Request, RequestInit, Response, ResponseBuilder};

const WRITE_URL: &str = "https://agent.do/write";
const EXPORT_URL: &str = "https://agent.do/export";
const RESERVE_URL: &str = "https://ip-quota.do/reserve";
/// The agent (a Durable Object does not reliably know its own name).
const AGENT_HEADER: &str = "x-selfcap-agent";
/// The Worker's "now", so both halves of one request agree on the time.
const NOW_HEADER: &str = "x-selfcap-now";
/// The client's quota bucket (`core::quota::ip_bucket`).
const IP_HEADER: &str = "x-selfcap-ip";
/// Test-only fault injection: skip this write's first KV mirror attempt.
const FAIL_MIRROR_HEADER: &str = "x-selfcap-fail-mirror";

/// A call to an agent's Durable Object.
pub enum AgentCall {
    /// Decide and (if accepted) commit a PUT.
    Write(WriteCall),
    /// Assemble the export bundle from the object's storage.
    Export,
}

/// A PUT that passed the Worker's stateless pre-check.
pub struct WriteCall {
    /// The agent in the path.
    pub agent: AgentId,
    /// The request's "now" (Unix ms).
    pub now_ms: u64,
    /// The client's new-agent quota bucket.
    pub ip_bucket: String,
    /// Test hook: leave KV stale so the alarm retry runs.
    pub fail_mirror: bool,
    /// The body, already capped.
    pub body: Vec<u8>,
}

/// What the agent object answered a write: relayed to the client as is.
pub struct Relayed {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Vec<u8>,
    /// `Retry-After`, when the decision carried a wait.
    pub retry_after: Option<String>,
}

/// An export bundle and its entity tag.
pub struct Exported {
    /// The bundle's JSON.
    pub body: Vec<u8>,
    /// The chain head hash.
    pub etag: String,
}

fn agent_stub(env: &Env, agent: &AgentId) -> worker::Result<worker::Stub> {
    env.durable_object(AGENT_DO_BINDING)?
        .id_from_name(agent.as_str())?
        .get_stub()
}

/// Worker side: sends a write to the agent's object.
pub async fn write(env: &Env, call: WriteCall) -> worker::Result<Relayed> {
    let headers = Headers::new();
    headers.set(NOW_HEADER, &call.now_ms.to_string())?;
    headers.set(IP_HEADER, &call.ip_bucket)?;
    headers.set(AGENT_HEADER, call.agent.as_str())?;
    if call.fail_mirror {
        headers.set(FAIL_MIRROR_HEADER, "1")?;
    }
    headers.set("Content-Type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(Uint8Array::from(call.body.as_slice()).into()));
    let req = Request::new_with_init(WRITE_URL, &init)?;
    let mut resp = agent_stub(env, &call.agent)?
        .fetch_with_request(req)
        .await?;
    Ok(Relayed {
        status: resp.status_code(),
        retry_after: resp.headers().get("Retry-After")?,
        body: resp.bytes().await?,
    })
}

/// Worker side: asks the agent's object for its export bundle; `None`
/// before its first write.
pub async fn export(env: &Env, agent: &AgentId) -> worker::Result<Option<Exported>> {
    let mut init = RequestInit::new();
    init.with_method(Method::Get);
    let req = Request::new_with_init(EXPORT_URL, &init)?;
    let mut resp = agent_stub(env, agent)?.fetch_with_request(req).await?;
    match resp.status_code() {
        200 => Ok(Some(Exported {
            etag: resp.headers().get("ETag")?.unwrap_or_default(),
            body: resp.bytes().await?,
        })),
        404 => Ok(None),
        s => Err(format!("agent DO export answered {s}").into()),
    }
}

impl AgentCall {
    /// Object side: reads a call; `None` for anything that is not one.
    pub async fn read(mut req: Request) -> worker::Result<Option<AgentCall>> {
        let url = req.url()?;
        let is = |u: &str| url.as_str() == u;
        match req.method() {
            Method::Post if is(WRITE_URL) => {
                let header = |name: &str| req.headers().get(name).ok().flatten();
                let agent = header(AGENT_HEADER)
                    .and_then(|a| AgentId::parse(&a))
                    .ok_or("agent DO: missing agent header")?;
                let call = WriteCall {
                    now_ms: header(NOW_HEADER)
                        .and_then(|v| clock::parse_ms(&v))
                        .unwrap_or_else(clock::system_now_ms),
                    ip_bucket: header(IP_HEADER).unwrap_or_else(|| "unknown".into()),
                    fail_mirror: header(FAIL_MIRROR_HEADER).is_some(),
                    agent,
                    body: req.bytes().await?,
                };
                Ok(Some(AgentCall::Write(call)))
            }
            Method::Get if is(EXPORT_URL) => Ok(Some(AgentCall::Export)),
            _ => Ok(None),
        }
    }

    /// Object side: the answer to an export.
    pub fn export_answer(found: Option<Exported>) -> Response {
        match found {
            Some(e) => {
                let headers = Headers::new();
                let _ = headers.set("ETag", &e.etag);
                ResponseBuilder::new()
                    .with_status(200)
                    .with_headers(headers)
                    .fixed(e.body)
            }
            None => ResponseBuilder::new().with_status(404).empty(),
        }
    }
}

/// Object side: the answer to anything that is not a call.
pub fn not_a_call() -> Response {
    ResponseBuilder::new().with_status(404).empty()
}

/// A new-agent slot request to the quota object of one client address.
#[derive(Serialize, Deserialize)]
pub struct Reserve {
    /// The agent whose first write is being accepted.
    pub agent_id: String,
    /// "Now" (Unix ms).
    pub now_ms: u64,
    /// The tier's new agents per address per 24 h.
    pub limit: u32,
}

#[derive(Serialize, Deserialize)]
struct ReserveAnswer {
    /// `None`: granted. `Some(t)`: refused until `t` (Unix ms).
    reset_at_ms: Option<u64>,
}

impl Reserve {
    /// Agent-object side: asks the quota object of `ip_bucket`.
    /// `Ok(Err(reset_at_ms))`: the address is out of slots until then.
    pub async fn send(&self, env: &Env, ip_bucket: &str) -> worker::Result<Result<(), u64>> {
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_body(Some(serde_json::to_string(self)?.into()));
        let stub = env
            .durable_object(IP_QUOTA_DO_BINDING)?
            .id_from_name(ip_bucket)?
            .get_stub()?;
        let mut resp = stub
            .fetch_with_request(Request::new_with_init(RESERVE_URL, &init)?)
            .await?;
        if resp.status_code() != 200 {
            return Err(format!("ip quota DO answered {}", resp.status_code()).into());
        }
        let answer: ReserveAnswer = resp.json().await?;
        Ok(answer.reset_at_ms.map_or(Ok(()), Err))
    }

    /// Quota-object side: reads a request; `None` for anything else.
    pub async fn read(mut req: Request) -> worker::Result<Option<Reserve>> {
        if req.method() != Method::Post || req.url()?.as_str() != RESERVE_URL {
            return Ok(None);
        }
        Ok(Some(req.json().await?))
    }

    /// Quota-object side: the answer.
    pub fn answer(result: Result<(), u64>) -> worker::Result<Response> {
        let body = serde_json::to_vec(&ReserveAnswer {
            reset_at_ms: result.err(),
        })?;
        Ok(ResponseBuilder::new().with_status(200).fixed(body))
    }
}
