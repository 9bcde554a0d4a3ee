//! Every machine-readable code the service answers with, in one table: the wire
//! name, the HTTP status, what class of problem it is, and what a bot should do.
//! `docs/PROTOCOL.md` lists the same table; a test keeps the two in step.

use serde::{Serialize, Serializer};
use std::fmt;

/// What a client should do about a code, coarsely. The CLI maps each class to
/// its own exit code, so scripts can branch without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The request or capsule is wrong: fix it, then retry once.
    FixPayload,
    /// Nothing is wrong with the payload; wait until the given time.
    BackOff,
    /// Key material or signing implementation problem; stop writing.
    Signature,
    /// Not about a write (read-side errors such as unknown paths).
    Request,
    /// The service failed; retry with backoff.
    Server,
}

impl Class {
    /// The wire name (`"fix_payload"`, `"back_off"`, …), as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::FixPayload => "fix_payload",
            Class::BackOff => "back_off",
            Class::Signature => "signature",
            Class::Request => "request",
            Class::Server => "server",
        }
    }
}

macro_rules! reason_codes {
    ($( $variant:ident => $wire:literal, $status:literal, $class:ident, $action:literal; )*) => {
        /// A reason code. Ordering of the variants is the stable order in which
        /// codes are reported when several apply.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ReasonCode {
            $(
                #[doc = concat!("`", $wire, "` (HTTP ", stringify!($status), "): ", $action)]
                $variant,
            )*
        }

        impl ReasonCode {
            /// Every code, in reporting order.
            pub const ALL: &'static [ReasonCode] = &[ $( ReasonCode::$variant, )* ];

            /// The code as it appears on the wire.
            pub const fn as_str(self) -> &'static str {
                match self { $( ReasonCode::$variant => $wire, )* }
            }
            /// The HTTP status a response carrying (first) this code uses.
            pub const fn http_status(self) -> u16 {
                match self { $( ReasonCode::$variant => $status, )* }
            }
            /// The coarse [`Class`]: what kind of reaction the code calls for (the CLI's exit
            /// code follows it).
            pub const fn class(self) -> Class {
                match self { $( ReasonCode::$variant => Class::$class, )* }
            }
            /// What a well-behaved bot does on receiving this code.
            pub const fn bot_action(self) -> &'static str {
                match self { $( ReasonCode::$variant => $action, )* }
            }
            /// The code whose wire name is exactly `s` (the inverse of `as_str`); `None` for an
            /// unknown name.
            pub fn from_wire(s: &str) -> Option<ReasonCode> {
                match s { $( $wire => Some(ReasonCode::$variant), )* _ => None }
            }
        }
    };
}

reason_codes! {
    // --- request envelope (before any stored state is consulted) ---
    PayloadTooLarge => "payload_too_large", 413, FixPayload, "Stop; reduce the body below the 64 KiB cap (the capsule itself must fit its tier); retry once fixed.";
    InvalidJson => "invalid_json", 400, FixPayload, "Fix the client's JSON encoder (duplicate keys, bad UTF-8, lone surrogates, NaN, deep nesting); do not retry unchanged.";
    BadSeq => "bad_seq", 400, FixPayload, "Send seq as an integer 0..2^53-1; retry once fixed.";
    InvalidCapsule => "invalid_capsule", 422, FixPayload, "Fix client bug (capsule missing or not an object); do not spam retries.";
    UnknownField => "unknown_field", 422, FixPayload, "Remove fields outside the v0 allowlist; retry once fixed.";
    AgentId => "agent_id", 422, FixPayload, "Set agent_id to the path's agent id (SHA-256 of your public key); retry once fixed.";
    BadSignature => "bad_signature", 401, Signature, "Stop; verify key material and the signing implementation against the signing vectors. If persistent, go read-only.";
    ReplaySeq => "replay_seq", 409, FixPayload, "Read head.json for the stored seq, use a strictly greater seq; never resend the same payload.";
    // --- capsule schema (all 422) ---
    SchemaVersion => "schema_version", 422, FixPayload, "Set schema_version to \"self_capsule_v0\"; retry once fixed.";
    Policy => "policy", 422, FixPayload, "Fix the policy block; retry once fixed.";
    PolicyVersion => "policy_version", 422, FixPayload, "Fix policy.policy_version (string, max 16 chars); retry once fixed.";
    RehydrateMode => "rehydrate_mode", 422, FixPayload, "Set policy.rehydrate_mode to \"strict\"; retry once fixed.";
    MemoryBudget => "memory_budget", 422, FixPayload, "Fix policy.memory_budget; retry once fixed.";
    MaxRehydrateTokens => "max_rehydrate_tokens", 422, FixPayload, "Use an integer 256..1500 for max_rehydrate_tokens; retry once fixed.";
    MaxObjectives => "max_objectives", 422, FixPayload, "Use an integer 0..8 for max_objectives; retry once fixed.";
    Constraints => "constraints", 422, FixPayload, "Fix the constraints array (max 20 objects); retry once fixed.";
    ConstraintId => "constraint_id", 422, FixPayload, "Fix constraint ids (unique, max 24 chars, ^[a-z0-9_-]+$); retry once fixed.";
    ConstraintType => "constraint_type", 422, FixPayload, "Use a v0 constraint type; retry once fixed.";
    ConstraintValue => "constraint_value", 422, FixPayload, "Use a boolean or up to 20 strings of max 48 chars; retry once fixed.";
    Objectives => "objectives", 422, FixPayload, "Fix the objectives array (max 8 objects); retry once fixed.";
    ObjectiveId => "objective_id", 422, FixPayload, "Fix objective ids (unique, max 24 chars, ^[a-z0-9_-]+$); retry once fixed.";
    ObjectiveStatus => "objective_status", 422, FixPayload, "Use open, in_progress, blocked, done or cancelled; retry once fixed.";
    ObjectivePriority => "objective_priority", 422, FixPayload, "Use low, med or high (or omit); retry once fixed.";
    ObjectiveTitle => "objective_title", 422, FixPayload, "Give every objective a title of max 120 chars; retry once fixed.";
    ObjectiveCheckpoint => "objective_checkpoint", 422, FixPayload, "Keep checkpoint a string of max 200 chars; retry once fixed.";
    ObjectiveUpdatedAt => "objective_updated_at", 422, FixPayload, "Use an RFC 3339 date-time for updated_at (e.g. 2026-02-10T12:00:00Z), or omit it; retry once fixed.";
    ObjectiveTags => "objective_tags", 422, FixPayload, "Max 10 tags of 1-32 chars; retry once fixed.";
    Capabilities => "capabilities", 422, FixPayload, "Fix the capabilities object; retry once fixed.";
    ToolAllowlist => "tool_allowlist", 422, FixPayload, "Max 20 tool ids, max 48 chars, ^[a-z0-9_.:-]+$; retry once fixed.";
    FeatureFlags => "feature_flags", 422, FixPayload, "Max 20 flags, max 32 chars, ^[a-z0-9_-]+$; retry once fixed.";
    Pointers => "pointers", 422, FixPayload, "Fix the pointers object; retry once fixed.";
    Receipts => "receipts", 422, FixPayload, "Max 5 receipt objects; retry once fixed.";
    ReceiptName => "receipt_name", 422, FixPayload, "Give every receipt a name of max 32 chars; retry once fixed.";
    ReceiptContentHash => "receipt_content_hash", 422, FixPayload, "Use content_hash \"sha256:<64 lowercase hex>\"; retry once fixed.";
    ReceiptEvidenceUrl => "receipt_evidence_url", 422, FixPayload, "Keep evidence_url a string of max 200 chars; retry once fixed.";
    ReceiptRationale => "receipt_rationale", 422, FixPayload, "Keep rationale a string of max 200 chars; retry once fixed.";
    ReceiptUpdatedAt => "receipt_updated_at", 422, FixPayload, "Use an RFC 3339 date-time for updated_at (e.g. 2026-02-10T12:00:00Z), or omit it; retry once fixed.";
    ReceiptTags => "receipt_tags", 422, FixPayload, "Max 10 tags of 1-32 chars; retry once fixed.";
    Notes => "notes", 422, FixPayload, "Max 20 note objects; retry once fixed.";
    NoteKey => "note_key", 422, FixPayload, "Fix note keys (unique, max 48 chars, ^[a-z0-9_.:-]+$); retry once fixed.";
    NoteValue => "note_value", 422, FixPayload, "Give every note a value of 1-500 chars; retry once fixed.";
    NoteUpdatedAt => "note_updated_at", 422, FixPayload, "Use an RFC 3339 date-time for updated_at (e.g. 2026-02-10T12:00:00Z), or omit it; retry once fixed.";
    NoteTags => "note_tags", 422, FixPayload, "Max 10 tags of 1-32 chars; retry once fixed.";
    SelfMotto => "self_motto", 422, FixPayload, "Shorten self_motto to max 160 chars; retry once fixed.";
    Watch => "watch", 422, FixPayload, "Make watch an object with only tags, sources, stacks; retry once fixed.";
    WatchTags => "watch.tags", 422, FixPayload, "Max 10 tags of max 24 chars; retry once fixed.";
    WatchSources => "watch.sources", 422, FixPayload, "Max 25 source ids matching ^[a-z0-9_-]{2,32}$; retry once fixed.";
    WatchStacks => "watch.stacks", 422, FixPayload, "Max 10 stack names of max 32 chars; retry once fixed.";
    AccessControl => "access_control", 422, FixPayload, "Make access_control an object with public and optionally authorized_readers; retry once fixed.";
    AccessControlPublic => "access_control_public", 422, FixPayload, "Set access_control.public to true or false; retry once fixed.";
    AuthorizedReaders => "authorized_readers", 422, FixPayload, "Max 20 authorized readers; retry once fixed.";
    AuthorizedReaderId => "authorized_reader_id", 422, FixPayload, "Name each reader once, by its 64 lowercase hex agent id (bare or as agent_id of a grant); retry once fixed.";
    AuthorizedReaderScope => "authorized_reader_scope", 422, FixPayload, "Give each grant 1-4 distinct scopes of READ_HEAD, READ_CAPSULE, READ_HISTORY, READ_VERIFY; retry once fixed.";
    AuthorizedReaderExpiry => "authorized_reader_expiry", 422, FixPayload, "Use RFC 3339 date-times for expires_at and granted_at (e.g. 2026-02-10T12:00:00Z), or omit them; retry once fixed.";
    // --- content and size ---
    UnsafeContent => "unsafe_content", 422, FixPayload, "Remove the flagged secret/injection/URL text; do not persist suspicious text; retry once fixed.";
    CapsuleTooLarge => "capsule_too_large", 413, FixPayload, "Reduce the canonical capsule below max_bytes; retry once fixed.";
    // --- quotas (state is fine, timing is not) ---
    NewAgentIpQuotaExceeded => "new_agent_ip_quota_exceeded", 429, BackOff, "Back off; do not churn identities; retry after next_write_at.";
    WriteQuotaExceeded => "write_quota_exceeded", 429, BackOff, "Back off until next_write_at; keep operating read-only.";
    CooldownActive => "cooldown_active", 429, BackOff, "Too many rejected writes in a row; fix the payload and wait retry_after_sec.";
    // --- the key log (POST /self/{agent_id}/keys.json; key_rotated also on writes and signed reads) ---
    KeyRotated => "key_rotated", 403, Signature, "Stop: this key was rotated out of the agent's key log; load the agent's current key (keys.json says which), never retry with this one.";
    BadKeyEvent => "bad_key_event", 422, FixPayload, "Fix the key event or its body (the detail names the member); do not retry unchanged.";
    KeyEventStale => "key_event_stale", 409, FixPayload, "Read keys.json, build the event on its newest index and hash, sign it again and resubmit.";
    RotationNotCommitted => "rotation_not_committed", 403, Signature, "Stop: only the key committed as next (or the recovery key) can rotate, and only the current key recommits; load that key, never retry with another.";
    RecoveryWindowClosed => "recovery_window_closed", 403, Request, "The rotation is final and can no longer be superseded; rotate with the recovery key without supersedes instead.";
    RecommitPending => "recommit_pending", 409, BackOff, "A recommit is already waiting to mature (head.json keys.pending_recommit); wait for it, or rotate with the next key, which cancels it.";
    KeyReused => "key_reused", 409, FixPayload, "Generate a fresh key: no key serves an agent twice, and no key of one agent may be another agent's genesis key.";
    CommitmentReused => "commitment_reused", 422, FixPayload, "Commit digests of freshly generated keys, distinct from each other and from every key or next-key digest this agent used before.";
    KeyLogFull => "key_log_full", 409, Request, "The key log holds its 256 events; this agent accepts no further key event.";
    // --- the USDC upgrade (quote and claim; bodies of the form {"error": code}) ---
    BadUpgradeRequest => "bad_upgrade_request", 400, FixPayload, "Fix the quote or claim body (the detail names the field); do not retry unchanged.";
    UnsupportedPlan => "unsupported_plan", 400, FixPayload, "Ask for plan \"pro\" or \"plus\".";
    UnsupportedChain => "unsupported_chain", 400, FixPayload, "Omit chain, or name the chain the service takes (the detail says which).";
    UnsupportedAsset => "unsupported_asset", 400, FixPayload, "Omit asset, or ask for \"USDC\".";
    QuoteRateExceeded => "quote_rate_exceeded", 429, BackOff, "Too many quotes from this address; reuse an open invoice or retry after retry_after_sec.";
    TooManyOpenInvoices => "too_many_open_invoices", 429, BackOff, "Pay or let expire one of this agent's open invoices first; retry after retry_after_sec.";
    InvoiceNotFound => "invoice_not_found", 404, Request, "No invoice with this id was quoted for this agent (or it is older than 30 days past expiry); quote again.";
    InvoiceAgentMismatch => "invoice_agent_mismatch", 403, Request, "The invoice was quoted for another agent; claim with the agent (and key) that quoted it.";
    InvoiceExpired => "invoice_expired", 410, Request, "The payment was mined after the invoice expired; it cannot credit. Quote again (an operator can refund the late payment).";
    InvoiceAlreadyPaid => "invoice_already_paid", 409, Request, "This invoice was credited with another transaction; do not pay an invoice twice (an operator can refund the second payment).";
    PaymentPending => "payment_pending", 409, BackOff, "The payment is mined but not yet confirmed enough; resend the same claim after retry_after_sec.";
    PaymentNotFound => "payment_not_found", 404, BackOff, "The chain knows no mined transaction with this hash yet; resend the same claim after retry_after_sec, and check the hash if it persists.";
    PaymentUnderpaid => "payment_underpaid", 422, Request, "The transfer is smaller than amount_atomic; it cannot credit this invoice. Quote again and pay the exact amount.";
    PaymentOverpaid => "payment_overpaid", 422, Request, "The transfer is larger than amount_atomic; only the exact amount names an invoice. Quote again and pay the exact amount.";
    PaymentWrongToken => "payment_wrong_token", 422, Request, "Pay with the token_contract of the quote (USDC on the quoted chain), not another token.";
    PaymentWrongRecipient => "payment_wrong_recipient", 422, Request, "Pay to_address of the quote; a transfer to anyone else cannot credit.";
    PaymentReverted => "payment_reverted", 422, Request, "The transaction reverted; nothing was paid. Pay again before expires_at.";
    PaymentNoTransfer => "payment_no_transfer", 422, Request, "The transaction holds no token transfer; send amount_atomic of token_contract to to_address.";
    PaymentBeforeInvoice => "payment_before_invoice", 422, Request, "The payment was mined before this invoice was quoted; a payment can only credit an invoice quoted before it.";
    PaymentAlreadyClaimed => "payment_already_claimed", 409, Request, "This payment already credited another invoice or agent; each payment credits once.";
    PaymentProviderUnavailable => "payment_provider_unavailable", 503, Server, "The service could not verify the payment on-chain just now; nothing was credited. Resend the same claim after retry_after_sec.";
    UpgradesNotConfigured => "upgrades_not_configured", 503, Server, "This deployment takes no payments; stay on the free tier.";
    // --- buying a plan with x402 (POST /api/v1/self/upgrade/x402) ---
    X402PaymentRequired => "x402_payment_required", 402, Request, "Pay the 402's invoice: sign an EIP-3009 authorization for exactly its amount (PAYMENT-REQUIRED header, or the v1 body) and resend the request with PAYMENT-SIGNATURE (v1: X-PAYMENT).";
    BadX402Payment => "bad_x402_payment", 400, FixPayload, "Fix the payment header (base64 of the x402 JSON: scheme exact, this chain's network, its USDC and treasury, a well-formed authorization); do not resend it unchanged.";
    X402InvoiceMismatch => "x402_invoice_mismatch", 402, Request, "The authorization pays no open invoice of this agent and plan (amount, recipient or time window); sign a new one for the invoice in this 402.";
    X402PaymentInvalid => "x402_payment_invalid", 402, Request, "The chain refuses the authorization (nonce used, balance, signature); nothing moved. Sign a new one for the invoice in this 402.";
    X402SettlementFailed => "x402_settlement_failed", 402, Request, "The facilitator refused to settle and the chain shows the authorization unused; nothing moved. Pay the new invoice in this 402.";
    X402SettlementInProgress => "x402_settlement_in_progress", 409, BackOff, "Another authorization for this invoice is being settled; do not sign a second one. Resend that one, or read head.json, after retry_after_sec.";
    X402SettlementPending => "x402_settlement_pending", 503, Server, "The payment may have moved and its outcome is not known yet; never sign again. Resend the same header (or read head.json) after retry_after_sec.";
    X402FacilitatorUnavailable => "x402_facilitator_unavailable", 503, Server, "The facilitator could not be reached before anything was settled; nothing moved. Resend the same header after retry_after_sec.";
    X402NotConfigured => "x402_not_configured", 503, Server, "This deployment takes no x402 payments; use the quote, transfer and claim upgrade instead.";
    // --- projected watch feeds (GET /api/v1/watch/*) ---
    WatchNotSet => "watch_not_set", 404, Request, "This agent's capsule has no watch; publish one (tags, sources, stacks) to have a projected feed.";
    WatchRequiresPro => "watch_requires_pro", 402, BackOff, "Projected feeds are a Pro feature: upgrade (upgrade_url), or filter the upstream feed locally (upstream_head_url, upstream_sources_url).";
    WatchNotConfigured => "watch_not_configured", 503, Server, "This deployment has no world feed upstream; filter the world feed yourself.";
    UpstreamUnavailable => "upstream_unavailable", 503, Server, "The world feed could not be read yet and nothing is stored; retry after retry_after_sec.";
    // --- read side and generic errors (bodies of the form {"error": code}) ---
    ReadSignatureInvalid => "read_signature_invalid", 401, Signature, "Sign the read as docs/PROTOCOL.md section 12 says: cover \"@method\" and \"@target-uri\", send created, nonce and keyid (your agent id), and Self-Public-Key; fix the signer, do not retry unchanged.";
    ReadSignatureExpired => "read_signature_expired", 401, Signature, "Sign every read afresh with created = now (accepted for 300 s, 30 s of clock skew); check the clock.";
    ReadSignatureReplayed => "read_signature_replayed", 401, Signature, "Use a fresh nonce for every signed read, retries included.";
    CapsuleNotFound => "capsule_not_found", 404, Request, "No capsule published for this agent yet; publish one or check the agent id.";
    CursorNotFound => "cursor_not_found", 410, Request, "The cursor was pruned from the retained history or never existed; start over from history_url (or capsule.json).";
    SnapshotNotFound => "snapshot_not_found", 404, Request, "No retained version has this cursor (pruned or never published); read history.json for what is retained.";
    BadQuery => "bad_query", 400, Request, "Fix the query: since is a cursor, after/before are sequence numbers, limit is 1..100, and since/after/before do not combine; head.json's wait is 0..30 seconds.";
    WebsocketRequired => "websocket_required", 426, Request, "Open watch as a WebSocket (GET with Upgrade: websocket), or long-poll head.json?wait=N with If-None-Match instead.";
    BadAgentId => "bad_agent_id", 400, Request, "Use the 64 lowercase hex agent id (SHA-256 of the genesis public key) in the path or the agent_id parameter.";
    BadPublicKey => "bad_public_key", 400, Request, "Send a 32-byte Ed25519 public key as hex, base64 or base64url; weak keys are refused.";
    // --- the operator API (/api/v1/admin/…, when the deployment configures it) ---
    AdminAuthRequired => "admin_auth_required", 401, Request, "Send Authorization: Bearer <the deployment's SELFCAP_ADMIN_TOKEN>, or come through the deployment's Cloudflare Access application.";
    AdminAuthInvalid => "admin_auth_invalid", 403, Request, "The credential is not this deployment's (a wrong token, or an Access token that is expired, for another application, or not signed by the team's keys); do not retry it unchanged.";
    NotFound => "not_found", 404, Request, "Check the URL against docs/PROTOCOL.md.";
    MethodNotAllowed => "method_not_allowed", 405, Request, "Use a method from the Allow header.";
    Unavailable => "service_unavailable", 503, Server, "Retry after retry_after_sec with capped exponential backoff.";
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ReasonCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ReasonCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ReasonCode::from_wire(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown reason code {s:?}")))
    }
}

/// A request refused with a reason code: the one shape of every refusal
/// that is not a write's `core::write::Rejection` (which carries its
/// findings and schema violations). Its status is the code's own; the
/// Worker turns it into `{"error": code, "detail"?, "retry_after_sec"?}`
/// in one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason code.
    pub code: ReasonCode,
    /// What happened, for the client, when there is more to say than the code.
    pub detail: Option<String>,
    /// Seconds to wait before resending the same request, when waiting can help.
    pub retry_after_sec: Option<u64>,
    /// Internal detail for the operator's log (provider faults); never sent.
    pub log: Option<String>,
    /// URLs the client can act on, sent as members of the body (e.g.
    /// `watch_requires_pro`'s `upgrade_url` and the upstream's own feed).
    pub links: Vec<(&'static str, String)>,
}

impl Refusal {
    /// A refusal with `code` and nothing more to say.
    pub fn code(code: ReasonCode) -> Refusal {
        Refusal {
            code,
            detail: None,
            retry_after_sec: None,
            log: None,
            links: Vec::new(),
        }
    }
    /// A refusal with `code` and a detail for the client.
    pub fn new(code: ReasonCode, detail: impl Into<String>) -> Refusal {
        Refusal {
            detail: Some(detail.into()),
            ..Refusal::code(code)
        }
    }
    /// With a URL the client can act on, as body member `name`.
    pub fn link(mut self, name: &'static str, url: impl Into<String>) -> Refusal {
        self.links.push((name, url.into()));
        self
    }
    /// With a wait.
    pub fn retry_after(mut self, secs: u64) -> Refusal {
        self.retry_after_sec = Some(secs);
        self
    }
    /// With an internal detail to log.
    pub fn logged(mut self, why: String) -> Refusal {
        self.log = Some(why);
        self
    }
    /// The detail, or the code's wire name when there is none.
    pub fn detail_or_code(&self) -> &str {
        self.detail.as_deref().unwrap_or(self.code.as_str())
    }
}

impl From<ReasonCode> for Refusal {
    fn from(code: ReasonCode) -> Refusal {
        Refusal::code(code)
    }
}

/// Sorts codes into reporting order and removes repeats.
pub fn normalize(codes: &mut Vec<ReasonCode>) {
    codes.sort();
    codes.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &c in ReasonCode::ALL {
            assert!(seen.insert(c.as_str()), "duplicate wire name {c}");
            assert_eq!(ReasonCode::from_wire(c.as_str()), Some(c));
        }
    }

    #[test]
    fn statuses_are_client_or_server_errors() {
        for &c in ReasonCode::ALL {
            let s = c.http_status();
            assert!((400..600).contains(&s), "{c} has status {s}");
            assert_eq!(c.class() == Class::Server, s >= 500, "{c}");
        }
    }

    #[test]
    fn normalize_sorts_and_dedups() {
        let mut v = vec![
            ReasonCode::SelfMotto,
            ReasonCode::UnknownField,
            ReasonCode::SelfMotto,
        ];
        normalize(&mut v);
        assert_eq!(v, [ReasonCode::UnknownField, ReasonCode::SelfMotto]);
    }
}
