//! The x402 endpoint's vars, on top of the upgrade's own ([`UpgradeConfig`]:
//! chain, USDC, treasury, prices, days). Without a facilitator the endpoint
//! is off (`x402_not_configured`) and the classic quote/claim stays on; a
//! set but malformed var turns it off too (fail closed), named in the log.

use super::cdp::{CdpKey, KEY_ID_SECRET, KEY_SECRET_SECRET};
use crate::core::upgrade::config::{BASE_CHAIN_ID, BASE_SEPOLIA_CHAIN_ID};

/// The facilitator's base URL (`…/settle`, `…/verify`). Unset: x402 is off.
pub const FACILITATOR_URL_VAR: &str = "X402_FACILITATOR_URL";
/// `none` (default) or `cdp` (a Bearer JWT per request from the CDP key
/// secrets `CDP_API_KEY_ID`, `CDP_API_KEY_SECRET`: [`super::cdp`]).
pub const FACILITATOR_AUTH_VAR: &str = "X402_FACILITATOR_AUTH";
/// The token's EIP-712 domain name (defaults on Base and Base Sepolia).
pub const TOKEN_NAME_VAR: &str = "X402_TOKEN_NAME";
/// The token's EIP-712 domain version (default "2" where the name has one).
pub const TOKEN_VERSION_VAR: &str = "X402_TOKEN_VERSION";
/// Upper bound of a 402's `maxTimeoutSeconds` (default 300).
pub const MAX_TIMEOUT_VAR: &str = "X402_MAX_TIMEOUT_SECONDS";
/// How long an x402 invoice is payable (default 900).
pub const INVOICE_TTL_VAR: &str = "X402_INVOICE_TTL_SECONDS";
/// Confirmations before an x402 payment credits (default 1).
pub const MIN_CONFIRMATIONS_VAR: &str = "X402_MIN_CONFIRMATIONS";
/// How long the Worker waits for `/settle` (default 45000).
pub const SETTLE_TIMEOUT_VAR: &str = "X402_SETTLE_TIMEOUT_MS";

/// How requests to the facilitator are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FacilitatorAuth {
    /// None (a self-hosted facilitator, x402.org on testnets).
    None,
    /// Coinbase CDP: a Bearer JWT per request, signed with this CDP API key
    /// (its `Debug` shows the key id only).
    Cdp(Box<CdpKey>),
}

/// A configured x402 endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct X402Config {
    /// The facilitator's base URL, without a trailing slash.
    pub facilitator_url: String,
    /// How to authenticate to it.
    pub auth: FacilitatorAuth,
    /// The token's EIP-712 domain name (clients sign over it: a wrong one
    /// makes every signature fail at the token).
    pub token_name: String,
    /// The token's EIP-712 domain version.
    pub token_version: String,
    /// Upper bound of `maxTimeoutSeconds`.
    pub max_timeout_seconds: u64,
    /// How long an invoice is payable, seconds.
    pub invoice_ttl_seconds: u64,
    /// Confirmations before a settlement credits: 1 by default, because
    /// facilitators answer after one receipt (5 would add ~8 s on Base).
    pub min_confirmations: u64,
    /// The Worker's wait for `/settle`, ms.
    pub settle_timeout_ms: u64,
}

/// The EIP-712 domain of Circle's USDC where the service knows it
/// (`docs/core-concepts/network-and-token-support.mdx` in the x402 repo).
fn default_domain(chain_id: u64) -> Option<(&'static str, &'static str)> {
    match chain_id {
        BASE_CHAIN_ID => Some(("USD Coin", "2")),
        BASE_SEPOLIA_CHAIN_ID => Some(("USDC", "2")),
        _ => None,
    }
}

impl X402Config {
    /// Reads the vars through `var` (unset or blank: `None`) for the
    /// upgrade's chain. `Ok(None)`: no facilitator, x402 off. `Err` names
    /// each malformed var, for the operator's log.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        chain_id: u64,
    ) -> Result<Option<X402Config>, Vec<String>> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let Some(url) = var(FACILITATOR_URL_VAR) else {
            return Ok(None);
        };
        let mut problems = Vec::new();
        let facilitator_url = url.trim_end_matches('/').to_owned();
        if !(facilitator_url.starts_with("https://") || facilitator_url.starts_with("http://"))
            || facilitator_url.contains(char::is_whitespace)
        {
            problems.push(format!("{FACILITATOR_URL_VAR}: not an http(s) URL"));
        }
        let auth = match var(FACILITATOR_AUTH_VAR).as_deref() {
            None | Some("none") => FacilitatorAuth::None,
            // Missing or malformed key secrets turn x402 off rather than
            // letting it ask CDP unauthenticated (every settlement refused).
            Some("cdp") => match CdpKey::from_secrets(
                var(KEY_ID_SECRET).as_deref(),
                var(KEY_SECRET_SECRET).as_deref(),
            ) {
                Ok(key) => FacilitatorAuth::Cdp(Box::new(key)),
                Err(p) => {
                    problems.extend(p);
                    FacilitatorAuth::None
                }
            },
            Some(_) => {
                problems.push(format!("{FACILITATOR_AUTH_VAR}: neither none nor cdp"));
                FacilitatorAuth::None
            }
        };
        let domain = default_domain(chain_id);
        let token_name = var(TOKEN_NAME_VAR).or(domain.map(|d| d.0.to_owned()));
        let token_version = var(TOKEN_VERSION_VAR).or(domain.map(|d| d.1.to_owned()));
        if token_name.is_none() {
            problems.push(format!("{TOKEN_NAME_VAR}: required for chain {chain_id}"));
        }
        if token_version.is_none() {
            problems.push(format!(
                "{TOKEN_VERSION_VAR}: required for chain {chain_id}"
            ));
        }
        let mut number = |name: &str, default: u64, range: std::ops::RangeInclusive<u64>| {
            let n = match var(name) {
                None => Some(default),
                Some(v) => v.parse::<u64>().ok().filter(|n| range.contains(n)),
            };
            if n.is_none() {
                problems.push(format!(
                    "{name}: not an integer {}..{}",
                    range.start(),
                    range.end()
                ));
            }
            n.unwrap_or(default)
        };
        let max_timeout_seconds = number(MAX_TIMEOUT_VAR, 300, 30..=3600);
        // At least 10 minutes: a fresh invoice is made when under 5 remain,
        // and each 402 keeps 2 of them back for clock skew.
        let invoice_ttl_seconds = number(INVOICE_TTL_VAR, 900, 600..=3600);
        let min_confirmations = number(MIN_CONFIRMATIONS_VAR, 1, 1..=1000);
        let settle_timeout_ms = number(SETTLE_TIMEOUT_VAR, 45_000, 1000..=120_000);
        match (token_name, token_version) {
            (Some(token_name), Some(token_version)) if problems.is_empty() => {
                Ok(Some(X402Config {
                    facilitator_url,
                    auth,
                    token_name,
                    token_version,
                    max_timeout_seconds,
                    invoice_ttl_seconds,
                    min_confirmations,
                    settle_timeout_ms,
                }))
            }
            _ => Err(problems),
        }
    }
}

/// The x402 config of the tests: Base, a local facilitator, the defaults.
#[cfg(test)]
pub(crate) fn test_x402_config() -> X402Config {
    X402Config::from_vars(
        |k| (k == FACILITATOR_URL_VAR).then(|| "http://127.0.0.1:4022/".to_owned()),
        BASE_CHAIN_ID,
    )
    .expect("valid")
    .expect("on")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)], chain: u64) -> Result<Option<X402Config>, Vec<String>> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        X402Config::from_vars(
            |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            chain,
        )
    }

    #[test]
    fn off_without_a_facilitator_and_defaults_otherwise() {
        assert_eq!(read(&[], BASE_CHAIN_ID), Ok(None));
        assert_eq!(
            read(&[(FACILITATOR_URL_VAR, "  ")], BASE_CHAIN_ID),
            Ok(None)
        );
        let c = test_x402_config();
        assert_eq!(c.facilitator_url, "http://127.0.0.1:4022");
        assert_eq!(c.auth, FacilitatorAuth::None);
        assert_eq!(
            (c.token_name.as_str(), c.token_version.as_str()),
            ("USD Coin", "2")
        );
        assert_eq!(
            (
                c.max_timeout_seconds,
                c.invoice_ttl_seconds,
                c.min_confirmations
            ),
            (300, 900, 1)
        );
        assert_eq!(c.settle_timeout_ms, 45_000);
        let sepolia = read(
            &[(FACILITATOR_URL_VAR, "https://x402.org/facilitator")],
            BASE_SEPOLIA_CHAIN_ID,
        )
        .unwrap()
        .unwrap();
        assert_eq!(sepolia.token_name, "USDC");
    }

    #[test]
    fn cdp_auth_needs_both_key_secrets() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/vectors/x402/cdp-jwt.json"))
                .unwrap();
        let secret = vectors["key"]["secret"].as_str().unwrap();
        let url = (
            FACILITATOR_URL_VAR,
            "https://api.cdp.coinbase.com/platform/v2/x402",
        );
        let cdp = (FACILITATOR_AUTH_VAR, "cdp");
        let c = read(
            &[
                url,
                cdp,
                (KEY_ID_SECRET, "key-1"),
                (KEY_SECRET_SECRET, secret),
            ],
            BASE_CHAIN_ID,
        )
        .unwrap()
        .unwrap();
        match &c.auth {
            FacilitatorAuth::Cdp(key) => assert_eq!(key.id(), "key-1"),
            other => panic!("{other:?}"),
        }
        // The config's Debug (logged nowhere, but still) shows no secret.
        assert!(!format!("{c:?}").contains(&secret[..16]));
        // Missing: both named. Malformed: named, the value never shown.
        let e = read(&[url, cdp], BASE_CHAIN_ID).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with(KEY_ID_SECRET)), "{e:?}");
        assert!(e.iter().any(|p| p.starts_with(KEY_SECRET_SECRET)), "{e:?}");
        let e = read(
            &[
                url,
                cdp,
                (KEY_ID_SECRET, "key-1"),
                (KEY_SECRET_SECRET, "c2VjcmV0"),
            ],
            BASE_CHAIN_ID,
        )
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(KEY_SECRET_SECRET) && !e[0].contains("c2VjcmV0"),
            "{e:?}"
        );
        // Without cdp the key secrets are not read at all.
        let none = read(&[url, (KEY_SECRET_SECRET, "junk")], BASE_CHAIN_ID);
        assert!(matches!(
            none,
            Ok(Some(X402Config {
                auth: FacilitatorAuth::None,
                ..
            }))
        ));
    }

    #[test]
    fn malformed_vars_turn_it_off_by_name() {
        let url = (FACILITATOR_URL_VAR, "https://f.example");
        for (name, value) in [
            (FACILITATOR_URL_VAR, "ftp://f"),
            (FACILITATOR_AUTH_VAR, "jwt"),
            (MAX_TIMEOUT_VAR, "0"),
            (INVOICE_TTL_VAR, "300"),
            (MIN_CONFIRMATIONS_VAR, "-1"),
            (SETTLE_TIMEOUT_VAR, "forever"),
        ] {
            let pairs = if name == FACILITATOR_URL_VAR {
                vec![(name, value)]
            } else {
                vec![url, (name, value)]
            };
            let e = read(&pairs, BASE_CHAIN_ID).unwrap_err();
            assert!(
                e.iter().any(|p| p.starts_with(name)),
                "{name}={value}: {e:?}"
            );
        }
        // A chain without a known USDC domain needs both domain vars.
        let e = read(&[url], 31337).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with(TOKEN_NAME_VAR)), "{e:?}");
        let local = read(
            &[url, (TOKEN_NAME_VAR, "USD Coin"), (TOKEN_VERSION_VAR, "2")],
            31337,
        );
        assert!(matches!(local, Ok(Some(_))));
    }
}
