//! What the client asks the service without writing: bootstrap (a POST, but
//! stateless on the service's side), head.json, capsule.json, history.json
//! and export.json. Each answer is checked against the protocol before it is
//! trusted: a head for another agent, or a capsule that is not canonical or
//! does not hash to its ETag, is an error, never data. Reads of an agent's
//! documents go through `Client::read_doc`, which signs them when the
//! capsule is (or may be) private (docs/PROTOCOL.md §12).

use super::exchange::{conditional_get, etag_names, read_error};
use super::http::Request;
use super::state::{HeadCache, Service};
use super::wire::{Bootstrap, Head};
use super::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::jcs::{self, normalize_cursor};
use crate::core::json::{self, Json};
use crate::core::operator::meta::MetaBody;
use crate::core::urls::{Doc, BOOTSTRAP_PATH};

/// What `head` found.
#[derive(Debug, Clone, PartialEq, Eq)]
// A short-lived return value, matched at once: boxing the head would only add noise.
#[allow(clippy::large_enum_variant)]
pub enum HeadOutcome {
    /// 304: the cursor is still the stored ETag's.
    Unchanged {
        /// The ETag asked with (the cursor's hex), still current.
        etag: String,
    },
    /// 200: a head (new, or seen for the first time).
    Changed {
        /// The head as the service sent it, already checked to be the
        /// asked agent's.
        head: Head,
    },
}

/// A fetched capsule: the exact body (`JCS(capsule)`) and its cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    /// The body exactly as served: the capsule's RFC 8785 bytes, which is
    /// what the agent signed (`selfcap get --json` prints these bytes).
    pub body: Vec<u8>,
    /// The body parsed.
    pub capsule: Json,
    /// `sha256:<hex>` of the body, matched against the ETag when there is one.
    pub cursor: String,
}

impl Client {
    /// `POST /api/v1/self/bootstrap`; stores the URLs it returns.
    pub fn bootstrap(&self) -> Result<Bootstrap, Error> {
        let key = self.key()?;
        let base = self.base_url()?;
        // The service derives the agent id from the key it is given: the
        // genesis key, which after a rotation is no longer the one in `key`.
        let genesis = match self.state.identity()? {
            Some(id) if key.key_index() > 0 => id.genesis_key_hex().to_owned(),
            _ => key.public_key().to_hex(),
        };
        let body = serde_json::json!({ "public_key": genesis });
        let req = Request::json(
            "POST",
            self.service_url(BOOTSTRAP_PATH)?,
            body.to_string().into_bytes(),
        );
        let (resp, _) = self.exchange(&req)?;
        if resp.status != 200 {
            return Err(read_error(&req, &resp));
        }
        let b: Bootstrap = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Protocol(format!("bootstrap answer: {e}")))?;
        if b.agent_id != key.agent_id().as_str() || b.public_key != genesis {
            return Err(Error::Protocol(
                "bootstrap returned another agent id or public key than ours".into(),
            ));
        }
        self.state.save_service(&Service {
            base_url: base,
            head_url: b.head_url.clone(),
            capsule_url: b.capsule_url.clone(),
            limits: b.limits.clone(),
        })?;
        Ok(b)
    }

    /// `GET head.json`, conditional on `etag` when given. `Ok(None)`: 404.
    pub fn fetch_head(
        &self,
        agent: &AgentId,
        etag: Option<&str>,
    ) -> Result<Option<HeadOutcome>, Error> {
        let req = conditional_get(self.head_url(agent)?, etag);
        let (req, resp) = self.read_doc(agent, req)?;
        match resp.status {
            304 => Ok(Some(HeadOutcome::Unchanged {
                etag: etag.unwrap_or_default().to_string(),
            })),
            200 => {
                let head: Head = serde_json::from_slice(&resp.body)
                    .map_err(|e| Error::Protocol(format!("head.json: {e}")))?;
                if head.agent_id != agent.as_str() {
                    return Err(Error::Protocol("head.json is for another agent".into()));
                }
                Ok(Some(HeadOutcome::Changed { head }))
            }
            404 => match read_error(&req, &resp) {
                Error::NotFound(_) => Ok(None),
                other => Err(other),
            },
            _ => Err(read_error(&req, &resp)),
        }
    }

    /// `head`: for our own agent, revalidates the stored ETag and stores
    /// what it sees; for another agent, a plain read.
    pub fn head(&self, agent: Option<&AgentId>) -> Result<HeadOutcome, Error> {
        let target = self.target(agent)?;
        // Without an identity (an anonymous reader) nothing is ours.
        let is_own = self.agent_id().ok().as_ref() == Some(&target);
        let cached = if is_own {
            self.state.head_cache()?
        } else {
            None
        };
        let etag = cached.as_ref().map(|c| c.etag.as_str());
        match self.fetch_head(&target, etag)? {
            None => Err(Error::NotFound(if is_own {
                format!("no capsule published yet for agent {target}")
            } else {
                format!(
                    "no capsule published yet for agent {target}, or it is private and this \
                     identity is not granted READ_HEAD"
                )
            })),
            Some(HeadOutcome::Changed { head }) => {
                if is_own {
                    self.state.save_head_cache(&HeadCache {
                        etag: head.etag(),
                        head: Some(head.clone()),
                    })?;
                }
                Ok(HeadOutcome::Changed { head })
            }
            Some(unchanged) => Ok(unchanged),
        }
    }

    /// `GET capsule.json`: the exact body, checked against its ETag.
    pub fn get(&self, agent: Option<&AgentId>) -> Result<Fetched, Error> {
        let target = self.target(agent)?;
        let req = Request::get(self.capsule_url(&target)?);
        let (req, resp) = self.read_doc(&target, req)?;
        if resp.status != 200 {
            return Err(read_error(&req, &resp));
        }
        let capsule = json::parse(&resp.body)
            .map_err(|e| Error::Protocol(format!("capsule.json is not valid JSON: {e}")))?;
        let cursor = jcs::cursor_of_canonical(&resp.body);
        if jcs::canonical_bytes(&capsule) != resp.body {
            return Err(Error::Protocol(
                "capsule.json is not in canonical (RFC 8785) form".into(),
            ));
        }
        if let Some(tag) = resp.header("etag") {
            if !etag_names(tag, &cursor) {
                return Err(Error::Protocol(
                    "capsule.json does not hash to its ETag".into(),
                ));
            }
        }
        Ok(Fetched {
            body: resp.body,
            capsule,
            cursor,
        })
    }

    /// `GET meta.json` (docs/PROTOCOL.md §16): the agent's writes and
    /// refusals by reason code. Read with head.json's access, so it is
    /// signed when head.json would be (a private capsule's owner or
    /// granted reader); anyone else gets the miss of an agent that never
    /// published.
    pub fn meta(&self, agent: Option<&AgentId>) -> Result<MetaBody, Error> {
        let target = self.target(agent)?;
        let req = Request::get(self.doc_url(&target, Doc::Meta)?);
        let (req, resp) = self.read_doc(&target, req)?;
        if resp.status != 200 {
            return Err(read_error(&req, &resp));
        }
        let meta: MetaBody = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Protocol(format!("meta.json is not what §16 says: {e}")))?;
        if meta.agent_id != target.as_str() {
            return Err(Error::Protocol("meta.json is for another agent".into()));
        }
        Ok(meta)
    }

    /// `GET history.json`: one page of retained versions, newest first
    /// (`since`: only those newer than that cursor). The body as served.
    pub fn history(
        &self,
        agent: Option<&AgentId>,
        since: Option<&str>,
        limit: Option<u32>,
    ) -> Result<serde_json::Value, Error> {
        let target = self.target(agent)?;
        let mut query = Vec::new();
        if let Some(c) = since {
            // Spelled as the service spells it, so its answer can be cached.
            let c = normalize_cursor(c).ok_or_else(|| {
                Error::local(format!(
                    "not a cursor: {c:?} (expected sha256:<64 hex> or the 64 hex digits)"
                ))
            })?;
            query.push(format!("since={c}"));
        }
        if let Some(n) = limit {
            query.push(format!("limit={n}"));
        }
        let mut url = self.doc_url(&target, Doc::History)?;
        if !query.is_empty() {
            url = format!("{url}?{}", query.join("&"));
        }
        let body = self.read_history_ok(&target, Request::get(url))?;
        serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("history.json: {e}")))
    }

    /// `GET export.json`: the agent's retained chain as an offline bundle,
    /// the exact bytes served (checked to be JSON).
    pub fn export_raw(&self, agent: Option<&AgentId>) -> Result<Vec<u8>, Error> {
        self.fetch_export(agent).map(|(body, _)| body)
    }

    /// `GET export.json`, parsed.
    pub fn export(&self, agent: Option<&AgentId>) -> Result<Json, Error> {
        self.fetch_export(agent).map(|(_, bundle)| bundle)
    }

    fn fetch_export(&self, agent: Option<&AgentId>) -> Result<(Vec<u8>, Json), Error> {
        let target = self.target(agent)?;
        let url = self.doc_url(&target, Doc::Export)?;
        let body = self.read_history_ok(&target, Request::get(url))?;
        let bundle =
            json::parse(&body).map_err(|e| Error::Protocol(format!("export.json: {e}")))?;
        Ok((body, bundle))
    }
}
