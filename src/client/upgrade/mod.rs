//! The paid upgrade, client side (docs/PROTOCOL.md §10): quote an invoice,
//! pay it with an ERC-20 `transfer` signed here and sent over JSON-RPC, wait
//! for the confirmations, then claim it with the identity's Ed25519 key.
//!
//! The one rule is **never pay twice**. Every step is recorded in the state
//! directory before the next one can move money:
//!
//! ```text
//! upgrade.json           the current purchase, rewritten atomically at each step:
//!   invoice              the quote body as served (written before anything is paid)
//!   payment              {tx_hash, raw_tx, from, nonce, signed_at}: the signed
//!                        transaction, written before it is broadcast
//!   abandoned            earlier transactions of this invoice that paid nothing
//!                        (reverted, or provably never mined)
//!   claim_seq            the seq the claim signs (so a resent claim is identical)
//!   claimed              the service's answer once credited
//!   failed               {status, code, detail} when the claim was refused for good
//! upgrades/<invoice_id>.json   earlier purchases, moved aside when a new one starts
//! ```
//!
//! A re-run reads `upgrade.json` first (`decide`): a recorded transaction
//! is finished (re-broadcast byte for byte if the chain does not know it,
//! waited for, claimed), never replaced; a credited purchase is a no-op that
//! answers the stored result; an open invoice with nothing signed is paid; a
//! new invoice is quoted only when none is pending.
//!
//! Everything that needs no network is a pure function, unit-tested next to
//! it: `decide`, `check_quote`, `transfer_calldata`, `fees`, `sign_tx`,
//! `tier_view`. JSON-RPC goes over the client's own
//! [`Transport`](super::http::Transport) (no provider library, no async
//! runtime); the key file is read once, never printed, and zeroed after use.
//!
//! | module | what |
//! |---|---|
//! | `record` | `upgrade.json`: [`Record`] and its parts, the re-run decision (`decide` → `Next`), load, save, archive to `upgrades/` |
//! | `quote` | the quote body checked against what was asked (`check_quote` → `Invoice`) |
//! | `tx` | the payer's secp256k1 key (`PayerKey`), the ERC-20 `transfer` calldata, the fees (EIP-1559 or legacy), the gas limit, the signed transaction (`sign_tx`) |
//! | `rpc` | the JSON-RPC client (`Rpc`) over the transport; URLs shown by origin only |
//! | `service` | the quote request, the claim ([`Client::upgrade_claim`](super::Client::upgrade_claim)), refusals as errors by reason-code class |
//! | `flow` | `selfcap upgrade` ([`Client::upgrade`](super::Client::upgrade), [`UpgradeOptions`]): decide, quote, pay, broadcast, confirmations, claim |
//! | `status` | the tier for `status` ([`Client::tier`](super::Client::tier), [`TierView`]) |
//! | `x402` | x402: the 402's `PAYMENT-REQUIRED` checked (`check_offer`), the EIP-3009 authorization signed over EIP-712 into a `PAYMENT-SIGNATURE` (`sign_payment`), what an answer means (`read_answer`) |
//! | `x402_flow` | `selfcap upgrade --x402` ([`Client::upgrade_x402`](super::Client::upgrade_x402), [`X402Options`]): ask, check, sign, record, send; resend the same header until answered |
//!
//! **x402** (`upgrade --x402`) keeps the same record and the same rule:
//! the signed `PAYMENT-SIGNATURE` header is written to `upgrade.json`
//! (`x402`) before it is sent, and a re-run resends exactly that header
//! until the service answers for it. A second authorization is signed
//! only after the service said the first moved nothing
//! (`x402_settlement_failed`, `x402_invoice_mismatch`; kept in
//! `x402_dropped`).
//!
//! RFC 3339 text is read and written by [`crate::core::time`].

mod flow;
mod quote;
mod record;
mod rpc;
mod service;
mod status;
mod tx;
mod x402;
mod x402_flow;

#[cfg(test)]
mod fixtures;

pub use flow::{StopAfter, UpgradeDone, UpgradeOptions};
pub use record::{Abandoned, Failure, Payment, Record, X402Dropped, X402Sent};
pub use record::{ARCHIVE_DIR, UPGRADE_FILE};
pub use service::{ClaimWaits, PROVIDER_TIMEOUT};
pub use status::TierView;
pub use x402::list_price;
pub use x402_flow::X402Options;

use crate::client::now_ms;
