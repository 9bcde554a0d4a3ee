//! Conditional reads: the caching headers every read carries and whether a
//! client's `If-None-Match` already names the current entity (then the
//! answer is a bodiless 304). The Worker's one cached-response type applies
//! this to every document, so no handler decides it on its own.

use crate::core::jcs::CURSOR_PREFIX;

/// Read responses: shared caches may keep them for a minute, then must ask
/// again (cheaply, with `If-None-Match`).
pub const READ_CACHE_CONTROL: &str = "public, max-age=60, must-revalidate";
/// Errors, writes and bootstrap answers are never cached: a cached 404 would
/// hide a capsule published a second later.
pub const NO_STORE: &str = "no-store";
/// `Cache-Control` of a signed read's answer (docs/PROTOCOL.md §12): for
/// that reader alone, never in a shared or colo cache.
pub const PRIVATE_NO_STORE: &str = "private, no-store";

/// What a read answers, given the client's `If-None-Match` and the entity's
/// tag (the unquoted value: a cursor's hex, a chain hash …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 304: the client already holds this entity.
    NotModified,
    /// 200 with the body (HEAD: its headers only).
    Full,
}

impl Answer {
    /// Decides a conditional read.
    pub fn of(if_none_match: Option<&str>, etag: &str) -> Answer {
        match if_none_match {
            Some(h) if matches(h, etag) => Answer::NotModified,
            _ => Answer::Full,
        }
    }
}

/// The `ETag` header value of an entity tag: the tag in quotes (strong).
pub fn etag_header(etag: &str) -> String {
    format!("\"{etag}\"")
}

/// The entity tag of an `ETag` header this service wrote ([`etag_header`]):
/// the text between the quotes. `None` for anything else (a weak or bare
/// tag is never one of ours).
pub fn etag_of_header(header: &str) -> Option<&str> {
    header
        .strip_prefix('"')?
        .strip_suffix('"')
        .filter(|tag| !tag.is_empty() && !tag.contains('"'))
}

/// Does an `If-None-Match` header value match the current entity?
///
/// Accepts what clients and caches actually send: `*`, comma-separated lists,
/// weak tags (`W/"…"`, compared weakly as RFC 9110 requires for
/// `If-None-Match`), quoted or bare tags, and the cursor with or without its
/// `sha256:` prefix, in any case.
pub fn matches(header: &str, etag: &str) -> bool {
    header.split(',').any(|raw| {
        let tag = raw.trim();
        if tag == "*" {
            return true;
        }
        let tag = tag
            .strip_prefix("W/")
            .or_else(|| tag.strip_prefix("w/"))
            .unwrap_or(tag);
        let tag = tag.trim_matches('"');
        let tag = strip_prefix_ignore_case(tag, CURSOR_PREFIX).unwrap_or(tag);
        !tag.is_empty() && tag.eq_ignore_ascii_case(etag)
    })
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etag_header_reads_back_as_its_tag() {
        assert_eq!(etag_of_header(&etag_header("abc123")), Some("abc123"));
        // RFC 9110 §8.8.3 forms that are not what we write.
        for other in ["W/\"abc\"", "abc", "\"\"", "\"a\"b\"", "\"abc", ""] {
            assert_eq!(etag_of_header(other), None, "{other}");
        }
    }

    const TAG: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn what_clients_and_caches_send_matches() {
        for h in [
            "*".to_owned(),
            format!("\"{TAG}\""),
            TAG.to_owned(),
            format!("W/\"{TAG}\""),
            format!("w/\"{TAG}\""),
            format!("\"sha256:{TAG}\""),
            format!("SHA256:{}", TAG.to_uppercase()),
            format!("\"other\", \"{TAG}\""),
            format!("  \"{TAG}\"  ,x"),
        ] {
            assert!(matches(&h, TAG), "{h}");
            assert_eq!(Answer::of(Some(&h), TAG), Answer::NotModified, "{h}");
        }
    }

    #[test]
    fn other_tags_and_empty_ones_do_not() {
        for h in [
            "",
            "\"\"",
            "W/\"\"",
            ",",
            "\"sha256:\"",
            &TAG[1..],
            &format!("{TAG}0"),
            &format!("\"{}\"", TAG.replace('9', "8")),
        ] {
            assert!(!matches(h, TAG), "{h:?}");
        }
        assert_eq!(Answer::of(None, TAG), Answer::Full);
    }

    #[test]
    fn the_etag_header_is_strong_and_quoted() {
        assert_eq!(etag_header("abc"), "\"abc\"");
    }
}
