//! Every relative link in the Markdown documentation resolves: the README,
//! `docs/*.md`, `docs/design/*.md`, `clients/README.md`, `benches/README.md`,
//! `benches/runs/*.md` and `tests/README.md`. A link's path must name an existing file or
//! directory of the repository, and a `#anchor` into a Markdown file must
//! name one of its headings (GitHub's rule: lowercase, spaces to `-`,
//! punctuation other than `-` and `_` dropped, `-1`, `-2`… on repeats) or an
//! explicit `<a id="…">`. Links to other sites are not fetched.
//!
//! Code blocks and inline code are not Markdown links and are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose links are checked, relative to the repository root.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut docs = vec![
        PathBuf::from("README.md"),
        PathBuf::from("clients/README.md"),
        PathBuf::from("benches/README.md"),
        PathBuf::from("tests/README.md"),
    ];
    for dir in ["docs", "docs/design", "benches/runs"] {
        let mut found: Vec<PathBuf> = fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .map(|p| p.strip_prefix(&root).expect("under the root").to_path_buf())
            .collect();
        found.sort();
        docs.extend(found);
    }
    docs
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The line without its inline code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// `[text](url)` → `text`, for headings that hold links.
fn link_texts(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("](") {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out.replace(['[', ']'], "")
}

/// The anchors a Markdown text defines: its headings' slugs (numbered on
/// repeats) and explicit `id="…"` / `name="…"` attributes.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let title = line[hashes..].trim().trim_end_matches('#').trim();
            let base = slug(&link_texts(title));
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                let value = &rest[at + attr.len()..];
                if let Some(end) = value.find('"') {
                    out.insert(value[..end].to_owned());
                }
                rest = &rest[at + attr.len()..];
            }
        }
    }
    out
}

/// The link targets of a Markdown text, with their line numbers: inline
/// links and images (`](target)`) and reference definitions (`[x]: target`).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, raw) in text.lines().enumerate() {
        if is_fence(raw) {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = without_code(raw);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let inner = after[..end].trim();
            let target = match inner.strip_prefix('<') {
                Some(angled) => angled.split('>').next().unwrap_or_default(),
                None => inner.split_whitespace().next().unwrap_or_default(),
            };
            out.push((i + 1, target.to_owned()));
            rest = &after[end..];
        }
        let t = line.trim_start();
        if let (true, Some(def)) = (t.starts_with('['), t.find("]: ")) {
            let target = t[def + 3..].split_whitespace().next().unwrap_or_default();
            out.push((i + 1, target.to_owned()));
        }
    }
    out
}

/// `a/b/../c` → `a/c`; `None` when it leaves the repository.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// `%20` and friends, for paths written percent-encoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every broken link of `doc` (relative to `root`), as `file:line: why`.
fn broken_links(root: &Path, doc: &Path) -> Vec<String> {
    let text =
        fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for (line, target) in links(&text) {
        let at = format!("{}:{line}: `{target}`", doc.display());
        if target.is_empty() {
            broken.push(format!("{at}: empty link"));
            continue;
        }
        let lower = target.to_ascii_lowercase();
        if lower.contains("://") || lower.starts_with("mailto:") || lower.starts_with("//") {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            Some(doc.to_path_buf())
        } else {
            normalise(&dir.join(percent_decode(path)))
        };
        let Some(resolved) = resolved else {
            broken.push(format!("{at}: leaves the repository"));
            continue;
        };
        let full = root.join(&resolved);
        if !full.exists() {
            broken.push(format!("{at}: {} does not exist", resolved.display()));
            continue;
        }
        let Some(fragment) = fragment else { continue };
        if !(full.is_file() && resolved.extension().is_some_and(|x| x == "md")) {
            continue;
        }
        let known = anchor_cache.entry(resolved.clone()).or_insert_with(|| {
            anchors(
                &fs::read_to_string(&full)
                    .unwrap_or_else(|e| panic!("{}: {e}", resolved.display())),
            )
        });
        let wanted = percent_decode(fragment);
        if !known.contains(&wanted) {
            broken.push(format!(
                "{at}: {} has no heading #{wanted}",
                resolved.display()
            ));
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = root();
    let docs = documents();
    assert!(docs.len() >= 5, "too few documents found: {docs:?}");
    let broken: Vec<String> = docs.iter().flat_map(|d| broken_links(&root, d)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rule() {
    assert_eq!(slug("The two commands"), "the-two-commands");
    assert_eq!(slug("9. History"), "9-history");
    assert_eq!(slug("3.5 KV / log leak"), "35-kv--log-leak");
    assert_eq!(slug("Local: `selfcap mcp`"), "local-selfcap-mcp");
    assert_eq!(
        slug("13. Push on change: watch and long-poll"),
        "13-push-on-change-watch-and-long-poll"
    );
    assert_eq!(slug("Where is X decided"), "where-is-x-decided");
    assert_eq!(slug("snake_case and CAPS"), "snake_case-and-caps");
    let doc = "# A\n## A\n```\n# not a heading\n```\n### B `c`\n<a id=\"custom\"></a>\n";
    let got: Vec<String> = anchors(doc).into_iter().collect();
    assert_eq!(got, ["a", "a-1", "b-c", "custom"]);
}

#[test]
fn links_in_code_are_not_links() {
    let doc =
        "[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n[![i](p.png)](q.png \"title\")\n[ref]: r.md\n";
    let got: Vec<(usize, String)> = links(doc);
    let want: Vec<(usize, String)> = [(1, "x.md"), (5, "p.png"), (5, "q.png"), (6, "r.md")]
        .into_iter()
        .map(|(l, t)| (l, t.to_owned()))
        .collect();
    assert_eq!(got, want);
}
