//! The WebSocket seam: [`Connector`] opens a [`Socket`], so the watch loop
//! runs against scripted fakes in unit tests and against
//! [`TungsteniteConnector`] for real (blocking `tungstenite`, the handshake
//! and framing only, over a `TcpStream`, with rustls and the webpki roots
//! for `wss://`, the same TLS stack ureq uses).
//!
//! The socket's read timeout is the idle period: [`Socket::next`] answers
//! [`Event::Idle`] when nothing arrived for that long, and the loop sends a
//! text `ping` (the server's runtime answers `pong` without waking anything).
//! Protocol-level pings from the server are answered by tungstenite itself.

use super::super::http::Response;
use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::http::{HeaderName, HeaderValue};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{HandshakeError, Message, WebSocket};

/// Largest frame or message accepted (a head is well under 1 KiB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// An upgrade request: the `ws://` or `wss://` URL and extra headers (the
/// read signature, when signed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsRequest {
    /// `ws://` or `wss://` (from [`ws_url`]).
    pub url: String,
    /// Added to the handshake as given (lower-case names).
    pub headers: Vec<(String, String)>,
}

/// Why no socket was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// The server answered the upgrade with this (non-101) response.
    Refused(Response),
    /// No answer: DNS, connect, TLS, timeout, or a broken handshake.
    Network(String),
}

/// What the next read produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A text frame.
    Text(String),
    /// A binary frame (its length): never sent by the service.
    Binary(usize),
    /// Nothing for the read timeout.
    Idle,
    /// The server closed the connection (`None`: a Close frame with no code).
    Closed {
        /// The close code ([`crate::core::watch::Close`] lists the service's).
        code: Option<u16>,
        /// The close frame's reason text.
        reason: String,
    },
    /// The connection broke (reset, EOF without a Close frame, I/O error).
    Lost(String),
}

/// One open watch connection.
pub trait Socket {
    /// Blocks until the next frame, the close, a failure, or [`Event::Idle`].
    fn next(&mut self) -> Event;
    /// Sends a text message.
    fn send_text(&mut self, text: &str) -> Result<(), String>;
    /// Closes it (best effort, normal closure).
    fn close(&mut self);
}

/// Opens sockets.
pub trait Connector {
    /// Performs the upgrade handshake for `req`; a non-101 answer is
    /// [`ConnectError::Refused`] with the response, so its status and body
    /// can be judged like any HTTP answer.
    fn connect(&self, req: &WsRequest) -> Result<Box<dyn Socket>, ConnectError>;
}

/// `http://` → `ws://`, `https://` → `wss://` (the service URL is kept in
/// HTTP form everywhere else, and the read signature covers that form:
/// it is the URL the Worker sees).
pub fn ws_url(http_url: &str) -> Option<String> {
    if let Some(rest) = http_url.strip_prefix("https://") {
        Some(format!("wss://{rest}"))
    } else {
        http_url
            .strip_prefix("http://")
            .map(|rest| format!("ws://{rest}"))
    }
}

/// The real connector.
pub struct TungsteniteConnector {
    /// Connect, TLS and handshake timeout (each).
    pub timeout: Duration,
    /// Read timeout once open: how long without a frame before [`Event::Idle`].
    pub idle: Duration,
}

impl Connector for TungsteniteConnector {
    fn connect(&self, req: &WsRequest) -> Result<Box<dyn Socket>, ConnectError> {
        let net = |what: &str, e: &dyn std::fmt::Display| {
            ConnectError::Network(format!("{what} {}: {e}", req.url))
        };
        let mut request = req
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| net("bad URL", &e))?;
        let headers = request.headers_mut();
        let agent = concat!("selfcap/", env!("CARGO_PKG_VERSION"));
        headers.insert("user-agent", HeaderValue::from_static(agent));
        for (k, v) in &req.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| net("bad header", &e))?;
            let value = HeaderValue::from_str(v).map_err(|e| net("bad header", &e))?;
            headers.insert(name, value);
        }
        let uri = request.uri().clone();
        let tls = uri.scheme_str() == Some("wss");
        // `[::1]` in a URL is `::1` to the resolver.
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tcp = self
            .tcp(&host, port)
            .map_err(|e| net("cannot connect to", &e))?;
        let stream = if tls {
            Stream::Tls(Box::new(
                tls_stream(&host, tcp).map_err(|e| net("TLS", &e))?,
            ))
        } else {
            Stream::Plain(tcp)
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let stream = Shared(Rc::new(RefCell::new(stream)));
        let handshake =
            tungstenite::client::client_with_config(request, stream.clone(), Some(config));
        let (ws, _) = match handshake {
            Ok(done) => done,
            Err(HandshakeError::Failure(tungstenite::Error::Http(resp))) => {
                return Err(ConnectError::Refused(refusal(&resp, &stream)))
            }
            Err(HandshakeError::Failure(e)) => return Err(net("handshake with", &e)),
            // The read timed out mid-handshake (a blocking socket never
            // says WouldBlock otherwise).
            Err(HandshakeError::Interrupted(_)) => {
                return Err(net("handshake timed out with", &"no answer"))
            }
        };
        ws.get_ref()
            .set_read_timeout(self.idle)
            .map_err(|e| net("socket options for", &e))?;
        Ok(Box::new(WsSocket { ws }))
    }
}

impl TungsteniteConnector {
    /// The first address of `host` that accepts within the timeout.
    fn tcp(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in (host, port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(self.timeout))?;
                    s.set_write_timeout(Some(self.timeout))?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// The refused upgrade as the client's [`Response`] (status, headers, body).
/// tungstenite keeps only the body bytes that came with the headers, so
/// the rest of a `Content-Length` body (at most [`MAX_MESSAGE_BYTES`]) is
/// read from `stream` here: the refusal's JSON `error` decides what the
/// watch does next. Best effort: a body cut short is kept as it is.
fn refusal(resp: &tungstenite::http::Response<Option<Vec<u8>>>, stream: &Shared) -> Response {
    let mut out = Response {
        status: resp.status().as_u16(),
        headers: resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.into())))
            .collect(),
        body: resp.body().clone().unwrap_or_default(),
    };
    let length = out
        .headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_MESSAGE_BYTES);
    if out.body.len() < length {
        let missing = (length - out.body.len()) as u64;
        let mut rest = Vec::new();
        let _ = stream.clone().take(missing).read_to_end(&mut rest);
        out.body.extend(rest);
    }
    out
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// rustls (ring) with the webpki roots, as ureq configures it.
fn tls_stream(host: &str, tcp: TcpStream) -> Result<TlsStream, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("bad server name {host}: {e}"))?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

/// The stream, shared with the connector so that a refused upgrade's body
/// can be read to its end after tungstenite gave up the stream.
#[derive(Clone)]
struct Shared(Rc<RefCell<Stream>>);

impl Shared {
    fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        self.0.borrow().tcp().set_read_timeout(Some(t))
    }
}

impl Read for Shared {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.0.borrow_mut().read(b)
    }
}

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(b)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// A plain or TLS stream.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(b),
            Stream::Tls(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(b),
            Stream::Tls(s) => s.write(b),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

struct WsSocket {
    ws: WebSocket<Shared>,
}

impl Socket for WsSocket {
    fn next(&mut self) -> Event {
        loop {
            return match self.ws.read() {
                Ok(Message::Text(t)) => Event::Text(t.as_str().to_string()),
                Ok(Message::Binary(b)) => Event::Binary(b.len()),
                Ok(Message::Close(frame)) => Event::Closed {
                    code: frame.as_ref().map(|f| u16::from(f.code)),
                    reason: frame
                        .map(|f| f.reason.as_str().to_string())
                        .unwrap_or_default(),
                },
                // Pings are answered by tungstenite; nothing else to do.
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    Event::Idle
                }
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    Event::Lost("connection closed".into())
                }
                Err(e) => Event::Lost(e.to_string()),
            };
        }
    }

    fn send_text(&mut self, text: &str) -> Result<(), String> {
        self.ws
            .send(Message::text(text))
            .map_err(|e| format!("cannot send: {e}"))
    }

    fn close(&mut self) {
        // Best effort: a dead peer must not hold the exit up for long.
        let _ = self.ws.get_ref().set_read_timeout(Duration::from_secs(1));
        if self.ws.close(None).is_ok() {
            while self.ws.read().is_ok() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_urls_from_the_service_url() {
        assert_eq!(
            ws_url("http://127.0.0.1:8787/self/aa/watch").as_deref(),
            Some("ws://127.0.0.1:8787/self/aa/watch")
        );
        assert_eq!(
            ws_url("https://self.example/self/aa/watch").as_deref(),
            Some("wss://self.example/self/aa/watch")
        );
        assert_eq!(ws_url("ftp://x/self/aa/watch"), None);
    }

    #[test]
    fn a_refused_upgrades_body_is_read_to_its_end_even_when_it_comes_later() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = r#"{"error":"watch_requires_pro","upgrade_url":"/api/v1/self/upgrade/quote"}"#;
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0);
                seen.extend_from_slice(&buf[..n]);
            }
            let head = format!(
                "HTTP/1.1 402 Payment Required\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n",
                body.len()
            );
            // The headers and a few bytes, then the rest apart.
            conn.write_all(head.as_bytes()).unwrap();
            conn.write_all(&body.as_bytes()[..5]).unwrap();
            conn.flush().unwrap();
            std::thread::sleep(Duration::from_millis(200));
            conn.write_all(&body.as_bytes()[5..]).unwrap();
        });
        let c = TungsteniteConnector {
            timeout: Duration::from_secs(5),
            idle: Duration::from_secs(5),
        };
        let req = WsRequest {
            url: format!("ws://127.0.0.1:{port}/api/v1/watch/socket?agent_id=aa"),
            headers: Vec::new(),
        };
        match c.connect(&req) {
            Err(ConnectError::Refused(resp)) => {
                assert_eq!(resp.status, 402);
                assert_eq!(String::from_utf8(resp.body).unwrap(), body);
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("upgraded"),
        }
        server.join().unwrap();
    }
}
