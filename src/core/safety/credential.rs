//! Is the value of a `password=` / `token:` / `Authorization:` assignment a
//! real credential, or a placeholder or plain word?
//!
//! Agent state legitimately says "token: none", "api_key: ${OPENAI_API_KEY}",
//! "secret: see vault" or "max_token: 1500". Real credentials are long-ish and
//! mix character kinds (digits with letters, inner capitals, symbols) or are
//! long unbroken alphanumeric blobs. The limitation is deliberate: a password
//! that is a single lower-case dictionary word ("letmein") is not caught by
//! this rule.

/// Shortest value we treat as a credential.
const MIN_LEN: usize = 6;
/// An unbroken alphanumeric run this long is a credential even without mixed
/// character kinds (e.g. "correcthorsebatterystaple").
const BLOB_LEN: usize = 20;

pub(super) fn looks_like_credential(value: &[u8]) -> bool {
    let v = trim(value);
    if v.len() < MIN_LEN || is_placeholder(v) {
        return false;
    }
    // Numbers, dates, versions, durations: "1500", "2026-02-10", "1.2.3".
    if v.iter()
        .all(|b| b.is_ascii_digit() || b".,_:-+".contains(b))
    {
        return false;
    }
    // A path of lower-case segments, "secret/data/staging/db" or
    // "kv/apps/billing": where a secret lives, not the secret.
    if v.iter().filter(|&&b| b == b'/').count() >= 2
        && v.split(|&b| b == b'/').all(|seg| {
            !seg.is_empty()
                && seg
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(b))
        })
        && v.split(|&b| b == b'/')
            .any(|seg| seg.len() >= 3 && seg.iter().all(u8::is_ascii_lowercase))
    {
        return false;
    }
    let has_digit = v.iter().any(u8::is_ascii_digit);
    // Non-ASCII bytes count as letters: "Пароль123", "Contraseña2024".
    let has_alpha = v.iter().any(|b| b.is_ascii_alphabetic() || *b >= 0x80);
    let has_symbol = v.iter().any(|b| b"!@#$%^&*+=?~/|".contains(b));
    // An upper-case letter after a lower-case one: "hunTer", "dXNlcjpw" (a
    // capitalised word like "Required" does not count).
    let inner_capital = v
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let blob = v.len() >= BLOB_LEN && v.iter().all(u8::is_ascii_alphanumeric);
    has_alpha && (has_digit || has_symbol || inner_capital || blob)
}

/// Drops surrounding quotes and trailing sentence punctuation.
fn trim(mut v: &[u8]) -> &[u8] {
    while let [b'"' | b'\'' | b'(' | b'[', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b'"' | b'\'' | b'.' | b')' | b']' | b'!' | b'?'] = v {
        v = rest;
    }
    v
}

/// Template variables, masks and "fill me in" markers.
fn is_placeholder(v: &[u8]) -> bool {
    let Some(&first) = v.first() else {
        return true;
    };
    if b"<${%*/~\\".contains(&first) || v.starts_with(b"./") || v.starts_with(b"{{") {
        return true;
    }
    if v.iter().all(|b| b"*xX.-_#0".contains(b)) {
        return true;
    }
    let lower = v.to_ascii_lowercase();
    [
        &b"redacted"[..],
        b"placeholder",
        b"your_",
        b"your-",
        b"xxxx",
        b"****",
        b"...",
        b"env:",
        b"vault:",
        b"secretref",
        b"process.env",
        b"os.environ",
        b"changeme",
        b"change_me",
        b"getenv",
        b"secrets.",
        b"dummy",
    ]
    .iter()
    .any(|marker| contains(&lower, marker))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::looks_like_credential as cred;

    #[test]
    fn real_looking_values() {
        for v in [
            "hunter22",
            "P@ssw0rd!",
            "\"s3cr3t-value\"",
            "dXNlcjpwYXNzd29yZA==",
            "correcthorsebatterystaple",
            "abc123def456",
            "CorrectHorse",
            "Пароль123",
            "Zx9/Qm2/p4Lk",
        ] {
            assert!(cred(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn placeholders_and_words() {
        for v in [
            "none",
            "required",
            "Required",
            "stored-in-vault",
            "secret/data/staging/db",
            "kv/apps/billing-2",
            "${OPENAI_API_KEY}",
            "<redacted>",
            "********",
            "xxxxxxxxxxxx",
            "1500000",
            "2026-02-10",
            "your_api_key_here",
            "/run/secrets/db",
            "scheduled-monthly",
            "{{ secrets.DB_PASSWORD }}",
            "changeme123",
            "см.",
            "",
        ] {
            assert!(!cred(v.as_bytes()), "{v}");
        }
    }
}
