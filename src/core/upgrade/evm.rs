//! The little of Ethereum the service needs, without an EVM library in the
//! Worker: 20-byte addresses (EIP-55 checked when mixed-case), 32-byte
//! transaction hashes, JSON-RPC quantities, and the ERC-20 `Transfer` log.

use sha3::{Digest, Keccak256};
use std::fmt;

/// `keccak256("Transfer(address,address,uint256)")`: topic 0 of every ERC-20
/// transfer log.
pub const TRANSFER_TOPIC: &str =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// An EVM address, held as `0x` + 40 lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address(String);

impl Address {
    /// Reads `0x` + 40 hex. All-lowercase and all-uppercase are taken as
    /// they are; mixed case must carry a valid EIP-55 checksum (a typo in a
    /// checksummed treasury address must not silently send money nowhere).
    pub fn parse(s: &str) -> Option<Address> {
        let hex = s.trim().strip_prefix("0x")?;
        if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let lower = hex.to_ascii_lowercase();
        let mixed = hex != lower && hex != hex.to_ascii_uppercase();
        if mixed && checksummed(&lower) != hex {
            return None;
        }
        Some(Address(format!("0x{lower}")))
    }

    /// `0x` + 40 lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The EIP-55 spelling (what wallets show).
    pub fn checksummed(&self) -> String {
        format!("0x{}", checksummed(&self.0[2..]))
    }

    /// The address as a 32-byte log topic (left-padded with zeros).
    pub fn as_topic(&self) -> String {
        format!("0x{:0>64}", &self.0[2..])
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn checksummed(lower: &str) -> String {
    let hash = Keccak256::digest(lower.as_bytes());
    lower
        .chars()
        .enumerate()
        .map(|(i, c)| {
            let nibble = (hash[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 0xf;
            if c.is_ascii_alphabetic() && nibble >= 8 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// A transaction hash: `0x` + 64 lowercase hex (any case accepted).
pub fn parse_tx_hash(s: &str) -> Option<String> {
    let hex = s.trim().strip_prefix("0x")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("0x{}", hex.to_ascii_lowercase()))
}

/// A JSON-RPC quantity (`0x` + hex, no leading zeros required to be
/// absent) that fits in a u64.
pub fn quantity(s: &str) -> Option<u64> {
    let hex = s.strip_prefix("0x")?;
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// A 32-byte data word (`0x` + 64 hex) as a u128, or `None` when it is
/// malformed or too large for one (no real USDC amount is).
pub fn word_u128(s: &str) -> Option<u128> {
    let hex = s.strip_prefix("0x")?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (high, low) = hex.split_at(32);
    if high.bytes().any(|b| b != b'0') {
        return None;
    }
    u128::from_str_radix(low, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eip55_vectors() {
        // The examples of EIP-55 itself.
        for good in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        ] {
            let a = Address::parse(good).unwrap();
            assert_eq!(a.checksummed(), good);
            assert_eq!(a.as_str(), good.to_ascii_lowercase());
        }
        // One letter's case flipped: refused.
        assert_eq!(
            Address::parse("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"),
            None
        );
        assert!(Address::parse("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed").is_some());
        assert!(Address::parse("0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED").is_some());
        for bad in [
            "",
            "0x",
            "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae",
            "0xzaaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        ] {
            assert_eq!(Address::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_transfer_topic_is_the_keccak_of_the_event_signature() {
        let h = Keccak256::digest(b"Transfer(address,address,uint256)");
        assert_eq!(format!("0x{}", hex::encode(h)), TRANSFER_TOPIC);
    }

    #[test]
    fn quantities_words_and_hashes() {
        assert_eq!(quantity("0x0"), Some(0));
        assert_eq!(quantity("0x1b4"), Some(436));
        assert_eq!(quantity("0x"), None);
        assert_eq!(quantity("1b4"), None);
        assert_eq!(quantity("0x10000000000000000"), None);
        let w = format!("0x{:064x}", 5_004_217u64);
        assert_eq!(word_u128(&w), Some(5_004_217));
        assert_eq!(word_u128(&format!("0x1{}", "0".repeat(63))), None);
        assert_eq!(word_u128("0x01"), None);
        let h = format!("0x{}", "AB".repeat(32));
        assert_eq!(parse_tx_hash(&h), Some(format!("0x{}", "ab".repeat(32))));
        assert_eq!(parse_tx_hash("0x12"), None);
        let a = Address::parse("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed").unwrap();
        assert_eq!(
            a.as_topic(),
            "0x0000000000000000000000005aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
        );
    }
}
