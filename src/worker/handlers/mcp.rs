//! `POST /mcp`: the remote MCP server, Worker half. `core::mcp::rpc` reads
//! the message and decides the answer; a tool call runs here through the
//! data halves of the read and write handlers (`reads::record`,
//! `history::index` / `history::page`, `feed::document`, `write::write`), so
//! every tool means exactly what its HTTP route serves. Stateless: nothing
//! is kept between POSTs and no session id is ever issued.
//!
//! Failures of a tool (no capsule, a bad cursor, a refused envelope, even
//! an internal one) are tool errors the model can read (`isError`), with
//! the service's reason code; only unreadable messages are JSON-RPC errors.

use super::feed;
use super::history;
use super::reads::{self, ReadAs, Stored};
use super::signer;
use super::write;
use crate::core::conditional;
use crate::core::crypto::AgentId;
use crate::core::history::Query;
use crate::core::json::Json;
use crate::core::limits::MAX_BODY_BYTES;
use crate::core::mcp::results::{self, Answer};
use crate::core::mcp::rpc::{self, Outcome, MAX_MESSAGE_BYTES, VERSION_HEADER};
use crate::core::mcp::Call;
use crate::core::model::ReadScope;
use crate::core::reason::ReasonCode;
use crate::worker::body::{self, BodyError};
use crate::worker::config::Config;
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::kv::Kv;
use crate::worker::request::Incoming;
use crate::worker::{clock, log};
use serde_json::Value;
use worker::{Env, Response};

/// One message.
pub async fn handle(req: &Incoming, env: &Env, cfg: &Config) -> Result<Response, Failure> {
    let message = body::read_capped(req, MAX_MESSAGE_BYTES).await;
    let outcome = match &message {
        Ok(bytes) => rpc::handle(bytes, req.headers().get(VERSION_HEADER)?.as_deref()),
        Err(BodyError::TooLarge { observed }) => rpc::too_large(*observed),
        Err(BodyError::Read) => rpc::unreadable(),
    };
    let message = message.unwrap_or_default();
    match outcome {
        Outcome::Accepted => Ok(http::respond(202, None, NO_STORE)),
        Outcome::Reply { status, body } => Ok(http::json(status, &body, NO_STORE)?),
        Outcome::Run { id, call } => {
            let now_ms = clock::request_now_ms(req, cfg.test_clock);
            // A signed POST names its reader (§12); a bad signature is a tool
            // error, not an HTTP 401, which MCP clients take for "log in".
            // The nonce book failing is the request's 503, as on every door.
            let answer = match signer::of(req, env, now_ms).await {
                Err(e @ Failure::Runtime(_)) => return Err(e),
                Err(refused) => tool_error(refused, None),
                Ok(reader) => run(req, env, cfg, call, &message, reader.as_ref(), now_ms)
                    .await
                    .unwrap_or_else(|(f, agent)| tool_error(f, agent.as_ref())),
            };
            Ok(http::json(
                200,
                &rpc::tool_response(&id, &answer),
                NO_STORE,
            )?)
        }
    }
}

/// A tool's failure, and the agent it was about (for its message).
type ToolFailure = (Failure, Option<AgentId>);

/// Runs one typed call. The remote door's arguments always name the agent
/// (`Call::parse` requires it there), and offers none of the keyed tools.
/// `message`: the POST's body, whose envelope text `self_submit` writes.
async fn run(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    call: Call,
    message: &[u8],
    reader: Option<&AgentId>,
    now_ms: u64,
) -> Result<Answer, ToolFailure> {
    let read_as = |scope| ReadAs {
        reader,
        scope,
        now_ms,
    };
    let about = |agent: &AgentId| {
        let agent = agent.clone();
        move |f: Failure| (f, Some(agent))
    };
    match call {
        Call::Read { agent: Some(agent) } => read(env, &agent, &read_as(ReadScope::Capsule))
            .await
            .map_err(about(&agent)),
        Call::Subscribe {
            agent: Some(agent),
            etag,
        } => {
            let r = read_as(ReadScope::Head);
            subscribe(req, env, cfg, &agent, etag.as_deref(), &r)
                .await
                .map_err(about(&agent))
        }
        Call::History {
            agent: Some(agent),
            since,
            limit,
        } => {
            // history.json's `since` and `limit`, its default page size.
            let mut query = Query {
                since,
                ..Query::default()
            };
            if let Some(l) = limit {
                query.limit = l as usize;
            }
            history(env, &agent, query, &read_as(ReadScope::History))
                .await
                .map_err(about(&agent))
        }
        Call::Verify { agent: Some(agent) } => verify(env, &agent, &read_as(ReadScope::Verify))
            .await
            .map_err(about(&agent)),
        Call::Feed {
            agent: Some(agent),
            doc,
            since,
        } => {
            // A watch is capsule content: read as the capsule is (§12).
            let wanted = feed::Wanted {
                doc,
                since: since.as_deref(),
            };
            watch_feed(env, cfg, &agent, wanted, &read_as(ReadScope::Capsule))
                .await
                .map_err(about(&agent))
        }
        Call::Submit { envelope } => {
            let agent = match rpc::submit_target(&envelope) {
                Ok(a) => a,
                Err(refused) => return Ok(refused),
            };
            submit(req, env, cfg, &agent, &envelope, message)
                .await
                .map_err(about(&agent))
        }
        // Unreachable: `rpc` only hands out the remote door's tools.
        _ => Err(("mcp: a tool the remote door does not offer".into(), None)),
    }
}

/// `self_read`: what capsule.json serves, with its cursor.
async fn read(env: &Env, agent: &AgentId, read_as: &ReadAs<'_>) -> Result<Answer, Failure> {
    // Nothing is held: a read always wants the capsule.
    let record = match reads::record(env, agent, read_as, |_| None).await? {
        Stored::Current(r) => r,
        Stored::Held(answer) => return Ok(answer),
    };
    // capsule.json's bytes, so the capsule is exactly what the cursor hashes.
    let capsule: Value = serde_json::from_str(&record.capsule_body())?;
    Ok(results::read(agent.as_str(), &record.cursor, capsule, None))
}

/// `self_subscribe`: head.json, or "unchanged" when `etag` is still the
/// head's ETag (matched as `If-None-Match` is, so a quoted ETag header, the
/// bare hex or the cursor all work).
async fn subscribe(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    etag: Option<&str>,
    read_as: &ReadAs<'_>,
) -> Result<Answer, Failure> {
    let held = |current: &str| {
        etag.filter(|given| conditional::matches(given, current))
            .map(|_| results::unchanged(agent.as_str(), current))
    };
    Ok(match reads::record(env, agent, read_as, held).await? {
        Stored::Held(unchanged) => unchanged,
        Stored::Current(r) => {
            let now_ms = clock::request_now_ms(req, cfg.test_clock);
            results::head(&r.head(now_ms, &cfg.tiers), &r.head_etag(), None)
        }
    })
}

/// `self_history`: the history.json page for `since` / `limit`, without
/// the capsules.
async fn history(
    env: &Env,
    agent: &AgentId,
    query: Query,
    read_as: &ReadAs<'_>,
) -> Result<Answer, Failure> {
    reads::readable(env, agent, read_as).await?;
    let kv = Kv::of(env)?;
    let viewer = history::viewer(agent, read_as);
    let index = history::index_for(&kv, agent, &viewer).await?;
    let body = history::page(&kv, agent, &index, Ok(query), &viewer).await?;
    Ok(results::history(&serde_json::from_str(&body)?, None))
}

/// `self_verify`: the report verify.json serves.
async fn verify(env: &Env, agent: &AgentId, read_as: &ReadAs<'_>) -> Result<Answer, Failure> {
    let index = history::verify_index(env, agent, read_as).await?;
    let report = history::verify_report(env, agent, &index, read_as).await?;
    Ok(results::verify(&report, "service"))
}

/// `self_feed`: the document `GET /api/v1/watch/{doc}` serves (its one
/// path, `feed::document`), its body as the result; its refusals
/// (`watch_requires_pro` with the upgrade and upstream links,
/// `watch_not_set`, `cursor_not_found`, ...) as tool errors.
async fn watch_feed(
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    wanted: feed::Wanted<'_>,
    read_as: &ReadAs<'_>,
) -> Result<Answer, Failure> {
    let upstream = feed::upstream(cfg)?;
    let body = feed::document(env, upstream, agent, wanted, read_as).await?;
    Ok(Answer::ok(serde_json::from_slice(&body)?))
}

/// `self_submit`: the PUT's write path; its accepted body as the result,
/// its rejection (status and body) as a tool error. The envelope's bytes
/// are taken as sent, so the PUT's cap means the same bytes here (a
/// re-serialised copy would drop padding it counts).
async fn submit(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    envelope: &Json,
    message: &[u8],
) -> Result<Answer, Failure> {
    let sent = match rpc::envelope_text(message) {
        Some(text) => text.as_bytes().to_vec(),
        None => serde_json::to_vec(envelope)?,
    };
    let body = match sent.len() {
        n if n > MAX_BODY_BYTES => Err(BodyError::TooLarge { observed: n as u64 }),
        _ => Ok(sent),
    };
    let r = write::write(req, env, cfg, agent, body).await?;
    let body: Value = serde_json::from_slice(&r.body)?;
    Ok(if r.status == 200 {
        Answer::ok(body)
    } else {
        results::rejected(r.status, &body, false)
    })
}

/// A tool that failed, as the tool error the model reads: the route's
/// reason code, status and body for a refusal or a rejection; for our own
/// failure (storage, the agent's object) the 503's code and when to retry,
/// not a transport error. `agent`: whom the call was about.
fn tool_error(failure: Failure, agent: Option<&AgentId>) -> Answer {
    let code = failure.reason();
    match failure {
        Failure::Refused(r) => {
            let detail = match (r.detail, code, agent) {
                (Some(d), ..) => d,
                (None, ReasonCode::CapsuleNotFound, Some(a)) => {
                    format!("agent {} has published no capsule", a.as_str())
                }
                (None, ..) => code.as_str().into(),
            };
            let mut answer = results::error(code.as_str(), detail, code.bot_action());
            // What the HTTP body carries besides: the links to act on
            // (watch_requires_pro's upgrade and upstream URLs) and the wait.
            if let Value::Object(o) = &mut answer.body {
                for (name, url) in r.links {
                    o.insert(name.into(), url.into());
                }
                if let Some(secs) = r.retry_after_sec {
                    o.insert("retry_after_sec".into(), secs.into());
                }
            }
            answer
        }
        Failure::Rejected(rej) => match serde_json::to_value(&rej) {
            Ok(body) => results::rejected(rej.status(), &body, false),
            Err(e) => tool_error(Failure::Runtime(e.into()), agent),
        },
        Failure::CursorNotFound { .. } => results::error(
            code.as_str(),
            "since_cursor is not in the retained history (pruned or never published)",
            code.bot_action(),
        ),
        Failure::Runtime(e) => {
            log::event("mcp_tool_failed", &[("error", &e.to_string())]);
            tool_error(Failure::Unavailable(None), agent)
        }
        Failure::Unavailable(_) => results::error(
            code.as_str(),
            "the service could not complete this call just now",
            code.bot_action(),
        ),
    }
}
