//! What `self_write` and `self_checkpoint` do to a capsule before it is
//! signed: fill in the two fields an agent may leave out, and apply a
//! checkpoint's patches. Pure; the caller checks the result with the same
//! pre-check as every write, so a patch can never smuggle in what a whole
//! write could not.

use super::args::CheckpointArgs;
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::model::SCHEMA_VERSION;
use crate::core::validate::bounds::RECEIPTS_MAX;
use serde::Serialize;

/// Sets `agent_id` to the signer's and `schema_version` when missing (the
/// public server does the same). A different `agent_id` is overwritten:
/// the capsule is always the signer's own.
pub fn fill_defaults(capsule: &mut Json, agent: &AgentId) {
    set(capsule, "agent_id", Json::from(agent.as_str()));
    if capsule.get("schema_version").is_none() {
        set(capsule, "schema_version", Json::from(SCHEMA_VERSION));
    }
}

/// What a checkpoint changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Applied {
    /// Fields whose value actually changed (a status set to what it already
    /// was is not a change).
    pub changes_applied: usize,
    /// `objective_updates` ids the capsule has no objective for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_objectives: Vec<String>,
    /// How many of the oldest receipts made room for new ones.
    #[serde(skip_serializing_if = "is_zero")]
    pub receipts_dropped: usize,
    /// Arguments accepted but not stored (the capsule has no field for them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Applies a checkpoint's patches to `capsule` (an object) in place.
pub fn checkpoint(capsule: &mut Json, args: &CheckpointArgs) -> Applied {
    let mut applied = Applied {
        ignored: args.ignored.clone(),
        ..Applied::default()
    };
    for u in &args.objective_updates {
        let Some(obj) = field_mut(capsule, "objectives")
            .and_then(array_mut)
            .and_then(|list| {
                list.iter_mut()
                    .find(|o| o.get("id").and_then(Json::as_str) == Some(&u.id))
            })
        else {
            applied.unknown_objectives.push(u.id.clone());
            continue;
        };
        if let Some(s) = u.status {
            applied.changes_applied += usize::from(set(obj, "status", Json::from(s.as_str())));
        }
        if let Some(c) = &u.checkpoint {
            applied.changes_applied += usize::from(set(obj, "checkpoint", Json::from(c.as_str())));
        }
    }
    if !args.receipts.is_empty() {
        if field_mut(capsule, "pointers").is_none() {
            set(capsule, "pointers", Json::Object(Vec::new()));
        }
        let pointers = field_mut(capsule, "pointers").expect("just set");
        if field_mut(pointers, "receipts").is_none() {
            set(pointers, "receipts", Json::Array(Vec::new()));
        }
        if let Some(list) = field_mut(pointers, "receipts").and_then(array_mut) {
            for r in &args.receipts {
                let mut item = vec![
                    ("name".to_string(), Json::from(r.name.as_str())),
                    (
                        "content_hash".to_string(),
                        Json::from(r.content_hash.as_str()),
                    ),
                ];
                if let Some(u) = &r.evidence_url {
                    item.push(("evidence_url".to_string(), Json::from(u.as_str())));
                }
                let item = Json::Object(item);
                if list.contains(&item) {
                    continue;
                }
                list.push(item);
                applied.changes_applied += 1;
            }
            // The schema keeps at most RECEIPTS_MAX: the newest stay.
            if list.len() > RECEIPTS_MAX {
                applied.receipts_dropped = list.len() - RECEIPTS_MAX;
                list.drain(..applied.receipts_dropped);
            }
        }
    }
    if let Some(m) = &args.motto {
        applied.changes_applied += usize::from(set(capsule, "self_motto", Json::from(m.as_str())));
    }
    applied
}

fn field_mut<'a>(obj: &'a mut Json, key: &str) -> Option<&'a mut Json> {
    match obj {
        Json::Object(members) => members.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}

fn array_mut(v: &mut Json) -> Option<&mut Vec<Json>> {
    match v {
        Json::Array(a) => Some(a),
        _ => None,
    }
}

/// Sets `key` on an object (appending when absent); true when the value changed.
fn set(obj: &mut Json, key: &str, value: Json) -> bool {
    let Json::Object(members) = obj else {
        return false;
    };
    match members.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) if *v == value => false,
        Some((_, v)) => {
            *v = value;
            true
        }
        None => {
            members.push((key.to_string(), value));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json;
    use crate::core::mcp::args::{NewReceipt, ObjectiveUpdate};
    use crate::core::model::ObjectiveStatus;

    fn capsule() -> Json {
        json::parse_str(
            r#"{"schema_version":"self_capsule_v0","agent_id":"x","policy":{},
                "objectives":[{"id":"o1","status":"open","title":"T"}]}"#,
        )
        .unwrap()
    }

    fn receipt(n: usize) -> NewReceipt {
        NewReceipt {
            name: format!("r{n}"),
            content_hash: format!("sha256:{n:064x}"),
            evidence_url: None,
        }
    }

    #[test]
    fn defaults_fill_agent_and_version_and_overwrite_a_foreign_agent() {
        let agent = AgentId::parse(&"a".repeat(64)).unwrap();
        let mut c = json::parse_str(r#"{"agent_id":"someone-else","policy":{}}"#).unwrap();
        fill_defaults(&mut c, &agent);
        assert_eq!(
            c.get("agent_id").and_then(Json::as_str),
            Some(agent.as_str())
        );
        assert_eq!(
            c.get("schema_version").and_then(Json::as_str),
            Some(SCHEMA_VERSION)
        );
    }

    #[test]
    fn only_real_changes_count_and_unknown_ids_are_reported() {
        let mut c = capsule();
        let args = CheckpointArgs {
            objective_updates: vec![
                ObjectiveUpdate {
                    id: "o1".into(),
                    status: Some(ObjectiveStatus::Open),
                    checkpoint: None,
                },
                ObjectiveUpdate {
                    id: "nope".into(),
                    status: Some(ObjectiveStatus::Done),
                    checkpoint: None,
                },
            ],
            ..CheckpointArgs::default()
        };
        let a = checkpoint(&mut c, &args);
        assert_eq!(a.changes_applied, 0);
        assert_eq!(a.unknown_objectives, ["nope"]);
        assert_eq!(c, capsule());
    }

    #[test]
    fn status_checkpoint_and_motto_are_set() {
        let mut c = capsule();
        let args = CheckpointArgs {
            objective_updates: vec![ObjectiveUpdate {
                id: "o1".into(),
                status: Some(ObjectiveStatus::Done),
                checkpoint: Some("shipped v2".into()),
            }],
            motto: Some("steady".into()),
            ..CheckpointArgs::default()
        };
        assert_eq!(checkpoint(&mut c, &args).changes_applied, 3);
        let o = &c.get("objectives").unwrap().as_array().unwrap()[0];
        assert_eq!(o.get("status").and_then(Json::as_str), Some("done"));
        assert_eq!(
            o.get("checkpoint").and_then(Json::as_str),
            Some("shipped v2")
        );
        assert_eq!(c.get("self_motto").and_then(Json::as_str), Some("steady"));
    }

    #[test]
    fn receipts_keep_the_newest_five_and_skip_exact_repeats() {
        let mut c = capsule();
        let first = CheckpointArgs {
            receipts: (0..4).map(receipt).collect(),
            ..Default::default()
        };
        assert_eq!(checkpoint(&mut c, &first).changes_applied, 4);
        let again = CheckpointArgs {
            receipts: vec![receipt(3), receipt(4), receipt(5)],
            ..Default::default()
        };
        let a = checkpoint(&mut c, &again);
        assert_eq!((a.changes_applied, a.receipts_dropped), (2, 1));
        let names: Vec<&str> = c
            .get("pointers")
            .unwrap()
            .get("receipts")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("name").and_then(Json::as_str).unwrap())
            .collect();
        assert_eq!(names, ["r1", "r2", "r3", "r4", "r5"]);
    }
}
