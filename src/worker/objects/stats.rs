//! Sixteen stats shards (one per first hex digit of the agent id): the
//! deployment's totals, folded from the agents' objects' batches
//! (`core::operator::stats`). An agent's object sends at most one batch a
//! minute, off the request path, so no shard is on any write's path; a
//! batch is applied once (the last applied batch number is kept per agent,
//! one row each), so a resend after a lost answer counts nothing twice.

use crate::core::operator::stats::Shard;
use crate::worker::clock;
use crate::worker::do_wire::{self, StatsCall};
use crate::worker::storage::{commit_atomic, texts, Alarm, Batch};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{durable_object, DurableObject, Env, Request, Response, State};

const SHARD_KEY: &str = "shard";

/// The key of an agent's last applied batch.
fn batch_key(agent_id: &str) -> String {
    format!("batch:{agent_id}")
}

#[durable_object(fetch)]
pub struct StatsDO {
    state: State,
}

impl DurableObject for StatsDO {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    /// Storage awaits only: the input gate makes each batch's apply atomic.
    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let storage = self.state.storage();
        match StatsCall::read(req).await? {
            Some(StatsCall::Report { agent_id, report }) => {
                let key = batch_key(&agent_id);
                let [shard, last] = texts(&storage, [SHARD_KEY, key.as_str()]).await?;
                let last: Option<u64> = last.and_then(|t| t.parse().ok());
                if last.is_some_and(|l| l >= report.batch) {
                    return StatsCall::acknowledged(report.batch);
                }
                let mut shard: Shard = match shard {
                    Some(t) => serde_json::from_str(&t)?,
                    None => Shard::default(),
                };
                shard.apply(&agent_id, &report, clock::system_now_ms());
                let puts = [
                    (SHARD_KEY.to_owned(), serde_json::to_string(&shard)?),
                    (key, report.batch.to_string()),
                ];
                let batch = Batch {
                    puts: &puts,
                    deletes: &[],
                    alarm: Alarm::Keep,
                };
                commit_atomic(&storage, &batch).await?;
                StatsCall::acknowledged(report.batch)
            }
            Some(StatsCall::Totals { .. }) => {
                // Sent as stored: the asker evaluates the totals.
                let [shard] = texts(&storage, [SHARD_KEY]).await?;
                Ok(do_wire::answer_text(shard.as_deref().unwrap_or("{}")))
            }
            None => Ok(do_wire::not_a_call()),
        }
    }
}
