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
//! | invoices, tags, per-agent book                  | [`invoice`] |
//! | paid time per plan (all the read path needs)    | [`entitlement`] |
//! | the claim message and its signature             | [`claim`]   |
//! | does this receipt pay this invoice              | [`receipt`] |
//! | reading a quote request, the quote body         | [`quote`]   |
//! | a claim's steps, crediting, the payment record  | [`outcome`] |
//! | buying in one request with x402 (EIP-3009)      | [`x402`]    |

#[cfg(feature = "core-full")]
pub mod amount;
#[cfg(feature = "core-full")]
pub mod claim;
#[cfg(feature = "core-full")]
pub mod config;
pub mod entitlement;
#[cfg(feature = "core-full")]
pub mod evm;
#[cfg(feature = "core-full")]
pub mod invoice;
#[cfg(feature = "core-full")]
pub mod outcome;
#[cfg(feature = "core-full")]
pub mod quote;
#[cfg(feature = "core-full")]
pub mod receipt;
#[cfg(feature = "core-full")]
pub mod x402;
