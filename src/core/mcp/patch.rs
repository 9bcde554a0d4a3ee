//! What `self_write` and `self_checkpoint` do to a capsule before it is
//! signed: fill in the two fields an agent may leave out, and apply a
//! checkpoint's patches. Pure; the caller checks the result with the same
//! pre-check as every write, so a patch can never smuggle in what a whole
//! write could not.

use super::args::CheckpointArgs;
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::model::SCHEMA_VERSION;
use crate::core::validate::bounds::{NOTES_MAX, RECEIPTS_MAX};
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
    /// How many of the oldest notes made room for new ones.
    #[serde(skip_serializing_if = "is_zero")]
    pub notes_dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Applies a checkpoint's patches to `capsule` (an object) in place; `now`
/// (RFC 3339) is the `updated_at` of everything it changes, as the public
/// server stamps it.
pub fn checkpoint(capsule: &mut Json, args: &CheckpointArgs, now: &str) -> Applied {
    let mut applied = Applied::default();
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
        let mut changed = 0;
        if let Some(s) = u.status {
            changed += usize::from(set(obj, "status", Json::from(s.as_str())));
        }
        if let Some(c) = &u.checkpoint {
            changed += usize::from(set(obj, "checkpoint", Json::from(c.as_str())));
        }
        if changed > 0 {
            set(obj, "updated_at", Json::from(now));
        }
        applied.changes_applied += changed;
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
                if let Some(why) = &r.rationale {
                    item.push(("rationale".to_string(), Json::from(why.as_str())));
                }
                if let Some(tags) = &r.tags {
                    item.push(("tags".to_string(), strings(tags)));
                }
                // The same receipt again (ignoring when) is not news.
                let same = |other: &Json| match (other, &Json::Object(item.clone())) {
                    (Json::Object(a), Json::Object(b)) => {
                        a.iter().filter(|(k, _)| k != "updated_at").eq(b.iter())
                    }
                    _ => false,
                };
                if list.iter().any(same) {
                    continue;
                }
                item.push(("updated_at".to_string(), Json::from(now)));
                list.push(Json::Object(item));
                applied.changes_applied += 1;
            }
            // The schema keeps at most RECEIPTS_MAX: the newest stay.
            if list.len() > RECEIPTS_MAX {
                applied.receipts_dropped = list.len() - RECEIPTS_MAX;
                list.drain(..applied.receipts_dropped);
            }
        }
    }
    if !args.notes.is_empty() {
        upsert_notes(capsule, args, now, &mut applied);
    }
    if let Some(m) = &args.motto {
        applied.changes_applied += usize::from(set(capsule, "self_motto", Json::from(m.as_str())));
    }
    applied
}

/// `pointers.notes`: each note replaced by key (or added), newest last; the
/// oldest go when there are more than the schema keeps.
fn upsert_notes(capsule: &mut Json, args: &CheckpointArgs, now: &str, applied: &mut Applied) {
    if field_mut(capsule, "pointers").is_none() {
        set(capsule, "pointers", Json::Object(Vec::new()));
    }
    let pointers = field_mut(capsule, "pointers").expect("just set");
    if field_mut(pointers, "notes").is_none() {
        set(pointers, "notes", Json::Array(Vec::new()));
    }
    let Some(list) = field_mut(pointers, "notes").and_then(array_mut) else {
        return;
    };
    for n in &args.notes {
        let existing = list
            .iter()
            .position(|o| o.get("key").and_then(Json::as_str) == Some(n.key.as_str()));
        let tags = match (&n.tags, existing.and_then(|i| list[i].get("tags").cloned())) {
            (Some(t), _) => Some(strings(t)),
            (None, old) => old,
        };
        let unchanged = existing.is_some_and(|i| {
            list[i].get("value").and_then(Json::as_str) == Some(n.value.as_str())
                && list[i].get("tags") == tags.as_ref()
        });
        if unchanged {
            continue;
        }
        let mut note = vec![
            ("key".to_string(), Json::from(n.key.as_str())),
            ("value".to_string(), Json::from(n.value.as_str())),
        ];
        if let Some(t) = tags {
            note.push(("tags".to_string(), t));
        }
        note.push(("updated_at".to_string(), Json::from(now)));
        if let Some(i) = existing {
            list.remove(i);
        }
        list.push(Json::Object(note));
        applied.changes_applied += 1;
    }
    if list.len() > NOTES_MAX {
        applied.notes_dropped = list.len() - NOTES_MAX;
        list.drain(..applied.notes_dropped);
    }
}

fn strings(items: &[String]) -> Json {
    Json::Array(items.iter().map(|t| Json::from(t.as_str())).collect())
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
    use crate::core::testing;

    const NOW: &str = "2026-02-10T12:00:00Z";

    /// A capsule with one open objective, `o1`, to patch.
    fn capsule() -> Json {
        testing::with(
            testing::minimal("x"),
            "objectives",
            testing::json(r#"[{"id":"o1","status":"open","title":"T"}]"#),
        )
    }

    fn receipt(n: usize) -> NewReceipt {
        NewReceipt {
            name: format!("r{n}"),
            content_hash: format!("sha256:{n:064x}"),
            evidence_url: None,
            rationale: None,
            tags: None,
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
        let a = checkpoint(&mut c, &args, NOW);
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
        assert_eq!(checkpoint(&mut c, &args, NOW).changes_applied, 3);
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
        assert_eq!(checkpoint(&mut c, &first, NOW).changes_applied, 4);
        let again = CheckpointArgs {
            receipts: vec![receipt(3), receipt(4), receipt(5)],
            ..Default::default()
        };
        let a = checkpoint(&mut c, &again, NOW);
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

    #[test]
    fn receipts_keep_their_rationale_and_tags_and_changes_are_stamped() {
        let mut c = capsule();
        let args = CheckpointArgs {
            objective_updates: vec![ObjectiveUpdate {
                id: "o1".into(),
                status: Some(ObjectiveStatus::Done),
                checkpoint: None,
            }],
            receipts: vec![NewReceipt {
                rationale: Some("why".into()),
                tags: Some(vec!["t".into()]),
                ..receipt(1)
            }],
            ..CheckpointArgs::default()
        };
        assert_eq!(checkpoint(&mut c, &args, NOW).changes_applied, 2);
        let r = &c
            .get("pointers")
            .unwrap()
            .get("receipts")
            .unwrap()
            .as_array()
            .unwrap()[0];
        assert_eq!(r.get("rationale").and_then(Json::as_str), Some("why"));
        assert_eq!(r.get("updated_at").and_then(Json::as_str), Some(NOW));
        let o = &c.get("objectives").unwrap().as_array().unwrap()[0];
        assert_eq!(o.get("updated_at").and_then(Json::as_str), Some(NOW));
        // The same receipt later is not a change (its time aside).
        assert_eq!(
            checkpoint(
                &mut c,
                &CheckpointArgs {
                    receipts: args.receipts.clone(),
                    ..Default::default()
                },
                "2026-02-11T00:00:00Z"
            )
            .changes_applied,
            0
        );
    }

    #[test]
    fn notes_are_upserted_by_key_and_the_oldest_make_room() {
        use crate::core::mcp::args::NoteUpsert;
        let note = |k: &str, v: &str| NoteUpsert {
            key: k.into(),
            value: v.into(),
            tags: None,
        };
        let mut c = capsule();
        let a = CheckpointArgs {
            notes: vec![note("branch", "main"), note("ci", "red")],
            ..Default::default()
        };
        assert_eq!(checkpoint(&mut c, &a, NOW).changes_applied, 2);
        let b = CheckpointArgs {
            notes: vec![note("ci", "green"), note("branch", "main")],
            ..Default::default()
        };
        assert_eq!(
            checkpoint(&mut c, &b, NOW).changes_applied,
            1,
            "an unchanged note is not a change"
        );
        let notes = c
            .get("pointers")
            .unwrap()
            .get("notes")
            .unwrap()
            .as_array()
            .unwrap()
            .to_vec();
        let kv: Vec<(&str, &str)> = notes
            .iter()
            .map(|n| {
                (
                    n.get("key").and_then(Json::as_str).unwrap(),
                    n.get("value").and_then(Json::as_str).unwrap(),
                )
            })
            .collect();
        assert_eq!(kv, [("branch", "main"), ("ci", "green")]);
        let many = CheckpointArgs {
            notes: (0..25).map(|i| note(&format!("k{i}"), "v")).collect(),
            ..Default::default()
        };
        let applied = checkpoint(&mut c, &many, NOW);
        assert_eq!(applied.notes_dropped, 7);
        assert_eq!(
            c.get("pointers")
                .unwrap()
                .get("notes")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            NOTES_MAX
        );
    }
}
