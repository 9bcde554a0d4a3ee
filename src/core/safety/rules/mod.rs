//! The rule table, as data: every rule has a class, a fixed name, a matcher
//! (a linear-time pattern over one normalised view, or a structural check),
//! the field positions where what it flags is legitimate, and its own
//! positive and negative examples, which `tests.rs` runs.
//!
//! Families live in one file each:
//!
//! | file | family |
//! |---|---|
//! | `secrets.rs` | vendor credential formats, key armour, credentials in URLs and headers, labelled values |
//! | `labelled.rs` | secrets by meaning: a credential label, then a credential-looking value a few words on |
//! | `crypto_keys.rs` | wallet keys by structure: BIP39 mnemonics, Base58Check WIF/xprv, Solana keypairs, labelled hex |
//! | `injection.rs` | structural injection markers: chat-template tokens, role headers, tool-call syntax, shell lines |
//! | `directives.rs` | directive families (verb x noun x addressing) over the multilingual lexicon in `../lexicon/` |
//! | `hidden.rs` | text a reviewer cannot see: tag characters, bidi controls, variation-selector runs |
//! | `urls.rs` | URLs, hosts and defanged links in free text |
//!
//! Patterns are compiled with Unicode mode off (`regex::bytes`, ASCII `\b`,
//! `\s`, `(?i)`): the views are already NFKC-normalised and folded, and
//! ASCII-only automata are far smaller and faster to build. Non-ASCII
//! literals still match their UTF-8 bytes. The engine is linear-time; no rule
//! relies on backtracking or look-around.

/// A rule's example texts (`hits`, `misses`): in test builds only. The
/// table documents and proves itself in the tests; the Worker does not carry
/// the texts (the const-evaluated `if` keeps just one branch's data).
macro_rules! examples {
    ($($text:expr),* $(,)?) => {
        if cfg!(test) { &[$($text),*] as &[&str] } else { &[] }
    };
}

mod crypto_keys;
mod directives;
mod hidden;
mod injection;
mod labelled;
mod secrets;
mod urls;

use super::normalize::Views;
use super::walk::Context;
use super::FindingClass;

/// Which normalised form of the string a pattern runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// Case kept: credential formats with case-sensitive prefixes.
    Raw,
    /// Lower-cased: most injection and URL rules.
    Lower,
    /// Letters only, leetspeak undone: letter-spaced phrases.
    Squeezed,
}

/// Extra confirmation after a pattern matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    None,
    /// Some capture group must look like a real credential value (see
    /// [`super::credential::looks_like_credential`]), not a placeholder or
    /// an English word such as `token: none`.
    CredentialValue,
    /// Some capture group must not be a container image reference
    /// (`registry.example/app:1.4`, `ghcr.io/org/app@sha256:…`, see
    /// [`urls::is_image_reference`]): a registry host and a
    /// repository path name an image to pull, not a page to visit.
    NotImageReference,
    /// Some capture group (the words between two halves of a phrase) must
    /// not negate it: "the deny flags are now false" but not "the deny flags
    /// must never be false" (nor "… to stop printing tokens").
    Unnegated,
    /// Some capture group (the two words before a command) must not report
    /// it as done: "Ran sudo systemctl reload nginx", "reloaded with sudo
    /// systemctl …" are log lines, not orders.
    NotReported,
    /// Some capture group (an address with the two words before it and the
    /// one after) must not be quoted from a connection error ("dial tcp",
    /// "read tcp" before it, ": connect", ": i/o", ": dial" after it), nor
    /// be a loopback address after "curl" or "on".
    NotErrorQuote,
}

impl Check {
    /// Whether this check could reject some match in `hay` at all (true
    /// but for `NotErrorQuote`, which needs a connection error's words or a
    /// loopback address to reject anything): a match in a text where it
    /// cannot is confirmed without finding where it is.
    pub(super) fn may_reject(self, hay: &[u8]) -> bool {
        if self != Check::NotErrorQuote {
            return true;
        }
        let has = |needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        // `error_quote`'s words, and the loopback addresses.
        [
            &b"tcp"[..],
            b"udp",
            b"connect",
            b"dial",
            b"i/o",
            b"read",
            b"write",
            b":no",
            b": no",
            b"localhost",
            b"127.",
            b"0.0.0.0",
        ]
        .iter()
        .any(|n| has(n))
    }

    /// Whether the captured value at `at` in `hay` confirms the match:
    /// [`Check::confirms`] of the value, but for `NotErrorQuote`, which
    /// reads the two words before it and the text after it too.
    pub(super) fn confirms_in(self, hay: &[u8], at: std::ops::Range<usize>) -> bool {
        match self {
            Check::NotErrorQuote => {
                let before = &hay[at.start.saturating_sub(32)..at.start];
                let after = &hay[at.end..(at.end + 24).min(hay.len())];
                !error_quote(before, &hay[at], after)
            }
            check => check.confirms(&hay[at]),
        }
    }

    /// Whether a captured value confirms the match.
    pub(super) fn confirms(self, value: &[u8]) -> bool {
        match self {
            Check::None => true,
            Check::CredentialValue => super::credential::looks_like_credential(value),
            Check::NotImageReference => !urls::is_image_reference(value),
            Check::NotReported => !value.split(|b| !b.is_ascii_alphabetic()).any(reported),
            // Needs the text around the value: see `confirms_in`.
            Check::NotErrorQuote => true,
            Check::Unnegated => !value
                .split(|b: &u8| !b.is_ascii_alphabetic() && *b != b'\'')
                .any(|w| {
                    matches!(w, b"not" | b"never" | b"no" | b"nor" | b"without" | b"stop")
                        || w.ends_with(b"n't")
                }),
        }
    }
}

/// Whether an address (`Check::NotErrorQuote`), with the words before it
/// and the text after it, is quoted from a connection error (Go's and most
/// clients' "dial tcp <addr>", "read tcp <addr>", "<addr>: connect:
/// connection refused", "<addr>: i/o timeout"), or is a loopback address
/// queried or read where it is ("curl localhost:9090/…", "Grafana on
/// 127.0.0.1:3000/…").
fn error_quote(before: &[u8], addr: &[u8], after: &[u8]) -> bool {
    let words = |t: &[u8]| -> Vec<Vec<u8>> {
        t.split(|b| !b.is_ascii_alphabetic() && *b != b'/')
            .filter(|w| !w.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    };
    let before = words(before);
    let last_two = &before[before.len().saturating_sub(2)..];
    let local =
        addr.starts_with(b"localhost") || addr.starts_with(b"127.") || addr.starts_with(b"0.0.0.0");
    let local_query = last_two.iter().any(|w| {
        matches!(
            &w[..],
            b"curl" | b"wget" | b"http" | b"httpie" | b"on" | b"at" | b"from"
        )
    });
    let after = after.trim_ascii_start();
    (local && local_query)
        || last_two.iter().any(|w| matches!(&w[..], b"tcp" | b"udp"))
        || (after.starts_with(b":")
            && words(after).first().is_some_and(|w| {
                matches!(
                    &w[..],
                    b"connect" | b"connection" | b"dial" | b"i/o" | b"read" | b"write" | b"no"
                )
            }))
}

/// A word that reports a command as done ("ran", "reloaded with sudo …"):
/// a past tense, not an order.
fn reported(word: &[u8]) -> bool {
    const NOT_PAST: [&[u8]; 8] = [
        b"need", b"proceed", b"feed", b"seed", b"speed", b"exceed", b"succeed", b"embed",
    ];
    matches!(
        word,
        b"ran" | b"ran't" | b"did" | b"done" | b"typed" | b"tried"
    ) || (word.len() > 4 && word.ends_with(b"ed") && !NOT_PAST.contains(&word))
}

/// How a rule recognises its content.
#[derive(Clone, Copy)]
pub(super) enum Matcher {
    /// A regex over one view. Without keywords, all patterns of a view share
    /// one automaton that runs on every string; with keywords (literals, any
    /// case, of which every match contains at least one), the regex is
    /// compiled on first need and runs only on strings holding a keyword.
    Pattern {
        view: View,
        check: Check,
        keywords: &'static [&'static str],
        /// Literals (any case) of which every match also contains at least
        /// one, looked for in the rule's own view once a keyword woke the
        /// rule: a rule whose match needs two parts keyed by the rarer one
        /// still skips the texts without the other (empty: no second test).
        also: &'static [&'static str],
        regex: &'static str,
    },
    /// A structural check over the views: checksums, word lists, code
    /// points, directive families. Each must be linear in the input.
    Detect(fn(&Views) -> bool),
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Matcher::Pattern { view, .. } => write!(f, "Pattern({view:?})"),
            Matcher::Detect(_) => f.write_str("Detect"),
        }
    }
}

#[derive(Debug)]
pub(super) struct Rule {
    pub class: FindingClass,
    pub name: &'static str,
    pub matcher: Matcher,
    /// Field positions where this content is legitimate (everywhere else it
    /// is flagged). Empty: flagged in every string.
    pub exempt: &'static [Context],
    /// Texts this rule must flag (in free text). Read by the tests only:
    /// the table documents itself and proves it (`examples!`: empty outside
    /// test builds).
    #[cfg_attr(not(test), allow(dead_code))]
    pub hits: &'static [&'static str],
    /// Texts this rule must not flag (other rules may).
    #[cfg_attr(not(test), allow(dead_code))]
    pub misses: &'static [&'static str],
}

/// A rule with no examples and no exemptions, for struct-update syntax.
pub(super) const BASE: Rule = Rule {
    class: FindingClass::Injection,
    name: "",
    matcher: Matcher::Detect(|_| false),
    exempt: &[],
    hits: &[],
    misses: &[],
};

/// A pattern rule on `view`, run on every string.
pub(super) const fn pattern(view: View, regex: &'static str) -> Matcher {
    keyed(view, &[], regex)
}

/// A pattern rule on `view`, run only where one of `keywords` occurs.
pub(super) const fn keyed(
    view: View,
    keywords: &'static [&'static str],
    regex: &'static str,
) -> Matcher {
    keyed_also(view, keywords, &[], regex)
}

/// A pattern rule on `view`, run only where one of `keywords` occurs and
/// the view holds one of `also` (every match contains one of each).
pub(super) const fn keyed_also(
    view: View,
    keywords: &'static [&'static str],
    also: &'static [&'static str],
    regex: &'static str,
) -> Matcher {
    Matcher::Pattern {
        view,
        check: Check::None,
        keywords,
        also,
        regex,
    }
}

/// A raw-view pattern whose captured value must look like a credential, run
/// only where one of `keywords` occurs (every form has a label).
pub(super) const fn checked(keywords: &'static [&'static str], regex: &'static str) -> Matcher {
    Matcher::Pattern {
        view: View::Raw,
        check: Check::CredentialValue,
        keywords,
        also: &[],
        regex,
    }
}

/// The generic URL rule, and the host-shape rules it makes redundant when both
/// match one string.
pub(super) const SCHEME_URL: &str = "scheme_url";
pub(super) const HOST_ONLY: &[&str] = &["www_host", "ip_host", "bare_domain_path"];

/// Automata the families load themselves (beyond their rules' patterns),
/// for `automata::generate`.
#[cfg(test)]
pub(super) fn automata_sources() -> Vec<super::automata::Source> {
    vec![crypto_keys::hex_key_label_source()]
}

#[cfg(test)]
pub(super) use crypto_keys::{hex_key_label_ends, hex_key_label_pattern};
#[cfg(test)]
pub(super) use labelled::{label_hits, labels_pattern, LABELS};

/// The rule of a request found only under a concealing encoding (see
/// `decode::asks`): `mod.rs` reports it for decoded text, never for text
/// as written.
pub(super) fn encoded_request() -> &'static Rule {
    &injection::ENCODED_REQUEST
}

/// Every rule, family by family.
pub(super) fn all() -> impl Iterator<Item = &'static Rule> {
    [
        secrets::RULES,
        labelled::RULES,
        crypto_keys::RULES,
        hidden::RULES,
        injection::RULES,
        std::slice::from_ref(&injection::ENCODED_REQUEST),
        directives::RULES,
        urls::RULES,
    ]
    .into_iter()
    .flatten()
}
