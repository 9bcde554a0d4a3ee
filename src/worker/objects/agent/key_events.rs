//! A key event in the agent's object (`POST /self/{id}/keys.json`): decided
//! whole by `core::key_log::submit`, then the record, the state, and the
//! write it carries (if any) committed in one atomic storage write with the
//! mirror ops and the retry alarm, exactly as a PUT commits.

use super::{entry_key, AgentDO, HISTORY_KEY, KEY_LOG_KEY, MIRROR_KEY, STATE_KEY};
use crate::core::crypto::AgentId;
use crate::core::history::HistoryIndex;
use crate::core::key_log::submit::{self, Context, Decided};
use crate::core::key_log::{KeyLog, KeysSummary, SealedKeyRecord};
use crate::core::mirror::{Commit, Mirror, RETRY_BASE_MS};
use crate::core::operator::meta::MetaRecord;
use crate::core::record::kv_key;
use crate::core::write::{AcceptedBody, AgentState, Rejection};
use crate::worker::config::{self, Config, SERVICE_KEY_SECRET};
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::kv::Kv;
use crate::worker::log;
use crate::worker::storage::{commit_atomic, parse, texts, Alarm, Batch};
use crate::worker::write_wire::WriteCall;
use serde::Serialize;
use std::time::Duration;

/// The 200 body of a key submission.
#[derive(Serialize)]
struct KeyEventAnswer<'a> {
    accepted: bool,
    /// `"new"`, or `"already_applied"` for the exact bytes of an accepted event
    /// (applied once; nothing changed).
    applied: &'static str,
    /// The event's index in the log.
    index: u64,
    /// The log's state after it (head.json's `keys`; for `already_applied`, as that
    /// event left it).
    keys: Option<&'a KeysSummary>,
    /// The sealed record (a new event only).
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<&'a SealedKeyRecord>,
    /// The write that committed with it, if an envelope came.
    #[serde(skip_serializing_if = "Option::is_none")]
    write: Option<&'a AcceptedBody>,
}

impl AgentDO {
    /// Under the lock from the first read to the KV mirror, like a write.
    pub(super) async fn key_event(&self, call: WriteCall) -> Result<worker::Response, Failure> {
        let cfg = Config::of(&self.env);
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let agent = &call.agent;
        let [state_text, history_text, mirror_text, log_text] =
            texts(&storage, [STATE_KEY, HISTORY_KEY, MIRROR_KEY, KEY_LOG_KEY]).await?;
        let mut state: AgentState = parse(STATE_KEY, state_text)?.unwrap_or_default();
        let post = submit::parse_body(&call.body).map_err(|r| refused(agent, r))?;
        let mut key_log = KeyLog::from_stored(agent.clone(), log_text.as_deref())
            .map_err(|e| stored_unusable(agent, &e))?;
        let mut history: Option<HistoryIndex> = parse(HISTORY_KEY, history_text)?;
        let keys = config::service_keys(&self.env);
        let Some(signer) = keys.signing.as_ref() else {
            log::event(
                "config_error",
                &[
                    ("missing", SERVICE_KEY_SECRET),
                    ("agent_id", agent.as_str()),
                    ("effect", "key event refused"),
                ],
            );
            return Err(Failure::Unavailable(Some(
                "the service signing key is not configured; key events are refused until it is",
            )));
        };
        // A rotation may not make another agent's genesis key current: look
        // that agent up before deciding (the decision itself is pure).
        let other_agent = match submit::new_key(&post.event) {
            Some(id) if id != *agent => Kv::of(&self.env)?.text(&kv_key(&id)).await?.is_some(),
            _ => false,
        };
        let decided = submit::decide(
            &post,
            &Context {
                agent,
                state: &state,
                log: &key_log,
                history: history.as_ref(),
                other_agent,
                now_ms: call.now_ms,
                tiers: &cfg.tiers,
                key: signer,
            },
        )
        .map_err(|r| refused(agent, r))?;
        let (record, key_state, write) = match decided {
            Decided::Again { index } => {
                // As that event left the log: its bytes may be held by
                // someone who may no longer read the log since.
                let keys = key_log.summary_after(index);
                let answer = KeyEventAnswer {
                    accepted: true,
                    applied: "already_applied",
                    index,
                    keys: keys.as_ref(),
                    record: None,
                    write: None,
                };
                return Ok(http::json(200, &answer, NO_STORE)?);
            }
            Decided::New {
                record,
                state,
                write,
            } => (record, state, write),
        };
        // The envelope's first capsule creates the agent: it takes a slot
        // of the client address's new-agent quota, as a PUT's would.
        if let Some(c) = write.as_deref().filter(|c| c.is_new_agent()) {
            // Refused like any failed key event: no cooldown.
            self.new_agent_slot(&state, c, &call, &cfg)
                .await
                .map_err(|f| match f {
                    Failure::Rejected(r) => Failure::Rejected(r.uncounted()),
                    other => other,
                })?;
        }

        let index = record.event.get("index").and_then(|i| i.as_safe_u64());
        key_log.push((*record).clone(), (*key_state).clone());
        state.keys = Some(key_state.summary(call.now_ms));
        // The same text in the object's storage and in KV (keys.json's records).
        let log_text = key_log.stored_text();
        let mut mirror: Mirror = parse(MIRROR_KEY, mirror_text)?.unwrap_or_default();
        let mut puts = Vec::new();
        let mut deletes = Vec::new();
        let mut accepted_write = None;
        match write {
            Some(candidate) => {
                let sealed = state
                    .commit_sealed(
                        *candidate,
                        call.now_ms,
                        &cfg.tiers,
                        signer,
                        &keys.keyring,
                        history,
                        Some(&key_state),
                    )
                    .map_err(|e| e.to_string())?;
                let sequence = sealed.history.head.length - 1;
                let entry = sealed.entry.stored_text();
                let index_text = serde_json::to_string(&sealed.history)?;
                let record_text = serde_json::to_string(&sealed.record)?;
                mirror.push_key_log(agent, &log_text);
                mirror.push_commit(&Commit {
                    agent,
                    sequence,
                    entry: &entry,
                    index: &index_text,
                    record: &record_text,
                    pruned: &sealed.pruned,
                });
                deletes = sealed.pruned.iter().map(|p| entry_key(*p)).collect();
                puts.push((HISTORY_KEY.to_owned(), index_text));
                puts.push((entry_key(sequence), entry));
                accepted_write = Some(sealed.body);
            }
            None => {
                // Who signed what, and what is disputed, changed: the
                // history documents' report and entity tag with it.
                let index_text = match history.as_mut() {
                    Some(h) => {
                        h.mark_disputed(&*key_state, key_state.length);
                        let t = serde_json::to_string(h)?;
                        puts.push((HISTORY_KEY.to_owned(), t.clone()));
                        Some(t)
                    }
                    None => None,
                };
                let record = state
                    .record(agent, &cfg.tiers, call.now_ms)
                    .map(|r| serde_json::to_string(&r))
                    .transpose()?;
                mirror.push_key_event(agent, &log_text, record.as_deref(), index_text.as_deref());
            }
        }
        // The log's length and disputed keys are meta.json's too, and the
        // disputed keys the deployment's totals.
        if let Some(k) = state.keys.as_ref() {
            let disputed = k.disputed as u64;
            state.count(agent, call.now_ms, |r| r.disputed(disputed));
        }
        MetaRecord::mirror(&mut mirror, agent, &state, call.now_ms);
        puts.push((KEY_LOG_KEY.to_owned(), log_text));
        puts.push((STATE_KEY.to_owned(), serde_json::to_string(&state)?));
        puts.push((MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?));
        commit_atomic(
            &storage,
            &Batch {
                puts: &puts,
                deletes: &deletes,
                alarm: Alarm::In(Duration::from_millis(RETRY_BASE_MS)),
            },
        )
        .await?;
        log::event(
            "key_event_accepted",
            &[
                ("agent_id", agent.as_str()),
                ("index", &index.unwrap_or_default().to_string()),
                (
                    "with_write",
                    if accepted_write.is_some() { "1" } else { "0" },
                ),
            ],
        );
        // Committed, with the retry alarm armed: nothing from here may turn
        // it into an error (a retry is answered "already" anyway).
        if let Err(e) = self
            .mirror_then_publish(Some(mirror), call.now_ms, self.due_at(&state))
            .await
        {
            log::event(
                "kv_mirror_error",
                &[("agent_id", agent.as_str()), ("error", &e.to_string())],
            );
        }
        let answer = KeyEventAnswer {
            accepted: true,
            applied: "new",
            index: index.unwrap_or_default(),
            keys: state.keys.as_ref(),
            record: Some(&record),
            write: accepted_write.as_ref(),
        };
        Ok(http::json(200, &answer, NO_STORE)?)
    }
}

/// A refused submission: logged, answered in the write's shape. Never a
/// cooldown (a failed key event must not let anyone lock the owner out).
fn refused(agent: &AgentId, r: Rejection) -> Failure {
    log::event(
        "key_event_refused",
        &[
            ("agent_id", agent.as_str()),
            ("reason", r.reason_codes.first().map_or("", |c| c.as_str())),
        ],
    );
    Failure::Rejected(r.uncounted())
}

/// The stored log does not fold: never act on it.
fn stored_unusable(agent: &AgentId, why: &str) -> Failure {
    log::event(
        "key_log_unreadable",
        &[("agent_id", agent.as_str()), ("error", why)],
    );
    Failure::Unavailable(None)
}
