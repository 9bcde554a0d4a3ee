//! The three Workers' wrangler configs agree with each other and with the
//! code: the entry (`wrangler.toml`) calls the write Worker
//! (`wrangler.write.toml`) and the extras Worker (`wrangler.extras.toml`) by
//! their names, binds the write Worker's `NonceDO` and `AgentDO` classes
//! across (a signed read's nonce; a PUT whose envelope authenticates); all three
//! read the same KV namespace under the same compatibility date; the write
//! Worker binds and migrates every Durable Object class the code defines;
//! the extras Worker defines none, binds each one it calls across, and owns
//! the cron; neither has a route of its own. A mismatch here would deploy an
//! entry that forwards into nothing; the end-to-end harness takes the names
//! from these files, so it would not notice.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// One `[section]` or `[[array]]` element: its `key = value` lines, values
/// as written (strings unquoted).
#[derive(Debug, Default)]
struct Table(BTreeMap<String, String>);

impl Table {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
}

/// A wrangler config as the plain TOML it is: top-level keys, then its
/// tables by header, in order.
struct Config {
    top: Table,
    tables: Vec<(String, Table)>,
}

impl Config {
    fn read(file: &str) -> Config {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut top = Table::default();
        let mut tables: Vec<(String, Table)> = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if line.starts_with('[') {
                let name = line.trim_matches(|c| c == '[' || c == ']');
                tables.push((name.to_owned(), Table::default()));
                continue;
            }
            let (key, value) = line.split_once('=').expect("key = value");
            let value = value.trim().trim_matches('"').to_owned();
            let into = match tables.last_mut() {
                Some((_, t)) => t,
                None => &mut top,
            };
            into.0.insert(key.trim().to_owned(), value);
        }
        Config { top, tables }
    }

    fn all(&self, name: &str) -> Vec<&Table> {
        self.tables
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| t)
            .collect()
    }

    fn has(&self, name: &str) -> bool {
        !self.all(name).is_empty()
    }
}

/// The string value of `const NAME: &str = "…";` in a source file.
fn constant(file: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
    let src = std::fs::read_to_string(path).unwrap();
    let decl = format!("const {name}: &str = \"");
    let at = src
        .find(&decl)
        .unwrap_or_else(|| panic!("{file}: no {name}"))
        + decl.len();
    src[at..].split('"').next().unwrap().to_owned()
}

/// The Durable Object classes the Worker defines (`#[durable_object…]`
/// before `pub struct Name`), from the source.
fn classes_in_code() -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let src = std::fs::read_to_string(&path).unwrap();
                let lines: Vec<&str> = src.lines().map(str::trim).collect();
                for (i, l) in lines.iter().enumerate() {
                    if l.starts_with("#[durable_object") {
                        let name = lines[i + 1..]
                            .iter()
                            .find_map(|l| l.strip_prefix("pub struct "))
                            .unwrap();
                        out.push(name.trim_end_matches(" {").to_owned());
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/worker/objects"),
        &mut out,
    );
    out.sort();
    out
}

#[test]
fn the_entry_calls_the_workers_behind_it_by_their_names_and_all_share_one_namespace() {
    let entry = Config::read("wrangler.toml");
    let write = Config::read("wrangler.write.toml");
    let extras = Config::read("wrangler.extras.toml");
    let writer = write.top.get("name").unwrap();
    let extra = extras.top.get("name").unwrap();
    assert_ne!(entry.top.get("name"), Some(writer));
    assert_ne!(entry.top.get("name"), Some(extra));
    assert_ne!(writer, extra);

    let date = entry.top.get("compatibility_date").unwrap();
    assert_eq!(write.top.get("compatibility_date"), Some(date));
    assert_eq!(extras.top.get("compatibility_date"), Some(date));
    assert!(date <= "2026-05-03", "compatibility_date {date}");

    assert_eq!(entry.top.get("main"), Some("build/index.js"));
    assert_eq!(write.top.get("main"), Some("build/write/index.js"));
    assert_eq!(extras.top.get("main"), Some("build/extras/index.js"));

    // The service bindings, by the names the code calls.
    let forward = "src/worker/entry/forward.rs";
    let mut services: Vec<(String, String)> = entry
        .all("services")
        .iter()
        .map(|t| {
            (
                t.get("binding").unwrap().into(),
                t.get("service").unwrap().into(),
            )
        })
        .collect();
    services.sort();
    let mut expected = vec![
        (constant(forward, "WRITER_BINDING"), writer.to_owned()),
        (constant(forward, "EXTRAS_BINDING"), extra.to_owned()),
    ];
    expected.sort();
    assert_eq!(services, expected);
    // Only the entry calls another Worker.
    assert!(!write.has("services") && !extras.has("services"));

    // One KV namespace, bound alike.
    let kv = constant("src/worker/config.rs", "KV_BINDING");
    let id = entry.all("kv_namespaces")[0].get("id");
    for c in [&entry, &write, &extras] {
        let bound = c.all("kv_namespaces");
        assert_eq!(bound.len(), 1);
        assert_eq!(bound[0].get("binding"), Some(kv.as_str()));
        assert_eq!(bound[0].get("id"), id);
    }
}

#[test]
fn the_durable_objects_are_the_write_workers_and_the_entry_binds_two_across() {
    let entry = Config::read("wrangler.toml");
    let write = Config::read("wrangler.write.toml");
    let writer = write.top.get("name").unwrap();

    // The entry: NONCE_DO and AGENT_DO only, the write Worker's classes; no
    // class of its own.
    let mut bound: Vec<(String, String)> = entry
        .all("durable_objects.bindings")
        .iter()
        .map(|t| {
            assert_eq!(t.get("script_name"), Some(writer));
            (
                t.get("name").unwrap().to_owned(),
                t.get("class_name").unwrap().to_owned(),
            )
        })
        .collect();
    bound.sort();
    assert_eq!(
        bound,
        [
            (
                constant("src/worker/config.rs", "AGENT_DO_BINDING"),
                "AgentDO".to_owned()
            ),
            (
                constant("src/worker/config.rs", "NONCE_DO_BINDING"),
                "NonceDO".to_owned()
            ),
        ]
    );
    assert!(!entry.has("migrations") && !entry.has("triggers"));

    // The write Worker binds every class the code defines, and migrates it.
    let mut classes: Vec<String> = write
        .all("durable_objects.bindings")
        .iter()
        .map(|t| t.get("class_name").unwrap().to_owned())
        .collect();
    classes.sort();
    assert_eq!(classes, classes_in_code());
    let mut migrated: Vec<String> = write
        .all("migrations")
        .iter()
        .flat_map(|t| {
            t.get("new_sqlite_classes")
                .unwrap()
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|c| c.trim().trim_matches('"').to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    migrated.sort();
    assert_eq!(migrated, classes);
    assert!(write
        .all("durable_objects.bindings")
        .iter()
        .all(|t| t.get("script_name").is_none()));

    // The extras Worker: every class, each the write Worker's, bound by the
    // same names; no class, migration or binding of its own.
    let extras = Config::read("wrangler.extras.toml");
    let across = extras.all("durable_objects.bindings");
    assert!(across.iter().all(|t| t.get("script_name") == Some(writer)));
    let names = |c: &Config| {
        let mut n: Vec<(String, String)> = c
            .all("durable_objects.bindings")
            .iter()
            .map(|t| {
                (
                    t.get("name").unwrap().into(),
                    t.get("class_name").unwrap().into(),
                )
            })
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&extras), names(&write));
    assert!(!extras.has("migrations"));
}

#[test]
fn requests_reach_the_entry_the_cron_the_extras_worker() {
    let entry = Config::read("wrangler.toml");
    let write = Config::read("wrangler.write.toml");
    let extras = Config::read("wrangler.extras.toml");
    // Only the entry is reachable from outside, with the Explorer beside it.
    for behind in [&write, &extras] {
        assert_eq!(behind.top.get("workers_dev"), Some("false"));
        assert!(!behind.has("assets") && !behind.has("routes"));
    }
    assert!(entry.all("assets")[0].get("directory").is_some());
    // The cron is the extras Worker's (the world feed's refresh is compiled
    // there only).
    assert!(extras.all("triggers")[0].get("crons").is_some());
    assert!(!write.has("triggers") && !entry.has("triggers"));
    // All log.
    for c in [&entry, &write, &extras] {
        assert_eq!(c.all("observability")[0].get("enabled"), Some("true"));
    }
}
