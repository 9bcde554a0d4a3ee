//! Key rotation and recovery: an agent's **key log**, a hash-chained,
//! sealed, never-pruned list of key events that says which key speaks for
//! the agent at every point of its history.
//!
//! The agent id never changes: it is the SHA-256 of the genesis key. What
//! tells the owner from a thief holding the current key is a commitment made
//! *before* the leak (KERI's pre-rotation; `docs/PROTOCOL.md` §14 and
//! `docs/design/key-rotation.md`, "Prior art"): every establishment
//! event commits the SHA-256 of the next key, and a rotation must reveal that
//! key and be signed by it. The current key alone can never rotate.
//!
//! - [`event`]: one event as the agent signs it (the wire form, its digest,
//!   its signatures).
//! - [`state`]: the key state folded from a log, and the rules an event must
//!   pass against it: the one place both the service's acceptance and the
//!   offline verifier decide authority, freshness and windows, so they agree.
//! - [`log`]: the sealed records, the service's acceptance of a submission
//!   ([`log::KeyLog::accept`]), the offline verification of a served log, and
//!   the pin a client keeps against rollback and forks.
//! - [`served`]: the log as a reader gets it (head.json's summary, keys.json's
//!   body): the read path's part, and the only one compiled without the
//!   `core-full` feature.
//!
//! Times are the service's sealed `accepted_at`, so a window decided by the
//! service is decided the same way by anyone holding the log.

#![warn(missing_docs)]

#[cfg(feature = "core-full")]
pub mod build;
#[cfg(feature = "core-full")]
pub mod event;
#[cfg(feature = "core-full")]
pub mod log;
pub mod served;
#[cfg(feature = "core-full")]
pub mod state;
#[cfg(feature = "core-full")]
pub mod submit;
#[cfg(test)]
mod tests;

#[cfg(feature = "core-full")]
pub use event::{Change, KeyEvent, LastGood, RotationAuthority, Signatures, Supersedes};
#[cfg(feature = "core-full")]
pub use log::{
    verify_key_log, Accepted, Broken, KeyLog, KeyLogFailure, KeyLogReport, KeyRecord, Pin,
    PinCheck, Prefix, SealedKeyRecord, Submission, WriteLookup, Writes,
};
pub use served::{key_log_body, key_log_names, KeysSummary, PendingSummary};
#[cfg(feature = "core-full")]
pub use state::{Dispute, Earlier, Epoch, KeyState, PendingRecommit};

use sha2::{Digest as _, Sha256};

/// The `v` of every key event.
pub const KEYS_VERSION: &str = "selfcap-keys/1";
/// At most this many events per agent: rotations need a pre-committed key, so
/// only the owner can add them; the cap bounds what a careless owner stores.
pub const MAX_KEY_EVENTS: u64 = 256;
/// The recovery window when an inception does not choose one: 72 hours, as
/// did:plc's.
pub const DEFAULT_WINDOW_SEC: u64 = 72 * 3600;
/// The shortest recovery window an inception may fix (one day: an operator
/// must have time to notice).
pub const MIN_WINDOW_SEC: u64 = 86_400;
/// The longest (30 days: longer leaves a rotation provisional for too long).
pub const MAX_WINDOW_SEC: u64 = 30 * 86_400;

/// A SHA-256 digest of a public key's 32 raw bytes: what events commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of a public key.
    pub fn of_key(key: &crate::core::crypto::PublicKey) -> Digest {
        Digest(Sha256::digest(key.as_bytes()).into())
    }
    /// From exactly 64 lowercase hex characters.
    pub fn from_hex(s: &str) -> Option<Digest> {
        if !crate::core::crypto::is_lower_hex(s, 64) {
            return None;
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Digest(out))
    }
    /// 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}
