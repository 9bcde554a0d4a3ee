//! Credentials split over two notes of one capsule: each string is scanned
//! on its own, so a token cut in two (`ghp_JC6R…` in one note, the rest in
//! the next) is two harmless halves. The last word of each note's value is
//! joined with the first word of each of the next two notes' values (a note
//! may sit between the halves) and the join is scanned for secrets only.
//! Only token-shaped words are joined, so ordinary notes cost nothing.

use crate::core::json::{path, Json};

/// Fewest characters each half of a split token needs.
const MIN_PART: usize = 4;
/// How many notes on a second half may sit.
const REACH: usize = 2;

/// A character of a credential token (vendor formats, base64, hex).
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=' | '.')
}

fn token(word: Option<&str>) -> Option<&str> {
    let word = word?;
    (word.len() >= MIN_PART && word.chars().all(token_char)).then_some(word)
}

/// `(path of the first note's value, joined token)` for every pair of notes
/// whose boundary words are both token-shaped.
pub(super) fn joined_notes(capsule: &Json) -> Vec<(String, String)> {
    let Some(Json::Array(notes)) = capsule.get("pointers").and_then(|p| p.get("notes")) else {
        return Vec::new();
    };
    let values: Vec<Option<&str>> = notes
        .iter()
        .map(|n| n.get("value").and_then(Json::as_str))
        .collect();
    let mut out = Vec::new();
    for (i, first) in values.iter().enumerate() {
        let Some(tail) = token(first.and_then(|v| v.split_whitespace().next_back())) else {
            continue;
        };
        for second in values.iter().skip(i + 1).take(REACH) {
            if let Some(head) = token(second.and_then(|v| v.split_whitespace().next())) {
                let at = path::key(
                    &path::index(&path::key(&path::key("$", "pointers"), "notes"), i),
                    "value",
                );
                out.push((at, format!("{tail}{head}")));
            }
        }
    }
    out
}
