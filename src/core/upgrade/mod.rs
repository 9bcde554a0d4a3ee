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
//! | buying in one request with x402 (EIP-3009)      | [`x402`]    |

pub mod amount;
pub mod claim;
pub mod config;
pub mod evm;
pub mod invoice;
pub mod outcome;
pub mod quote;
pub mod receipt;
pub mod x402;
