//! The upgrade's configuration, read from the deployment's vars (names are
//! fixed: outside checks use them). Money settings fail closed: a missing or
//! malformed treasury, contract, RPC URL or price turns the two upgrade
//! endpoints off (`upgrades_not_configured`) rather than falling back to a
//! guess; everything else keeps working.

use super::amount::Usdc;
use super::evm::Address;
use crate::core::limits::Tier;

/// Chain id (default: Base mainnet).
pub const CHAIN_ID_VAR: &str = "UPGRADE_CHAIN_ID";
/// The USDC contract (default only for Base and Base Sepolia).
pub const USDC_CONTRACT_VAR: &str = "UPGRADE_USDC_CONTRACT";
/// Where payments go. Required.
pub const TREASURY_VAR: &str = "UPGRADE_TREASURY";
/// Confirmations before a payment credits (default 5).
pub const MIN_CONFIRMATIONS_VAR: &str = "UPGRADE_MIN_CONFIRMATIONS";
/// Days one payment buys (default 30).
pub const DAYS_VAR: &str = "UPGRADE_DAYS";
/// Pro's price in USDC (default "5.00").
pub const PRO_PRICE_VAR: &str = "PRO_PRICE_USDC";
/// Plus's price in USDC (default "15.00").
pub const PLUS_PRICE_VAR: &str = "PLUS_PRICE_USDC";
/// The chain's JSON-RPC endpoint (a secret or a var). Required.
pub const RPC_URL_VAR: &str = "UPGRADE_RPC_URL";
/// Pro's price when [`PRO_PRICE_VAR`] is unset.
pub const DEFAULT_PRO_PRICE: &str = "5.00";
/// Plus's price when [`PLUS_PRICE_VAR`] is unset.
pub const DEFAULT_PLUS_PRICE: &str = "15.00";

/// A plan's price when its var is unset (free is not sold).
pub fn default_price(plan: Tier) -> Option<Usdc> {
    match plan {
        Tier::Free => None,
        Tier::Pro => Usdc::parse(DEFAULT_PRO_PRICE),
        Tier::Plus => Usdc::parse(DEFAULT_PLUS_PRICE),
    }
}

/// Base mainnet.
pub const BASE_CHAIN_ID: u64 = 8453;
/// Base Sepolia.
pub const BASE_SEPOLIA_CHAIN_ID: u64 = 84532;

/// Circle's USDC on the chains the service knows by default.
pub fn canonical_usdc(chain_id: u64) -> Option<Address> {
    let raw = match chain_id {
        BASE_CHAIN_ID => "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        BASE_SEPOLIA_CHAIN_ID => "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
        _ => return None,
    };
    Address::parse(raw)
}

/// The chain's name in quotes and bodies.
pub fn chain_name(chain_id: u64) -> String {
    match chain_id {
        BASE_CHAIN_ID => "base".to_owned(),
        BASE_SEPOLIA_CHAIN_ID => "base-sepolia".to_owned(),
        other => format!("eip155:{other}"),
    }
}

/// A configured upgrade: everything a quote and a claim need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeConfig {
    /// The one chain payments are taken on.
    pub chain_id: u64,
    /// The USDC contract on it (only its `Transfer` logs count).
    pub usdc: Address,
    /// The receiving address.
    pub treasury: Address,
    /// Blocks on top of (and including) the payment's before it credits.
    pub min_confirmations: u64,
    /// Days one payment buys.
    pub days: u32,
    /// Pro's price (whole cents).
    pub pro_price: Usdc,
    /// Plus's price (whole cents).
    pub plus_price: Usdc,
    /// The JSON-RPC endpoint the service verifies payments with.
    pub rpc_url: String,
}

impl UpgradeConfig {
    /// Reads the vars through `var` (unset or blank: `None`). `Err` lists
    /// what is missing or malformed, by var name, for the operator's log.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<UpgradeConfig, Vec<String>> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let mut bad = |name: &str, what: &str| problems.push(format!("{name}: {what}"));
        let number = |name: &str, default: u64| match var(name) {
            None => Some(default),
            Some(v) => v.trim().parse::<u64>().ok().filter(|n| *n > 0),
        };
        let chain_id = number(CHAIN_ID_VAR, BASE_CHAIN_ID);
        if chain_id.is_none() {
            bad(CHAIN_ID_VAR, "not a positive integer");
        }
        let usdc = match var(USDC_CONTRACT_VAR) {
            Some(v) => Address::parse(&v),
            None => chain_id.and_then(canonical_usdc),
        };
        if usdc.is_none() {
            bad(
                USDC_CONTRACT_VAR,
                "missing (required for this chain id) or not an address",
            );
        }
        let treasury = var(TREASURY_VAR).and_then(|v| Address::parse(&v));
        if treasury.is_none() {
            bad(TREASURY_VAR, "missing or not an address");
        }
        let min_confirmations = number(MIN_CONFIRMATIONS_VAR, 5).filter(|n| *n <= 1000);
        if min_confirmations.is_none() {
            bad(MIN_CONFIRMATIONS_VAR, "not an integer 1..1000");
        }
        let days = number(DAYS_VAR, 30)
            .filter(|d| *d <= 3660)
            .map(|d| d as u32);
        if days.is_none() {
            bad(DAYS_VAR, "not an integer 1..3660");
        }
        let price = |name: &str, default: &str| {
            Usdc::parse(&var(name).unwrap_or_else(|| default.to_owned()))
                .filter(|p| p.0 > 0 && p.is_whole_cents())
        };
        let pro_price = price(PRO_PRICE_VAR, DEFAULT_PRO_PRICE);
        if pro_price.is_none() {
            bad(PRO_PRICE_VAR, "not a positive USDC amount in whole cents");
        }
        let plus_price = price(PLUS_PRICE_VAR, DEFAULT_PLUS_PRICE);
        if plus_price.is_none() {
            bad(PLUS_PRICE_VAR, "not a positive USDC amount in whole cents");
        }
        let rpc_url = var(RPC_URL_VAR).map(|v| v.trim().to_owned()).filter(|v| {
            (v.starts_with("https://") || v.starts_with("http://"))
                && !v.contains(char::is_whitespace)
        });
        if rpc_url.is_none() {
            bad(RPC_URL_VAR, "missing or not an http(s) URL");
        }
        match (
            chain_id,
            usdc,
            treasury,
            min_confirmations,
            days,
            pro_price,
            plus_price,
            rpc_url,
        ) {
            (
                Some(chain_id),
                Some(usdc),
                Some(treasury),
                Some(min_confirmations),
                Some(days),
                Some(pro_price),
                Some(plus_price),
                Some(rpc_url),
            ) => Ok(UpgradeConfig {
                chain_id,
                usdc,
                treasury,
                min_confirmations,
                days,
                pro_price,
                plus_price,
                rpc_url,
            }),
            _ => Err(problems),
        }
    }

    /// The price of a paid plan (`None` for free, which is not sold).
    pub fn price(&self, plan: Tier) -> Option<Usdc> {
        match plan {
            Tier::Free => None,
            Tier::Pro => Some(self.pro_price),
            Tier::Plus => Some(self.plus_price),
        }
    }
}

/// A configured upgrade for tests: Base defaults, anvil's third dev account
/// as treasury, a loopback RPC.
#[cfg(test)]
pub(crate) fn test_config() -> UpgradeConfig {
    UpgradeConfig::from_vars(|k| match k {
        TREASURY_VAR => Some("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc".into()),
        RPC_URL_VAR => Some("http://127.0.0.1:8545".into()),
        _ => None,
    })
    .expect("test config")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<UpgradeConfig, Vec<String>> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        UpgradeConfig::from_vars(|k| m.get(k).cloned())
    }

    const TREASURY: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";

    #[test]
    fn defaults_are_base_usdc_30_days_5_and_15() {
        let c = read(&[
            (TREASURY_VAR, TREASURY),
            (RPC_URL_VAR, "http://127.0.0.1:8545"),
        ])
        .unwrap();
        assert_eq!(c.chain_id, 8453);
        assert_eq!(
            c.usdc.checksummed(),
            "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
        );
        assert_eq!((c.min_confirmations, c.days), (5, 30));
        assert_eq!(
            (c.pro_price, c.plus_price),
            (Usdc(5_000_000), Usdc(15_000_000))
        );
        assert_eq!(c.price(Tier::Free), None);
        let sepolia = read(&[
            (TREASURY_VAR, TREASURY),
            (RPC_URL_VAR, "https://rpc.example"),
            (CHAIN_ID_VAR, "84532"),
        ])
        .unwrap();
        assert_eq!(
            sepolia.usdc.checksummed(),
            "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
        );
    }

    #[test]
    fn money_settings_fail_closed() {
        // Nothing set: off, naming the two required vars.
        let e = read(&[]).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with(TREASURY_VAR)), "{e:?}");
        assert!(e.iter().any(|p| p.starts_with(RPC_URL_VAR)), "{e:?}");
        let base = [
            (TREASURY_VAR, TREASURY),
            (RPC_URL_VAR, "http://127.0.0.1:8545"),
        ];
        for (name, value) in [
            (CHAIN_ID_VAR, "base"),
            (USDC_CONTRACT_VAR, "0x1234"),
            (TREASURY_VAR, "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"), // bad checksum
            (MIN_CONFIRMATIONS_VAR, "0"),
            (DAYS_VAR, "-3"),
            (PRO_PRICE_VAR, "5.001"), // not whole cents: the tag needs those digits
            (PLUS_PRICE_VAR, "0"),
            (RPC_URL_VAR, "ftp://x"),
        ] {
            let mut pairs: Vec<(&str, &str)> =
                base.iter().filter(|(k, _)| *k != name).copied().collect();
            pairs.push((name, value));
            let e = read(&pairs).unwrap_err();
            assert!(
                e.iter().any(|p| p.starts_with(name)),
                "{name}={value}: {e:?}"
            );
        }
        // An unknown chain without a contract: the contract is what is missing.
        let e = read(&[base[0], base[1], (CHAIN_ID_VAR, "31337")]).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with(USDC_CONTRACT_VAR)), "{e:?}");
        // A local chain with its own contract is fine.
        let c = read(&[
            (TREASURY_VAR, TREASURY),
            (RPC_URL_VAR, "http://127.0.0.1:8545"),
            (CHAIN_ID_VAR, "31337"),
            (
                USDC_CONTRACT_VAR,
                "0x5fbdb2315678afecb367f032d93f642f64180aa3",
            ),
        ])
        .unwrap();
        assert_eq!(chain_name(c.chain_id), "eip155:31337");
    }
}
