//! The autonomous USDC upgrade, as pure decisions: configuration, amounts,
//! invoices and their on-chain tags, the signed claim, the payment check
//! over JSON-RPC answers, and prepaid time per plan. The Worker supplies
//! randomness, storage and the RPC calls; every rule lives here.
//!
//! | concern                                         | module      |
//! |-------------------------------------------------|-------------|
//! | vars, defaults, fail-closed reading             | [`config`]  |
//! | USDC atomic amounts                             | [`amount`]  |
//! | addresses, hashes, quantities, Transfer topic   | [`evm`]     |
//! | invoices, tags, per-agent book, paid time       | [`invoice`] |
//! | the claim message and its signature             | [`claim`]   |
//! | does this receipt pay this invoice              | [`receipt`] |
//! | reading a quote request, the quote body         | [`quote`]   |
//! | a claim's steps, crediting, the payment record  | [`outcome`] |

pub mod amount;
pub mod claim;
pub mod config;
pub mod evm;
pub mod invoice;
pub mod outcome;
pub mod quote;
pub mod receipt;

use crate::core::reason::ReasonCode;

/// A refused quote or claim: the code (its status comes from the code), a
/// detail for the bot, a wait when retrying later can succeed, and (never
/// sent) what to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason code.
    pub code: ReasonCode,
    /// What happened, for the bot.
    pub detail: String,
    /// Seconds to wait before resending the same request.
    pub retry_after_sec: Option<u64>,
    /// Internal detail for the operator's log (provider faults).
    pub log: Option<String>,
}

impl Refusal {
    /// A refusal with `code`.
    pub fn new(code: ReasonCode, detail: impl Into<String>) -> Refusal {
        Refusal {
            code,
            detail: detail.into(),
            retry_after_sec: None,
            log: None,
        }
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
}
