//! Wallet keys by structure: BIP39 mnemonics (word list plus checksum),
//! Base58Check WIF and BIP32 extended private keys (double-SHA-256
//! checksum), Solana keypairs (the second half is the Ed25519 public key of
//! the first) and 0x/64-hex keys under a private-key label.
//!
//! Every check is one linear pass over the string with a cheap byte-level
//! prefilter; decoding and hashing only run on tokens of exactly the right
//! shape, so ordinary prose costs a scan and nothing more. Public material
//! (addresses, xpub keys, public keys, transaction hashes) never matches:
//! either its structure differs (length, version, prefix) or, for hex, the
//! label is not a private-key label.

use super::{Matcher::Detect, Rule, BASE};
use crate::core::safety::automata::{self, Automaton, Kind, Source};
use crate::core::safety::normalize::{self, Views};
use crate::core::safety::FindingClass::Secret;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::OnceLock;

pub(super) static RULES: &[Rule] = &[
    // 12/15/18/21/24 consecutive English BIP39 words with a valid checksum,
    // or 12+ list words under a seed/mnemonic label.
    Rule {
        class: Secret,
        name: "bip39_mnemonic",
        matcher: Detect(bip39_mnemonic),
        hits: examples![
            // BIP39 test vectors (trezor/python-mnemonic vectors.json).
            concat!(
                "abandon abandon abandon abandon abandon abandon ",
                "abandon abandon abandon abandon abandon about"
            ),
            concat!(
                "seed: 1. legal 2. winner 3. thank 4. year 5. wave 6. sausage ",
                "7. worth 8. useful 9. legal 10. winner 11. thank 12. yellow"
            ),
            concat!(
                "Recovery phrase: abandon ability able about above absent ",
                "absorb abstract absurd abuse access accident"
            ),
        ],
        misses: examples![
            concat!(
                "Review the open pull request, then write a short summary for ",
                "the team and plan the next release with a clear budget."
            ),
            concat!(
                "abandon ability able about above absent absorb abstract ",
                "absurd abuse access accident"
            ),
            "seed phrase handling: never store the words in the capsule",
        ],
        ..BASE
    },
    // Base58Check WIF: version 0x80 (mainnet) or 0xef (testnet), 32-byte key
    // with an optional 0x01 compression flag.
    Rule {
        class: Secret,
        name: "bitcoin_wif_key",
        matcher: Detect(wif_key),
        hits: examples![
            // Bitcoin wiki "Wallet import format" example.
            concat!(
                "wif ",
                "5HueCGU8rMjxEXxiPuD5BDku",
                "4MkFqeZyd4dZ1jvhTVqvbTLvyTJ"
            ),
            concat!(
                "key=",
                "5HueCGU8rMjxEXxiPuD5BDku",
                "4MkFqeZyd4dZ1jvhTVqvbTLvyTJ",
                "."
            ),
        ],
        misses: examples![
            // The same key with one character changed: checksum fails.
            concat!("5HueCGU8rMjxEXxiPuD5BDku", "4MkFqeZyd4dZ1jvhTVqvbTLvyTK"),
            // A Bitcoin address (version 0x00).
            "send to 1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
        ],
        ..BASE
    },
    // BIP32 extended private keys (xprv, tprv, yprv, zprv, ...): 78-byte
    // payload, Base58Check. xpub/tpub never match: their prefix is "pub".
    Rule {
        class: Secret,
        name: "bip32_extended_private_key",
        matcher: Detect(extended_private_key),
        hits: examples![
            // BIP32 test vector 1, chain m.
            concat!(
                "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJ",
                "xWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
            ),
            concat!(
                "backup: ",
                "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJ",
                "xWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
            ),
        ],
        misses: examples![
            // Its public counterpart.
            concat!(
                "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoC",
                "u1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
            ),
            "derive child keys from the xprv stored in the HSM",
        ],
        ..BASE
    },
    // A Solana keypair: 64 bytes (Base58 or a JSON byte array) whose last 32
    // bytes are the Ed25519 public key of the first 32.
    Rule {
        class: Secret,
        name: "solana_secret_key",
        matcher: Detect(solana_keypair),
        hits: examples![
            // Seed 0x00..0x1f followed by its public key (Base58).
            concat!(
                "keypair ",
                "1GMkH3brNXiNNs1tiFZHu4yZSRrzJwxi5wB9bHFtMikjwp",
                "AW9DMZzU2Pqakc5it8X3N5vPmqdN7KF4CCUpmKhq"
            ),
            concat!(
                "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,",
                "24,25,26,27,28,29,30,31,3,161,7,191,243,206,16,190,29,112,221,",
                "24,231,75,192,153,103,228,214,48,155,165,13,95,29,220,134,100,",
                "18,85,49,184]"
            ),
        ],
        misses: examples![
            // A Solana address (32 bytes): the public key above.
            "pay FAe4sisG95oZ42w7buUn5qEE4TAnfTTFPiguZUHmhiF",
            "ed25519 pubkey 03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8",
            // 64 bytes whose halves do not match.
            concat!(
                "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,",
                "24,25,26,27,28,29,30,31,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,",
                "16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31]"
            ),
        ],
        ..BASE
    },
    // 0x + 64 hex (or bare 64 hex) right after a private-key label, in
    // several languages. Hashes, addresses and unlabelled values pass.
    Rule {
        class: Secret,
        name: "hex_private_key",
        matcher: Detect(labelled_hex_key),
        hits: examples![
            concat!(
                "PRIVATE_KEY=0x4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
            concat!(
                "clave privada: 4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
            concat!(
                "私钥 0x4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
        ],
        misses: examples![
            concat!(
                "tx hash 0x4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
            concat!(
                "sha256: 4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
            concat!(
                "the private key's address hash is 0x4c0883a69102937d6231471b5dbb6204",
                "fe5129617082792ae468d01a3f362318"
            ),
        ],
        ..BASE
    },
];

// ------------------------------------------------------------------ BIP39

/// Most checksum windows tried per string: bounds the work on a long run
/// of list words (a random 12-word window passes with probability 1/16, so
/// real runs are found long before this).
const BIP39_WINDOW_BUDGET: usize = 1024;

/// Seed-phrase labels; matched against the `lower` view after the same
/// normalisation as the text.
const MNEMONIC_LABELS: &[&str] = &[
    "seed",
    "mnemonic",
    "recovery phrase",
    "recovery words",
    "backup phrase",
    "secret phrase",
    "wallet words",
    "frase semilla",
    "frase de recuperación",
    "frase de recuperacion",
    "frase semente",
    "frase de recuperação",
    "palavras de recuperação",
    "phrase de récupération",
    "phrase secrète",
    "mnémonique",
    "wiederherstellungsphrase",
    "seed-phrase",
    "frase di recupero",
    "herstelzin",
    "мнемони",
    "сид-фраз",
    "сид фраз",
    "фраза восстановления",
    "助记词",
    "助記詞",
    "シードフレーズ",
    "復元フレーズ",
    "ニーモニック",
    "시드 문구",
    "복구 문구",
    "니모닉",
    "عبارة الاسترداد",
    "كلمات الاسترداد",
];

/// The BIP39 English list as a hash map: one lookup per word of prose
/// instead of a binary search (this runs on every word of every string).
fn word_index(word: &str) -> Option<u16> {
    static INDEX: OnceLock<HashMap<&'static str, u16>> = OnceLock::new();
    INDEX
        .get_or_init(|| {
            let list = bip39::Language::English.word_list();
            list.iter()
                .enumerate()
                .map(|(i, w)| (*w, i as u16))
                .collect()
        })
        .get(word)
        .copied()
}

fn bip39_mnemonic(v: &Views) -> bool {
    let s = v.lower.as_bytes();
    // 12 words of at least 3 letters with separators.
    if s.len() < 47 {
        return false;
    }
    let mut run: Vec<u16> = Vec::new();
    let mut budget = BIP39_WINDOW_BUDGET;
    let mut labelled: Option<bool> = None;
    let mut i = 0;
    // End of the previous list word in the current run.
    let mut prev_end = 0;
    while i < s.len() {
        if !s[i].is_ascii_lowercase() {
            i += 1;
            continue;
        }
        let start = i;
        while i < s.len() && s[i].is_ascii_lowercase() {
            i += 1;
        }
        let word = &s[start..i];
        let index = (3..=8)
            .contains(&word.len())
            .then(|| std::str::from_utf8(word).ok())
            .flatten()
            .and_then(word_index);
        let joined = !run.is_empty() && s[prev_end..start].iter().all(|&b| is_list_separator(b));
        if !joined && mnemonic_run(&run, &mut budget, &mut labelled, v) {
            return true;
        }
        if !joined {
            run.clear();
        }
        match index {
            Some(ix) => {
                run.push(ix);
                prev_end = i;
            }
            None => {
                if mnemonic_run(&run, &mut budget, &mut labelled, v) {
                    return true;
                }
                run.clear();
            }
        }
    }
    mnemonic_run(&run, &mut budget, &mut labelled, v)
}

/// What may stand between two words of one phrase: spaces, commas, list
/// numbering ("1. abandon 2) ability"), quotes and brackets.
fn is_list_separator(b: u8) -> bool {
    b.is_ascii_digit() || b" \n\t,.;:()[]{}\"'-|/#".contains(&b)
}

fn mnemonic_run(run: &[u16], budget: &mut usize, labelled: &mut Option<bool>, v: &Views) -> bool {
    if run.len() < 12 {
        return false;
    }
    // A pasted phrase starts or ends its run of list words ("seed" or a
    // numbering word may join it on one side), so only the windows at the
    // run's two ends are checked: at most ten hashes per run, however long
    // the prose around it. A phrase buried mid-run in other list words is
    // left to the labelled fallback below.
    for n in [24, 21, 18, 15, 12] {
        if n > run.len() {
            continue;
        }
        for window in [&run[..n], &run[run.len() - n..]] {
            if *budget == 0 {
                break;
            }
            *budget -= 1;
            if bip39_checksum_ok(window) {
                return true;
            }
        }
    }
    *labelled.get_or_insert_with(|| has_label(v, mnemonic_labels()))
}

/// Whether `words` (word-list indices, 12/15/18/21/24 of them) carry a
/// valid BIP39 checksum: the first n/3 bits of SHA-256(entropy).
pub(super) fn bip39_checksum_ok(words: &[u16]) -> bool {
    let n = words.len();
    if !n.is_multiple_of(3) || !(12..=24).contains(&n) {
        return false;
    }
    let mut buf = [0u8; 33];
    let (mut acc, mut bits, mut pos) = (0u32, 0u32, 0usize);
    for &w in words {
        acc = (acc << 11) | u32::from(w & 0x7ff);
        bits += 11;
        while bits >= 8 {
            bits -= 8;
            buf[pos] = (acc >> bits) as u8;
            pos += 1;
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        buf[pos] = (acc << (8 - bits)) as u8;
    }
    let entropy = n * 4 / 3;
    let cs_bits = n / 3;
    let hash = Sha256::digest(&buf[..entropy]);
    hash[0] >> (8 - cs_bits) == buf[entropy] >> (8 - cs_bits)
}

// ------------------------------------------------------------ Base58Check

fn is_base58(b: u8) -> bool {
    matches!(b, b'1'..=b'9' | b'A'..=b'H' | b'J'..=b'N' | b'P'..=b'Z' | b'a'..=b'k' | b'm'..=b'z')
}

/// Calls `f` on every maximal run of Base58 characters in `s` whose length
/// is in `lens`, until it returns true.
fn base58_runs(
    s: &[u8],
    lens: std::ops::RangeInclusive<usize>,
    mut f: impl FnMut(&[u8]) -> bool,
) -> bool {
    if s.len() < *lens.start() {
        return false;
    }
    let mut i = 0;
    while i < s.len() {
        if !is_base58(s[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < s.len() && is_base58(s[i]) {
            i += 1;
        }
        if lens.contains(&(i - start)) && f(&s[start..i]) {
            return true;
        }
    }
    false
}

fn wif_key(v: &Views) -> bool {
    base58_runs(v.raw.as_bytes(), 51..=52, |run| {
        let shape = matches!(
            (run.len(), run[0]),
            (51, b'5' | b'9') | (52, b'K' | b'L' | b'c')
        );
        shape && is_wif(run)
    })
}

pub(super) fn is_wif(run: &[u8]) -> bool {
    let Ok(payload) = bs58::decode(run).with_check(None).into_vec() else {
        return false;
    };
    matches!(payload.first(), Some(0x80 | 0xef))
        && (payload.len() == 33 || (payload.len() == 34 && payload[33] == 0x01))
}

fn extended_private_key(v: &Views) -> bool {
    base58_runs(v.raw.as_bytes(), 111..=111, |run| {
        &run[1..4] == b"prv" && is_extended_private_key(run)
    })
}

pub(super) fn is_extended_private_key(run: &[u8]) -> bool {
    let Ok(payload) = bs58::decode(run).with_check(None).into_vec() else {
        return false;
    };
    // version(4) depth(1) fingerprint(4) child(4) chain code(32) key(33):
    // a private key is 0x00 followed by the 32-byte scalar.
    payload.len() == 78 && payload[45] == 0
}

// ----------------------------------------------------------------- Solana

fn solana_keypair(v: &Views) -> bool {
    let s = v.raw.as_bytes();
    if s.len() < 64 {
        return false;
    }
    let base58 = base58_runs(s, 80..=88, |run| {
        let mut out = [0u8; 64];
        matches!(bs58::decode(run).onto(&mut out[..]), Ok(64)) && is_ed25519_keypair(&out)
    });
    base58 || byte_arrays(s, is_ed25519_keypair)
}

/// Calls `f` on every `[n, n, ...]` list of exactly 64 integers 0..=255.
fn byte_arrays(s: &[u8], f: impl Fn(&[u8; 64]) -> bool) -> bool {
    let mut i = 0;
    while let Some(off) = s[i..].iter().position(|&b| b == b'[') {
        i += off + 1;
        let mut out = [0u8; 64];
        let (mut count, mut value, mut digits) = (0usize, 0u32, 0u32);
        let mut ok = false;
        while i < s.len() {
            let b = s[i];
            match b {
                b'0'..=b'9' => {
                    value = value * 10 + u32::from(b - b'0');
                    digits += 1;
                    if digits > 3 || value > 255 {
                        break;
                    }
                }
                b',' | b']' => {
                    if digits == 0 || count == 64 {
                        break;
                    }
                    out[count] = value as u8;
                    count += 1;
                    (value, digits) = (0, 0);
                    if b == b']' {
                        ok = count == 64;
                        break;
                    }
                }
                b' ' | b'\n' => {}
                _ => break,
            }
            i += 1;
        }
        if ok && f(&out) {
            return true;
        }
    }
    false
}

pub(super) fn is_ed25519_keypair(bytes: &[u8; 64]) -> bool {
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&bytes[..32]);
    let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
    public.as_bytes()[..] == bytes[32..]
}

// -------------------------------------------------------------- hex keys

/// Private-key labels (English ones also get `_`, `-` and no-space forms).
const HEX_KEY_LABELS: &[&str] = &[
    "private key",
    "priv key",
    "privkey",
    "secret key",
    "wallet key",
    "metamask",
    "wallet",
    "signing key",
    "master key",
    "wallet seed",
    "master seed",
    "deployer key",
    "clave privada",
    "chave privada",
    "clé privée",
    "cle privee",
    "privater schlüssel",
    "privaten schlüssel",
    "geheimer schlüssel",
    "chiave privata",
    "klucz prywatny",
    "özel anahtar",
    "privésleutel",
    "privé sleutel",
    "приватный ключ",
    "закрытый ключ",
    "секретный ключ",
    "приватного ключа",
    "私钥",
    "私鑰",
    "密钥",
    "秘密鍵",
    "秘密キー",
    "개인 키",
    "개인키",
    "비밀 키",
    "비밀키",
    "المفتاح الخاص",
    "مفتاح خاص",
    "निजी कुंजी",
    "کلید خصوصی",
    "khóa riêng",
    "kunci privat",
];

/// Words between the label and the value that make it something else.
const HEX_NOT_KEY: &[&[u8]] = &[
    b"hash",
    b"address",
    b"public",
    b"pubkey",
    b"digest",
    b"sha",
    b"tx",
    b"fingerprint",
    b"id",
];

/// How far before a value its label may start.
const LABEL_WINDOW: usize = 80;

fn labelled_hex_key(v: &Views) -> bool {
    let s = v.lower.as_bytes();
    if s.len() < 64 {
        return false;
    }
    // Ends of private-key labels, found in one pass once a candidate exists.
    let mut label_ends: Option<Vec<usize>> = None;
    let mut i = 0;
    while i < s.len() {
        if !s[i].is_ascii_hexdigit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < s.len() && s[i].is_ascii_hexdigit() {
            i += 1;
        }
        if i - start != 64 || s.get(i).is_some_and(u8::is_ascii_alphanumeric) {
            continue;
        }
        // "0x" prefix, or a non-alphanumeric before the value.
        let value_start = if start >= 2 && &s[start - 2..start] == b"0x" {
            start - 2
        } else {
            start
        };
        if value_start > 0 && s[value_start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let ends = label_ends.get_or_insert_with(|| hex_key_labels().match_ends(s));
        // The last label ending before the value, within the window, with
        // no hash/address word between it and the value.
        let label_end = ends
            .iter()
            .copied()
            .filter(|&e| e <= value_start && value_start - e <= LABEL_WINDOW)
            .max();
        if let Some(end) = label_end {
            if !HEX_NOT_KEY
                .iter()
                .any(|w| words_contain(&s[end..value_start], w))
            {
                return true;
            }
        }
    }
    false
}

/// Whether `hay` has `word` as a whole ASCII word (so "tx" is not found in
/// "context" but is in "tx hash").
fn words_contain(hay: &[u8], word: &[u8]) -> bool {
    let mut from = 0;
    while let Some(p) = find(&hay[from..], word) {
        let at = from + p;
        let before = at == 0 || !hay[at - 1].is_ascii_alphabetic();
        let after = hay
            .get(at + word.len())
            .is_none_or(|b| !b.is_ascii_alphabetic());
        if before && after {
            return true;
        }
        from = at + 1;
    }
    false
}

// ---------------------------------------------------------------- helpers

fn mnemonic_labels() -> &'static [String] {
    static LABELS: OnceLock<Vec<String>> = OnceLock::new();
    LABELS.get_or_init(|| MNEMONIC_LABELS.iter().map(|l| fold(l)).collect())
}

/// All private-key labels as one literal alternation (linear-time search).
pub(super) fn hex_key_label_source() -> Source {
    let mut alternatives = Vec::new();
    for label in HEX_KEY_LABELS {
        let folded = fold(label);
        if label.is_ascii() && label.contains(' ') {
            for sep in ["_", "-", ""] {
                alternatives.push(automata::escape(&folded.replace(' ', sep)));
            }
        }
        alternatives.push(automata::escape(&folded));
    }
    Source::new(Kind::Match, vec![alternatives.join("|")])
}

#[cfg(test)]
pub(crate) fn hex_key_label_pattern() -> String {
    hex_key_label_source().patterns.remove(0)
}

#[cfg(test)]
pub(crate) fn hex_key_label_ends(hay: &[u8]) -> Vec<usize> {
    hex_key_labels().match_ends(hay)
}

fn hex_key_labels() -> &'static Automaton {
    static LABELS: OnceLock<Automaton> = OnceLock::new();
    LABELS.get_or_init(|| Automaton::load(&hex_key_label_source()))
}

/// A label as the `lower` view would show it (so labels and text agree on
/// whatever confusable folding the normaliser applies).
fn fold(label: &str) -> String {
    normalize::views(label).lower
}

fn has_label(v: &Views, labels: &[String]) -> bool {
    labels
        .iter()
        .any(|l| find(v.lower.as_bytes(), l.as_bytes()).is_some())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indices(phrase: &str) -> Vec<u16> {
        phrase
            .split_whitespace()
            .map(|w| bip39::Language::English.find_word(w).expect("list word"))
            .collect()
    }

    #[test]
    fn bip39_checksums_of_published_vectors() {
        // trezor/python-mnemonic vectors.json (English).
        for phrase in [
            concat!(
                "abandon abandon abandon abandon abandon abandon ",
                "abandon abandon abandon abandon abandon about"
            ),
            concat!(
                "legal winner thank year wave sausage worth useful ",
                "legal winner thank yellow"
            ),
            concat!(
                "letter advice cage absurd amount doctor acoustic avoid ",
                "letter advice cage above"
            ),
            concat!("zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo ", "wrong"),
            concat!(
                "abandon abandon abandon abandon abandon abandon abandon abandon ",
                "abandon abandon abandon abandon abandon abandon abandon abandon ",
                "abandon agent"
            ),
            concat!(
                "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo ",
                "zoo zoo zoo zoo zoo zoo zoo vote"
            ),
            concat!(
                "ozone drill grab fiber curtain grace pudding thank cruise elder ",
                "eight picnic"
            ),
        ] {
            assert!(bip39_checksum_ok(&indices(phrase)), "{phrase}");
        }
        for phrase in [
            concat!(
                "abandon abandon abandon abandon abandon abandon ",
                "abandon abandon abandon abandon abandon abandon"
            ),
            concat!("zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo ", "zoo"),
            concat!(
                "legal winner thank year wave sausage worth useful ",
                "legal winner thank"
            ),
        ] {
            assert!(!bip39_checksum_ok(&indices(phrase)), "{phrase}");
        }
    }

    #[test]
    fn base58check_vectors() {
        // Bitcoin wiki WIF example (uncompressed) and its compressed form.
        assert!(is_wif(
            concat!("5HueCGU8rMjxEXxiPuD5BDku", "4MkFqeZyd4dZ1jvhTVqvbTLvyTJ").as_bytes()
        ));
        assert!(is_wif(
            concat!("KwdMAjGmerYanjeui5SHS7JkmpZv", "VipYvB2LJGU1ZxJwYvP98617").as_bytes()
        ));
        assert!(!is_wif(
            concat!("5HueCGU8rMjxEXxiPuD5BDku", "4MkFqeZyd4dZ1jvhTVqvbTLvyTK").as_bytes()
        ));
        // BIP32 test vector 1, m and m/0H; the xpub is not private.
        assert!(is_extended_private_key(
            concat!(
                "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJ",
                "xWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
            )
            .as_bytes()
        ));
        assert!(is_extended_private_key(
            concat!(
                "xprv9uHRZZhk6KAJC1avXpDAp4MDc3sQKNxDiPvvkX8Br5ngLNv1TxvUxt4cV1rGL5hj6KC",
                "esnDYUhd7oWgT11eZG7XnxHrnYeSvkzY7d2bhkJ7"
            )
            .as_bytes()
        ));
        assert!(!is_extended_private_key(
            concat!(
                "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoC",
                "u1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
            )
            .as_bytes()
        ));
    }

    #[test]
    fn solana_keypair_halves() {
        let mut bytes = [0u8; 64];
        for (i, b) in bytes.iter_mut().enumerate().take(32) {
            *b = i as u8;
        }
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&bytes[..32]);
        let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
        bytes[32..].copy_from_slice(public.as_bytes());
        assert!(is_ed25519_keypair(&bytes));
        bytes[63] ^= 1;
        assert!(!is_ed25519_keypair(&bytes));
    }

    #[test]
    fn prose_with_list_words_is_not_a_mnemonic() {
        for text in [
            "Please review the budget again and then adjust the plan for next month, after the team meeting.",
            "We will build a simple tool to track every order and alert the owner about any delay or error.",
        ] {
            assert!(!bip39_mnemonic(&normalize::views(text)), "{text}");
        }
    }
}
