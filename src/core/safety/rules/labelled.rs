//! Secrets by meaning: a credential label ("password", "contraseña",
//! "API token", "密码") followed, within a few words, by a value that looks
//! like a real credential. People write "the root password on the build box
//! is now X" or "Passwort für den Admin-Account: X", so the value need not
//! follow the label directly; `secrets.rs` covers the `label=value` forms.
//!
//! The value test is deliberately stricter than `credential.rs`'s (it may be
//! several words away from the label): at least 8 characters with three
//! character classes, or 12 with two; never a path, URL, e-mail address,
//! version, hash-shaped hex or template placeholder.

use super::{Matcher::Detect, Rule, BASE};
#[cfg(test)]
use crate::core::safety::automata;
use crate::core::safety::normalize::Views;
use crate::core::safety::FindingClass::Secret;
use aho_corasick::AhoCorasick;
use std::collections::HashMap;
use std::sync::OnceLock;

pub(super) static RULES: &[Rule] = &[
    Rule {
        class: Secret,
        name: "labelled_password",
        matcher: Detect(|v| labelled(v, PASSWORD_LABELS, password_index(), password_like)),
        hits: examples![
            "the root password on the build box is now cqTEo5w7wfXawAwx",
            "Passwort für den Admin-Account: UAj60Sw*3cjLSNH41A@b",
            "服务器密码是Tr0ub4dor&3x",
            "lozinka za bazu je sada Tr0ub4dor&3x",
            "รหัสผ่านคือTr0ub4dor&3x",
        ],
        misses: examples![
            "password policy: min 12 chars, 1 symbol",
            "rotate the DB password after deploy v2.3.1-rc1",
            "the password hash uses argon2id now",
        ],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "labelled_api_key",
        matcher: Detect(|v| labelled(v, KEY_LABELS, key_index(), key_like)),
        hits: examples![
            "jira api token wj1fqomks7ecj46h0nm6f7aw for the bot",
            "storage account key a2gbFk8TVFYKm2Ps+x+IB4Rss1dHbFWvuUdt4pCa",
        ],
        misses: examples![
            "rotate the API key monthly",
            "token contract 0x6b175474e89094c44da98b954eedeac495271d0f",
        ],
        ..BASE
    },
];

/// Password labels, lower case, in the languages of the lexicon.
const PASSWORD_LABELS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "pw",
    "creds",
    "credentials",
    "identifiants",
    "contraseña",
    "contrasena",
    "clave",
    "passwort",
    "kennwort",
    "mot de passe",
    "mdp",
    "senha",
    "parola d'ordine",
    "wachtwoord",
    "hasło",
    "haslo",
    "şifre",
    "şifresi",
    "sifre",
    "sifresi",
    "lösenord",
    "пароль",
    "пароля",
    "密码",
    "密碼",
    "口令",
    "パスワード",
    "비밀번호",
    "암호",
    "كلمة المرور",
    "كلمة السر",
    "पासवर्ड",
    "رمز عبور",
    "گذرواژه",
    "mật khẩu",
    "mat khau",
    "kata sandi",
    "sandi",
    // The languages added when the injection lexicon grew to 40 (raw lower
    // case: accents are kept, so accented and bare spellings are both
    // listed). They are here only, not in secrets.rs's `localized_password`:
    // that rule also fires on a label followed by ordinary words and a
    // number ("Heslo x 12 znakova", already so for its own labels), and this
    // rule's value test covers "label: value" too.
    "nenosiri",
    "nywila",
    "รหัสผ่าน",
    "סיסמה",
    "סיסמא",
    "הסיסמה",
    "κωδικός",
    "κωδικος",
    "κωδικό",
    "συνθηματικό",
    "паролю",
    "পাসওয়ার্ড",
    "கடவுச்சொல்",
    "پاس ورڈ",
    "پاسورڈ",
    "kata laluan",
    "heslo",
    "hesla",
    "parolă",
    "parola",
    "parolei",
    "jelszó",
    "jelszo",
    "jelszava",
    "lösenordet",
    "losenord",
    "salasana",
    "salasanan",
    "adgangskode",
    "adgangskoden",
    "kodeord",
    "passord",
    "passordet",
    "парола",
    "паролата",
    "lozinka",
    "lozinku",
    "лозинка",
    "лозинку",
    "zaporka",
    "పాస్వర్డ్",
    "kelmet el ser",
    "kelmet el sir",
    "kalimat el sir",
];

/// API key and token labels.
const KEY_LABELS: &[&str] = &[
    "api key",
    "api-key",
    "apikey",
    "api token",
    "api-token",
    "access token",
    "access key",
    "auth token",
    "bot token",
    "secret key",
    "private token",
    "client secret",
    "account key",
    "storage key",
    "master key",
    "token",
    "clé api",
    "clave api",
    "api-schlüssel",
    "chave api",
    "ключ api",
    "api密钥",
    "apiキー",
    "api-nyckel",
    "api-nøgle",
    "api-nøkkel",
    "api-avain",
    "api-kulcs",
    "api kulcs",
    "cheie api",
    "cheia api",
    "api klíč",
    "api kľúč",
    "api ključ",
    "api ключ",
    "api-ключ",
    "klucz api",
    "ufunguo wa api",
    "מפתח api",
    "κλειδί api",
];

/// Words looked at after a label.
const WINDOW: usize = 8;

/// Scripts written without spaces: their labels may be glued to the value.
fn unspaced(label: &str) -> bool {
    label
        .chars()
        .any(|c| matches!(c, '\u{0E00}'..='\u{0E7F}' | '\u{3040}'..='\u{30FF}' | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}'))
}

/// Labels by their first word, and an automaton that tells in one pass
/// whether a string holds any label at all (most hold none).
struct Index {
    by_first_word: HashMap<String, Vec<Vec<String>>>,
    /// Any label, any ASCII case: Aho-Corasick over the literals, built on
    /// first use. The lazy DFA of their alternation answered the same but
    /// built states for every new text, over 100 us per 4 KB of unseen
    /// text natively for the password labels alone.
    any: AhoCorasick,
}

/// Any label, any ASCII case, as one literal alternation: what `Index::any`
/// answers, for the test that compares it with the regex crate.
#[cfg(test)]
pub(crate) fn labels_pattern(labels: &[&str]) -> String {
    let alternatives: Vec<String> = labels.iter().map(|l| automata::escape(l)).collect();
    format!("(?i)(?:{})", alternatives.join("|"))
}

/// Whether `hay` holds a password label / a key label (for the test that
/// compares the literal automata with the regex crate).
#[cfg(test)]
pub(crate) fn label_hits(hay: &[u8]) -> [bool; 2] {
    [
        password_index().any.is_match(hay),
        key_index().any.is_match(hay),
    ]
}

#[cfg(test)]
pub(crate) const LABELS: [&[&str]; 2] = [PASSWORD_LABELS, KEY_LABELS];

fn index(labels: &[&str]) -> Index {
    let mut by_first_word: HashMap<String, Vec<Vec<String>>> = HashMap::new();
    for label in labels.iter().filter(|l| !unspaced(l)) {
        let words: Vec<String> = label.split(' ').map(str::to_string).collect();
        by_first_word
            .entry(words[0].clone())
            .or_default()
            .push(words);
    }
    let any = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(labels)
        .expect("literal automaton from a few hundred labels");
    Index { by_first_word, any }
}

fn password_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| index(PASSWORD_LABELS))
}

fn key_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| index(KEY_LABELS))
}

/// The word lower-cased, without the ':' / '=' / ',' a label may carry.
fn key_of(word: &str) -> String {
    word.trim_end_matches([':', '=', '：', ',']).to_lowercase()
}

fn labelled(v: &Views, labels: &[&str], index: &Index, value_like: fn(&str) -> bool) -> bool {
    if !index.any.is_match(v.lower.as_bytes()) {
        return false;
    }
    let words: Vec<&str> = v.raw.split_whitespace().collect();
    let keys: Vec<String> = words.iter().map(|w| key_of(w)).collect();
    for (i, key) in keys.iter().enumerate() {
        let spaced = index.by_first_word.get(key).is_some_and(|candidates| {
            candidates.iter().any(|parts| {
                let end = i + parts.len();
                end <= keys.len()
                    && parts.iter().enumerate().all(|(k, p)| keys[i + k] == *p)
                    && words[end..].iter().take(WINDOW).any(|w| value_like(w))
            })
        });
        if spaced {
            return true;
        }
        // Unspaced labels may be glued to text: "服务器密码是Tr0ub4dor&3x".
        if key.is_ascii() {
            continue;
        }
        for label in labels.iter().filter(|l| unspaced(l)) {
            if let Some(pos) = key.find(label) {
                let rest = words[i].get(pos + label.len()..).unwrap_or_default();
                // Thai "รหัสผ่านคือ…" (the password is …).
                let rest = rest.strip_prefix("คือ").unwrap_or(rest);
                let rest =
                    rest.trim_start_matches(['是', '为', '為', 'は', '는', '은', ':', '：', '=']);
                if value_like(rest) || words[i + 1..].iter().take(WINDOW).any(|w| value_like(w)) {
                    return true;
                }
            }
        }
    }
    false
}

/// Character classes of a candidate value.
struct Classes {
    len: usize,
    lower: bool,
    upper: bool,
    digit: bool,
    symbol: bool,
}

fn classes(value: &str) -> Classes {
    Classes {
        len: value.chars().count(),
        lower: value.chars().any(|c| c.is_lowercase()),
        // A capital opening a word ("Zurücksetzen") is spelling, not mixing.
        upper: value.chars().skip(1).any(|c| c.is_uppercase()),
        digit: value.chars().any(|c| c.is_ascii_digit()),
        // '-' and '_' join words ("15-minute", "email-link"): not a class.
        symbol: value.chars().any(|c| "!@#$%^&*+=?~".contains(c)),
    }
}

/// Quotes and sentence punctuation around a word.
fn trim(word: &str) -> &str {
    word.trim_matches(|c: char| "\"'`()[]{}<>,;.!?:".contains(c))
}

fn not_a_value(value: &str) -> bool {
    let lower = value.to_lowercase();
    value.contains("://")
        || value.starts_with(['/', '~', '$', '%', '<', '{'])
        || lower.starts_with("0x")
        || (lower.starts_with('v') && lower[1..].starts_with(|c: char| c.is_ascii_digit()))
        || is_email(value)
        || [
            "redacted",
            "xxxx",
            "****",
            "your_",
            "example",
            "changeme",
            "placeholder",
            "1password",
            "env:",
            "vault",
        ]
        .iter()
        .any(|m| lower.contains(m))
}

fn is_email(value: &str) -> bool {
    match value.split_once('@') {
        Some((user, host)) => {
            !user.is_empty()
                && host.contains('.')
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        }
        None => false,
    }
}

fn password_like(word: &str) -> bool {
    let value = trim(word);
    if not_a_value(value) {
        return false;
    }
    let c = classes(value);
    let letters = c.lower || c.upper;
    let kinds = [c.lower, c.upper, c.digit, c.symbol]
        .iter()
        .filter(|&&k| k)
        .count();
    letters && ((c.len >= 8 && kinds >= 3) || (c.len >= 12 && kinds >= 2))
}

fn key_like(word: &str) -> bool {
    let value = trim(word);
    if not_a_value(value) {
        return false;
    }
    let hex = value.chars().all(|c| c.is_ascii_hexdigit());
    // 40 and 64 hex digits are addresses and hashes far more often than keys.
    if hex && (value.len() == 40 || value.len() == 64) {
        return false;
    }
    let c = classes(value);
    (c.lower || c.upper) && c.digit && c.len >= 16
}
