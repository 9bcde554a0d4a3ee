//! The operator tools (`admin_agents`, `admin_agent`, `admin_stats`): the
//! operator API (docs/PROTOCOL.md §17) with the token the server was
//! started with. Read-only; offered only when the token is set
//! ([`ToolHost::offers`]), so an agent's ordinary server never lists them.

use super::ToolHost;
use crate::client::admin::{AdminToken, AgentsQuery};
use crate::client::state::StateDir;
use crate::client::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::mcp::results::Answer;

impl ToolHost {
    /// The token and a client for the service (an identity's stored URL
    /// when there is one; no key is used).
    fn operator(&self) -> Result<(&AdminToken, Client), Error> {
        let token = self.admin_token.as_ref().ok_or_else(|| {
            Error::Local("this server was started without SELFCAP_ADMIN_TOKEN".into())
        })?;
        let state = self
            .existing()
            .unwrap_or_else(|| StateDir::new("/nonexistent/selfcap"));
        Ok((token, self.client_for(state)))
    }

    pub(super) fn admin_agents(
        &self,
        cursor: Option<String>,
        limit: Option<u32>,
        tier: Option<Tier>,
        refused_24h: bool,
    ) -> Result<Answer, Error> {
        let (token, c) = self.operator()?;
        let q = AgentsQuery {
            cursor,
            limit,
            tier,
            refused_24h,
        };
        let page = c.admin_agents(token, &q)?;
        Ok(Answer::ok(serde_json::to_value(&page).unwrap_or_default()))
    }

    pub(super) fn admin_agent(&self, agent: &AgentId) -> Result<Answer, Error> {
        let (token, c) = self.operator()?;
        let r = c.admin_agent(token, agent)?;
        Ok(Answer::ok(serde_json::to_value(&r).unwrap_or_default()))
    }

    pub(super) fn admin_stats(&self) -> Result<Answer, Error> {
        let (token, c) = self.operator()?;
        Ok(Answer::ok(c.admin_stats(token)?))
    }
}
