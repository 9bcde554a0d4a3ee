//! `selfcap watch` and `selfcap feed --watch`: follow a document of an
//! agent as it changes ([`Followed`]: its head.json, or its projected watch
//! feed's head), over a WebSocket (`GET /self/{id}/watch`, or `GET
//! /api/v1/watch/socket?agent_id=…`: the server pushes the document on
//! connect and again whenever it moves) or, when that cannot be used, over
//! long-poll (`GET head.json?wait=N`, or `GET
//! /api/v1/watch/head?agent_id=…&wait=N`, with `If-None-Match`).
//!
//! Both channels carry the same document, so the watch can switch between
//! them freely: a head is delivered when its cursor differs from the last one
//! delivered ([`Dedupe`]), and a reconnect (or a switch) starts from the
//! current head, so no change is missed. Changes that come faster than a
//! reconnect or a poll round may be seen only as their latest head
//! (`history --since CURSOR` lists every version of a capsule).
//!
//! [`Client::follow`] (and [`Client::watch`], head.json's) retries forever;
//! it returns only when the capsule is not readable by this watcher
//! ([`Error::NotFound`]), when the service refuses the read signature
//! ([`Error::ReadSignature`]), when it refuses the followed document for
//! good ([`Followed::is_refusal`]: the error a read of it would give, as
//! `selfcap feed` says it), on a local error, or when the caller asks it to
//! stop (`on_head` answering `Break`, or `stopped` turning true: asked
//! before each round, after each socket event and after each long-poll
//! answer, so a caller whose socket reads and sleeps wake up often stops it
//! promptly; the Python package does).
//!
//! | module | what |
//! |---|---|
//! | `followed` | what differs between the documents: URLs, the frame check, the refusals ([`Followed`]) |
//! | `frame` | a frame or body checked as the agent's head ([`parse_head`], [`parse_feed_head`], [`WatchedHead`]); the cursor dedupe ([`Dedupe`]) |
//! | `plan` | the decisions: channel, fallback and back, signing, backoff, when to stop ([`plan::Plan`]) |
//! | `socket` | the WebSocket seam ([`Connector`], [`Socket`]) and the real one ([`TungsteniteConnector`]) |
//! | `longpoll` | the long-poll request (`?wait=N`, `If-None-Match`) and what its answers mean |
//! | `hook` | `--exec CMD`: one `sh -c` per new head, the head on stdin ([`run_hook`]) |
//!
//! Signed reads (docs/PROTOCOL.md §12) are decided as for `head`: signed
//! from the start for our own capsule known to be private; otherwise, with
//! a key, one plain read of the followed document first, unsigned and then
//! signed after a `404 capsule_not_found` (the watch itself cannot tell:
//! the service tells a watcher that may not read a private capsule
//! nothing, exactly as for an agent with no capsule, §13). A close 4404
//! (`capsule_not_found`) or a long-poll's
//! `404 capsule_not_found` also turns signing on. Without a key everything
//! is anonymous. The upgrade request is signed as a GET of its `http(s)://`
//! URL (the one the Worker sees), with the same components as every read.

mod followed;
mod frame;
mod hook;
mod longpoll;
pub mod plan;
mod socket;

#[cfg(test)]
mod tests;

pub use followed::Followed;
pub use frame::{parse_feed_head, parse_head, Dedupe, WatchedHead};
pub use hook::run_hook;
pub use longpoll::POLL_WAIT_SECS;
pub use plan::{Channel, ChannelChoice};
pub use socket::{ws_url, ConnectError, Connector, Event, Socket, TungsteniteConnector, WsRequest};

use super::exchange::read_error;
use super::http::{Request, Response};
use super::{read_sign, Client, Error};
use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::core::watch::{PING, PONG};
use longpoll::{classify, poll_request, Pacer, Poll};
use plan::{Plan, PollEnd, Step, WsEnd};
use std::fmt;
use std::ops::ControlFlow;
use std::time::Duration;

/// Read inactivity before a `ping` (the core's [`PING`], which the
/// service's runtime answers with [`PONG`]); another as long without any
/// frame after it and the connection is taken for dead.
pub const PING_EVERY: Duration = Duration::from_secs(25);

/// What the watch has to say besides heads (progress for stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Connected (WebSocket), or polling (long-poll).
    Watching(Channel),
    /// Going on after `wait` (never zero): why the last attempt ended.
    Retrying {
        /// What ended it (a close, an error, a refusal), in words.
        why: String,
        /// The backoff before the next attempt.
        wait: Duration,
    },
    /// Reads are signed from now on (asked again at once): why.
    Signing(String),
    /// Moving to the other channel: why.
    Switching {
        /// The channel watched from now on.
        to: Channel,
        /// What made the current one unusable (or the other worth another try).
        why: String,
    },
    /// A frame or answer that is not a head of the agent, skipped.
    Skipped(String),
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Watching(Channel::WebSocket) => f.write_str("watching over WebSocket"),
            Note::Watching(Channel::LongPoll) => {
                write!(f, "watching over long-poll (wait={POLL_WAIT_SECS})")
            }
            Note::Retrying { why, wait } => {
                write!(f, "{why}; trying again in {:.1} s", wait.as_secs_f64())
            }
            Note::Signing(why) => write!(f, "{why}; reading with this identity's signature"),
            Note::Switching {
                to: Channel::LongPoll,
                why,
            } => write!(f, "{why}; switching to long-poll"),
            Note::Switching {
                to: Channel::WebSocket,
                why,
            } => write!(f, "{why}; trying WebSocket again"),
            Note::Skipped(why) => write!(f, "skipped: {why}"),
        }
    }
}

/// The watch's surroundings: how to open sockets, the time, and where
/// heads and notes go.
pub struct WatchIo<'a> {
    /// Opens WebSockets (the real one over tungstenite and rustls; tests
    /// pass a scripted fake).
    pub connector: &'a dyn Connector,
    /// Monotonic time since any fixed start (tests pass a fake).
    pub clock: &'a dyn Fn() -> Duration,
    /// Each new head, in order; `Break` ends the watch (`Ok`).
    pub on_head: &'a mut dyn FnMut(&WatchedHead) -> ControlFlow<()>,
    /// Each progress [`Note`] (the CLI prints them on stderr, as
    /// `selfcap: ` lines, so stdout stays one head per line).
    pub on_note: &'a dyn Fn(&Note),
    /// Whether the caller wants the watch to end (`Ok`), asked between
    /// blocking steps (the CLI never asks: it ends with the process).
    pub stopped: &'a dyn Fn() -> bool,
}

/// How one attempt (a connection, or a poll round) ended.
enum Round {
    /// `on_head` asked to stop.
    Stop,
    /// The plan's next step; `cause`: what went wrong, if anything.
    Ended { step: Step, cause: Option<Error> },
}

/// The loop's state besides the plan.
struct Session<'s, 'a> {
    agent: &'s AgentId,
    followed: Followed,
    /// The followed document's absolute URL (the probe's, the long-poll's).
    doc_url: String,
    io: &'s mut WatchIo<'a>,
    seen: Dedupe,
    /// The channel last announced with [`Note::Watching`].
    announced: Option<Channel>,
    /// The seq of the last head received (delivered or not).
    last_seq: Option<u64>,
    pacer: Pacer,
}

/// What became of a frame or a long-poll body.
enum Delivery {
    /// A new head, handed on; what `on_head` said.
    New(ControlFlow<()>),
    /// The last head's cursor again; `advanced`: at a higher seq (a commit
    /// of the same capsule, `changed: false`).
    Repeat { advanced: bool },
    /// Not a head (already reported).
    Malformed,
}

impl Session<'_, '_> {
    fn now(&self) -> Duration {
        (self.io.clock)()
    }

    fn note(&self, n: Note) {
        (self.io.on_note)(&n)
    }

    /// Checks `text` as the followed document and hands it on when new.
    fn deliver(&mut self, text: &str, what: &str) -> Delivery {
        match self.followed.parse(text, self.agent) {
            Ok(h) => {
                let advanced = matches!((h.seq, self.last_seq), (Some(a), Some(b)) if a > b);
                self.last_seq = h.seq.or(self.last_seq);
                if self.seen.admit(&h) {
                    Delivery::New((self.io.on_head)(&h))
                } else {
                    Delivery::Repeat { advanced }
                }
            }
            Err(why) => {
                self.note(Note::Skipped(format!(
                    "{what} that is not a {}: {why}",
                    self.followed.name()
                )));
                Delivery::Malformed
            }
        }
    }
}

impl Client {
    /// Watches `agent`'s head.json until a fatal error or `on_head` says
    /// stop: [`Client::follow`] of [`Followed::Head`].
    pub fn watch(
        &self,
        agent: &AgentId,
        choice: ChannelChoice,
        io: &mut WatchIo<'_>,
    ) -> Result<(), Error> {
        self.follow(agent, Followed::Head, choice, io)
    }

    /// Follows `agent`'s `followed` document until a fatal error or
    /// `on_head` says stop. See the module docs.
    pub fn follow(
        &self,
        agent: &AgentId,
        followed: Followed,
        choice: ChannelChoice,
        io: &mut WatchIo<'_>,
    ) -> Result<(), Error> {
        let has_key = self.key().is_ok();
        let mut plan = Plan::new(choice, has_key, self.signs_reads_of(agent));
        // Whether reads must be signed is still to be found out.
        let mut probe = has_key && !plan.signed();
        let mut s = Session {
            agent,
            followed,
            doc_url: self.service_url(&followed.doc_path(agent))?,
            io,
            seen: Dedupe::default(),
            announced: None,
            last_seq: None,
            pacer: Pacer::default(),
        };
        loop {
            if (s.io.stopped)() {
                return Ok(());
            }
            if probe && !plan.signed() {
                match self.probe_signing(s.agent, &s.doc_url)? {
                    Some(false) => probe = false,
                    Some(true) => {
                        probe = false;
                        plan.sign();
                        s.note(Note::Signing(format!(
                            "{} is not readable anonymously (404 capsule_not_found)",
                            s.doc_url
                        )));
                    }
                    // No answer: asked again before the next round.
                    None => {}
                }
            }
            if plan.retry_websocket(s.now()) {
                s.note(Note::Switching {
                    to: Channel::WebSocket,
                    why: format!("on long-poll for {} s", plan::WS_RETRY_EVERY.as_secs()),
                });
            }
            let channel = plan.channel();
            let signed = plan.signed();
            let round = match channel {
                Channel::WebSocket => self.ws_round(&mut s, &mut plan)?,
                Channel::LongPoll => self.poll_round(&mut s, &mut plan)?,
            };
            let (step, cause) = match round {
                Round::Stop => return Ok(()),
                Round::Ended { step, cause } => (step, cause),
            };
            let why = |c: Option<Error>| c.map_or_else(String::new, |e| e.to_string());
            let wait = match step {
                Step::After(wait) => wait,
                Step::NotReadable => {
                    return Err(match cause {
                        Some(e @ Error::NotFound(_)) => e,
                        other => Error::NotFound(why(other)),
                    })
                }
                Step::SignatureRefused => {
                    return Err(match cause {
                        Some(e @ Error::ReadSignature(_)) => e,
                        other => Error::ReadSignature(why(other)),
                    })
                }
                Step::Refused => {
                    return Err(
                        cause.unwrap_or_else(|| Error::Protocol(format!("{} refused", s.doc_url)))
                    )
                }
            };
            if plan.channel() != channel {
                s.note(Note::Switching {
                    to: plan.channel(),
                    why: why(cause),
                });
            } else if plan.signed() != signed {
                s.note(Note::Signing(why(cause)));
            } else if let (Some(c), false) = (cause, wait.is_zero()) {
                s.note(Note::Retrying {
                    why: c.to_string(),
                    wait,
                });
            }
            if !wait.is_zero() {
                (self.sleeper)(wait);
            }
        }
    }

    /// Whether this watcher's reads of `agent` must be signed, decided by
    /// one read of the followed document at `url` as `head` makes it
    /// (unsigned, then signed after a `404 capsule_not_found`). `None`: no
    /// answer this time (network, 5xx). A refused signature is final (exit
    /// 6), as for every read; any other answer is left to the watch's
    /// rounds, which say it as the channel they use.
    fn probe_signing(&self, agent: &AgentId, url: &str) -> Result<Option<bool>, Error> {
        let (req, resp) = match self.read_doc(agent, Request::get(url.to_string())) {
            Ok(answer) => answer,
            Err(e @ Error::Local(_)) => return Err(e),
            Err(_) => return Ok(None),
        };
        match resp.status {
            // Signed only if the unsigned read was a 404 capsule_not_found.
            200 | 304 | 404 => Ok(Some(req.signed)),
            401 => Err(read_error(&req, &resp)),
            _ => Ok(None),
        }
    }

    /// One WebSocket connection, from the upgrade to its end.
    fn ws_round(&self, s: &mut Session, plan: &mut Plan) -> Result<Round, Error> {
        let http_url = self.service_url(&s.followed.socket_path(s.agent))?;
        let url = ws_url(&http_url).ok_or_else(|| {
            Error::local(format!(
                "cannot watch over WebSocket from {http_url}: the service URL must be http:// or https://"
            ))
        })?;
        let signed = plan.signed();
        let headers = if signed {
            read_sign::sign_read(&self.key()?, "GET", &http_url)?
        } else {
            Vec::new()
        };
        let mut sock = match s.io.connector.connect(&WsRequest { url, headers }) {
            Ok(sock) => sock,
            Err(refusal) => {
                let (end, cause) = match refusal {
                    socket::ConnectError::Refused(resp) => {
                        let req = Request::get(http_url).signed(signed);
                        let code = super::exchange::error_code(&resp);
                        let end = if code.as_deref().is_some_and(|c| s.followed.is_refusal(c)) {
                            WsEnd::Refusal
                        } else {
                            WsEnd::Refused {
                                status: resp.status,
                                code,
                                retry_after: resp.retry_after(),
                            }
                        };
                        (end, upgrade_refused(&req, &resp, s))
                    }
                    socket::ConnectError::Network(e) => (
                        WsEnd::Lost(e.clone()),
                        Error::Unavailable(format!("cannot open the WebSocket: {e}")),
                    ),
                };
                let step = plan.ws_ended(&end, false, s.now());
                return Ok(Round::Ended {
                    step,
                    cause: Some(cause),
                });
            }
        };
        s.note(Note::Watching(Channel::WebSocket));
        s.announced = Some(Channel::WebSocket);
        let mut delivered = false;
        let mut pinged = false;
        let end = loop {
            let event = sock.next();
            if (s.io.stopped)() {
                sock.close();
                return Ok(Round::Stop);
            }
            match event {
                Event::Text(text) => {
                    delivered = true;
                    pinged = false;
                    if text == PONG {
                        continue;
                    }
                    if let Delivery::New(ControlFlow::Break(())) = s.deliver(&text, "a frame") {
                        sock.close();
                        return Ok(Round::Stop);
                    }
                }
                Event::Binary(len) => {
                    delivered = true;
                    pinged = false;
                    s.note(Note::Skipped(format!(
                        "a binary frame ({len} bytes); the service sends only text"
                    )));
                }
                Event::Idle if pinged => {
                    break WsEnd::Lost("no answer to a ping: the connection is dead".into())
                }
                Event::Idle => match sock.send_text(PING) {
                    Ok(()) => pinged = true,
                    Err(e) => break WsEnd::Lost(e),
                },
                Event::Closed { code, reason } => break WsEnd::Closed { code, reason },
                Event::Lost(e) => break WsEnd::Lost(e),
            }
        };
        let (end, cause) = match end {
            // A close naming one of the document's refusals (§15: 4000 plus
            // the read's status, the code as the reason).
            WsEnd::Closed {
                code: Some(code @ 4400..=4499),
                reason,
            } if s.followed.is_refusal(&reason) => {
                (WsEnd::Refusal, close_refusal(&http_url, code, &reason))
            }
            end => {
                let cause = ws_end_cause(&end, s.agent);
                (end, cause)
            }
        };
        let step = plan.ws_ended(&end, delivered, s.now());
        Ok(Round::Ended {
            step,
            cause: Some(cause),
        })
    }

    /// One long-poll request.
    fn poll_round(&self, s: &mut Session, plan: &mut Plan) -> Result<Round, Error> {
        if s.announced != Some(Channel::LongPoll) {
            s.note(Note::Watching(Channel::LongPoll));
            s.announced = Some(Channel::LongPoll);
        }
        let wait = Duration::from_secs(POLL_WAIT_SECS);
        let req = poll_request(&s.doc_url, POLL_WAIT_SECS, s.seen.etag()).signed(plan.signed());
        let started = s.now();
        let answer = self.exchange(&req);
        let elapsed = s.now().saturating_sub(started);
        if (s.io.stopped)() {
            return Ok(Round::Stop);
        }
        let resp = match answer {
            Ok((resp, _)) => resp,
            // No key to sign with, or no randomness: local, final.
            Err(e @ Error::Local(_)) => return Err(e),
            Err(e) => {
                let step = plan.poll_ended(&PollEnd::Failed);
                return Ok(Round::Ended {
                    step,
                    cause: Some(e),
                });
            }
        };
        let seen = s.seen.last().is_some();
        let (end, cause) = match classify(&resp, s.followed, elapsed, wait, seen) {
            Poll::Head(body) => {
                let text = String::from_utf8_lossy(body);
                let what = format!("a {} answer", s.followed.name());
                let pace = match s.deliver(&text, &what) {
                    Delivery::New(ControlFlow::Break(())) => return Ok(Round::Stop),
                    // A new head, or a commit that kept the cursor.
                    Delivery::New(ControlFlow::Continue(()))
                    | Delivery::Repeat { advanced: true } => Some(s.pacer.changed()),
                    Delivery::Repeat { advanced: false } => Some(s.pacer.unchanged(elapsed, wait)),
                    // Reported; asking again at once would get it again.
                    Delivery::Malformed => None,
                };
                match pace {
                    Some(pace) => (PollEnd::Answered { pace }, None),
                    None => (PollEnd::Failed, None),
                }
            }
            Poll::NotModified => {
                let pace = s.pacer.unchanged(elapsed, wait);
                (PollEnd::Answered { pace }, None)
            }
            Poll::End(end @ PollEnd::Answered { .. }) => (end, None),
            Poll::End(PollEnd::NothingYet) => {
                let cause = Error::NotFound(format!(
                    "{} answered 404 capsule_not_found after {POLL_WAIT_SECS} s: nothing \
                     published for {} yet",
                    req.url, s.agent
                ));
                (PollEnd::NothingYet, Some(cause))
            }
            Poll::End(PollEnd::NotReadable) => {
                let cause = poll_not_readable(&req, s.agent, seen);
                (PollEnd::NotReadable, Some(cause))
            }
            Poll::End(end) => (end, Some(read_error(&req, &resp))),
        };
        let step = plan.poll_ended(&end);
        Ok(Round::Ended { step, cause })
    }
}

/// Who a read was made as, for messages.
fn reader(req: &Request) -> &'static str {
    if req.signed {
        "this identity"
    } else {
        "an anonymous reader"
    }
}

/// A long-poll's `404 capsule_not_found` that is not "nothing yet" (see
/// `longpoll`): the capsule went private, or is private (or absent).
fn poll_not_readable(req: &Request, agent: &AgentId, seen: bool) -> Error {
    Error::NotFound(if seen {
        format!(
            "{} answered 404 capsule_not_found: the capsule of {agent} is not readable by this \
             watcher any more (private, and {} is not granted that read)",
            req.url,
            reader(req)
        )
    } else {
        format!(
            "{} answered 404 capsule_not_found without waiting: no capsule for {agent}, or it \
             is private and {} is not granted that read",
            req.url,
            reader(req)
        )
    })
}

/// How a WebSocket that was open ended, as an error (for the progress note,
/// or the final error of a 4404).
fn ws_end_cause(end: &WsEnd, agent: &AgentId) -> Error {
    match end {
        WsEnd::Closed {
            code: Some(4404),
            reason,
        } => Error::NotFound(format!(
            "the WebSocket was closed with 4404 ({reason}): the capsule of {agent} is not \
             readable by this watcher any more (private, and not granted to it)"
        )),
        WsEnd::Closed { code, reason } => Error::Unavailable(format!(
            "the service closed the WebSocket ({}{}{reason})",
            code.map_or("no code".to_string(), |c| c.to_string()),
            if reason.is_empty() { "" } else { ": " },
        )),
        WsEnd::Lost(e) => Error::Unavailable(format!("WebSocket lost: {e}")),
        WsEnd::Refused { .. } | WsEnd::Refusal => unreachable!("only before the upgrade"),
    }
}

/// A close of the socket at `url` naming a refusal (`code` 4000 plus the
/// read's status, the error code as `reason`) as the error that read is
/// (its kind, so its exit code, is [`read_error`]'s), said as the close.
fn close_refusal(url: &str, code: u16, reason: &str) -> Error {
    let read = Response {
        status: code - 4000,
        headers: Vec::new(),
        body: serde_json::json!({ "error": reason })
            .to_string()
            .into_bytes(),
    };
    let said = format!(
        "the service closed the WebSocket {url} with {code} {reason}: {}",
        ReasonCode::from_wire(reason).map_or("", ReasonCode::bot_action)
    );
    match read_error(&Request::get(url.to_string()), &read) {
        Error::NotFound(_) => Error::NotFound(said),
        Error::Protocol(_) => Error::Protocol(said),
        Error::Unavailable(_) => Error::Unavailable(said),
        other => other,
    }
}

/// A refused upgrade as an error: what the same read would be. For
/// head.json's socket a `404 capsule_not_found` always means "private and
/// not readable": an agent with no capsule yet is upgraded and simply sent
/// nothing until its first write ([`Followed::upgrades_unpublished`]); the
/// feed's says either.
fn upgrade_refused(req: &Request, resp: &Response, s: &Session) -> Error {
    match read_error(req, resp) {
        Error::NotFound(_) if resp.status == 404 => {
            let why = if s.followed.upgrades_unpublished() {
                "the capsule is private".to_string()
            } else {
                format!("no capsule for {}, or it is private", s.agent)
            };
            Error::NotFound(format!(
                "{} answered 404 capsule_not_found: {why} and {} is not granted that read",
                req.url,
                reader(req)
            ))
        }
        other => other,
    }
}
