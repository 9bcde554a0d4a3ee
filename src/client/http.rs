//! The HTTP seam: a tiny request/response model and a [`Transport`] trait,
//! so the client's logic runs against a scripted fake in unit tests and
//! against [`UreqTransport`] (blocking HTTP/1.1, rustls) for real.

use std::fmt;
use std::time::Duration;

/// Largest response body read (a capsule is at most 24 KiB; history and
/// export bodies are bigger but bounded by the retention caps).
pub const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// One HTTP request as the client builds it: plain data, so a test can
/// compare what would be sent without a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `PUT` or `POST` (the only methods the service routes).
    pub method: &'static str,
    /// The absolute URL, query included.
    pub url: String,
    /// Header names in lower case ([`Request::header`] lowers them), in the
    /// order they are sent.
    pub headers: Vec<(String, String)>,
    /// The body bytes, sent exactly as given (`None`: no body).
    pub body: Option<Vec<u8>>,
    /// Sign it as a read (docs/PROTOCOL.md §12) before sending. The
    /// signature is added per attempt by `Client::exchange`, never stored
    /// here: a resent nonce would be refused as a replay.
    pub signed: bool,
}

impl Request {
    /// A bodiless `GET` of `url`, unsigned.
    pub fn get(url: impl Into<String>) -> Request {
        Request {
            method: "GET",
            url: url.into(),
            headers: Vec::new(),
            body: None,
            signed: false,
        }
    }

    /// A request carrying a JSON `body` (already serialised: a signed
    /// envelope's bytes must reach the service as they were signed), with
    /// its `content-type`.
    pub fn json(method: &'static str, url: impl Into<String>, body: Vec<u8>) -> Request {
        Request {
            method,
            url: url.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(body),
            signed: false,
        }
    }

    /// The same request with one more header, its name lowered so lookups
    /// and the read signature's covered components agree on the spelling.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Request {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The same request, to be signed as a read (or not).
    pub fn signed(mut self, signed: bool) -> Request {
        self.signed = signed;
        self
    }
}

/// One HTTP answer, whatever its status: deciding what a 4xx or 5xx means
/// is the retry policy's job, not the transport's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// The whole body, at most [`MAX_RESPONSE_BYTES`].
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name`, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The wait the service asked for: the body's `retry_after_sec`, else
    /// the `Retry-After` header (seconds form).
    pub fn retry_after(&self) -> Option<Duration> {
        let from_body = serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v.get("retry_after_sec").and_then(|s| s.as_u64()));
        from_body
            .or_else(|| self.header("retry-after")?.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    }

    /// The body as text, lossy, shortened for error messages.
    pub fn snippet(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut short: String = one_line.chars().take(200).collect();
        if short.len() < one_line.len() {
            short.push('…');
        }
        short
    }
}

/// A network-level failure: no HTTP answer came back. `Display` is one line
/// (it ends up in "service unreachable: …" and in retry notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The request could not even be built (e.g. a malformed URL).
    BadRequest {
        /// The URL the request was for.
        url: String,
        /// What the HTTP library objected to.
        detail: String,
    },
    /// No complete answer within the timeout.
    Timeout(String),
    /// Connection, TLS or I/O failure (refused, reset, DNS, …).
    Network(String),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::BadRequest { url, detail } => {
                write!(f, "bad request for {url}: {detail}")
            }
            TransportError::Timeout(t) => write!(f, "timed out ({t})"),
            TransportError::Network(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for TransportError {}

/// Sends one request. `Err` is a network-level failure (no HTTP answer).
/// Every HTTP status, 4xx and 5xx included, is `Ok`: what a status means is
/// the retry policy's call, not the transport's.
pub trait Transport {
    /// Sends `req` once (no retries: the retry loop is `Client`'s) and reads
    /// the whole answer.
    fn send(&self, req: &Request) -> Result<Response, TransportError>;
}

/// The real transport.
pub struct UreqTransport {
    agent: ureq::Agent,
}

impl UreqTransport {
    /// A transport whose every request (connect, send and the whole body)
    /// must finish within `timeout`; any HTTP status is an answer, not an
    /// error.
    pub fn new(timeout: Duration) -> UreqTransport {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("selfcap/", env!("CARGO_PKG_VERSION")))
            .build();
        UreqTransport {
            agent: config.into(),
        }
    }
}

impl Transport for UreqTransport {
    fn send(&self, req: &Request) -> Result<Response, TransportError> {
        let mut builder = ureq::http::Request::builder()
            .method(req.method)
            .uri(&req.url);
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let bad = |e: ureq::http::Error| TransportError::BadRequest {
            url: req.url.clone(),
            detail: e.to_string(),
        };
        let result = match &req.body {
            Some(body) => self.agent.run(builder.body(body.as_slice()).map_err(bad)?),
            None => self.agent.run(builder.body(()).map_err(bad)?),
        };
        let mut resp = result.map_err(describe)?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.into())))
            .collect();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(describe)?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

fn describe(e: ureq::Error) -> TransportError {
    match e {
        ureq::Error::Io(io) => TransportError::Network(io.to_string()),
        ureq::Error::Timeout(t) => TransportError::Timeout(t.to_string()),
        other => TransportError::Network(other.to_string()),
    }
}
