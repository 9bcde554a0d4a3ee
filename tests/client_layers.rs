//! The client library (`src/client/`) stacks one way, as the Worker's
//! modules form a tree (`tests/worker_tree.rs`): each module uses only the
//! layers below its own ([`LAYERS`]), so a lower module never needs a
//! higher one to be understood, tested or changed.
//!
//! Two kinds of use are read from the source:
//!
//! - the `use` paths and inline paths (`crate::client::…`, `super::…`, and
//!   in `mod.rs` the bare paths into its own modules); a name `mod.rs`
//!   re-exports (`crate::client::HeadOutcome`) counts as a use of the
//!   module that defines it, not of `mod.rs`;
//! - the `Client` methods each `impl Client` block calls (`self.put(…)`).
//!   `Client` is one type whose methods are spread over the modules by
//!   role, so such a call is a dependency no import shows.
//!
//! Test code (`#[cfg(test)] mod tests`, and files compiled for tests only)
//! may use any layer and is not read. The sub-packages (`upgrade/`,
//! `watch/`, `mcp/`) are each one module here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `mod.rs` itself: the `Client` type and its builder (its `pub use` lines
/// are the library's public face, not uses).
const ROOT: &str = "";

/// The layers, bottom to top: a module may use only modules of lower
/// layers (never one of its own layer), and every module is in exactly one.
const LAYERS: &[(&[&str], &str)] = &[
    (
        &["http", "wire", "backoff", "resolve"],
        "leaves: the transport, the service's bodies, the retry policy, local-first resolution",
    ),
    (&["error"], "the client's errors (a refusal is a wire body)"),
    (&["state"], "the state directory and its files"),
    (&["identity"], "which key speaks for the agent"),
    (
        &["read_sign", "access"],
        "pure work on a key or a capsule: signing a read, access_control edits",
    ),
    (
        &[ROOT],
        "the Client: state directory, service URL, transport, policy",
    ),
    (
        &["exchange"],
        "the request plumbing: URLs, retries, signed reads, errors",
    ),
    (
        &["reads", "feed", "admin"],
        "what the client asks the service (the operator API too)",
    ),
    (
        &["writes", "verify"],
        "what it sends (and the desired capsule); offline verification",
    ),
    (
        &["keys", "upgrade", "rehydrate", "import", "watch"],
        "the commands, each over the layers below",
    ),
    (
        &["status"],
        "the local picture: writes, key events and the tier",
    ),
    (&["mcp"], "the local MCP tools, over every command"),
];

/// Module path (`upgrade::flow`; [`ROOT`] for `mod.rs`) -> source, for
/// every file under `src/client` that is not test-only, with its inline
/// test module cut off.
fn client_sources() -> BTreeMap<String, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/client");
    let mut all = BTreeMap::new();
    collect(&root, &root, &mut all);
    assert!(all.len() > 20, "src/client has only {} files?", all.len());
    // Files a parent declares under `#[cfg(test)]` (`mod tests;`).
    let mut test_only = BTreeSet::new();
    for (module, src) in &all {
        for (i, _) in src.match_indices("#[cfg(test)]") {
            let after = src[i + "#[cfg(test)]".len()..].trim_start();
            if let Some(decl) = after.strip_prefix("mod ") {
                let name: String = decl.chars().take_while(|c| is_ident(*c)).collect();
                if decl[name.len()..].trim_start().starts_with(';') {
                    test_only.insert(join(module, &name));
                }
            }
        }
    }
    all.into_iter()
        .filter(|(m, _)| !test_only.contains(m))
        .map(|(m, src)| (m, without_inline_tests(&src).to_owned()))
        .collect()
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            out.insert(parts.join("::"), std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The source before its `#[cfg(test)] mod tests { … }` (rustfmt keeps it
/// last in every file here).
fn without_inline_tests(src: &str) -> &str {
    for (i, _) in src.match_indices("#[cfg(test)]") {
        let after = src[i + "#[cfg(test)]".len()..].trim_start();
        if after.starts_with("mod tests {") {
            return &src[..i];
        }
    }
    src
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_owned()
    } else {
        format!("{parent}::{child}")
    }
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

/// The code of a source, comments dropped and lines joined (a `use` group
/// may span lines), with the whitespace before a `.` removed (rustfmt
/// breaks long method chains before the dot).
fn code(src: &str) -> String {
    let joined = src
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::with_capacity(joined.len());
    for c in joined.chars() {
        if c == '.' {
            while out.ends_with(char::is_whitespace) {
                out.pop();
            }
        }
        out.push(c);
    }
    out
}

/// `code` without its `pub use …;` statements and `mod …;` declarations.
fn without_reexports(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    loop {
        let next = ["pub use ", "pub mod ", "mod "]
            .iter()
            .filter_map(|k| {
                rest.match_indices(k)
                    .find(|(i, _)| !rest[..*i].ends_with(is_ident))
                    .map(|(i, _)| i)
            })
            .min();
        let Some(i) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..i]);
        rest = rest[i..].split_once(';').map_or("", |(_, r)| r);
    }
}

/// What a use path names, read from `rest` (just after `base::`): a
/// single path or a `{…}` group, each followed as deep as its segments are
/// modules. Each target is the module and, when the path goes on into an
/// item of that module, the item's name.
fn targets(
    base: &[String],
    rest: &str,
    modules: &BTreeSet<String>,
    out: &mut Vec<(String, Option<String>)>,
) {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    targets(base, &group[start..i], modules, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    targets(base, &group[start..i], modules, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let ident: String = rest.chars().take_while(|c| is_ident(*c)).collect();
    if ident.is_empty() || ident == "self" {
        out.push((base.join("::"), None));
        return;
    }
    let mut path = base.to_vec();
    path.push(ident.clone());
    let joined = path.join("::");
    if !modules.contains(&joined) {
        out.push((base.join("::"), Some(ident)));
        return;
    }
    match rest[ident.len()..].strip_prefix("::") {
        Some(deeper) => targets(&path, deeper, modules, out),
        None => out.push((joined, None)),
    }
}

/// The names `mod.rs` re-exports (`pub use reads::{Fetched, HeadOutcome}`),
/// each with the top-level module that defines it.
fn reexports(root_code: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, _) in root_code.match_indices("pub use ") {
        let stmt = root_code[i + "pub use ".len()..]
            .split(';')
            .next()
            .unwrap_or("");
        let mut found = Vec::new();
        targets(&[], stmt, modules, &mut found);
        for (module, item) in found {
            if let Some(name) = item {
                out.insert(name, top(&module).to_owned());
            }
        }
    }
    out
}

/// The places in `code` where the path `name::` starts (not in the middle
/// of a longer path).
fn path_starts<'a>(code: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!("{name}::");
    code.match_indices(&needle)
        .filter(|(i, _)| {
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
        })
        .map(|(i, _)| &code[i + needle.len()..])
        .collect()
}

/// Whether `code` holds `word` as a whole identifier.
fn has_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        !code[..i].chars().next_back().is_some_and(is_ident)
            && !code[i + word.len()..].chars().next().is_some_and(is_ident)
    })
}

/// Module-level edges `from -> to` (full module paths; self-edges dropped),
/// from use paths.
fn import_edges(sources: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    let mut modules: BTreeSet<String> = sources.keys().cloned().collect();
    modules.insert(ROOT.to_owned());
    let root_code = code(&sources[ROOT]);
    let reexported = reexports(&root_code, &modules);
    let mut out = BTreeSet::new();
    for (module, src) in sources {
        let here: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let code = code(src);
        // In mod.rs, the public face is not a use.
        let scanned = if module == ROOT {
            without_reexports(&code)
        } else {
            code.clone()
        };
        let mut found = Vec::new();
        for rest in path_starts(&scanned, "crate::client") {
            targets(&[], rest, &modules, &mut found);
        }
        for (i, _) in scanned.match_indices("super::") {
            let before = scanned[..i].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue; // the second `super::` of `super::super::`
            }
            // `super` is the parent of the module the file is (for
            // `mod.rs` too): each `super::` drops one segment.
            let mut rest = &scanned[i..];
            let mut base = here.clone();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            targets(&base, rest, &modules, &mut found);
        }
        // Paths into the module's own children (`http::Transport` in
        // mod.rs).
        for child in modules.iter().filter(|m| {
            m.rsplit_once("::")
                .map_or(module.is_empty() && !m.is_empty(), |(p, _)| p == module)
        }) {
            let name = child.rsplit("::").next().unwrap();
            for rest in path_starts(&scanned, name) {
                targets(&here, &format!("{name}::{rest}"), &modules, &mut found);
            }
        }
        if module == ROOT {
            // mod.rs's own code naming what it re-exports (`Error`).
            for (name, from) in &reexported {
                if has_word(&scanned, name) {
                    found.push((from.clone(), None));
                }
            }
        }
        for (to, item) in found {
            let to = match item {
                Some(name) if to == ROOT => reexported.get(&name).cloned().unwrap_or(to),
                _ => to,
            };
            if &to != module {
                out.insert((module.clone(), to));
            }
        }
    }
    out
}

/// The `impl Client { … }` blocks of a source (rustfmt puts `impl Client {`
/// and its closing `}` alone at the start of a line), comments dropped.
fn client_impls(src: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in src.lines() {
        match &mut current {
            None if line.trim_end() == "impl Client {" => current = Some(Vec::new()),
            Some(lines) if line.trim_end() == "}" => {
                blocks.push(code(&lines.join("\n")));
                current = None;
            }
            Some(lines) => lines.push(line),
            None => {}
        }
    }
    blocks
}

/// Edges `from -> to` (full module paths) from the `Client` methods an
/// `impl Client` block of `from` calls on `self`, `to` being the module
/// that defines the method.
fn method_edges(sources: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    for (module, src) in sources {
        for block in client_impls(src) {
            for (i, _) in block.match_indices("fn ") {
                if block[..i].chars().next_back().is_some_and(is_ident) {
                    continue;
                }
                let name: String = block[i + 3..]
                    .chars()
                    .take_while(|c| is_ident(*c))
                    .collect();
                defined.insert(name, module.clone());
            }
        }
    }
    let mut out = BTreeSet::new();
    for (module, src) in sources {
        for block in client_impls(src) {
            for (i, _) in block.match_indices("self.") {
                if block[..i].chars().next_back().is_some_and(is_ident) {
                    continue;
                }
                let rest = &block[i + "self.".len()..];
                let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                if !rest[name.len()..].starts_with('(') {
                    continue; // a field
                }
                if let Some(to) = defined.get(&name).filter(|to| *to != module) {
                    out.insert((module.clone(), to.clone()));
                }
            }
        }
    }
    out
}

fn shown(module: &str) -> &str {
    if module == ROOT {
        "mod.rs"
    } else {
        module
    }
}

/// The layer of a top-level module, if it has one.
fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(ms, _)| ms.contains(&module))
}

/// Top-level modules missing from [`LAYERS`], and names in it that are no
/// module.
fn unplaced(sources: &BTreeMap<String, String>) -> Vec<String> {
    let tops: BTreeSet<&str> = sources.keys().map(|m| top(m)).collect();
    let mut out: Vec<String> = tops
        .iter()
        .filter(|m| layer(m).is_none())
        .map(|m| format!("{} is in no layer: place it in LAYERS", shown(m)))
        .collect();
    for (ms, _) in LAYERS {
        for m in *ms {
            if !tops.contains(m) {
                out.push(format!("LAYERS names {}, which is no module", shown(m)));
            }
        }
    }
    out
}

/// Every edge that does not go down to a lower layer.
fn layering_problems(edges: &BTreeSet<(String, String)>, how: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (a, b) in edges {
        let (ta, tb) = (top(a), top(b));
        if ta == tb {
            continue;
        }
        if let (Some(la), Some(lb)) = (layer(ta), layer(tb)) {
            if lb >= la {
                out.push(format!(
                    "{} {how} {} ({}: layer {la}, {}: layer {lb})",
                    shown(a),
                    shown(b),
                    shown(ta),
                    shown(tb)
                ));
            }
        }
    }
    out
}

fn problems(sources: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = unplaced(sources);
    out.extend(layering_problems(&import_edges(sources), "uses"));
    out.extend(layering_problems(
        &method_edges(sources),
        "calls a Client method of",
    ));
    out
}

#[test]
fn the_client_stacks_one_way() {
    let sources = client_sources();
    let imports = import_edges(&sources);
    let calls = method_edges(&sources);
    let found = problems(&sources);
    assert!(found.is_empty(), "{found:#?}");
    // The graph was really read: edges the design names are there.
    for (a, b) in [
        ("exchange", ROOT),
        (ROOT, "http"),
        (ROOT, "state"),
        ("reads", "exchange"),
        ("writes", "reads"),
        ("keys", "writes"),
        ("exchange", "read_sign"),
        ("mcp::keys", "keys"),
        ("upgrade::service", "exchange"),
        ("watch::longpoll", "exchange"),
    ] {
        assert!(
            imports.contains(&(a.to_owned(), b.to_owned())),
            "missing import {} -> {}: {imports:#?}",
            shown(a),
            shown(b)
        );
    }
    for (a, b) in [
        ("verify", "reads"),
        ("rehydrate", "writes"),
        ("keys", "verify"),
        ("status", "keys"),
        ("status", "upgrade::status"),
    ] {
        assert!(
            calls.contains(&(a.to_owned(), b.to_owned())),
            "missing call {a} -> {b}: {calls:#?}"
        );
    }
}

#[test]
fn the_scan_notices_a_use_against_the_layers() {
    let clean = client_sources();
    let breaks = |module: &str, added: &str| {
        let mut sources = clean.clone();
        sources.get_mut(module).unwrap().push_str(added);
        problems(&sources)
    };
    // A direct use of a higher module.
    let p = breaks("identity", "\nuse super::keys::KeysAnswer;\n");
    assert!(
        p.iter().any(|p| p.starts_with("identity uses keys")),
        "{p:#?}"
    );
    // A higher module's item through mod.rs's re-export.
    let p = breaks("state", "\nuse crate::client::{Error, HeadOutcome};\n");
    assert!(
        p.iter().any(|p| p.starts_with("state uses reads")),
        "{p:#?}"
    );
    // A peer of the same layer.
    let p = breaks("reads", "\nfn f() { super::feed::x(); }\n");
    assert!(p.iter().any(|p| p.starts_with("reads uses feed")), "{p:#?}");
    // mod.rs's own code reaching up.
    let p = breaks(ROOT, "\nfn f() { let _ = writes::template; }\n");
    assert!(
        p.iter().any(|p| p.starts_with("mod.rs uses writes")),
        "{p:#?}"
    );
    // A sub-package's file, through `super::super`.
    let p = breaks("watch::plan", "\nuse super::super::mcp::ToolHost;\n");
    assert!(
        p.iter().any(|p| p.starts_with("watch::plan uses mcp")),
        "{p:#?}"
    );
    // A call to a higher module's Client method, with no import at all.
    let p = breaks(
        "writes",
        "\nimpl Client {\n    fn f(&self) {\n        let _ = self\n            .rotate(&Default::default());\n    }\n}\n",
    );
    assert!(
        p.iter()
            .any(|p| p.starts_with("writes calls a Client method of keys")),
        "{p:#?}"
    );
    // A new module placed in no layer.
    let mut sources = clean.clone();
    sources.insert("frobnicate".into(), "use super::Error;\n".into());
    let p = problems(&sources);
    assert!(
        p.contains(&"frobnicate is in no layer: place it in LAYERS".to_owned()),
        "{p:#?}"
    );
    // A test module may use any layer: it is cut off before the scan.
    let with_tests =
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::super::mcp::ToolHost;\n}\n";
    assert_eq!(without_inline_tests(with_tests), "fn f() {}\n");
}
