//! What a watch follows, the one thing that differs between `selfcap watch`
//! and `selfcap feed --watch`: an agent's head.json (§13) or its projected
//! watch feed's head (§15). Both are pushed the same way (a WebSocket whose
//! every frame is the document, or a long-poll `?wait=N` with
//! `If-None-Match`) and deduplicated by their `cursor`, so the loop, the
//! plan, the signing and the backoff are shared; [`Followed`] says where
//! each is read, how a frame is checked, and which refusals end a watch.

use super::frame::{parse_feed_head, parse_head, WatchedHead};
use crate::core::crypto::AgentId;
use crate::core::urls::{watch_path, Doc, FeedDoc, FEED_SOCKET_PATH};

/// The document a watch follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Followed {
    /// head.json, pushed by `GET /self/{id}/watch` (`selfcap watch`).
    #[default]
    Head,
    /// The projected head `GET /api/v1/watch/head?agent_id=…`, pushed by
    /// `GET /api/v1/watch/socket?agent_id=…` (`selfcap feed --watch`).
    FeedHead,
}

impl Followed {
    /// The document's path (relative to the service URL): what the signing
    /// probe reads and the long-poll asks with `wait`.
    pub fn doc_path(self, agent: &AgentId) -> String {
        match self {
            Followed::Head => Doc::Head.path(agent.as_str()),
            Followed::FeedHead => format!("{}?agent_id={agent}", FeedDoc::Head.path()),
        }
    }

    /// The path of its WebSocket (an `http(s)://` URL once the service URL
    /// is put before it: the one signed).
    pub fn socket_path(self, agent: &AgentId) -> String {
        match self {
            Followed::Head => watch_path(agent.as_str()),
            Followed::FeedHead => format!("{FEED_SOCKET_PATH}?agent_id={agent}"),
        }
    }

    /// Checks a frame or a long-poll body as this document of `agent`.
    pub fn parse(self, text: &str, agent: &AgentId) -> Result<WatchedHead, String> {
        match self {
            Followed::Head => parse_head(text, agent),
            Followed::FeedHead => parse_feed_head(text, agent),
        }
    }

    /// The document, in messages.
    pub fn name(self) -> &'static str {
        match self {
            Followed::Head => "head.json",
            Followed::FeedHead => "projected head",
        }
    }

    /// Whether an error code means the read is refused for as long as
    /// nothing changes on the service's side, so the watch ends with it
    /// (as `selfcap feed` would): the feed's own refusals. Answered to the
    /// upgrade, to a long-poll, or as a close's reason (4404
    /// `watch_not_set`, 4402 `watch_requires_pro`). head.json has none
    /// (its "not readable" is decided apart, with a signed try first).
    pub fn is_refusal(self, code: &str) -> bool {
        match self {
            Followed::Head => false,
            Followed::FeedHead => matches!(
                code,
                "watch_not_set" | "watch_requires_pro" | "watch_not_configured"
            ),
        }
    }

    /// Whether the WebSocket upgrades a watcher of an agent that has
    /// published nothing yet (head.json's does, and sends the first head
    /// when it comes; so an upgrade refused `404 capsule_not_found` there
    /// can only mean "private"). The feed's is admitted as a read is.
    pub fn upgrades_unpublished(self) -> bool {
        self == Followed::Head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentId {
        AgentId::parse(&"a".repeat(64)).unwrap()
    }

    #[test]
    fn where_each_document_is_read_and_pushed() {
        let a = "a".repeat(64);
        let id = agent();
        assert_eq!(Followed::Head.doc_path(&id), format!("/self/{a}/head.json"));
        assert_eq!(Followed::Head.socket_path(&id), format!("/self/{a}/watch"));
        assert_eq!(
            Followed::FeedHead.doc_path(&id),
            format!("/api/v1/watch/head?agent_id={a}")
        );
        assert_eq!(
            Followed::FeedHead.socket_path(&id),
            format!("/api/v1/watch/socket?agent_id={a}")
        );
        assert_eq!(Followed::default(), Followed::Head);
    }

    #[test]
    fn only_the_feeds_own_refusals_end_a_feed_watch() {
        for code in [
            "watch_not_set",
            "watch_requires_pro",
            "watch_not_configured",
        ] {
            assert!(Followed::FeedHead.is_refusal(code), "{code}");
            assert!(!Followed::Head.is_refusal(code), "{code}");
        }
        // Retried (or decided apart): not refusals of either.
        for code in [
            "capsule_not_found",
            "upstream_unavailable",
            "rate_limited",
            "read_signature_invalid",
            "websocket_required",
        ] {
            assert!(!Followed::FeedHead.is_refusal(code), "{code}");
            assert!(!Followed::Head.is_refusal(code), "{code}");
        }
        assert!(Followed::Head.upgrades_unpublished());
        assert!(!Followed::FeedHead.upgrades_unpublished());
    }
}
