//! A write in the agent's object: every check in the contract's order, then
//! the commit of state, chain entry, index, mirror ops and the retry alarm in
//! one atomic storage write.

use super::{entry_key, AgentDO, Stored, HISTORY_KEY, KEY_LOG_KEY, MIRROR_KEY, STATE_KEY};
use crate::core::history::HistoryIndex;
use crate::core::key_log::{KeyLog, KeyState};
use crate::core::mirror::{Commit, Mirror, RETRY_BASE_MS};
use crate::core::operator::meta::{MetaRecord, MIRROR_REFUSALS_WITHIN_MS};
use crate::core::record::Record;
use crate::core::write::{self, AgentState, Candidate, DecisionLog, Rejection, Signature, Terms};
use crate::worker::config::{self, Config, ServiceKeys, SERVICE_KEY_SECRET};
use crate::worker::do_wire::{Reserve, Slot};
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::log;
use crate::worker::storage::{commit_atomic, parse, texts, texts_of, Alarm, Batch};
use crate::worker::write_wire::{WriteCall, Written};
use std::time::Duration;
use worker::{Response, Storage};

impl AgentDO {
    /// Everything from loading state to the KV mirror runs under the lock:
    /// the IP-quota call and the KV put are awaits on other objects, during
    /// which the runtime would otherwise deliver the next write to us.
    pub(super) async fn write(&self, call: WriteCall) -> Result<Response, Failure> {
        let cfg = Config::of(&self.env);
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        // The key log rides in the same storage read (absent for agents
        // without one, which is every agent that never opted in).
        let [state_text, history, mirror, log_text] =
            texts(&storage, [STATE_KEY, HISTORY_KEY, MIRROR_KEY, KEY_LOG_KEY]).await?;
        let mut state: AgentState = parse(STATE_KEY, state_text)?.unwrap_or_default();
        let key_log = match state.keys {
            None => None,
            Some(_) => Some(
                KeyLog::from_stored(call.agent.clone(), log_text.as_deref()).map_err(|e| {
                    log::event(
                        "key_log_unreadable",
                        &[("agent_id", call.agent.as_str()), ("error", &e)],
                    );
                    Failure::Unavailable(None)
                })?,
            ),
        };
        let key_state = key_log.as_ref().and_then(KeyLog::state);
        let keys = config::service_keys(&self.env);
        let candidate = match self.decide(&state, &call, &cfg, &keys, key_state).await {
            Ok(c) => c,
            // A decided rejection: its cooldown persisted, logged, answered.
            Err(Failure::Rejected(rej)) => {
                if state.note_rejection(&call.agent, &rej, call.now_ms) {
                    self.count_refusal(&storage, &state, &call, &cfg, mirror)
                        .await?;
                }
                let line = DecisionLog::rejected(call.agent.as_str(), &rej, call.body.len() as u64);
                log::line_str(&line.to_line());
                return Err(Failure::Rejected(rej));
            }
            Err(other) => return Err(other),
        };
        let log_line = DecisionLog::accepted(call.agent.as_str(), &candidate).to_line();
        let stored = Stored { history, mirror };
        let (accepted, record, mirror) = self
            .commit(
                &storage, &mut state, candidate, &call, &cfg, &keys, stored, key_state,
            )
            .await?;
        let written = Written {
            seq: accepted.seq,
            projection: state.projection_may_be_kept(call.now_ms),
        };
        // The write is committed, with the retry alarm armed in the same
        // atomic write, so even a crash before the KV puts still converges.
        // From here on nothing may turn it into an error for the client (a
        // retry would only earn a replay_seq).
        if !call.fail_mirror {
            if let Err(e) = self
                .mirror_commit_then_publish(mirror, record, call.now_ms, self.due_at(&state))
                .await
            {
                log::event(
                    "kv_mirror_error",
                    &[("agent_id", call.agent.as_str()), ("error", &e.to_string())],
                );
            }
        }
        log::line_str(&log_line);
        let answer = http::json(200, &accepted, NO_STORE)?;
        written.mark(&answer)?;
        Ok(answer)
    }

    /// Stores a refusal counted in `state` and makes meta.json show it:
    /// the meta record is mirrored by the alarm at most
    /// [`MIRROR_REFUSALS_WITHIN_MS`] later, so a bot that is refused in a
    /// loop costs one KV put a minute, not one per refusal. A meta put
    /// already pending has its alarm armed; it is only replaced.
    async fn count_refusal(
        &self,
        storage: &Storage,
        state: &AgentState,
        call: &WriteCall,
        cfg: &Config,
        mirror: Option<String>,
    ) -> Result<(), Failure> {
        let mut mirror: Mirror = parse(MIRROR_KEY, mirror)?.unwrap_or_default();
        let armed = mirror.meta_pending();
        MetaRecord::mirror(&mut mirror, &call.agent, state, call.now_ms);
        let within = if cfg.test_clock {
            crate::worker::clock::TEST_CLOCK_ALARM_MS
        } else {
            MIRROR_REFUSALS_WITHIN_MS
        };
        let alarm = if armed {
            Alarm::Keep
        } else {
            Alarm::By(Duration::from_millis(within))
        };
        let puts = [
            (STATE_KEY.to_owned(), serde_json::to_string(state)?),
            (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?),
        ];
        let batch = Batch {
            puts: &puts,
            deletes: &[],
            alarm,
        };
        commit_atomic(storage, &batch).await?;
        Ok(())
    }

    /// Every check of a write, in the contract's order: the core's checks,
    /// then (for a configured service only) the new-agent slot of the
    /// client's address, which lives in another object.
    async fn decide(
        &self,
        state: &AgentState,
        call: &WriteCall,
        cfg: &Config,
        keys: &ServiceKeys,
        key_state: Option<&KeyState>,
    ) -> Result<Candidate, Failure> {
        let terms = Terms {
            signature: Signature::Prechecked,
            keys: key_state,
            with_key_event: None,
        };
        let candidate = write::check(
            state,
            &call.body,
            &call.agent,
            call.now_ms,
            &cfg.tiers,
            &terms,
        )?;
        // Sealing needs the service key; without it, refuse rather than
        // seal with a made-up one (checked before a new agent's IP slot is
        // taken, so nothing is spent).
        if keys.signing.is_none() {
            log::event(
                "config_error",
                &[
                    ("missing", SERVICE_KEY_SECRET),
                    ("agent_id", call.agent.as_str()),
                    ("effect", "write refused"),
                ],
            );
            return Err(Failure::Unavailable(Some(
                "the service signing key is not configured; writes are refused until it is",
            )));
        }
        if candidate.is_new_agent() {
            self.new_agent_slot(state, &candidate, call, cfg).await?;
        }
        Ok(candidate)
    }

    /// A slot of the client address's new-agent quota for the write that
    /// creates this agent (a PUT's, or the envelope of its first key event),
    /// or the refusal that it is full.
    pub(super) async fn new_agent_slot(
        &self,
        state: &AgentState,
        candidate: &Candidate,
        call: &WriteCall,
        cfg: &Config,
    ) -> Result<(), Failure> {
        let ask = Reserve {
            agent_id: call.agent.as_str().to_owned(),
            now_ms: call.now_ms,
            limit: cfg
                .tiers
                .get(state.tier_at(call.now_ms))
                .new_agents_per_ip_24h,
        };
        match ask.send(&self.env, &call.ip_bucket).await? {
            Slot::FullUntil(reset_at_ms) => Err(Failure::Rejected(Rejection::new_agent_ip_quota(
                candidate,
                call.now_ms,
                reset_at_ms,
            ))),
            _ => Ok(()),
        }
    }

    /// Seals the accepted write into the chain and stores state, history
    /// index, the new entry, the pending KV mirror ops, the pruned entries'
    /// deletion and the mirror's retry alarm in one atomic operation.
    /// Returns the 200 body, the published record and the mirror ops to run
    /// now.
    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        storage: &Storage,
        state: &mut AgentState,
        candidate: Candidate,
        call: &WriteCall,
        cfg: &Config,
        keys: &ServiceKeys,
        stored: Stored,
        key_state: Option<&KeyState>,
    ) -> worker::Result<(write::AcceptedBody, Record, Mirror)> {
        let signer = keys.signing.as_ref().ok_or("checked in decide")?;
        let mut history: Option<HistoryIndex> = parse(HISTORY_KEY, stored.history)?;
        // Versions appended before the index recorded who may see them get
        // it recorded now, from their own entries (once per agent).
        if let Some(index) = history.as_mut() {
            let unrecorded = index.unrecorded();
            if !unrecorded.is_empty() {
                let keys: Vec<String> = unrecorded.iter().map(|s| entry_key(*s)).collect();
                let found = texts_of(storage, &keys).await?;
                let texts: Vec<(u64, String)> = unrecorded
                    .iter()
                    .zip(found)
                    .filter_map(|(s, t)| Some((*s, t?)))
                    .collect();
                index.record_unrecorded(&texts);
            }
        }
        let sealed = state
            .commit_sealed(
                candidate,
                call.now_ms,
                &cfg.tiers,
                signer,
                &keys.keyring,
                history,
                key_state,
            )
            .map_err(|e| e.to_string())?;
        let sequence = sealed.history.head.length - 1;
        let entry = sealed.entry.stored_text();
        let index = serde_json::to_string(&sealed.history)?;
        let record = serde_json::to_string(&sealed.record)?;
        let mut mirror: Mirror = parse(MIRROR_KEY, stored.mirror)?.unwrap_or_default();
        mirror.push_commit(&Commit {
            agent: &call.agent,
            sequence,
            entry: &entry,
            index: &index,
            record: &record,
            pruned: &sealed.pruned,
        });
        MetaRecord::mirror(&mut mirror, &call.agent, state, call.now_ms);
        let pruned: Vec<String> = sealed.pruned.iter().map(|p| entry_key(*p)).collect();
        let puts = [
            (STATE_KEY.to_owned(), serde_json::to_string(&state)?),
            (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?),
            (HISTORY_KEY.to_owned(), index),
            (entry_key(sequence), entry),
        ];
        commit_atomic(
            storage,
            &Batch {
                puts: &puts,
                deletes: &pruned,
                alarm: Alarm::In(Duration::from_millis(RETRY_BASE_MS)),
            },
        )
        .await?;
        Ok((sealed.body, sealed.record, mirror))
    }
}
