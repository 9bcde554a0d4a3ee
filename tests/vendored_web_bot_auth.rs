//! The one change in vendor/web-bot-auth (PATCH.md): obsolete line folding
//! without a regex. It must give exactly what the regex it replaces gave,
//! `Regex::new(r"\s*\r\n\s+")` (bytes, Unicode) `.replace_all(v, " ")`.

use regex::bytes::Regex;
use web_bot_auth::message_signatures::unfold_obsolete_line_folding;

const ALPHABET: [char; 9] = [
    'a', ' ', '\t', '\r', '\n', '\u{a0}', '\u{2028}', 'é', '\u{b}',
];

fn by_regex(re: &Regex, v: &str) -> String {
    String::from_utf8(re.replace_all(v.as_bytes(), &b" "[..]).into_owned()).unwrap()
}

#[test]
fn same_as_the_regex_on_every_short_string() {
    let re = Regex::new(r"\s*\r\n\s+").unwrap();
    let mut checked = 0;
    for len in 0..=6u32 {
        for mut n in 0..ALPHABET.len().pow(len) {
            let mut s = String::new();
            for _ in 0..len {
                s.push(ALPHABET[n % ALPHABET.len()]);
                n /= ALPHABET.len();
            }
            assert_eq!(unfold_obsolete_line_folding(&s), by_regex(&re, &s), "{s:?}");
            checked += 1;
        }
    }
    assert!(checked > 500_000);
}

#[test]
fn same_as_the_regex_on_header_like_values() {
    let re = Regex::new(r"\s*\r\n\s+").unwrap();
    // A small deterministic generator (xorshift) over longer mixes.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let mut s = String::new();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 8 + (x % 40) as usize;
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pick = (x % 16) as usize;
            s.push(if pick < ALPHABET.len() {
                ALPHABET[pick]
            } else {
                "xyz=;,\"".chars().nth(pick - ALPHABET.len()).unwrap()
            });
        }
        assert_eq!(unfold_obsolete_line_folding(&s), by_regex(&re, &s), "{s:?}");
    }
    assert_eq!(unfold_obsolete_line_folding("a,\r\n  b"), "a, b");
    assert_eq!(unfold_obsolete_line_folding("a\r\nb"), "a\r\nb");
}
