//! The key log from the client's side (docs/PROTOCOL.md §14): reading and
//! verifying an agent's log against the service's keyring, the pin kept per
//! agent against rollback and forks, and submitting key events (the
//! inception, rotations) so that a crash at any point leaves a state the
//! next run finishes.
//!
//! The crash rules, in the order a rotation runs:
//!
//! 1. the new next key is generated and written (synced) to `next.key.new`
//!    before anything is signed or sent;
//! 2. the signed request (the exact POST body) is written to
//!    `rotation.json` before it is sent;
//! 3. a run that finds `rotation.json` resends those exact bytes first (the
//!    service answers `already_applied` for an event it has), never builds a
//!    second, different event;
//! 4. once the service accepted it, the files are swapped, each step
//!    idempotent ([`Client::finish_pending`]), and `rotation.json` goes last.
//!
//! The rules themselves (what an event may say, which key may sign it) are
//! the core's (`core::key_log`); this module only builds events from the
//! state the verified log folds to. An event is sent by the write path's
//! `POST keys.json` (`writes`: a new identity's first write carries its
//! inception), and a disputing rotation's write is recorded as any write.

use super::exchange::read_error;
use super::http::Request;
use super::identity::{
    Signer, KEY_NEW_FILE, NEXT_KEY_FILE, NEXT_KEY_NEW_FILE, NEXT_KEY_RECOMMIT_FILE, ROTATION_FILE,
};
use super::state::{self, Published};
use super::wire::Accepted;
use super::writes::{inception, precheck, KeysAnswer};
use super::{Client, Error};
use crate::core::crypto::{AgentId, AgentKey};
use crate::core::jcs;
use crate::core::json::{self, Json};
use crate::core::key_log::build::{self, post_body};
use crate::core::key_log::{
    verify_key_log, Digest, KeyEvent, KeyLogReport, KeyState, KeysSummary, LastGood, Pin, PinCheck,
    RotationAuthority, SealedKeyRecord, Supersedes,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The last key log seen per agent: `{agent_id: {"length", "head_hash"}}`.
pub const KEY_PINS_FILE: &str = "key_pins.json";

/// A key event on its way: what `rotation.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingEvent {
    /// `rotation`, `recovery` or `recommit`: which command finishes it.
    pub kind: String,
    /// The exact POST body, resent as is.
    pub body: String,
    /// The event's index.
    pub index: u64,
    /// The current key after the event (hex).
    pub public_key: String,
    /// Its index among the agent's keys.
    pub key_index: u64,
    /// The file holding that key's seed until it is swapped into `key`
    /// (`key` itself when the event keeps the current key).
    pub current_from: String,
    /// Whether `next.key.new` becomes `next.key` (the event committed it).
    pub promote_next: bool,
    /// Secret files that are dead once the event applied (a cancelled
    /// recommit's key, a swapped-in key's staging copy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// The capsule the envelope carries, with its seq (a disputing rotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<PendingWrite>,
}

/// The write inside a pending key event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// Its seq.
    pub seq: u64,
    /// The capsule.
    pub capsule: Json,
}

/// A served key log, verified.
#[derive(Debug, Clone)]
pub struct KeyLogView {
    /// The agent.
    pub agent_id: AgentId,
    /// The records as served (oldest first).
    pub records: Vec<Json>,
    /// The offline verification.
    pub report: KeyLogReport,
    /// What the log folds to (`None`: no log).
    pub state: Option<KeyState>,
    /// The pin before this read, and how the served log compared with it.
    pub pin: PinStatus,
}

impl KeyLogView {
    /// The view as `selfcap keys --json` prints it (and the packages return
    /// it): the summary, the pin status, the verification and the events,
    /// public members only (events carry no secrets).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "agent_id": self.agent_id.as_str(),
            "valid": self.report.valid,
            "length": self.report.length,
            "keys": self.report.keys,
            "pin": self.pin,
            "failures": self.report.failures,
            "events": self.records.iter().map(event_line_json).collect::<Vec<_>>(),
        })
    }
}

/// One key-log record as a line of `selfcap keys` and `verify`: public
/// members only.
pub fn event_line_json(r: &Json) -> serde_json::Value {
    let e = r.get("event");
    let s = |k: &str| {
        e.and_then(|e| e.get(k))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    serde_json::json!({
        "index": e.and_then(|e| e.get("index")).and_then(Json::as_safe_u64),
        "type": s("type"),
        "authority": s("authority"),
        "public_key": s("public_key"),
        "history_sequence": r.get("history_sequence").and_then(Json::as_safe_u64),
        "accepted_at": r.get("accepted_at").and_then(Json::as_str),
        "hash": r.get("hash").and_then(Json::as_str),
    })
}

/// How a served log compared with the pin kept here: the core's
/// [`PinCheck`], or why there was nothing to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PinStatus {
    /// No state directory to keep a pin in: not compared.
    Unpinned,
    /// No pin yet (first sight), now pinned.
    New,
    /// Compared with the pin.
    #[serde(untagged)]
    Checked(PinCheck),
}

impl PinStatus {
    /// The error a rollback or fork ends a command with.
    pub fn conflict(&self, agent: &AgentId) -> Option<Error> {
        let msg = match self {
            PinStatus::Checked(PinCheck::Rollback { pinned, served }) => format!(
                "key log ROLLBACK for {agent}: the service served {served} event(s) where this client \
                 saw {pinned}; the log is append-only, so the service equivocated or its key leaked \
                 (the pin in {KEY_PINS_FILE} is kept; nothing was changed)"
            ),
            PinStatus::Checked(PinCheck::Fork {
                index,
                pinned,
                served,
            }) => format!(
                "key log FORK for {agent}: event {index} is sealed as {served} where this client saw \
                 {pinned}; the service equivocated or its key leaked (the pin in {KEY_PINS_FILE} is \
                 kept; nothing was changed)"
            ),
            _ => return None,
        };
        Some(Error::KeyLogConflict(msg))
    }
}

/// Compares the served records with `pin` (`None`: first sight).
pub fn check_pin(pin: Option<&Pin>, served: &[SealedKeyRecord]) -> PinStatus {
    match pin {
        None => PinStatus::New,
        Some(p) => PinStatus::Checked(p.check(served)),
    }
}

/// Options of a rotation.
#[derive(Debug, Clone, Default)]
pub struct RotateOptions {
    /// The current key was stolen: the owner's last good write's seq. Its
    /// cursor is looked up, and the desired capsule is re-published at the
    /// next seq with the rotation.
    pub last_good: Option<u64>,
    /// Commit this recovery key digest instead of carrying the log's over.
    pub recovery_digest: Option<Digest>,
}

/// Options of a recovery rotation.
#[derive(Debug, Clone)]
pub struct RecoverOptions {
    /// The operator's recovery key (its seed file, as `key` is written).
    pub recovery_key: std::path::PathBuf,
    /// The next-key rotation (its index) this recovery voids, within its
    /// window.
    pub supersedes: Option<u64>,
    /// A fresh recovery key digest to commit (the revealed one is spent).
    pub recovery_digest: Option<Digest>,
}

/// What a key command did.
#[derive(Debug, Clone, Serialize)]
pub struct Rotated {
    /// `rotation`, `recovery` or `recommit`.
    pub kind: String,
    /// `new`, or `already_applied` (a resumed event the service had).
    pub applied: String,
    /// The event's index.
    pub index: u64,
    /// True when an earlier run's pending event was resent.
    pub resumed: bool,
    /// The current key after it (public, hex).
    pub public_key: String,
    /// The summary after it.
    pub keys: Option<KeysSummary>,
    /// The write that came with it (a disputing rotation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<Accepted>,
}

/// A test-only hook: `SELFCAP_TEST_STOP=after-submit` makes a key command
/// stop (exit as unavailable) right after the service accepted its event
/// and before any local file is swapped, as a crash there would;
/// `after-key-swap` right after `key` was replaced, before identity.json.
/// Honoured only when set; never set it outside tests.
pub const TEST_STOP_ENV: &str = "SELFCAP_TEST_STOP";

fn test_stop(point: &str) -> Result<(), Error> {
    if std::env::var(TEST_STOP_ENV).is_ok_and(|v| v == point) {
        return Err(Error::Unavailable(format!(
            "stopped at {point} ({TEST_STOP_ENV}, test only)"
        )));
    }
    Ok(())
}

impl Client {
    /// `GET keys.json`, verified offline against the service's keyring,
    /// compared with the pin kept here (which then moves forward unless the
    /// log rolled back or forked). A rollback or fork is reported in the
    /// view's `pin`, and is an error of the commands that act on the log.
    pub fn key_log(&self, agent: Option<&AgentId>) -> Result<KeyLogView, Error> {
        let target = self.target(agent)?;
        let url = self.keys_url(&target)?;
        let (req, resp) = self.read_doc(&target, Request::get(url))?;
        if resp.status != 200 {
            return Err(read_error(&req, &resp));
        }
        let doc =
            json::parse(&resp.body).map_err(|e| Error::Protocol(format!("keys.json: {e}")))?;
        if doc.get("agent_id").and_then(Json::as_str) != Some(target.as_str()) {
            return Err(Error::Protocol("keys.json is for another agent".into()));
        }
        let records: Vec<Json> = match doc.get("records") {
            Some(Json::Array(a)) => a.clone(),
            _ => return Err(Error::Protocol("keys.json has no records array".into())),
        };
        let keyring = self.keyring()?;
        let (report, state) = verify_key_log(&target, &records, &keyring, super::now_ms());
        let sealed: Vec<SealedKeyRecord> = records
            .iter()
            .filter_map(|r| SealedKeyRecord::from_json(r).ok())
            .collect();
        // A reader without a state directory (an MCP reader before its
        // identity exists) has nowhere to keep a pin.
        if !self.state.path().is_dir() {
            return Ok(KeyLogView {
                agent_id: target,
                records,
                report,
                state,
                pin: PinStatus::Unpinned,
            });
        }
        let mut pins = self.key_pins()?;
        let pin = check_pin(pins.get(target.as_str()), &sealed);
        // Only a log that verified moves the pin: an unverifiable one is
        // no evidence of anything.
        if report.valid
            && matches!(
                pin,
                PinStatus::New | PinStatus::Checked(PinCheck::Consistent)
            )
        {
            if let Some(p) = Pin::of(&sealed) {
                if pins.get(target.as_str()) != Some(&p) {
                    pins.insert(target.to_string(), p);
                    self.state.write_json(KEY_PINS_FILE, &pins)?;
                }
            }
        }
        Ok(KeyLogView {
            agent_id: target,
            records,
            report,
            state,
            pin,
        })
    }

    /// [`Client::key_log`], failing on a rollback or fork (exit 10) and on
    /// a log that does not verify (exit 8): what the commands that build on
    /// the log start from.
    pub fn trusted_key_log(&self, agent: Option<&AgentId>) -> Result<KeyLogView, Error> {
        let view = self.key_log(agent)?;
        if let Some(e) = view.pin.conflict(&view.agent_id) {
            return Err(e);
        }
        if !view.report.valid {
            let f = &view.report.failures[0];
            return Err(Error::Unverified(format!(
                "the key log does not verify: event {}: {} ({})",
                f.index.map_or("-".into(), |i| i.to_string()),
                f.check,
                f.detail
            )));
        }
        Ok(view)
    }

    /// The pins kept here.
    pub fn key_pins(&self) -> Result<BTreeMap<String, Pin>, Error> {
        Ok(self.state.read_json(KEY_PINS_FILE)?.unwrap_or_default())
    }

    /// `keys init`: an inception alone, for an identity that published
    /// without a key log. Creates next.key when there is none (written and
    /// synced before anything is sent). Idempotent: an agent that has a log
    /// gets an error saying so.
    pub fn keys_init(&self, recovery_digest: Option<Digest>) -> Result<KeysAnswer, Error> {
        let key = self.key()?;
        if key.key_index() > 0 {
            return Err(Error::local(
                "this identity already rotated: it has a key log",
            ));
        }
        let agent = key.agent_id();
        let view = self.trusted_key_log(Some(&agent))?;
        if !view.records.is_empty() {
            return Err(Error::local(format!(
                "{agent} already has a key log ({} event(s)): nothing to init",
                view.records.len()
            )));
        }
        let next = match self.state.load_next_key()? {
            Some(n) => n,
            None => {
                let n = super::fresh_key()?;
                self.state.write_secret(NEXT_KEY_FILE, &n)?;
                n
            }
        };
        self.note_next_digest(&next)?;
        let recovery = match recovery_digest {
            Some(d) => Some(d),
            None => self
                .state
                .identity()?
                .and_then(|i| i.recovery_key_digest)
                .as_deref()
                .and_then(Digest::from_hex),
        };
        let event = inception(key.key(), Digest::of_key(&next.public_key()), recovery);
        let body = post_body(&event.to_json(), None);
        let (answer, _) = self.post_key_event(&agent, body)?;
        let _ = self.key_log(Some(&agent));
        Ok(answer)
    }

    /// Records in identity.json the digest of the next key this identity
    /// committed (or is about to), so a write can build the inception
    /// without loading next.key.
    fn note_next_digest(&self, next: &AgentKey) -> Result<(), Error> {
        let Some(mut id) = self.state.identity()? else {
            return Err(Error::local("no identity.json in the state directory"));
        };
        let d = Digest::of_key(&next.public_key()).to_hex();
        if id.next_key_digest.as_deref() != Some(d.as_str()) {
            id.next_key_digest = Some(d);
            self.state.save_identity(&id)?;
        }
        Ok(())
    }

    /// `rotate`: reveals the committed next key (next.key, or a matured
    /// recommit's), which becomes the current key, and commits a freshly
    /// generated next key; with `last_good`, disputes the outgoing key's
    /// writes after that seq and re-publishes the desired capsule above it.
    /// Resumes a pending rotation first.
    pub fn rotate(&self, opts: &RotateOptions) -> Result<Rotated, Error> {
        if let Some(p) = self.pending_of("rotation")? {
            if opts.last_good.is_some() && p.write.is_none() {
                return Err(Error::local(format!(
                    "a routine rotation is pending in {ROTATION_FILE}: run `selfcap rotate` to \
                     finish it first"
                )));
            }
            return self.submit_pending(p, true);
        }
        let (key, _view, state) = self.current_state()?;
        let agent = key.agent_id();
        let (next, next_file) = self.committed_next_key(&state)?;
        // 1. The new next key exists on disk before anything is signed.
        let new_next = super::fresh_key()?;
        self.state.write_secret(NEXT_KEY_NEW_FILE, &new_next)?;
        let disputes_after = match opts.last_good {
            Some(seq) => Some(LastGood {
                seq,
                cursor: self.cursor_of_seq(&agent, seq)?,
            }),
            None => None,
        };
        let event = build::rotation(
            &state,
            build::Rotation {
                authority: RotationAuthority::Next,
                revealed: &next,
                current: &next,
                next: Digest::of_key(&new_next.public_key()),
                recovery: opts.recovery_digest.or(state.recovery_key_digest),
                supersedes: None,
                disputes_after: disputes_after.clone(),
            },
        );
        let write = match &disputes_after {
            Some(last) => {
                let capsule = self.owner_capsule()?;
                precheck(&agent, &capsule)?;
                Some(PendingWrite {
                    seq: last.seq + 1,
                    capsule,
                })
            }
            None => None,
        };
        let key_index = state.key_index() + 1;
        let signer_after = Signer::from_parts(agent.clone(), next, key_index);
        let envelope = write
            .as_ref()
            .map(|w| signer_after.sign_envelope(w.seq, &w.capsule));
        // A rotation cancels a pending recommit: its key is dead either way
        // (swapped in as current, or never to be committed).
        let pending = PendingEvent {
            kind: "rotation".into(),
            body: body_text(&event, envelope.as_ref()),
            index: state.length,
            public_key: signer_after.public_key().to_hex(),
            key_index,
            current_from: next_file.into(),
            promote_next: true,
            drop: vec![NEXT_KEY_RECOMMIT_FILE.into()],
            write,
        };
        self.send_new(pending)
    }

    /// `recommit`: the current key replaces the commitments with a fresh
    /// next key (for an owner who lost next.key). It matures after the
    /// recovery window unless a rotation lands first; until then the new
    /// next key waits in `next.key.recommit` and next.key (if any) still
    /// rotates (which cancels the recommit).
    pub fn recommit(&self, recovery_digest: Option<Digest>) -> Result<Rotated, Error> {
        if let Some(p) = self.pending_of("recommit")? {
            return self.submit_pending(p, true);
        }
        let (key, _view, state) = self.current_state()?;
        if let Some(p) = &state.pending_recommit {
            return Err(Error::local(format!(
                "a recommit is already pending (recommit_pending): it matures at {}",
                crate::core::time::rfc3339(p.matures_ms)
            )));
        }
        // 1. The new next key exists on disk before anything is signed.
        let new_next = super::fresh_key()?;
        self.state.write_secret(NEXT_KEY_RECOMMIT_FILE, &new_next)?;
        let event = build::recommit(
            &state,
            key.key(),
            Digest::of_key(&new_next.public_key()),
            recovery_digest.or(state.recovery_key_digest),
        );
        let pending = PendingEvent {
            kind: "recommit".into(),
            body: body_text(&event, None),
            index: state.length,
            public_key: key.public_key().to_hex(),
            key_index: state.key_index(),
            current_from: state::KEY_FILE.into(),
            promote_next: false,
            drop: Vec::new(),
            write: None,
        };
        self.send_new(pending)
    }

    /// `recover`: a recovery rotation revealing the operator's recovery
    /// key; the new current key and next key are generated here and
    /// written before anything is sent. With `supersedes`, voids that
    /// next-key rotation (and everything its key and later keys signed).
    pub fn recover(&self, opts: &RecoverOptions) -> Result<Rotated, Error> {
        if let Some(p) = self.pending_of("recovery")? {
            return self.submit_pending(p, true);
        }
        let Some(recovery) = super::identity::read_seed_file(&opts.recovery_key)? else {
            return Err(Error::local(format!(
                "no recovery key file {}",
                opts.recovery_key.display()
            )));
        };
        let agent = self.agent_id_of_identity()?;
        let view = self.trusted_key_log(Some(&agent))?;
        let Some(mut state) = view.state.clone() else {
            return Err(no_log(&agent));
        };
        state.settle(super::now_ms());
        let supersedes = match opts.supersedes {
            Some(k) => {
                let record = view.records.get(k as usize).ok_or_else(|| {
                    Error::local(format!("--supersedes {k}: the key log has no event {k}"))
                })?;
                let hash = record
                    .get("hash")
                    .and_then(Json::as_str)
                    .ok_or_else(|| Error::Protocol(format!("key log event {k} has no hash")))?;
                Some(Supersedes {
                    index: k,
                    hash: hash.to_owned(),
                })
            }
            None => None,
        };
        // 1. The new keys exist on disk before anything is signed.
        let new_current = super::fresh_key()?;
        let new_next = super::fresh_key()?;
        self.state.write_secret(KEY_NEW_FILE, &new_current)?;
        self.state.write_secret(NEXT_KEY_NEW_FILE, &new_next)?;
        let event = build::rotation(
            &state,
            build::Rotation {
                authority: RotationAuthority::Recovery,
                revealed: &recovery,
                current: &new_current,
                next: Digest::of_key(&new_next.public_key()),
                recovery: opts.recovery_digest,
                supersedes,
                disputes_after: None,
            },
        );
        let pending = PendingEvent {
            kind: "recovery".into(),
            body: body_text(&event, None),
            index: state.length,
            public_key: new_current.public_key().to_hex(),
            key_index: state.key_index() + 1,
            current_from: KEY_NEW_FILE.into(),
            promote_next: true,
            drop: vec![NEXT_KEY_RECOMMIT_FILE.into(), KEY_NEW_FILE.into()],
            write: None,
        };
        self.send_new(pending)
    }

    /// The key event left by an interrupted run, if any.
    pub fn pending_event(&self) -> Result<Option<PendingEvent>, Error> {
        self.state.read_json(ROTATION_FILE)
    }

    /// The pending event when it is a `kind`; an error naming the command
    /// that finishes it when it is another kind.
    fn pending_of(&self, kind: &str) -> Result<Option<PendingEvent>, Error> {
        match self.pending_event()? {
            Some(p) if p.kind == kind => Ok(Some(p)),
            Some(p) => Err(Error::local(format!(
                "a {} is pending in {ROTATION_FILE}: run `selfcap {}` to finish it first",
                p.kind,
                match p.kind.as_str() {
                    "recovery" => "recover --recovery-key FILE",
                    "recommit" => "recommit",
                    _ => "rotate",
                }
            ))),
            None => Ok(None),
        }
    }

    /// The identity's key, the verified log, and its state settled now;
    /// refuses when the key is not the log's current key.
    fn current_state(&self) -> Result<(Signer, KeyLogView, KeyState), Error> {
        let key = self.key()?;
        let agent = key.agent_id();
        let view = self.trusted_key_log(Some(&agent))?;
        let Some(mut state) = view.state.clone() else {
            return Err(no_log(&agent));
        };
        state.settle(super::now_ms());
        if state.current() != &key.public_key() {
            return Err(Error::local(format!(
                "the key log's current key ({}) is not the key in {}: another copy of this identity \
                 rotated, or this key was rotated out",
                state.current().to_hex(),
                self.state.file(state::KEY_FILE).display()
            )));
        }
        Ok((key, view, state))
    }

    /// The next key the log committed, from next.key or a matured
    /// recommit's file, with the file it is in.
    fn committed_next_key(&self, state: &KeyState) -> Result<(AgentKey, &'static str), Error> {
        for file in [NEXT_KEY_FILE, NEXT_KEY_RECOMMIT_FILE] {
            if let Some(k) = self.state.read_secret(file)? {
                if Digest::of_key(&k.public_key()) == state.next_key_digest {
                    return Ok((k, file));
                }
            }
        }
        if let Some(p) = &state.pending_recommit {
            return Err(Error::local(format!(
                "no committed next key here (rotation_not_committed): the recommit's key matures at {}; \
                 rotate then",
                crate::core::time::rfc3339(p.matures_ms)
            )));
        }
        Err(Error::local(format!(
            "no next key in {} is the one the key log committed (rotation_not_committed): \
             `selfcap recommit` commits a new one (it matures after the recovery window)",
            self.state.path().display()
        )))
    }

    /// Steps 2 and 3 for a new event: on disk, then sent.
    fn send_new(&self, pending: PendingEvent) -> Result<Rotated, Error> {
        // 2. The signed request is on disk before it is sent.
        self.state.write_json(ROTATION_FILE, &pending)?;
        self.state.sync_dir()?;
        self.submit_pending(pending, false)
    }

    /// Step 3, sends the pending body; on a 200, step 4 swaps the files.
    fn submit_pending(&self, p: PendingEvent, resumed: bool) -> Result<Rotated, Error> {
        let agent = self.agent_id_of_identity()?;
        let answer = match self.post_key_event(&agent, p.body.clone().into_bytes()) {
            Ok((a, _)) => a,
            // A refusal (other than a 429) changed nothing, and the exact
            // bytes of an event the log holds are never refused (they get
            // `already_applied`): this event did not apply and resending it
            // would only be refused again (key_event_stale, a spent
            // commitment, a closed window...). Forget it and the keys it
            // would have committed, so the next run builds afresh from the
            // log.
            Err(Error::Rejected(r)) if r.status != 429 && (400..500).contains(&r.status) => {
                self.state.remove(ROTATION_FILE)?;
                self.state.remove(NEXT_KEY_NEW_FILE)?;
                self.state.remove(KEY_NEW_FILE)?;
                if p.kind == "recommit" {
                    self.state.remove(NEXT_KEY_RECOMMIT_FILE)?;
                }
                self.state.sync_dir()?;
                return Err(Error::Rejected(r));
            }
            Err(e) => return Err(e),
        };
        test_stop("after-submit")?;
        let write = self.finish_pending(&p, &answer)?;
        Ok(Rotated {
            kind: p.kind,
            applied: answer.applied,
            index: answer.index,
            resumed,
            public_key: p.public_key,
            keys: answer.keys,
            write,
        })
    }

    /// Step 4, after the service accepted the pending event: `key` ← the
    /// key it made current, identity.json, `next.key` ← `next.key.new`, the
    /// write recorded, dead files removed, then `rotation.json`. Every step
    /// checks what is already done, so a crash anywhere is finished by the
    /// next run.
    fn finish_pending(
        &self,
        p: &PendingEvent,
        answer: &KeysAnswer,
    ) -> Result<Option<Accepted>, Error> {
        let current_now = self.state.read_secret(state::KEY_FILE)?;
        if current_now.as_ref().map(|k| k.public_key().to_hex()) != Some(p.public_key.clone()) {
            let Some(new_current) = self.state.read_secret(&p.current_from)? else {
                return Err(Error::local(format!(
                    "cannot finish the {}: {} is missing",
                    p.kind,
                    self.state.file(&p.current_from).display()
                )));
            };
            if new_current.public_key().to_hex() != p.public_key {
                return Err(Error::local(format!(
                    "cannot finish the {}: {} is not the key it made current",
                    p.kind,
                    self.state.file(&p.current_from).display()
                )));
            }
            self.state.write_secret(state::KEY_FILE, &new_current)?;
            test_stop("after-key-swap")?;
        }
        let mut id = self
            .state
            .identity()?
            .ok_or_else(|| Error::local("no identity.json in the state directory"))?;
        if id.public_key != p.public_key {
            if id.genesis_public_key.is_none() && id.key_index.is_none() {
                id.genesis_public_key = Some(id.public_key.clone());
            }
            id.public_key = p.public_key.clone();
            // The service's count when it just applied the event (a
            // superseding recovery voids keys); else the one computed.
            id.key_index = Some(match (&answer.keys, answer.applied.as_str()) {
                (Some(k), "new") => k.index,
                _ => p.key_index,
            });
        }
        if p.promote_next {
            if let Some(new_next) = self.state.read_secret(NEXT_KEY_NEW_FILE)? {
                id.next_key_digest = Some(Digest::of_key(&new_next.public_key()).to_hex());
                self.state.save_identity(&id)?;
                let from = self.state.file(NEXT_KEY_NEW_FILE);
                let to = self.state.file(NEXT_KEY_FILE);
                std::fs::rename(&from, &to)
                    .map_err(|e| Error::local(format!("cannot rename {}: {e}", from.display())))?;
                self.state.sync_dir()?;
            }
        }
        self.state.save_identity(&id)?;
        let mut write = answer.write.clone();
        if let Some(w) = &p.write {
            let cursor = jcs::cursor(&w.capsule);
            if write.is_none() {
                // already_applied: the write went in with the event; the
                // head says where it stands.
                write = self.accepted_if_head_is(&self.agent_id_of_identity()?, w.seq, &cursor)?;
            }
            if let Some(a) = &write {
                let previous = self.state.published()?;
                self.state.note_signed(w.seq, &cursor)?;
                self.adopt_accepted(&w.capsule, a, previous.as_ref())?;
            }
        }
        for f in &p.drop {
            self.state.remove(f)?;
        }
        self.note_key_log_length(p.index + 1)?;
        self.state.remove(ROTATION_FILE)?;
        self.state.sync_dir()?;
        let _ = self.key_log(None);
        Ok(write)
    }

    /// identity.json's agent id (the key file may be mid-swap).
    fn agent_id_of_identity(&self) -> Result<AgentId, Error> {
        self.state
            .identity()?
            .and_then(|i| AgentId::parse(&i.agent_id))
            .map_or_else(|| self.agent_id(), Ok)
    }

    /// The cursor of our own write at `seq`: published.json when it is that
    /// write, else history.json.
    fn cursor_of_seq(&self, agent: &AgentId, seq: u64) -> Result<String, Error> {
        if let Some(p) = self.state.published()?.filter(|p| p.seq == seq) {
            return Ok(p.cursor);
        }
        let page = self.history(Some(agent), None, Some(100))?;
        page["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["seq"].as_u64() == Some(seq))
            .and_then(|v| v["cursor"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                Error::local(format!(
                    "no retained write at seq {seq} in {agent}'s history: --last-good must name \
                     one of the owner's writes the service still holds"
                ))
            })
    }

    /// The capsule a disputing rotation re-publishes: the desired capsule
    /// (capsule.json, the owner's own file, which a thief writing to the
    /// service cannot change), else the last write recorded here.
    fn owner_capsule(&self) -> Result<Json, Error> {
        if let Some(d) = self.state.desired()? {
            return Ok(d);
        }
        self.state.published()?.map(|p| p.capsule).ok_or_else(|| {
            Error::local("no capsule.json and nothing published here: nothing to re-publish")
        })
    }

    /// Records `capsule` as the last accepted write.
    pub(crate) fn adopt_accepted(
        &self,
        capsule: &Json,
        accepted: &Accepted,
        previous: Option<&Published>,
    ) -> Result<(), Error> {
        self.record(capsule, accepted, previous)?;
        self.state.clear_pending()
    }
}

/// The POST body as the text `rotation.json` keeps.
fn body_text(event: &KeyEvent, envelope: Option<&Json>) -> String {
    String::from_utf8(post_body(&event.to_json(), envelope)).expect("JCS is UTF-8")
}

fn no_log(agent: &AgentId) -> Error {
    Error::local(format!(
        "{agent} has no key log: publish once (a new identity's first write carries its \
         inception) or run `selfcap keys init`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ExitCode;

    fn vector() -> Json {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/vectors/keys/verifier.json"
        ))
        .unwrap();
        json::parse_str(&text).unwrap()
    }

    /// The intact log of the verifier vector (tests/vectors/keys/).
    fn vector_log() -> (AgentId, Vec<SealedKeyRecord>) {
        let v = vector();
        let agent = AgentId::parse(v.get("agent_id").and_then(Json::as_str).unwrap()).unwrap();
        let Some(Json::Array(cases)) = v.get("cases") else {
            panic!("cases")
        };
        let intact = cases
            .iter()
            .find(|c| c.get("name").and_then(Json::as_str) == Some("intact"))
            .unwrap();
        let Some(Json::Array(log)) = intact.get("log") else {
            panic!("log")
        };
        let records = log
            .iter()
            .map(|r| SealedKeyRecord::from_json(r).unwrap())
            .collect();
        (agent, records)
    }

    #[test]
    fn the_pin_tells_extension_from_rollback_and_fork() {
        let (agent, log) = vector_log();
        assert!(log.len() >= 2);
        assert_eq!(check_pin(None, &log), PinStatus::New);
        let short = Pin::of(&log[..log.len() - 1]).unwrap();
        assert_eq!(
            check_pin(Some(&short), &log),
            PinStatus::Checked(PinCheck::Consistent)
        );
        let full = Pin::of(&log).unwrap();
        assert_eq!(
            check_pin(Some(&full), &log),
            PinStatus::Checked(PinCheck::Consistent)
        );
        let rolled = check_pin(Some(&full), &log[..1]);
        assert_eq!(
            rolled,
            PinStatus::Checked(PinCheck::Rollback {
                pinned: log.len() as u64,
                served: 1
            })
        );
        let forked_pin = Pin {
            length: full.length,
            head_hash: "0".repeat(64),
        };
        assert!(matches!(
            check_pin(Some(&forked_pin), &log),
            PinStatus::Checked(PinCheck::Fork { index, .. }) if index == full.length - 1
        ));
        // Both are errors with their own exit code; agreement is none.
        for bad in [rolled, check_pin(Some(&forked_pin), &log)] {
            let e = bad.conflict(&agent).unwrap();
            assert_eq!(e.exit_code(), ExitCode::KeyLogConflict);
            assert_eq!(e.exit_code().code(), 10);
            assert!(!e.to_string().contains('\n'));
        }
        assert!(PinStatus::Checked(PinCheck::Consistent)
            .conflict(&agent)
            .is_none());
        // As reported (`selfcap keys --json`, the packages): one `status`.
        let json = |p: &PinStatus| serde_json::to_value(p).unwrap();
        assert_eq!(json(&PinStatus::New), serde_json::json!({"status": "new"}));
        assert_eq!(
            json(&PinStatus::Checked(PinCheck::Consistent)),
            serde_json::json!({"status": "consistent"})
        );
        assert_eq!(
            json(&PinStatus::Checked(PinCheck::Rollback {
                pinned: 3,
                served: 1
            })),
            serde_json::json!({"status": "rollback", "pinned": 3, "served": 1})
        );
    }

    #[test]
    fn the_inception_commits_the_next_key_and_verifies() {
        let genesis = AgentKey::from_seed(&[3; 32]);
        let next = AgentKey::from_seed(&[4; 32]);
        let e = inception(&genesis, Digest::of_key(&next.public_key()), None);
        assert!(e.signatures_verify());
        assert_eq!(e.agent_id, genesis.agent_id());
        assert_eq!(e.next_key_digest, Digest::of_key(&next.public_key()));
        let round = KeyEvent::from_json(&e.to_json()).unwrap();
        assert_eq!(round, e);
        // The body is canonical and carries the envelope when given.
        let env = genesis.sign_envelope(1, &Json::Object(vec![]));
        let body = String::from_utf8(post_body(&e.to_json(), Some(&env))).unwrap();
        assert!(body.starts_with("{\"envelope\":"));
        assert_eq!(
            body,
            jcs::canonicalize(&json::parse_str(&body).unwrap()),
            "resent byte for byte"
        );
    }

    /// A service that serves the vector's keys.json (its first `served`
    /// records) and its keyring, nothing else.
    #[derive(Clone)]
    struct KeysOnly(std::rc::Rc<std::cell::Cell<usize>>);

    impl crate::client::http::Transport for KeysOnly {
        fn send(
            &self,
            req: &Request,
        ) -> Result<crate::client::http::Response, crate::client::http::TransportError> {
            let v = vector();
            let ok = |body: String| crate::client::http::Response {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: body.into_bytes(),
            };
            if req.url.ends_with(crate::core::urls::KEYS_PATH) {
                return Ok(ok(jcs::canonicalize(v.get("service_keyring").unwrap())));
            }
            assert!(req.url.ends_with("/keys.json"), "{}", req.url);
            let (agent, _) = vector_log();
            let Some(Json::Array(cases)) = v.get("cases") else {
                panic!("cases")
            };
            let Some(Json::Array(log)) = cases[0].get("log") else {
                panic!("log")
            };
            let records: Vec<String> = log[..self.0.get()].iter().map(jcs::canonicalize).collect();
            Ok(ok(format!(
                r#"{{"agent_id":"{agent}","v":"selfcap-keys/1","keys":null,"records":[{}]}}"#,
                records.join(",")
            )))
        }
    }

    #[test]
    fn key_log_pins_first_sight_moves_forward_and_keeps_the_pin_on_a_rollback() {
        let dir = std::env::temp_dir().join(format!(
            "selfcap-keys-pin-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let state = super::super::StateDir::new(&dir);
        state.create(&AgentKey::from_seed(&[5; 32]), None).unwrap();
        let (agent, log) = vector_log();
        let served = std::rc::Rc::new(std::cell::Cell::new(log.len() - 1));
        let client = || {
            Client::new(super::super::StateDir::new(&dir))
                .with_base_url(Some("http://svc.test".into()))
                .with_policy(crate::client::BackoffPolicy::no_retries())
                .with_transport(Box::new(KeysOnly(served.clone())))
        };
        let first = client().key_log(Some(&agent)).unwrap();
        assert!(first.report.valid, "{:?}", first.report.failures);
        assert_eq!(first.pin, PinStatus::New);
        assert_eq!(
            client().key_pins().unwrap()[agent.as_str()],
            Pin::of(&log[..log.len() - 1]).unwrap()
        );
        served.set(log.len());
        assert_eq!(
            client().key_log(Some(&agent)).unwrap().pin,
            PinStatus::Checked(PinCheck::Consistent)
        );
        assert_eq!(
            client().key_pins().unwrap()[agent.as_str()],
            Pin::of(&log).unwrap(),
            "the pin moves forward"
        );
        served.set(1);
        let rolled = client().key_log(Some(&agent)).unwrap();
        assert!(matches!(
            rolled.pin,
            PinStatus::Checked(PinCheck::Rollback { served: 1, .. })
        ));
        assert_eq!(
            client().key_pins().unwrap()[agent.as_str()],
            Pin::of(&log).unwrap(),
            "a rollback never moves the pin back"
        );
        let e = client().trusted_key_log(Some(&agent)).unwrap_err();
        assert_eq!(e.exit_code(), ExitCode::KeyLogConflict);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
