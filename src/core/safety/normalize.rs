//! Text normalisation before matching.
//!
//! Attackers dodge literal patterns with invisible characters ("ig\u{200B}nore"),
//! compatibility forms (fullwidth "ｉｇｎｏｒｅ", math bold letters), lookalike
//! Cyrillic/Greek letters, odd whitespace and letter spacing. Every string is
//! therefore turned into three ASCII-oriented *views* that the rules match
//! against; the rules themselves stay small ASCII patterns.
//!
//! - `raw`: invisible/format and control characters removed, NFKC applied,
//!   lookalike letters folded to ASCII inside words that mix them with ASCII
//!   letters, whitespace runs collapsed to one space
//!   (or one newline if the run held a line break, so line-start rules still
//!   work). Case is kept: credential formats are case-sensitive.
//! - `lower`: `raw` lower-cased (full Unicode case mapping), for the
//!   case-insensitive rule families and the multilingual lexicon.
//! - `squeezed`: `lower` with common digit/symbol substitutions undone
//!   ("1gn0re" -> "ignore") and everything but `a-z` dropped, so letter-spaced
//!   or punctuated phrases ("i g n o r e", "ig-nore") become contiguous.

use super::lexicon::{self, Tokens};
use std::cell::OnceCell;
use unicode_normalization::UnicodeNormalization;

/// The three forms of one string that the rules run on.
pub(super) struct Views<'a> {
    /// The string as written (for structural checks on code points).
    pub text: &'a str,
    pub raw: String,
    pub lower: String,
    pub squeezed: String,
    /// The lexicon's tokens of `lower`, computed on first use.
    tokens: OnceCell<Tokens>,
}

impl Views<'_> {
    /// `lower` as categorised lexicon tokens (see `super::lexicon`).
    pub fn tokens(&self) -> &Tokens {
        self.tokens.get_or_init(|| {
            // One ASCII word (an id, a tool name, a flag) cannot hold a
            // sentence; its '_'-joined parts would be identifier tokens,
            // which the directive families ignore anyway.
            if self.lower.is_ascii() && !self.lower.contains([' ', '\n']) {
                Tokens::default()
            } else {
                lexicon::tokens(&self.lower)
            }
        })
    }
}

/// The text with the titles of cited works blanked out, when it cites any:
/// a reading list that cites "Ignore Previous Prompt: Attack Techniques for
/// Language Models" (Perez and Ribeiro, 2022) names a paper; it does not tell
/// the reader to ignore anything. A title is a quoted span of 3 to 20 words,
/// most of its longer words capitalised (as titles are written and commands
/// are not), in a string that also carries a year (1950-2099) outside the
/// quotes. Only injection rules are asked again on the result (`super::scan`);
/// every other rule keeps the whole text.
pub(super) fn without_cited_titles(raw: &str) -> Option<String> {
    if !raw.contains('"') {
        return None;
    }
    let quotes: Vec<usize> = raw.match_indices('"').map(|(i, _)| i).collect();
    let mut titles = Vec::new();
    for pair in quotes.chunks_exact(2) {
        let (a, b) = (pair[0] + 1, pair[1]);
        let words: Vec<&str> = raw[a..b].split_whitespace().collect();
        let long: Vec<&str> = words
            .iter()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| w.chars().count() >= 4)
            .collect();
        let capitalised = long
            .iter()
            .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
            .count();
        if (3..=20).contains(&words.len()) && long.len() >= 2 && capitalised * 10 >= long.len() * 7
        {
            titles.push((a, b));
        }
    }
    let mut out = String::with_capacity(raw.len());
    let mut at = 0;
    for &(a, b) in &titles {
        out.push_str(&raw[at..a]);
        out.push(' ');
        at = b;
    }
    out.push_str(&raw[at..]);
    let has_year = out
        .split(|c: char| !c.is_ascii_digit())
        .any(|d| d.len() == 4 && ("1950".."2100").contains(&d));
    (!titles.is_empty() && has_year).then_some(out)
}

pub(super) fn views(text: &str) -> Views<'_> {
    let raw = fold(text);
    // Full Unicode lower case, so "ИГНОРИРУЙ" and "IGNORIERE" read alike;
    // ASCII letters lower-case exactly as before.
    let lower = raw.to_lowercase();
    let squeezed = squeeze(&lower);
    Views {
        text,
        raw,
        lower,
        squeezed,
        tokens: OnceCell::new(),
    }
}

/// Characters that render as nothing (Unicode Cf plus a few invisible
/// non-Cf code points used for smuggling) and control characters that are not
/// whitespace. They are dropped, never replaced by a space, so a token split by
/// them is rejoined.
fn is_invisible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control() && !c.is_ascii_whitespace();
    }
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}' // combining grapheme joiner
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}' // Hangul fillers
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' // variation selectors
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}' // tag characters
            | '\u{E0100}'..='\u{E01EF}'
    ) || (c.is_control() && !c.is_whitespace())
}

/// Lookalike letters NFKC leaves alone (Cyrillic, Greek, dotless i) mapped to
/// the ASCII letter they imitate, plus typographic quotes. Deliberately small:
/// only characters that are visually identical to what the rules look for.
fn confusable(c: char) -> char {
    match c {
        'а' | 'α' => 'a',
        'в' => 'b',
        'с' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'ε' => 'e',
        'һ' => 'h',
        'і' | 'ї' | 'ı' | 'ι' => 'i',
        'ј' => 'j',
        'κ' => 'k',
        'ӏ' => 'l',
        'ո' => 'n',
        'о' | 'ο' | 'օ' => 'o',
        'р' | 'ρ' => 'p',
        'ԛ' => 'q',
        'ѕ' => 's',
        'υ' => 'u',
        'ν' => 'v',
        'ԝ' => 'w',
        'х' | 'χ' => 'x',
        'у' => 'y',
        'А' | 'Α' => 'A',
        'В' | 'Β' => 'B',
        'С' | 'Ϲ' => 'C',
        'Е' | 'Ε' => 'E',
        'Н' | 'Η' => 'H',
        'І' | 'Ι' | 'İ' => 'I',
        'Ј' => 'J',
        'К' | 'Κ' => 'K',
        'М' | 'Μ' => 'M',
        'Ν' => 'N',
        'О' | 'Ο' => 'O',
        'Р' | 'Ρ' => 'P',
        'Ѕ' => 'S',
        'Т' | 'Τ' => 'T',
        'Х' | 'Χ' => 'X',
        'У' | 'Υ' => 'Y',
        'Ζ' => 'Z',
        other => other,
    }
}

/// Typographic quotes, so "don’t" and “tool”: read like their ASCII forms.
fn fold_quote(c: char) -> char {
    match c {
        '‘' | '’' | 'ʼ' | '′' => '\'',
        '“' | '”' | '″' => '"',
        other => other,
    }
}

/// Builds the `raw` view (see module docs).
fn fold(text: &str) -> String {
    let mut out = Collapser {
        out: String::with_capacity(text.len()),
        pending: None,
    };
    if text.is_ascii() {
        // ASCII is NFKC-stable and has no confusables: skip the Unicode work
        // (the common case, and most of a capsule).
        text.chars().for_each(|c| out.push(c));
    } else {
        // Strip before NFKC so invisibles cannot block composition, and again
        // after in case a compatibility mapping produced one.
        let mut word = MixedScriptWord::default();
        text.chars()
            .filter(|c| !is_invisible(*c))
            .nfkc()
            .filter(|c| !is_invisible(*c))
            .for_each(|c| word.push(c, &mut out));
        word.flush(&mut out);
    }
    out.finish()
}

/// Folds lookalike letters only inside words that also hold ASCII letters
/// ("ignоre" with a Cyrillic о): a word written wholly in Cyrillic or Greek is
/// a real word of that language and must stay as it is, or the lexicon could
/// not read it.
#[derive(Default)]
struct MixedScriptWord {
    chars: Vec<char>,
    ascii_letter: bool,
    lookalike: bool,
}

impl MixedScriptWord {
    fn push(&mut self, c: char, out: &mut Collapser) {
        if !c.is_alphanumeric() {
            self.flush(out);
            out.push(fold_quote(c));
            return;
        }
        self.ascii_letter |= c.is_ascii_alphabetic();
        self.lookalike |= confusable(c) != c;
        self.chars.push(c);
    }

    fn flush(&mut self, out: &mut Collapser) {
        let fold = self.ascii_letter && self.lookalike;
        for &c in &self.chars {
            out.push(if fold { confusable(c) } else { c });
        }
        self.chars.clear();
        self.ascii_letter = false;
        self.lookalike = false;
    }
}

/// Collapses whitespace runs and drops invisibles while appending.
struct Collapser {
    out: String,
    /// The whitespace run seen since the last visible char: ' ' or '\n'.
    pending: Option<char>,
}

impl Collapser {
    fn push(&mut self, c: char) {
        if c.is_whitespace() {
            let line_break = matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
            if line_break || self.pending.is_none() {
                self.pending = Some(if line_break { '\n' } else { ' ' });
            }
        } else if !is_invisible(c) {
            if let Some(ws) = self.pending.take() {
                self.out.push(ws);
            }
            self.out.push(c);
        }
    }

    fn finish(mut self) -> String {
        if let Some(ws) = self.pending.take() {
            self.out.push(ws);
        }
        self.out
    }
}

/// The letter a leetspeak digit stands for ("1gn0re"); anything else as is.
/// The one map for both the squeezed view and the lexicon's words.
pub(super) fn unleet(c: char) -> char {
    match c {
        '0' => 'o',
        '1' => 'i',
        '3' => 'e',
        '4' => 'a',
        '5' => 's',
        '7' => 't',
        other => other,
    }
}

/// Builds the `squeezed` view from the lower-cased one.
fn squeeze(lower: &str) -> String {
    lower
        .bytes()
        .filter_map(|b| {
            let b = match b {
                b'!' => b'i',
                b'@' => b'a',
                b'$' => b's',
                digit => unleet(digit as char) as u8,
            };
            b.is_ascii_lowercase().then_some(b as char)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_invisibles_and_applies_nfkc() {
        let v = views("ig\u{200B}no\u{FEFF}re\u{E0041} ｐｒｅｖｉｏｕｓ");
        assert_eq!(v.raw, "ignore previous");
    }

    #[test]
    fn folds_confusables_and_case() {
        // Cyrillic о and е in "ignore".
        let v = views("IGNоRЕ");
        assert_eq!(v.raw, "IGNoRE");
        assert_eq!(v.lower, "ignore");
    }

    #[test]
    fn collapses_whitespace_keeping_line_breaks() {
        let v = views("a \t\u{3000} b\n\n  c\u{00A0}d ");
        assert_eq!(v.raw, "a b\nc d ");
    }

    #[test]
    fn squeezes_spacing_and_leetspeak() {
        let v = views("1 g n 0 r 3  p-r-e-v-i-o-u-s");
        assert_eq!(v.squeezed, "ignoreprevious");
    }

    #[test]
    fn controls_are_dropped() {
        assert_eq!(views("to\u{0}ken\u{7F}").raw, "token");
    }
}
