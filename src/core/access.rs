//! Who may read a capsule's documents (docs/PROTOCOL.md §12). Decided from
//! the stored capsule's `access_control` (validated when it was written), the
//! verified signer if any ([`crate::core::read_auth`]) and the document's
//! scope. Pure; the Worker asks before answering any read.

use crate::core::json::Json;
use crate::core::model::ReadScope;
use crate::core::time::parse_timestamp;
use crate::core::urls::Doc;
use serde::{Deserialize, Serialize};

/// The scope a document needs.
pub fn scope_of(doc: &Doc<'_>) -> ReadScope {
    match doc {
        // The key log says which key speaks for the agent, and meta.json
        // what became of its writes: whoever may read its head may read
        // them.
        Doc::Head | Doc::KeyLog | Doc::Meta => ReadScope::Head,
        Doc::Capsule => ReadScope::Capsule,
        Doc::History | Doc::Snapshot(_) | Doc::Export => ReadScope::History,
        Doc::Verify => ReadScope::Verify,
    }
}

/// What a read may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A public capsule: anyone, and the answer may be cached publicly.
    Public,
    /// A private capsule the signer may read: answer, never cacheable by others.
    Granted,
    /// Not for this reader: answer exactly as if the capsule did not exist.
    Hidden,
}

/// Whether the capsule is public (no `access_control`, or `public: true`).
pub fn is_public(capsule: &Json) -> bool {
    match capsule.get("access_control") {
        None => true,
        // Validated at write time; anything else fails closed.
        Some(ac) => ac.get("public").and_then(Json::as_bool) == Some(true),
    }
}

/// One reader a private capsule grants a scope to, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The reader's agent id.
    pub agent_id: String,
    /// When the grant ends (Unix ms; `None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
}

/// Who may read one scope of a private capsule besides its owner: the
/// grants of `access_control.authorized_readers` that cover the scope. Kept
/// apart from the capsule for history: each retained version keeps the
/// audience it was written with ([`crate::core::history::index`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audience(pub Vec<Grant>);

impl Audience {
    /// The audience of `scope` of `capsule`; `None` when the capsule is public.
    pub fn of(capsule: &Json, scope: ReadScope) -> Option<Audience> {
        if is_public(capsule) {
            return None;
        }
        let readers = capsule
            .get("access_control")
            .and_then(|a| a.get("authorized_readers"))
            .and_then(Json::as_array)
            .unwrap_or(&[]);
        let grants = readers
            .iter()
            .filter_map(|r| match r {
                // A bare agent id: every scope, no expiry.
                Json::String(id) => Some(Grant {
                    agent_id: id.clone(),
                    until_ms: None,
                }),
                Json::Object(_) => {
                    let covers = r
                        .get("scopes")
                        .and_then(Json::as_array)
                        .is_some_and(|s| s.iter().any(|x| x.as_str() == Some(scope.as_str())));
                    let until_ms = match r.get("expires_at").and_then(Json::as_str) {
                        None => None,
                        // Every spelling the schema accepts evaluates (one parser
                        // for both); anything else cannot have been written, and
                        // fails closed.
                        Some(t) => Some(parse_timestamp(t)?),
                    };
                    let agent_id = r.get("agent_id").and_then(Json::as_str)?.to_owned();
                    covers.then_some(Grant { agent_id, until_ms })
                }
                _ => None,
            })
            .collect();
        Some(Audience(grants))
    }

    /// Whether `reader` (a verified signer; `None`: unsigned) of `owner`'s
    /// capsule is in this audience at `now_ms`: the owner always is.
    pub fn admits(&self, owner: &str, reader: Option<&str>, now_ms: u64) -> bool {
        let Some(reader) = reader else {
            return false;
        };
        reader == owner
            || self.0.iter().any(|g| {
                g.agent_id == reader && g.until_ms.is_none_or(|until| (now_ms as i64) < until)
            })
    }
}

/// May `reader` (a verified signer's agent id; `None`: unsigned) read the
/// document of `scope` of `owner`'s `capsule` at `now_ms`?
pub fn decide(
    capsule: &Json,
    owner: &str,
    reader: Option<&str>,
    scope: ReadScope,
    now_ms: u64,
) -> Decision {
    match Audience::of(capsule, scope) {
        None => Decision::Public,
        Some(a) if a.admits(owner, reader, now_ms) => Decision::Granted,
        Some(_) => Decision::Hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json::parse_str;
    use crate::core::testing;

    const OWNER: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    // 2026-01-01T00:00:00Z
    const NOW: u64 = 1_767_225_600_000;

    /// OWNER's minimal capsule with `ac` (JSON text) as its `access_control`.
    fn capsule(ac: &str) -> Json {
        testing::with(testing::minimal(OWNER), "access_control", testing::json(ac))
    }

    #[test]
    fn without_access_control_or_public_true_everyone_reads() {
        let none = parse_str(r#"{"agent_id":"x"}"#).unwrap();
        assert_eq!(
            decide(&none, OWNER, None, ReadScope::Capsule, NOW),
            Decision::Public
        );
        let public = capsule(r#"{"public":true,"authorized_readers":[]}"#);
        assert_eq!(
            decide(&public, OWNER, None, ReadScope::History, NOW),
            Decision::Public
        );
    }

    #[test]
    fn private_hides_from_the_unsigned_and_strangers_not_from_the_owner() {
        let c = capsule(r#"{"public":false}"#);
        assert_eq!(
            decide(&c, OWNER, None, ReadScope::Head, NOW),
            Decision::Hidden
        );
        assert_eq!(
            decide(&c, OWNER, Some(A), ReadScope::Head, NOW),
            Decision::Hidden
        );
        assert_eq!(
            decide(&c, OWNER, Some(OWNER), ReadScope::History, NOW),
            Decision::Granted
        );
    }

    #[test]
    fn grants_follow_scope_and_expiry() {
        let c = capsule(&format!(
            r#"{{"public":false,"authorized_readers":["{A}",
                {{"agent_id":"{B}","scopes":["READ_HEAD"]}},
                {{"agent_id":"{C}","scopes":["READ_CAPSULE"],"expires_at":"2026-01-01T00:00:00Z"}}]}}"#
        ));
        for s in ReadScope::ALL {
            assert_eq!(
                decide(&c, OWNER, Some(A), s, NOW),
                Decision::Granted,
                "{s:?}"
            );
        }
        assert_eq!(
            decide(&c, OWNER, Some(B), ReadScope::Head, NOW),
            Decision::Granted
        );
        assert_eq!(
            decide(&c, OWNER, Some(B), ReadScope::Capsule, NOW),
            Decision::Hidden
        );
        // Expires exactly now: gone.
        assert_eq!(
            decide(&c, OWNER, Some(C), ReadScope::Capsule, NOW),
            Decision::Hidden
        );
        assert_eq!(
            decide(&c, OWNER, Some(C), ReadScope::Capsule, NOW - 1),
            Decision::Granted
        );
    }

    #[test]
    fn grants_expire_at_their_instant_whatever_the_offset() {
        // 2026-01-01T00:00:00Z is NOW; each spelling below names NOW + 1 h.
        for later in [
            "2026-01-01T01:00:00Z",
            "2026-01-01T01:00:00.000000+00:00",
            "2025-12-31T18:00:00-07:00",
            "2026-01-01T06:30:00.000+05:30",
        ] {
            let c = capsule(&format!(
                r#"{{"public":false,"authorized_readers":[{{"agent_id":"{A}","scopes":["READ_CAPSULE"],"expires_at":"{later}"}}]}}"#
            ));
            let at = |ms| decide(&c, OWNER, Some(A), ReadScope::Capsule, ms);
            assert_eq!(at(NOW), Decision::Granted, "{later}");
            assert_eq!(at(NOW + 3_599_999), Decision::Granted, "{later}");
            assert_eq!(at(NOW + 3_600_000), Decision::Hidden, "{later}");
        }
    }

    #[test]
    fn anything_unexpected_fails_closed() {
        let c = capsule(r#"{"public":"no"}"#);
        assert_eq!(
            decide(&c, OWNER, None, ReadScope::Head, NOW),
            Decision::Hidden
        );
        let c = capsule(&format!(
            r#"{{"public":false,"authorized_readers":[{{"agent_id":"{A}","scopes":["READ_HEAD"],"expires_at":"soon"}}]}}"#
        ));
        assert_eq!(
            decide(&c, OWNER, Some(A), ReadScope::Head, NOW),
            Decision::Hidden
        );
    }

    #[test]
    fn documents_map_to_their_scopes() {
        assert_eq!(scope_of(&Doc::Head), ReadScope::Head);
        assert_eq!(scope_of(&Doc::Capsule), ReadScope::Capsule);
        assert_eq!(scope_of(&Doc::Export), ReadScope::History);
        assert_eq!(scope_of(&Doc::Snapshot("x")), ReadScope::History);
        assert_eq!(scope_of(&Doc::Verify), ReadScope::Verify);
    }
}
