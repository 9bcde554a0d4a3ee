//! Key events as a client makes them: each kind built after the log's
//! state and signed by the keys that must sign it, in one place for every
//! client (the native one, the npm package's wasm). Whether the service will
//! accept one is [`super::KeyState::check`]'s call, which clients may run
//! first.

use super::event::{Change, KeyEvent, LastGood, RotationAuthority, Signatures, Supersedes};
use super::state::KeyState;
use super::Digest;
use crate::core::crypto::AgentKey;
use crate::core::json::Json;

fn unsigned() -> Signatures {
    Signatures {
        revealed: None,
        public: [0; 64],
    }
}

/// The inception of `genesis`'s agent: event 0, committing the next key's
/// digest (and an operator's recovery key's), with the recovery window the
/// agent keeps for life.
pub fn inception(
    genesis: &AgentKey,
    next: Digest,
    recovery: Option<Digest>,
    window_sec: u64,
) -> KeyEvent {
    KeyEvent {
        agent_id: genesis.agent_id(),
        index: 0,
        previous_hash: None,
        public_key: genesis.public_key(),
        next_key_digest: next,
        recovery_key_digest: recovery,
        change: Change::Inception {
            recovery_window_sec: window_sec,
        },
        signatures: unsigned(),
    }
    .sign(genesis, None)
}

/// What a rotation reveals and commits.
pub struct Rotation<'a> {
    /// Which commitment `revealed` answers.
    pub authority: RotationAuthority,
    /// The committed key, revealed (it signs).
    pub revealed: &'a AgentKey,
    /// The key made current (it signs; may be `revealed`).
    pub current: &'a AgentKey,
    /// The next key's digest.
    pub next: Digest,
    /// The recovery key's digest.
    pub recovery: Option<Digest>,
    /// A recovery's superseded next-key rotation.
    pub supersedes: Option<Supersedes>,
    /// The outgoing key's last good write (its key was stolen).
    pub disputes_after: Option<LastGood>,
}

/// The next event after `state`: a rotation.
pub fn rotation(state: &KeyState, r: Rotation<'_>) -> KeyEvent {
    KeyEvent {
        agent_id: state.agent_id.clone(),
        index: state.length,
        previous_hash: Some(state.head_hash.clone()),
        public_key: r.current.public_key(),
        next_key_digest: r.next,
        recovery_key_digest: r.recovery,
        change: Change::Rotation {
            authority: r.authority,
            revealed_key: r.revealed.public_key(),
            supersedes: r.supersedes,
            disputes_after: r.disputes_after,
        },
        signatures: unsigned(),
    }
    .sign(r.current, Some(r.revealed))
}

/// The next event after `state`: a recommit by the current key.
pub fn recommit(
    state: &KeyState,
    current: &AgentKey,
    next: Digest,
    recovery: Option<Digest>,
) -> KeyEvent {
    KeyEvent {
        agent_id: state.agent_id.clone(),
        index: state.length,
        previous_hash: Some(state.head_hash.clone()),
        public_key: current.public_key(),
        next_key_digest: next,
        recovery_key_digest: recovery,
        change: Change::Recommit,
        signatures: unsigned(),
    }
    .sign(current, None)
}

/// `POST keys.json`'s body: `{"event", "envelope"?}` in RFC 8785 form (what
/// a resend repeats byte for byte).
pub fn post_body(event: &Json, envelope: Option<&Json>) -> Vec<u8> {
    let mut m = vec![("event".to_owned(), event.clone())];
    if let Some(e) = envelope {
        m.push(("envelope".to_owned(), e.clone()));
    }
    crate::core::jcs::canonical_bytes(&Json::Object(m))
}
