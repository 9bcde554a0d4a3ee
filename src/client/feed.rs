//! An agent's projected watch feed (docs/PROTOCOL.md §15), as `selfcap
//! feed` reads it: one document, signed when the agent's capsule is private
//! to this reader (a watch is capsule content), refusals mapped like every
//! read's.

use super::exchange::read_error;
use super::http::Request;
use super::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::urls::FeedDoc;

impl Client {
    /// `doc` of `agent`'s projected feed (default: this identity's), as
    /// served; `since` (a `watch_cursor`) asks `latest` for what is new.
    pub fn feed(
        &self,
        agent: Option<&AgentId>,
        doc: FeedDoc,
        since: Option<&str>,
    ) -> Result<Json, Error> {
        let target = self.target(agent)?;
        let mut url = self.service_url(&format!("{}?agent_id={target}", doc.path()))?;
        if let Some(c) = since {
            url.push_str("&since=");
            url.push_str(c);
        }
        let (req, resp) = self.read_doc(&target, Request::get(url))?;
        if resp.status != 200 {
            return Err(read_error(&req, &resp));
        }
        json::parse(&resp.body)
            .map_err(|e| Error::Protocol(format!("the feed's {} is not JSON: {e}", doc.path())))
    }
}
