//! Every public URL of the service, in one place: how a request path is
//! parsed into a [`Route`], how each per-agent document ([`Doc`]) is spelled,
//! and which methods each route allows. The Worker routes with it, the client
//! builds its URLs with it, and the OpenAPI test enumerates it, so a route
//! cannot exist in one of them and not the others.
//!
//! Matching is a plain split on `/` (no router crate): there are a handful of
//! routes and every byte of wasm counts against cold start time. Anything
//! not listed here (including trailing slashes) is unknown, so every
//! document has exactly one spelling per prefix for caches.

use crate::core::crypto::AgentId;
use crate::core::jcs::cursor_hex;
use std::borrow::Cow;

/// The prefixes every per-agent document lives under (the same documents
/// under both). `/api/v1/self/` also holds the service routes.
pub const PREFIXES: [&str; 2] = ["/self/", "/api/v1/self/"];
/// Path of the stateless bootstrap helper.
pub const BOOTSTRAP_PATH: &str = "/api/v1/self/bootstrap";
/// Path of the service keyring.
pub const KEYS_PATH: &str = "/api/v1/self/keys";
/// Path of the upgrade quote.
pub const QUOTE_PATH: &str = "/api/v1/self/upgrade/quote";
/// Path of the upgrade claim.
pub const CLAIM_PATH: &str = "/api/v1/self/upgrade/claim";
/// Path of the x402 purchase (`?plan=…&agent_id=…`, §10).
pub const X402_PATH: &str = "/api/v1/self/upgrade/x402";
/// Paths of an agent's projected watch feed (`?agent_id=…`, §15).
pub const FEED_PATHS: [(FeedDoc, &str); 3] = [
    (FeedDoc::Head, "/api/v1/watch/head"),
    (FeedDoc::Latest, "/api/v1/watch/latest"),
    (FeedDoc::Digest, "/api/v1/watch/digest"),
];

/// Path of a WebSocket of an agent's projected head (`?agent_id=…`, §15):
/// every frame is the head `FEED_PATHS`' head answers, sent when it moves.
pub const FEED_SOCKET_PATH: &str = "/api/v1/watch/socket";

/// A document of a projected watch feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedDoc {
    /// The projected head: its cursor moves only when the projection does.
    Head,
    /// The projected items, a ddv1 feed.
    Latest,
    /// Counts per selected source.
    Digest,
}

impl FeedDoc {
    /// Its path.
    pub fn path(self) -> &'static str {
        FEED_PATHS
            .iter()
            .find(|(d, _)| *d == self)
            .map(|(_, p)| *p)
            .expect("every feed document has a path")
    }
}

/// Path of the remote MCP server (Streamable HTTP, one JSON-RPC message per
/// POST; no GET stream, so GET is a 405 as the transport allows).
pub const MCP_PATH: &str = "/mcp";
/// Every path of the operator API starts with this (docs/PROTOCOL.md §17);
/// the write Worker decides the rest (`core::operator::admin`).
pub const ADMIN_PREFIX: &str = "/api/v1/admin/";
/// The operator API's paths, for documentation checks.
pub const ADMIN_PATHS: [&str; 3] = [
    "/api/v1/admin/agents",
    "/api/v1/admin/agents/{agent_id}",
    "/api/v1/admin/stats",
];

/// `Allow` of the read-only documents.
pub const ALLOW_READ: &str = "GET, HEAD, OPTIONS";
/// `Allow` of capsule.json (the only writable document).
pub const ALLOW_CAPSULE: &str = "GET, HEAD, PUT, OPTIONS";
/// `Allow` of keys.json: read the key log, or POST a key event (§14).
pub const ALLOW_KEY_LOG: &str = "GET, HEAD, POST, OPTIONS";
/// `Allow` of the POST-only service routes (bootstrap, quote, claim, MCP).
pub const ALLOW_POST: &str = "POST, OPTIONS";
/// `Allow` of an agent's watch (a WebSocket upgrade is a GET).
pub const ALLOW_WATCH: &str = "GET, OPTIONS";
/// `Allow` of the operator API's routes (no CORS: an operator's tools are
/// not web pages of other origins).
pub const ALLOW_ADMIN: &str = "GET, HEAD";
/// The last path segment of an agent's watch: `/self/{agent_id}/watch`.
pub const WATCH_FILE: &str = "watch";

/// An agent's watch path under `/self/` (relative, like [`Doc::path`]).
pub fn watch_path(agent_id: &str) -> String {
    format!("{}{agent_id}/{WATCH_FILE}", PREFIXES[0])
}

/// Request headers a browser may send cross-origin to the documents and
/// service routes: also `X-Self-Agent-Id`, which the public deployment's
/// browser clients send; it is allowed so their requests are not blocked,
/// and ignored (it proves nothing: reads are authorised by signatures), and
/// the three headers of a signed read (docs/PROTOCOL.md §12).
pub const PREFLIGHT_HEADERS: &str =
    "Content-Type, If-None-Match, X-Self-Agent-Id, Signature, Signature-Input, Self-Public-Key";
/// Request headers an MCP client sends (browser clients need them allowed):
/// the version header on every request, `Accept`, and what SDKs send even
/// to a stateless server (`Mcp-Session-Id`, `Last-Event-ID`, `Authorization`
/// for servers that use it; this one ignores all three).
pub const MCP_PREFLIGHT_HEADERS: &str =
    "Content-Type, Accept, Authorization, Mcp-Protocol-Version, \
    Mcp-Session-Id, Last-Event-ID, Signature, Signature-Input, Self-Public-Key";

/// Request headers an x402 client sends: the payment (v2 and v1) and the
/// `Access-Control-Expose-Headers` some clients send as a request header.
pub const X402_PREFLIGHT_HEADERS: &str =
    "Content-Type, PAYMENT-SIGNATURE, X-PAYMENT, Access-Control-Expose-Headers";

/// The request methods the service tells apart. Anything else (`DELETE`,
/// `PATCH`, WebDAV's `PROPFIND`, …) is [`Method::Other`], which no route
/// allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`: a GET without the body.
    Head,
    /// `PUT`: the signed write.
    Put,
    /// `POST`: bootstrap only.
    Post,
    /// `OPTIONS`: CORS preflight.
    Options,
    /// Every other method.
    Other,
}

impl Method {
    /// Reads a raw request method (ASCII case-insensitive, as the runtime
    /// normalises the standard ones anyway).
    pub fn parse(raw: &str) -> Method {
        const KNOWN: [(&str, Method); 5] = [
            ("GET", Method::Get),
            ("HEAD", Method::Head),
            ("PUT", Method::Put),
            ("POST", Method::Post),
            ("OPTIONS", Method::Options),
        ];
        KNOWN
            .iter()
            .find(|(name, _)| raw.eq_ignore_ascii_case(name))
            .map_or(Method::Other, |(_, m)| *m)
    }

    /// What a WebSocket upgrade request (`Upgrade: websocket`) was sent as,
    /// as far as can be told. workerd hands the Worker every such request as a
    /// `GET`, whatever its method, and answers a 500 of its own if the Worker
    /// then accepts the socket for what was not a GET. What survives is in
    /// the headers: a CORS preflight names the method it asks about
    /// (`Access-Control-Request-Method`), and a method with a body declares
    /// it (`Content-Length` or `Transfer-Encoding`), which an opening
    /// handshake never does (RFC 6455 §4.1: a GET with no body). A bodiless
    /// DELETE is the one it cannot tell from a GET.
    pub fn of_upgrade(reported: Method, preflight: bool, declares_body: bool) -> Method {
        match reported {
            Method::Get if preflight => Method::Options,
            Method::Get if declares_body => Method::Other,
            m => m,
        }
    }

    /// `GET` or `HEAD`.
    pub fn is_read(self) -> bool {
        matches!(self, Method::Get | Method::Head)
    }
}

/// A per-agent public document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doc<'a> {
    /// `head.json`: the ~200-byte pointer agents poll.
    Head,
    /// `capsule.json`: the capsule's canonical bytes; `PUT` writes it.
    Capsule,
    /// `history.json`: retained versions, newest first.
    History,
    /// `verify.json`: the chain's verification report.
    Verify,
    /// `export.json`: the offline-verifiable bundle.
    Export,
    /// `keys.json`: the agent's key log (docs/PROTOCOL.md §14); `POST`
    /// submits a key event.
    KeyLog,
    /// `meta.json`: the agent's writes and refusals (docs/PROTOCOL.md §16).
    Meta,
    /// `snapshot/{cursor}.json`, holding the cursor text as it appeared in
    /// the path (parse it with [`crate::core::jcs::normalize_cursor`]).
    Snapshot(&'a str),
}

impl<'a> Doc<'a> {
    /// The documents with a fixed file name, in the order the docs list them.
    pub const FIXED: [Doc<'static>; 7] = [
        Doc::Head,
        Doc::Capsule,
        Doc::History,
        Doc::Verify,
        Doc::Export,
        Doc::KeyLog,
        Doc::Meta,
    ];
    /// The parts of `snapshot/{cursor}.json` around the cursor.
    pub const SNAPSHOT_PARTS: (&'static str, &'static str) = ("snapshot/", ".json");

    /// The file part of the path: `head.json`, `snapshot/{hex}.json` …
    pub fn file(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Doc::Head => "head.json",
            Doc::Capsule => "capsule.json",
            Doc::History => "history.json",
            Doc::Verify => "verify.json",
            Doc::Export => "export.json",
            Doc::KeyLog => "keys.json",
            Doc::Meta => "meta.json",
            Doc::Snapshot(cursor) => {
                let (pre, post) = Doc::SNAPSHOT_PARTS;
                return Cow::Owned(format!("{pre}{}{post}", cursor_hex(cursor)));
            }
        })
    }

    /// The document's public path under `/self/` (relative, as the spec's
    /// examples and the service's own bodies spell it).
    pub fn path(&self, agent_id: &str) -> String {
        format!("{}{agent_id}/{}", PREFIXES[0], self.file())
    }

    /// The `Allow` value for this document.
    pub fn allow(&self) -> &'static str {
        match self {
            Doc::Capsule => ALLOW_CAPSULE,
            Doc::KeyLog => ALLOW_KEY_LOG,
            _ => ALLOW_READ,
        }
    }

    fn from_file(file: &'a str) -> Option<Doc<'a>> {
        if let Some(doc) = Doc::FIXED.into_iter().find(|d| d.file() == file) {
            return Some(doc);
        }
        let (pre, post) = Doc::SNAPSHOT_PARTS;
        let cursor = file.strip_prefix(pre)?.strip_suffix(post)?;
        (!cursor.is_empty() && !cursor.contains('/')).then_some(Doc::Snapshot(cursor))
    }
}

/// What a request path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// A per-agent document; `raw_id` is the id segment as sent (checked by
    /// [`Route::dispatch`] only after the method, so a bad method on a bad
    /// id is a 405 like any other).
    Agent {
        /// Which document.
        doc: Doc<'a>,
        /// The agent id segment, unparsed.
        raw_id: &'a str,
    },
    /// `POST /api/v1/self/bootstrap`.
    Bootstrap,
    /// `GET /api/v1/self/keys`.
    Keys,
    /// `POST /api/v1/self/upgrade/quote`.
    Quote,
    /// `POST /api/v1/self/upgrade/claim`.
    Claim,
    /// `POST /api/v1/self/upgrade/x402?plan=…&agent_id=…`.
    X402,
    /// `POST /mcp`.
    Mcp,
    /// Under [`ADMIN_PREFIX`]: the operator API, `rest` the path after it
    /// (any method: the write Worker answers, 404 when it is off).
    Admin {
        /// The path after the prefix.
        rest: &'a str,
    },
    /// `GET /api/v1/watch/{head,latest,digest}?agent_id=…`.
    Feed(FeedDoc),
    /// `GET /api/v1/watch/socket?agent_id=…`: a WebSocket of the projected
    /// head.
    FeedSocket,
    /// `GET /self/{id}/watch`: a WebSocket of the agent's heads; `raw_id`
    /// as for [`Route::Agent`].
    Watch {
        /// The agent id segment, unparsed.
        raw_id: &'a str,
    },
    /// Nothing lives here.
    NotFound,
}

/// What the Worker should do with a request: the whole routing decision,
/// made without touching the request body or any storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// Serve a per-agent document (`head_only` for `HEAD`).
    Read {
        /// Which document.
        doc: Doc<'a>,
        /// The agent.
        agent: AgentId,
        /// `HEAD`: same headers, no body.
        head_only: bool,
    },
    /// The signed write to capsule.json.
    Write {
        /// The agent in the path.
        agent: AgentId,
    },
    /// A key event posted to keys.json (§14).
    KeyEvent {
        /// The agent in the path.
        agent: AgentId,
    },
    /// Open a watch of the agent's heads (the WebSocket upgrade itself is
    /// checked by the handler, which answers 426 without one).
    Watch {
        /// The agent in the path.
        agent: AgentId,
    },
    /// `POST` bootstrap.
    Bootstrap,
    /// `POST` an upgrade quote.
    Quote,
    /// `POST` an upgrade claim.
    Claim,
    /// `POST` an x402 purchase (the query is checked by the handler).
    X402,
    /// `POST` one MCP message.
    Mcp,
    /// The operator API (every method and path under it, preflights too:
    /// off, it must look like any unknown path).
    Admin {
        /// The path after [`ADMIN_PREFIX`].
        rest: &'a str,
    },
    /// Open a watch of an agent's projected head (the WebSocket upgrade
    /// and the query are checked by the handler).
    FeedSocket,
    /// Serve a projected watch feed document (`head_only` for `HEAD`).
    Feed {
        /// Which document.
        doc: FeedDoc,
        /// `HEAD`: same headers, no body.
        head_only: bool,
    },
    /// The service keyring (`head_only` for `HEAD`).
    Keys {
        /// `HEAD`: same headers, no body.
        head_only: bool,
    },
    /// CORS preflight for a route that allows these methods.
    Preflight {
        /// The route's `Allow` value.
        allow: &'static str,
        /// The request headers it accepts cross-origin.
        headers: &'static str,
    },
    /// 405 with this `Allow`.
    MethodNotAllowed {
        /// The route's `Allow` value.
        allow: &'static str,
    },
    /// 400 `bad_agent_id`.
    BadAgentId,
    /// 404 `not_found`.
    NotFound,
}

impl<'a> Route<'a> {
    /// `/self/{id}/{head,capsule,history,verify,export}.json`,
    /// `/self/{id}/snapshot/{cursor}.json`, `/self/{id}/watch`, the same
    /// under `/api/v1`, and `/api/v1/self/{bootstrap,keys}`.
    pub fn parse(path: &'a str) -> Route<'a> {
        if path == BOOTSTRAP_PATH {
            return Route::Bootstrap;
        }
        if path == KEYS_PATH {
            return Route::Keys;
        }
        if path == QUOTE_PATH {
            return Route::Quote;
        }
        if path == CLAIM_PATH {
            return Route::Claim;
        }
        if path == X402_PATH {
            return Route::X402;
        }
        if path == MCP_PATH {
            return Route::Mcp;
        }
        if let Some(rest) = path.strip_prefix(ADMIN_PREFIX) {
            return Route::Admin { rest };
        }
        if let Some((doc, _)) = FEED_PATHS.iter().find(|(_, p)| *p == path) {
            return Route::Feed(*doc);
        }
        if path == FEED_SOCKET_PATH {
            return Route::FeedSocket;
        }
        let Some(rest) = PREFIXES.iter().find_map(|p| path.strip_prefix(p)) else {
            return Route::NotFound;
        };
        let Some((raw_id, file)) = rest.split_once('/') else {
            return Route::NotFound;
        };
        if file == WATCH_FILE && !raw_id.is_empty() {
            return Route::Watch { raw_id };
        }
        match Doc::from_file(file) {
            Some(doc) if !raw_id.is_empty() => Route::Agent { doc, raw_id },
            _ => Route::NotFound,
        }
    }

    /// The route's `Allow` value (`None` for [`Route::NotFound`]).
    pub fn allow(&self) -> Option<&'static str> {
        match self {
            Route::Agent { doc, .. } => Some(doc.allow()),
            Route::Bootstrap | Route::Quote | Route::Claim | Route::X402 | Route::Mcp => {
                Some(ALLOW_POST)
            }
            Route::Keys | Route::Feed(_) => Some(ALLOW_READ),
            Route::Admin { .. } => Some(ALLOW_ADMIN),
            Route::Watch { .. } | Route::FeedSocket => Some(ALLOW_WATCH),
            Route::NotFound => None,
        }
    }

    /// Decides what a `method` on this route does. Order: unknown path,
    /// preflight, method, then the agent id.
    pub fn dispatch(self, method: Method) -> Action<'a> {
        if let Route::Admin { rest } = self {
            return Action::Admin { rest };
        }
        let Some(allow) = self.allow() else {
            return Action::NotFound;
        };
        if method == Method::Options {
            let headers = match self {
                Route::Mcp => MCP_PREFLIGHT_HEADERS,
                Route::X402 => X402_PREFLIGHT_HEADERS,
                _ => PREFLIGHT_HEADERS,
            };
            return Action::Preflight { allow, headers };
        }
        let head_only = method == Method::Head;
        let not_allowed = Action::MethodNotAllowed { allow };
        match self {
            Route::NotFound => Action::NotFound,
            Route::Admin { rest } => Action::Admin { rest },
            Route::Bootstrap if method == Method::Post => Action::Bootstrap,
            Route::Quote if method == Method::Post => Action::Quote,
            Route::Claim if method == Method::Post => Action::Claim,
            Route::X402 if method == Method::Post => Action::X402,
            Route::Mcp if method == Method::Post => Action::Mcp,
            Route::Keys if method.is_read() => Action::Keys { head_only },
            Route::Feed(doc) if method.is_read() => Action::Feed { doc, head_only },
            Route::FeedSocket if method == Method::Get => Action::FeedSocket,
            Route::Bootstrap
            | Route::Quote
            | Route::Claim
            | Route::X402
            | Route::Mcp
            | Route::Keys
            | Route::Feed(_)
            | Route::FeedSocket => not_allowed,
            Route::Watch { raw_id } => {
                if method != Method::Get {
                    return not_allowed;
                }
                match AgentId::parse(raw_id) {
                    Some(agent) => Action::Watch { agent },
                    None => Action::BadAgentId,
                }
            }
            Route::Agent { doc, raw_id } => {
                let write = method == Method::Put && doc == Doc::Capsule;
                let key_event = method == Method::Post && doc == Doc::KeyLog;
                if !method.is_read() && !write && !key_event {
                    return not_allowed;
                }
                let Some(agent) = AgentId::parse(raw_id) else {
                    return Action::BadAgentId;
                };
                if write {
                    Action::Write { agent }
                } else if key_event {
                    Action::KeyEvent { agent }
                } else {
                    Action::Read {
                        doc,
                        agent,
                        head_only,
                    }
                }
            }
        }
    }
}

/// Every routable path template with its `Allow` value, for documentation
/// checks: `{agent_id}` and `{cursor}` stand for the parameters.
pub fn templates() -> Vec<(String, &'static str)> {
    let mut docs: Vec<(String, &'static str)> = Doc::FIXED
        .iter()
        .map(|d| (d.file().into_owned(), d.allow()))
        .collect();
    let (pre, post) = Doc::SNAPSHOT_PARTS;
    docs.push((format!("{pre}{{cursor}}{post}"), ALLOW_READ));
    docs.push((WATCH_FILE.to_owned(), ALLOW_WATCH));
    let mut out = Vec::new();
    for prefix in PREFIXES {
        for (file, allow) in &docs {
            out.push((format!("{prefix}{{agent_id}}/{file}"), *allow));
        }
    }
    out.push((BOOTSTRAP_PATH.to_owned(), ALLOW_POST));
    out.push((KEYS_PATH.to_owned(), ALLOW_READ));
    out.push((QUOTE_PATH.to_owned(), ALLOW_POST));
    out.push((CLAIM_PATH.to_owned(), ALLOW_POST));
    out.push((X402_PATH.to_owned(), ALLOW_POST));
    out.push((MCP_PATH.to_owned(), ALLOW_POST));
    for (_, p) in FEED_PATHS {
        out.push((p.to_owned(), ALLOW_READ));
    }
    out.push((FEED_SOCKET_PATH.to_owned(), ALLOW_WATCH));
    for p in ADMIN_PATHS {
        out.push((p.to_owned(), ALLOW_ADMIN));
    }
    out
}

/// The path and query of an absolute URL as the runtime serialises it
/// (WHATWG: `scheme://authority/path?query#fragment`, with every `?` and `#`
/// inside the path percent-encoded and a special scheme's path never empty),
/// without parsing it again: the path (`/` if there is none, as a parser
/// would give), and the query if there is one (without its `?`).
pub fn split_href(href: &str) -> (&str, Option<&str>) {
    let after_scheme = href.find("://").map_or(0, |i| i + 3);
    let rest = &href[after_scheme..];
    // The authority ends at the first of these.
    let rest = rest.find(['/', '?', '#']).map_or("", |i| &rest[i..]);
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

/// The origin of an absolute URL as the runtime serialises it (what
/// `new URL(href).origin` gives for `http(s)`): scheme, `://`, host and a
/// port that is not the scheme's default (the serialiser already dropped a
/// default one), without the credentials of a `user:pass@` authority. Read
/// off the text, as [`split_href`] reads the path: parsing the URL again
/// would put a URL parser and its IDNA tables in the Worker for nothing.
pub fn origin_of(href: &str) -> String {
    let Some(at) = href.find("://") else {
        return String::new();
    };
    let (scheme, rest) = (&href[..at], &href[at + 3..]);
    let authority = rest.find(['/', '?', '#']).map_or(rest, |i| &rest[..i]);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}")
}

/// The host (with its port when it is not the scheme's default) and path
/// of an absolute `http(s)` URL, `host[:port]/path`, without the query, as
/// a WHATWG parser would give them (`url.host` and `url.pathname`: the host
/// in lower case, `:443`/`:80` dropped, `/` for no path): what a CDP token
/// binds (the x402 facilitator's calls). `None` when `url` is not absolute.
pub fn host_and_path(url: &str) -> Option<String> {
    let at = url.find("://")?;
    let (scheme, rest) = (&url[..at], &url[at + 3..]);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => "",
    };
    let host = match host.strip_suffix(default_port) {
        Some(bare) if !default_port.is_empty() => bare,
        _ => host,
    };
    Some(format!(
        "{}{}",
        host.to_ascii_lowercase(),
        split_href(url).0
    ))
}

#[cfg(test)]
mod tests;
