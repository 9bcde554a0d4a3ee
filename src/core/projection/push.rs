//! Push of projected feeds (docs/PROTOCOL.md §15): `head?wait=N` long-polls
//! and WebSocket watchers of an agent's projected head. Pure decisions; the
//! feed objects (`worker::objects::feed`) hold the sockets and polls.
//!
//! A world change is told to every feed object once (the refresh that
//! stored it pokes them), with the sources whose cursors moved; an object
//! looks again only at agents whose selection holds one of them, so a
//! watcher is sent a frame only when its own projection moved. An agent's
//! commit that may change its projection (a new `watch`, a plan credited or
//! lapsed, an access change) is told to its object by the agent's own.
//!
//! Watchers are spread over [`SHARDS`] objects by the agent id's first hex
//! digit, so no single object holds every watcher of the deployment, while
//! all of one agent's are in one place (the per-agent caps of §13 apply).

use super::feed::Projection;
use crate::core::crypto::AgentId;
use crate::core::world::refresh::WorldPointer;
use std::collections::BTreeSet;

/// Feed objects: one per first hex digit of an agent id.
pub const SHARDS: usize = 16;
/// Watchers one feed object holds at once (every agent together).
pub const WATCHERS_PER_SHARD: usize = 10_000;
/// Long-polls one feed object holds at once; past it a poll is answered
/// at once, as without `wait`.
pub const HELD_POLLS_PER_SHARD: usize = 2_000;

/// The name of the feed object that holds `agent`'s watchers and polls.
pub fn shard_of(agent: &AgentId) -> String {
    shard_name(&agent.as_str()[..1])
}

/// Every feed object's name (a world change is told to each).
pub fn shards() -> impl Iterator<Item = String> {
    "0123456789abcdef"
        .chars()
        .map(|c| shard_name(c.encode_utf8(&mut [0; 4])))
}

fn shard_name(digit: &str) -> String {
    format!("feed:{digit}")
}

/// The sources whose cursor differs between `before` (none: every source)
/// and `after`, sorted. Empty when the refresh only re-checked the world.
pub fn moved(before: Option<&WorldPointer>, after: &WorldPointer) -> Vec<String> {
    let now = after.cursors();
    let Some(before) = before else {
        return now.into_keys().collect();
    };
    let then = before.cursors();
    let ids: BTreeSet<&String> = now.keys().chain(then.keys()).collect();
    ids.into_iter()
        .filter(|id| now.get(*id) != then.get(*id))
        .cloned()
        .collect()
}

/// Whether a selection (resolved source ids) holds a moved source.
pub fn touched(selected: &[String], moved: &[String]) -> bool {
    selected.iter().any(|s| moved.binary_search(s).is_ok())
}

/// What a watcher or held poll that holds `held` is sent for `projection`:
/// the head when its cursor is not the one held.
pub fn moved_for(held: Option<&str>, projection: &Projection) -> bool {
    held != Some(projection.etag())
}

/// The snapshot to project from: the later of the two a feed object knows
/// (the one a request was decided on, the last one it was told of).
pub fn later<'a>(a: &'a WorldPointer, b: Option<&'a WorldPointer>) -> &'a WorldPointer {
    match b {
        Some(b) if b.checked_at_ms > a.checked_at_ms => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::world::refresh::SourceState;
    use std::collections::BTreeMap;

    fn world(at: u64, cursors: &[(&str, Option<&str>)]) -> WorldPointer {
        WorldPointer {
            world_cursor: None,
            upstream_generated_at: None,
            etag: None,
            checked_at_ms: at,
            catalog_at_ms: at,
            stale_since_ms: None,
            sources: cursors
                .iter()
                .map(|(id, c)| {
                    let s = SourceState {
                        cursor: c.map(str::to_owned),
                        tags: vec![],
                        enabled: true,
                        status: None,
                        stale: false,
                        ttl_sec: None,
                        counts: [0; 4],
                    };
                    ((*id).to_owned(), s)
                })
                .collect(),
            prev: BTreeMap::new(),
        }
    }

    #[test]
    fn every_agent_has_one_of_sixteen_objects() {
        let names: BTreeSet<String> = shards().collect();
        assert_eq!(names.len(), SHARDS);
        let a = AgentId::parse(&"c".repeat(64)).unwrap();
        assert_eq!(shard_of(&a), "feed:c");
        assert!(names.contains(&shard_of(&a)));
    }

    #[test]
    fn moved_lists_changed_appeared_and_vanished_sources() {
        let a = world(1, &[("a", Some("1")), ("b", Some("1")), ("gone", None)]);
        let b = world(2, &[("a", Some("1")), ("b", Some("2")), ("new", Some("1"))]);
        assert_eq!(moved(Some(&a), &b), ["b", "gone", "new"]);
        assert!(moved(Some(&b), &b).is_empty());
        assert_eq!(moved(None, &a), ["a", "b", "gone"]);
        assert!(touched(&["a".into(), "b".into()], &moved(Some(&a), &b)));
        assert!(!touched(&["a".into()], &moved(Some(&a), &b)));
    }

    #[test]
    fn the_later_snapshot_wins() {
        let (a, b) = (world(1, &[]), world(2, &[]));
        assert_eq!(later(&a, Some(&b)).checked_at_ms, 2);
        assert_eq!(later(&b, Some(&a)).checked_at_ms, 2);
        assert_eq!(later(&a, None).checked_at_ms, 1);
    }
}
