//! The watch loop against scripted fakes: a connector whose sockets replay
//! events, an HTTP transport whose long-poll answers are scripted (each
//! with the time the service held it), and a fake clock that the sleeper
//! and the transport move forward. Each test ends by `on_head` asking to
//! stop or by a fatal error; a fake asked for more than its script panics,
//! so a loop that goes on when it should not fails the test.

use super::plan::WS_RETRY_EVERY;
use super::*;
use crate::client::http::{Response, Transport, TransportError};
use crate::client::{BackoffPolicy, ExitCode, StateDir};
use crate::core::crypto::AgentKey;
use crate::core::read_auth;
use crate::core::watch::PONG;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::rc::Rc;

const BASE: &str = "http://svc.test";
const S: fn(u64) -> Duration = Duration::from_secs;

fn watched() -> AgentId {
    AgentId::parse(&"a".repeat(64)).unwrap()
}

fn cursor(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// head.json's body for cursor `c` at `seq`.
fn head(c: char, seq: u64) -> String {
    serde_json::json!({
        "agent_id": watched().as_str(), "cursor": cursor(c), "prev_cursor": null,
        "changed": true, "seq": seq, "generated_at": "2026-02-10T00:00:00Z", "ttl_sec": 600,
        "capsule_url": "/self/x/capsule.json", "writes": {"limit_24h": 5, "used_24h": 1}
    })
    .to_string()
}

fn text(c: char, seq: u64) -> Event {
    Event::Text(head(c, seq))
}

fn closed(code: u16) -> Event {
    Event::Closed {
        code: Some(code),
        reason: "bye".into(),
    }
}

fn json(status: u16, body: &str) -> Response {
    Response {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// One scripted connection attempt.
enum Attempt {
    Refuse(Response),
    Fail(&'static str),
    Open(Vec<Event>),
}

#[derive(Default)]
struct Wire {
    attempts: VecDeque<Attempt>,
    upgrades: Vec<WsRequest>,
    sent: Vec<String>,
    /// Long-poll answers: the answer and how long the service held it.
    polls: VecDeque<(Result<Response, TransportError>, Duration)>,
    requests: Vec<Request>,
    /// Sockets the loop closed.
    closes: usize,
}

#[derive(Clone, Default)]
struct Fake {
    wire: Rc<RefCell<Wire>>,
    clock: Rc<Cell<Duration>>,
    slept: Rc<RefCell<Vec<Duration>>>,
}

struct FakeSocket {
    events: VecDeque<Event>,
    wire: Rc<RefCell<Wire>>,
}

impl Socket for FakeSocket {
    fn next(&mut self) -> Event {
        self.events
            .pop_front()
            .expect("the socket's script ended: the loop should have stopped")
    }

    fn send_text(&mut self, text: &str) -> Result<(), String> {
        self.wire.borrow_mut().sent.push(text.to_string());
        Ok(())
    }

    fn close(&mut self) {
        self.wire.borrow_mut().closes += 1;
    }
}

impl Connector for Fake {
    fn connect(&self, req: &WsRequest) -> Result<Box<dyn Socket>, ConnectError> {
        let mut w = self.wire.borrow_mut();
        w.upgrades.push(req.clone());
        match w
            .attempts
            .pop_front()
            .expect("an unexpected WebSocket attempt")
        {
            Attempt::Refuse(resp) => Err(ConnectError::Refused(resp)),
            Attempt::Fail(e) => Err(ConnectError::Network(e.into())),
            Attempt::Open(events) => Ok(Box::new(FakeSocket {
                events: events.into(),
                wire: self.wire.clone(),
            })),
        }
    }
}

impl Transport for Fake {
    fn send(&self, req: &Request) -> Result<Response, TransportError> {
        let mut w = self.wire.borrow_mut();
        w.requests.push(req.clone());
        let (answer, held) = w.polls.pop_front().expect("an unexpected long-poll");
        self.clock.set(self.clock.get() + held);
        answer
    }
}

impl Fake {
    fn attempt(&self, a: Attempt) -> &Fake {
        self.wire.borrow_mut().attempts.push_back(a);
        self
    }

    fn poll(&self, answer: Response, held: Duration) -> &Fake {
        self.wire.borrow_mut().polls.push_back((Ok(answer), held));
        self
    }

    fn poll_fails(&self) -> &Fake {
        let e = TransportError::Network("connection refused".into());
        self.wire.borrow_mut().polls.push_back((Err(e), S(0)));
        self
    }

    fn slept(&self) -> Vec<Duration> {
        self.slept.borrow().clone()
    }

    fn sent(&self) -> Vec<String> {
        self.wire.borrow().sent.clone()
    }

    fn upgrades(&self) -> Vec<WsRequest> {
        self.wire.borrow().upgrades.clone()
    }

    fn requests(&self) -> Vec<Request> {
        self.wire.borrow().requests.clone()
    }

    fn client(&self, dir: &Dir) -> Client {
        let (clock, slept) = (self.clock.clone(), self.slept.clone());
        Client::new(StateDir::new(&dir.0))
            .with_base_url(Some(BASE.into()))
            .with_policy(BackoffPolicy::no_retries())
            .with_transport(Box::new(self.clone()))
            .with_sleeper(Box::new(move |d| {
                slept.borrow_mut().push(d);
                clock.set(clock.get() + d);
            }))
    }
}

/// A state directory, removed afterwards; with a key or empty.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str, key: Option<&AgentKey>) -> Dir {
        let dir = std::env::temp_dir().join(format!(
            "selfcap-watch-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        if let Some(k) = key {
            StateDir::new(&dir).create(k, None).unwrap();
        }
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a watch did: the heads delivered (cursor, seq), the notes, the end.
struct Run {
    heads: Vec<(String, Option<u64>)>,
    lines: Vec<String>,
    notes: Vec<Note>,
    result: Result<(), Error>,
}

/// Watches head.json with `choice` until `stop_after` heads were delivered
/// (or an error).
fn watch(fake: &Fake, dir: &Dir, choice: ChannelChoice, stop_after: usize) -> Run {
    follow(fake, dir, Followed::Head, choice, stop_after)
}

/// [`watch`] of the `followed` document.
fn follow(
    fake: &Fake,
    dir: &Dir,
    followed: Followed,
    choice: ChannelChoice,
    stop_after: usize,
) -> Run {
    let client = fake.client(dir);
    let mut heads = Vec::new();
    let mut lines = Vec::new();
    let notes = RefCell::new(Vec::new());
    let clock = fake.clock.clone();
    let result = client.follow(
        &watched(),
        followed,
        choice,
        &mut WatchIo {
            connector: fake,
            clock: &move || clock.get(),
            on_head: &mut |h| {
                heads.push((h.cursor.clone(), h.seq));
                lines.push(h.line.clone());
                if heads.len() >= stop_after {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
            on_note: &|n| notes.borrow_mut().push(n.clone()),
            stopped: &|| false,
        },
    );
    Run {
        heads,
        lines,
        notes: notes.into_inner(),
        result,
    }
}

fn cursors(run: &Run) -> Vec<String> {
    run.heads.iter().map(|(c, _)| c.clone()).collect()
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

const AUTO: ChannelChoice = ChannelChoice::Auto;

#[test]
fn heads_in_order_deduped_by_cursor_across_a_reconnect() {
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![
        text('1', 1),
        text('2', 2),
        closed(1001),
    ]))
    // The reconnect's first frame is the current head: not new.
    .attempt(Attempt::Open(vec![text('2', 2), text('3', 3)]));
    let dir = Dir::new("dedupe", None);
    let run = watch(&fake, &dir, AUTO, 3);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1'), cursor('2'), cursor('3')]);
    assert_eq!(run.heads[2].1, Some(3));
    // Each line is the head, compact, one line.
    for (line, seq) in run.lines.iter().zip(1..) {
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["seq"], seq);
        assert_eq!(v["writes"]["limit_24h"], 5);
    }
    // The connection had delivered: reconnect after the first backoff step.
    assert_eq!(fake.slept(), [S(1)]);
    let ups = fake.upgrades();
    assert_eq!(ups.len(), 2);
    assert_eq!(
        ups[0].url,
        format!("ws://svc.test/self/{}/watch", watched())
    );
    assert!(ups[0].headers.is_empty(), "unsigned: no key");
    assert!(run.notes.contains(&Note::Watching(Channel::WebSocket)));
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Retrying { why, wait } if why.contains("1001") && *wait == S(1))));
}

#[test]
fn malformed_frames_are_reported_and_skipped_never_delivered() {
    let fake = Fake::default();
    let other = head('9', 9).replace(&"a".repeat(64), &"b".repeat(64));
    fake.attempt(Attempt::Open(vec![
        Event::Text("not json".into()),
        Event::Text(r#"{"agent_id":"x","seq":1}"#.into()),
        Event::Text(format!(
            r#"{{"agent_id":"{}","cursor":"sha256:zz"}}"#,
            watched()
        )),
        Event::Text(other),
        Event::Binary(3),
        Event::Text(PONG.into()),
        text('1', 1),
    ]));
    let dir = Dir::new("malformed", None);
    let run = watch(&fake, &dir, AUTO, 1);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1')]);
    let skipped: Vec<&Note> = run
        .notes
        .iter()
        .filter(|n| matches!(n, Note::Skipped(_)))
        .collect();
    assert_eq!(skipped.len(), 5, "{skipped:?}");
    for (n, why) in skipped.iter().zip([
        "not JSON",
        "no cursor",
        "not a cursor",
        "another agent",
        "binary",
    ]) {
        assert!(n.to_string().contains(why), "{n} lacks {why}");
    }
}

#[test]
fn an_idle_socket_is_pinged_and_a_silent_one_reopened() {
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![
        Event::Idle,
        Event::Text(PONG.into()),
        Event::Idle,
        // No pong this time: dead.
        Event::Idle,
    ]))
    .attempt(Attempt::Open(vec![text('1', 1)]));
    let dir = Dir::new("ping", None);
    let run = watch(&fake, &dir, AUTO, 1);
    run.result.as_ref().unwrap();
    assert_eq!(fake.sent(), ["ping", "ping"]);
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Retrying { why, .. } if why.contains("no answer to a ping"))));
    // The pong counted as a frame: the backoff started over.
    assert_eq!(fake.slept(), [S(1)]);
}

/// Watches until `stopped` answers true (it is told how often it was asked).
fn watch_until(fake: &Fake, dir: &Dir, choice: ChannelChoice, stop: impl Fn(u32) -> bool) -> Run {
    let client = fake.client(dir);
    let mut heads = Vec::new();
    let asked = Cell::new(0u32);
    let clock = fake.clock.clone();
    let result = client.watch(
        &watched(),
        choice,
        &mut WatchIo {
            connector: fake,
            clock: &move || clock.get(),
            on_head: &mut |h| {
                heads.push((h.cursor.clone(), h.seq));
                ControlFlow::Continue(())
            },
            on_note: &|_| {},
            stopped: &|| {
                asked.set(asked.get() + 1);
                stop(asked.get())
            },
        },
    );
    Run {
        heads,
        lines: vec![],
        notes: vec![],
        result,
    }
}

#[test]
fn stopped_ends_the_watch_after_the_next_event_and_closes_the_socket() {
    // Asked before the round (1), after each event (2: the head, 3: idle).
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![text('1', 1), Event::Idle]));
    let dir = Dir::new("stopped-ws", None);
    let run = watch_until(&fake, &dir, ChannelChoice::Only(Channel::WebSocket), |n| {
        n >= 3
    });
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1')]);
    // The idle event was not answered with a ping: the socket was closed.
    assert!(fake.sent().is_empty());
    assert_eq!(fake.wire.borrow().closes, 1);
    // On long-poll: the answer that came after the stop is not delivered.
    let fake = Fake::default();
    fake.poll(json(200, &head('1', 1)), S(0))
        .poll(json(200, &head('2', 2)), S(3));
    let dir = Dir::new("stopped-poll", None);
    let run = watch_until(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), |n| {
        n >= 4
    });
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1')]);
    assert_eq!(fake.requests().len(), 2);
    // Stopped before anything: nothing opened.
    let fake = Fake::default();
    let run = watch_until(&fake, &dir, AUTO, |_| true);
    run.result.as_ref().unwrap();
    assert!(fake.upgrades().is_empty() && fake.requests().is_empty());
}

#[test]
fn close_4404_without_a_key_is_not_found() {
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![text('1', 1), closed(4404)]));
    let dir = Dir::new("4404", None);
    let run = watch(&fake, &dir, AUTO, 10);
    let e = run.result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::NotFound);
    assert!(e.to_string().contains("4404"), "{e}");
    assert_eq!(run.heads.len(), 1);
    assert!(fake.slept().is_empty());
}

#[test]
fn close_4404_with_a_key_asks_again_signed_then_not_found() {
    let key = AgentKey::from_seed(&[5u8; 32]);
    let fake = Fake::default();
    // The probe: public, so the watch starts unsigned.
    fake.poll(json(200, &head('1', 1)), S(0));
    fake.attempt(Attempt::Open(vec![text('1', 1), closed(4404)]))
        .attempt(Attempt::Refuse(json(
            404,
            r#"{"error":"capsule_not_found","detail":"x"}"#,
        )));
    let dir = Dir::new("4404-key", Some(&key));
    let run = watch(&fake, &dir, AUTO, 10);
    let e = run.result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::NotFound, "{e}");
    assert!(e.to_string().contains("private"), "{e}");
    assert!(fake.slept().is_empty(), "the signed try is at once");
    assert!(run.notes.iter().any(|n| matches!(n, Note::Signing(_))));
    let ups = fake.upgrades();
    assert!(ups[0].headers.is_empty(), "unsigned first");
    // The second upgrade carries a read signature over the http:// URL,
    // which the service's verifier accepts.
    let h = &ups[1].headers;
    let http_url = format!("{BASE}/self/{}/watch", watched());
    let lookup = |name: &str| header(h, name).map(str::to_string);
    let signed = read_auth::SignedRead {
        method: "GET",
        target_uri: &http_url,
        header: &lookup,
    };
    assert!(signed.is_signed());
    let now_s = crate::client::now_ms() / 1000;
    let reader = read_auth::verify(&signed, now_s).unwrap();
    assert_eq!(reader.agent_id, key.agent_id());
    assert_eq!(
        header(h, "self-public-key"),
        Some(key.public_key().to_hex().as_str())
    );
}

#[test]
fn a_refused_signature_stops_with_exit_6() {
    let key = AgentKey::from_seed(&[5u8; 32]);
    let nf = r#"{"error":"capsule_not_found"}"#;
    let expired = r#"{"error":"read_signature_expired"}"#;
    // On the upgrade (after a 404 there, should a service answer one).
    let fake = Fake::default();
    fake.poll(json(200, &head('1', 1)), S(0));
    fake.attempt(Attempt::Refuse(json(404, nf)))
        .attempt(Attempt::Refuse(json(401, expired)));
    let dir = Dir::new("sig", Some(&key));
    let e = watch(&fake, &dir, AUTO, 10).result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::Signature, "{e}");
    assert!(e.to_string().contains("clock"), "{e}");
    // On the probe's signed read.
    let probe = Fake::default();
    probe
        .poll(json(404, nf), S(0))
        .poll(json(401, expired), S(0));
    let e = watch(&probe, &dir, AUTO, 10).result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::Signature, "{e}");
    assert!(probe.upgrades().is_empty());
}

#[test]
fn with_a_key_a_head_read_decides_signing_before_the_first_upgrade() {
    let key = AgentKey::from_seed(&[5u8; 32]);
    let head_url = format!("{BASE}/self/{}/head.json", watched());
    // Private, and granted: head.json is 404 unsigned, 200 signed.
    let fake = Fake::default();
    fake.poll(json(404, r#"{"error":"capsule_not_found"}"#), S(0))
        .poll(json(200, &head('1', 1)), S(0));
    fake.attempt(Attempt::Open(vec![text('1', 1)]));
    let dir = Dir::new("probe", Some(&key));
    let run = watch(&fake, &dir, AUTO, 1);
    run.result.as_ref().unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.url == head_url));
    assert_eq!((reqs[0].signed, reqs[1].signed), (false, true));
    // The first upgrade is signed, over the http:// URL.
    let h = &fake.upgrades()[0].headers;
    let lookup = |name: &str| header(h, name).map(str::to_string);
    let http_url = format!("{BASE}/self/{}/watch", watched());
    let signed = read_auth::SignedRead {
        method: "GET",
        target_uri: &http_url,
        header: &lookup,
    };
    let now_s = crate::client::now_ms() / 1000;
    assert_eq!(
        read_auth::verify(&signed, now_s).unwrap().agent_id,
        key.agent_id()
    );
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Signing(why) if why.contains("not readable anonymously"))));

    // Public: unsigned, one read.
    let public = Fake::default();
    public.poll(json(200, &head('1', 1)), S(0));
    public.attempt(Attempt::Open(vec![text('1', 1)]));
    watch(&public, &dir, AUTO, 1).result.unwrap();
    assert_eq!(public.requests().len(), 1);
    assert!(public.upgrades()[0].headers.is_empty());

    // No answer: the watch goes on unsigned and asks again before the next round.
    let down = Fake::default();
    down.poll(json(503, r#"{"error":"service_unavailable"}"#), S(0))
        .poll(json(200, &head('1', 1)), S(0));
    down.attempt(Attempt::Fail("connection refused"))
        .attempt(Attempt::Open(vec![text('1', 1)]));
    watch(&down, &dir, AUTO, 1).result.unwrap();
    assert_eq!(down.requests().len(), 2);
    assert!(down.upgrades().iter().all(|u| u.headers.is_empty()));
}

#[test]
fn close_4429_falls_back_to_long_poll_from_the_last_cursor_and_websocket_comes_back() {
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![
        text('1', 1),
        Event::Closed {
            code: Some(4429),
            reason: "too many watchers of this agent".into(),
        },
    ]))
    .poll(json(200, &head('2', 2)), S(3));
    // Nothing changes for a while: every round held for the whole wait.
    let held = S(POLL_WAIT_SECS);
    let rounds = (WS_RETRY_EVERY.as_secs() - 3) / POLL_WAIT_SECS + 1;
    for _ in 0..rounds {
        fake.poll(json(304, ""), held);
    }
    fake.attempt(Attempt::Open(vec![text('2', 2), text('3', 3)]));
    let dir = Dir::new("4429", None);
    let run = watch(&fake, &dir, AUTO, 3);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1'), cursor('2'), cursor('3')]);
    let reqs = fake.requests();
    assert_eq!(reqs.len() as u64, rounds + 1);
    let hex1 = "1".repeat(64);
    let hex2 = "2".repeat(64);
    assert_eq!(
        reqs[0].url,
        format!("{BASE}/self/{}/head.json?wait={POLL_WAIT_SECS}", watched())
    );
    assert_eq!(
        header(&reqs[0].headers, "if-none-match"),
        Some(format!("\"{hex1}\"").as_str())
    );
    assert_eq!(
        header(&reqs[1].headers, "if-none-match"),
        Some(format!("\"{hex2}\"").as_str())
    );
    assert!(fake.slept().is_empty(), "held rounds need no pacing");
    let switches: Vec<Channel> = run
        .notes
        .iter()
        .filter_map(|n| match n {
            Note::Switching { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(switches, [Channel::LongPoll, Channel::WebSocket]);
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Switching { why, .. } if why.contains("4429") && why.contains("too many"))));
}

#[test]
fn an_upgrade_refused_426_goes_to_long_poll_at_once() {
    let fake = Fake::default();
    fake.attempt(Attempt::Refuse(json(
        426,
        r#"{"error":"websocket_required"}"#,
    )))
    .poll(json(200, &head('1', 1)), S(0));
    let dir = Dir::new("426", None);
    let run = watch(&fake, &dir, AUTO, 1);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1')]);
    // Nothing delivered before: unconditional.
    assert_eq!(header(&fake.requests()[0].headers, "if-none-match"), None);
    assert!(fake.slept().is_empty());
    assert!(run.notes.contains(&Note::Watching(Channel::LongPoll)));
}

#[test]
fn repeated_websocket_failures_fall_back_with_backoff_until_then() {
    let fake = Fake::default();
    for _ in 0..3 {
        fake.attempt(Attempt::Fail("connection refused"));
    }
    fake.poll(json(200, &head('1', 1)), S(0));
    let dir = Dir::new("fallback", None);
    let run = watch(&fake, &dir, AUTO, 1);
    run.result.as_ref().unwrap();
    assert_eq!(fake.slept(), [S(1), S(2)]);
    assert_eq!(cursors(&run), [cursor('1')]);
}

#[test]
fn forced_websocket_never_polls_and_forced_long_poll_never_upgrades() {
    let fake = Fake::default();
    for _ in 0..4 {
        fake.attempt(Attempt::Refuse(json(
            503,
            r#"{"error":"service_unavailable"}"#,
        )));
    }
    fake.attempt(Attempt::Open(vec![text('1', 1)]));
    let dir = Dir::new("forced", None);
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::WebSocket), 1);
    run.result.as_ref().unwrap();
    assert_eq!(fake.slept(), [S(1), S(2), S(4), S(8)]);
    assert!(fake.requests().is_empty());

    let lp = Fake::default();
    lp.poll(json(200, &head('1', 1)), S(0))
        .poll(json(200, &head('2', 2)), S(4));
    let run = watch(&lp, &dir, ChannelChoice::Only(Channel::LongPoll), 2);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1'), cursor('2')]);
    assert!(lp.upgrades().is_empty());
}

#[test]
fn long_poll_failures_back_off_and_early_answers_are_paced() {
    let fake = Fake::default();
    fake.poll(json(503, r#"{"error":"service_unavailable"}"#), S(0))
        .poll_fails()
        .poll(json(200, &head('1', 1)), S(0))
        // Early without a change: once (a commit that kept the cursor), then
        // again and again (a server that does not hold).
        .poll(json(304, ""), S(1))
        .poll(json(304, ""), S(1))
        .poll(json(200, &head('1', 1)), S(0))
        .poll(
            Response {
                headers: vec![("retry-after".into(), "40".into())],
                ..json(429, r#"{"error":"rate_limited"}"#)
            },
            S(0),
        )
        // Not JSON: reported, then backed off (asking again would get it again).
        .poll(json(200, "<html>"), S(0))
        .poll(json(200, &head('2', 2)), S(0));
    let dir = Dir::new("lp-fail", None);
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), 2);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1'), cursor('2')]);
    assert_eq!(fake.slept(), [S(1), S(2), S(24), S(25), S(40), S(2)]);
    assert!(run
        .notes
        .iter()
        .any(|n| matches!(n, Note::Skipped(w) if w.contains("not JSON"))));
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Retrying { why, .. } if why.contains("503"))));
}

#[test]
fn long_poll_a_commit_that_keeps_the_cursor_is_not_printed_nor_paced() {
    let fake = Fake::default();
    // seq 2 republishes seq 1's capsule: the held poll ends with it, early,
    // as a 304 (what the service does) or with the head (seq 3, cursor kept).
    fake.poll(json(200, &head('1', 1)), S(0))
        .poll(json(304, ""), S(1))
        .poll(json(200, &head('1', 3)), S(3))
        .poll(json(200, &head('2', 4)), S(1));
    let dir = Dir::new("lp-same-cursor", None);
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), 2);
    run.result.as_ref().unwrap();
    assert_eq!(run.heads, [(cursor('1'), Some(1)), (cursor('2'), Some(4))]);
    assert!(fake.slept().is_empty(), "{:?}", fake.slept());
    let inm: Vec<Option<String>> = fake
        .requests()
        .iter()
        .map(|r| header(&r.headers, "if-none-match").map(str::to_string))
        .collect();
    let quoted = |c: char| Some(format!("\"{}\"", c.to_string().repeat(64)));
    assert_eq!(inm, [None, quoted('1'), quoted('1'), quoted('1')]);
}

#[test]
fn long_poll_404_nothing_published_yet_then_the_first_head() {
    let fake = Fake::default();
    let nf = r#"{"error":"capsule_not_found"}"#;
    fake.poll(json(404, nf), S(POLL_WAIT_SECS))
        .poll(json(404, nf), S(POLL_WAIT_SECS))
        .poll(json(200, &head('1', 1)), S(7));
    let dir = Dir::new("lp-nothing", None);
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), 1);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1')]);
    assert!(fake.slept().is_empty());
    // Waiting for a first write is not worth a note every round.
    assert_eq!(run.notes, [Note::Watching(Channel::LongPoll)]);
}

#[test]
fn long_poll_404_after_the_wait_is_asked_again_signed_with_a_key() {
    let key = AgentKey::from_seed(&[6u8; 32]);
    let fake = Fake::default();
    let nf = r#"{"error":"capsule_not_found"}"#;
    // The probe gets no answer; the watch starts unsigned.
    fake.poll(json(503, "{}"), S(0))
        .poll(json(404, nf), S(POLL_WAIT_SECS))
        .poll(json(404, nf), S(POLL_WAIT_SECS))
        .poll(json(200, &head('1', 1)), S(0));
    let dir = Dir::new("lp-held-key", Some(&key));
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), 1);
    run.result.as_ref().unwrap();
    let signed: Vec<bool> = fake.requests().iter().map(|r| r.signed).collect();
    assert_eq!(signed, [false, false, true, true]);
    let signing: Vec<&Note> = run
        .notes
        .iter()
        .filter(|n| matches!(n, Note::Signing(_)))
        .collect();
    assert_eq!(signing.len(), 1);
    assert!(
        signing[0].to_string().contains("nothing published"),
        "{}",
        signing[0]
    );
}

#[test]
fn long_poll_404_at_once_is_asked_signed_then_not_found() {
    let key = AgentKey::from_seed(&[6u8; 32]);
    let fake = Fake::default();
    let nf = r#"{"error":"capsule_not_found"}"#;
    // The probe sees a public head; then the poll is 404 at once.
    fake.poll(json(200, &head('1', 1)), S(0))
        .poll(json(404, nf), S(0))
        .poll(json(404, nf), S(0));
    let dir = Dir::new("lp-private", Some(&key));
    let run = watch(&fake, &dir, ChannelChoice::Only(Channel::LongPoll), 1);
    let e = run.result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::NotFound, "{e}");
    let signed: Vec<bool> = fake.requests().iter().map(|r| r.signed).collect();
    assert_eq!(signed, [false, false, true]);
    // A head seen, then 404 even after the whole wait: private now.
    let anon = Fake::default();
    anon.poll(json(200, &head('1', 1)), S(0))
        .poll(json(404, nf), S(POLL_WAIT_SECS));
    let empty = Dir::new("lp-private-anon", None);
    let run = watch(&anon, &empty, ChannelChoice::Only(Channel::LongPoll), 5);
    assert_eq!(run.result.unwrap_err().exit_code(), ExitCode::NotFound);
    assert_eq!(run.heads.len(), 1);
}

#[test]
fn notes_read_as_one_line_each() {
    let n = Note::Retrying {
        why: "the service closed the WebSocket (1006)".into(),
        wait: Duration::from_millis(1500),
    };
    assert_eq!(
        n.to_string(),
        "the service closed the WebSocket (1006); trying again in 1.5 s"
    );
    assert_eq!(
        Note::Watching(Channel::LongPoll).to_string(),
        format!("watching over long-poll (wait={POLL_WAIT_SECS})")
    );
}

// The projected feed's head (`selfcap feed --watch`): the same loop, its
// own URLs, frames and refusals.

const FEED: Followed = Followed::FeedHead;

/// The projected head's body for cursor `c` (no seq; `sources_included`).
fn feed_head(c: char) -> String {
    serde_json::json!({
        "agent_id": watched().as_str(), "cursor": cursor(c), "prev_cursor": null,
        "changed": true, "generated_at": "2026-02-10T00:00:00Z", "ttl_sec": 300,
        "latest_url": "/api/v1/watch/latest", "digest_url": "/api/v1/watch/digest",
        "sources_included": ["aws_status", "gcp_status"],
        "counts": {"items": 1, "updated": 0, "removed": 0, "flagged": 0},
        "all_clear": false,
        "unresolved": {"sources": [], "tags": [], "stacks": []},
        "world": {"cursor": cursor('f'), "generated_at": "2026-02-10T00:00:00Z",
                  "checked_at": "2026-02-10T00:00:00Z", "stale": false}
    })
    .to_string()
}

fn feed_text(c: char) -> Event {
    Event::Text(feed_head(c))
}

fn feed_socket_http() -> String {
    format!("{BASE}/api/v1/watch/socket?agent_id={}", watched())
}

fn feed_head_url() -> String {
    format!("{BASE}/api/v1/watch/head?agent_id={}", watched())
}

/// The exit code `selfcap feed` ends with for this refusal of a read.
fn read_exit(status: u16, code: &str) -> ExitCode {
    let req = Request::get(feed_head_url());
    super::read_error(&req, &json(status, &format!(r#"{{"error":"{code}"}}"#))).exit_code()
}

#[test]
fn feed_heads_over_the_feeds_socket_deduped_by_cursor_and_not_head_json() {
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![
        feed_text('1'),
        // A capsule's head is not this document: skipped.
        text('9', 9),
        feed_text('1'),
        closed(1001),
    ]))
    .attempt(Attempt::Open(vec![feed_text('1'), feed_text('2')]));
    let dir = Dir::new("feed-ws", None);
    let run = follow(&fake, &dir, FEED, AUTO, 2);
    run.result.as_ref().unwrap();
    assert_eq!(cursors(&run), [cursor('1'), cursor('2')]);
    assert_eq!(run.heads[0].1, None, "a projected head has no seq");
    let v: serde_json::Value = serde_json::from_str(&run.lines[1]).unwrap();
    assert_eq!(v["sources_included"][1], "gcp_status");
    let ups = fake.upgrades();
    assert_eq!(
        ups[0].url,
        format!("ws://svc.test/api/v1/watch/socket?agent_id={}", watched())
    );
    assert!(run.notes.iter().any(|n| matches!(n,
        Note::Skipped(why) if why.contains("not a projected head"))));
    assert!(fake.requests().is_empty(), "no key: no probe, no poll");
}

#[test]
fn feed_refusals_end_the_watch_as_feed_would_without_a_signed_retry() {
    let key = AgentKey::from_seed(&[6u8; 32]);
    let pro = r#"{"error":"watch_requires_pro","upgrade_url":"/api/v1/self/upgrade/quote"}"#;
    // Refused at the upgrade (a free agent): at once, on any channel choice.
    for choice in [AUTO, ChannelChoice::Only(Channel::WebSocket)] {
        let fake = Fake::default();
        fake.attempt(Attempt::Refuse(json(402, pro)));
        let dir = Dir::new("feed-402", None);
        let e = follow(&fake, &dir, FEED, choice, 10).result.unwrap_err();
        assert_eq!(e.exit_code(), read_exit(402, "watch_requires_pro"), "{e}");
        assert!(e.to_string().contains("watch_requires_pro"), "{e}");
        assert!(fake.slept().is_empty() && fake.requests().is_empty());
    }
    // Closed with a refusal (a lapsed plan, a removed watch) after heads,
    // with a key: final at once, never asked again signed.
    for (close, status, code) in [
        (4402, 402, "watch_requires_pro"),
        (4404, 404, "watch_not_set"),
    ] {
        let fake = Fake::default();
        fake.poll(json(200, &feed_head('1')), S(0)); // the probe: public
        fake.attempt(Attempt::Open(vec![
            feed_text('1'),
            Event::Closed {
                code: Some(close),
                reason: code.into(),
            },
        ]));
        let dir = Dir::new(&format!("feed-{close}"), Some(&key));
        let run = follow(&fake, &dir, FEED, AUTO, 10);
        let e = run.result.unwrap_err();
        assert_eq!(e.exit_code(), read_exit(status, code), "{e}");
        let said = e.to_string();
        assert!(
            said.contains(&close.to_string()) && said.contains(code),
            "{said}"
        );
        assert_eq!(run.heads.len(), 1);
        assert_eq!(fake.upgrades().len(), 1);
        assert_eq!(
            fake.requests()[0].url,
            feed_head_url(),
            "the probe reads the feed's head"
        );
    }
    // Close 4404 capsule_not_found: as head.json's (not readable, exit 7).
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![
        feed_text('1'),
        Event::Closed {
            code: Some(4404),
            reason: "capsule_not_found".into(),
        },
    ]));
    let dir = Dir::new("feed-4404-nf", None);
    let e = follow(&fake, &dir, FEED, AUTO, 10).result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::NotFound, "{e}");
    // head.json's watch knows no such refusals: a 4402 is any other close.
    let fake = Fake::default();
    fake.attempt(Attempt::Open(vec![text('1', 1), closed(4402)]))
        .attempt(Attempt::Open(vec![text('2', 2)]));
    let dir = Dir::new("head-4402", None);
    watch(&fake, &dir, AUTO, 2).result.unwrap();
}

#[test]
fn feed_long_poll_asks_the_projected_head_with_wait_and_its_etag() {
    let fake = Fake::default();
    fake.poll(json(200, &feed_head('1')), S(0))
        .poll(json(304, ""), S(POLL_WAIT_SECS))
        .poll(json(200, &feed_head('2')), S(4))
        .poll(json(404, r#"{"error":"watch_not_set"}"#), S(0));
    let dir = Dir::new("feed-lp", None);
    let run = follow(
        &fake,
        &dir,
        FEED,
        ChannelChoice::Only(Channel::LongPoll),
        10,
    );
    assert_eq!(cursors(&run), [cursor('1'), cursor('2')]);
    let e = run.result.unwrap_err();
    assert_eq!(e.exit_code(), read_exit(404, "watch_not_set"), "{e}");
    assert!(e.to_string().contains("watch_not_set"), "{e}");
    let reqs = fake.requests();
    let want = format!("{}&wait={POLL_WAIT_SECS}", feed_head_url());
    assert!(reqs.iter().all(|r| r.url == want), "{:?}", reqs[0].url);
    let inm = |r: &Request| header(&r.headers, "if-none-match").map(str::to_string);
    assert_eq!(inm(&reqs[0]), None);
    assert_eq!(inm(&reqs[1]), Some(format!("\"{}\"", "1".repeat(64))));
    assert_eq!(inm(&reqs[3]), Some(format!("\"{}\"", "2".repeat(64))));
    assert!(fake.upgrades().is_empty());
    assert!(fake.slept().is_empty());
}

#[test]
fn feed_of_a_private_capsule_is_probed_on_its_head_then_signed() {
    let key = AgentKey::from_seed(&[7u8; 32]);
    let fake = Fake::default();
    fake.poll(json(404, r#"{"error":"capsule_not_found"}"#), S(0))
        .poll(json(200, &feed_head('1')), S(0));
    fake.attempt(Attempt::Open(vec![feed_text('1')]));
    let dir = Dir::new("feed-probe", Some(&key));
    let run = follow(&fake, &dir, FEED, AUTO, 1);
    run.result.as_ref().unwrap();
    let reqs = fake.requests();
    assert!(reqs.iter().all(|r| r.url == feed_head_url()));
    assert_eq!((reqs[0].signed, reqs[1].signed), (false, true));
    let h = &fake.upgrades()[0].headers;
    let lookup = |name: &str| header(h, name).map(str::to_string);
    let http_url = feed_socket_http();
    let signed = read_auth::SignedRead {
        method: "GET",
        target_uri: &http_url,
        header: &lookup,
    };
    let now_s = crate::client::now_ms() / 1000;
    assert_eq!(
        read_auth::verify(&signed, now_s).unwrap().agent_id,
        key.agent_id()
    );
    // An upgrade refused 404 capsule_not_found says "no capsule, or
    // private", not head.json's "private" alone.
    let gone = Fake::default();
    gone.attempt(Attempt::Refuse(json(
        404,
        r#"{"error":"capsule_not_found"}"#,
    )));
    let empty = Dir::new("feed-none", None);
    let e = follow(&gone, &empty, FEED, AUTO, 1).result.unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::NotFound);
    assert!(e.to_string().contains("no capsule for"), "{e}");
    assert!(e.to_string().contains("or it is private"), "{e}");
}
