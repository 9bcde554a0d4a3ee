//! Wallet keys by structure: BIP-39 mnemonics in any of the ten official
//! word lists (word list plus checksum),
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
use crate::core::safety::bip39::{self, Language, Script};
use crate::core::safety::normalize::{self, Views};
use crate::core::safety::FindingClass::Secret;
use std::borrow::Cow;
use std::sync::OnceLock;

pub(super) static RULES: &[Rule] = &[
    // 12/15/18/21/24 consecutive words of one official BIP-39 list (any of
    // the ten, `crate::core::safety::bip39`) with a valid checksum, or 12+
    // list words under a seed/mnemonic label.
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
            // Twelve list words whose checksum fails in either order.
            concat!(
                "ability able about above absent absorb abstract absurd ",
                "abuse access accident account"
            ),
            "seed phrase handling: never store the words in the capsule",
        ],
        ..BASE
    },
    // A Standard SeedQR's digits (four a word index) with a valid checksum.
    Rule {
        class: Secret,
        name: "bip39_seedqr",
        matcher: Detect(seedqr),
        // Built at run time by the tests below (`seedqr_digits`): the
        // all-zero entropy's 12 words are index 0 eleven times then 3.
        hits: examples![
            concat!(
                "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000",
                "0000", "0003"
            ),
            concat!(
                "seedqr: 0000 0000 0000 0000 0000 0000 ",
                "0000 0000 0000 0000 0000 0003"
            ),
        ],
        misses: examples![
            concat!(
                "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000", "0000",
                "0000", "0004"
            ),
            "order 123456789012345678901234567890123456789012345678 shipped",
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
            // The first half of a keypair file, pasted under its name.
            concat!(
                "my id.json: [9,8,7,6,5,4,3,2,1,0,11,12,13,14,15,16,17,18,19,",
                "20,21,22,23,24,25,26,27,28,29,30,31,32, ..."
            ),
        ],
        misses: examples![
            // 32 numbers with no key label: data.
            "histogram [3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3,2,3,8,4,6,2,6,4,3,3,8,3,2,7,9,5]",
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

/// One word of the `lower` view, for the phrase search.
struct Word<'a> {
    /// The lookup form (`bip39::fold`); empty when no list can hold it.
    key: Cow<'a, str>,
    script: Script,
    /// Only list separators (spaces, commas, numbering, line breaks) stand
    /// between it and the word before.
    joined: bool,
    /// Nothing at all stands between it and the word before: unspaced
    /// Chinese (each character is a word).
    tight: bool,
}

/// What may stand between two words of one phrase: spaces, commas, list
/// numbering ("1. abandon 2) ability"), quotes and brackets, and their
/// CJK forms.
fn is_list_separator(c: char) -> bool {
    c.is_whitespace() || c.is_ascii_digit() || " ,.;:()[]{}\"'-|/#、，。・；：".contains(c)
}

/// The words of `s` in the scripts of the lists: Latin, kana and Hangul
/// runs, and each Han character alone.
fn phrase_words(s: &str) -> Vec<Word<'_>> {
    let mut out: Vec<Word> = Vec::new();
    // End of the previous word, and whether only separators followed it.
    let mut prev_end: Option<usize> = None;
    let mut gap_ok = true;
    let mut chars = s.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let sc = bip39::script(c);
        if sc == Script::Other {
            gap_ok &= is_list_separator(c);
            continue;
        }
        let mut end = start + c.len_utf8();
        if sc != Script::Han {
            while let Some(&(i, d)) = chars.peek() {
                if bip39::script(d) != sc {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
        }
        let text = &s[start..end];
        let key = match sc {
            Script::Latin if !(3..=9).contains(&text.chars().count()) => Cow::Borrowed(""),
            Script::Latin if text.is_ascii() => Cow::Borrowed(text),
            _ => Cow::Owned(bip39::fold(text, sc)),
        };
        let tight = prev_end == Some(start);
        out.push(Word {
            key,
            script: sc,
            joined: prev_end.is_some() && gap_ok,
            tight,
        });
        prev_end = Some(end);
        gap_ok = true;
    }
    out
}

fn bip39_mnemonic(v: &Views) -> bool {
    // 12 Chinese characters, the shortest phrase.
    if v.lower.len() < 36 {
        return false;
    }
    let words = phrase_words(&v.lower);
    if words.len() < 12 && !words.iter().any(|w| w.script == Script::Kana) {
        return false;
    }
    let mut budget = BIP39_WINDOW_BUDGET;
    let mut labelled: Option<bool> = None;
    let mut memo = Vec::with_capacity(words.len());
    // The longest run of joined words of each script that a list could
    // hold: a list is searched only where its script has a run of 12 (a
    // sentence's short words, "a", "to", "of", break most runs of prose).
    let mut per_script = [0usize; 5];
    let mut run = 0;
    for (k, w) in words.iter().enumerate() {
        let continues = k > 0 && w.joined && words[k - 1].script == w.script;
        run = if w.key.is_empty() {
            0
        } else if continues {
            run + 1
        } else {
            1
        };
        let best = &mut per_script[w.script as usize];
        *best = (*best).max(run);
    }
    let mut search = |lang: Language, reversed| {
        per_script[lang.script() as usize] >= 12
            && phrase_in(
                lang,
                &words,
                reversed,
                &mut memo,
                &mut budget,
                &mut labelled,
                v,
            )
    };
    // Letters reversed: English only (the other lists' words read
    // backwards would cost five more passes over every sentence).
    Language::ALL.iter().any(|&lang| search(lang, false))
        || search(Language::English, true)
        || words.iter().any(|w| w.script == Script::Kana) && unspaced_kana(&words, &mut budget)
}

/// The index in `lang` of `w`, its letters read backwards if `reversed`
/// (a phrase written back to front: "nodnaba ...").
fn look_up(lang: Language, w: &Word, reversed: bool) -> Option<u16> {
    if w.script != lang.script() || w.key.is_empty() {
        return None;
    }
    if !reversed {
        return lang.index(&w.key);
    }
    let mut buf = [0u8; 9];
    let b = w.key.as_bytes();
    if !w.key.is_ascii() || b.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(b.iter().rev()) {
        *d = *s;
    }
    lang.index(std::str::from_utf8(&buf[..b.len()]).ok()?)
}

/// A Standard SeedQR read out as digits: four zero-padded decimal digits a
/// word index (0000 to 2047), 48 digits for 12 words to 96 for 24, maybe
/// split into groups by spaces, hyphens or line breaks, with a valid
/// checksum. (A CompactSeedQR is the raw entropy, 16 or 32 bytes: as hex
/// or base64 it is indistinguishable from a digest or a key id, so it is
/// a secret only under a private-key or seed label, see
/// `labelled_hex_key`.)
fn seedqr(v: &Views) -> bool {
    let s = v.raw.as_bytes();
    if s.len() < 48 {
        return false;
    }
    let mut i = 0;
    while i < s.len() {
        if !s[i].is_ascii_digit() || (i > 0 && s[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let mut digits: Vec<u8> = Vec::with_capacity(96);
        let mut k = i;
        while k < s.len() && digits.len() <= 96 {
            if s[k].is_ascii_digit() {
                digits.push(s[k] - b'0');
                k += 1;
            } else if digits.len().is_multiple_of(4)
                && matches!(s[k], b' ' | b'-' | b'\n')
                && s.get(k + 1).is_some_and(u8::is_ascii_digit)
            {
                k += 1;
            } else {
                break;
            }
        }
        let glued = s.get(k).is_some_and(u8::is_ascii_alphanumeric);
        if !glued && digits.len().is_multiple_of(12) && (48..=96).contains(&digits.len()) {
            let ix: Vec<u16> = digits
                .chunks(4)
                .map(|d| d.iter().fold(0u16, |a, &x| a * 10 + u16::from(x)))
                .collect();
            if ix.iter().all(|&x| x < 2048) && bip39::checksum_ok(&ix) {
                return true;
            }
        }
        i = k.max(i + 1);
    }
    false
}

/// Whether `words` hold a phrase of `lang`: every maximal run of at least
/// 12 joined list words is checked. Finding the runs costs about one
/// lookup in twelve words: a window's last word is looked up first, and a
/// word in no list skips the window past it.
#[allow(clippy::too_many_arguments)]
fn phrase_in(
    lang: Language,
    words: &[Word],
    reversed: bool,
    memo: &mut Vec<u32>,
    budget: &mut usize,
    labelled: &mut Option<bool>,
    v: &Views,
) -> bool {
    // Each word looked up once: windows overlap.
    const UNSEEN: u32 = u32::MAX;
    const ABSENT: u32 = u32::MAX - 1;
    memo.clear();
    memo.resize(words.len(), UNSEEN);
    let mut look = |j: usize| -> Option<u16> {
        if memo[j] == UNSEEN {
            memo[j] = look_up(lang, &words[j], reversed).map_or(ABSENT, u32::from);
        }
        (memo[j] != ABSENT).then_some(memo[j] as u16)
    };
    let n = words.len();
    let mut i = 0;
    while i + 12 <= n {
        let mut next = None;
        for j in (i..i + 12).rev() {
            if j > i && !words[j].joined {
                next = Some(j);
                break;
            }
            if look(j).is_none() {
                next = Some(j + 1);
                break;
            }
        }
        if let Some(next) = next {
            i = next;
            continue;
        }
        let mut end = i + 12;
        while end < n && words[end].joined && look(end).is_some() {
            end += 1;
        }
        let run: Vec<u16> = (i..end).filter_map(&mut look).collect();
        if words[i + 1..end].iter().any(|w| w.tight) {
            // Unspaced Chinese reads like any Chinese sentence of common
            // characters: a phrase only as a whole run of Han characters
            // of a phrase's length, under a seed label, with its checksum.
            let mut from = i;
            for k in i + 1..=end {
                if k < end && words[k].tight {
                    continue;
                }
                let bounded = !words[from].tight && words.get(k).is_none_or(|w| !w.tight);
                if bounded
                    && [12, 15, 18, 21, 24].contains(&(k - from))
                    && *labelled.get_or_insert_with(|| has_label(v, mnemonic_labels()))
                    && bip39::checksum_ok(&run[from - i..k - i])
                {
                    return true;
                }
                from = k;
            }
            // A spaced phrase right after unspaced Han text (its label,
            // "钱包助记词：帮 猪 …") is still a spaced phrase: each stretch
            // whose words are all spaced apart is searched as one.
            let mut a = i;
            for k in i + 1..=end {
                if k < end && !words[k].tight {
                    continue;
                }
                let start = if words[a].tight { a + 1 } else { a };
                if k > start
                    && k - start >= 12
                    && mnemonic_run(&run[start - i..k - i], budget, labelled, v)
                {
                    return true;
                }
                a = k;
            }
        } else if mnemonic_run(&run, budget, labelled, v) {
            return true;
        }
        i = end;
    }
    false
}

/// An unspaced Japanese phrase: a run of kana that splits wholly into
/// 12 to 24 list words (longest words first) with a valid checksum.
fn unspaced_kana(words: &[Word], budget: &mut usize) -> bool {
    const MIN_WORD: usize = 3;
    const MAX_WORD: usize = 7;
    words.iter().any(|w| {
        if w.script != Script::Kana {
            return false;
        }
        let chars: Vec<(usize, char)> = w.key.char_indices().collect();
        let len = chars.len();
        if !(12 * MIN_WORD..=24 * MAX_WORD).contains(&len) || *budget == 0 {
            return false;
        }
        *budget -= 1;
        let at = |k: usize| chars.get(k).map_or(w.key.len(), |&(b, _)| b);
        // back[k]: where the word ending at char k starts, and its index.
        let mut back: Vec<Option<(usize, u16)>> = vec![None; len + 1];
        for end in MIN_WORD..=len {
            for wl in (MIN_WORD..=MAX_WORD.min(end)).rev() {
                let start = end - wl;
                if start != 0 && back[start].is_none() {
                    continue;
                }
                if let Some(ix) = Language::Japanese.index(&w.key[at(start)..at(end)]) {
                    back[end] = Some((start, ix));
                    break;
                }
            }
        }
        let mut run = Vec::new();
        let mut k = len;
        while k > 0 {
            let Some((start, ix)) = back[k] else {
                return false;
            };
            run.push(ix);
            k = start;
        }
        run.reverse();
        bip39::checksum_ok(&run)
    })
}

fn mnemonic_run(run: &[u16], budget: &mut usize, labelled: &mut Option<bool>, v: &Views) -> bool {
    if run.len() < 12 {
        return false;
    }
    // A pasted phrase starts or ends its run of list words ("seed" or a
    // numbering word may join it on one side), so only the windows at the
    // run's two ends are checked, each in both word orders: at most twenty
    // hashes per run, however long
    // the prose around it. A phrase buried mid-run in other list words is
    // left to the labelled fallback below.
    for n in [24, 21, 18, 15, 12] {
        if n > run.len() {
            continue;
        }
        for window in [&run[..n], &run[run.len() - n..]] {
            if *budget < 2 {
                break;
            }
            *budget -= 2;
            // Also in reverse word order (a phrase read back to front).
            let back: Vec<u16> = window.iter().rev().copied().collect();
            if bip39::checksum_ok(window) || bip39::checksum_ok(&back) {
                return true;
            }
        }
    }
    *labelled.get_or_insert_with(|| has_label(v, mnemonic_labels()))
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
    base58 || byte_arrays(s, is_ed25519_keypair) || labelled_seed_bytes(v)
}

/// Labels under which a list of byte values is a private key: a Solana
/// `id.json` keypair file, a keypair, a secret or private key, a seed.
const KEY_BYTES_LABELS: &[&str] = &[
    "id.json",
    "keypair",
    "key pair",
    "secret key",
    "secretkey",
    "private key",
    "privatekey",
    "seed",
];

/// At least 32 integers 0..=255 in a `[` list (closed or cut short, as a
/// paste of a keypair file's first half is: those 32 bytes are the whole
/// Ed25519 seed) under a key label.
fn labelled_seed_bytes(v: &Views) -> bool {
    if !KEY_BYTES_LABELS.iter().any(|l| v.lower.contains(l)) {
        return false;
    }
    byte_lists(v.raw.as_bytes(), |values, _closed| values.len() >= 32)
}

/// Calls `f` on every `[n, n, ...]` list of exactly 64 integers 0..=255.
fn byte_arrays(s: &[u8], f: impl Fn(&[u8; 64]) -> bool) -> bool {
    byte_lists(s, |values, closed| {
        closed && <&[u8; 64]>::try_from(values).is_ok_and(&f)
    })
}

/// Calls `f` on the values of every `[n, n, ...` list of integers 0..=255
/// (each value ended by `,` or `]`; at most 65 kept, one more than a
/// keypair) and whether `]` closed it, until `f` says yes. A value out of
/// range or anything else in the list ends it there.
fn byte_lists(s: &[u8], mut f: impl FnMut(&[u8], bool) -> bool) -> bool {
    let mut i = 0;
    let mut values = Vec::with_capacity(65);
    while let Some(off) = s[i..].iter().position(|&b| b == b'[') {
        i += off + 1;
        values.clear();
        let (mut value, mut digits) = (0u32, 0u32);
        let mut closed = false;
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
                    if digits == 0 || values.len() == 65 {
                        break;
                    }
                    values.push(value as u8);
                    (value, digits) = (0, 0);
                    if b == b']' {
                        closed = true;
                        break;
                    }
                }
                b' ' | b'\n' => {}
                _ => break,
            }
            i += 1;
        }
        if f(&values, closed) {
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
    use unicode_normalization::UnicodeNormalization;

    fn indices(phrase: &str) -> Vec<u16> {
        phrase
            .split_whitespace()
            .map(|w| Language::English.index(w).expect("list word"))
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
            assert!(bip39::checksum_ok(&indices(phrase)), "{phrase}");
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
            assert!(!bip39::checksum_ok(&indices(phrase)), "{phrase}");
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

    fn flagged(text: &str) -> bool {
        bip39_mnemonic(&normalize::views(text))
    }

    /// Entropy for test phrases: a different phrase for each seed.
    fn entropy(seed: u8, len: usize) -> Vec<u8> {
        (0..len as u8)
            .map(|i| i.wrapping_mul(151).wrapping_add(seed.wrapping_mul(29)) ^ 0x5a)
            .collect()
    }

    #[test]
    fn phrases_in_every_official_list() {
        use crate::core::safety::bip39::phrase;
        for lang in Language::ALL {
            for (seed, len) in [(1u8, 16usize), (2, 32), (3, 20), (4, 16)] {
                let e = entropy(seed, len);
                // As written upstream (NFKD), composed, and with Japanese's
                // ideographic space.
                let spaced = phrase(lang, &e, " ");
                assert!(flagged(&spaced), "{lang:?}: {spaced}");
                let composed: String = spaced.nfc().collect();
                assert!(flagged(&composed), "{lang:?} NFC: {composed}");
                let ideographic = phrase(lang, &e, "\u{3000}");
                assert!(flagged(&ideographic), "{lang:?}: {ideographic}");
                let numbered: Vec<String> = phrase(lang, &e, "\n")
                    .lines()
                    .enumerate()
                    .map(|(i, w)| format!("{}. {w}", i + 1))
                    .collect();
                assert!(flagged(&numbered.join("\n")), "{lang:?} numbered");
                // One word changed: the checksum fails (no label).
                let mut words: Vec<&str> = composed.split(' ').collect();
                let other = words[1];
                words[0] = other;
                let broken = words.join(" ");
                let ix: Vec<u16> = broken
                    .split(' ')
                    .map(|w| lang.index(&bip39::fold(w, lang.script())).unwrap())
                    .collect();
                let back: Vec<u16> = ix.iter().rev().copied().collect();
                if len == 16 && !bip39::checksum_ok(&ix) && !bip39::checksum_ok(&back) {
                    assert!(!flagged(&broken), "{lang:?}: {broken}");
                }
            }
        }
    }

    #[test]
    fn accentless_prefix_and_unspaced_forms() {
        use crate::core::safety::bip39::phrase;
        use unicode_normalization::char::is_combining_mark;
        for lang in [Language::Spanish, Language::French, Language::Portuguese] {
            let e = entropy(7, 16);
            let p = phrase(lang, &e, " ");
            let bare: String = p.chars().filter(|&c| !is_combining_mark(c)).collect();
            assert!(flagged(&bare), "{lang:?}: {bare}");
            let upper = bare.to_uppercase();
            assert!(flagged(&upper), "{lang:?}: {upper}");
            // The first four letters of each word (a metal backup plate).
            let four: Vec<String> = bare
                .split(' ')
                .map(|w| w.chars().take(4).collect())
                .collect();
            assert!(flagged(&four.join(" ")), "{lang:?}: {four:?}");
        }
        // Japanese written without separators.
        let ja: String = phrase(Language::Japanese, &entropy(8, 16), "")
            .nfc()
            .collect();
        assert!(flagged(&ja), "{ja}");
        // Chinese without separators: only under a seed label.
        let zh = phrase(Language::ChineseSimplified, &entropy(9, 16), "");
        assert!(flagged(&format!("助记词：{zh}")), "{zh}");
        assert!(!flagged(&zh), "{zh}");
        // Spaced, right after an unspaced label.
        for lang in [Language::ChineseSimplified, Language::ChineseTraditional] {
            let spaced = phrase(lang, &entropy(10, 16), " ");
            assert!(flagged(&format!("钱包助记词：{spaced}")), "{spaced}");
        }
    }

    /// The Standard SeedQR digits of `entropy`, groups joined by `sep`.
    fn seedqr_digits(entropy: &[u8], sep: &str) -> String {
        bip39::phrase_indices(entropy)
            .iter()
            .map(|i| format!("{i:04}"))
            .collect::<Vec<_>>()
            .join(sep)
    }

    #[test]
    fn seedqr_digit_strings() {
        for len in [16, 32] {
            let e = entropy(11, len);
            for sep in ["", " ", "-", "\n"] {
                let digits = seedqr_digits(&e, sep);
                assert!(seedqr(&normalize::views(&digits)), "{digits}");
                let labelled = format!("SeedQR: {digits}.");
                assert!(seedqr(&normalize::views(&labelled)), "{labelled}");
            }
            // A digit changed: an index out of range or a failed checksum.
            let mut broken = seedqr_digits(&e, "").into_bytes();
            broken[47] = if broken[47] == b'9' {
                b'0'
            } else {
                broken[47] + 1
            };
            let broken = String::from_utf8(broken).unwrap();
            let ix: Vec<u16> = broken
                .as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap().parse().unwrap())
                .collect();
            if !bip39::checksum_ok(&ix[..12]) || len == 32 {
                assert!(!seedqr(&normalize::views(&broken)), "{broken}");
            }
        }
        // Glued to a word or longer than a phrase: not a SeedQR.
        let d = seedqr_digits(&entropy(12, 16), "");
        assert!(!seedqr(&normalize::views(&format!("id{d}"))));
        assert!(!seedqr(&normalize::views(&format!("{d}0000"))));
    }

    /// A phrase disguised: each form flagged through the whole scan
    /// (decoding layers included).
    #[test]
    fn disguised_phrases() {
        use crate::core::json::Json;
        use crate::core::safety::bip39::phrase;
        use base64::engine::general_purpose::STANDARD;
        use base64::Engine as _;
        let fires = |text: &str| {
            crate::core::safety::scan(&Json::from(text))
                .iter()
                .any(|f| f.rule == "bip39_mnemonic")
        };
        for (seed, len) in [(21u8, 16usize), (22, 32)] {
            let p = phrase(Language::English, &entropy(seed, len), " ");
            let words: Vec<&str> = p.split(' ').collect();
            let backwards: Vec<&str> = words.iter().rev().copied().collect();
            let reversed_letters: String = p.chars().rev().collect();
            let each_reversed: Vec<String> =
                words.iter().map(|w| w.chars().rev().collect()).collect();
            let hex: String = p.bytes().map(|b| format!("{b:02x}")).collect();
            let numbered: Vec<String> = words
                .iter()
                .enumerate()
                .map(|(i, w)| format!("{}) {w}", i + 1))
                .collect();
            for form in [
                backwards.join(" "),
                reversed_letters,
                each_reversed.join(" "),
                STANDARD.encode(&p),
                STANDARD.encode(words.join("\n")),
                hex,
                words.join("\n"),
                words.join(", "),
                numbered.join(" "),
                format!("[\"{}\"]", words.join("\", \"")),
            ] {
                assert!(fires(&form), "{form}");
            }
        }
    }

    #[test]
    fn prose_in_the_lists_languages_is_not_a_mnemonic() {
        for text in [
            "El equipo revisará el plan de trabajo mañana y luego enviará un resumen breve a todos los clientes del proyecto.",
            "Nous allons examiner le budget avec toute l'équipe avant la réunion de lundi prochain, puis publier le rapport final.",
            "Il gruppo controlla ogni mattina lo stato del sistema e invia una breve nota al responsabile del progetto.",
            "A equipe vai revisar o orçamento amanhã e depois enviar um resumo curto para todos os clientes do projeto.",
            "Tým zkontroluje rozpočet zítra ráno a potom pošle krátké shrnutí všem zákazníkům projektu.",
            "チームは明日の朝に計画を確認して、そのあとで短い要約をすべての顧客に送ります。",
            "팀은 내일 아침에 계획을 검토하고 그 다음에 모든 고객에게 짧은 요약을 보냅니다.",
            "我们明天上午会检查这个计划，然后给所有客户发送一份简短的总结报告，请大家注意查收。",
            "助记词是一组用于恢复钱包的单词，请不要把它保存在任何在线的地方，也不要发给别人看。",
        ] {
            assert!(!flagged(text), "{text}");
        }
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
