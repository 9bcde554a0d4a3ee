//! `POST /mcp`: the remote MCP server, Worker half. `core::mcp::rpc` reads
//! the message and decides the answer; a tool call runs here through the
//! data halves of the read and write handlers (`reads::record`,
//! `history::index` / `history::page`, `write::write`), so every tool means
//! exactly what its HTTP route serves. Stateless: nothing is kept between
//! POSTs and no session id is ever issued.
//!
//! Failures of a tool (no capsule, a bad cursor, a refused envelope, even
//! an internal one) are tool errors the model can read (`isError`), with
//! the service's reason code; only unreadable messages are JSON-RPC errors.

use super::history;
use super::reads::{self, ReadAs, Stored};
use super::signer;
use super::write::{self, Written};
use super::Miss;
use crate::core::conditional;
use crate::core::crypto::AgentId;
use crate::core::history::Query;
use crate::core::limits::MAX_BODY_BYTES;
use crate::core::mcp::results::{self, Answer};
use crate::core::mcp::rpc::{self, Outcome, MAX_MESSAGE_BYTES, VERSION_HEADER};
use crate::core::mcp::Call;
use crate::core::model::ReadScope;
use crate::core::reason::ReasonCode;
use crate::worker::body::{self, BodyError};
use crate::worker::config::Config;
use crate::worker::http::{self, NO_STORE};
use crate::worker::kv::Kv;
use crate::worker::request::Incoming;
use crate::worker::{clock, log};
use serde_json::Value;
use worker::{Env, Response};

/// One message.
pub async fn handle(req: &Incoming, env: &Env, cfg: &Config) -> worker::Result<Response> {
    let message = body::read_capped(req, MAX_MESSAGE_BYTES).await;
    let outcome = match &message {
        Ok(bytes) => rpc::handle(bytes, req.headers().get(VERSION_HEADER)?.as_deref()),
        Err(BodyError::TooLarge { observed }) => rpc::too_large(*observed),
        Err(BodyError::Read) => rpc::unreadable(),
    };
    let message = message.unwrap_or_default();
    match outcome {
        Outcome::Accepted => Ok(http::respond(202, None, NO_STORE)),
        Outcome::Reply { status, body } => http::json(status, &body, NO_STORE),
        Outcome::Run { id, call } => {
            let now_ms = clock::request_now_ms(req, cfg.test_clock);
            // A signed POST names its reader (§12); a bad signature is a tool
            // error, not an HTTP 401, which MCP clients take for "log in".
            let answer = match signer::of(req, env, now_ms).await? {
                Err(refused) => results::error(
                    refused.code.as_str(),
                    refused.detail,
                    refused.code.bot_action(),
                ),
                Ok(reader) => {
                    match run(req, env, cfg, call, &message, reader.as_ref(), now_ms).await {
                        Ok(a) => a,
                        // Storage or the agent's object failed: the model gets the
                        // 503's code and when to retry, not a transport error.
                        Err(e) => {
                            log::event("mcp_tool_failed", &[("error", &e.to_string())]);
                            unavailable()
                        }
                    }
                }
            };
            http::json(200, &rpc::tool_response(&id, &answer), NO_STORE)
        }
    }
}

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
) -> worker::Result<Answer> {
    let read_as = |scope| ReadAs {
        reader,
        scope,
        now_ms,
    };
    match call {
        Call::Read { agent: Some(agent) } => read(env, &agent, &read_as(ReadScope::Capsule)).await,
        Call::Subscribe {
            agent: Some(agent),
            etag,
        } => {
            let r = read_as(ReadScope::Head);
            subscribe(req, env, cfg, &agent, etag.as_deref(), &r).await
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
            history(env, &agent, query, &read_as(ReadScope::History)).await
        }
        Call::Verify { agent: Some(agent) } => {
            verify(env, &agent, &read_as(ReadScope::Verify)).await
        }
        Call::Submit { envelope } => {
            let agent = match rpc::submit_target(&envelope) {
                Ok(a) => a,
                Err(refused) => return Ok(refused),
            };
            // The envelope's bytes as sent, so the PUT's cap means the same
            // bytes here (a re-serialised copy would drop padding it counts).
            let sent = match rpc::envelope_text(message) {
                Some(text) => text.as_bytes().to_vec(),
                None => serde_json::to_vec(&envelope)?,
            };
            let body = match sent.len() {
                n if n > MAX_BODY_BYTES => Err(BodyError::TooLarge { observed: n as u64 }),
                _ => Ok(sent),
            };
            submit(req, env, cfg, &agent, body).await
        }
        // Unreachable: `rpc` only hands out the remote door's tools.
        _ => Err("mcp: a tool the remote door does not offer".into()),
    }
}

/// `self_read`: what capsule.json serves, with its cursor.
async fn read(env: &Env, agent: &AgentId, read_as: &ReadAs<'_>) -> worker::Result<Answer> {
    // Nothing is held: a read always wants the capsule.
    let record = match reads::record(env, agent, read_as, |_| None).await? {
        Ok(Stored::Current(r)) => r,
        Ok(Stored::Held(answer)) => return Ok(answer),
        Err(miss) => return Ok(missed(miss, agent)),
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
) -> worker::Result<Answer> {
    let held = |current: &str| {
        etag.filter(|given| conditional::matches(given, current))
            .map(|_| results::unchanged(agent.as_str(), current))
    };
    Ok(match reads::record(env, agent, read_as, held).await? {
        Ok(Stored::Held(unchanged)) => unchanged,
        Ok(Stored::Current(r)) => {
            let now_ms = clock::request_now_ms(req, cfg.test_clock);
            results::head(&r.head(now_ms, &cfg.tiers), r.etag(), None)
        }
        Err(miss) => missed(miss, agent),
    })
}

/// `self_history`: the history.json page for `since` / `limit`, without
/// the capsules.
async fn history(
    env: &Env,
    agent: &AgentId,
    query: Query,
    read_as: &ReadAs<'_>,
) -> worker::Result<Answer> {
    if let Err(miss) = reads::readable(env, agent, read_as).await? {
        return Ok(missed(miss, agent));
    }
    let kv = Kv::of(env)?;
    let viewer = history::viewer(agent, read_as);
    let index = match history::index_for(&kv, agent, &viewer).await? {
        Ok(i) => i,
        Err(miss) => return Ok(missed(miss, agent)),
    };
    Ok(
        match history::page(&kv, agent, &index, Ok(query), &viewer).await? {
            Ok(body) => results::history(&serde_json::from_str(&body)?, None),
            Err(miss) => missed(miss, agent),
        },
    )
}

/// `self_verify`: the report verify.json serves.
async fn verify(env: &Env, agent: &AgentId, read_as: &ReadAs<'_>) -> worker::Result<Answer> {
    if let Err(miss) = reads::readable(env, agent, read_as).await? {
        return Ok(missed(miss, agent));
    }
    let viewer = history::viewer(agent, read_as);
    Ok(
        match history::index_for(&Kv::of(env)?, agent, &viewer).await? {
            Ok(index) => results::verify(&index.report, "service"),
            Err(miss) => missed(miss, agent),
        },
    )
}

/// `self_submit`: the PUT's write path; its accepted body as the result,
/// its rejection (status and body) as a tool error.
async fn submit(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    envelope: Result<Vec<u8>, BodyError>,
) -> worker::Result<Answer> {
    Ok(match write::write(req, env, cfg, agent, envelope).await? {
        Written::Refused(rej) => {
            results::rejected(rej.status(), &serde_json::to_value(&rej)?, false)
        }
        Written::Decided(r) => {
            let body: Value = serde_json::from_slice(&r.body)?;
            if r.status == 200 {
                Answer::ok(body)
            } else {
                results::rejected(r.status, &body, false)
            }
        }
    })
}

/// A read that missed, as the tool error with the route's reason code.
fn missed(miss: Miss, agent: &AgentId) -> Answer {
    match miss {
        Miss::Refused { code, detail, .. } => results::error(
            code.as_str(),
            detail.unwrap_or_else(|| match code {
                ReasonCode::CapsuleNotFound => {
                    format!("agent {} has published no capsule", agent.as_str())
                }
                ReasonCode::CursorNotFound => {
                    "since_cursor is not in the retained history (pruned or never published)".into()
                }
                _ => code.as_str().into(),
            }),
            code.bot_action(),
        ),
        Miss::Unavailable => unavailable(),
    }
}

fn unavailable() -> Answer {
    let code = ReasonCode::Unavailable;
    results::error(
        code.as_str(),
        "the service could not complete this call just now",
        code.bot_action(),
    )
}
