//! What a watch receives, checked before anything is printed: every
//! WebSocket frame and every long-poll 200 body is the followed document
//! of the watched agent (its head.json, [`parse_head`], or its projected
//! head, [`parse_feed_head`]). Anything else (not JSON, no valid cursor,
//! another agent's document, the other kind of head) is refused with the
//! reason, so the loop reports it and skips it. [`Dedupe`] decides which
//! heads are new: the cursor differs from the last one delivered (the first
//! is always new), which is also what makes a reconnect safe, since the
//! server's first frame is the current head.

use crate::core::crypto::AgentId;
use crate::core::jcs::{cursor_hex, is_cursor};

/// A head to deliver: the compact JSON line and the fields the loop uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedHead {
    /// The head as one line of compact JSON (no trailing newline).
    pub line: String,
    /// `sha256:<hex>`, as served.
    pub cursor: String,
    /// The head's `seq`, when it has one.
    pub seq: Option<u64>,
    /// The ETag head.json has for it: the cursor's hex, plus `-k<length>`
    /// when the agent has a key log (§14): what the long-poll sends back.
    pub etag: String,
}

/// Parses one frame or body as `agent`'s head.json. `Err`: why it is not one.
pub fn parse_head(text: &str, agent: &AgentId) -> Result<WatchedHead, String> {
    let (value, cursor) = parse_frame(text, agent)?;
    let obj = value.as_object().expect("checked by parse_frame");
    if obj.contains_key("sources_included") {
        return Err("a projected feed's head, not head.json".into());
    }
    Ok(WatchedHead {
        etag: crate::core::record::head_etag(
            cursor_hex(&cursor),
            obj.get("keys")
                .and_then(|k| k.get("length"))
                .and_then(|l| l.as_u64()),
        ),
        seq: obj.get("seq").and_then(|s| s.as_u64()),
        // Re-serialised, so the line is one line whatever the server's layout.
        line: value.to_string(),
        cursor,
    })
}

/// Parses one frame or body as `agent`'s projected head (§15): it has no
/// `seq`, and its ETag is the `watch_cursor`'s hex. `Err`: why it is not one.
pub fn parse_feed_head(text: &str, agent: &AgentId) -> Result<WatchedHead, String> {
    let (value, cursor) = parse_frame(text, agent)?;
    if !value.get("sources_included").is_some_and(|s| s.is_array()) {
        return Err(format!(
            "no sources_included (not a projected head): {}",
            snippet(text)
        ));
    }
    Ok(WatchedHead {
        etag: cursor_hex(&cursor).to_string(),
        seq: None,
        line: value.to_string(),
        cursor,
    })
}

/// What every followed document has: a JSON object with a valid `cursor`
/// and this `agent_id`. The object and the cursor.
fn parse_frame(text: &str, agent: &AgentId) -> Result<(serde_json::Value, String), String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {}", snippet(text)))?;
    let obj = value
        .as_object()
        .ok_or_else(|| format!("not a JSON object: {}", snippet(text)))?;
    let cursor = match obj.get("cursor").and_then(|c| c.as_str()) {
        Some(c) if is_cursor(c) => c.to_string(),
        Some(c) => return Err(format!("not a cursor: {}", snippet(c))),
        None => return Err(format!("no cursor: {}", snippet(text))),
    };
    match obj.get("agent_id").and_then(|a| a.as_str()) {
        Some(a) if a == agent.as_str() => {}
        Some(a) => return Err(format!("a head of another agent ({})", snippet(a))),
        None => return Err(format!("no agent_id: {}", snippet(text))),
    }
    Ok((value, cursor))
}

/// At most 120 characters of `s` on one line, for messages.
fn snippet(s: &str) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = one_line.chars().take(120).collect();
    if short.len() < one_line.len() {
        short.push('…');
    }
    short
}

/// The cursor last delivered: a head is new when its cursor differs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dedupe {
    last: Option<String>,
    etag: Option<String>,
}

impl Dedupe {
    /// The last delivered cursor.
    pub fn last(&self) -> Option<&str> {
        self.last.as_deref()
    }

    /// The ETag of the last head seen (the long-poll's `If-None-Match`): it
    /// follows key events (§14), which change the ETag but not the cursor.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Whether `head` is new; if so it becomes the last one.
    pub fn admit(&mut self, head: &WatchedHead) -> bool {
        self.etag = Some(head.etag.clone());
        if self.last.as_deref() == Some(head.cursor.as_str()) {
            return false;
        }
        self.last = Some(head.cursor.clone());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentId {
        AgentId::parse(&"a".repeat(64)).unwrap()
    }

    fn cursor(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn head(c: char, seq: u64) -> String {
        serde_json::json!({
            "agent_id": "a".repeat(64), "cursor": cursor(c), "seq": seq,
            "writes": {"limit_24h": 5}, "tier": "free"
        })
        .to_string()
    }

    #[test]
    fn a_head_becomes_one_compact_line() {
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_str::<serde_json::Value>(&head('1', 3)).unwrap(),
        )
        .unwrap();
        assert!(pretty.contains('\n'));
        let h = parse_head(&pretty, &agent()).unwrap();
        assert!(!h.line.contains('\n') && !h.line.contains(": "));
        assert_eq!(h.cursor, cursor('1'));
        assert_eq!(h.seq, Some(3));
        // Every field kept, unknown ones included.
        let back: serde_json::Value = serde_json::from_str(&h.line).unwrap();
        assert_eq!(back["writes"]["limit_24h"], 5);
        assert_eq!(back["tier"], "free");
    }

    #[test]
    fn malformed_frames_are_refused_with_the_reason() {
        let a = agent();
        let other = head('1', 1).replace(&"a".repeat(64), &"b".repeat(64));
        for (text, why) in [
            ("pong?", "not JSON"),
            ("", "not JSON"),
            ("[1,2]", "not a JSON object"),
            (r#"{"agent_id":"x"}"#, "no cursor"),
            (r#"{"cursor":null}"#, "no cursor"),
            (r#"{"cursor":"sha256:XYZ"}"#, "not a cursor"),
            (&format!(r#"{{"cursor":"{}"}}"#, cursor('1')), "no agent_id"),
            (&other, "another agent"),
        ] {
            let e = parse_head(text, &a).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        // Long garbage is shortened in the message.
        let e = parse_head(&"x".repeat(5000), &a).unwrap_err();
        assert!(e.chars().count() < 200, "{e}");
    }

    /// A projected head (schemas/feed.schema.json's head) for cursor `c`.
    fn feed_head(c: char) -> String {
        serde_json::json!({
            "agent_id": "a".repeat(64), "cursor": cursor(c), "prev_cursor": null,
            "changed": false, "generated_at": "2026-02-10T00:00:00Z", "ttl_sec": 300,
            "sources_included": ["aws_status"], "all_clear": true,
            "world": {"cursor": null, "generated_at": "2026-02-10T00:00:00Z",
                      "checked_at": "2026-02-10T00:00:00Z", "stale": false}
        })
        .to_string()
    }

    #[test]
    fn a_projected_head_has_no_seq_and_its_etag_is_the_cursor_hex() {
        let a = agent();
        let h = parse_feed_head(&feed_head('1'), &a).unwrap();
        assert_eq!(h.cursor, cursor('1'));
        assert_eq!(h.etag, "1".repeat(64));
        assert_eq!(h.seq, None);
        let back: serde_json::Value = serde_json::from_str(&h.line).unwrap();
        assert_eq!(back["sources_included"][0], "aws_status");
        // Deduplicated by cursor like any head.
        let mut d = Dedupe::default();
        assert!(d.admit(&h));
        assert!(!d.admit(&parse_feed_head(&feed_head('1'), &a).unwrap()));
        assert!(d.admit(&parse_feed_head(&feed_head('2'), &a).unwrap()));
        assert_eq!(d.etag(), Some("2".repeat(64).as_str()));
    }

    #[test]
    fn each_kind_of_head_refuses_the_other() {
        let a = agent();
        let e = parse_feed_head(&head('1', 1), &a).unwrap_err();
        assert!(e.contains("not a projected head"), "{e}");
        let e = parse_head(&feed_head('1'), &a).unwrap_err();
        assert!(e.contains("projected"), "{e}");
        // The checks every followed document shares.
        let other = feed_head('1').replace(&"a".repeat(64), &"b".repeat(64));
        assert!(parse_feed_head(&other, &a)
            .unwrap_err()
            .contains("another agent"));
        let bad = feed_head('1').replace(&cursor('1'), "sha256:XYZ");
        assert!(parse_feed_head(&bad, &a)
            .unwrap_err()
            .contains("not a cursor"));
        assert!(parse_feed_head("pong", &a)
            .unwrap_err()
            .contains("not JSON"));
    }

    #[test]
    fn dedupe_by_cursor_first_always_new() {
        let a = agent();
        let mut d = Dedupe::default();
        assert_eq!(d.last(), None);
        let h1 = parse_head(&head('1', 1), &a).unwrap();
        assert!(d.admit(&h1));
        assert!(!d.admit(&h1), "same cursor again");
        // Same cursor at a higher seq (an identical capsule republished): not new.
        assert!(!d.admit(&parse_head(&head('1', 2), &a).unwrap()));
        assert!(d.admit(&parse_head(&head('2', 3), &a).unwrap()));
        assert_eq!(d.last(), Some(cursor('2').as_str()));
        // Back to an earlier cursor is a change too (it differs from the last).
        assert!(d.admit(&h1));
    }

    #[test]
    fn the_long_polls_etag_follows_key_events_which_keep_the_cursor() {
        let a = agent();
        let mut d = Dedupe::default();
        let plain = parse_head(&head('1', 1), &a).unwrap();
        assert_eq!(plain.etag, "1".repeat(64));
        assert!(d.admit(&plain));
        assert_eq!(d.etag(), Some("1".repeat(64).as_str()));
        // A key event: same cursor, the ETag gains -k<length> (§14).
        let mut v: serde_json::Value = serde_json::from_str(&head('1', 1)).unwrap();
        v["keys"] = serde_json::json!({ "length": 2 });
        let keyed = parse_head(&v.to_string(), &a).unwrap();
        assert!(!d.admit(&keyed), "not a new head");
        assert_eq!(d.etag(), Some(format!("{}-k2", "1".repeat(64)).as_str()));
    }
}
