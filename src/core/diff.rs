//! A readable difference between two capsule versions, as the Capsule
//! Explorer shows it: one line per thing that changed, addressed by the ids
//! the capsule gives its items (`objectives[ship].status`), not by array
//! positions, so inserting an objective does not read as every later one
//! changing.
//!
//! Works on any two JSON values; the capsule's conventions only decide how
//! array items are matched ([`identity`]).

use crate::core::json::{self, Json};
use serde::Serialize;

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Present only in the newer version.
    Added,
    /// Present only in the older version.
    Removed,
    /// Present in both, with another value.
    Changed,
    /// The same items in another order (`before`/`after`: their identities).
    Reordered,
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Where: member names joined by `.`, matched array items as `[id]`,
    /// unmatched ones as `[index]`; a list of plain strings is named by the
    /// list itself (the string is the value). Empty for the whole value.
    pub path: String,
    /// What happened there.
    pub kind: Kind,
    /// The older value (absent when added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Json>,
    /// The newer value (absent when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Json>,
}

/// Every difference from `before` to `after`, in document order (the older
/// version's order, then what only the newer one has).
pub fn diff(before: &Json, after: &Json) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", before, after, &mut out);
    out
}

/// How an array item is recognised across versions: a string by its text,
/// an object by the member the capsule keys that kind of item by (`id` for
/// objectives and constraints, `key` for notes, `name` for receipts,
/// `agent_id` for reader grants). Anything else has no identity.
pub fn identity(item: &Json) -> Option<&str> {
    match item {
        Json::String(s) => Some(s),
        Json::Object(_) => ["id", "key", "name", "agent_id"]
            .iter()
            .find_map(|k| item.get(k).and_then(Json::as_str)),
        _ => None,
    }
}

/// The identities of all items, if every item has one and none repeats.
fn identities(items: &[Json]) -> Option<Vec<&str>> {
    let ids: Vec<&str> = items.iter().map(identity).collect::<Option<_>>()?;
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == ids.len()).then_some(ids)
}

fn member(parent: &str, key: &str) -> String {
    let p = json::path::key(parent, key);
    // At the top there is no root sigil: `self_motto`, not `.self_motto`.
    match p.strip_prefix('.') {
        Some(top) if parent.is_empty() => top.to_owned(),
        _ => p,
    }
}

fn change(
    out: &mut Vec<Change>,
    path: &str,
    kind: Kind,
    before: Option<&Json>,
    after: Option<&Json>,
) {
    out.push(Change {
        path: path.to_owned(),
        kind,
        before: before.cloned(),
        after: after.cloned(),
    });
}

fn walk(path: &str, a: &Json, b: &Json, out: &mut Vec<Change>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Json::Object(am), Json::Object(bm)) => {
            for (k, av) in am {
                let p = member(path, k);
                match b.get(k) {
                    Some(bv) => walk(&p, av, bv, out),
                    None => change(out, &p, Kind::Removed, Some(av), None),
                }
            }
            for (k, bv) in bm {
                if a.get(k).is_none() {
                    change(out, &member(path, k), Kind::Added, None, Some(bv));
                }
            }
        }
        (Json::Array(ai), Json::Array(bi)) => match (identities(ai), identities(bi)) {
            (Some(aids), Some(bids)) => keyed(path, ai, &aids, bi, &bids, out),
            _ => positional(path, ai, bi, out),
        },
        _ => change(out, path, Kind::Changed, Some(a), Some(b)),
    }
}

/// Arrays whose items all have distinct identities: matched by identity.
fn keyed(
    path: &str,
    ai: &[Json],
    aids: &[&str],
    bi: &[Json],
    bids: &[&str],
    out: &mut Vec<Change>,
) {
    let item_path = |item: &Json, id: &str| match item {
        // A plain string is its own identity: the list is the place.
        Json::String(_) => path.to_owned(),
        _ => format!("{path}[{id}]"),
    };
    for (item, id) in ai.iter().zip(aids) {
        match bids.iter().position(|x| x == id) {
            Some(j) => walk(&item_path(item, id), item, &bi[j], out),
            None => change(out, &item_path(item, id), Kind::Removed, Some(item), None),
        }
    }
    for (item, id) in bi.iter().zip(bids) {
        if !aids.contains(id) {
            change(out, &item_path(item, id), Kind::Added, None, Some(item));
        }
    }
    let kept_a: Vec<&str> = aids
        .iter()
        .copied()
        .filter(|id| bids.contains(id))
        .collect();
    let kept_b: Vec<&str> = bids
        .iter()
        .copied()
        .filter(|id| aids.contains(id))
        .collect();
    if kept_a != kept_b {
        let list = |ids: Vec<&str>| Json::Array(ids.into_iter().map(Json::from).collect());
        out.push(Change {
            path: path.to_owned(),
            kind: Kind::Reordered,
            before: Some(list(kept_a)),
            after: Some(list(kept_b)),
        });
    }
}

/// Any other arrays: item by item.
fn positional(path: &str, ai: &[Json], bi: &[Json], out: &mut Vec<Change>) {
    for i in 0..ai.len().max(bi.len()) {
        let p = format!("{path}[{i}]");
        match (ai.get(i), bi.get(i)) {
            (Some(x), Some(y)) => walk(&p, x, y, out),
            (Some(x), None) => change(out, &p, Kind::Removed, Some(x), None),
            (None, Some(y)) => change(out, &p, Kind::Added, None, Some(y)),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json::parse_str;

    fn d(a: &str, b: &str) -> Vec<(String, Kind, Option<String>, Option<String>)> {
        let text = |v: Option<Json>| v.map(|v| serde_json::to_string(&v).unwrap());
        diff(&parse_str(a).unwrap(), &parse_str(b).unwrap())
            .into_iter()
            .map(|c| (c.path, c.kind, text(c.before), text(c.after)))
            .collect()
    }

    fn one(
        path: &str,
        kind: Kind,
        before: Option<&str>,
        after: Option<&str>,
    ) -> (String, Kind, Option<String>, Option<String>) {
        (
            path.into(),
            kind,
            before.map(Into::into),
            after.map(Into::into),
        )
    }

    #[test]
    fn equal_values_have_no_changes() {
        assert!(d(r#"{"a":[1,{"id":"x"}]}"#, r#"{"a":[1,{"id":"x"}]}"#).is_empty());
    }

    #[test]
    fn objectives_are_matched_by_id_not_position() {
        let a = r#"{"objectives":[{"id":"ship","status":"open","title":"Ship"},{"id":"docs","status":"open","title":"Docs"}]}"#;
        let b = r#"{"objectives":[{"id":"new","status":"open","title":"New"},{"id":"ship","status":"done","title":"Ship"},{"id":"docs","status":"open","title":"Docs"}]}"#;
        assert_eq!(
            d(a, b),
            vec![
                one(
                    "objectives[ship].status",
                    Kind::Changed,
                    Some(r#""open""#),
                    Some(r#""done""#)
                ),
                one(
                    "objectives[new]",
                    Kind::Added,
                    None,
                    Some(r#"{"id":"new","status":"open","title":"New"}"#)
                ),
            ]
        );
    }

    #[test]
    fn string_lists_are_sets_with_order() {
        let a = r#"{"capabilities":{"tool_allowlist":["a","b","c"]}}"#;
        let b = r#"{"capabilities":{"tool_allowlist":["c","b","d"]}}"#;
        assert_eq!(
            d(a, b),
            vec![
                one(
                    "capabilities.tool_allowlist",
                    Kind::Removed,
                    Some(r#""a""#),
                    None
                ),
                one(
                    "capabilities.tool_allowlist",
                    Kind::Added,
                    None,
                    Some(r#""d""#)
                ),
                one(
                    "capabilities.tool_allowlist",
                    Kind::Reordered,
                    Some(r#"["b","c"]"#),
                    Some(r#"["c","b"]"#)
                ),
            ]
        );
    }

    #[test]
    fn notes_receipts_and_grants_use_their_keys() {
        let a = r#"{"pointers":{"notes":[{"key":"k1","value":"v1"}],"receipts":[{"name":"r","content_hash":"x"}]},
                    "access_control":{"public":false,"authorized_readers":["aa",{"agent_id":"bb","scopes":["READ_HEAD"]}]}}"#;
        let b = r#"{"pointers":{"notes":[{"key":"k1","value":"v2"}],"receipts":[{"name":"r","content_hash":"y"}]},
                    "access_control":{"public":false,"authorized_readers":[{"agent_id":"bb","scopes":["READ_HEAD","READ_CAPSULE"]}]}}"#;
        assert_eq!(
            d(a, b),
            vec![
                one(
                    "pointers.notes[k1].value",
                    Kind::Changed,
                    Some(r#""v1""#),
                    Some(r#""v2""#)
                ),
                one(
                    "pointers.receipts[r].content_hash",
                    Kind::Changed,
                    Some(r#""x""#),
                    Some(r#""y""#)
                ),
                one(
                    "access_control.authorized_readers",
                    Kind::Removed,
                    Some(r#""aa""#),
                    None
                ),
                one(
                    "access_control.authorized_readers[bb].scopes",
                    Kind::Added,
                    None,
                    Some(r#""READ_CAPSULE""#)
                ),
            ]
        );
    }

    #[test]
    fn members_added_removed_and_retyped() {
        assert_eq!(
            d(
                r#"{"self_motto":"hi","watch":{"tags":["a"]}}"#,
                r#"{"watch":true,"objectives":[]}"#
            ),
            vec![
                one("self_motto", Kind::Removed, Some(r#""hi""#), None),
                one(
                    "watch",
                    Kind::Changed,
                    Some(r#"{"tags":["a"]}"#),
                    Some("true")
                ),
                one("objectives", Kind::Added, None, Some("[]")),
            ]
        );
    }

    #[test]
    fn items_without_distinct_identities_go_by_position() {
        // Constraint values may repeat; numbers have no identity.
        assert_eq!(
            d(r#"{"v":["a","a"],"n":[1,2]}"#, r#"{"v":["a"],"n":[1,3,4]}"#),
            vec![
                one("v[1]", Kind::Removed, Some(r#""a""#), None),
                one("n[1]", Kind::Changed, Some("2"), Some("3")),
                one("n[2]", Kind::Added, None, Some("4")),
            ]
        );
    }

    #[test]
    fn odd_member_names_are_quoted() {
        assert_eq!(
            d(r#"{"a b":1}"#, r#"{"a b":2}"#),
            vec![one(r#"["a b"]"#, Kind::Changed, Some("1"), Some("2"))]
        );
        assert_eq!(
            d(r#"{"x":{"a b":1}}"#, r#"{"x":{"a b":2}}"#),
            vec![one(r#"x["a b"]"#, Kind::Changed, Some("1"), Some("2"))]
        );
    }

    #[test]
    fn whole_values_of_another_type() {
        assert_eq!(
            d("1", r#""1""#),
            vec![one("", Kind::Changed, Some("1"), Some(r#""1""#))]
        );
    }
}
