//! The payment transaction: the payer's secp256k1 key ([`PayerKey`]), the
//! ERC-20 `transfer` calldata, the fees (EIP-1559 or legacy) and gas limit,
//! and the signed transaction ([`sign_tx`], alloy's types and encoding).

use crate::client::Error;
use crate::core::upgrade::evm;
use std::fs;
use std::path::Path;
use zeroize::Zeroizing;

/// Gas limit over the node's estimate, in percent.
const GAS_HEADROOM_PERCENT: u64 = 20;
/// The priority fee when the node suggests none (1 gwei).
const FALLBACK_PRIORITY_FEE: u128 = 1_000_000_000;
/// `transfer(address,uint256)`.
const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// `balanceOf(address)`.
pub(super) const BALANCE_OF_SELECTOR: [u8; 4] = [0x70, 0xa0, 0x82, 0x31];

/// A secp256k1 key from `--evm-key FILE`. Never printed (`Debug` shows the
/// address only); zeroed on drop.
pub(super) struct PayerKey(k256::ecdsa::SigningKey);

impl std::fmt::Debug for PayerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PayerKey({})", self.address())
    }
}

impl PayerKey {
    /// Reads the key file: 64 hex characters (`0x` optional, surrounding
    /// whitespace ignored). Refuses a file others can read, like the
    /// identity's own key. Errors never quote the file's content.
    pub(super) fn load(path: &Path) -> Result<PayerKey, Error> {
        let bad = |why: &str| Error::local(format!("bad EVM key file {}: {why}", path.display()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::metadata(path).map_err(|e| {
                Error::local(format!("cannot read EVM key file {}: {e}", path.display()))
            })?;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(Error::local(format!(
                    "EVM key file {} is accessible by others (mode {:04o}): run `chmod 600 {}`",
                    path.display(),
                    mode & 0o7777,
                    path.display()
                )));
            }
        }
        let bytes = Zeroizing::new(fs::read(path).map_err(|e| {
            Error::local(format!("cannot read EVM key file {}: {e}", path.display()))
        })?);
        let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text"))?;
        PayerKey::parse(text)
            .ok_or_else(|| bad("expected a secp256k1 private key: 64 hex characters, 0x optional"))
    }

    /// Parses the key text (see [`PayerKey::load`]).
    pub(super) fn parse(text: &str) -> Option<PayerKey> {
        let t = text.trim();
        let hex_key = t.strip_prefix("0x").unwrap_or(t);
        let mut raw = Zeroizing::new([0u8; 32]);
        if hex_key.len() != 64 || hex::decode_to_slice(hex_key, &mut raw[..]).is_err() {
            return None;
        }
        k256::ecdsa::SigningKey::from_slice(&raw[..])
            .ok()
            .map(PayerKey)
    }

    /// The address that pays.
    pub(super) fn address(&self) -> evm::Address {
        let a = alloy_primitives::Address::from_private_key(&self.0);
        evm::Address::parse(&format!("{a:#x}")).expect("alloy spells addresses as 0x + 40 hex")
    }

    pub(super) fn sign_hash(
        &self,
        hash: &alloy_primitives::B256,
    ) -> Result<alloy_primitives::Signature, Error> {
        let (sig, recid) = self
            .0
            .sign_prehash_recoverable(hash.as_slice())
            .map_err(|e| Error::local(format!("cannot sign the transaction: {e}")))?;
        Ok(alloy_primitives::Signature::from((sig, recid)))
    }
}

/// The calldata of ERC-20 `transfer(to, amount)`: the selector, then the
/// address and the amount as 32-byte words.
pub(super) fn transfer_calldata(to: &evm::Address, amount: u128) -> Vec<u8> {
    let mut data = TRANSFER_SELECTOR.to_vec();
    data.extend_from_slice(&address_word(to));
    data.extend_from_slice(&[0u8; 16]);
    data.extend_from_slice(&amount.to_be_bytes());
    data
}

pub(super) fn address_word(a: &evm::Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    hex::decode_to_slice(&a.as_str()[2..], &mut w[12..]).expect("an Address is 40 hex digits");
    w
}

/// How the transaction pays for gas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fees {
    /// EIP-1559 (type 2): the chain has a base fee.
    Eip1559 { max_fee: u128, priority_fee: u128 },
    /// Legacy (EIP-155 signed): the chain has no base fee.
    Legacy { gas_price: u128 },
}

/// The fees from the latest block's base fee (`None`: the chain has none),
/// the node's suggested priority fee and its gas price: EIP-1559 with
/// `max_fee = 2 * base + priority` (room for the base fee to double), else
/// legacy at the node's gas price.
pub(super) fn fees(
    base_fee: Option<u128>,
    suggested_priority: Option<u128>,
    gas_price: Option<u128>,
) -> Result<Fees, String> {
    match base_fee {
        Some(base) => {
            let priority_fee = suggested_priority
                .or_else(|| gas_price.map(|g| g.saturating_sub(base)).filter(|p| *p > 0))
                .unwrap_or(FALLBACK_PRIORITY_FEE);
            Ok(Fees::Eip1559 {
                max_fee: base.saturating_mul(2).saturating_add(priority_fee),
                priority_fee,
            })
        }
        None => gas_price
            .map(|gas_price| Fees::Legacy { gas_price })
            .ok_or_else(|| "the chain has no base fee and the node gave no gas price".into()),
    }
}

/// The gas limit for a node's estimate: [`GAS_HEADROOM_PERCENT`] more.
pub(super) fn gas_limit(estimate: u64) -> u64 {
    estimate.saturating_add(estimate.saturating_mul(GAS_HEADROOM_PERCENT) / 100)
}

/// An unsigned call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TxParams {
    pub chain_id: u64,
    pub nonce: u64,
    pub gas_limit: u64,
    pub fees: Fees,
    pub to: evm::Address,
    /// Wei sent along (0 for a token transfer).
    pub value: u128,
    pub data: Vec<u8>,
}

/// A signed transaction: its EIP-2718 bytes and their hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SignedTx {
    pub raw: Vec<u8>,
    /// `0x` + 64 lowercase hex.
    pub hash: String,
}

/// Builds and signs `p` (alloy's transaction types and encoding).
pub(super) fn sign_tx(p: &TxParams, key: &PayerKey) -> Result<SignedTx, Error> {
    use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope, TxLegacy};
    use alloy_eips::eip2718::Encodable2718;
    use alloy_primitives::{Bytes, TxKind, U256};
    let to = TxKind::Call(alloy_primitives::Address::from_slice(
        &address_word(&p.to)[12..],
    ));
    let input = Bytes::from(p.data.clone());
    let value = U256::from(p.value);
    let envelope: TxEnvelope = match p.fees {
        Fees::Eip1559 {
            max_fee,
            priority_fee,
        } => {
            let tx = TxEip1559 {
                chain_id: p.chain_id,
                nonce: p.nonce,
                gas_limit: p.gas_limit,
                max_fee_per_gas: max_fee,
                max_priority_fee_per_gas: priority_fee,
                to,
                value,
                access_list: Default::default(),
                input,
            };
            let sig = key.sign_hash(&tx.signature_hash())?;
            tx.into_signed(sig).into()
        }
        Fees::Legacy { gas_price } => {
            let tx = TxLegacy {
                chain_id: Some(p.chain_id),
                nonce: p.nonce,
                gas_price,
                gas_limit: p.gas_limit,
                to,
                value,
                input,
            };
            let sig = key.sign_hash(&tx.signature_hash())?;
            tx.into_signed(sig).into()
        }
    };
    let raw = envelope.encoded_2718();
    let hash = format!("0x{}", hex::encode(alloy_primitives::keccak256(&raw)));
    Ok(SignedTx { raw, hash })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::upgrade::fixtures::*;

    #[test]
    fn transfer_calldata_matches_the_abi() {
        // keccak256("transfer(address,uint256)")[..4].
        use sha3::{Digest, Keccak256};
        let h = Keccak256::digest(b"transfer(address,uint256)");
        assert_eq!(h[..4], TRANSFER_SELECTOR);
        let h = Keccak256::digest(b"balanceOf(address)");
        assert_eq!(h[..4], BALANCE_OF_SELECTOR);
        // transfer(account 1, 5004217): what solc / ethers / viem encode.
        let to = evm::Address::parse(ACCOUNT_1).unwrap();
        assert_eq!(
            hex::encode(transfer_calldata(&to, 5_004_217)),
            "a9059cbb\
             00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8\
             00000000000000000000000000000000000000000000000000000000004c5bb9"
        );
        assert_eq!(
            hex::encode(&transfer_calldata(&to, u128::MAX)[36..]),
            format!("{}{}", "0".repeat(32), "f".repeat(32))
        );
    }

    #[test]
    fn fees_follow_the_chain() {
        assert_eq!(
            fees(Some(100), Some(7), None),
            Ok(Fees::Eip1559 {
                max_fee: 207,
                priority_fee: 7
            })
        );
        // No suggestion: the gas price over the base fee, else the fallback.
        assert_eq!(
            fees(Some(100), None, Some(150)),
            Ok(Fees::Eip1559 {
                max_fee: 250,
                priority_fee: 50
            })
        );
        assert_eq!(
            fees(Some(100), None, Some(90)),
            Ok(Fees::Eip1559 {
                max_fee: 200 + FALLBACK_PRIORITY_FEE,
                priority_fee: FALLBACK_PRIORITY_FEE
            })
        );
        assert_eq!(fees(None, None, Some(5)), Ok(Fees::Legacy { gas_price: 5 }));
        assert!(fees(None, Some(1), None).is_err());
        assert_eq!(
            fees(Some(u128::MAX), Some(1), None),
            Ok(Fees::Eip1559 {
                max_fee: u128::MAX,
                priority_fee: 1
            })
        );
        assert_eq!(gas_limit(50_000), 60_000);
        assert_eq!(gas_limit(u64::MAX), u64::MAX);
    }

    #[test]
    fn the_payer_key_parses_and_never_shows() {
        let k = PayerKey::parse(ANVIL_KEY).unwrap();
        assert_eq!(k.address().checksummed(), ANVIL_ADDR);
        let k2 = PayerKey::parse(&format!("  {}\n", &ANVIL_KEY[2..])).unwrap();
        assert_eq!(k2.address(), k.address());
        let shown = format!("{k:?}");
        assert!(
            !shown.contains(&ANVIL_KEY[2..]) && shown.contains("f39fd6e5"),
            "{shown}"
        );
        for bad in ["", "0x", &ANVIL_KEY[..64], "zz", &"0".repeat(64)] {
            assert!(PayerKey::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_legacy_transaction_matches_the_eip155_example() {
        // EIP-155's own example: nonce 9, 20 gwei, 21000 gas, 1 ether to
        // 0x3535…35 on chain 1, signed with the key 0x4646…46.
        let key = PayerKey::parse(&"46".repeat(32)).unwrap();
        let p = TxParams {
            chain_id: 1,
            nonce: 9,
            gas_limit: 21_000,
            fees: Fees::Legacy {
                gas_price: 20_000_000_000,
            },
            to: evm::Address::parse(&format!("0x{}", "35".repeat(20))).unwrap(),
            value: 1_000_000_000_000_000_000,
            data: vec![],
        };
        let s = sign_tx(&p, &key).unwrap();
        assert_eq!(
            hex::encode(&s.raw),
            "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83"
        );
        assert_eq!(
            s.hash,
            format!("0x{}", hex::encode(alloy_primitives::keccak256(&s.raw)))
        );
    }

    #[test]
    fn an_eip1559_transfer_is_type_2_and_recovers_to_the_payer() {
        use alloy_consensus::transaction::SignerRecoverable;
        use alloy_consensus::TxEnvelope;
        use alloy_eips::eip2718::Decodable2718;
        let key = PayerKey::parse(ANVIL_KEY).unwrap();
        let to = evm::Address::parse(ACCOUNT_1).unwrap();
        let usdc = evm::Address::parse("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913").unwrap();
        let p = TxParams {
            chain_id: 8453,
            nonce: 3,
            gas_limit: gas_limit(50_000),
            fees: fees(Some(1_000_000_000), Some(1_000_000), None).unwrap(),
            to: usdc.clone(),
            value: 0,
            data: transfer_calldata(&to, 5_004_217),
        };
        let s = sign_tx(&p, &key).unwrap();
        assert_eq!(s.raw[0], 0x02, "EIP-2718 type 2");
        // Deterministic (RFC 6979): the same bytes every time.
        assert_eq!(sign_tx(&p, &key).unwrap(), s);
        let env = TxEnvelope::decode_2718(&mut s.raw.as_slice()).unwrap();
        assert_eq!(format!("{:#x}", env.tx_hash()), s.hash);
        let signer = env.recover_signer().unwrap();
        assert_eq!(format!("{signer:#x}"), ANVIL_ADDR.to_ascii_lowercase());
        let TxEnvelope::Eip1559(signed) = env else {
            panic!("not 1559")
        };
        let tx = signed.tx();
        assert_eq!((tx.chain_id, tx.nonce, tx.gas_limit), (8453, 3, 60_000));
        assert_eq!(tx.max_fee_per_gas, 2_001_000_000);
        assert_eq!(tx.max_priority_fee_per_gas, 1_000_000);
        assert_eq!(format!("{:#x}", tx.to.to().unwrap()), usdc.as_str());
        assert_eq!(tx.input.as_ref(), p.data.as_slice());
        // Legacy where the chain has no base fee: EIP-155 (v = 2 * 8453 + 35/36).
        let legacy = TxParams {
            fees: Fees::Legacy { gas_price: 7 },
            ..p
        };
        let s = sign_tx(&legacy, &key).unwrap();
        let env = TxEnvelope::decode_2718(&mut s.raw.as_slice()).unwrap();
        assert!(matches!(env, TxEnvelope::Legacy(ref t) if t.tx().chain_id == Some(8453)));
        assert_eq!(
            format!("{:#x}", env.recover_signer().unwrap()),
            ANVIL_ADDR.to_ascii_lowercase()
        );
    }
}
