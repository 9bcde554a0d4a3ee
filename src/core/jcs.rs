//! RFC 8785 JSON Canonicalization Scheme (JCS), and the cursor built on it.
//!
//! Hand-written on purpose: signatures and cursors are computed over these
//! bytes, so every detail (UTF-16 key order, ES6 number text, minimal string
//! escaping) must match other implementations exactly. Tested against the
//! RFC's own examples.

use crate::core::json::Json;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The canonical text of `value`.
pub fn canonicalize(value: &Json) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// The canonical bytes of `value` (UTF-8 of [`canonicalize`]).
pub fn canonical_bytes(value: &Json) -> Vec<u8> {
    canonicalize(value).into_bytes()
}

/// `"sha256:" + hex(SHA-256(JCS(capsule)))`: the cursor of a capsule.
pub fn cursor(capsule: &Json) -> String {
    cursor_of_canonical(canonicalize(capsule).as_bytes())
}

/// The cursor of already-canonical bytes (saves re-canonicalising).
pub fn cursor_of_canonical(canonical: &[u8]) -> String {
    format!("{CURSOR_PREFIX}{}", hex::encode(Sha256::digest(canonical)))
}

/// The 64 hex digits of a cursor (or of an ETag value, which is the same
/// without the prefix): strips `sha256:` when present.
pub fn cursor_hex(cursor: &str) -> &str {
    cursor.strip_prefix(CURSOR_PREFIX).unwrap_or(cursor)
}

/// The prefix of every cursor.
pub const CURSOR_PREFIX: &str = "sha256:";

/// Whether `s` is a cursor exactly as the service writes it:
/// `sha256:` + 64 lowercase hex.
pub fn is_cursor(s: &str) -> bool {
    s.strip_prefix(CURSOR_PREFIX)
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// A cursor as a client may type it (bare hex, any letter case, with or
/// without the prefix in any case), spelled as the service spells it.
pub fn normalize_cursor(s: &str) -> Option<String> {
    let hex = match s.get(..CURSOR_PREFIX.len()) {
        Some(p) if p.eq_ignore_ascii_case(CURSOR_PREFIX) => &s[CURSOR_PREFIX.len()..],
        _ => s,
    };
    let cursor = format!("{CURSOR_PREFIX}{}", hex.to_ascii_lowercase());
    is_cursor(&cursor).then_some(cursor)
}

fn write_value(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => out.push_str(&format_number(*n)),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Json::Object(entries) => {
            // Keys sort by their UTF-16 code units (RFC 8785 §3.2.3), which
            // differs from UTF-8/char order for characters above U+FFFF.
            let mut sorted: Vec<&(String, Json)> = entries.iter().collect();
            sorted.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// Minimal escaping per RFC 8785 §3.2.2.2 (ECMAScript JSON.stringify):
/// only `"`, `\` and C0 controls are escaped; everything else is literal.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript `Number.prototype.toString` for a finite double (ECMA-262
/// §6.1.6.1.20), which RFC 8785 §3.2.2.3 mandates.
pub fn format_number(n: f64) -> String {
    if n == 0.0 {
        return "0".to_string(); // also -0
    }
    if !n.is_finite() {
        // Unreachable for parsed input (the parser rejects these); JSON has no
        // spelling for them, and `null` is what JSON.stringify emits.
        return "null".to_string();
    }
    let mut out = String::new();
    if n < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` yields a shortest digit string that round-trips, which
    // fixes ECMAScript's k (the digit count). When two k-digit strings
    // round-trip, ECMAScript wants the one closest to the exact value, ties to
    // even; Rust's exact `{:.N e}` formatting rounds exactly that way, and the
    // closest k-digit value always round-trips, so re-format at k digits.
    let shortest = format!("{:e}", n.abs());
    let k = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", k.saturating_sub(1), n.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    // ECMAScript's n: the decimal point sits after the first n digits.
    let point = exp + 1;
    if k <= point && point <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - k) as usize));
    } else if 0 < point && point <= 21 {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else {
        let e = point - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        let _ = write!(out, "{}", e.abs());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json::parse_str;

    fn canon(s: &str) -> String {
        canonicalize(&parse_str(s).unwrap())
    }

    /// RFC 8785 Appendix B: IEEE 754 bit patterns and their required text.
    #[test]
    fn rfc8785_number_vectors() {
        let cases: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, want) in cases {
            assert_eq!(
                format_number(f64::from_bits(bits)),
                want,
                "bits {bits:#018x}"
            );
        }
    }

    /// RFC 8785 §3.2.2 example (input with odd spacing and number spellings).
    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let want = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(canon(input), want);
    }

    /// RFC 8785 §3.2.3 sorting example: keys ordered by UTF-16 code units.
    #[test]
    fn rfc8785_section_3_2_3_sorting() {
        let input = r#"{
          "\u20ac": "Euro Sign",
          "\r": "Carriage Return",
          "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One",
          "\ud83d\ude00": "Emoji: Grinning Face",
          "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let c = canon(input);
        let v = parse_str(&c).unwrap();
        let values: Vec<&str> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(_, v)| v.as_str().unwrap())
            .collect();
        assert_eq!(
            values,
            [
                "Carriage Return",
                "One",
                "Control",
                "Latin Small Letter O With Diaeresis",
                "Euro Sign",
                "Emoji: Grinning Face",
                "Hebrew Letter Dalet With Dagesh",
            ]
        );
    }

    #[test]
    fn nested_objects_sorted_and_whitespace_removed() {
        assert_eq!(
            canon(r#" { "b" : [ { "z":1, "a":2 } ], "a" : {} } "#),
            r#"{"a":{},"b":[{"a":2,"z":1}]}"#
        );
    }

    #[test]
    fn control_characters_use_short_or_lowercase_u_escapes() {
        assert_eq!(
            canon(r#""\u0000\u0008\u0009\u000a\u000c\u000d\u001f\u007f\u2028""#),
            "\"\\u0000\\b\\t\\n\\f\\r\\u001f\u{7f}\u{2028}\""
        );
    }

    #[test]
    fn cursor_is_sha256_of_canonical_bytes() {
        // SHA-256("{}") is a well-known constant.
        assert_eq!(
            cursor(&parse_str("{ }").unwrap()),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    /// canonicalise(parse(canonicalise(x))) == canonicalise(x), over many
    /// generated values (a small deterministic generator; no extra crates).
    #[test]
    fn canonical_form_is_a_fixed_point() {
        let mut rng = Lcg(0x5eed);
        for _ in 0..2000 {
            let v = gen_value(&mut rng, 0);
            let once = canonicalize(&v);
            let reparsed = parse_str(&once).expect("canonical text parses");
            assert_eq!(canonicalize(&reparsed), once);
            // And the parse loses nothing: numbers and strings survive exactly.
            assert_eq!(reparsed, sort_keys(&v));
        }
    }

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 11
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn gen_value(rng: &mut Lcg, depth: usize) -> Json {
        let pick = if depth >= 4 {
            rng.below(4)
        } else {
            rng.below(6)
        };
        match pick {
            0 => Json::Null,
            1 => Json::Bool(rng.below(2) == 0),
            2 => Json::Number(gen_number(rng)),
            3 => Json::String(gen_string(rng)),
            4 => Json::Array(
                (0..rng.below(4))
                    .map(|_| gen_value(rng, depth + 1))
                    .collect(),
            ),
            _ => {
                let mut entries: Vec<(String, Json)> = Vec::new();
                for _ in 0..rng.below(5) {
                    let k = gen_string(rng);
                    if entries.iter().all(|(e, _)| *e != k) {
                        entries.push((k, gen_value(rng, depth + 1)));
                    }
                }
                Json::Object(entries)
            }
        }
    }

    fn gen_number(rng: &mut Lcg) -> f64 {
        match rng.below(4) {
            0 => rng.below(1 << 20) as f64 - (1 << 19) as f64,
            1 => (rng.below(1_000_000) as f64) / 997.0,
            2 => {
                let bits = rng.next() << 11 | rng.below(1 << 11);
                let f = f64::from_bits(bits);
                if f.is_finite() {
                    f
                } else {
                    1.5
                }
            }
            _ => 10f64.powi(rng.below(600) as i32 - 300),
        }
    }

    fn gen_string(rng: &mut Lcg) -> String {
        const POOL: &[char] = &[
            'a', 'Z', '0', ' ', '"', '\\', '\n', '\u{1}', '\u{7f}', 'é', '€', '\u{fb33}', '😀',
            '\u{2028}',
        ];
        (0..rng.below(6))
            .map(|_| POOL[rng.below(POOL.len() as u64) as usize])
            .collect()
    }

    fn sort_keys(v: &Json) -> Json {
        match v {
            Json::Array(items) => Json::Array(items.iter().map(sort_keys).collect()),
            Json::Object(entries) => {
                let mut e: Vec<(String, Json)> = entries
                    .iter()
                    .map(|(k, v)| (k.clone(), sort_keys(v)))
                    .collect();
                e.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
                Json::Object(e)
            }
            Json::Number(n) if *n == 0.0 => Json::Number(0.0),
            other => other.clone(),
        }
    }
}
