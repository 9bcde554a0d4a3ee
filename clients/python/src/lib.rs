//! `selfcap._native`: the Python package's native module. Glue only: every
//! decision is the root crate's (`self_capsule::core`, `self_capsule::client`,
//! `self_capsule::cli`); this file moves values across.
//!
//! Values cross as JSON text: Python's `json.dumps` on the way in (so the
//! core parses exactly the text a Python client would send, numbers
//! included), `json.loads` of this side's answers on the way out. A failure
//! of the client library is raised as `NativeError` whose one argument is a
//! JSON object (`kind`, `message`, `exit_code`, and for a refused write the
//! rejection), turned into the package's exception classes in Python
//! (`selfcap/_errors.py`).

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use self_capsule::client::http::UreqTransport;
use self_capsule::client::keys::{KeyLogView, RecoverOptions, RotateOptions};
use self_capsule::client::watch::{
    Channel, ChannelChoice, ConnectError, Connector, Event, Note, Socket, TungsteniteConnector,
    WatchIo, WatchedHead, WsRequest, PING_EVERY, POLL_WAIT_SECS,
};
use self_capsule::client::{
    self, BackoffPolicy, Client, Error, HeadOutcome, Location, PublishOutcome, PutOptions,
    Rejected, StateDir,
};
use self_capsule::core::crypto::AgentId;
use self_capsule::core::jcs;
use self_capsule::core::json::{self, Json};
use self_capsule::core::key_log::Digest;
use self_capsule::core::limits::{Tier, TierTable};
use self_capsule::core::render::{self, Format};
use self_capsule::core::write;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

create_exception!(
    _native,
    NativeError,
    PyException,
    "A failure of the client library; its argument is a JSON object."
);

/// The whole `selfcap` command line on `args` (`args[0]` is the program's
/// name), with the GIL released: the process's exit code.
#[pyfunction]
fn run_cli(py: Python<'_>, args: Vec<OsString>) -> i32 {
    py.detach(move || self_capsule::cli::run(args))
}

/// Parses JSON text with the core's parser (the service's own).
fn parse(text: &str) -> PyResult<Json> {
    json::parse_str(text).map_err(|e| PyValueError::new_err(format!("not acceptable JSON: {e}")))
}

/// RFC 8785 canonical bytes of a JSON text.
#[pyfunction]
fn canonicalize<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &jcs::canonical_bytes(&parse(text)?)))
}

/// `"sha256:"` + hex SHA-256 of the canonical bytes of a JSON text.
#[pyfunction]
fn cursor(text: &str) -> PyResult<String> {
    Ok(jcs::cursor(&parse(text)?))
}

/// The service's checks of a capsule on its own, for `tier`: schema, safety,
/// size (`core::write::check_capsule_in_tier`). `None` when it passes, else
/// the rejection body (JSON) the service would answer, with `what_to_do`.
#[pyfunction]
#[pyo3(signature = (text, tier = "free"))]
fn check(py: Python<'_>, text: &str, tier: &str) -> PyResult<Option<String>> {
    let tier = Tier::from_name(tier).ok_or_else(|| {
        let names: Vec<&str> = Tier::ALL.iter().map(|t| t.as_str()).collect();
        PyValueError::new_err(format!(
            "unknown tier {tier:?} (one of: {})",
            names.join(", ")
        ))
    })?;
    let capsule = parse(text)?;
    let limits = *TierTable::default().get(tier);
    Ok(py.detach(move || {
        write::check_capsule_in_tier(&capsule, tier, &limits)
            .err()
            .map(|r| rejection_json(&Rejected::refused_locally(r)).to_string())
    }))
}

/// A refused write as the Python `Rejected` is built from: the body, and
/// what to do about each code (the service's bot actions, once each).
fn rejection_json(r: &Rejected) -> Value {
    let mut body = serde_json::to_value(r).unwrap_or_else(|_| json!({}));
    let mut what_to_do: Vec<&str> = Vec::new();
    for (_, action) in r.actions() {
        if !what_to_do.contains(&action) {
            what_to_do.push(action);
        }
    }
    body["what_to_do"] = json!(what_to_do);
    body["exit_code"] = json!(client::ExitCode::for_class(r.class()).code());
    body
}

/// Verifies an export bundle offline (`client::verify_bundle`, as
/// `selfcap verify --export`): against `keyring` (a `GET
/// /api/v1/self/keys` body) when given, else the bundle's own keys. The
/// report, as JSON.
#[pyfunction]
#[pyo3(signature = (export, keyring = None))]
fn verify_export(py: Python<'_>, export: &str, keyring: Option<&str>) -> PyResult<String> {
    let bundle = parse(export)?;
    let trusted = keyring
        .map(|k| {
            client::keyring_of(&parse(k)?)
                .map_err(|e| PyValueError::new_err(format!("not a keyring: {e}")))
        })
        .transpose()?;
    let report = py.detach(move || client::verify_bundle(&bundle, trusted, None));
    serde_json::to_string(&report).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A minimal valid capsule for `agent` (as `selfcap template`), as JSON.
#[pyfunction]
fn template(agent: &str) -> PyResult<String> {
    let Some(agent) = agent_arg(Some(agent))? else {
        return Err(PyValueError::new_err("an agent id is needed"));
    };
    Ok(jcs::canonicalize(&client::template(&agent)))
}

/// A client library failure as `NativeError`.
fn raise(e: Error) -> PyErr {
    raise_with(e, None)
}

/// [`raise`], with `extra` members in the JSON object (a rollback's or
/// fork's key log view, under `key_log`).
fn raise_with(e: Error, extra: Option<(&str, Value)>) -> PyErr {
    let kind = match &e {
        Error::Local(_) => "local",
        Error::Unavailable(_) => "unavailable",
        Error::Protocol(_) => "protocol",
        Error::Rejected(_) => "rejected",
        Error::NotFound(_) => "not_found",
        Error::Unverified(_) => "unverified",
        Error::ReadSignature(_) => "read_signature",
        Error::AdminAuth(_) => "admin_auth",
        Error::ClaimLater(_) => "claim_later",
        Error::KeyLogConflict(_) => "key_log_conflict",
    };
    let mut v = json!({
        "kind": kind,
        "message": e.to_string(),
        "exit_code": e.exit_code().code(),
    });
    if let Error::Rejected(r) = &e {
        v["rejection"] = rejection_json(r);
    }
    if let Some((name, value)) = extra {
        v[name] = value;
    }
    NativeError::new_err(v.to_string())
}

/// Where identities live, as the CLI finds them: the arguments, else
/// `SELFCAP_STATE_DIR` (when neither is given), `SELFCAP_HOME` and
/// `SELFCAP_AGENT`, as the CLI's options default to them.
fn location(home: Option<PathBuf>, agent: Option<String>) -> Location {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let state_dir = match (&home, &agent) {
        (None, None) => env("SELFCAP_STATE_DIR").map(PathBuf::from),
        _ => None,
    };
    Location {
        home: home.or_else(|| env("SELFCAP_HOME").map(PathBuf::from)),
        state_dir,
        agent: agent.or_else(|| env("SELFCAP_AGENT").and_then(|a| a.into_string().ok())),
    }
}

/// An identity as JSON: agent id, current public key, its index in the
/// key log (0: the genesis key), state directory.
fn identity_json(
    dir: &client::StateDir,
    agent_id: &str,
    public_key: &str,
    key_index: u64,
) -> String {
    json!({
        "agent_id": agent_id,
        "public_key": public_key,
        "key_index": key_index,
        "state_dir": dir.path().display().to_string(),
    })
    .to_string()
}

/// A new identity (as `selfcap keygen`).
#[pyfunction]
#[pyo3(signature = (home = None))]
fn identity_create(home: Option<PathBuf>) -> PyResult<String> {
    let (dir, key) = Client::keygen(&location(home, None)).map_err(raise)?;
    Ok(identity_json(
        &dir,
        key.agent_id().as_str(),
        &key.public_key().to_hex(),
        0,
    ))
}

/// An existing identity (as every other `selfcap` command finds it).
#[pyfunction]
#[pyo3(signature = (home = None, agent = None))]
fn identity_load(home: Option<PathBuf>, agent: Option<String>) -> PyResult<String> {
    let dir = location(home, agent).find().map_err(raise)?;
    loaded_identity(&dir)
}

/// The identity in the state directory `state_dir` (as `--state-dir`
/// finds it): what `Identity.refresh` re-reads after a key command.
#[pyfunction]
fn identity_at(state_dir: PathBuf) -> PyResult<String> {
    let dir = Location {
        home: None,
        state_dir: Some(state_dir),
        agent: None,
    }
    .find()
    .map_err(raise)?;
    loaded_identity(&dir)
}

fn loaded_identity(dir: &StateDir) -> PyResult<String> {
    // The agent id and the current key (they differ after a rotation).
    let key = dir.load_key().map_err(raise)?;
    Ok(identity_json(
        dir,
        key.agent_id().as_str(),
        &key.public_key().to_hex(),
        key.key_index(),
    ))
}

/// What a Python `selfcap.Client` was made with (JSON from Python).
#[derive(serde::Deserialize)]
struct Config {
    /// The service's base URL.
    url: String,
    /// The identity's state directory (`Client(identity=…)`), else found as
    /// the CLI finds it.
    state_dir: Option<PathBuf>,
    /// Per-request timeout, seconds.
    timeout: f64,
    /// Retries after a network error or a 5xx.
    retries: u32,
}

/// A client library `Client` for `cfg`, as the CLI configures one (no
/// 429 wait: a back-off is reported at once). With an `agent` to read and
/// no usable identity, an anonymous reader (the CLI's `reader_client`).
fn client_for(cfg: &Config, agent: Option<&AgentId>) -> Result<Client, Error> {
    let loc = match &cfg.state_dir {
        Some(d) => Location {
            home: None,
            state_dir: Some(d.clone()),
            agent: None,
        },
        None => location(None, None),
    };
    let state = match (loc.find(), agent) {
        (Ok(s), _) => s,
        (Err(_), Some(_)) => StateDir::new(loc.home_dir()?),
        (Err(e), None) => return Err(e),
    };
    let timeout = Duration::from_secs_f64(cfg.timeout.clamp(0.001, 86_400.0));
    Ok(Client::new(state)
        .with_base_url(Some(cfg.url.trim_end_matches('/').to_string()))
        .with_transport(Box::new(UreqTransport::new(timeout)))
        .with_policy(BackoffPolicy {
            max_attempts: cfg.retries.saturating_add(1),
            max_quota_wait: Duration::ZERO,
            ..BackoffPolicy::default()
        }))
}

fn config(cfg: &str) -> PyResult<Config> {
    serde_json::from_str(cfg).map_err(|e| PyValueError::new_err(format!("client config: {e}")))
}

/// An optional agent id argument, checked.
fn agent_arg(agent: Option<&str>) -> PyResult<Option<AgentId>> {
    agent
        .map(|a| {
            AgentId::parse(a).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "not an agent id: {a:?} (expected 64 lowercase hex characters)"
                ))
            })
        })
        .transpose()
}

/// Runs `f` on a client for `cfg` with the GIL released; its answer (JSON
/// text), or the failure as `NativeError`.
fn with_client(
    py: Python<'_>,
    cfg: &str,
    agent: Option<&str>,
    f: impl FnOnce(&Client, Option<&AgentId>) -> Result<String, Error> + Send,
) -> PyResult<String> {
    let cfg = config(cfg)?;
    let agent = agent_arg(agent)?;
    py.detach(move || {
        let c = client_for(&cfg, agent.as_ref())?;
        f(&c, agent.as_ref())
    })
    .map_err(raise)
}

/// JSON text of a serde value (the wire types: integers stay integers).
fn text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A core JSON value as a serde one, through its canonical text, so an
/// integral number reaches Python as an int (RFC 8785 prints it so).
fn value(v: &Json) -> Value {
    serde_json::from_str(&jcs::canonicalize(v)).unwrap_or(Value::Null)
}

/// `POST /api/v1/self/bootstrap` (as `selfcap bootstrap`).
#[pyfunction]
fn client_bootstrap(py: Python<'_>, cfg: &str) -> PyResult<String> {
    with_client(py, cfg, None, |c, _| c.bootstrap().map(|b| text(&b)))
}

/// Local first, as `selfcap set` then `selfcap publish`: the local
/// pre-check, the capsule saved as the desired one, then signed with the
/// next seq and sent unless it equals the last accepted one. The answer:
/// `{"accepted": body|null, "seq", "cursor", "sent", "confirmed_from_head"}`.
#[pyfunction]
fn client_publish(py: Python<'_>, cfg: &str, capsule: &str) -> PyResult<String> {
    let capsule = parse(capsule)?;
    with_client(py, cfg, None, move |c, _| {
        c.set_desired(&capsule, false)?;
        Ok(text(&match c.publish(&PutOptions::default(), false)? {
            PublishOutcome::Clean { seq, cursor } => json!({
                "accepted": null, "seq": seq, "cursor": cursor, "sent": false,
                "confirmed_from_head": false,
            }),
            PublishOutcome::Published(r) => json!({
                "seq": r.accepted.seq, "cursor": r.accepted.cursor, "sent": true,
                "confirmed_from_head": r.confirmed_from_head, "accepted": r.accepted,
            }),
        }))
    })
}

/// `GET head.json`, conditional on `etag` (an ETag value, or a cursor or
/// its hex) when given: `{"head", "etag"}` (the body, and the ETag it has:
/// the cursor's hex, plus `-k<length>` with a key log), or `null` on 304.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None, etag = None))]
fn client_head(
    py: Python<'_>,
    cfg: &str,
    agent: Option<&str>,
    etag: Option<&str>,
) -> PyResult<String> {
    let etag = etag.map(|e| {
        let e = e.trim().trim_start_matches("W/").trim_matches('"');
        jcs::cursor_hex(e).to_string()
    });
    with_client(py, cfg, agent, move |c, agent| {
        let target = match agent {
            Some(a) => a.clone(),
            None => c.agent_id()?,
        };
        match c.fetch_head(&target, etag.as_deref())? {
            Some(HeadOutcome::Changed { head }) => {
                Ok(text(&json!({ "etag": head.etag(), "head": head })))
            }
            Some(HeadOutcome::Unchanged { .. }) => Ok("null".into()),
            None => Err(Error::NotFound(format!(
                "no capsule published yet for agent {target}, or it is private and this \
                 identity is not granted READ_HEAD"
            ))),
        }
    })
}

/// `GET capsule.json`: the capsule's canonical text, checked against its
/// ETag (signed when it may be private).
#[pyfunction]
#[pyo3(signature = (cfg, agent = None))]
fn client_read(py: Python<'_>, cfg: &str, agent: Option<&str>) -> PyResult<String> {
    with_client(py, cfg, agent, |c, agent| {
        c.get(agent).map(|f| jcs::canonicalize(&f.capsule))
    })
}

/// `GET history.json`: one page, as served.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None, since = None, limit = None))]
fn client_history(
    py: Python<'_>,
    cfg: &str,
    agent: Option<&str>,
    since: Option<String>,
    limit: Option<u32>,
) -> PyResult<String> {
    with_client(py, cfg, agent, move |c, agent| {
        c.history(agent, since.as_deref(), limit)
            .map(|page| text(&page))
    })
}

/// `GET export.json`, parsed.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None))]
fn client_export(py: Python<'_>, cfg: &str, agent: Option<&str>) -> PyResult<String> {
    with_client(py, cfg, agent, |c, agent| {
        c.export(agent).map(|bundle| jcs::canonicalize(&bundle))
    })
}

/// Local-first rehydration (as `selfcap rehydrate`): `{"prompt", "seq",
/// "cursor", "side", "offline", "warnings", "capsule"}`; the prompt is the
/// core's rendering, in `format` ("text" or "markdown").
#[pyfunction]
#[pyo3(signature = (cfg, format = "text"))]
fn client_rehydrate(py: Python<'_>, cfg: &str, format: &str) -> PyResult<String> {
    let format = match format {
        "text" => Format::Text,
        "markdown" => Format::Markdown,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown format {other:?} (text or markdown)"
            )))
        }
    };
    with_client(py, cfg, None, move |c, _| {
        let r = c.rehydrate()?;
        let mut prompt = render::render(&r.typed, format);
        if !prompt.ends_with('\n') {
            prompt.push('\n');
        }
        Ok(text(&json!({
            "prompt": prompt,
            "seq": r.seq,
            "cursor": r.cursor,
            "side": match r.side { client::Side::Local => "local", client::Side::Server => "service" },
            "offline": r.offline,
            "warnings": r.warnings,
            "capsule": value(&r.capsule),
        })))
    })
}

/// Downloads an agent's export and verifies it offline against the
/// service's published keyring (as `selfcap verify`): the report.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None))]
fn client_verify(py: Python<'_>, cfg: &str, agent: Option<&str>) -> PyResult<String> {
    with_client(py, cfg, agent, |c, agent| {
        c.verify(agent, None).map(|r| text(&r))
    })
}

/// An optional recovery key digest argument (64 lowercase hex), checked.
fn digest_arg(digest: Option<&str>) -> PyResult<Option<Digest>> {
    digest
        .map(|d| {
            Digest::from_hex(d).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "recovery_digest {d:?}: expected 64 lowercase hex characters (the SHA-256 \
                     of the recovery public key's 32 bytes)"
                ))
            })
        })
        .transpose()
}

/// `GET keys.json`, verified offline against the service's keyring and
/// compared with the pin kept in the state directory (as `selfcap keys
/// --json`): the view. A rollback or fork of the pinned log is raised as
/// `key_log_conflict` (the view under `key_log`); a log that does not
/// verify is answered with `valid` false.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None))]
fn client_keys(py: Python<'_>, cfg: &str, agent: Option<&str>) -> PyResult<String> {
    let cfg = config(cfg)?;
    let agent = agent_arg(agent)?;
    let (view, conflict) = py
        .detach(move || {
            let c = client_for(&cfg, agent.as_ref())?;
            let view = c.key_log(agent.as_ref())?;
            let conflict = view.pin.conflict(&view.agent_id);
            Ok((KeyLogView::to_json(&view), conflict))
        })
        .map_err(raise)?;
    match conflict {
        Some(e) => Err(raise_with(e, Some(("key_log", view)))),
        None => Ok(view.to_string()),
    }
}

/// `selfcap keys init`: the inception alone, for an identity that
/// published without a key log; the service's answer.
#[pyfunction]
#[pyo3(signature = (cfg, recovery_digest = None))]
fn client_keys_init(py: Python<'_>, cfg: &str, recovery_digest: Option<&str>) -> PyResult<String> {
    let digest = digest_arg(recovery_digest)?;
    with_client(py, cfg, None, move |c, _| {
        c.keys_init(digest).map(|a| text(&a))
    })
}

/// `selfcap rotate [--compromised --last-good SEQ]`: the client library's
/// crash-safe rotation (resuming a pending one first).
#[pyfunction]
#[pyo3(signature = (cfg, compromised = false, last_good = None, recovery_digest = None))]
fn client_rotate(
    py: Python<'_>,
    cfg: &str,
    compromised: bool,
    last_good: Option<u64>,
    recovery_digest: Option<&str>,
) -> PyResult<String> {
    // As the CLI's flags: each requires the other.
    if compromised != last_good.is_some() {
        return Err(PyValueError::new_err(
            "compromised=True and last_good (the owner's last good write's seq) go together",
        ));
    }
    let opts = RotateOptions {
        last_good,
        recovery_digest: digest_arg(recovery_digest)?,
    };
    with_client(py, cfg, None, move |c, _| c.rotate(&opts).map(|r| text(&r)))
}

/// `selfcap recommit`: the current key commits a fresh next key (it
/// matures after the recovery window).
#[pyfunction]
#[pyo3(signature = (cfg, recovery_digest = None))]
fn client_recommit(py: Python<'_>, cfg: &str, recovery_digest: Option<&str>) -> PyResult<String> {
    let digest = digest_arg(recovery_digest)?;
    with_client(py, cfg, None, move |c, _| {
        c.recommit(digest).map(|r| text(&r))
    })
}

/// `selfcap recover --recovery-key FILE [--supersedes INDEX]`: the
/// operator's recovery rotation.
#[pyfunction]
#[pyo3(signature = (cfg, recovery_key, supersedes = None, recovery_digest = None))]
fn client_recover(
    py: Python<'_>,
    cfg: &str,
    recovery_key: PathBuf,
    supersedes: Option<u64>,
    recovery_digest: Option<&str>,
) -> PyResult<String> {
    let opts = RecoverOptions {
        recovery_key,
        supersedes,
        recovery_digest: digest_arg(recovery_digest)?,
    };
    with_client(py, cfg, None, move |c, _| {
        c.recover(&opts).map(|r| text(&r))
    })
}

/// How often a watch's blocking steps wake up to see whether it was
/// stopped: its socket reads, its backoff sleeps, and `Watch.next`'s wait
/// for the next head (to let Python handle Ctrl-C).
const TICK: Duration = Duration::from_millis(100);

/// A watch's stop request, and what its sleeps wait on.
#[derive(Default)]
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    fn set(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    fn is_set(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client's backoff sleep (`d` plus its jitter), ended early by a stop.
    fn sleep(&self, d: Duration) {
        let guard = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .wake
            .wait_timeout_while(guard, client::with_jitter(d), |stopped| !*stopped);
    }
}

/// The real connector, whose sockets wake every [`TICK`] to see the stop
/// but report [`Event::Idle`] to the watch loop (which pings on it) only
/// after [`PING_EVERY`] of silence, as the CLI's do.
struct StoppableConnector {
    inner: TungsteniteConnector,
    stop: Arc<Stop>,
}

impl Connector for StoppableConnector {
    fn connect(&self, req: &WsRequest) -> Result<Box<dyn Socket>, ConnectError> {
        let inner = self.inner.connect(req)?;
        Ok(Box::new(StoppableSocket {
            inner,
            stop: self.stop.clone(),
        }))
    }
}

struct StoppableSocket {
    inner: Box<dyn Socket>,
    stop: Arc<Stop>,
}

impl Socket for StoppableSocket {
    fn next(&mut self) -> Event {
        let silent_since = Instant::now();
        loop {
            match self.inner.next() {
                Event::Idle if silent_since.elapsed() < PING_EVERY && !self.stop.is_set() => {}
                event => return event,
            }
        }
    }

    fn send_text(&mut self, text: &str) -> Result<(), String> {
        self.inner.send_text(text)
    }

    fn close(&mut self) {
        self.inner.close()
    }
}

/// What a watch's thread hands to `Watch.next`.
enum Msg {
    /// A new head: `{"head", "etag"}` as [`client_head`] answers, one line
    /// of JSON.
    Head(String),
    /// Progress (connected, retrying, switching), for the `selfcap` logger.
    Note(String),
    /// The watch ended: stopped (`Ok`), or a fatal error.
    End(Result<(), Error>),
}

/// A running watch (`client_watch`): the client library's watch loop
/// (`Client::watch`, as `selfcap watch` runs it) on a thread of its own,
/// its heads handed over one by one. Stopped by `close`, or when dropped.
#[pyclass(module = "selfcap._native")]
struct Watch {
    rx: Mutex<mpsc::Receiver<Msg>>,
    stop: Arc<Stop>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Watch {
    /// The thread ended (its `End` was received): joined at once.
    fn ended(&self) {
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

#[pymethods]
impl Watch {
    /// The next message, blocking with the GIL released: `("head", json)`,
    /// `("note", text)`, or `None` once the watch ended (stopped); a fatal
    /// error is raised. Python's signal handlers run every [`TICK`], so
    /// Ctrl-C raises `KeyboardInterrupt` here.
    fn next(&self, py: Python<'_>) -> PyResult<Option<(&'static str, String)>> {
        loop {
            let msg = py.detach(|| {
                self.rx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recv_timeout(TICK)
            });
            match msg {
                Ok(Msg::Head(h)) if !self.stop.is_set() => return Ok(Some(("head", h))),
                Ok(Msg::Head(_)) => {}
                Ok(Msg::Note(n)) => return Ok(Some(("note", n))),
                Ok(Msg::End(end)) => {
                    self.ended();
                    return end.map(|()| None).map_err(raise);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
                // Closed from another thread (an asyncio task's executor).
                Err(mpsc::RecvTimeoutError::Timeout) if self.stop.is_set() => return Ok(None),
                Err(mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            }
        }
    }

    /// Stops the watch and waits up to `timeout` seconds for its thread to
    /// end: a WebSocket is closed within [`TICK`], a backoff sleep ends at
    /// once; a long-poll request in flight is left to finish on its own
    /// (the thread then ends without delivering anything). Whether it ended.
    #[pyo3(signature = (timeout = 5.0))]
    fn close(&self, py: Python<'_>, timeout: f64) -> bool {
        self.stop.set();
        let deadline = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 86_400.0));
        py.detach(|| {
            let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(Msg::End(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                        self.ended();
                        return true;
                    }
                    Ok(_) => {}
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        return self
                            .thread
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .is_none()
                    }
                }
            }
        })
    }

    /// Whether the watch was asked to stop.
    #[getter]
    fn stopped(&self) -> bool {
        self.stop.is_set()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Not joined: a long-poll in flight must not hold up the drop.
        self.stop.set();
    }
}

/// Starts watching `agent` (default: this identity) as `selfcap watch`
/// does: over WebSocket with the long-poll fallback (`channel`: "auto",
/// "websocket" or "longpoll"), signed when needed, retrying forever. The
/// identity and the agent are resolved here, so a local error is raised at
/// once.
#[pyfunction]
#[pyo3(signature = (cfg, agent = None, channel = "auto"))]
fn client_watch(py: Python<'_>, cfg: &str, agent: Option<&str>, channel: &str) -> PyResult<Watch> {
    let choice = match channel {
        "auto" => ChannelChoice::Auto,
        "websocket" => ChannelChoice::Only(Channel::WebSocket),
        "longpoll" => ChannelChoice::Only(Channel::LongPoll),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown channel {other:?} (auto, websocket or longpoll)"
            )))
        }
    };
    let cfg = config(cfg)?;
    let given = agent_arg(agent)?;
    let agent = py
        .detach(|| match &given {
            Some(a) => Ok(a.clone()),
            None => client_for(&cfg, None)?.agent_id(),
        })
        .map_err(raise)?;
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(Stop::default());
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("selfcap-watch".into())
            .spawn(move || {
                let end = run_watch(&cfg, given.as_ref(), &agent, choice, &stop, &tx);
                let _ = tx.send(Msg::End(end));
            })
            .map_err(|e| PyValueError::new_err(format!("cannot start the watch: {e}")))?
    };
    Ok(Watch {
        rx: Mutex::new(rx),
        stop,
        thread: Mutex::new(Some(thread)),
    })
}

/// The watch thread's work: a client as the CLI's watch makes one (a
/// request may be held for the long-poll's wait on top of the timeout),
/// whose sleeps and sockets wake up for `stop`.
fn run_watch(
    cfg: &Config,
    given: Option<&AgentId>,
    agent: &AgentId,
    choice: ChannelChoice,
    stop: &Arc<Stop>,
    tx: &mpsc::Sender<Msg>,
) -> Result<(), Error> {
    let timeout = Duration::from_secs_f64(cfg.timeout.clamp(0.001, 86_400.0));
    let held = Duration::from_secs(POLL_WAIT_SECS);
    let sleeper = stop.clone();
    let c = client_for(cfg, given)?
        .with_transport(Box::new(UreqTransport::new(timeout + held)))
        .with_sleeper(Box::new(move |d| sleeper.sleep(d)));
    let connector = StoppableConnector {
        inner: TungsteniteConnector {
            timeout,
            idle: TICK,
        },
        stop: stop.clone(),
    };
    let start = Instant::now();
    let mut on_head = |h: &WatchedHead| {
        let msg = format!(r#"{{"etag":{},"head":{}}}"#, json!(h.etag), h.line);
        if stop.is_set() || tx.send(Msg::Head(msg)).is_err() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    c.watch(
        agent,
        choice,
        &mut WatchIo {
            connector: &connector,
            clock: &move || start.elapsed(),
            on_head: &mut on_head,
            on_note: &|n: &Note| {
                let _ = tx.send(Msg::Note(n.to_string()));
            },
            stopped: &|| stop.is_set(),
        },
    )
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(canonicalize, m)?)?;
    m.add_function(wrap_pyfunction!(cursor, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(verify_export, m)?)?;
    m.add_function(wrap_pyfunction!(template, m)?)?;
    m.add_function(wrap_pyfunction!(identity_create, m)?)?;
    m.add_function(wrap_pyfunction!(identity_load, m)?)?;
    m.add_function(wrap_pyfunction!(identity_at, m)?)?;
    m.add_function(wrap_pyfunction!(client_bootstrap, m)?)?;
    m.add_function(wrap_pyfunction!(client_publish, m)?)?;
    m.add_function(wrap_pyfunction!(client_head, m)?)?;
    m.add_function(wrap_pyfunction!(client_read, m)?)?;
    m.add_function(wrap_pyfunction!(client_history, m)?)?;
    m.add_function(wrap_pyfunction!(client_export, m)?)?;
    m.add_function(wrap_pyfunction!(client_rehydrate, m)?)?;
    m.add_function(wrap_pyfunction!(client_verify, m)?)?;
    m.add_function(wrap_pyfunction!(client_watch, m)?)?;
    m.add_function(wrap_pyfunction!(client_keys, m)?)?;
    m.add_function(wrap_pyfunction!(client_keys_init, m)?)?;
    m.add_function(wrap_pyfunction!(client_rotate, m)?)?;
    m.add_function(wrap_pyfunction!(client_recommit, m)?)?;
    m.add_function(wrap_pyfunction!(client_recover, m)?)?;
    m.add_class::<Watch>()?;
    Ok(())
}
