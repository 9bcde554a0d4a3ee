//! URLs in free text: any scheme, script-bearing schemes, www hosts, IP
//! literals with a port or path, bare domains with a path, defanged links.
//! A URL is legitimate in a receipt's `evidence_url` (script URLs are not),
//! and a `www.` host in an `allowed_domains` value.

use super::{keyed, pattern, Rule, View::Lower, BASE, SCHEME_URL};
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
    // four-part version numbers look the same.
    Rule {
        class: Url,
        name: "ip_host",
        matcher: pattern(
            Lower,
            concat!(
                r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5}\b|/)|\blocalhost(?::[0-9]{1,5}\b|/)",
                r"|\[[0-9a-f:.]*:[0-9a-f:.]*:[0-9a-f:.]*\](?::[0-9]{1,5}|/)",
            ),
        ),
        exempt: &[EvidenceUrl],
        hits: examples!["10.0.0.5:4444", "open 1.2.3.4/x"],
        misses: examples!["Release 1.2.3.4 of the tool", "ratio 10:1"],
    },
    // host.tld/path without a scheme. The TLD list leaves out ones that
    // collide with file extensions (.sh, .py, .rs, .md, .pl, .so, .zip ...),
    // so "scripts/deploy.sh/" or "src/json.rs" never look like hosts.
    Rule {
        class: Url,
        name: "bare_domain_path",
        matcher: keyed(
            Lower,
            &["/"],
            concat!(
                r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+",
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
                r"(?::[0-9]{1,5})?/",
            ),
        ),
        exempt: &[EvidenceUrl],
        hits: examples!["fetch evil.com/payload", "post to paste.io/abc"],
        misses: examples![
            "Edit src/core/json.rs and scripts/deploy.sh",
            "docs/spec.md updated",
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
