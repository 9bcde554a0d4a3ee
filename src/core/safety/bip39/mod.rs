//! The ten official BIP-39 word lists (bitcoin/bips `bip-0039/*.txt`):
//! English, Spanish, French, Italian, Portuguese, Czech, Japanese, Korean,
//! Chinese simplified and Chinese traditional, and the checksum.
//!
//! The lists are vendored verbatim in `upstream/` (test builds only: a test
//! pins each file's SHA-256, see `tests::UPSTREAM_SHA256`) and embedded in
//! the Worker as `wordlists.bin`, the lookup keys generated from them
//! (`SELFCAP_REGEN=1`, see docs/GENERATED.md), 36 KB gzipped against 68 KB
//! for the files as written:
//! - English, Japanese and Korean whole, front-coded (a word is how many
//!   letters it shares with the one before, then the rest) over the list's
//!   own alphabet, one byte a letter;
//! - Spanish, French, Italian, Portuguese and Czech as the first four
//!   letters of each word without accents, front-coded: BIP-39 makes those
//!   four unique in each of these lists ("the first four letters identify
//!   a word"; wallets accept them alone and metal backup plates keep only
//!   them), so a word of text is looked up by its first four letters;
//! - Chinese simplified as its 2048 characters, Chinese traditional as the
//!   characters where it differs from the simplified (a third).
//!
//! Nothing is decoded until a string could hold a phrase; each list's
//! index is built on its first lookup. Words are looked up folded
//! ([`fold`]): Latin-script words lower-case without their accents
//! ("ábaco" and "abaco" are one word, as the lists are built to allow),
//! English ones also by their first four letters; Japanese and Korean
//! words composed (NFC, as the scanner's views are); Chinese words as
//! their one character.

use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// A BIP-39 word list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Language {
    English,
    Spanish,
    French,
    Italian,
    Portuguese,
    Czech,
    Japanese,
    Korean,
    ChineseSimplified,
    ChineseTraditional,
}

/// The script a word of text is written in: which lists may hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Script {
    Latin,
    Kana,
    Hangul,
    Han,
    Other,
}

impl Language {
    /// Every list, in the order of `wordlists.bin`.
    pub const ALL: [Language; 10] = [
        Language::English,
        Language::Spanish,
        Language::French,
        Language::Italian,
        Language::Portuguese,
        Language::Czech,
        Language::Japanese,
        Language::Korean,
        Language::ChineseSimplified,
        Language::ChineseTraditional,
    ];

    /// The script of the list's words.
    pub fn script(self) -> Script {
        match self {
            Language::Japanese => Script::Kana,
            Language::Korean => Script::Hangul,
            Language::ChineseSimplified | Language::ChineseTraditional => Script::Han,
            _ => Script::Latin,
        }
    }

    /// The upstream file name (`bip-0039/<name>.txt`).
    #[cfg(test)]
    pub fn file(self) -> &'static str {
        match self {
            Language::English => "english",
            Language::Spanish => "spanish",
            Language::French => "french",
            Language::Italian => "italian",
            Language::Portuguese => "portuguese",
            Language::Czech => "czech",
            Language::Japanese => "japanese",
            Language::Korean => "korean",
            Language::ChineseSimplified => "chinese_simplified",
            Language::ChineseTraditional => "chinese_traditional",
        }
    }

    /// Whether the list is kept as the first [`PREFIX`] letters of each
    /// word (see the module docs).
    fn by_prefix(self) -> bool {
        matches!(
            self,
            Language::Spanish
                | Language::French
                | Language::Italian
                | Language::Portuguese
                | Language::Czech
        )
    }

    /// The index in this list of a word of text folded by [`fold`].
    pub fn index(self, folded: &str) -> Option<u16> {
        static INDEXES: [OnceLock<Index>; 10] = [const { OnceLock::new() }; 10];
        let key = if self.by_prefix() {
            folded
                .char_indices()
                .nth(PREFIX)
                .map_or(folded, |(at, _)| &folded[..at])
        } else {
            folded
        };
        INDEXES[self as usize]
            .get_or_init(|| index_of(self))
            .get(key)
    }

    /// The list's 2048 lookup keys, as `wordlists.bin` holds them: words
    /// as written upstream (NFKD), or their folded prefixes.
    fn keys(self) -> &'static [String] {
        static LISTS: [OnceLock<Vec<String>>; 10] = [const { OnceLock::new() }; 10];
        LISTS[self as usize].get_or_init(|| {
            let section = sections(WORDLISTS).nth(self as usize).unwrap_or_default();
            let previous = match self {
                Language::ChineseTraditional => Language::ChineseSimplified.keys(),
                _ => &[],
            };
            decode_section(section, previous)
        })
    }

    /// The lookup keys of upstream `words` (see [`Language::keys`]).
    #[cfg(test)]
    fn keys_of(self, words: &[String]) -> Vec<String> {
        words
            .iter()
            .map(|w| {
                if self.by_prefix() {
                    fold(w, Script::Latin).chars().take(PREFIX).collect()
                } else {
                    w.clone()
                }
            })
            .collect()
    }
}

/// The compact lists (see the module docs and [`encode`]).
const WORDLISTS: &[u8] = include_bytes!("wordlists.bin");

/// Section kinds of `wordlists.bin`; each section ends with [`END`].
const ALPHABET: u8 = b'A';
const CHARS: u8 = b'C';
const DIFF: u8 = b'D';
/// Ends a section (never a byte of UTF-8).
const END: u8 = 0xFF;
/// Ends an alphabet (never a byte of UTF-8).
const ALPHABET_END: u8 = 0xFE;
/// Below this, a coded byte starts a word and is the count of letters it
/// shares with the previous one; from it up, a letter of the alphabet.
const LETTER_BASE: u8 = 0x20;

/// The compact form of the lookup keys of `lists` (the upstream lists, in
/// [`Language::ALL`] order).
#[cfg(test)]
pub(super) fn encode(lists: &[Vec<String>]) -> Vec<u8> {
    let lists: Vec<Vec<String>> = Language::ALL
        .iter()
        .zip(lists)
        .map(|(l, w)| l.keys_of(w))
        .collect();
    let mut out = Vec::new();
    for (i, words) in lists.iter().enumerate() {
        match Language::ALL[i] {
            Language::ChineseSimplified => {
                out.push(CHARS);
                words
                    .iter()
                    .for_each(|w| out.extend_from_slice(w.as_bytes()));
            }
            Language::ChineseTraditional => {
                out.push(DIFF);
                for (w, s) in words.iter().zip(&lists[i - 1]) {
                    out.extend_from_slice(if w == s { b"." } else { w.as_bytes() });
                }
            }
            _ => {
                let mut alphabet: Vec<char> = words.iter().flat_map(|w| w.chars()).collect();
                alphabet.sort_unstable();
                alphabet.dedup();
                assert!(alphabet.len() < usize::from(ALPHABET_END - LETTER_BASE));
                out.push(ALPHABET);
                out.extend(alphabet.iter().collect::<String>().bytes());
                out.push(ALPHABET_END);
                let mut prev: Vec<char> = Vec::new();
                for w in words {
                    let w: Vec<char> = w.chars().collect();
                    let shared = w.iter().zip(&prev).take_while(|(a, b)| a == b).count();
                    out.push(shared as u8);
                    for c in &w[shared..] {
                        let at = alphabet.binary_search(c).expect("in the alphabet");
                        out.push(LETTER_BASE + at as u8);
                    }
                    prev = w;
                }
            }
        }
        out.push(END);
    }
    out
}

/// The sections of `wordlists.bin`, one a list.
fn sections(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == END).filter(|s| !s.is_empty())
}

/// The lists `encode` wrote.
#[cfg(test)]
fn decode(bytes: &[u8]) -> Vec<Vec<String>> {
    let mut lists: Vec<Vec<String>> = Vec::new();
    for section in sections(bytes) {
        let words = decode_section(section, lists.last().map_or(&[], Vec::as_slice));
        lists.push(words);
    }
    lists
}

/// One list's keys from its section (`previous`: the list before, which a
/// [`DIFF`] section is written against).
fn decode_section(section: &[u8], previous: &[String]) -> Vec<String> {
    let (kind, body) = (section[0], &section[1..]);
    let text = || std::str::from_utf8(body).unwrap_or_default();
    match kind {
        CHARS => text().chars().map(String::from).collect(),
        DIFF => text()
            .chars()
            .zip(previous)
            .map(|(c, s)| if c == '.' { s.clone() } else { c.to_string() })
            .collect(),
        ALPHABET => {
            let split = body.iter().position(|&b| b == ALPHABET_END).unwrap_or(0);
            let alphabet: Vec<char> = std::str::from_utf8(&body[..split])
                .unwrap_or_default()
                .chars()
                .collect();
            let mut words: Vec<String> = Vec::with_capacity(2048);
            let mut cur: Vec<char> = Vec::new();
            for &b in &body[split + 1..] {
                if b < LETTER_BASE {
                    if !cur.is_empty() {
                        words.push(cur.iter().collect());
                    }
                    cur.truncate(usize::from(b));
                } else if let Some(&c) = alphabet.get(usize::from(b - LETTER_BASE)) {
                    cur.push(c);
                }
            }
            words.push(cur.iter().collect());
            words
        }
        _ => Vec::new(),
    }
}

/// How many leading letters identify a word of a Latin-script list.
const PREFIX: usize = 4;

/// A list's index: an open-addressing table of the FNV-1a hash of each
/// lookup key with its word's index (linear probing, at most half full; no
/// strings kept). Two words of text or of a list share a 64-bit hash with
/// probability about 2^-64 per pair: never in practice.
struct Index {
    slots: Vec<(u64, u16)>,
}

/// An empty slot's word index.
const EMPTY: u16 = u16::MAX;

impl Index {
    fn with_capacity(n: usize) -> Index {
        Index {
            slots: vec![(0, EMPTY); (n * 2).next_power_of_two()],
        }
    }

    /// Where `h` is, or the empty slot it would go in.
    fn slot(&self, h: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = h as usize & mask;
        while self.slots[at].1 != EMPTY && self.slots[at].0 != h {
            at = (at + 1) & mask;
        }
        at
    }

    /// Adds `key` unless it is there already (the first index stays).
    fn insert(&mut self, key: &str, index: u16) {
        let h = hash(key);
        let at = self.slot(h);
        if self.slots[at].1 == EMPTY {
            self.slots[at] = (h, index);
        }
    }

    fn get(&self, key: &str) -> Option<u16> {
        let (_, index) = self.slots[self.slot(hash(key))];
        (index != EMPTY).then_some(index)
    }
}

/// FNV-1a, 64 bits.
fn hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn index_of(lang: Language) -> Index {
    let keys = lang.keys();
    let mut index = Index::with_capacity(keys.len() * 2);
    for (i, k) in keys.iter().enumerate() {
        // The Latin-script keys are folded already (lower-case ASCII).
        if k.is_ascii() {
            index.insert(k, i as u16);
        } else {
            index.insert(&fold(k, lang.script()), i as u16);
        }
    }
    if lang == Language::English {
        // After the whole words: a whole word that is another's prefix
        // keeps its own index.
        for (i, k) in keys.iter().enumerate() {
            if k.len() > PREFIX {
                index.insert(&k[..PREFIX], i as u16);
            }
        }
    }
    index
}

/// The lookup form of a word: Latin letters lower-case without accents,
/// other scripts composed (NFC).
pub(super) fn fold(word: &str, script: Script) -> String {
    match script {
        Script::Latin if word.is_ascii() => word.to_ascii_lowercase(),
        Script::Latin => word
            .nfd()
            .filter(|&c| !is_combining_mark(c))
            .flat_map(char::to_lowercase)
            .collect(),
        _ => word.nfc().collect(),
    }
}

/// The script of one letter.
pub(super) fn script(c: char) -> Script {
    match c {
        'a'..='z' | 'A'..='Z' => Script::Latin,
        '\u{3041}'..='\u{309F}' | '\u{30A0}'..='\u{30FF}' => Script::Kana,
        '\u{AC00}'..='\u{D7A3}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}' => {
            Script::Hangul
        }
        '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' => Script::Han,
        '\u{00C0}'..='\u{024F}' if c.is_alphabetic() => Script::Latin,
        _ => Script::Other,
    }
}

/// Whether `words` (list indices, 12/15/18/21/24 of them) carry a valid
/// BIP-39 checksum: the first n/3 bits of SHA-256(entropy).
pub(super) fn checksum_ok(words: &[u16]) -> bool {
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

/// The word indices of the phrase for `entropy` (16 to 32 bytes, a
/// multiple of 4): BIP-39's encoding, for the tests' phrases.
#[cfg(test)]
pub(super) fn phrase_indices(entropy: &[u8]) -> Vec<u16> {
    let cs_bits = entropy.len() / 4;
    let hash = Sha256::digest(entropy);
    let mut bits: Vec<bool> = entropy
        .iter()
        .chain(std::iter::once(&hash[0]))
        .flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1))
        .collect();
    bits.truncate(entropy.len() * 8 + cs_bits);
    bits.chunks(11)
        .map(|c| c.iter().fold(0u16, |a, &b| a << 1 | u16::from(b)))
        .collect()
}

/// The phrase for `entropy` in `lang` (upstream words, NFKD), words
/// joined by `sep`.
#[cfg(test)]
pub(super) fn phrase(lang: Language, entropy: &[u8], sep: &str) -> String {
    let words: Vec<&str> = tests::upstream(lang).lines().collect();
    phrase_indices(entropy)
        .iter()
        .map(|&i| words[usize::from(i)])
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// SHA-256 of each file of bitcoin/bips `bip-0039/`, as vendored in
    /// `upstream/`: taken from PyPI `mnemonic` 0.21 (trezor/python-mnemonic,
    /// `mnemonic/wordlist/*.txt`), and the same for the arrays of the
    /// `bip39` crate 2.2.2 (rust-bitcoin, `src/language/*.rs`) joined one
    /// word a line.
    pub(crate) const UPSTREAM_SHA256: [(&str, &str); 10] = [
        (
            "english",
            "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda",
        ),
        (
            "spanish",
            "46846a5a0139d1e3cb77293e521c2865f7bcdb82c44e8d0a06a2cd0ecba48c0b",
        ),
        (
            "french",
            "ebc3959ab7801a1df6bac4fa7d970652f1df76b683cd2f4003c941c63d517e59",
        ),
        (
            "italian",
            "d392c49fdb700a24cd1fceb237c1f65dcc128f6b34a8aacb58b59384b5c648c2",
        ),
        (
            "portuguese",
            "2685e9c194c82ae67e10ba59d9ea5345a23dc093e92276fc5361f6667d79cd3f",
        ),
        (
            "czech",
            "7e80e161c3e93d9554c2efb78d4e3cebf8fc727e9c52e03b83b94406bdcc95fc",
        ),
        (
            "japanese",
            "2eed0aef492291e061633d7ad8117f1a2b03eb80a29d0e4e3117ac2528d05ffd",
        ),
        (
            "korean",
            "9e95f86c167de88f450f0aaf89e87f6624a57f973c67b516e338e8e8b8897f60",
        ),
        (
            "chinese_simplified",
            "5c5942792bd8340cb8b27cd592f1015edf56a8c5b26276ee18a482428e7c5726",
        ),
        (
            "chinese_traditional",
            "417b26b3d8500a4ae3d59717d7011952db6fc2fb84b807f3f94ac734e89c1b5f",
        ),
    ];

    pub(crate) fn upstream(lang: Language) -> &'static str {
        match lang {
            Language::English => include_str!("upstream/english.txt"),
            Language::Spanish => include_str!("upstream/spanish.txt"),
            Language::French => include_str!("upstream/french.txt"),
            Language::Italian => include_str!("upstream/italian.txt"),
            Language::Portuguese => include_str!("upstream/portuguese.txt"),
            Language::Czech => include_str!("upstream/czech.txt"),
            Language::Japanese => include_str!("upstream/japanese.txt"),
            Language::Korean => include_str!("upstream/korean.txt"),
            Language::ChineseSimplified => include_str!("upstream/chinese_simplified.txt"),
            Language::ChineseTraditional => include_str!("upstream/chinese_traditional.txt"),
        }
    }

    fn upstream_lists() -> Vec<Vec<String>> {
        Language::ALL
            .iter()
            .map(|&l| upstream(l).lines().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn vendored_lists_are_the_upstream_files() {
        for (lang, (name, sha)) in Language::ALL.iter().zip(UPSTREAM_SHA256) {
            assert_eq!(lang.file(), name);
            let got = Sha256::digest(upstream(*lang).as_bytes());
            let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, sha, "upstream/{name}.txt");
            assert_eq!(upstream(*lang).lines().count(), 2048, "{name}");
        }
    }

    /// The generator of `wordlists.bin` (docs/GENERATED.md).
    #[test]
    fn wordlists_bin_is_what_the_upstream_files_encode_to() {
        let lists = upstream_lists();
        crate::core::safety::check_generated(
            "src/core/safety/bip39/wordlists.bin",
            &encode(&lists),
            WORDLISTS,
        );
        let keys: Vec<Vec<String>> = Language::ALL
            .iter()
            .zip(&lists)
            .map(|(l, w)| l.keys_of(w))
            .collect();
        assert_eq!(decode(&encode(&lists)), keys);
    }

    #[test]
    fn every_word_is_found_folded_and_by_its_prefix() {
        for lang in Language::ALL {
            assert_eq!(lang.keys().len(), 2048);
            for (i, w) in upstream(lang).lines().enumerate() {
                let composed: String = w.nfc().collect();
                assert_eq!(lang.index(&fold(&composed, lang.script())), Some(i as u16));
                if lang.script() == Script::Latin {
                    let k = fold(w, Script::Latin);
                    assert!(k.is_ascii(), "{k}");
                    if k.len() > PREFIX {
                        assert_eq!(lang.index(&k[..PREFIX]), Some(i as u16), "{k}");
                    }
                }
            }
        }
        // Accents, case and the letters after the fourth do not matter
        // where the list is kept by prefix; English words are whole.
        assert_eq!(
            Language::Spanish.index(&fold("ÁBACOS", Script::Latin)),
            Some(0)
        );
        assert_eq!(Language::English.index("abandons"), None);
        assert_eq!(
            Language::Spanish.index(&fold("ÁBACO", Script::Latin)),
            Some(0)
        );
    }

    #[test]
    fn checksums_of_generated_phrases() {
        for len in [16usize, 20, 24, 28, 32] {
            let entropy: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let mut ix = phrase_indices(&entropy);
            assert_eq!(ix.len(), len * 3 / 4);
            assert!(checksum_ok(&ix));
            let last = ix.len() - 1;
            ix[last] ^= 1;
            assert!(!checksum_ok(&ix));
        }
        // The first published vector: all-zero entropy is "abandon" x11
        // then "about".
        let ix = phrase_indices(&[0u8; 16]);
        assert_eq!(
            upstream(Language::English).lines().nth(usize::from(ix[11])),
            Some("about")
        );
    }
}
