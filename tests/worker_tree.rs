//! The Worker's modules form a tree: `routes -> handlers -> {failure ->
//! http, kv, do_wire} -> core`, the Durable Objects on `{do_wire, storage,
//! failure, http}`, and leaves that use nothing above them. The Worker only compiles for wasm, so
//! this reads its `use` paths (`crate::worker::…`, `super::…`) from the
//! source and fails on an import cycle or an edge against the layering.
//!
//! The same source is three Workers: the entry Worker (feature `entry`)
//! compiles what is not gated by `#[cfg(feature = "worker")]` (nor by
//! `write` or `extras`, which imply it); the write Worker (feature `write`)
//! and the extras Worker (feature `extras`) each compile what is not gated
//! by the other's feature. Read as the entry compiles it (gated items
//! dropped), no module may reach a write-only one, nor the core's write
//! side; read as the extras Worker compiles it, none may reach a Durable
//! Object class or what only the objects use; read as the write Worker
//! compiles it, none may reach the extras' routes (MCP, payments, feeds) or
//! the cron's refresh.

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
        "kv",
        "storage",
        "rpc",
        "http",
        "failure",
        "do_json",
        "do_wire",
        "nonce_wire",
        "write_wire",
        "handlers",
        "objects",
        "routes",
        "read_route",
        "entry",
    ];
    // The calls into the Durable Objects and their transport.
    const BELOW_WIRE: &[&str] = &[
        "routes",
        "read_route",
        "entry",
        "handlers",
        "objects",
        "http",
        "failure",
        "storage",
        "kv",
    ];
    let rules: &[(&str, &[&str])] = &[
        ("config", ABOVE_LEAVES),
        ("clock", ABOVE_LEAVES),
        ("body", ABOVE_LEAVES),
        ("lock", ABOVE_LEAVES),
        ("log", ABOVE_LEAVES),
        ("request", ABOVE_LEAVES),
        ("entry_wire", ABOVE_LEAVES),
        ("cold", ABOVE_LEAVES),
        ("kv", ABOVE_LEAVES),
        ("storage", ABOVE_LEAVES),
        ("rpc", ABOVE_LEAVES),
        ("routes", &["objects", "kv", "storage", "do_wire", "entry"]),
        // The read routes' dispatch and the entry Worker sit where routes
        // does; neither knows the other Worker's router.
        (
            "read_route",
            &["routes", "entry", "objects", "kv", "storage", "do_wire"],
        ),
        ("entry", &["routes", "objects", "kv", "storage", "do_wire"]),
        (
            "handlers",
            &["routes", "read_route", "entry", "objects", "storage"],
        ),
        ("objects", &["routes", "read_route", "entry", "handlers"]),
        ("do_wire", BELOW_WIRE),
        ("do_json", BELOW_WIRE),
        ("nonce_wire", BELOW_WIRE),
        ("write_wire", BELOW_WIRE),
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

/// The gates whose items the entry Worker does not compile: the code of
/// the Workers behind it, shared or one's own.
const ENTRY_DROPS: &[&str] = &[
    "#[cfg(feature = \"worker\")]",
    "#[cfg(feature = \"write\")]",
    "#[cfg(feature = \"extras\")]",
];

/// The gates whose items the write Worker does not compile.
const WRITE_DROPS: &[&str] = &[
    "#[cfg(feature = \"entry\")]",
    "#[cfg(feature = \"extras\")]",
    "#[cfg(any(feature = \"entry\", feature = \"extras\"))]",
];

/// The gates whose items the extras Worker does not compile.
const EXTRAS_DROPS: &[&str] = &[
    "#[cfg(feature = \"entry\")]",
    "#[cfg(feature = \"write\")]",
    "#[cfg(not(feature = \"extras\"))]",
];

/// The core's write side, which the entry Worker never uses and does not
/// compile (each is gated by the `core-full` feature, checked below):
/// modules, and the parts of modules whose read part it does use.
const CORE_WRITE_SIDE: &[&str] = &[
    "safety",
    "write",
    "validate",
    "mcp",
    "projection",
    "world",
    "render",
    "diff",
    "mirror",
    "bootstrap",
    "watch",
    "upgrade::amount",
    "upgrade::claim",
    "upgrade::config",
    "upgrade::evm",
    "upgrade::invoice",
    "upgrade::outcome",
    "upgrade::quote",
    "upgrade::receipt",
    "upgrade::x402",
    "key_log::build",
    "key_log::event",
    "key_log::log",
    "key_log::state",
    "key_log::submit",
    "history::export",
    "history::timeline",
];

/// Whether `module` (a path under `src/core/`) is declared behind the
/// `core-full` feature in its parent's file.
fn core_gated(module: &str) -> bool {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let (parent, name) = module.rsplit_once("::").unwrap_or(("", module));
    let file = match parent {
        "" => root.join("mod.rs"),
        p if root.join(p).join("mod.rs").exists() => root.join(p).join("mod.rs"),
        p => root.join(format!("{p}.rs")),
    };
    let src = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    lines.iter().enumerate().any(|(i, l)| {
        *l == format!("pub mod {name};")
            && i > 0
            && lines[i - 1] == "#[cfg(feature = \"core-full\")]"
    })
}

/// `src` as a Worker compiles it: every item, statement, field or match
/// arm right after one of `drops` (the gates it does not compile) dropped.
fn view(src: &str, drops: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some((at, gate)) = drops
        .iter()
        .filter_map(|g| rest.find(g).map(|at| (at, g.len())))
        .min()
    {
        // A gate named in a comment gates nothing.
        let line = &rest[rest[..at].rfind('\n').map_or(0, |i| i + 1)..at];
        if line.contains("//") {
            out.push_str(&rest[..at + gate]);
            rest = &rest[at + gate..];
            continue;
        }
        out.push_str(&rest[..at]);
        rest = after_item(&rest[at + gate..]);
    }
    out.push_str(rest);
    out
}

/// What follows the item `src` starts with (its attributes and comments
/// included): it ends at a `;` or `,` outside brackets, or where its first
/// bracket closes with a `}` (a `,` right after goes with it). Strings and
/// comments are skipped.
fn after_item(src: &str) -> &str {
    let bytes = src.as_bytes();
    let mut i = 0;
    let mut depth = 0i32;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let after = &src[i + 1..];
                    return after.strip_prefix(',').unwrap_or(after);
                }
            }
            b';' | b',' if depth == 0 => return &src[i + 1..],
            _ => {}
        }
        i += 1;
    }
    ""
}

/// The modules the entry Worker does not compile.
fn write_only(sources: &BTreeMap<String, String>) -> BTreeSet<String> {
    not_compiled(sources, ENTRY_DROPS)
}

/// The modules a Worker that drops `drops` does not compile: those whose
/// `mod` is gated in their parent, and everything under them.
fn not_compiled(sources: &BTreeMap<String, String>, drops: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for module in sources.keys().filter(|m| !m.is_empty()) {
        let mut parts: Vec<&str> = module.split("::").collect();
        while let Some(name) = parts.pop() {
            let parent = parts.join("::");
            let view = view(sources.get(&parent).map_or("", String::as_str), drops);
            let declared = view.split([';', '\n']).any(|l| {
                l.trim().strip_prefix("pub ").unwrap_or(l.trim()) == format!("mod {name}")
            });
            if !declared {
                out.insert(module.clone());
                break;
            }
        }
    }
    out
}

/// The entry Worker's modules as it compiles them, and what in them reaches
/// the write side: a write-only module of the Worker, or the core's write
/// side.
fn entry_reaches_write_side(sources: &BTreeMap<String, String>) -> Vec<String> {
    reaches(sources, ENTRY_DROPS, "the write Worker's", CORE_WRITE_SIDE)
}

/// A Worker's modules as it compiles them (dropping `drops`), and what in
/// them reaches a module it does not compile (named `whose`) or a part of
/// the core listed in `core_banned`.
fn reaches(
    sources: &BTreeMap<String, String>,
    drops: &[&str],
    whose: &str,
    core_banned: &[&str],
) -> Vec<String> {
    let absent = not_compiled(sources, drops);
    // Every module stays known (so a path into one resolves to it), but
    // only the Worker's own contribute edges.
    let compiled: BTreeMap<String, String> = sources
        .iter()
        .map(|(m, src)| match absent.contains(m) {
            true => (m.clone(), String::new()),
            false => (m.clone(), view(src, drops)),
        })
        .collect();
    let mut problems = Vec::new();
    for (a, b) in edges(&compiled) {
        if absent.contains(&b) || absent.iter().any(|w| b.starts_with(&format!("{w}::"))) {
            problems.push(format!("{a} uses {whose} {b}"));
        }
    }
    for (module, src) in &compiled {
        let code: String = src
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        for side in core_banned {
            let path = format!("crate::core::{side}");
            let named = code.match_indices(&path).any(|(i, _)| {
                !code[i + path.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if named {
                problems.push(format!("{module} uses {path}"));
            }
        }
    }
    problems
}

#[test]
fn the_entry_worker_compiles_none_of_the_write_side() {
    // The core's write side is what `core-full` gates.
    let ungated: Vec<&&str> = CORE_WRITE_SIDE.iter().filter(|m| !core_gated(m)).collect();
    assert!(ungated.is_empty(), "not behind `core-full`: {ungated:?}");
    assert!(!core_gated("urls") && !core_gated("key_log::served"));
    let sources = worker_sources();
    let write = write_only(&sources);
    // The split was really read: the write side is gated, the read path is
    // not.
    for m in [
        "do_wire",
        "objects",
        "objects::agent",
        "routes",
        "handlers::write",
        "handlers::mcp",
    ] {
        assert!(write.contains(m), "{m} is compiled into the entry Worker");
    }
    for m in [
        "read_route",
        "handlers::reads",
        "handlers::history",
        "handlers::signer",
        "read_cache",
        "nonce_wire",
        "write_wire",
        "entry",
        "entry::forward",
        "entry::write",
    ] {
        assert!(
            !write.contains(m),
            "{m} is not compiled into the entry Worker"
        );
    }
    let problems = entry_reaches_write_side(&sources);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_entry_check_notices_a_use_of_the_write_side() {
    // An ungated use of the Durable Object calls in a read handler.
    let mut sources = worker_sources();
    let reads = sources.get_mut("handlers::reads").unwrap();
    reads.push_str("\nuse crate::worker::do_wire::WaitCall;\n");
    assert_eq!(
        entry_reaches_write_side(&sources),
        ["handlers::reads uses the write Worker's do_wire"]
    );
    // The same use, gated: fine.
    let mut sources = worker_sources();
    let reads = sources.get_mut("handlers::reads").unwrap();
    reads.push_str("\n#[cfg(feature = \"worker\")]\nuse crate::worker::do_wire::WaitCall;\n");
    assert!(entry_reaches_write_side(&sources).is_empty());
    // A gated function's body is dropped whole, inline paths and all.
    let mut sources = worker_sources();
    let signer = sources.get_mut("handlers::signer").unwrap();
    signer.push_str(
        "\n#[cfg(feature = \"worker\")]\nfn f() { let x = \"}\"; crate::worker::do_wire::g(); }\nfn h() {}\n",
    );
    assert!(entry_reaches_write_side(&sources).is_empty());
    // The core's write side, ungated.
    let mut sources = worker_sources();
    let history = sources.get_mut("handlers::history").unwrap();
    history.push_str("\nfn f() { crate::core::safety::scan(&x); }\n");
    assert_eq!(
        entry_reaches_write_side(&sources),
        ["handlers::history uses crate::core::safety"]
    );
    // A module whose declaration is ungated joins the entry Worker.
    let mut sources = worker_sources();
    let root = sources.get_mut("").unwrap();
    *root = root.replace("#[cfg(feature = \"write\")]\nmod rpc;", "mod rpc;");
    assert!(!write_only(&sources).contains("rpc"));
}

/// What only the extras Worker carries, in the core: MCP's messages (the
/// cron's refresh is checked by its call, as the feed objects in the write
/// Worker share the world's types).
const CORE_EXTRAS_SIDE: &[&str] = &["mcp"];

#[test]
fn the_write_worker_compiles_none_of_the_extras_routes() {
    let sources = worker_sources();
    let absent = not_compiled(&sources, WRITE_DROPS);
    for m in [
        "handlers::admin",
        "handlers::mcp",
        "handlers::feed",
        "handlers::upgrade",
        "handlers::x402",
        "entry",
    ] {
        assert!(absent.contains(m), "{m} is compiled into the write Worker");
    }
    for m in [
        "objects",
        "objects::agent",
        "routes",
        "handlers::write",
        "do_wire",
    ] {
        assert!(
            !absent.contains(m),
            "{m} is not compiled into the write Worker"
        );
    }
    let problems = reaches(
        &sources,
        WRITE_DROPS,
        "the extras Worker's",
        CORE_EXTRAS_SIDE,
    );
    assert!(problems.is_empty(), "{problems:#?}");
    // The cron's refresh (the ddv1 upstream's fetch and parsing) is not
    // called there either.
    for (module, src) in &sources {
        if !absent.contains(module) {
            assert!(
                !view(src, WRITE_DROPS).contains("world::refresh("),
                "{module} refreshes the world feed in the write Worker"
            );
        }
    }
}

#[test]
fn the_extras_worker_compiles_no_durable_object_class() {
    let sources = worker_sources();
    let absent = not_compiled(&sources, EXTRAS_DROPS);
    for m in [
        "objects",
        "objects::agent",
        "storage",
        "lock",
        "rpc",
        "facilitator",
        "entry",
    ] {
        assert!(absent.contains(m), "{m} is compiled into the extras Worker");
    }
    for m in [
        "routes",
        "handlers::admin",
        "handlers::mcp",
        "handlers::feed",
        "handlers::upgrade",
        "handlers::x402",
        "do_wire",
        "world",
    ] {
        assert!(
            !absent.contains(m),
            "{m} is not compiled into the extras Worker"
        );
    }
    let problems = reaches(&sources, EXTRAS_DROPS, "the write Worker's", &[]);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_checks_of_the_workers_behind_the_entry_notice_a_breach() {
    // The extras' routes, ungated in the router: the write Worker would
    // carry MCP and payments.
    let mut sources = worker_sources();
    let routes = sources.get_mut("routes").unwrap();
    *routes = routes.replace(
        "#[cfg(feature = \"extras\")]\nuse super::handlers::{admin, feed, mcp, upgrade, x402};",
        "use super::handlers::{admin, feed, mcp, upgrade, x402};",
    );
    let problems = reaches(
        &sources,
        WRITE_DROPS,
        "the extras Worker's",
        CORE_EXTRAS_SIDE,
    );
    assert!(
        problems.contains(&"routes uses the extras Worker's handlers::mcp".to_owned()),
        "{problems:#?}"
    );
    // A handler reaching an object's code: the extras Worker would carry a
    // Durable Object class.
    let mut sources = worker_sources();
    let mcp = sources.get_mut("handlers::mcp").unwrap();
    mcp.push_str("\nuse crate::worker::objects::agent::AgentDO;\n");
    assert_eq!(
        reaches(&sources, EXTRAS_DROPS, "the write Worker's", &[]),
        ["handlers::mcp uses the write Worker's objects::agent"]
    );
    // MCP's core in a module the write Worker compiles.
    let mut sources = worker_sources();
    let write = sources.get_mut("handlers::write").unwrap();
    write.push_str("\nfn f() { crate::core::mcp::rpc::handle(b\"\", None); }\n");
    assert_eq!(
        reaches(
            &sources,
            WRITE_DROPS,
            "the extras Worker's",
            CORE_EXTRAS_SIDE
        ),
        ["handlers::write uses crate::core::mcp"]
    );
}

#[test]
fn the_worker_import_graph_has_no_cycle_and_keeps_its_layers() {
    let sources = worker_sources();
    let e = edges(&sources);
    // The graph was really read: the edges the design names are there.
    for (a, b) in [
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
        // Both Workers read through the same dispatch.
        ("routes", "read_route"),
        ("entry", "read_route"),
        ("read_route", "handlers::reads"),
        ("handlers::signer", "nonce_wire"),
        ("nonce_wire", "do_json"),
        ("do_wire", "do_json"),
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
