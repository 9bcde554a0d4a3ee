//! Which of the service's three Workers answers a request
//! (docs/ARCHITECTURE.md, "Three Workers"). The entry Worker, the one every
//! request reaches first, answers the reads it can answer from KV alone:
//! `GET`/`HEAD` of head.json, capsule.json, history.json, snapshots,
//! verify.json and keys.json, public or signed; and every answer the route
//! alone decides (404, 400 `bad_agent_id`, 405, CORS preflight). The routes
//! off the capsule's write path go, as they came, to the extras Worker: MCP,
//! the upgrade's quote, claim and x402, and the projected feeds (both
//! documents and their WebSocket). A PUT of capsule.json is the entry's to
//! send on: one whose envelope authenticates against the agent's genesis key
//! (`core::envelope`, no stored state) it sends straight to the agent's
//! Durable Object, one hop instead of two, and it leaves every other to the
//! write Worker, body as it came, which words and logs every refusal and
//! reads a rotated signer's key. Everything else goes to the write Worker,
//! which owns the Durable Objects: key events, bootstrap, the keyring,
//! export.json (which the agent's object assembles), a head.json long-poll
//! (which it holds) and the agent's WebSocket.
//!
//! Decided before anything is read or checked: a signed read the entry
//! forwards has not had its nonce spent, so the write Worker checks it once.
//!
//! The entry keeps the location's copies of head.json and capsule.json, so
//! a forwarded request that changed what they say is answered with what it
//! changed ([`Changed`]), for the entry to mark or drop its copies before it
//! answers (read-after-write where the write was taken).

use crate::core::crypto::AgentId;
use crate::core::urls::{Action, Doc, Method, Route};

/// Who answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answerer<'a> {
    /// The entry Worker itself, with the route's decision.
    Entry(Action<'a>),
    /// The write Worker, sent the request as it came.
    Writer,
    /// The extras Worker, sent the request as it came.
    Extras,
}

/// Who answers `method` on `route`. `asks_to_wait`: whether the query names
/// `wait` (a head.json long-poll, [`asks_to_wait`]); asked only of a
/// head.json read.
pub fn answerer<'a>(
    route: Route<'a>,
    method: Method,
    asks_to_wait: impl FnOnce() -> bool,
) -> Answerer<'a> {
    // A WebSocket upgrade's method is read from its headers by the router
    // of the Worker that takes it (every upgrade is reported as a GET).
    match route {
        Route::Watch { .. } => return Answerer::Writer,
        Route::FeedSocket => return Answerer::Extras,
        _ => {}
    }
    match route.dispatch(method) {
        a @ (Action::NotFound
        | Action::BadAgentId
        | Action::Preflight { .. }
        | Action::MethodNotAllowed { .. }) => Answerer::Entry(a),
        Action::Read {
            doc: Doc::Export, ..
        } => Answerer::Writer,
        Action::Read { doc: Doc::Head, .. } if asks_to_wait() => Answerer::Writer,
        a @ (Action::Read { .. } | Action::Write { .. }) => Answerer::Entry(a),
        Action::Mcp
        | Action::Quote
        | Action::Claim
        | Action::X402
        | Action::Feed { .. }
        | Action::FeedSocket
        | Action::Admin { .. } => Answerer::Extras,
        _ => Answerer::Writer,
    }
}

/// Whether a query's `name=value` pairs name `wait` at all: any such
/// head.json read is the write Worker's, which answers a bad `wait` as it
/// answers any other.
pub fn asks_to_wait<K: AsRef<str>, V>(pairs: impl IntoIterator<Item = (K, V)>) -> bool {
    pairs.into_iter().any(|(k, _)| k.as_ref() == "wait")
}

/// What a forwarded request changed in an agent's head.json and
/// capsule.json, as the write Worker tells the entry (a header value, items
/// joined by `,`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// A write of this seq was accepted: keep nothing older.
    Written {
        /// Whose.
        agent: AgentId,
        /// The accepted seq.
        seq: u64,
    },
    /// Changed without a new seq (a key event, a paid plan): drop the copies.
    Purged {
        /// Whose.
        agent: AgentId,
    },
}

impl Changed {
    /// The item as it is sent: `written {agent_id} {seq}`, `purged {agent_id}`.
    pub fn item(&self) -> String {
        match self {
            Changed::Written { agent, seq } => format!("written {agent} {seq}"),
            Changed::Purged { agent } => format!("purged {agent}"),
        }
    }

    /// The items of a header value, in order; an item that does not read
    /// is skipped (the copy it would have named lapses with its `max-age`).
    pub fn parse_all(value: &str) -> Vec<Changed> {
        value
            .split(',')
            .filter_map(|item| {
                let mut words = item.split_whitespace();
                let changed = match (words.next()?, AgentId::parse(words.next()?)?) {
                    ("written", agent) => Changed::Written {
                        agent,
                        seq: words.next()?.parse().ok()?,
                    },
                    ("purged", agent) => Changed::Purged { agent },
                    _ => return None,
                };
                words.next().is_none().then_some(changed)
            })
            .collect()
    }

    /// The agent whose copies this names.
    pub fn agent(&self) -> &AgentId {
        match self {
            Changed::Written { agent, .. } | Changed::Purged { agent } => agent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::urls::templates;

    const ID: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
    const METHODS: [Method; 6] = [
        Method::Get,
        Method::Head,
        Method::Put,
        Method::Post,
        Method::Options,
        Method::Other,
    ];

    fn concrete(template: &str) -> String {
        template
            .replace("{agent_id}", ID)
            .replace("{cursor}", &"ab".repeat(32))
    }

    fn entry_reads(path: &str, method: Method, wait: bool) -> bool {
        matches!(
            answerer(Route::parse(path), method, || wait),
            Answerer::Entry(Action::Read { .. })
        )
    }

    #[test]
    fn the_entry_reads_every_document_but_export_and_a_long_poll() {
        let mut read = Vec::new();
        for (template, _) in templates() {
            let path = concrete(&template);
            for method in METHODS {
                if entry_reads(&path, method, false) {
                    read.push(format!("{method:?} {template}"));
                }
            }
        }
        let mut expected = Vec::new();
        for prefix in ["/self/", "/api/v1/self/"] {
            for file in [
                "head.json",
                "capsule.json",
                "history.json",
                "verify.json",
                "keys.json",
                "meta.json",
                "snapshot/{cursor}.json",
            ] {
                for m in ["Get", "Head"] {
                    expected.push(format!("{m} {prefix}{{agent_id}}/{file}"));
                }
            }
        }
        read.sort();
        expected.sort();
        assert_eq!(read, expected);
        // A head.json that names `wait` is held by the agent's object.
        let head = format!("/self/{ID}/head.json");
        assert_eq!(
            answerer(Route::parse(&head), Method::Get, || true),
            Answerer::Writer
        );
        assert!(entry_reads(
            &format!("/self/{ID}/capsule.json"),
            Method::Get,
            true
        ));
    }

    #[test]
    fn a_put_of_capsule_json_is_the_entrys_to_send_on() {
        for path in [
            format!("/self/{ID}/capsule.json"),
            format!("/api/v1/self/{ID}/capsule.json"),
        ] {
            assert!(matches!(
                answerer(Route::parse(&path), Method::Put, || true),
                Answerer::Entry(Action::Write { agent }) if agent.as_str() == ID
            ));
        }
    }

    #[test]
    fn key_events_bootstrap_and_the_agents_socket_go_to_the_write_worker() {
        for (path, method) in [
            (format!("/self/{ID}/keys.json"), Method::Post),
            (format!("/self/{ID}/export.json"), Method::Get),
            (format!("/api/v1/self/{ID}/export.json"), Method::Head),
            (format!("/self/{ID}/watch"), Method::Get),
            // The method of an upgrade is read from its headers there.
            (format!("/self/{ID}/watch"), Method::Put),
            (format!("/self/{ID}/watch"), Method::Options),
            ("/api/v1/self/bootstrap".into(), Method::Post),
            ("/api/v1/self/keys".into(), Method::Get),
        ] {
            assert_eq!(
                answerer(Route::parse(&path), method, || false),
                Answerer::Writer,
                "{method:?} {path}"
            );
        }
    }

    #[test]
    fn payments_mcp_and_feeds_go_to_the_extras_worker() {
        for (path, method) in [
            ("/api/v1/self/upgrade/quote", Method::Post),
            ("/api/v1/self/upgrade/claim", Method::Post),
            ("/api/v1/self/upgrade/x402", Method::Post),
            ("/mcp", Method::Post),
            ("/api/v1/watch/head", Method::Get),
            ("/api/v1/watch/latest", Method::Head),
            ("/api/v1/watch/socket", Method::Get),
            // The method of an upgrade is read from its headers there.
            ("/api/v1/watch/socket", Method::Options),
        ] {
            assert_eq!(
                answerer(Route::parse(path), method, || false),
                Answerer::Extras,
                "{method:?} {path}"
            );
        }
    }

    #[test]
    fn answers_decided_by_the_route_alone_never_leave_the_entry() {
        for (path, method) in [
            ("/nothing/here".to_owned(), Method::Get),
            ("/self/not-an-id/head.json".into(), Method::Get),
            ("/self/not-an-id/capsule.json".into(), Method::Put),
            (format!("/self/{ID}/head.json"), Method::Put),
            (format!("/self/{ID}/export.json"), Method::Post),
            (format!("/self/{ID}/capsule.json"), Method::Options),
            ("/mcp".into(), Method::Get),
            ("/mcp".into(), Method::Options),
            ("/api/v1/self/keys".into(), Method::Post),
            ("/api/v1/watch/head".into(), Method::Options),
        ] {
            let who = answerer(Route::parse(&path), method, || true);
            assert!(
                matches!(
                    who,
                    Answerer::Entry(
                        Action::NotFound
                            | Action::BadAgentId
                            | Action::MethodNotAllowed { .. }
                            | Action::Preflight { .. }
                    )
                ),
                "{method:?} {path}: {who:?}"
            );
        }
    }

    #[test]
    fn wait_is_named_by_its_key_alone() {
        assert!(asks_to_wait([("wait", "30")]));
        assert!(asks_to_wait([("x", "1"), ("wait", "")]));
        assert!(asks_to_wait([("wait", "nonsense")]));
        assert!(!asks_to_wait([("since", "1"), ("waits", "30")]));
        assert!(!asks_to_wait(Vec::<(&str, &str)>::new()));
    }

    #[test]
    fn changes_read_back_as_written() {
        let agent = AgentId::parse(ID).unwrap();
        let all = [
            Changed::Written {
                agent: agent.clone(),
                seq: 7,
            },
            Changed::Purged {
                agent: agent.clone(),
            },
        ];
        let value = all.iter().map(Changed::item).collect::<Vec<_>>().join(", ");
        assert_eq!(value, format!("written {ID} 7, purged {ID}"));
        assert_eq!(Changed::parse_all(&value), all);
        assert_eq!(all[1].agent(), &agent);
        // What does not read is skipped, the rest kept.
        let messy = format!("written {ID}, written {ID} x, purged nope, dropped {ID}, purged {ID} 1, written {ID} 3");
        assert_eq!(
            Changed::parse_all(&messy),
            [Changed::Written { agent, seq: 3 }]
        );
        assert!(Changed::parse_all("").is_empty());
    }
}
