//! The contract between the Worker and its Durable Objects, both halves in
//! one file: every internal call is a typed value here, encoded into a
//! request by the caller and decoded by the object, so no URL, header name
//! or body shape of the internal protocol is spelled anywhere else.
//!
//! | call                 | from            | to                      |
//! |----------------------|-----------------|-------------------------|
//! | [`AgentCall::Write`] (`write_wire`) | the entry's PUT, write handler | the agent's object |
//! | [`AgentCall::KeyEvent`] (`write_wire`) | keys.json POST | the agent's object |
//! | [`AgentCall::Export`]| export handler  | the agent's object      |
//! | [`Reserve`]          | the agent object| the client address's quota object |
//! | [`AgentCall::Quote`] | quote handler   | the agent's object      |
//! | [`AgentCall::Claim`] | claim handler   | the agent's object      |
//! | [`AgentCall::X402`]  | x402 handler    | the agent's object      |
//! | [`AgentCall::Watch`] | watch handler (WebSocket upgrade) | the agent's object |
//! | [`AgentCall::Wait`]  | head.json long-poll | the agent's object  |
//! | [`QuoteSlot`]        | quote handler   | the client address's quota object |
//! | [`TagAsk`]           | the agent object| the tag book of one price |
//! | [`PaymentBind`]      | the agent object| the record of one payment |
//! | [`NonceCheck`] (`nonce_wire`) | a signed read   | the nonce book of its reader |
//! | [`StatsCall`] (`stats`) | an agent object's alarm, the operator API | a stats shard |
//! | [`feed::FeedCall`]   | the feed handler, the world refresh, an agent object | a feed object |
//!
//! The objects are not reachable from outside the Worker, so they trust
//! these headers (the agent and "now" in particular).

pub mod feed;
pub mod stats;

use super::body;
use super::config::{AGENT_DO_BINDING, IP_QUOTA_DO_BINDING, PAYMENT_DO_BINDING, TAGS_DO_BINDING};
pub use super::do_json::answer;
#[cfg(feature = "write")]
pub use super::do_json::answer_text;
#[cfg(feature = "write")]
pub use super::do_json::not_a_call;
use super::do_json::{ask, json_of, read_posted};
/// The read path's one call (also made by the entry Worker).
#[cfg(feature = "write")]
pub use super::nonce_wire::NonceCheck;
use super::write_wire::{self, Relayed, WriteCall, WriteKind};
use crate::core::crypto::AgentId;
use crate::core::history::Viewer;
use crate::core::limits::Tier;
use crate::core::upgrade::outcome::PaymentRecord;
use serde::{Deserialize, Serialize};
pub use stats::StatsCall;
use worker::{Env, Headers, Method, Request, RequestInit, Response, ResponseBuilder};

const EXPORT_URL: &str = "https://agent.do/export";
const RESERVE_URL: &str = "https://ip-quota.do/reserve";
const QUOTE_SLOT_URL: &str = "https://ip-quota.do/quote";
const QUOTE_URL: &str = "https://agent.do/quote";
const CLAIM_URL: &str = "https://agent.do/claim";
const X402_URL: &str = "https://agent.do/x402";
const WATCH_URL: &str = "https://agent.do/watch";
const WAIT_URL: &str = "https://agent.do/wait";
const TAG_URL: &str = "https://tags.do/allocate";
const BIND_URL: &str = "https://payment.do/bind";
/// A watch's call (JSON): a WebSocket upgrade is a GET and has no body.
const CALL_HEADER: &str = "x-selfcap-call";

/// A call to an agent's Durable Object.
pub enum AgentCall {
    /// Decide and (if accepted) commit a PUT.
    Write(WriteCall),
    /// Decide and (if accepted) commit a key event (with its envelope).
    KeyEvent(WriteCall),
    /// Assemble the export bundle from the object's storage, for one reader.
    Export(ExportCall),
    /// Quote an upgrade (the invoice is stored in the agent's object).
    Quote(QuoteCall),
    /// Verify and credit a claim.
    Claim(ClaimCall),
    /// An x402 purchase: offer an invoice, or settle a payment.
    X402(X402Call),
    /// Take a WebSocket watcher of the agent's heads.
    Watch(WatchCall),
    /// Hold a head.json long-poll until the next commit or the deadline.
    Wait(WaitCall),
}

/// An export for one reader (versions it may not see are withheld).
#[derive(Serialize, Deserialize)]
pub struct ExportCall {
    /// The verified signer, if the read was signed.
    pub reader: Option<String>,
    /// "Now" (Unix ms; grant expiry).
    pub now_ms: u64,
}

/// A watch the Worker admitted (the request was a WebSocket upgrade; a
/// signature, if any, verified).
#[derive(Serialize, Deserialize)]
pub struct WatchCall {
    /// The agent (also the object's name).
    pub agent_id: String,
    /// The verified signer of the upgrade request, if it was signed.
    pub reader: Option<String>,
    /// The client's address bucket (the per-address watcher cap).
    pub ip_bucket: String,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// A head.json long-poll the Worker could not answer at once: the client
/// already holds the current head, or there is none it may read.
#[derive(Serialize, Deserialize)]
pub struct WaitCall {
    /// The agent (also the object's name).
    pub agent_id: String,
    /// The verified signer, if the poll was signed.
    pub reader: Option<String>,
    /// The entity tag (cursor hex) the client holds; `None`: it holds none.
    pub held: Option<String>,
    /// How long to hold the poll (ms).
    pub wait_ms: u64,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// What a long-poll came to.
pub enum Waited {
    /// A head the client does not hold: body and entity tag.
    Head(Vec<u8>, String),
    /// Nothing new before the deadline.
    Unchanged,
    /// No capsule this reader may read before the deadline.
    NotFound,
}

/// An x402 request that passed the Worker's checks (configuration, query,
/// a payment header that reads).
#[derive(Serialize, Deserialize)]
pub struct X402Call {
    /// The agent (also the object's name).
    pub agent_id: String,
    /// `pro` or `plus`.
    pub plan: Tier,
    /// `renew=1`.
    pub renew: bool,
    /// The payment header as it came, and its x402 version (1 or 2).
    pub payment: Option<(u64, String)>,
    /// The resource the 402 names (this endpoint's URL for the agent and
    /// plan, without `renew`).
    pub resource_url: String,
    /// The client's address bucket (the per-address quote limit).
    pub ip_bucket: String,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// The x402 headers an answer may carry (the 402's requirements, the
/// settlement response), relayed by the Worker as they are.
pub const X402_HEADERS: [&str; 3] = crate::core::upgrade::x402::wire::ANSWER_HEADERS;

/// A quote request that passed the Worker's checks.
#[derive(Serialize, Deserialize)]
pub struct QuoteCall {
    /// The agent (also the object's name).
    pub agent_id: String,
    /// `pro` or `plus`.
    pub plan: Tier,
    /// "Now" (Unix ms).
    pub now_ms: u64,
    /// The absolute claim URL for the quote body.
    pub claim_url: String,
    /// Test hook (only with `SELFCAP_TEST_CLOCK=1`): use this tag instead
    /// of asking the price's tag book, to prove a payment credits once even
    /// if two invoices ever asked for the same amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_tag: Option<u16>,
}

/// A claim whose shape and signature checked out in the Worker.
#[derive(Serialize, Deserialize)]
pub struct ClaimCall {
    /// The agent (also the object's name).
    pub agent_id: String,
    /// The invoice.
    pub invoice_id: String,
    /// The payment transaction, normalised.
    pub tx_hash: String,
    /// The claim's seq.
    pub seq: u64,
    /// The key that signed it (verified; whether it speaks for the agent is
    /// the object's call, against the agent's key log).
    pub public_key: String,
    /// "Now" (Unix ms).
    pub now_ms: u64,
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
    write_wire::send(env, WriteKind::Capsule, call).await
}

/// Worker side: sends a key event (keys.json's POST body) to the agent's
/// object.
pub async fn key_event(env: &Env, call: WriteCall) -> worker::Result<Relayed> {
    write_wire::send(env, WriteKind::KeyEvent, call).await
}

/// Worker side: sends a quote or claim to the agent's object; its answer
/// is relayed as is.
pub async fn upgrade(env: &Env, agent: &AgentId, call: &AgentCall) -> worker::Result<Relayed> {
    let (url, body) = match call {
        AgentCall::Quote(q) => (QUOTE_URL, serde_json::to_string(q)?),
        AgentCall::Claim(c) => (CLAIM_URL, serde_json::to_string(c)?),
        AgentCall::X402(c) => (X402_URL, serde_json::to_string(c)?),
        _ => return Err("not an upgrade call".into()),
    };
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let resp = agent_stub(env, agent)?
        .fetch_with_request(Request::new_with_init(url, &init)?)
        .await?;
    let mut x402 = Vec::new();
    for name in X402_HEADERS {
        if let Some(v) = resp.headers().get(name)? {
            x402.push((name, v));
        }
    }
    Ok(Relayed {
        status: resp.status_code(),
        retry_after: resp.headers().get("Retry-After")?,
        body: body::response_bytes(resp).await?,
        x402,
        written: None,
    })
}

/// Worker side: hands a WebSocket upgrade to the agent's object; its answer
/// (101 with the socket, or a refusal) goes to the client as is.
pub async fn watch(env: &Env, call: &WatchCall) -> worker::Result<Response> {
    let agent = AgentId::parse(&call.agent_id).ok_or("watch: bad agent id")?;
    agent_stub(env, &agent)?
        .fetch_with_request(upgrade_request(WATCH_URL, call)?)
        .await
}

/// A WebSocket upgrade handed to an object: a GET (the runtime passes the
/// socket through only for an upgrade request), so its call rides in a
/// header.
fn upgrade_request(url: &str, call: &impl Serialize) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set("Upgrade", "websocket")?;
    headers.set(CALL_HEADER, &serde_json::to_string(call)?)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    Request::new_with_init(url, &init)
}

/// Object side: the call an [`upgrade_request`] carries.
fn upgrade_call<T: for<'de> Deserialize<'de>>(req: &Request) -> worker::Result<T> {
    let call = req
        .headers()
        .get(CALL_HEADER)?
        .ok_or("an upgrade without its call")?;
    Ok(serde_json::from_str(&call)?)
}

/// Worker side: holds a long-poll in the agent's object.
pub async fn wait(env: &Env, call: &WaitCall) -> worker::Result<Waited> {
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(serde_json::to_string(call)?.into()));
    let agent = AgentId::parse(&call.agent_id).ok_or("wait: bad agent id")?;
    let resp = agent_stub(env, &agent)?
        .fetch_with_request(Request::new_with_init(WAIT_URL, &init)?)
        .await?;
    Waited::read(resp).await
}

impl Waited {
    /// Worker side: what a held poll's answer ([`Waited::answer`]) says.
    async fn read(resp: Response) -> worker::Result<Waited> {
        match resp.status_code() {
            200 => {
                let etag = resp.headers().get("ETag")?.unwrap_or_default();
                Ok(Waited::Head(body::response_bytes(resp).await?, etag))
            }
            304 => Ok(Waited::Unchanged),
            404 => Ok(Waited::NotFound),
            s => Err(format!("a held poll answered {s}").into()),
        }
    }

    /// Object side: the answer.
    pub fn answer(self) -> Response {
        match self {
            Waited::Head(body, etag) => {
                let headers = Headers::new();
                let _ = headers.set("ETag", &etag);
                ResponseBuilder::new()
                    .with_status(200)
                    .with_headers(headers)
                    .fixed(body)
            }
            Waited::Unchanged => ResponseBuilder::new().with_status(304).empty(),
            Waited::NotFound => ResponseBuilder::new().with_status(404).empty(),
        }
    }
}

/// Worker side: asks the agent's object for its export bundle as `viewer`
/// may have it; `None` before its first write.
pub async fn export(
    env: &Env,
    agent: &AgentId,
    viewer: &Viewer<'_>,
) -> worker::Result<Option<Exported>> {
    let call = ExportCall {
        reader: viewer.reader.map(str::to_owned),
        now_ms: viewer.now_ms,
    };
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(serde_json::to_string(&call)?.into()));
    let req = Request::new_with_init(EXPORT_URL, &init)?;
    let resp = agent_stub(env, agent)?.fetch_with_request(req).await?;
    match resp.status_code() {
        200 => Ok(Some(Exported {
            etag: resp.headers().get("ETag")?.unwrap_or_default(),
            body: body::response_bytes(resp).await?,
        })),
        404 => Ok(None),
        s => Err(format!("agent DO export answered {s}").into()),
    }
}

impl AgentCall {
    /// Object side: reads a call; `None` for anything that is not one.
    pub async fn read(req: Request) -> worker::Result<Option<AgentCall>> {
        if let Some((kind, call)) = write_wire::read(&req).await? {
            return Ok(Some(match kind {
                WriteKind::Capsule => AgentCall::Write(call),
                WriteKind::KeyEvent => AgentCall::KeyEvent(call),
            }));
        }
        let url = req.inner().url();
        let is = |u: &str| url.as_str() == u;
        match req.method() {
            Method::Post if is(EXPORT_URL) => Ok(Some(AgentCall::Export(json_of(&req).await?))),
            Method::Post if is(QUOTE_URL) => Ok(Some(AgentCall::Quote(json_of(&req).await?))),
            Method::Post if is(CLAIM_URL) => Ok(Some(AgentCall::Claim(json_of(&req).await?))),
            Method::Post if is(X402_URL) => Ok(Some(AgentCall::X402(json_of(&req).await?))),
            Method::Post if is(WAIT_URL) => Ok(Some(AgentCall::Wait(json_of(&req).await?))),
            Method::Get if is(WATCH_URL) => Ok(Some(AgentCall::Watch(upgrade_call(&req)?))),
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

/// A quota object's answer to a slot request (a new agent, a quote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Taken.
    Granted,
    /// The address has none left until this time (Unix ms).
    FullUntil(u64),
}

impl From<ReserveAnswer> for Slot {
    fn from(a: ReserveAnswer) -> Slot {
        a.reset_at_ms.map_or(Slot::Granted, Slot::FullUntil)
    }
}

impl Reserve {
    /// Agent-object side: asks the quota object of `ip_bucket`.
    pub async fn send(&self, env: &Env, ip_bucket: &str) -> worker::Result<Slot> {
        let a: ReserveAnswer = ask(env, IP_QUOTA_DO_BINDING, ip_bucket, RESERVE_URL, self).await?;
        Ok(a.into())
    }

    /// Quota-object side: reads a request; `None` for anything else.
    pub async fn read(req: Request) -> worker::Result<Option<Reserve>> {
        read_posted(req, RESERVE_URL).await
    }

    /// Quota-object side: the answer (also of a quote slot).
    pub fn answer(slot: Slot) -> worker::Result<Response> {
        answer(&ReserveAnswer {
            reset_at_ms: match slot {
                Slot::Granted => None,
                Slot::FullUntil(t) => Some(t),
            },
        })
    }
}

/// A quote slot of one client address (quotes per rolling 24 h).
#[derive(Serialize, Deserialize)]
pub struct QuoteSlot {
    /// "Now" (Unix ms).
    pub now_ms: u64,
    /// Quotes allowed per address per 24 h.
    pub limit: u32,
}

/// Calls to the client address's quota object.
pub enum IpCall {
    /// A new-agent slot.
    Reserve(Reserve),
    /// A quote slot.
    Quote(QuoteSlot),
}

impl IpCall {
    /// Quota-object side: reads a call; `None` for anything else.
    pub async fn read(req: Request) -> worker::Result<Option<IpCall>> {
        let url = req.inner().url();
        if url.as_str() == QUOTE_SLOT_URL {
            return Ok(read_posted(req, QUOTE_SLOT_URL).await?.map(IpCall::Quote));
        }
        Ok(Reserve::read(req).await?.map(IpCall::Reserve))
    }
}

impl QuoteSlot {
    /// Worker side: takes a quote slot of `ip_bucket`.
    pub async fn send(&self, env: &Env, ip_bucket: &str) -> worker::Result<Slot> {
        let a: ReserveAnswer =
            ask(env, IP_QUOTA_DO_BINDING, ip_bucket, QUOTE_SLOT_URL, self).await?;
        Ok(a.into())
    }
}

/// A tag for a new invoice, from the tag book of one price.
#[derive(Serialize, Deserialize)]
pub struct TagAsk {
    /// "Now" (Unix ms).
    pub now_ms: u64,
    /// The invoice's expiry: the tag is held until then.
    pub expires_at_ms: u64,
    /// Where to start looking.
    pub random: u32,
}

#[derive(Serialize, Deserialize)]
struct TagAnswer {
    tag: Option<u16>,
}

impl TagAsk {
    /// Agent-object side: a tag of the book `book` (chain and price), or
    /// `None` when all are held.
    pub async fn send(&self, env: &Env, book: &str) -> worker::Result<Option<u16>> {
        let a: TagAnswer = ask(env, TAGS_DO_BINDING, book, TAG_URL, self).await?;
        Ok(a.tag)
    }
    /// Tag-book side: reads a request.
    pub async fn read(req: Request) -> worker::Result<Option<TagAsk>> {
        read_posted(req, TAG_URL).await
    }
    /// Tag-book side: the answer.
    pub fn answer(tag: Option<u16>) -> worker::Result<Response> {
        answer(&TagAnswer { tag })
    }
}

/// Binds one payment to one invoice, once (see `PaymentRecord::bind`).
#[derive(Serialize, Deserialize)]
pub struct PaymentBind {
    /// The invoice and agent to bind the payment to.
    pub record: PaymentRecord,
}

#[derive(Serialize, Deserialize)]
struct BindAnswer {
    /// Bound to this record (now or before).
    bound: bool,
}

impl PaymentBind {
    /// Agent-object side: `true` when the payment `key` is (now or already)
    /// bound to this record, `false` when it credits something else.
    pub async fn send(&self, env: &Env, key: &str) -> worker::Result<bool> {
        let a: BindAnswer = ask(env, PAYMENT_DO_BINDING, key, BIND_URL, self).await?;
        Ok(a.bound)
    }
    /// Payment-record side: reads a request.
    pub async fn read(req: Request) -> worker::Result<Option<PaymentBind>> {
        read_posted(req, BIND_URL).await
    }
    /// Payment-record side: the answer.
    pub fn answer(bound: bool) -> worker::Result<Response> {
        answer(&BindAnswer { bound })
    }
}
