//! The local picture `selfcap status` prints: the identity, the service,
//! the last accepted write against the desired capsule, the tier as best
//! known, and a key event left pending. It reads only the state directory
//! (no network). It sits above every module whose state it sums up: the
//! pending key event is `keys`', the tier `upgrade`'s.

use super::{Client, Error};
use crate::core::jcs;

/// The local picture (no network).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Status {
    /// This identity's agent id.
    pub agent_id: String,
    /// Its public key (hex).
    pub public_key: String,
    /// The state directory, so the operator knows which files are meant.
    pub state_dir: String,
    /// The service URL in use (`None`: not bootstrapped, and no `--url`).
    pub base_url: Option<String>,
    /// The seq of the last accepted write (`None`: nothing published).
    pub published_seq: Option<u64>,
    /// Its cursor.
    pub published_cursor: Option<String>,
    /// The cursor of capsule.json (`None`: no desired capsule yet).
    pub desired_cursor: Option<String>,
    /// The desired capsule differs from the last accepted one.
    pub dirty: bool,
    /// The tier (`free`, `pro`, `plus`) from the last head.json seen (or the
    /// last credited upgrade, when newer); `None` when neither is known.
    pub tier: Option<String>,
    /// When the paid tier ends (`None` on free or unknown).
    pub paid_until: Option<String>,
    /// When that tier was read (the head's `generated_at`, or the credit's time).
    pub tier_as_of: Option<String>,
    /// The current key's index in the agent's key log (§14), once it rotated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_index: Option<u64>,
    /// A key event signed and not yet seen accepted (rotation.json's kind):
    /// the key command of that name finishes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_event_pending: Option<String>,
}

impl Client {
    /// The local picture: identity, service, last accepted write, dirtiness.
    pub fn status(&self) -> Result<Status, Error> {
        let key = self.key()?;
        let published = self.state.published()?;
        let desired = self.state.desired()?.map(|d| jcs::cursor(&d));
        let dirty = match (&desired, &published) {
            (Some(d), Some(p)) => *d != p.cursor,
            (Some(_), None) => true,
            (None, _) => false,
        };
        // Best effort: a damaged upgrade.json is `upgrade`'s to report.
        let tier = self.tier().ok().flatten();
        Ok(Status {
            agent_id: key.agent_id().to_string(),
            public_key: key.public_key().to_hex(),
            state_dir: self.state.path().display().to_string(),
            base_url: self.base_url().ok(),
            published_seq: published.as_ref().map(|p| p.seq),
            published_cursor: published.map(|p| p.cursor),
            desired_cursor: desired,
            dirty,
            tier: tier.as_ref().map(|t| t.tier.clone()),
            paid_until: tier.as_ref().and_then(|t| t.paid_until.clone()),
            tier_as_of: tier.map(|t| t.as_of),
            key_index: Some(key.key_index()).filter(|i| *i > 0),
            key_event_pending: self.pending_event().ok().flatten().map(|p| p.kind),
        })
    }
}
