//! Local-first rehydration: after a restart, the agent's capsule from the
//! local copy of its last accepted write or from the service, whichever is
//! newer ([`super::resolve`] decides), so a restart never needs the network
//! and never silently goes back in time.

use super::reads::HeadOutcome;
use super::resolve::{resolve, Resolution, Side, Version};
use super::state::{self, Published};
use super::{Client, Error};
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::model::Capsule;
use crate::core::validate;

/// The result of local-first rehydration.
#[derive(Debug, Clone)]
pub struct Rehydrated {
    /// How the local copy and the service's compared (`LocalOnly` when the
    /// service could not be asked), reported so a surprise can be explained.
    pub resolution: Resolution,
    /// Whose copy won; it is now stored locally as the last accepted write.
    pub side: Side,
    /// The winning copy's seq.
    pub seq: u64,
    /// The winning copy's cursor (`sha256:<hex>`).
    pub cursor: String,
    /// The winning capsule as JSON (what `rehydrate --json` prints).
    pub capsule: Json,
    /// The typed, validated capsule (what the renderer takes).
    pub typed: Capsule,
    /// The service could not be asked; the local copy was used.
    pub offline: bool,
    /// Things the operator should know (stale read, unpublished edits, ...).
    pub warnings: Vec<String>,
}

impl Client {
    /// Local-first rehydration: compares the local copy of the last accepted
    /// write with the service's head, keeps the higher seq (ties agree),
    /// stores the winner locally and returns it validated. When the service
    /// cannot be reached, the local copy is used (and `offline` set).
    pub fn rehydrate(&self) -> Result<Rehydrated, Error> {
        let agent = self.agent_id()?;
        let local = self.state.published()?;
        let mut warnings = Vec::new();
        let (server, offline) = match self.fetch_head(&agent, None) {
            Ok(Some(HeadOutcome::Changed { head })) => (Some(head), false),
            Ok(_) => (None, false),
            Err(e @ Error::Unavailable(_)) if local.is_some() => {
                warnings.push(format!("{e}; using the local copy"));
                (None, true)
            }
            Err(e) => return Err(e),
        };
        let resolution = resolve(
            local.as_ref().map(|p| Version {
                seq: p.seq,
                cursor: &p.cursor,
            }),
            server.as_ref().map(|h| Version {
                seq: h.seq,
                cursor: &h.cursor,
            }),
        );
        match resolution {
            Resolution::LocalNewer => warnings.push(format!(
                "the service still shows seq {} (reads are cached); using the newer local copy",
                server.as_ref().map_or(0, |h| h.seq)
            )),
            Resolution::Diverged => warnings.push(
                "the local copy differs from what the service accepted at the same seq; \
                 using the service's"
                    .into(),
            ),
            _ => {}
        }
        let Some(side) = resolution.winner() else {
            return Err(Error::NotFound(format!(
                "nothing to rehydrate: no local copy and no capsule published for agent {agent}"
            )));
        };
        let winner = match (side, server) {
            (Side::Server, Some(head)) => {
                let fetched = self.get(Some(&agent))?;
                let head = if fetched.cursor == head.cursor {
                    head
                } else {
                    // The head moved between the two reads: read it again.
                    match self.fetch_head(&agent, None)? {
                        Some(HeadOutcome::Changed { head }) if head.cursor == fetched.cursor => {
                            head
                        }
                        _ => {
                            return Err(Error::Protocol(
                                "capsule.json does not match head.json's cursor".into(),
                            ))
                        }
                    }
                };
                let p = Published {
                    seq: head.seq,
                    cursor: head.cursor,
                    capsule: fetched.capsule,
                    recorded_at: Some(head.generated_at),
                };
                self.adopt(p.clone(), local.as_ref())?;
                p
            }
            _ => {
                let p = local.expect("a local winner exists");
                if self.state.desired()?.is_none() {
                    self.state.save_desired(&p.capsule)?;
                }
                p
            }
        };
        let typed = validate::validate_capsule(&winner.capsule).map_err(|v| {
            let codes: Vec<&str> = validate::codes(&v).iter().map(|c| c.as_str()).collect();
            Error::Protocol(format!(
                "the capsule fails the schema ({})",
                codes.join(", ")
            ))
        })?;
        if let Some(d) = self.state.desired()? {
            if jcs::cursor(&d) != winner.cursor {
                warnings.push(format!(
                    "{} has unpublished changes (not shown here): run `selfcap publish`",
                    self.state.file(state::DESIRED_FILE).display()
                ));
            }
        }
        Ok(Rehydrated {
            resolution: if offline {
                Resolution::LocalOnly
            } else {
                resolution
            },
            side,
            seq: winner.seq,
            cursor: winner.cursor,
            capsule: winner.capsule,
            typed,
            offline,
            warnings,
        })
    }
}
