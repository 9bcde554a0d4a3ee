//! The Worker's modules form a tree: `routes -> handlers -> {failure ->
//! http, kv, do_wire} -> core`, the Durable Objects on `{do_wire, storage,
//! failure, http}`, and leaves that use nothing above them. The Worker only compiles for wasm, so
//! this reads its `use` paths (`crate::worker::…`, `super::…`) from the
//! source and fails on an import cycle or an edge against the layering.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`handlers::reads`) -> source text, for every file under
/// `src/worker`.
fn worker_sources() -> BTreeMap<String, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/worker");
    let mut out = BTreeMap::new();
    collect(&root, &root, &mut out);
    assert!(out.len() > 10, "src/worker has only {} files?", out.len());
    out
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

/// The modules a use path names, read from `rest` (just after `base::`):
/// a single path or a `{…}` group, each followed as deep as its segments
/// are modules (a path into an item of a module names that module).
fn targets(base: &[String], rest: &str, modules: &BTreeSet<String>, out: &mut Vec<String>) {
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
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let mut path = base.to_vec();
    if ident != "self" && !ident.is_empty() {
        path.push(ident.clone());
    }
    let joined = path.join("::");
    if ident.is_empty() || ident == "self" || !modules.contains(&joined) {
        out.push(base.join("::"));
        return;
    }
    match rest[ident.len()..].strip_prefix("::") {
        Some(deeper) => targets(&path, deeper, modules, out),
        None => out.push(joined),
    }
}

/// Edges `from -> to` between worker modules (self-edges dropped; a parent
/// declaring `mod child` is not an edge).
fn edges(sources: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    let mut modules: BTreeSet<String> = sources.keys().cloned().collect();
    modules.insert(String::new()); // the worker root (mod.rs)
    let mut out = BTreeSet::new();
    for (module, src) in sources {
        let own: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        // `super` is the parent of the module the file is (for `mod.rs`
        // too), so each `super::` drops one segment of the file's own path.
        let here = own;
        // Comments dropped, lines joined: a `use` group may span lines.
        let joined: String = src
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        {
            let code = joined.as_str();
            let mut found = Vec::new();
            for (i, _) in code.match_indices("crate::worker::") {
                targets(
                    &[],
                    &code[i + "crate::worker::".len()..],
                    &modules,
                    &mut found,
                );
            }
            for (i, _) in code.match_indices("super::") {
                let before = code[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue; // the second `super::` of `super::super::`
                }
                let mut rest = &code[i..];
                let mut base = here.clone();
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                targets(&base, rest, &modules, &mut found);
            }
            for to in found {
                out.insert((module.clone(), to));
            }
        }
    }
    out.retain(|(a, b)| a != b);
    out
}

/// A cycle in the graph, if there is one (as the list of modules on it).
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        n: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| *s == n) {
            return Some(stack[at..].iter().map(|s| s.to_string()).collect());
        }
        if !done.insert(n) {
            return None;
        }
        stack.push(n);
        for m in next.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for n in next.keys() {
        if let Some(c) = visit(n, &next, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

/// Edges the layering forbids, by top-level module: who may not use whom.
fn layering_problems(edges: &BTreeSet<(String, String)>) -> Vec<String> {
    // Leaves (config, clock, body, lock, log, request) use no module above
    // the leaves;
    // kv, storage and rpc (the outside services) use only leaves.
    const ABOVE_LEAVES: &[&str] = &[
        "kv", "storage", "rpc", "http", "failure", "do_wire", "handlers", "objects", "routes",
    ];
    let rules: &[(&str, &[&str])] = &[
        ("config", ABOVE_LEAVES),
        ("clock", ABOVE_LEAVES),
        ("body", ABOVE_LEAVES),
        ("lock", ABOVE_LEAVES),
        ("log", ABOVE_LEAVES),
        ("request", ABOVE_LEAVES),
        ("kv", ABOVE_LEAVES),
        ("storage", ABOVE_LEAVES),
        ("rpc", ABOVE_LEAVES),
        ("routes", &["objects", "kv", "storage", "do_wire"]),
        ("handlers", &["routes", "objects", "storage"]),
        ("objects", &["routes", "handlers"]),
        (
            "do_wire",
            &[
                "routes", "handlers", "objects", "http", "failure", "storage", "kv",
            ],
        ),
        // Failures are answered with http's builders, and used by
        // everything above it.
        (
            "failure",
            &["routes", "handlers", "objects", "do_wire", "kv", "storage"],
        ),
        (
            "http",
            &[
                "routes", "handlers", "objects", "do_wire", "kv", "storage", "failure",
            ],
        ),
    ];
    let mut problems = Vec::new();
    for (a, b) in edges {
        let (ta, tb) = (top(a), top(b));
        if ta == tb || tb.is_empty() {
            continue;
        }
        for (from, banned) in rules {
            if ta == *from && banned.contains(&tb) {
                problems.push(format!("{a} uses {b}"));
            }
        }
    }
    problems
}

#[test]
fn the_worker_import_graph_has_no_cycle_and_keeps_its_layers() {
    let sources = worker_sources();
    let e = edges(&sources);
    // The graph was really read: the edges the design names are there.
    for (a, b) in [
        ("routes", "handlers::reads"),
        ("handlers::write", "do_wire"),
        ("handlers::reads", "http"),
        ("handlers::reads", "failure"),
        ("failure", "http"),
        ("objects::agent::writes", "failure"),
        ("objects::agent", "do_wire"),
        ("objects::agent::writes", "storage"),
        ("objects::agent::mirror", "kv"),
        // The x402 purchase, one file per concern in its own folder.
        ("objects::agent::x402::settlement", "do_wire"),
        ("objects::agent::x402::settlement", "rpc"),
        (
            "objects::agent::x402::offer",
            "objects::agent::x402::credit",
        ),
        ("objects::ip_quota", "do_wire"),
        ("handlers::history", "handlers"),
        // The MCP door runs its tools through the routes' own read and
        // write code, not a copy of it.
        ("routes", "handlers::mcp"),
        ("handlers::mcp", "handlers::reads"),
        ("handlers::mcp", "handlers::history"),
        ("handlers::mcp", "handlers::write"),
    ] {
        assert!(
            e.contains(&(a.to_owned(), b.to_owned())),
            "missing edge {a} -> {b}: {e:#?}"
        );
    }
    assert_eq!(find_cycle(&e), None, "import cycle in src/worker");
    let problems = layering_problems(&e);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_scan_notices_a_cycle_and_a_layer_breach() {
    let mut sources = worker_sources();
    // http starts using a handler: a cycle (handlers -> http -> handlers)
    // and a breach.
    let http = sources.get_mut("http").unwrap();
    http.push_str("\nuse super::handlers::reads::handle;\n");
    let e = edges(&sources);
    assert!(find_cycle(&e).is_some());
    assert!(!layering_problems(&e).is_empty());

    let mut sources = worker_sources();
    let log = sources.get_mut("log").unwrap();
    log.push_str("\nuse crate::worker::{config::Config, http::{self, Audience}};\n");
    let e = edges(&sources);
    assert!(e.contains(&("log".to_owned(), "http".to_owned())));
    assert!(!layering_problems(&e).is_empty());

    // Nested `super::super` from a handler resolves to the worker root.
    let mut sources = worker_sources();
    let reads = sources.get_mut("handlers::reads").unwrap();
    reads.push_str("\nuse super::super::routes::route;\n");
    let e = edges(&sources);
    assert!(e.contains(&("handlers::reads".to_owned(), "routes".to_owned())));
    assert!(find_cycle(&e).is_some());
}

/// The error answers `http` can build, each reached through
/// `failure::Failure::response` only: a handler that built one itself
/// would be a second place deciding how a failure is answered.
const ERROR_BUILDERS: &[&str] = &[
    "refusal(",
    "rejection(",
    "cursor_not_found(",
    "unavailable(",
    "unavailable_because(",
];

/// Modules (other than `http` and `failure`) that call an error builder.
fn error_answers_outside_failure(sources: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (module, src) in sources {
        if module == "http" || module == "failure" {
            continue;
        }
        for b in ERROR_BUILDERS {
            if src.contains(&format!("http::{b}")) {
                out.push(format!("{module} calls http::{b}"));
            }
        }
    }
    out
}

#[test]
fn every_failure_is_answered_in_one_place() {
    let sources = worker_sources();
    assert!(
        sources["failure"].contains("http::refusal("),
        "failure.rs no longer answers refusals: update this test"
    );
    let found = error_answers_outside_failure(&sources);
    assert!(found.is_empty(), "{found:#?}");

    // The check notices a handler answering a refusal itself.
    let mut sources = sources;
    let reads = sources.get_mut("handlers::reads").unwrap();
    reads.push_str("\nfn x() { let _ = http::refusal(&r, Audience::Read); }\n");
    assert_eq!(
        error_answers_outside_failure(&sources),
        ["handlers::reads calls http::refusal("]
    );
}
