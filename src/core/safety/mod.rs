//! Deterministic safety scanner (secrets, prompt/tool injection, URLs).
//!
//! Every object key and string value of a capsule, and every text it
//! decodes to (`decode`: base64, base32, hex, percent-encoding, HTML
//! references, escapes), is normalised into views
//! (`normalize`) and checked against a fixed rule table (`rules`, one file
//! per family, each rule with its own examples): linear-time patterns,
//! keyword-gated patterns and structural checks, run by `engine`; the
//! multilingual directive families read the token view of `lexicon`.
//! Nothing is compiled at run time: the patterns' automata (`automata`) and
//! the lexicon's table are built from the rule table at build time, checked
//! by tests to be exactly what it compiles to, and loaded on first use. A few
//! field positions are exempt from some rules (`Rule::exempt`, positions from
//! `walk`): the receipt `evidence_url`, `allowed_domains` values and tool ids.
//! A note's key and value are also scanned joined (`"<key>: <value>"`), for
//! secrets only, since the key labels the value; and a token cut in two over
//! two notes is joined again (`split`), for secrets only.
//! Findings name the class, the rule and the JSON path, never the matched
//! text (echoing a secret back in an error would leak it again).

mod automata;
mod bip39;
mod ciphers;
mod credential;
mod decode;
mod engine;
mod lexicon;
mod normalize;
mod rules;
mod split;
mod walk;

#[cfg(test)]
mod tests;

/// The rule of every generator test (docs/GENERATED.md), for the two here
/// (`automata/rules.bin`, `lexicon/table.rs`): with `SELFCAP_REGEN=1` the
/// test writes `fresh` to `path` (from the repository root) if it differs
/// from `committed`; otherwise it
/// fails unless `committed`, the copy embedded at build time, is exactly
/// `fresh`.
#[cfg(test)]
fn check_generated(path: &str, fresh: &[u8], committed: &[u8]) {
    if std::env::var("SELFCAP_REGEN").is_ok_and(|v| v == "1") {
        // Only when it changed: a new mtime would rebuild what embeds it.
        if fresh != committed {
            let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
            std::fs::write(full, fresh).unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
        return;
    }
    let same = fresh
        .iter()
        .zip(committed)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(
        fresh == committed,
        "{path} is stale ({} bytes committed, {} generated from its sources, the first {same} \
         equal): run `npm run regen` (or `SELFCAP_REGEN=1 cargo test --lib safety`), then test \
         again; see docs/GENERATED.md",
        committed.len(),
        fresh.len()
    );
}

pub use decode::Encoding;

use crate::core::json::Json;
use serde::Serialize;
use std::collections::HashMap;

/// What kind of unsafe content a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingClass {
    /// `"secret"`: a credential or private key (vendor token formats, wallet keys, key armour,
    /// JWTs, credentials in URLs, a labelled credential-looking value).
    Secret,
    /// `"injection"`: a directive addressed to the reading model (18 languages), a structural
    /// marker (chat-template token, role header, tool-call syntax, shell line) or hidden text.
    Injection,
    /// `"url"`: a URL anywhere but `pointers.receipts[].evidence_url` (bare domains in
    /// `allowed_domains` and tool ids are fine; script URLs are refused everywhere).
    Url,
}

/// One flagged string. Never carries the matched text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind of content the rule looks for (`class` on the wire).
    pub class: FindingClass,
    /// Which rule fired, e.g. "aws_access_key_id" (a fixed name, not input).
    pub rule: &'static str,
    /// JSON path of the string (key or value), e.g. `$.objectives[0].title`.
    pub path: String,
    /// The encoding the flagged text was under (`decode`), when the rule
    /// fired only on the decoded text; absent for text as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<Encoding>,
}

/// Scans every key and string value of a capsule, as written and as
/// decoded (`decode`). The result is sorted by path, then class, then rule,
/// with no duplicate (path, class, rule); a rule that fires on the text as
/// written is reported without `via`.
pub fn scan(capsule: &Json) -> Vec<Finding> {
    let mut findings = Vec::new();
    // What each distinct string holds, whatever its position: a capsule
    // repeats its keys ("id", "title", "status" in every objective) and
    // many values, and each is read once.
    let mut seen: HashMap<String, Vec<Hit>> = HashMap::new();
    walk::strings(capsule, |text, context, path| {
        let found = match seen.get(text) {
            Some(found) => found,
            None => seen.entry(text.to_owned()).or_insert_with(|| hits(text)),
        };
        // Rules share names (a pattern and a lexicon family of one
        // kind): one finding per name, the first that fires here.
        let mut kept: Vec<Hit> = Vec::new();
        for &(rule, via) in found {
            if !context.allows(rule) && !kept.iter().any(|(h, _)| h.name == rule.name) {
                kept.push((rule, via));
            }
        }
        if kept.is_empty() {
            return;
        }
        let at = path();
        let full_url = kept.iter().any(|(h, _)| h.name == rules::SCHEME_URL);
        for (rule, via) in kept {
            // A full `scheme://host/...` URL also looks like a bare host with a
            // path; report it once.
            if full_url && rules::HOST_ONLY.contains(&rule.name) {
                continue;
            }
            findings.push(Finding {
                class: rule.class,
                rule: rule.name,
                path: at.clone(),
                via,
            });
        }
    });
    // A credential split over two notes (`split`): the joined halves, for
    // secrets only, reported at the first half's note.
    for (at, joined) in split::joined_notes(capsule) {
        let mut names: Vec<&'static str> = Vec::new();
        engine::for_each_hit(&normalize::views(&joined), |rule| {
            if rule.class == FindingClass::Secret && !names.contains(&rule.name) {
                names.push(rule.name);
            }
        });
        findings.extend(names.into_iter().map(|rule| Finding {
            class: FindingClass::Secret,
            rule,
            path: at.clone(),
            via: None,
        }));
    }
    findings.sort_by(|a, b| {
        (a.path.as_str(), a.class, a.rule, a.via).cmp(&(b.path.as_str(), b.class, b.rule, b.via))
    });
    // As written (`None`) sorts first and is the one kept.
    findings
        .dedup_by(|b, a| (a.path.as_str(), a.class, a.rule) == (b.path.as_str(), b.class, b.rule));
    findings
}

/// A rule that fired on a string, and the encoding it fired under (`None`:
/// as written).
type Hit = (&'static rules::Rule, Option<Encoding>);

/// Every rule that fires on `text`, as written or decoded, once each (with
/// the first encoding it fired under; as written comes first), wherever
/// the text sits: the caller drops what its position allows.
fn hits(text: &str) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::new();
    let mut check = |text: &str, via: Option<Encoding>| {
        let views = normalize::views(text);
        // Injection found only inside the title of a cited work, a quoted
        // span named as an example, or a clause reporting what an attack
        // does is a mention, not a command (normalize::without_mentions).
        let uncited: Option<Vec<&'static str>> =
            normalize::without_mentions(&views.raw, &views.lower).map(|rest| {
                let mut names = Vec::new();
                engine::for_each_hit(&normalize::views(&rest), |rule| names.push(rule.name));
                names
            });
        engine::for_each_hit(&views, |rule| {
            if rule.class == FindingClass::Injection
                && uncited
                    .as_ref()
                    .is_some_and(|names| !names.contains(&rule.name))
            {
                return;
            }
            if !hits.iter().any(|(h, _)| std::ptr::eq(*h, rule)) {
                hits.push((rule, via));
            }
        });
    };
    check(text, None);
    // A request hidden under base64 or a cipher is a finding whether or
    // not its words trip a rule of their own: the reviewer cannot read it
    // and the model can.
    let mut hidden_request = None;
    for layer in decode::layers(text) {
        check(&layer.text, Some(layer.via));
        if hidden_request.is_none() && layer.via.conceals() && decode::asks(&layer.text) {
            hidden_request = Some(layer.via);
        }
    }
    if let Some(via) = hidden_request {
        let rule = rules::encoded_request();
        if !hits.iter().any(|(h, _)| std::ptr::eq(*h, rule)) {
            hits.push((rule, Some(via)));
        }
    }
    hits
}

/// Loads the automata every scan runs now instead of on the first scan
/// (tests and the cold-start measurement; the Worker does not need it).
pub fn warm_up() {
    engine::warm_up();
}
