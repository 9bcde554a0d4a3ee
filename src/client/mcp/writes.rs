//! The writing tools, `self_write` (a whole capsule) and `self_checkpoint`
//! (a patch to the newest state), and the one publish step both end in,
//! which keeps `pending.json` in step with its outcome. Both save the new
//! capsule to `capsule.json` before anything is sent, so a refused or
//! undelivered write loses nothing (the local-first rules are listed in
//! the parent module).

use super::ToolHost;
use crate::client::state::Pending;
use crate::client::writes::minimal;
use crate::client::{now_ms, Client, Error, PublishOutcome, PutOptions};
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::mcp::args::CheckpointArgs;
use crate::core::mcp::patch::{self, Applied};
use crate::core::mcp::results::{self, Answer};
use crate::core::time::rfc3339;
use serde_json::{json, Value};

/// How a publish attempt ended (for `self_write` and `self_checkpoint`).
enum Published {
    /// Accepted: the service's body.
    Accepted(Value),
    /// The desired capsule already is the published one: nothing sent.
    Clean { seq: u64, cursor: String },
    /// Refused or not delivered: saved locally; the tool error to return.
    Failed(Answer),
}

impl ToolHost {
    pub(super) fn write(&self, mut capsule: Json) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        patch::fill_defaults(&mut capsule, &agent);
        // Saved before anything is sent: a failure below loses nothing.
        c.state().save_desired(&capsule)?;
        Ok(match publish(&c, false)? {
            Published::Accepted(a) => Answer::ok(json!({
                "accepted": true,
                "agent_id": agent.as_str(),
                "seq": a["seq"],
                "cursor": a["cursor"],
                "prev_cursor": a["prev_cursor"],
                "changed": a["changed"],
                "writes": a["writes"],
            })),
            Published::Clean { seq, cursor } => Answer::ok(json!({
                "accepted": true,
                "agent_id": agent.as_str(),
                "seq": seq,
                "cursor": cursor,
                "changed": false,
                "sent": false,
                "detail": "Identical to your published capsule: nothing sent, no write spent.",
            })),
            Published::Failed(a) => a,
        })
    }

    pub(super) fn checkpoint(&self, args: CheckpointArgs) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        // The newest base: adopts a newer service copy unless local edits
        // are unpublished (those are never overwritten). Offline is fine.
        match c.rehydrate() {
            Ok(_) | Err(Error::NotFound(_) | Error::Unavailable(_)) => {}
            Err(e) => return Err(e),
        }
        let published = c.state().published()?;
        let desired = c.state().desired()?;
        let pending_before = match (&desired, &published) {
            (Some(d), Some(p)) => jcs::cursor(d) != p.cursor,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mut capsule = desired
            .or(published.map(|p| p.capsule))
            .unwrap_or_else(|| minimal(&agent));
        let applied = patch::checkpoint(&mut capsule, &args, &rfc3339(now_ms()));
        patch::fill_defaults(&mut capsule, &agent);
        if applied.changes_applied == 0 && !args.force && !pending_before {
            let mut o = applied_json(&applied);
            o["checkpointed"] = false.into();
            o["detail"] = "Nothing to save: no change, and nothing unpublished. Pass objective_updates, receipts or motto (or force: true).".into();
            return Ok(Answer::ok(o));
        }
        c.state().save_desired(&capsule)?;
        Ok(match publish(&c, args.force)? {
            Published::Accepted(a) => {
                let mut o = applied_json(&applied);
                o["checkpointed"] = true.into();
                o["seq"] = a["seq"].clone();
                o["cursor"] = a["cursor"].clone();
                o["writes"] = a["writes"].clone();
                if pending_before {
                    o["published_pending"] = true.into();
                }
                Answer::ok(o)
            }
            Published::Clean { seq, cursor } => {
                let mut o = applied_json(&applied);
                o["checkpointed"] = true.into();
                o["seq"] = seq.into();
                o["cursor"] = cursor.into();
                o["sent"] = false.into();
                Answer::ok(o)
            }
            Published::Failed(mut a) => {
                a.body["checkpointed"] = false.into();
                a.body["changes_applied"] = applied.changes_applied.into();
                Answer {
                    body: a.body,
                    is_error: true,
                }
            }
        })
    }
}

/// Publishes capsule.json (if it differs from the published copy, or when
/// forced) and keeps `pending.json` in step with the outcome.
fn publish(c: &Client, force: bool) -> Result<Published, Error> {
    let desired = c.state().desired()?;
    let cursor = desired.as_ref().map(jcs::cursor).unwrap_or_default();
    let outcome = c.publish(&PutOptions::default(), force);
    let pending =
        |error: &str, codes: Vec<String>, detail: Option<String>, next: Option<String>| {
            c.state().save_pending(&Pending {
                cursor: cursor.clone(),
                at: rfc3339(now_ms()),
                error: error.into(),
                reason_codes: codes,
                detail,
                next_write_at: next,
            })
        };
    match outcome {
        Ok(PublishOutcome::Published(r)) => {
            c.state().clear_pending()?;
            Ok(Published::Accepted(
                serde_json::to_value(&r.accepted).unwrap_or_default(),
            ))
        }
        Ok(PublishOutcome::Clean { seq, cursor }) => {
            c.state().clear_pending()?;
            Ok(Published::Clean { seq, cursor })
        }
        Err(Error::Rejected(r)) => {
            pending(
                "write_rejected",
                r.reason_codes.clone(),
                r.detail.clone(),
                r.next_write_at.clone(),
            )?;
            let body = serde_json::to_value(&*r).unwrap_or_default();
            Ok(Published::Failed(results::rejected(r.status, &body, true)))
        }
        Err(e @ (Error::Unavailable(_) | Error::Protocol(_))) => {
            pending("service_unavailable", Vec::new(), Some(e.to_string()), None)?;
            let mut a = results::error(
                "service_unavailable",
                e.to_string(),
                "Your capsule is saved locally. Call self_checkpoint (no arguments) later to publish it.",
            );
            a.body["saved_locally"] = true.into();
            Ok(Published::Failed(a))
        }
        Err(e) => Err(e),
    }
}

fn applied_json(a: &Applied) -> Value {
    serde_json::to_value(a).unwrap_or_else(|_| json!({}))
}
