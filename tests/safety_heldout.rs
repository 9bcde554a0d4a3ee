//! The scanner on its held-out evaluation set: public benchmark and
//! working-note text its rules were not written from
//! (`tests/corpus/heldout/SOURCES.md`). Informational, never gating: the set
//! is third-party data, built locally by `tests/corpus/heldout/extract.py`
//! into `target/heldout/` (or the directory `SELFCAP_HELDOUT` names), and
//! this report is ignored unless asked for (`--ignored`), and fails then
//! if the set is missing.
//!
//! An unsafe row is detected when the capsule holding it has any finding; a
//! benign row is a false positive when it has any. Rows are reported by
//! number only.
//!
//! `cargo test --release --test safety_heldout -- --ignored --nocapture`

mod support;

use self_capsule::core::json::parse_str;
use self_capsule::core::safety::scan;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use support::capsules;

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some('u') => {
                chars.next();
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                out.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
            }
            other => panic!("unknown escape \\{other:?}"),
        }
    }
    out
}

/// The spec's example capsule with `text` at `field`: an objective's title
/// or checkpoint, the motto, a note's value, or (`notes`) a JSON array of
/// notes replacing the capsule's.
fn capsule(field: &str, text: &str) -> Value {
    let mut v = capsules::example();
    v["objectives"][0] =
        json!({"id": "obj-1", "status": "in_progress", "title": "Keep the capsule current"});
    match field {
        "title" | "checkpoint" => v["objectives"][0][field] = Value::from(text),
        "motto" => v["self_motto"] = Value::from(text),
        "note" => v["pointers"]["notes"] = json!([{"key": "context", "value": text}]),
        "notes" => v["pointers"]["notes"] = serde_json::from_str(text).expect("notes are JSON"),
        other => panic!("unknown field {other}"),
    }
    v
}

type Tally = BTreeMap<String, (usize, usize)>;

fn add(t: &mut Tally, key: &str, hit: bool) {
    let e = t.entry(key.to_string()).or_default();
    e.0 += usize::from(hit);
    e.1 += 1;
}

fn print(label: &str, t: &Tally) {
    for (k, (hit, n)) in t {
        println!(
            "  {label} {k:<34} {hit:>4}/{n:<4} = {:5.1}%",
            100.0 * *hit as f64 / *n as f64
        );
    }
}

/// (hits, rows, per kind, per kind family, the rows that hit or missed).
fn run(path: &PathBuf, unsafe_side: bool) -> (Tally, Tally, Vec<String>) {
    let text = std::fs::read_to_string(path).expect("readable");
    let (mut kinds, mut families, mut lines) = (Tally::new(), Tally::new(), Vec::new());
    for (i, raw) in text.lines().enumerate() {
        if raw.starts_with('#') || raw.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = raw.splitn(3, '\t').collect();
        let (kind, field, body) = (cols[0], cols[1], unescape(cols[2]));
        let value = capsule(field, &body);
        let findings = scan(&parse_str(&value.to_string()).expect("parses"));
        let flagged = !findings.is_empty();
        add(&mut kinds, kind, flagged);
        add(
            &mut families,
            kind.split('/').next().unwrap_or(kind),
            flagged,
        );
        if flagged != unsafe_side {
            let rules: Vec<&str> = findings.iter().map(|f| f.rule).collect();
            lines.push(format!(
                "{}{}",
                i + 1,
                if flagged {
                    format!(" ({})", rules.join(","))
                } else {
                    String::new()
                }
            ));
        }
    }
    (kinds, families, lines)
}

#[test]
#[ignore = "a report on third-party data built locally (tests/corpus/heldout/SOURCES.md): --ignored"]
fn heldout_detection_and_false_positive_rates() {
    let dir = std::env::var_os("SELFCAP_HELDOUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/heldout"));
    let (unsafe_path, benign_path) = (dir.join("unsafe.tsv"), dir.join("benign.tsv"));
    // Asked for (it is ignored otherwise): without its data it fails
    // rather than report nothing.
    assert!(
        unsafe_path.exists() && benign_path.exists(),
        "held-out set not built ({}): see tests/corpus/heldout/SOURCES.md",
        dir.display()
    );
    let (kinds, families, missed) = run(&unsafe_path, true);
    let (bkinds, _, false_pos) = run(&benign_path, false);
    let total = |t: &Tally| t.values().fold((0, 0), |a, (h, n)| (a.0 + h, a.1 + n));
    let ((d, n), (f, m)) = (total(&kinds), total(&bkinds));
    println!("held-out set: {}", dir.display());
    print("detected  ", &kinds);
    print("detected  ", &families);
    print("false pos.", &bkinds);
    println!("  detection  {d}/{n} = {:.1}%", 100.0 * d as f64 / n as f64);
    println!("  false pos. {f}/{m} = {:.1}%", 100.0 * f as f64 / m as f64);
    println!("  missed unsafe rows: {missed:?}");
    println!("  false-positive benign rows: {false_pos:?}");
}
