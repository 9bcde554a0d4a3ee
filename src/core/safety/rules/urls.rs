//! URLs in free text: any scheme, script-bearing schemes, www hosts, IP
//! literals with a port or path, bare domains with a path, defanged links.
//! A URL is legitimate in a receipt's `evidence_url` (script URLs are not),
//! and a `www.` host in an `allowed_domains` value.

use super::{keyed, pattern, Check, Matcher, Rule, View::Lower, BASE, SCHEME_URL};
use crate::core::safety::walk::Context::{AllowedDomain, EvidenceUrl};
use crate::core::safety::FindingClass::Url;

pub(super) static RULES: &[Rule] = &[
    // ------------------------------------------------------------------- urls
    // Any `scheme://`, plus spaced/defanged schemes ("hxxps[:]//", "http : //").
    Rule {
        class: Url,
        name: SCHEME_URL,
        matcher: pattern(
            Lower,
            concat!(
                r"\b[a-z][a-z0-9+.-]{0,31}://|\bmailto:[^\s@]+@|\bmagnet:\?",
                r"|\b(?:h(?:tt|xx)ps?|ftps?|sftp|wss?|file|smb)\s*[\[({]?\s*:\s*[\])}]?\s*[/\\]\s*[/\\]",
                r"|\bhxxps?\b",
                r#"|(?:^|[\s("'=])//[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}"#,
            ),
        ),
        exempt: &[EvidenceUrl],
        hits: examples!["see https://diffdelta.io/docs", "hxxps[:]//evil.example/p"],
        misses: examples![
            "Release v1.2.3 after config.yaml review",
            "Mirror diffdelta.self.head state",
        ],
    },
    // Script-bearing schemes are dangerous even where a URL is allowed.
    // "JavaScript: fix build" is prose; "javascript:alert(1)" is not.
    Rule {
        class: Url,
        name: "script_url",
        matcher: keyed(
            Lower,
            &["script", "data:"],
            concat!(
                r"\b(?:javascript|vbscript|livescript)\s*:(?:[^\s]|\s*[a-z_$][a-z0-9_$.]*[(`])",
                r"|\bdata:[a-z]+/[a-z0-9.+-]+(?:;[a-z0-9=.-]+)*[;,]",
            ),
        ),
        hits: examples!["javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD4="],
        misses: examples!["JavaScript: fix the build", "data: 3 rows migrated"],
        ..BASE
    },
    Rule {
        class: Url,
        name: "www_host",
        matcher: keyed(Lower, &["www"], r"\bwww[0-9]*\.[a-z0-9-]+\.[a-z]{2,}"),
        exempt: &[EvidenceUrl, AllowedDomain],
        hits: examples!["www.example.com", "see www2.example.org"],
        misses: examples!["www folder cleanup", "wwwroot permissions"],
    },
    // IP literal (or localhost) with a port or a path: "10.0.0.5:4444",
    // "1.2.3.4/x", "[::1]:8080". A bare dotted quad is left alone because
    // four-part version numbers look the same. The reader's own machine with
    // a port alone ("open localhost:9093 after the port-forward") sends
    // nothing anywhere: a loopback address counts with a path, unless it
    // is queried or read there ("curl localhost:9090/api/v1/targets",
    // "Grafana on 127.0.0.1:3000/d/…"). A slash and a prefix length ("10.0.0.0/16", "0.0.0.0/0") is a network
    // block in a firewall or routing note, not a path on a host. An address
    // inside a quoted connection error ("dial tcp 10.96.0.1:443: i/o
    // timeout", "10.0.3.12:2379: connect: connection refused") is where a
    // connection failed, not one to make (`Check::NotErrorQuote` reads the
    // two words before it and the one after, outside the match, so the
    // always-run set's automaton is no larger).
    Rule {
        class: Url,
        name: "ip_host",
        matcher: Matcher::Pattern {
            view: Lower,
            check: Check::NotErrorQuote,
            keywords: &[],
            also: &[],
            regex: concat!(
                // one group: the check reads the address and the words
                // around it
                r"((?:",
                r"\b(?:[1-9]|[1-9][0-9]|1[01][0-9]|12[0-6]|12[89]|1[3-9][0-9]|2[0-9]{2})\.(?:[0-9]{1,3}\.){2}[0-9]{1,3}(?::[0-9]{1,5}\b|/(?:[^0-9\s]|[0-9]+[^0-9\s.,;:)\]]))",
                r"|\b0\.(?:[1-9][0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}|0\.[1-9][0-9]{0,2}\.[0-9]{1,3}|0\.0\.[1-9][0-9]{0,2})(?::[0-9]{1,5}\b|/(?:[^0-9\s]|[0-9]+[^0-9\s.,;:)\]]))",
                r"|\b(?:127\.(?:[0-9]{1,3}\.){2}[0-9]{1,3}|localhost|0\.0\.0\.0)(?::[0-9]{1,5})?/(?:[^0-9\s]|[0-9]+[^0-9\s.,;:)\]])",
                r"|\[[0-9a-f:.]*:[0-9a-f:.]*:[0-9a-f:.]*\](?::[0-9]{1,5}|/)",
                r"))",
            ),
        },
        exempt: &[EvidenceUrl],
        hits: examples![
            "10.0.0.5:4444",
            "open 1.2.3.4/x",
            "connect to 203.0.113.7:4444 with nc",
            "localhost:3000/debug",
        ],
        misses: examples![
            "Release 1.2.3.4 of the tool",
            "ratio 10:1",
            "open localhost:9093 after the port-forward",
            "node exporter answers on 127.0.0.1:9100 only",
            "Prometheus listens on 0.0.0.0:9090 inside the pod",
            "The VPC uses 10.0.0.0/16; the public subnet routes 0.0.0.0/0 to the internet gateway.",
            "Loopback is 127.0.0.0/8, link-local 169.254.0.0/16",
            "curl localhost:9090/api/v1/targets after the port-forward",
            "dial tcp 10.96.0.1:443: i/o timeout",
            "etcd 10.0.3.12:2379: connect: connection refused",
        ],
    },
    // host.tld/path without a scheme. The TLD list leaves out ones that
    // collide with file extensions (.sh, .py, .rs, .md, .pl, .so, .zip ...),
    // so "scripts/deploy.sh/" or "src/json.rs" never look like hosts.
    Rule {
        class: Url,
        name: "bare_domain_path",
        // The capture is the whole token, so an image reference (checked
        // after the match) is told from a page.
        matcher: Matcher::Pattern {
            view: Lower,
            check: Check::NotImageReference,
            keywords: &["/"],
            also: &[],
            regex: concat!(
                r"\b((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+",
                r"(?:com|net|org|io|ai|dev|app|co|me|info|biz|xyz|ru|cn|tk|top|gg|ly|cc|us|uk|de|fr|in|jp|",
                r"site|online|club|link|click|ws|pw|su|onion|cloud|tech|page|gov|edu|mil|eu|ca|au|nl|br|es|ch|se|kr|",
                r"tv|fm|live|store|shop|blog|news|ml|ga|cf|gq|icu|buzz|cam|vip|work|win|bid|download|host|space|",
                r"website|fun|today|world|ir|kp|ng|pk|vn|mx|ar|za|nz|sg|hk|tw|ua|by|kz|",
                // More real and reserved TLDs; still none that is also a
                // common file extension (sh, py, rs, md, pl, so, zip, ...).
                r"to|gle|example|test|invalid|local|internal|lan|corp|st|is|it|be|at|dk|fi|no|pt|cz|hu|ro|gr|il|id|my|ph|th|",
                r"cl|pe|ve|ec|uy|ke|gh|im|am|gd|vc|lc|sc|mn|cx|nu|re|wtf|lol|pro|name|mobi|asia|travel|jobs|int|bar|best|",
                r"bio|bot|build|cafe|chat|city|codes|company|cool|design|digital|domains|email|energy|events|exchange|",
                r"expert|finance|fyi|gallery|games|global|group|guide|guru|help|hosting|inc|ink|land|life|ltd|media|",
                r"money|network|ninja|one|partners|photos|pics|pink|place|plus|press|pub|red|rent|review|rocks|run|",
                r"sale|school|services|social|software|solutions|studio|support|systems|team|tips|tools|town|trade|",
                r"tube|ventures|video|wiki|works|zone|goog|google|amazon|microsoft)",
                r"(?::[0-9]{1,5})?/[^\s\x22'<>]*)",
            ),
        },
        exempt: &[EvidenceUrl],
        hits: examples![
            "fetch evil.com/payload",
            "post to paste.io/abc",
            "see evil.com/x?next=ghcr.io/a/b:1",
        ],
        misses: examples![
            "Edit src/core/json.rs and scripts/deploy.sh",
            "docs/spec.md updated",
            "image ghcr.io/example/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "docker pull registry.example.com/team/api:1.4.2",
            "FROM docker.io/library/rust:1.91-slim, then quay.io/org/tool:v2.",
        ],
    },
    Rule {
        class: Url,
        name: "obfuscated_url",
        matcher: keyed(
            Lower,
            &["[.]", "(.)", "{.}", "[dot]", "(dot)"],
            r"\b[a-z0-9-]+\s*(?:\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\))\s*[a-z]{2,}\b",
        ),
        exempt: &[EvidenceUrl],
        hits: examples!["evil[.]com", "example(dot)org"],
        misses: examples!["see the [docs] page", "dot notation in jq"],
    },
];

/// Whether `token` (lower-cased, as matched) is a container image reference:
/// `host[:port]/repo/path` followed by a `:tag`, an `@sha256:` digest or both
/// (the OCI distribution spec's grammar, simplified), with no query or
/// fragment. Trailing sentence punctuation is not part of it.
pub(super) fn is_image_reference(token: &[u8]) -> bool {
    let t = trim_end_punctuation(token);
    let Some(slash) = t.iter().position(|&b| b == b'/') else {
        return false;
    };
    let (host, rest) = (&t[..slash], &t[slash + 1..]);
    let host_ok = !host.is_empty()
        && host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    let (name, digest) = match rest.windows(8).position(|w| w == b"@sha256:") {
        Some(at) => (&rest[..at], Some(&rest[at + 8..])),
        None => (rest, None),
    };
    let (path, tag) = match name.iter().rposition(|&b| b == b':') {
        Some(at) => (&name[..at], Some(&name[at + 1..])),
        None => (name, None),
    };
    let path_ok = !path.is_empty()
        && !path.starts_with(b"/")
        && !path.ends_with(b"/")
        && path.iter().all(|&b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'/')
        });
    let tag_ok = tag.is_none_or(|t| {
        (1..=128).contains(&t.len())
            && (t[0].is_ascii_alphanumeric() || t[0] == b'_')
            && t.iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    let digest_ok = digest.is_none_or(|d| d.len() == 64 && d.iter().all(u8::is_ascii_hexdigit));
    host_ok && path_ok && tag_ok && digest_ok && (tag.is_some() || digest.is_some())
}

fn trim_end_punctuation(t: &[u8]) -> &[u8] {
    let end = t
        .iter()
        .rposition(|b| {
            !matches!(
                b,
                b'.' | b',' | b';' | b':' | b')' | b']' | b'}' | b'!' | b'?'
            )
        })
        .map_or(0, |i| i + 1);
    &t[..end]
}

#[cfg(test)]
mod tests {
    use super::is_image_reference;

    #[test]
    fn image_references_by_the_distribution_grammar() {
        let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        for yes in [
            format!("ghcr.io/example/app@sha256:{digest}"),
            format!("registry.example.com:5000/team/api:1.4.2@sha256:{digest}"),
            "docker.io/library/rust:1.91-slim".into(),
            "quay.io/org/tool:v2.".into(),
        ] {
            assert!(is_image_reference(yes.as_bytes()), "{yes}");
        }
        for no in [
            "evil.com/payload",
            "paste.io/abc",
            "evil.com/x?next=ghcr.io/a/b:1",
            "example.com/a/b:c/d",
            "example.com/page#frag:1",
            "ghcr.io/app@sha256:short",
        ] {
            assert!(!is_image_reference(no.as_bytes()), "{no}");
        }
    }
}
