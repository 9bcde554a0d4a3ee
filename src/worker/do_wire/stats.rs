//! The calls of the stats shards (`objects::stats`): an agent object's
//! batch of counts, and the operator API's ask for each shard's totals.

use super::{ask, read_posted};
use crate::core::operator::stats::{shard_of, Report, Shard, Totals, SHARDS};
use crate::worker::config::STATS_DO_BINDING;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use worker::{Env, Request};

const REPORT_URL: &str = "https://stats.do/report";
const TOTALS_URL: &str = "https://stats.do/totals";

/// The object name of shard `n`.
fn shard_name(n: u8) -> String {
    format!("shard-{n:x}")
}

/// What a stats shard is asked.
#[derive(Serialize, Deserialize)]
pub enum StatsCall {
    /// Fold in one agent's batch (once: a batch it has seen is acknowledged
    /// and not applied again).
    Report {
        /// The agent.
        agent_id: String,
        /// Its batch.
        report: Report,
    },
    /// What this shard holds (its totals are evaluated by the asker at
    /// `now_ms`).
    Totals {
        /// The operator's "now".
        now_ms: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct Acknowledged {
    batch: u64,
}

impl StatsCall {
    /// Agent-object side: sends `report` to the agent's shard; the batch
    /// number the shard acknowledged.
    pub async fn report(env: &Env, agent_id: &str, report: Report) -> worker::Result<u64> {
        let call = StatsCall::Report {
            agent_id: agent_id.to_owned(),
            report,
        };
        let name = shard_name(shard_of(agent_id));
        let a: Acknowledged = ask(env, STATS_DO_BINDING, &name, REPORT_URL, &call).await?;
        Ok(a.batch)
    }

    /// Operator side: every shard's totals at `now_ms`, added; a shard that
    /// does not answer is left out (`shards.answered` says how many did).
    pub async fn totals(env: &Env, now_ms: u64) -> Totals {
        let asks = (0..SHARDS).map(|n| async move {
            let call = StatsCall::Totals { now_ms };
            ask::<Shard>(env, STATS_DO_BINDING, &shard_name(n), TOTALS_URL, &call).await
        });
        let mut all = Totals::default();
        // Each shard answers what it holds; the totals are evaluated here,
        // as of the operator's "now" (the write Worker, which holds the
        // shards' class, carries no totals code).
        for shard in join_all(asks).await.into_iter().flatten() {
            all.add(&shard.totals(now_ms));
        }
        all
    }

    /// Shard side: reads a call.
    pub async fn read(req: Request) -> worker::Result<Option<StatsCall>> {
        // Compared as text (`read_posted`): no URL parser in the Worker.
        let url = if req.inner().url() == REPORT_URL {
            REPORT_URL
        } else {
            TOTALS_URL
        };
        read_posted(req, url).await
    }

    /// Shard side: the acknowledgement of `batch`.
    pub fn acknowledged(batch: u64) -> worker::Result<worker::Response> {
        super::answer(&Acknowledged { batch })
    }
}
