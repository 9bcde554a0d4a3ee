//! Buying a plan with x402: one HTTP request answered 402 with an invoice,
//! resent with the payer's signed EIP-3009 authorization, settled on-chain
//! through a facilitator (why it works this way: `docs/design/x402.md`,
//! "What was decided, and why").
//!
//! The payer signs only `from, to, value, validAfter, validBefore, nonce`,
//! so nothing it signs names an agent. The invoice's unique amount does:
//! the 402 offers this agent's invoice (price + tag, as in [`super::invoice`]),
//! and an authorization matches only the invoice whose amount it signed. A
//! header stolen and replayed on another agent's URL pays no invoice there.
//!
//! Money is credited only on what the chain shows, never on a facilitator's
//! word, and a request whose money may have moved is never answered 402.
//!
//! | concern                                              | module           |
//! |------------------------------------------------------|------------------|
//! | the endpoint's query                                 | [`ask`]          |
//! | the X402_* vars                                      | [`config`]       |
//! | headers: payment in, 402 and settlement response out | [`wire`]         |
//! | the facilitator's `/settle` and `/verify`            | [`facilitator`]  |
//! | the Bearer JWT of Coinbase CDP's facilitator         | [`cdp`]          |
//! | the agent's x402 invoices and what a payment matches | [`invoice`]      |
//! | a payment that is not a bound authorization          | [`unbound`]      |
//! | `authorizationState`, `AuthorizationUsed`, receipts  | [`chain`]        |
//! | a paid request, its settlement and the alarm         | [`settle`]       |

pub mod ask;
pub mod cdp;
pub mod chain;
pub mod config;
pub mod facilitator;
pub mod invoice;
pub mod settle;
pub mod unbound;
pub mod wire;
