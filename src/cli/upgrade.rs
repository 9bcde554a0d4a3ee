//! `upgrade`: buy a paid plan with USDC (quote, pay on-chain, claim), and
//! `upgrade claim` for a payment made elsewhere. The work is
//! `self_capsule::client::upgrade`; this is arguments and output. Progress
//! goes to stderr; stdout gets the result line (or, with `--json`, the
//! service's claim answer).

use crate::cli::print::{emit, print_json};
use crate::cli::{client, Global, JsonOut};
use crate::client::upgrade::{
    StopAfter, UpgradeOptions, X402Options, ARCHIVE_DIR, PROVIDER_TIMEOUT, UPGRADE_FILE,
};
use crate::client::Error;
use crate::core::limits::Tier;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::evm::Address;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Between two polls of the chain.
const POLL: Duration = Duration::from_secs(1);

pub(crate) const AFTER_HELP: &str = "\
Steps: POST /api/v1/self/upgrade/quote -> check eth_chainId against the quote -> sign an
ERC-20 transfer(to_address, amount_atomic) of token_contract with the key in --evm-key
(EIP-1559, or legacy where the chain has no base fee) -> eth_sendRawTransaction -> wait for
the receipt and min_confirmations -> POST /api/v1/self/upgrade/claim (signed with the
identity's Ed25519 key), resent while the service answers payment_pending.

Never pays twice. In the state directory:
  upgrade.json             the current purchase: the quote body (written before paying), the
                           signed raw transaction and its hash (written before broadcasting),
                           the claim's seq, and the service's answer once credited
  upgrades/<invoice>.json  earlier purchases, moved aside when a new one starts
A re-run with a transaction recorded finishes it (re-sending the same bytes if the chain does
not know them) and never signs another; a re-run after the credit prints the stored result.
--new starts another purchase once the last one is credited (or refused for good).

The key file holds 64 hex characters (0x optional), mode 0600; it is never printed.

--x402 pays the same plan through POST /api/v1/self/upgrade/x402 instead: the 402's
PAYMENT-REQUIRED is checked (eip155:<--chain-id>, that chain's USDC, the plan's price plus
a tag of at most 0.009999, --pay-to when given), an EIP-3009 TransferWithAuthorization is
signed (EIP-712) with --evm-key and written to upgrade.json before it is sent as
PAYMENT-SIGNATURE; while the service answers x402_settlement_pending (or the run ends) the
SAME header is resent, never a second one, unless the service answered
x402_settlement_failed or x402_invoice_mismatch (nothing moved): the next run pays the new
invoice. No RPC is needed (--rpc only to learn the chain id) and no gas.

Exit codes: 0 credited; 1 local (key file, balance, wrong chain, an open invoice for
another plan); 3 service or RPC unreachable; 4 fix the request; 5 still pending when
--confirmations-timeout ran out, or quote limits (run again later); 6 bad signature;
7 the payment cannot credit this invoice (underpaid, expired, reverted, ...); 9 the
service could not verify the payment on-chain for --provider-timeout seconds (default 60):
nothing was credited, the payment is safe, and the message gives the exact
`selfcap upgrade claim --invoice ... --tx ...` that claims it later.";

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct UpgradeArgs {
    #[command(subcommand)]
    claim: Option<UpgradeCommand>,
    /// The plan to buy.
    #[arg(long, value_enum, required = true)]
    plan: Option<Plan>,
    /// File with the paying account's secp256k1 private key (hex; mode 0600).
    #[arg(long, value_name = "FILE", env = "SELFCAP_EVM_KEY", required = true)]
    evm_key: Option<PathBuf>,
    /// JSON-RPC URL of the chain the quote names (e.g. Base). With --x402
    /// only used to learn the chain when --chain-id is not given.
    #[arg(
        long,
        value_name = "URL",
        env = "SELFCAP_RPC_URL",
        required_unless_present = "x402"
    )]
    rpc: Option<String>,
    /// Pay with x402 (POST /api/v1/self/upgrade/x402): sign an EIP-3009
    /// authorization for the 402's invoice; the service settles it (no gas,
    /// no transaction sent from here).
    #[arg(long)]
    x402: bool,
    /// With --x402: the chain to pay on (default: --rpc's eth_chainId, else 8453, Base).
    #[arg(long, value_name = "ID", env = "SELFCAP_CHAIN_ID", requires = "x402")]
    chain_id: Option<u64>,
    /// With --x402: the plan's price in USDC the invoice must be (plus a
    /// tag of at most 0.009999); default the list price (pro 5.00, plus 15.00).
    #[arg(long, value_name = "USDC", requires = "x402")]
    x402_price: Option<String>,
    /// With --x402: the service's treasury (payTo must be it), e.g. the
    /// to_address of `selfcap upgrade` quotes.
    #[arg(long, value_name = "ADDRESS", requires = "x402")]
    pay_to: Option<String>,
    /// Longest wait for the receipt, the confirmations and the claim.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    confirmations_timeout: u64,
    /// Longest wait while the service cannot verify payments on-chain
    /// (payment_provider_unavailable); then exit 9 with the claim command.
    #[arg(long, value_name = "SECS", default_value_t = PROVIDER_TIMEOUT.as_secs())]
    provider_timeout: u64,
    /// Buy again even though the last purchase was credited (never while a
    /// payment is in flight); also drops an unpaid open invoice.
    #[arg(long)]
    new: bool,
    #[command(flatten)]
    out: JsonOut,
}

#[derive(Subcommand)]
enum UpgradeCommand {
    /// Claim an invoice with a payment made elsewhere (waits while it is pending).
    Claim {
        /// The invoice id the quote returned (inv_...).
        #[arg(long, value_name = "ID")]
        invoice: String,
        /// The payment's transaction hash (0x + 64 hex).
        #[arg(long, value_name = "HASH")]
        tx: String,
        /// Longest wait while the service answers payment_pending.
        #[arg(long, value_name = "SECS", default_value_t = 900)]
        confirmations_timeout: u64,
        /// Longest wait while the service cannot verify payments on-chain
        /// (payment_provider_unavailable); then exit 9 with the claim command.
        #[arg(long, value_name = "SECS", default_value_t = PROVIDER_TIMEOUT.as_secs())]
        provider_timeout: u64,
        #[command(flatten)]
        out: JsonOut,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Plan {
    Pro,
    Plus,
}

/// `upgrade [--plan ...]` or `upgrade claim ...`.
pub(crate) fn run(g: &Global, a: UpgradeArgs) -> Result<(), Error> {
    if let Some(UpgradeCommand::Claim {
        invoice,
        tx,
        confirmations_timeout,
        provider_timeout,
        out,
    }) = a.claim
    {
        let c = client(g, 0)?;
        let v = c.upgrade_claim(
            &invoice,
            &tx,
            Duration::from_secs(confirmations_timeout),
            POLL,
            Duration::from_secs(provider_timeout),
            &note,
        )?;
        report(&v, out);
        return Ok(());
    }
    if a.x402 {
        return run_x402(g, a);
    }
    // clap enforces these without a subcommand.
    let (Some(plan), Some(evm_key), Some(rpc)) = (a.plan, a.evm_key, a.rpc) else {
        return Err(Error::Local(
            "upgrade needs --plan, --evm-key and --rpc (or `upgrade claim`)".into(),
        ));
    };
    let c = client(g, 0)?;
    let opts = UpgradeOptions {
        plan: match plan {
            Plan::Pro => Tier::Pro,
            Plan::Plus => Tier::Plus,
        },
        evm_key,
        rpc_url: rpc,
        timeout: Duration::from_secs(a.confirmations_timeout),
        poll: POLL,
        provider_timeout: Duration::from_secs(a.provider_timeout),
        new: a.new,
        stop_after: stop_after(),
    };
    let done = c.upgrade(&opts, &note)?;
    if !done.fresh {
        eprintln!(
            "selfcap: stored result from {} (archive: {}/)",
            c.state().file(UPGRADE_FILE).display(),
            ARCHIVE_DIR
        );
    }
    report(&done.claimed, a.out);
    Ok(())
}

/// `upgrade --x402`.
fn run_x402(g: &Global, a: UpgradeArgs) -> Result<(), Error> {
    let (Some(plan), Some(evm_key)) = (a.plan, a.evm_key) else {
        return Err(Error::Local(
            "upgrade --x402 needs --plan and --evm-key".into(),
        ));
    };
    let price = match &a.x402_price {
        None => None,
        Some(p) => Some(Usdc::parse(p).filter(|u| u.0 > 0).ok_or_else(|| {
            Error::Local(format!(
                "--x402-price {p:?} is not a USDC amount (e.g. 5.00)"
            ))
        })?),
    };
    let pay_to = match &a.pay_to {
        None => None,
        Some(t) => Some(Address::parse(t).ok_or_else(|| {
            Error::Local(format!(
                "--pay-to {t:?} is not an address (0x + 40 hex, EIP-55 when mixed-case)"
            ))
        })?),
    };
    let c = client(g, 0)?;
    let opts = X402Options {
        plan: match plan {
            Plan::Pro => Tier::Pro,
            Plan::Plus => Tier::Plus,
        },
        evm_key,
        chain_id: a.chain_id,
        rpc_url: a.rpc,
        price,
        pay_to,
        timeout: Duration::from_secs(a.confirmations_timeout),
        poll: POLL,
        new: a.new,
        stop_after: stop_after(),
    };
    let done = c.upgrade_x402(&opts, &note)?;
    if !done.fresh {
        eprintln!(
            "selfcap: stored result from {} (archive: {}/)",
            c.state().file(UPGRADE_FILE).display(),
            ARCHIVE_DIR
        );
    }
    report(&done.claimed, a.out);
    Ok(())
}

fn note(line: &str) {
    eprintln!("selfcap: {line}");
}

fn report(v: &Value, out: JsonOut) {
    if out.json {
        print_json(v);
        return;
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?");
    emit(&format!(
        "credited: {} until {} (invoice {}, tx {}, block {})\n",
        s("plan"),
        s("paid_until"),
        s("invoice_id"),
        s("tx_hash"),
        v.get("block_number").and_then(Value::as_u64).unwrap_or(0)
    ));
}

/// Test only: `SELFCAP_TEST_STOP_AFTER=sign|broadcast` stops as if the
/// process died there. Debug builds only; a release build ignores it.
#[cfg(debug_assertions)]
fn stop_after() -> Option<StopAfter> {
    match std::env::var("SELFCAP_TEST_STOP_AFTER").ok()?.as_str() {
        "sign" => Some(StopAfter::Sign),
        "broadcast" => Some(StopAfter::Broadcast),
        _ => None,
    }
}

#[cfg(not(debug_assertions))]
fn stop_after() -> Option<StopAfter> {
    None
}
