//! The sealed history, checked on the client's side by the core's own
//! verifier ([`crate::core::history::verify_export_with`]): an export bundle
//! against a keyring the client chose, never only the keys the bundle brings.

use super::http::Request;
use super::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::history::{self, Keyring, Report, VerifyOptions};
use crate::core::json::{self, Json};
use crate::core::urls::KEYS_PATH;
use std::fmt;

/// A keys document that is not a usable keyring: every problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringError {
    /// One line per problem, all of them (not just the first), so one edit
    /// of the keys file can fix everything.
    pub problems: Vec<String>,
}

impl fmt::Display for KeyringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

impl std::error::Error for KeyringError {}

impl Client {
    /// `GET /api/v1/self/keys`: the service keyring seals are checked against.
    pub fn keyring(&self) -> Result<Keyring, Error> {
        let body = self.read_ok(&Request::get(self.service_url(KEYS_PATH)?))?;
        let doc = json::parse(&body).map_err(|e| Error::Protocol(format!("keys: {e}")))?;
        keyring_of(&doc).map_err(|e| Error::Protocol(format!("keys: {e}")))
    }

    /// Downloads the agent's export and verifies it offline with the core,
    /// trusting the service's published keyring (or `keys`, when given)
    /// rather than the keys inside the bundle. For our own agent, a chain
    /// that ends before the last write recorded here is called out.
    pub fn verify(&self, agent: Option<&AgentId>, keys: Option<Keyring>) -> Result<Report, Error> {
        self.verify_export(agent, keys).map(|(report, _)| report)
    }

    /// [`Client::verify`], with the bundle it verified (its `key_log`, the
    /// agent's key events, is what `verify` shows besides the report).
    pub fn verify_export(
        &self,
        agent: Option<&AgentId>,
        keys: Option<Keyring>,
    ) -> Result<(Report, Json), Error> {
        let target = self.target(agent)?;
        let bundle = self.export(Some(&target))?;
        let trusted = match keys {
            Some(k) => k,
            None => self.keyring()?,
        };
        let mut report = verify_bundle(&bundle, Some(trusted), Some(target.as_str()));
        if self.agent_id().ok().as_ref() == Some(&target) {
            if let Some(p) = self.state.published()? {
                if report.seq.is_none_or(|s| s < p.seq) {
                    report.warnings.push(format!(
                        "the chain ends at seq {} but this client recorded an accepted write at seq {}",
                        report.seq.map_or("-".into(), |s| s.to_string()),
                        p.seq
                    ));
                }
            }
        }
        Ok((report, bundle))
    }
}

/// A keyring from a `GET /api/v1/self/keys` body (`{"current", "keys"}`).
pub fn keyring_of(doc: &Json) -> Result<Keyring, KeyringError> {
    Keyring::from_keys_doc(doc).map_err(|problems| KeyringError { problems })
}

/// Verifies an export bundle offline with the core's `verify_export`:
/// against `trusted` keys when given (else the bundle's own, with a warning),
/// and bound to `agent` when given. Needs no network.
pub fn verify_bundle(bundle: &Json, trusted: Option<Keyring>, agent: Option<&str>) -> Report {
    let opts = VerifyOptions {
        trusted_keys: trusted,
        agent_id: agent.map(str::to_owned),
        now_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64),
    };
    history::verify_export_with(bundle, &opts)
}
