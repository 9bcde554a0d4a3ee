//! The KV mirror: what a commit wrote, landed in KV stage by stage
//! (`core::mirror`), retried by the alarm until it matches; and the one
//! sequence every commit ends with, mirror then publish.

use super::{AgentDO, MIRROR_KEY};
use crate::core::mirror::{Mirror, MirrorOp, Pass, CLEANUP_AFTER_MS};
use crate::core::record::Record;
use crate::worker::kv::Kv;
use crate::worker::log;
use crate::worker::storage::{commit_unconfirmed, load, Alarm, Batch};
use futures_util::future::join_all;
use std::time::Duration;

/// Makes KV hold one op; `false` if KV refused. On a retry, a put whose text
/// KV already holds is not repeated.
async fn land(kv: &Kv, op: &MirrorOp, pass: Pass) -> bool {
    match &op.value {
        Some(value) => {
            let already = pass == Pass::Retry
                && matches!(kv.text(&op.key).await, Ok(Some(ref v)) if v == value);
            already
                || match &op.metadata {
                    Some(meta) => kv.put_with_metadata(&op.key, value, meta).await,
                    None => kv.put(&op.key, value).await,
                }
        }
        None => kv.delete(&op.key).await,
    }
}

impl AgentDO {
    /// Makes KV hold what was committed, stage by stage (`core::mirror`),
    /// stopping after the first stage with a failure. `mirror`: the ops just
    /// committed (a [`Pass::Commit`], which skips comparison reads and
    /// leaves this write's deletes for the next one), or `None` for the
    /// alarm's [`Pass::Retry`] of everything pending. On failure, keeps what
    /// did not land and re-arms the alarm with backoff. Returns the text of
    /// the record that landed, if one did (what watchers are sent).
    async fn sync_mirror(
        &self,
        mirror: Option<Mirror>,
        keep_at: Option<u64>,
    ) -> worker::Result<Option<String>> {
        let storage = self.state.storage();
        let (mirror, pass) = match mirror {
            Some(m) => (Some(m), Pass::Commit),
            None => (load::<Mirror>(&storage, MIRROR_KEY).await?, Pass::Retry),
        };
        let Some(mut mirror) = mirror else {
            return Ok(None);
        };
        let kv = Kv::of(&self.env)?;
        let mut landed = vec![false; mirror.ops.len()];
        let mut failed = None;
        for stage in mirror.stages(pass) {
            let ops = stage.iter().map(|&i| land(&kv, &mirror.ops[i], pass));
            let results = join_all(ops).await;
            for (&i, ok) in stage.iter().zip(results) {
                landed[i] = ok;
                if !ok && failed.is_none() {
                    failed = Some(i);
                }
            }
            if failed.is_some() {
                break;
            }
        }
        let failed_key = failed.map(|i| mirror.ops[i].key.clone());
        let record = mirror
            .ops
            .iter()
            .zip(&landed)
            .find_map(|(op, landed)| op.record_put().filter(|_| *landed))
            .map(str::to_owned);
        mirror.drop_landed(&landed);
        let (puts, alarm) = match failed_key {
            None => {
                // Every index put landed: what is left are deletes of
                // entries no index names, for the next write (or, after a
                // day without one, the alarm).
                mirror.heads_landed();
                if mirror.ops.is_empty() {
                    (vec![], Alarm::Delete)
                } else {
                    let keep = (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?);
                    let cleanup = Duration::from_millis(CLEANUP_AFTER_MS);
                    (vec![keep], Alarm::In(cleanup))
                }
            }
            Some(key) => {
                let delay = mirror.failed();
                log::event(
                    "kv_mirror_failed",
                    &[
                        ("key", key.as_str()),
                        ("failures", &mirror.failures.to_string()),
                    ],
                );
                let keep = (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?);
                (vec![keep], Alarm::In(Duration::from_millis(delay)))
            }
        };
        let alarm = keep_alarm(alarm, keep_at);
        let clear = [MIRROR_KEY.to_owned()];
        let batch = Batch {
            deletes: if puts.is_empty() { &clear } else { &[] },
            puts: &puts,
            alarm,
        };
        // Unconfirmed: the answer and the watchers' messages need not wait
        // for this one to reach disk. Lost, the mirror stored with the
        // commit (or the one this keeps) is still there with its alarm
        // armed, which lands the same texts again.
        commit_unconfirmed(&storage, &batch).await?;
        Ok(record)
    }

    /// Lands `mirror` in KV (`None`: the alarm's retry of what is pending),
    /// then sends the record that landed to the watchers: what every commit
    /// (a write, a credited claim) and the alarm end with.
    /// `keep_at`: when something else needs the object's one alarm (an x402
    /// settlement, `AgentState::x402_due`), so the mirror never disarms or
    /// postpones past it.
    pub(super) async fn mirror_then_publish(
        &self,
        mirror: Option<Mirror>,
        now_ms: u64,
        keep_at: Option<u64>,
    ) -> worker::Result<()> {
        if let Some(text) = self.sync_mirror(mirror, keep_at).await? {
            let record: Record = serde_json::from_str(&text)?;
            self.publish(&record, now_ms);
            self.tell_feed(record, now_ms).await;
        }
        Ok(())
    }

    /// [`AgentDO::mirror_then_publish`] of a write's commit: `record` is
    /// the record it published (the text of the record put in `mirror`),
    /// sent to the watchers as it is once that put has landed, rather than
    /// parsed back from the text.
    pub(super) async fn mirror_commit_then_publish(
        &self,
        mirror: Mirror,
        record: Record,
        now_ms: u64,
        keep_at: Option<u64>,
    ) -> worker::Result<()> {
        if self.sync_mirror(Some(mirror), keep_at).await?.is_some() {
            self.publish(&record, now_ms);
            self.tell_feed(record, now_ms).await;
        }
        Ok(())
    }
}

/// The mirror's alarm, moved no later than `keep_at` (Unix ms) when another
/// concern needs the alarm then.
fn keep_alarm(alarm: Alarm, keep_at: Option<u64>) -> Alarm {
    let Some(at) = keep_at else {
        return alarm;
    };
    let until = Duration::from_millis(
        at.saturating_sub(crate::worker::clock::system_now_ms())
            .max(1),
    );
    match alarm {
        Alarm::Delete | Alarm::Keep => Alarm::In(until),
        Alarm::In(d) => Alarm::In(d.min(until)),
        Alarm::By(d) => Alarm::By(d.min(until)),
    }
}
