//! Who may read this agent's capsule (docs/PROTOCOL.md §12): the edits
//! behind `selfcap grant`, `revoke` and `visibility`. Each is a pure function
//! from one capsule to the next, editing only `access_control`; publishing
//! the result is an ordinary signed write (`Client::publish`), so access
//! changes get the same seq, pre-check, quota and history as any other.
//!
//! On the wire (§5) `access_control` is `{public, authorized_readers}`;
//! `public` is required whenever the object exists, and a reader is either a
//! bare agent id (every scope, no expiry) or `{agent_id, scopes,
//! expires_at?, granted_at?}`. The edits keep the bare form whenever it says
//! the same thing, so the capsule stays as small as it can be.

use super::error::Error;
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::model::{ReadScope, ReadScopes};
use crate::core::time;

const ACCESS_CONTROL: &str = "access_control";
const PUBLIC: &str = "public";
const READERS: &str = "authorized_readers";

/// Whether `capsule` is private: `access_control.public` is `false`.
/// Anything else (no `access_control`, `true`, a malformed value) reads as
/// public, as the service treats a capsule without the field.
pub fn is_private(capsule: &Json) -> bool {
    capsule
        .get(ACCESS_CONTROL)
        .and_then(|a| a.get(PUBLIC))
        .and_then(Json::as_bool)
        == Some(false)
}

/// One grant to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The agent being let in; never the capsule's own agent (the owner
    /// always reads its own capsule, so granting it is refused as a mistake).
    pub reader: AgentId,
    /// Which documents it may read (at least one; all of them is written as
    /// the bare-id form when the grant never expires).
    pub scopes: ReadScopes,
    /// Unix ms when it ends (`None`: never); must be after `now_ms`.
    pub expires_ms: Option<u64>,
}

/// `capsule` with `grant` upserted into `authorized_readers` (an existing
/// entry for the same agent is replaced where it stands), written as a bare
/// id when it holds every scope and never expires, else as a grant object
/// stamped `granted_at` = `now_ms`. `make_private`: also set `public` to
/// `false`. A new `access_control` starts public (`make_private` aside):
/// granting never changes visibility by itself.
pub fn grant(capsule: &Json, g: &Grant, now_ms: u64, make_private: bool) -> Result<Json, Error> {
    if capsule.get("agent_id").and_then(Json::as_str) == Some(g.reader.as_str()) {
        return Err(Error::local(
            "that is this agent's own id: the owner always reads its own capsule",
        ));
    }
    if g.scopes == ReadScopes::default() {
        return Err(Error::local("a grant needs at least one scope"));
    }
    if let Some(e) = g.expires_ms {
        if e <= now_ms {
            return Err(Error::local(format!(
                "the grant would expire at {}, which is not in the future: an expired grant \
                 gives no access",
                time::rfc3339(e)
            )));
        }
    }
    let entry = if g.scopes == ReadScopes::ALL && g.expires_ms.is_none() {
        Json::from(g.reader.as_str())
    } else {
        let mut o = vec![
            ("agent_id".into(), Json::from(g.reader.as_str())),
            ("scopes".into(), scopes_json(g.scopes)),
        ];
        if let Some(e) = g.expires_ms {
            o.push(("expires_at".into(), Json::from(time::rfc3339(e))));
        }
        o.push(("granted_at".into(), Json::from(time::rfc3339(now_ms))));
        Json::Object(o)
    };
    edit(capsule, |ac| {
        if make_private {
            set(ac, PUBLIC, Json::Bool(false));
        }
        let mut readers = take_readers(ac)?;
        match readers
            .iter()
            .position(|r| reader_id(r) == Some(g.reader.as_str()))
        {
            Some(i) => readers[i] = entry,
            None => readers.push(entry),
        }
        set(ac, READERS, Json::Array(readers));
        Ok(())
    })
}

/// `capsule` without `reader` in `authorized_readers`, and whether it was
/// there (when it was not, the capsule comes back unchanged).
pub fn revoke(capsule: &Json, reader: &AgentId) -> Result<(Json, bool), Error> {
    let listed = capsule
        .get(ACCESS_CONTROL)
        .and_then(|a| a.get(READERS))
        .and_then(Json::as_array)
        .is_some_and(|rs| rs.iter().any(|r| reader_id(r) == Some(reader.as_str())));
    if !listed {
        return Ok((capsule.clone(), false));
    }
    let next = edit(capsule, |ac| {
        let mut readers = take_readers(ac)?;
        readers.retain(|r| reader_id(r) != Some(reader.as_str()));
        set(ac, READERS, Json::Array(readers));
        Ok(())
    })?;
    Ok((next, true))
}

/// `capsule` made public or private. Making a capsule without
/// `access_control` public changes nothing (absent already means public).
pub fn set_visibility(capsule: &Json, public: bool) -> Result<Json, Error> {
    if public && capsule.get(ACCESS_CONTROL).is_none() {
        return Ok(capsule.clone());
    }
    edit(capsule, |ac| {
        set(ac, PUBLIC, Json::Bool(public));
        Ok(())
    })
}

/// A scope list as the CLI takes it: comma-separated `head`, `capsule`,
/// `history`, `verify` (or their wire names, `READ_HEAD` …), or `all`.
pub fn parse_scopes(list: &str) -> Result<ReadScopes, Error> {
    let mut scopes = ReadScopes::default();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word.eq_ignore_ascii_case("all") {
            scopes = ReadScopes::ALL;
            continue;
        }
        let upper = word.to_ascii_uppercase();
        let wire = if upper.starts_with("READ_") {
            upper
        } else {
            format!("READ_{upper}")
        };
        let s = ReadScope::parse(&wire).ok_or_else(|| {
            Error::local(format!(
                "unknown scope {word:?}: expected head, capsule, history, verify or all"
            ))
        })?;
        scopes.insert(s);
    }
    if scopes == ReadScopes::default() {
        return Err(Error::local(
            "no scope given: expected head, capsule, history, verify or all",
        ));
    }
    Ok(scopes)
}

/// An RFC 3339 date-time (`Z` or a `±HH:MM` offset) as Unix ms.
pub fn parse_time(s: &str) -> Result<u64, Error> {
    let bad = || {
        Error::local(format!(
            "not an RFC 3339 date-time: {s:?} (e.g. 2027-01-31T00:00:00Z)"
        ))
    };
    // The one parser the service evaluates grants with (`core::time`).
    time::parse_rfc3339(s).ok_or_else(bad)
}

fn scopes_json(s: ReadScopes) -> Json {
    Json::Array(
        ReadScope::ALL
            .into_iter()
            .filter(|&x| s.allows(x))
            .map(|x| Json::from(x.as_str()))
            .collect(),
    )
}

/// The agent id a reader entry names (bare or object form).
fn reader_id(r: &Json) -> Option<&str> {
    r.as_str()
        .or_else(|| r.get("agent_id").and_then(Json::as_str))
}

/// Runs `f` on `capsule`'s `access_control` members (created public when
/// absent), then puts them back where they were.
fn edit(
    capsule: &Json,
    f: impl FnOnce(&mut Vec<(String, Json)>) -> Result<(), Error>,
) -> Result<Json, Error> {
    let Json::Object(members) = capsule else {
        return Err(Error::local("the desired capsule is not a JSON object"));
    };
    let mut members = members.clone();
    let at = match members.iter().position(|(k, _)| k == ACCESS_CONTROL) {
        Some(i) => i,
        None => {
            members.push((
                ACCESS_CONTROL.into(),
                Json::Object(vec![(PUBLIC.into(), Json::Bool(true))]),
            ));
            members.len() - 1
        }
    };
    let Json::Object(ac) = &mut members[at].1 else {
        return Err(Error::local(
            "the desired capsule's access_control is not an object: fix capsule.json first",
        ));
    };
    if !ac.iter().any(|(k, _)| k == PUBLIC) {
        // `public` is required whenever access_control exists; a capsule
        // without it was public.
        ac.insert(0, (PUBLIC.into(), Json::Bool(true)));
    }
    f(ac)?;
    Ok(Json::Object(members))
}

/// Sets `key` in an object's members, in place or at the end.
fn set(members: &mut Vec<(String, Json)>, key: &str, value: Json) {
    match members.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => members.push((key.into(), value)),
    }
}

/// The current `authorized_readers` (empty when absent).
fn take_readers(ac: &[(String, Json)]) -> Result<Vec<Json>, Error> {
    match ac.iter().find(|(k, _)| k == READERS).map(|(_, v)| v) {
        None => Ok(Vec::new()),
        Some(Json::Array(rs)) => Ok(rs.clone()),
        Some(_) => Err(Error::local(
            "the desired capsule's access_control.authorized_readers is not an array: fix \
             capsule.json first",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::jcs;
    use crate::core::json;
    use crate::core::testing;
    use crate::core::validate::validate_capsule;

    const NOW: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z
    const DAY: u64 = 86_400_000;

    fn owner() -> AgentId {
        AgentId::parse(&"a".repeat(64)).unwrap()
    }

    fn reader(c: char) -> AgentId {
        AgentId::parse(&c.to_string().repeat(64)).unwrap()
    }

    /// What `selfcap template` gives the owner: the capsule an operator
    /// runs `grant` and `visibility` on.
    fn capsule() -> Json {
        super::super::writes::template(&owner())
    }

    fn ac(c: &Json) -> String {
        jcs::canonicalize(c.get(ACCESS_CONTROL).unwrap())
    }

    fn all(r: AgentId) -> Grant {
        Grant {
            reader: r,
            scopes: ReadScopes::ALL,
            expires_ms: None,
        }
    }

    /// Every edit's result is a capsule the service's validator accepts.
    fn valid(c: &Json) -> &Json {
        validate_capsule(c).unwrap_or_else(|v| panic!("{v:?}"));
        c
    }

    #[test]
    fn a_full_grant_without_expiry_is_a_bare_id_and_keeps_visibility() {
        let c = valid(&grant(&capsule(), &all(reader('b')), NOW, false).unwrap()).clone();
        let b = "b".repeat(64);
        assert_eq!(
            ac(&c),
            format!(r#"{{"authorized_readers":["{b}"],"public":true}}"#)
        );
        assert!(!is_private(&c));
        let p = valid(&grant(&capsule(), &all(reader('b')), NOW, true).unwrap()).clone();
        assert!(is_private(&p));
    }

    #[test]
    fn a_partial_or_expiring_grant_is_an_object_with_granted_at() {
        let g = Grant {
            reader: reader('b'),
            scopes: parse_scopes("head,verify").unwrap(),
            expires_ms: Some(NOW + DAY),
        };
        let c = grant(&capsule(), &g, NOW, true).unwrap();
        valid(&c);
        let b = "b".repeat(64);
        assert_eq!(
            ac(&c),
            format!(
                r#"{{"authorized_readers":[{{"agent_id":"{b}","expires_at":"2026-02-11T00:00:00Z","granted_at":"2026-02-10T00:00:00Z","scopes":["READ_HEAD","READ_VERIFY"]}}],"public":false}}"#
            )
        );
        // All four scopes but an expiry: still the object form.
        let g = Grant {
            scopes: ReadScopes::ALL,
            ..g
        };
        let c = grant(&capsule(), &g, NOW, false).unwrap();
        assert!(ac(&c)
            .contains(r#""scopes":["READ_HEAD","READ_CAPSULE","READ_HISTORY","READ_VERIFY"]"#));
    }

    #[test]
    fn grant_upserts_in_place_by_agent_id() {
        let c = grant(&capsule(), &all(reader('b')), NOW, true).unwrap();
        let c = grant(&c, &all(reader('c')), NOW, false).unwrap();
        let narrow = Grant {
            reader: reader('b'),
            scopes: parse_scopes("capsule").unwrap(),
            expires_ms: None,
        };
        let c = valid(&grant(&c, &narrow, NOW + 5, false).unwrap()).clone();
        let readers = c
            .get(ACCESS_CONTROL)
            .unwrap()
            .get(READERS)
            .unwrap()
            .as_array()
            .unwrap();
        assert_eq!(readers.len(), 2);
        assert_eq!(reader_id(&readers[0]), Some("b".repeat(64).as_str()));
        assert_eq!(
            readers[0].get("scopes").map(jcs::canonicalize).as_deref(),
            Some(r#"["READ_CAPSULE"]"#)
        );
        assert_eq!(readers[1], Json::from("c".repeat(64)));
        assert!(is_private(&c), "a later grant leaves visibility alone");
    }

    #[test]
    fn grants_that_could_never_matter_are_refused() {
        let past = Grant {
            expires_ms: Some(NOW - 1),
            ..all(reader('b'))
        };
        assert!(matches!(
            grant(&capsule(), &past, NOW, true),
            Err(Error::Local(_))
        ));
        let now = Grant {
            expires_ms: Some(NOW),
            ..all(reader('b'))
        };
        assert!(grant(&capsule(), &now, NOW, true).is_err());
        assert!(grant(&capsule(), &all(owner()), NOW, true).is_err());
        let none = Grant {
            scopes: ReadScopes::default(),
            ..all(reader('b'))
        };
        assert!(grant(&capsule(), &none, NOW, true).is_err());
    }

    #[test]
    fn revoke_removes_only_that_reader_and_reports_a_no_op() {
        let c = grant(&capsule(), &all(reader('b')), NOW, true).unwrap();
        let g = Grant {
            scopes: parse_scopes("head").unwrap(),
            ..all(reader('c'))
        };
        let c = grant(&c, &g, NOW, false).unwrap();
        let (after, removed) = revoke(&c, &reader('c')).unwrap();
        assert!(removed);
        valid(&after);
        let b = "b".repeat(64);
        assert_eq!(
            ac(&after),
            format!(r#"{{"authorized_readers":["{b}"],"public":false}}"#)
        );
        let (same, removed) = revoke(&after, &reader('d')).unwrap();
        assert!(!removed);
        assert_eq!(same, after);
        let (same, removed) = revoke(&capsule(), &reader('b')).unwrap();
        assert!(!removed && same == capsule());
    }

    #[test]
    fn visibility_creates_access_control_only_when_it_must() {
        assert_eq!(set_visibility(&capsule(), true).unwrap(), capsule());
        let p = valid(&set_visibility(&capsule(), false).unwrap()).clone();
        assert_eq!(ac(&p), r#"{"public":false}"#);
        assert!(is_private(&p));
        let back = valid(&set_visibility(&p, true).unwrap()).clone();
        assert_eq!(ac(&back), r#"{"public":true}"#);
        assert!(!is_private(&back));
        // Readers survive a visibility change.
        let g = grant(&p, &all(reader('b')), NOW, false).unwrap();
        let g = set_visibility(&g, true).unwrap();
        assert!(ac(&g).contains(&"b".repeat(64)));
    }

    #[test]
    fn a_missing_public_member_is_filled_in_and_malformed_ones_refused() {
        let c = testing::with(
            testing::minimal(owner()),
            ACCESS_CONTROL,
            testing::json(r#"{"authorized_readers":[]}"#),
        );
        assert!(!is_private(&c));
        let v = set_visibility(&c, false).unwrap();
        assert_eq!(ac(&v), r#"{"authorized_readers":[],"public":false}"#);
        let bad = json::parse_str(r#"{"access_control":true}"#).unwrap();
        assert!(set_visibility(&bad, false).is_err());
        let bad = json::parse_str(r#"{"access_control":{"public":false,"authorized_readers":7}}"#)
            .unwrap();
        assert!(grant(&bad, &all(reader('b')), NOW, false).is_err());
        assert!(is_private(&bad));
    }

    #[test]
    fn scopes_parse_short_and_wire_names() {
        let s = parse_scopes("head, READ_CAPSULE,History").unwrap();
        assert!(s.head && s.capsule && s.history && !s.verify);
        assert_eq!(parse_scopes("all").unwrap(), ReadScopes::ALL);
        assert_eq!(
            parse_scopes("head,capsule,history,verify").unwrap(),
            ReadScopes::ALL
        );
        for bad in ["", ",", "read", "heads", "READ_ALL"] {
            assert!(parse_scopes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_parse_with_any_offset() {
        assert_eq!(parse_time("2026-02-10T00:00:00Z").unwrap(), NOW);
        assert_eq!(parse_time("2026-02-10T02:00:00+02:00").unwrap(), NOW);
        assert_eq!(parse_time("2026-02-09T19:30:00-04:30").unwrap(), NOW);
        assert_eq!(parse_time("2026-02-10T00:00:00.250Z").unwrap(), NOW + 250);
        for bad in [
            "2026-02-10",
            "tomorrow",
            "2026-02-30T00:00:00Z",
            "2026-02-10 00:00:00Z",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
