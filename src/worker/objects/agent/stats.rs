//! Counts for the deployment's totals: sent by the alarm to the agent's
//! stats shard (`objects::stats`), at most once a minute and never on a
//! request's path. The batch is cut and stored before it is sent, and
//! resent as it is until the shard acknowledges it, so nothing counted is
//! lost and nothing is counted twice.

use super::{AgentDO, STATE_KEY};
use crate::core::write::AgentState;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::do_wire::StatsCall;
use crate::worker::log;
use crate::worker::storage::{load, save};

impl AgentDO {
    /// When the object's alarm must fire next for anything but the mirror
    /// (`AgentState::due_at`), with the stats sent within a second under the
    /// test clock.
    pub(super) fn due_at(&self, state: &AgentState) -> Option<u64> {
        let due = state.due_at();
        let pending = state.stats.as_ref().is_some_and(|p| p.due_at_ms.is_some());
        if !pending || !Config::of(&self.env).test_clock {
            return due;
        }
        let soon = clock::system_now_ms() + clock::TEST_CLOCK_ALARM_MS;
        Some(due.map_or(soon, |d| d.min(soon)))
    }

    /// The alarm's part for the stats: sends the batch if one is due.
    /// Returns when it needs the alarm next, if it does.
    pub(super) async fn stats_alarm(&self, now: u64) -> worker::Result<Option<u64>> {
        let storage = self.state.storage();
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        let Some(pending) = state.stats.as_mut() else {
            return Ok(None);
        };
        let test_clock = Config::of(&self.env).test_clock;
        match pending.due_at_ms {
            None => return Ok(None),
            Some(due) if now < due && !test_clock => return Ok(Some(due)),
            Some(_) => {}
        }
        let Some(batch) = pending.batch() else {
            pending.due_at_ms = None;
            save(&storage, STATE_KEY, &state).await?;
            return Ok(None);
        };
        let agent = pending.agent_id.clone();
        // Cut before it is sent: a crash now resends this very batch.
        save(&storage, STATE_KEY, &state).await?;
        let sent = StatsCall::report(&self.env, &agent, batch).await;
        let pending = state
            .stats
            .as_mut()
            .ok_or("stats vanished under the lock")?;
        match sent {
            Ok(batch) => pending.acknowledged(batch, now),
            Err(e) => {
                log::event(
                    "stats_report_failed",
                    &[("agent_id", agent.as_str()), ("error", &e.to_string())],
                );
                pending.failed(now);
            }
        }
        let next = pending.due_at_ms;
        save(&storage, STATE_KEY, &state).await?;
        Ok(next)
    }
}
