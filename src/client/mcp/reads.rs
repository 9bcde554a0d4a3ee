//! The reading tools: `self_read` (capsule.json), `self_subscribe`
//! (head.json, conditional on an ETag), `self_history` and `self_verify`
//! (the sealed history, checked here by the core's verifier). Each reads
//! any agent, this identity's by default; a private capsule is read with
//! this identity's signature, so a granted reader gets it and anyone else
//! gets the same "not found" as for a missing one.

use super::{to_value, ToolHost};
use crate::client::state::HeadCache;
use crate::client::{Error, HeadOutcome};
use crate::core::crypto::AgentId;
use crate::core::mcp::results::{self, Answer};

impl ToolHost {
    pub(super) fn read(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.get(Some(&target)) {
            Ok(f) => Ok(results::read(
                target.as_str(),
                &f.cursor,
                to_value(&f.capsule),
                Some(is_own),
            )),
            Err(Error::NotFound(m)) => Ok(results::error(
                "capsule_not_found",
                m,
                if is_own {
                    "No capsule published yet: use self_write (or self_rehydrate for unpublished local work)."
                } else {
                    "This agent has no capsule, or the agent_id is wrong."
                },
            )),
            Err(e) => Err(e),
        }
    }

    pub(super) fn subscribe(
        &self,
        agent: Option<AgentId>,
        etag: Option<String>,
    ) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.fetch_head(&target, etag.as_deref())? {
            None => Ok(results::error(
                "agent_not_found",
                format!("no capsule published for agent {target}"),
                "Check the agent_id; an agent appears once it has published.",
            )),
            Some(HeadOutcome::Unchanged { etag }) => Ok(results::unchanged(target.as_str(), &etag)),
            Some(HeadOutcome::Changed { head }) => {
                let etag = head.etag();
                if is_own {
                    // `status` and `self_upgrade` read the tier from here.
                    c.state().save_head_cache(&HeadCache {
                        etag: etag.clone(),
                        head: Some(head.clone()),
                    })?;
                }
                Ok(results::head(&head, &etag, Some(is_own)))
            }
        }
    }

    pub(super) fn history(
        &self,
        agent: Option<AgentId>,
        since: Option<String>,
        limit: Option<u32>,
    ) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.history(Some(&target), since.as_deref(), limit) {
            Ok(page) => Ok(results::history(&page, Some(is_own))),
            Err(Error::NotFound(m)) => Ok(results::error(
                "no_history",
                m,
                "No history for this agent (nothing published, or a since_cursor that is not retained: omit it).",
            )),
            Err(e) => Err(e),
        }
    }

    pub(super) fn verify(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, _) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.verify(Some(&target), None) {
            Ok(report) => Ok(results::verify(&report, "selfcap")),
            Err(Error::NotFound(m)) => Ok(results::error(
                "no_history",
                m,
                "Nothing to verify: this agent has published nothing.",
            )),
            Err(e) => Err(e),
        }
    }
}

impl ToolHost {
    /// `self_feed`: one document of a projected watch feed, as served (a
    /// refusal such as `watch_requires_pro` is the tool's error with its
    /// code and what to do).
    pub(super) fn feed(
        &self,
        agent: Option<AgentId>,
        doc: crate::core::urls::FeedDoc,
        since: Option<String>,
    ) -> Result<Answer, Error> {
        let (c, target, _) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        let body = c.feed(Some(&target), doc, since.as_deref())?;
        Ok(Answer::ok(super::to_value(&body)))
    }
}

impl ToolHost {
    /// `self_meta`: meta.json as served (read as head.json is: signed for a
    /// private capsule this identity may read).
    pub(super) fn meta(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.meta(Some(&target)) {
            Ok(m) => Ok(Answer::ok(serde_json::to_value(&m).unwrap_or_default())),
            Err(Error::NotFound(m)) => Ok(results::error(
                "capsule_not_found",
                m,
                if is_own {
                    "Nothing accepted yet: meta.json appears with your first accepted write."
                } else {
                    "This agent has published nothing, or its capsule is private to you."
                },
            )),
            Err(e) => Err(e),
        }
    }
}
