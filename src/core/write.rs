//! The write decision, start to finish, as pure functions over the agent's
//! stored state. The order of the checks is part of the contract:
//!
//! body cap -> JSON -> envelope shape -> signature -> seq -> cooldown ->
//! schema -> safety -> size -> per-agent quota
//!
//! (The per-IP new-agent quota needs another Durable Object, so the caller
//! checks it between `check` and `commit` when [`Candidate::is_new_agent`].)
//! Nothing before the signature check looks at stored state, so an
//! unauthenticated request learns nothing about the agent.

use crate::core::crypto::{AgentId, PublicKey};
use crate::core::envelope::{self, EnvelopeError, ShapeProblem, Signed};
use crate::core::history::{
    self, ChainHead, Entry, HistoryIndex, Keyring, NewVersion, ServiceKey, WriteChecked,
};
use crate::core::jcs;
use crate::core::json::{self, Json, JsonError};
use crate::core::key_log::{KeyState, KeysSummary};
use crate::core::limits::{Tier, TierLimits, TierTable, HEAD_TTL_SEC, MAX_BODY_BYTES};
use crate::core::operator::refusals::Refusals;
use crate::core::operator::stats::{Pending, Report};
use crate::core::quota::{Cooldown, Window};
use crate::core::reason::{self, ReasonCode as R};
use crate::core::record::{Record, RecordWrites, WritesView};
use crate::core::safety::{self, Finding};
use crate::core::time::{rfc3339, secs_until};
use crate::core::upgrade::invoice::Entitlement;
use crate::core::urls::Doc;
use crate::core::validate::{self, Violation};
use serde::{Deserialize, Serialize};

pub use crate::core::envelope::{Signature, Signer};

/// The largest seq: 2^53 - 1, the largest integer every JSON reader holds
/// exactly. An agent whose last accepted seq is this can write no more.
pub const MAX_SEQ: u64 = json::MAX_SAFE_INTEGER;

/// Everything the agent's Durable Object persists about it (one value).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// Paid time per plan (the USDC upgrade); the tier in force at a given
    /// time follows from it ([`AgentState::tier_at`]). Expiry needs no
    /// event: a lapsed plan simply stops counting.
    #[serde(default)]
    pub paid: Entitlement,
    /// The last accepted write; `None` until the first one.
    pub published: Option<Published>,
    /// Accepted writes in the rolling window.
    pub writes: Window,
    /// The retry cooldown that repeated authenticated rejects build up.
    pub cooldown: Cooldown,
    /// Accepted writes ever (history counts from this).
    pub total_writes: u64,
    /// The sealed head of the history chain (`None` before the first sealed
    /// write). The retained entries and their index live next to the state.
    #[serde(default)]
    pub chain: Option<ChainHead>,
    /// The key log's summary as of its last event (`None`: no key log, the
    /// genesis key signs). The log itself is stored beside the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeysSummary>,
    /// An x402 settlement the agent's object finishes on its own (`None`:
    /// none in flight). Kept here because every commit writes the state, so
    /// whatever else re-arms the object's one alarm knows not to drop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x402_due: Option<X402Due>,
    /// When the first write was accepted (Unix ms; `None` for agents whose
    /// first write predates this field, and before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_write_ms: Option<u64>,
    /// Refused writes that authenticated as the agent (meta.json).
    #[serde(default, skip_serializing_if = "is_default")]
    pub refusals: Refusals,
    /// What the agent's object still has to tell its shard of the
    /// deployment's totals (`core::operator::stats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Pending>,
    /// Until when (Unix ms) a location may still keep a projected head
    /// (§15) made from a capsule with a `watch` that a later write replaced
    /// ([`PROJECTION_KEPT_MS`] after that write); `None` when none was
    /// replaced that recently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected_until_ms: Option<u64>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// How long a location may keep a projected head (§15) made from a record
/// after a write replaced it: the record can reach a location's KV reads up
/// to 60 s late, and the copy made of it is kept for its `max-age`, 60 s.
pub const PROJECTION_KEPT_MS: u64 = 120_000;

/// When the agent's object must next look at an x402 settlement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X402Due {
    /// The agent (an object does not reliably know its own name, and the
    /// alarm that credits needs it).
    pub agent_id: String,
    /// When to look next, Unix ms.
    pub check_at_ms: u64,
}

/// The last accepted write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The accepted envelope's `seq` (0..=2^53-1); the next write must be strictly greater.
    pub seq: u64,
    /// `sha256:` + lowercase hex of SHA-256 over the capsule's RFC 8785 bytes.
    pub cursor: String,
    /// The cursor before this write; `None` after the agent's first write.
    pub prev_cursor: Option<String>,
    /// Whether this write moved the cursor (`false` when an identical capsule was
    /// republished at a higher seq; then `prev_cursor == cursor`).
    pub changed: bool,
    /// The capsule exactly as accepted; served and hashed in its RFC 8785 form.
    pub capsule: Json,
    /// When the write was accepted, Unix ms.
    pub updated_at_ms: u64,
}

/// A write that passed every check `check` can make.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The agent id from the path (any `agent_id` in the envelope or capsule equals it).
    pub agent_id: AgentId,
    /// The envelope's seq: strictly greater than the stored one, 0..=2^53-1.
    pub seq: u64,
    /// The envelope's capsule, schema- and safety-checked.
    pub capsule: Json,
    /// JCS bytes of the capsule (its size is what the tier caps).
    pub canonical: String,
    /// The new cursor: `sha256:` + lowercase hex of SHA-256 over `canonical`.
    pub cursor: String,
    /// The signer's key; `sha256(public_key)` is `agent_id`.
    pub public_key: PublicKey,
    /// The agent's signature, lowercase hex, exactly as sent.
    pub signature: String,
    /// The signed message: SHA-256 over the RFC 8785 bytes of
    /// `{agent_id, seq, capsule}` (32 raw bytes, not hex).
    pub digest: [u8; 32],
    /// Size of the PUT body in bytes (for the decision log).
    pub body_bytes: usize,
    is_new_agent: bool,
    /// What this check established, for the history report (so the object
    /// does not scan and verify the same bytes again when it appends).
    checked: WriteChecked,
}

impl Candidate {
    /// This write would create the agent (so it needs a per-IP new-agent slot).
    pub fn is_new_agent(&self) -> bool {
        self.is_new_agent
    }
}

/// A `findings` entry: a schema violation or a safety finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FindingOut {
    /// A schema or envelope problem: `{"code", "path", "message"}` on the wire.
    Schema(Violation),
    /// A safety-scanner hit: `{"class", "rule", "path", "via"?}` on the wire, never the matched text.
    Safety(Finding),
}

/// A refused write: the response body, plus what the caller needs to log it
/// and to count it toward the cooldown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    accepted: bool,
    /// Every code of the failing stage, de-duplicated, in reporting order; the first
    /// sets the HTTP status.
    pub reason_codes: Vec<R>,
    /// Human-readable explanation (`detail` on the wire).
    pub detail: String,
    /// Whole seconds until a write may succeed (at least 1); present on every 429.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_sec: Option<u64>,
    /// When a write may succeed again, RFC 3339 UTC (whole seconds); present on every 429.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_write_at: Option<String>,
    /// Schema/envelope violations or safety findings behind the codes; omitted when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingOut>,
    /// The cap that was exceeded, in bytes: [`MAX_BODY_BYTES`] for the body, the tier's
    /// `max_capsule_bytes` for the RFC 8785 capsule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// u64, not usize: a declared `Content-Length` can exceed 2^32, and in
    /// wasm a usize is 32 bits (it was reported wrapped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_bytes: Option<u64>,
    /// The envelope's seq, when it got that far (for logs only).
    #[serde(skip)]
    pub seq: Option<u64>,
    /// Set when the request was authenticated and the reject counts toward
    /// the cooldown: the seq and the signed digest (hex).
    #[serde(skip)]
    counts_toward_cooldown: Option<(u64, String)>,
    /// The body authenticated as the agent (its current key signed it):
    /// the refusal is counted in meta.json, where a stranger's is not.
    #[serde(skip)]
    by_the_agent: bool,
}

impl Rejection {
    /// A write signed by a key that is not the agent's: the same answer
    /// from the Worker's stateless pre-check (not the genesis key) and from
    /// the agent's object (not a key of its key log), so a stranger cannot
    /// tell an agent with a key log, a private one, from one that never
    /// published.
    pub fn not_the_agents_key() -> Rejection {
        Rejection::one(
            R::BadSignature,
            "public_key is not this agent's key: its genesis key (whose SHA-256 is the agent id), or the current key of its key log",
        )
    }

    fn new(mut codes: Vec<R>, detail: impl Into<String>) -> Rejection {
        reason::normalize(&mut codes);
        Rejection {
            accepted: false,
            reason_codes: codes,
            detail: detail.into(),
            retry_after_sec: None,
            next_write_at: None,
            findings: Vec::new(),
            max_bytes: None,
            observed_bytes: None,
            seq: None,
            counts_toward_cooldown: None,
            by_the_agent: false,
        }
    }
    fn one(code: R, detail: impl Into<String>) -> Rejection {
        Rejection::new(vec![code], detail)
    }
    fn wait_until(mut self, now_ms: u64, until_ms: u64) -> Rejection {
        self.retry_after_sec = Some(secs_until(now_ms, until_ms).max(1));
        self.next_write_at = Some(rfc3339(until_ms));
        self
    }
    fn authenticated(mut self, c: &Signed) -> Rejection {
        self.seq = Some(c.seq);
        self.by_the_agent = true;
        if !self.reason_codes.contains(&R::ReplaySeq) {
            self.counts_toward_cooldown = Some((c.seq, hex::encode(c.digest)));
        }
        self
    }
    /// This refusal without a cooldown count (a key submission's envelope:
    /// failed key events never start a cooldown).
    pub fn uncounted(mut self) -> Rejection {
        self.counts_toward_cooldown = None;
        self
    }
    /// The HTTP status: that of the first code in reporting order.
    pub fn status(&self) -> u16 {
        self.reason_codes.first().map_or(400, |c| c.http_status())
    }
    /// The per-IP new-agent quota refusal (decided by the caller).
    pub fn new_agent_ip_quota(c: &Candidate, now_ms: u64, reset_at_ms: u64) -> Rejection {
        let mut r = Rejection::one(
            R::NewAgentIpQuotaExceeded,
            "this client address created too many new agents in the last 24 hours",
        )
        .wait_until(now_ms, reset_at_ms);
        r.seq = Some(c.seq);
        r.counts_toward_cooldown = Some((c.seq, hex::encode(c.digest)));
        r.by_the_agent = true;
        r
    }
    /// A body the Worker could not read to its end (cut short before its
    /// `Content-Length`, or broken off by the client): the request is
    /// malformed, so `invalid_json` (400), never an internal failure.
    pub fn unreadable_body() -> Rejection {
        Rejection::one(
            R::InvalidJson,
            "the request body ended before its declared Content-Length or could not be read",
        )
    }
    /// The body-cap refusal (also used by the Worker, which stops reading a
    /// body at the cap and so never holds more than `MAX_BODY_BYTES + 1`).
    pub fn payload_too_large(observed_bytes: u64) -> Rejection {
        Rejection::body_over(observed_bytes, MAX_BODY_BYTES)
    }
    /// A body over `cap` bytes (a key submission's cap is larger than a PUT's).
    pub fn body_over(observed_bytes: u64, cap: usize) -> Rejection {
        let mut r = Rejection::one(
            R::PayloadTooLarge,
            format!("request body is {observed_bytes} bytes or more; the cap is {cap}"),
        );
        r.max_bytes = Some(cap);
        r.observed_bytes = Some(observed_bytes);
        r
    }
}

/// A refusal decided outside the write pipeline (a key event), answered
/// in the write's shape; it never counts toward the cooldown.
impl From<reason::Refusal> for Rejection {
    fn from(r: reason::Refusal) -> Rejection {
        let detail = r.detail_or_code().to_owned();
        let mut out = Rejection::one(r.code, detail);
        out.retry_after_sec = r.retry_after_sec;
        out
    }
}

/// The wording of each envelope refusal (`core::envelope` says only what
/// was wrong). An unknown member's key is echoed only when the scanner
/// finds nothing in it (`validate::unknown_field_path`).
impl From<EnvelopeError> for Rejection {
    fn from(e: EnvelopeError) -> Rejection {
        match e {
            EnvelopeError::TooLarge(observed) => Rejection::payload_too_large(observed),
            EnvelopeError::Json(e) => {
                let what = match e {
                    JsonError::DuplicateKey(_) => "duplicate object key".to_string(),
                    other => other.to_string(),
                };
                Rejection::one(
                    R::InvalidJson,
                    format!("body is not acceptable JSON: {what}"),
                )
            }
            EnvelopeError::NotAnObject => Rejection::one(
                R::InvalidJson,
                "body must be a JSON object (the signed envelope)",
            ),
            EnvelopeError::Shape(problems) => {
                let shape: Vec<Violation> = problems.into_iter().map(violation_of).collect();
                let mut r = Rejection::new(
                    validate::codes(&shape),
                    format!("envelope is malformed ({} problems)", shape.len()),
                );
                r.findings = shape.into_iter().map(FindingOut::Schema).collect();
                r
            }
            EnvelopeError::BadSignature(why) => Rejection::one(R::BadSignature, why),
            EnvelopeError::NotTheAgentsKey => Rejection::not_the_agents_key(),
        }
    }
}

fn violation_of(problem: ShapeProblem) -> Violation {
    let (code, path, message) = match problem {
        ShapeProblem::UnknownField(key) => (
            R::UnknownField,
            validate::unknown_field_path("$", &key),
            "not an envelope field",
        ),
        ShapeProblem::BadSeq => (
            R::BadSeq,
            "$.seq".into(),
            "required integer in 0..=9007199254740991",
        ),
        ShapeProblem::NoCapsule => (R::InvalidCapsule, "$.capsule".into(), "required, an object"),
        ShapeProblem::AgentId => (
            R::AgentId,
            "$.agent_id".into(),
            "must equal the agent id in the path",
        ),
        ShapeProblem::CapsuleAgentId => (
            R::AgentId,
            "$.capsule.agent_id".into(),
            "must equal the agent id in the path",
        ),
    };
    Violation {
        code,
        path,
        message: message.to_owned(),
    }
}

/// The checks on the capsule itself, in contract order: the
/// `self_capsule_v0` schema, then the safety scan. The service's write path
/// and the client's local pre-check both call this, so a client refuses
/// exactly what the service would, with the same codes, details and
/// findings. (Whether `capsule.agent_id` names the signer is an envelope
/// question, checked before the signature.)
pub fn check_capsule(capsule: &Json) -> Result<(), Rejection> {
    if let Err(violations) = validate::validate_capsule(capsule) {
        let mut r = Rejection::new(
            validate::codes(&violations),
            format!(
                "capsule fails the self_capsule_v0 schema ({} problems)",
                violations.len()
            ),
        );
        r.findings = violations.into_iter().map(FindingOut::Schema).collect();
        return Err(r);
    }
    let findings = safety::scan(capsule);
    if !findings.is_empty() {
        let mut r = Rejection::one(
            R::UnsafeContent,
            format!("safety scanner flagged {} string(s)", findings.len()),
        );
        r.findings = findings.into_iter().map(FindingOut::Safety).collect();
        return Err(r);
    }
    Ok(())
}

/// [`check_capsule`], then the size limit of `tier` (`limits`): every check
/// of a write that looks at the capsule alone, in contract order (schema,
/// safety, size). Returns the capsule's RFC 8785 text. The write path runs
/// it after the seq and cooldown checks; an offline checker that knows the
/// tier (the Python package's `selfcap.check`) runs it as it is.
pub fn check_capsule_in_tier(
    capsule: &Json,
    tier: Tier,
    limits: &TierLimits,
) -> Result<String, Rejection> {
    check_capsule(capsule)?;
    within_tier(jcs::canonicalize(capsule), tier, limits)
}

/// The size limit of `tier` on a capsule's canonical text.
fn within_tier(canonical: String, tier: Tier, limits: &TierLimits) -> Result<String, Rejection> {
    if canonical.len() > limits.max_capsule_bytes {
        let mut r = Rejection::one(
            R::CapsuleTooLarge,
            format!(
                "canonical capsule is {} bytes; the {} tier allows {}",
                canonical.len(),
                tier.as_str(),
                limits.max_capsule_bytes
            ),
        );
        r.max_bytes = Some(limits.max_capsule_bytes);
        r.observed_bytes = Some(canonical.len() as u64);
        return Err(r);
    }
    Ok(canonical)
}

/// Steps 1-4 only (body cap, JSON, envelope shape, signature): everything
/// that needs no stored state. The Worker runs this before waking the agent's
/// Durable Object, so unauthenticated garbage never reaches it.
///
/// `signer` says whose key may sign: an agent without a key log signs with
/// its genesis key (`sha256(public_key)` is the agent id), checked here; for
/// one with a key log any verifying key passes, and the agent's object
/// decides whether it is the current one ([`Terms::keys`]).
pub fn precheck(body: &[u8], path_agent: &AgentId, signer: Signer) -> Result<(), Rejection> {
    authenticate_body(body, path_agent, Signature::Verify, signer).map(|_| ())
}

/// What a write is held to besides the capsule rules.
#[derive(Debug, Clone, Copy)]
pub struct Terms<'a> {
    /// Whether to verify the signature again.
    pub signature: Signature,
    /// The agent's key state (`None`: no key log, the genesis key signs).
    /// With one, only its current key signs; an earlier key of the agent
    /// gets `key_rotated`, which never counts toward the cooldown (a thief
    /// holding a rotated-out key must not be able to lock the owner out).
    pub keys: Option<&'a KeyState>,
    /// The write commits with a key event (`POST keys.json`).
    pub with_key_event: Option<WithKeyEvent>,
}

/// A write that commits with a key event: it is exempt from the cooldown and
/// the write quota (a thief holding the current key can exhaust both, and
/// must not keep the owner from rotating it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithKeyEvent {
    /// After a disputing rotation, the `seq` the envelope must exceed: the
    /// owner's last good write's, not the stored one a thief may have burnt.
    pub seq_above: Option<u64>,
}

impl Terms<'_> {
    /// An ordinary write of an agent without a key log.
    pub fn genesis(signature: Signature) -> Terms<'static> {
        Terms {
            signature,
            keys: None,
            with_key_event: None,
        }
    }
}

/// Decides everything about a PUT that does not need another object's state.
pub fn check(
    state: &AgentState,
    body: &[u8],
    path_agent: &AgentId,
    now_ms: u64,
    tiers: &TierTable,
    terms: &Terms<'_>,
) -> Result<Candidate, Rejection> {
    let signer = match terms.keys {
        None => Signer::Genesis,
        Some(_) => Signer::KeyLog,
    };
    let mut signed = authenticate_body(body, path_agent, terms.signature, signer)?;
    if let Some(keys) = terms.keys {
        current_key(keys, &signed)?;
    }

    // Authenticated from here on: stored state may be consulted and revealed.
    // The seq check comes before the cooldown, so a replayed envelope is
    // always answered `replay_seq` (which never counts toward a cooldown).
    let exempt = terms.with_key_event.is_some();
    let above = match terms.with_key_event.and_then(|w| w.seq_above) {
        Some(last_good) => Some(last_good),
        None => state.published.as_ref().map(|p| p.seq),
    };
    if let Some(stored) = above {
        if signed.seq <= stored {
            // At the largest seq there is no greater one: say so, or the
            // agent would retry forever.
            let detail = if stored >= MAX_SEQ {
                format!(
                    "seq {} is not greater than the stored seq {stored}, the largest seq there is: this agent id can take no further writes (unless its owner rotates the key with disputes_after, docs/PROTOCOL.md §14)",
                    signed.seq
                )
            } else {
                format!(
                    "seq {} is not greater than the stored seq {stored}",
                    signed.seq
                )
            };
            return Err(Rejection::one(R::ReplaySeq, detail).authenticated(&signed));
        }
    }
    if let Some(until) = state.cooldown.active_until(now_ms).filter(|_| !exempt) {
        return Err(Rejection::one(
            R::CooldownActive,
            format!(
                "{} consecutive rejected writes; cooling down",
                state.cooldown.consecutive_rejects
            ),
        )
        .wait_until(now_ms, until)
        .authenticated(&signed));
    }
    let tier = state.tier_at(now_ms);
    let limits = tiers.get(tier);
    // [`check_capsule_in_tier`], on the canonical text the signature
    // check already made.
    let canonical = std::mem::take(&mut signed.canonical);
    let canonical = check_capsule(&signed.capsule)
        .and_then(|()| within_tier(canonical, tier, limits))
        .map_err(|r| r.authenticated(&signed))?;
    let usage = state.writes.usage(now_ms, limits.writes_per_24h);
    if usage.exhausted() && !exempt {
        let reset = usage.reset_at_ms.unwrap_or(now_ms);
        return Err(Rejection::one(
            R::WriteQuotaExceeded,
            format!(
                "{} of {} writes used in the last 24 hours",
                usage.used, usage.limit
            ),
        )
        .wait_until(now_ms, reset)
        .authenticated(&signed));
    }
    let cursor = jcs::cursor_of_canonical(canonical.as_bytes());
    Ok(Candidate {
        checked: WriteChecked::new(&cursor, signed.seq, &signed.signature),
        agent_id: path_agent.clone(),
        seq: signed.seq,
        cursor,
        canonical,
        capsule: signed.capsule,
        public_key: signed.public_key,
        signature: signed.signature,
        digest: signed.digest,
        body_bytes: body.len(),
        is_new_agent: state.published.is_none(),
    })
}

/// The envelope of `body`, authenticated (`core::envelope`), or the
/// rejection that says why not.
fn authenticate_body(
    body: &[u8],
    path_agent: &AgentId,
    signature: Signature,
    signer: Signer,
) -> Result<Signed, Rejection> {
    envelope::authenticate_body(body, path_agent, signature, signer).map_err(Rejection::from)
}

/// The signer of an agent with a key log must be its current key. An
/// earlier one gets `key_rotated`, without counting toward the cooldown.
fn current_key(keys: &KeyState, signed: &Signed) -> Result<(), Rejection> {
    if &signed.public_key == keys.current() {
        return Ok(());
    }
    // Neither answer says how many keys the agent had: the holder of a
    // rotated-out key may not read the log.
    let mut r = match keys.index_of(&signed.public_key) {
        Some(_) => Rejection::one(
            R::KeyRotated,
            "this key was rotated out of the agent's key log: load its current key, and never retry with this one",
        ),
        None => Rejection::not_the_agents_key(),
    };
    r.seq = Some(signed.seq);
    Err(r)
}

/// The body of an accepted PUT (the client parses it with the same type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedBody {
    /// Always `true` (a [`Rejection`] serialises `false`).
    pub accepted: bool,
    /// The agent id, 64 lowercase hex characters.
    pub agent_id: String,
    /// The accepted seq, now the stored one.
    pub seq: u64,
    /// The new cursor: `sha256:` + hex of SHA-256 over the capsule's RFC 8785 bytes.
    pub cursor: String,
    /// The cursor before this write; `null` on the agent's first write.
    pub prev_cursor: Option<String>,
    /// Whether the cursor moved (`false` when an identical capsule was republished).
    pub changed: bool,
    /// When the write was accepted, RFC 3339 UTC (whole seconds).
    pub generated_at: String,
    /// Polling hint for head.json, in seconds ([`HEAD_TTL_SEC`]).
    pub ttl_sec: u64,
    /// Relative path of the capsule: `/self/{agent_id}/capsule.json`.
    pub capsule_url: String,
    /// Relative path of the head pointer: `/self/{agent_id}/head.json`.
    pub head_url: String,
    /// Relative path of the retained versions: `/self/{agent_id}/history.json`.
    #[serde(default)]
    pub history_url: String,
    /// Relative path of the verification report: `/self/{agent_id}/verify.json`.
    #[serde(default)]
    pub verify_url: String,
    /// The agent's write quota right after this write (rolling 24 h).
    pub writes: WritesView,
}

impl AgentState {
    /// Applies an accepted write. Returns the record to mirror into KV and
    /// the response body. Infallible: everything was checked by `check`.
    pub fn commit(
        &mut self,
        c: Candidate,
        now_ms: u64,
        tiers: &TierTable,
    ) -> (Record, AcceptedBody) {
        let prev_cursor = self.published.as_ref().map(|p| p.cursor.clone());
        let changed = prev_cursor.as_deref() != Some(c.cursor.as_str());
        self.projected_until_ms = match &self.published {
            Some(p) if p.capsule.get("watch").is_some() => Some(now_ms + PROJECTION_KEPT_MS),
            _ => self.projected_until_ms.filter(|until| *until > now_ms),
        };
        self.writes.record(now_ms);
        self.cooldown.reset();
        self.total_writes += 1;
        let first = self.published.is_none();
        if first {
            self.first_write_ms = Some(now_ms);
        }
        self.count(&c.agent_id, now_ms, |r| r.write(now_ms, first));
        self.published = Some(Published {
            seq: c.seq,
            cursor: c.cursor.clone(),
            prev_cursor: prev_cursor.clone(),
            changed,
            capsule: c.capsule,
            updated_at_ms: now_ms,
        });
        let record = self
            .record(&c.agent_id, tiers, now_ms)
            .expect("just published");
        let body = AcceptedBody {
            accepted: true,
            agent_id: c.agent_id.to_string(),
            seq: c.seq,
            cursor: c.cursor,
            prev_cursor,
            changed,
            generated_at: rfc3339(now_ms),
            ttl_sec: HEAD_TTL_SEC,
            capsule_url: Doc::Capsule.path(c.agent_id.as_str()),
            head_url: Doc::Head.path(c.agent_id.as_str()),
            history_url: Doc::History.path(c.agent_id.as_str()),
            verify_url: Doc::Verify.path(c.agent_id.as_str()),
            writes: record.writes_view(now_ms),
        };
        (record, body)
    }

    /// [`AgentState::commit`] plus the history entry: seals the accepted
    /// write into the chain after `history` (the stored index, `None` before
    /// the first entry) and prunes to the tier's retention. The caller
    /// persists state, record, entry and index in one atomic step.
    ///
    /// Refuses (changing nothing) when `history` does not continue the chain
    /// head in the state: appending anyway would fork the chain.
    // Each argument is a separate input of the one atomic step (the write,
    // the clock, the limits, the seal, the chain, the key log); bundling
    // them would only move the list into a struct built once per call.
    #[allow(clippy::too_many_arguments)]
    pub fn commit_sealed(
        &mut self,
        c: Candidate,
        now_ms: u64,
        tiers: &TierTable,
        key: &ServiceKey,
        keyring: &Keyring,
        history: Option<HistoryIndex>,
        keys: Option<&KeyState>,
    ) -> Result<Committed, ChainMismatch> {
        // (The key state's length is what the index's entity tag names.)
        if self.chain.as_ref() != history.as_ref().map(|h| &h.head) {
            return Err(ChainMismatch);
        }
        let public_key = c.public_key.to_hex();
        let signature = c.signature.clone();
        let checked = c.checked.clone();
        let (record, body) = self.commit(c, now_ms, tiers);
        let p = self.published.as_ref().expect("just published");
        let appended = history::append(
            history,
            NewVersion {
                agent_id: &record.agent_id,
                seq: p.seq,
                cursor: &p.cursor,
                prev_cursor: p.prev_cursor.as_deref(),
                capsule: &p.capsule,
                public_key: &public_key,
                signature: &signature,
                accepted_at_ms: now_ms,
                checked: Some(&checked),
                keys: keys.map(|k| k as &dyn history::AgentKeys),
            },
            key,
            keyring,
            tiers.get(self.tier_at(now_ms)).history_retained,
            self.total_writes,
        );
        let mut appended = appended;
        if let Some(k) = keys {
            appended.index.mark_disputed(k, k.length);
        }
        self.chain = Some(appended.index.head.clone());
        Ok(Committed {
            record,
            body,
            entry: appended.entry,
            history: appended.index,
            pruned: appended.pruned,
        })
    }

    /// Counts a rejection toward the cooldown when it should, and in the
    /// agent's refusals when its body authenticated as the agent; returns
    /// whether the state changed (so the caller knows to persist it).
    pub fn note_rejection(&mut self, agent: &AgentId, r: &Rejection, now_ms: u64) -> bool {
        if r.by_the_agent {
            self.refusals.note(&r.reason_codes, now_ms);
            self.count(agent, now_ms, |rep| rep.refusal(&r.reason_codes, now_ms));
        }
        let cooled = match &r.counts_toward_cooldown {
            Some((seq, digest)) => self.cooldown.note_reject(*seq, digest, now_ms),
            None => false,
        };
        cooled || r.by_the_agent
    }

    /// Whether a location may hold a projected head of this agent (§15) at
    /// `now_ms`: only one made from a capsule with a `watch` can be kept
    /// (`core::projection::admit`), and such a capsule is the current one
    /// or was replaced less than [`PROJECTION_KEPT_MS`] ago. The location
    /// that takes a write replaces its copy only then (every other write
    /// spares it the cache operation).
    pub fn projection_may_be_kept(&self, now_ms: u64) -> bool {
        let current = self
            .published
            .as_ref()
            .is_some_and(|p| p.capsule.get("watch").is_some());
        current || self.projected_until_ms.is_some_and(|until| until > now_ms)
    }

    /// When an x402 settlement needs the object's alarm next, if one is in
    /// flight.
    pub fn x402_due_at(&self) -> Option<u64> {
        self.x402_due.as_ref().map(|d| d.check_at_ms)
    }

    /// When anything but the mirror needs the object's one alarm next: an
    /// x402 settlement, or counts to send to the agent's stats shard.
    pub fn due_at(&self) -> Option<u64> {
        let stats = self.stats.as_ref().and_then(|p| p.due_at_ms);
        match (self.x402_due_at(), stats) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Counts something for the deployment's totals (sent by the alarm).
    pub fn count(&mut self, agent: &AgentId, now_ms: u64, f: impl FnOnce(&mut Report)) {
        self.stats
            .get_or_insert_with(|| Pending {
                agent_id: agent.to_string(),
                ..Pending::default()
            })
            .note(now_ms, f);
    }

    /// The tier in force at `now_ms` (free unless a paid plan has time left).
    pub fn tier_at(&self, now_ms: u64) -> Tier {
        self.paid.tier_at(now_ms)
    }

    /// The KV mirror of the current published state, as of `now_ms`.
    pub fn record(&self, agent_id: &AgentId, tiers: &TierTable, now_ms: u64) -> Option<Record> {
        let p = self.published.as_ref()?;
        let tier = self.tier_at(now_ms);
        Some(Record {
            agent_id: agent_id.to_string(),
            capsule: p.capsule.clone(),
            cursor: p.cursor.clone(),
            prev_cursor: p.prev_cursor.clone(),
            changed: p.changed,
            seq: p.seq,
            updated_at: rfc3339(p.updated_at_ms),
            writes: RecordWrites {
                tier,
                limit_24h: tiers.get(tier).writes_per_24h,
                window: self.writes.clone(),
            },
            paid: self.paid.clone(),
            keys: self.keys.clone(),
        })
    }
}

/// An accepted write with its history entry (see [`AgentState::commit_sealed`]).
#[derive(Debug, Clone)]
pub struct Committed {
    /// The KV record of the new published state.
    pub record: Record,
    /// The response body for the writer.
    pub body: AcceptedBody,
    /// The new sealed history entry.
    pub entry: Entry,
    /// The updated history index (chain head, retained summaries, report).
    pub history: HistoryIndex,
    /// `sequence`s of entries that left the retained window.
    pub pruned: Vec<u64>,
}

/// Why [`AgentState::commit_sealed`] refused: the stored history index is
/// not the one the state's chain head describes (e.g. it went missing), and
/// appending anyway would fork the chain. Nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainMismatch;

impl std::fmt::Display for ChainMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stored history index does not match the chain head in the state")
    }
}

impl std::error::Error for ChainMismatch {}

/// One structured log line per write decision. Never contains capsule text,
/// signatures or matched secrets.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionLog<'a> {
    /// Always `"write"`.
    pub event: &'static str,
    /// The agent id from the path.
    pub agent_id: &'a str,
    /// The envelope's seq, when parsing got that far.
    pub seq: Option<u64>,
    /// `"accepted"` or `"rejected"`.
    pub outcome: &'static str,
    /// The HTTP status answered (200 when accepted).
    pub status: u16,
    /// The rejection's codes in reporting order; empty when accepted.
    pub reason_codes: &'a [R],
    /// Body bytes (u64: a refused body's declared length can pass 2^32).
    pub bytes: u64,
}

impl<'a> DecisionLog<'a> {
    /// The line for an accepted write (status 200, no codes).
    pub fn accepted(agent_id: &'a str, c: &Candidate) -> DecisionLog<'a> {
        DecisionLog {
            event: "write",
            agent_id,
            seq: Some(c.seq),
            outcome: "accepted",
            status: 200,
            reason_codes: &[],
            bytes: c.body_bytes as u64,
        }
    }
    /// The line for a refused write; `bytes` is the body size the Worker saw (or its declared
    /// `Content-Length`).
    pub fn rejected(agent_id: &'a str, r: &'a Rejection, bytes: u64) -> DecisionLog<'a> {
        DecisionLog {
            event: "write",
            agent_id,
            seq: r.seq,
            outcome: "rejected",
            status: r.status(),
            reason_codes: &r.reason_codes,
            bytes,
        }
    }
    /// The line as compact JSON (an empty string if serialisation failed).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
