//! The write path's call into an agent's Durable Object: a PUT (or a key
//! event) whose envelope authenticated, and what the object answered. Both
//! halves, as for the calls in `do_wire`. The entry Worker sends a PUT that
//! passed its pre-check straight to the object through a cross-script
//! binding of `AGENT_DO` to the write Worker's class (one hop, not two);
//! the write Worker sends the rest (a key event, a PUT signed by a rotated
//! key, a PUT the entry left to it, MCP's `self_submit`). The object side
//! is compiled into the write Worker only.
//!
//! The objects are not reachable from outside the Workers, so they trust
//! these headers (the agent and "now" in particular) and the caller's
//! word that the body's signature verified.

use super::body;
use super::clock;
use super::config::{Config, AGENT_DO_BINDING};
use super::request::Incoming;
use crate::core::crypto::AgentId;
use crate::core::quota::ip_bucket;
use worker::js_sys::Uint8Array;
#[cfg(feature = "write")]
use worker::Response;
use worker::{Env, Headers, Method, Request, RequestInit};

const WRITE_URL: &str = "https://agent.do/write";
#[cfg(feature = "worker")]
const KEY_EVENT_URL: &str = "https://agent.do/keys";
/// The agent (a Durable Object does not reliably know its own name).
const AGENT_HEADER: &str = "x-selfcap-agent";
/// The caller's "now", so both halves of one request agree on the time.
const NOW_HEADER: &str = "x-selfcap-now";
/// The client's quota bucket (`core::quota::ip_bucket`).
const IP_HEADER: &str = "x-selfcap-ip";
/// Test-only (honoured with `SELFCAP_TEST_CLOCK=1`), on a public PUT: fail
/// this write's first KV mirror attempt so the alarm retry path can be
/// observed.
const TEST_FAIL_MIRROR_HEADER: &str = "x-selfcap-test-fail-mirror";
/// Test-only fault injection: skip this write's first KV mirror attempt.
const FAIL_MIRROR_HEADER: &str = "x-selfcap-fail-mirror";
/// On an accepted write's answer: the seq it committed.
const WRITTEN_SEQ_HEADER: &str = "x-selfcap-written-seq";
/// On an accepted write's answer, when a location may hold a projected
/// head of the agent (`AgentState::projection_may_be_kept`).
const PROJECTION_HEADER: &str = "x-selfcap-projection";

/// Which write an agent's object is asked to decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// A PUT of capsule.json.
    Capsule,
    /// A POST of keys.json (a key event, with its envelope): the write
    /// Worker's alone.
    #[cfg(feature = "worker")]
    KeyEvent,
}

impl WriteKind {
    fn url(self) -> &'static str {
        match self {
            WriteKind::Capsule => WRITE_URL,
            #[cfg(feature = "worker")]
            WriteKind::KeyEvent => KEY_EVENT_URL,
        }
    }
}

/// A write that passed the stateless pre-check (body cap, JSON, envelope,
/// signature).
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

impl WriteCall {
    /// The call for a PUT `req` of `agent`'s capsule.json whose `body`
    /// authenticated: its "now", its client's quota bucket, its test hook.
    pub fn of_put(
        req: &Incoming,
        cfg: &Config,
        agent: &AgentId,
        body: Vec<u8>,
    ) -> worker::Result<WriteCall> {
        let connecting_ip = req.headers().get("CF-Connecting-IP")?;
        Ok(WriteCall {
            agent: agent.clone(),
            now_ms: clock::request_now_ms(req, cfg.test_clock),
            ip_bucket: ip_bucket(connecting_ip.as_deref()),
            fail_mirror: cfg.test_clock && req.headers().has(TEST_FAIL_MIRROR_HEADER)?,
            body,
        })
    }
}

/// What the agent object answered a write: relayed to the client as is.
pub struct Relayed {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Vec<u8>,
    /// `Retry-After`, when the decision carried a wait.
    pub retry_after: Option<String>,
    /// The x402 headers it carries (`do_wire::X402_HEADERS`; an upgrade's
    /// answer only).
    pub x402: Vec<(&'static str, String)>,
    /// What an accepted write committed, as its answer says.
    pub written: Option<Written>,
}

/// What an accepted write tells its caller besides its answer, so the
/// location that took it can replace its copies without parsing the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The committed seq.
    pub seq: u64,
    /// Whether a location may hold a projected head of the agent.
    pub projection: bool,
}

impl Written {
    /// Object side: marks an accepted write's answer (`resp`).
    #[cfg(feature = "write")]
    pub fn mark(&self, resp: &Response) -> worker::Result<()> {
        resp.headers()
            .set(WRITTEN_SEQ_HEADER, &self.seq.to_string())?;
        if self.projection {
            resp.headers().set(PROJECTION_HEADER, "1")?;
        }
        Ok(())
    }

    /// Caller side: what an answer's headers say, if it is marked.
    fn read(headers: &Headers) -> worker::Result<Option<Written>> {
        let Some(seq) = headers
            .get(WRITTEN_SEQ_HEADER)?
            .and_then(|v| v.parse().ok())
        else {
            return Ok(None);
        };
        Ok(Some(Written {
            seq,
            projection: headers.has(PROJECTION_HEADER)?,
        }))
    }
}

/// Caller side: sends `call` to the agent's object as a write of `kind`.
pub async fn send(env: &Env, kind: WriteKind, call: WriteCall) -> worker::Result<Relayed> {
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
    let req = Request::new_with_init(kind.url(), &init)?;
    let resp = env
        .durable_object(AGENT_DO_BINDING)?
        .id_from_name(call.agent.as_str())?
        .get_stub()?
        .fetch_with_request(req)
        .await?;
    Ok(Relayed {
        status: resp.status_code(),
        retry_after: resp.headers().get("Retry-After")?,
        written: Written::read(resp.headers())?,
        body: body::response_bytes(resp).await?,
        x402: Vec::new(),
    })
}

/// Object side: the write `req` carries, if it is one.
#[cfg(feature = "worker")]
pub async fn read(req: &Request) -> worker::Result<Option<(WriteKind, WriteCall)>> {
    let url = req.inner().url();
    let kind = match url.as_str() {
        WRITE_URL => WriteKind::Capsule,
        KEY_EVENT_URL => WriteKind::KeyEvent,
        _ => return Ok(None),
    };
    if req.method() != Method::Post {
        return Ok(None);
    }
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
        body: body::request_bytes(req).await?,
    };
    Ok(Some((kind, call)))
}
