//! The remote door's message layer: one JSON-RPC 2.0 message per HTTP POST
//! (MCP "Streamable HTTP", answered with plain JSON, never a stream), as
//! pure functions. The Worker reads the body, calls [`handle`], runs the
//! [`Call`] it may get back through the same code as the HTTP routes, and
//! wraps the tool's [`Answer`] with [`tool_response`].
//!
//! Stateless on purpose: no session id is ever issued and nothing is
//! remembered between POSTs, so `initialize` is a pure answer and every
//! other method works with or without it (a client that skipped it, or
//! whose `initialize` hit another isolate, is served all the same).
//!
//! Versions: the handshake-era revisions the current SDKs speak
//! ([`SUPPORTED_VERSIONS`]). `2026-07-28` (stateless MCP: no `initialize`,
//! `server/discover`, version in every request's `_meta`) is not claimed:
//! a request naming it (header or `_meta`) gets a 400 whose error `data`
//! has that revision's unsupported-version shape (`requested`,
//! `supported`), so a dual-era client can fall back to `initialize`. The
//! error code stays the long-standing `-32600`.

use super::args::Call;
use super::results::{self, Answer};
use super::tools::{Door, Tool};
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::limits::MAX_BODY_BYTES;
use serde_json::{json, Map, Value};

/// The protocol revisions this server speaks, newest first. All three
/// define Streamable HTTP and the same `initialize` / `tools/*` messages;
/// 2024-11-05 had only the older HTTP+SSE transport, so a client on it
/// cannot be talking to this endpoint.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// What `initialize` answers when the client asks for a version we do not
/// speak (the client then decides whether it can use it).
pub const LATEST_VERSION: &str = SUPPORTED_VERSIONS[0];
/// The header a client sends on every request after `initialize`.
pub const VERSION_HEADER: &str = "MCP-Protocol-Version";
/// Where a stateless-era (2026-07-28) request names its version.
pub const META_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// Room for the JSON-RPC framing around a `self_submit` envelope.
pub const FRAMING_BYTES: usize = 4 * 1024;
/// The largest message accepted: a PUT body ([`MAX_BODY_BYTES`]) plus its
/// framing, so any envelope a PUT takes can be submitted here (the write
/// path then holds the envelope to [`MAX_BODY_BYTES`] itself).
pub const MAX_MESSAGE_BYTES: usize = MAX_BODY_BYTES + FRAMING_BYTES;
/// `serverInfo.name`.
pub const SERVER_NAME: &str = "self-capsule";
/// `initialize`'s `instructions`: short, a client may put it into the
/// model's context.
pub const INSTRUCTIONS: &str = "Public Self Capsule service: read any agent's signed capsule \
    (self_read), check cheaply whether it changed (self_subscribe with the last etag), list \
    versions (self_history), see the service's verification (self_verify), read a Pro agent's \
    projected watch feed (self_feed). This server holds no keys: sign capsules locally \
    (selfcap mcp) and publish a signed envelope with self_submit.";

/// JSON-RPC error codes used here.
pub mod code {
    /// The body is not (acceptable) JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC 2.0 message (also: a batch, an unsupported version).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad `params` (also: an unknown tool name).
    pub const INVALID_PARAMS: i64 = -32602;
}

/// What the Worker does with one POSTed message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A notification or a response: HTTP 202, no body.
    Accepted,
    /// A JSON-RPC response (result or error) with its HTTP status.
    Reply {
        /// 200, or 400 / 413 for a message that could not be read.
        status: u16,
        /// The JSON-RPC response object.
        body: Value,
    },
    /// A tool call whose arguments checked out: run it, then answer with
    /// [`tool_response`] and this id.
    Run {
        /// The request id, to echo.
        id: Value,
        /// The typed call.
        call: Call,
    },
}

/// A JSON-RPC error object (JSON-RPC 2.0 §5.1), before it is wrapped with
/// the request id.
#[derive(Debug, Clone, PartialEq)]
struct ErrorObject {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl ErrorObject {
    fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn with(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// A message that is not one we can read is refused at the HTTP level
    /// (400); an error answering a well-formed request is an ordinary
    /// JSON-RPC answer (200), as the SDKs expect.
    fn status(&self) -> u16 {
        match self.code {
            code::PARSE_ERROR | code::INVALID_REQUEST => 400,
            _ => 200,
        }
    }

    fn reply(self, id: Value) -> Outcome {
        let status = self.status();
        self.reply_with_status(id, status)
    }

    fn reply_with_status(self, id: Value, status: u16) -> Outcome {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(d) = self.data {
            error["data"] = d;
        }
        Outcome::Reply {
            status,
            body: json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        }
    }
}

/// One message, as read.
enum Message {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification or a response to a request of ours (we send none):
    /// either way accepted and ignored.
    NoReply,
}

/// A message as read: the id to echo (null when unknown), the message, and
/// the version its `params._meta` names, if any.
struct Read {
    id: Value,
    message: Message,
    meta_version: Option<String>,
}

/// Answers one POSTed message. `version_header` is the request's
/// `MCP-Protocol-Version`, if any.
pub fn handle(body: &[u8], version_header: Option<&str>) -> Outcome {
    let Read {
        id,
        message,
        meta_version,
    } = match read(body) {
        Ok(r) => r,
        Err((id, e)) => return e.reply(id),
    };
    for requested in [version_header.map(str::trim), meta_version.as_deref()]
        .into_iter()
        .flatten()
    {
        if !SUPPORTED_VERSIONS.contains(&requested) {
            return unsupported_version(requested).reply(id);
        }
    }
    match message {
        Message::NoReply => Outcome::Accepted,
        Message::Request { id, method, params } => match request(&method, &params) {
            Ok(Step::Result(result)) => Outcome::Reply {
                status: 200,
                body: json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            },
            Ok(Step::Tool(Ok(call))) => Outcome::Run { id, call },
            Ok(Step::Tool(Err(answer))) => Outcome::Reply {
                status: 200,
                body: tool_response(&id, &answer),
            },
            Err(e) => e.reply(id),
        },
    }
}

/// The text of `params.arguments.envelope` exactly as the message carries it
/// (`None` if there is none): what `self_submit` writes, so its envelope is
/// held to a PUT body's rules byte for byte (the same [`MAX_BODY_BYTES`] cap
/// over the same bytes, whitespace included), not to a re-serialised copy.
pub fn envelope_text(body: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Msg<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        arguments: Args<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Args<'a> {
        #[serde(borrow)]
        envelope: &'a serde_json::value::RawValue,
    }
    serde_json::from_slice::<Msg<'_>>(body)
        .ok()
        .map(|m| m.params.arguments.envelope.get())
}

/// The 413 for a body over [`MAX_MESSAGE_BYTES`] (`observed`: its declared
/// length, or how far it was read).
pub fn too_large(observed: u64) -> Outcome {
    ErrorObject::new(
        code::INVALID_REQUEST,
        format!("message is {observed} bytes or more; the cap is {MAX_MESSAGE_BYTES}"),
    )
    .with(json!({ "reason_code": "payload_too_large", "max_bytes": MAX_MESSAGE_BYTES }))
    .reply_with_status(Value::Null, 413)
}

/// The 400 for a body the client broke off or cut short.
pub fn unreadable() -> Outcome {
    parse_error("the request body could not be read to its end")
}

/// The `tools/call` response carrying a tool's answer: its JSON as one text
/// content, and `isError` for a tool error.
pub fn tool_response(id: &Value, answer: &Answer) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{ "type": "text", "text": answer.text() }],
            "isError": answer.is_error,
        }
    })
}

/// The agent a `self_submit` envelope writes to: its `agent_id` (the PUT
/// has it in the path; here the envelope is all there is). Missing or
/// malformed, the call is refused like a PUT whose envelope names another
/// agent (`agent_id`, 422), without reaching the write path.
pub fn submit_target(envelope: &Json) -> Result<AgentId, Answer> {
    envelope
        .get("agent_id")
        .and_then(Json::as_str)
        .and_then(AgentId::parse)
        .ok_or_else(|| {
            results::rejected(
                422,
                &json!({
                    "accepted": false,
                    "reason_codes": ["agent_id"],
                    "detail": "envelope.agent_id must be the signer's agent id (64 lowercase hex): \
                               it names the capsule written",
                }),
                false,
            )
        })
}

/// The unsupported-version refusal: HTTP 400 with the versions we speak
/// (the `data` shape the 2026-07-28 revision gives this error).
fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        code::INVALID_REQUEST,
        format!("Unsupported protocol version {requested:?}"),
    )
    .with(json!({ "requested": requested, "supported": SUPPORTED_VERSIONS }))
}

fn parse_error(why: impl Into<String>) -> Outcome {
    ErrorObject::new(code::PARSE_ERROR, why.into())
        .with(json!({ "reason_code": "invalid_json" }))
        .reply(Value::Null)
}

/// Reads one message: strict JSON first (the service's one parser: no
/// duplicate keys, bounded depth, so a `self_submit` envelope is read
/// exactly as a PUT body would be), then the JSON-RPC shape. The id is
/// returned as soon as it is known, so errors can echo it.
fn read(body: &[u8]) -> Result<Read, (Value, ErrorObject)> {
    let parse_err = |why: String| {
        (
            Value::Null,
            ErrorObject::new(code::PARSE_ERROR, why).with(json!({ "reason_code": "invalid_json" })),
        )
    };
    json::parse(body).map_err(|e| parse_err(format!("body is not acceptable JSON: {e}")))?;
    let value: Value =
        serde_json::from_slice(body).map_err(|e| parse_err(format!("body is not JSON: {e}")))?;
    let invalid =
        |id: &Value, why: &str| (id.clone(), ErrorObject::new(code::INVALID_REQUEST, why));
    let obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(invalid(
                &Value::Null,
                "batches are not supported: send one JSON-RPC message per POST",
            ))
        }
        _ => {
            return Err(invalid(
                &Value::Null,
                "expected a JSON-RPC 2.0 message (an object)",
            ))
        }
    };
    // MCP ids are strings or integers, never null.
    let id = match obj.get("id") {
        None => None,
        Some(v @ Value::String(_)) => Some(v.clone()),
        Some(v @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(v.clone()),
        Some(_) => return Err(invalid(&Value::Null, "id must be a string or an integer")),
    };
    let echo = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(&echo, "jsonrpc must be \"2.0\""));
    }
    let params = match obj.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid(&echo, "params must be an object")),
    };
    let meta_version = params
        .get("_meta")
        .and_then(|m| m.get(META_VERSION_KEY))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let message = match (obj.get("method"), id) {
        (Some(Value::String(m)), Some(id)) => Message::Request {
            id,
            method: m.clone(),
            params,
        },
        (Some(Value::String(_)), None) => Message::NoReply,
        (Some(_), _) => return Err(invalid(&echo, "method must be a string")),
        // A response to a server request: we send none, but accept it.
        (None, Some(_)) if obj.contains_key("result") ^ obj.contains_key("error") => {
            Message::NoReply
        }
        (None, _) => {
            return Err(invalid(
                &echo,
                "not a request, notification or response (no method)",
            ))
        }
    };
    Ok(Read {
        id: echo,
        message,
        meta_version,
    })
}

/// What a request asks for: a result now, or a tool to run.
enum Step {
    Result(Value),
    /// The typed call, or the tool error for its arguments.
    Tool(Result<Call, Answer>),
}

fn request(method: &str, params: &Map<String, Value>) -> Result<Step, ErrorObject> {
    let invalid = |why: String| ErrorObject::new(code::INVALID_PARAMS, why);
    match method {
        "initialize" => {
            let requested = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    invalid("initialize needs params.protocolVersion (a string)".into())
                })?;
            Ok(Step::Result(initialize(requested)))
        }
        "ping" => Ok(Step::Result(json!({}))),
        "tools/list" => Ok(Step::Result(tools_list())),
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("tools/call needs params.name (a string)".into()))?;
            let tool = Tool::at(Door::Remote, name).ok_or_else(|| {
                let hint = if Tool::at(Door::Local, name).is_some() {
                    " (it needs the agent's key: use the local server, selfcap mcp)"
                } else {
                    ""
                };
                invalid(format!("Unknown tool: {name}{hint}")).with(json!({
                    "tools": Tool::listed(Door::Remote).map(Tool::name).collect::<Vec<_>>()
                }))
            })?;
            let args = match params.get("arguments") {
                None | Some(Value::Null) => None,
                Some(Value::Object(a)) => Some(a),
                Some(_) => return Err(invalid("params.arguments must be an object".into())),
            };
            Ok(Step::Tool(
                Call::parse(tool, Door::Remote, args).map_err(|e| results::bad_arguments(&e)),
            ))
        }
        _ => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
    }
}

/// `initialize`: the requested version when we speak it, else our latest.
fn initialize(requested: &str) -> Value {
    let version = SUPPORTED_VERSIONS
        .into_iter()
        .find(|v| *v == requested)
        .unwrap_or(LATEST_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": {
            "name": SERVER_NAME,
            "title": "Self Capsule",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": INSTRUCTIONS,
    })
}

/// `tools/list`: the remote door's catalogue, in one page.
fn tools_list() -> Value {
    let tools: Vec<Value> = Tool::listed(Door::Remote)
        .map(|t| {
            json!({
                "name": t.name(),
                "title": t.title(),
                "description": t.description(Door::Remote),
                "inputSchema": t.input_schema(Door::Remote),
                "annotations": { "readOnlyHint": t.read_only() },
            })
        })
        .collect();
    json!({ "tools": tools })
}

#[cfg(test)]
mod tests;
