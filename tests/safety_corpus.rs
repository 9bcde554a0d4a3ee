//! Labelled-corpus check of the deterministic safety scanner.
//!
//! Two corpora, each line placed at its field's position in an otherwise
//! clean capsule and scanned:
//!
//! - `tests/corpus/public/{unsafe,benign}.tsv`: the measure. Built from public
//!   secret formats and public prompt-injection material without looking at
//!   the rules (see its SOURCES.md), in categories; the test prints detection
//!   and false-positive rates per category and fails below 95 % detection or
//!   above 2 % false positives, overall and per class.
//! - `tests/corpus/{malicious,benign}.txt`: the older regression corpus,
//!   same thresholds.
//!
//! An unsafe line is detected when some finding has the expected class; a
//! benign line is a false positive when there is any finding. Lines are
//! reported by number only, so the output never repeats a (fake) credential.
//!
//! Run with `cargo test --test safety_corpus -- --nocapture` to see the
//! figures and the (informational) timings.

mod support;

use self_capsule::core::json::{parse_str, Json};
use self_capsule::core::safety::{scan, FindingClass};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Instant;
use support::capsules;

const MALICIOUS: &str = include_str!("corpus/malicious.txt");
const BENIGN: &str = include_str!("corpus/benign.txt");
const PUBLIC_UNSAFE: &str = include_str!("corpus/public/unsafe.tsv");
const PUBLIC_BENIGN: &str = include_str!("corpus/public/benign.tsv");

const MIN_DETECTION: f64 = 0.95;
const MAX_FALSE_POSITIVES: f64 = 0.02;

/// (field, clean default) for every slot of [`capsule_value`].
const FIELDS: &[(&str, &str)] = &[
    ("title", "Maintain a compact self capsule"),
    ("checkpoint", "Poll head every 10 minutes."),
    ("motto", "Safety before speed."),
    ("constraint_value", "receipts only"),
    ("allowed_domain", "diffdelta.io"),
    ("tool", "diffdelta.self.get"),
    (
        "evidence_url",
        "https://diffdelta.io/docs/spec/self-capsule-v0",
    ),
    ("receipt_name", "capsule-spec"),
];

/// Fields beyond the slots of [`FIELDS`]: a note's value, and a JSON
/// array of notes (see [`capsule_value`]).
const NOTE_FIELDS: &[&str] = &["note", "notes"];

struct Sample {
    line: usize,
    /// "secret/vendor_token", "benign/near_miss", "secret" (legacy), ...
    category: String,
    field: String,
    text: String,
    class: Option<FindingClass>,
}

/// The spec's example capsule (support::capsules) made a template: every
/// slot of [`FIELDS`] holds `text` when it is `field`, else the slot's clean
/// default. A tool name and a domain stand in lists, a constraint value in
/// a `no_network_writes` constraint, plus an objective's title and
/// checkpoint, a receipt's name and URL, and the motto; `note` and `notes`
/// replace the capsule's notes.
fn capsule_value(field: &str, text: &str) -> Value {
    let slot = |name: &str| -> Value {
        let (_, default) = FIELDS.iter().find(|(f, _)| *f == name).expect("a slot");
        Value::from(if name == field { text } else { default })
    };
    let mut v = capsules::example();
    v["constraints"][1] = json!({
        "id": "net-writes", "type": "no_network_writes", "value": [slot("constraint_value")]
    });
    v["constraints"][2]["value"] = json!([slot("tool"), "web.read"]);
    v["constraints"][3]["value"] = json!([slot("allowed_domain"), "github.com"]);
    v["objectives"][0] = json!({
        "id": "obj-1", "status": "in_progress", "priority": "high",
        "title": slot("title"), "checkpoint": slot("checkpoint")
    });
    v["capabilities"]["tool_allowlist"] = json!([slot("tool"), "diffdelta.self.head"]);
    let receipt = &mut v["pointers"]["receipts"][0];
    receipt["name"] = slot("receipt_name");
    receipt["evidence_url"] = slot("evidence_url");
    v["self_motto"] = slot("motto");
    // A note's value, or several notes of one capsule (a JSON array of
    // `{"key", "value"}`: a credential split over two of them).
    match field {
        "note" => v["pointers"]["notes"] = json!([{"key": "context", "value": text}]),
        "notes" => v["pointers"]["notes"] = serde_json::from_str(text).expect("notes are JSON"),
        _ => {}
    }
    v
}

fn capsule(field: &str, text: &str) -> Json {
    parse_str(&capsule_value(field, text).to_string()).expect("template with sample parses")
}

/// Decodes the corpus escapes: `\u{X..}`, `\t`, `\n`, `\\`.
fn unescape(s: &str, line: usize) -> String {
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
                assert_eq!(chars.next(), Some('{'), "line {line}: expected \\u{{");
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let code = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                out.push(code.unwrap_or_else(|| panic!("line {line}: bad \\u{{{hex}}}")));
            }
            other => panic!("line {line}: unknown escape \\{other:?}"),
        }
    }
    out
}

/// The two line formats: legacy `field\ttext[\tclass]` and public
/// `category\tfield\ttext` (the class is the category's first segment).
#[derive(Clone, Copy, PartialEq)]
enum Format {
    Legacy,
    Public,
}

fn class_named(name: &str, line: usize) -> FindingClass {
    match name {
        "secret" => FindingClass::Secret,
        "injection" => FindingClass::Injection,
        "url" => FindingClass::Url,
        other => panic!("line {line}: unknown class {other:?}"),
    }
}

fn parse_corpus(text: &str, format: Format, labelled: bool) -> Vec<Sample> {
    let mut samples = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = raw.split('\t').collect();
        let expected_cols = if format == Format::Public || labelled {
            3
        } else {
            2
        };
        assert_eq!(cols.len(), expected_cols, "line {line}: wrong column count");
        let (category, field, text, class) = match format {
            Format::Legacy => {
                let class = labelled.then(|| class_named(cols[2], line));
                let category = if labelled { cols[2] } else { "benign" };
                (category, cols[0], cols[1], class)
            }
            Format::Public => {
                let class = labelled
                    .then(|| class_named(cols[0].split('/').next().unwrap_or_default(), line));
                (cols[0], cols[1], cols[2], class)
            }
        };
        assert!(
            FIELDS.iter().any(|(f, _)| *f == field) || NOTE_FIELDS.contains(&field),
            "line {line}: unknown field"
        );
        samples.push(Sample {
            line,
            category: category.to_string(),
            field: field.to_string(),
            text: unescape(text, line),
            class,
        });
    }
    samples
}

/// The template with eight objectives whose titles and checkpoints are taken
/// from the benign corpus, near the free tier's 4096-byte cap.
fn full_size_capsule(benign: &[Sample]) -> (Json, usize) {
    // Consecutive samples of a field joined up to the field's length cap.
    let pick = |field: &str, max: usize| -> Vec<String> {
        let texts: Vec<&str> = benign
            .iter()
            .filter(|s| s.field == field)
            .map(|s| s.text.as_str())
            .collect();
        texts
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let joined = texts[i..].join(" ");
                joined.chars().take(max).collect()
            })
            .collect()
    };
    let (titles, checkpoints) = (pick("title", 120), pick("checkpoint", 200));
    let objectives: Vec<Value> = (0..8)
        .map(|i| {
            json!({
                "id": format!("obj-{i}"),
                "status": "open",
                "title": titles[i * 3 % titles.len()],
                "checkpoint": checkpoints[i * 5 % checkpoints.len()],
            })
        })
        .collect();
    let mut value = capsule_value("title", FIELDS[0].1);
    value["objectives"] = Value::Array(objectives);
    let text = value.to_string();
    (parse_str(&text).expect("parses"), text.len())
}

fn pct(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// (hits, total) per category; a hit is a detection for unsafe samples and a
/// false positive for benign ones.
type Tally = BTreeMap<String, (usize, usize)>;

fn tally(tally: &mut Tally, key: &str, hit: bool) {
    let entry = tally.entry(key.to_string()).or_default();
    entry.1 += 1;
    entry.0 += usize::from(hit);
}

fn print_tally(label: &str, tally: &Tally) {
    for (category, (hit, total)) in tally {
        println!(
            "  {label} {category:<30} {hit:>4}/{total:<4} = {:5.1}%",
            100.0 * pct(*hit, *total)
        );
    }
}

/// Scans both sides of one corpus, prints the rates, and returns failures
/// of the thresholds (overall and per class).
fn measure(name: &str, unsafe_samples: &[Sample], benign: &[Sample]) -> Vec<String> {
    let mut detected = Tally::new();
    let mut per_class = Tally::new();
    let mut missed = Vec::new();
    for s in unsafe_samples {
        let class = s.class.expect("labelled");
        let hit = scan(&capsule(&s.field, &s.text))
            .iter()
            .any(|f| f.class == class);
        tally(&mut detected, &s.category, hit);
        tally(
            &mut per_class,
            s.category.split('/').next().unwrap_or_default(),
            hit,
        );
        if !hit {
            missed.push(s.line);
        }
    }
    let mut flagged = Tally::new();
    let mut false_positives = Vec::new();
    for s in benign {
        let findings = scan(&capsule(&s.field, &s.text));
        tally(&mut flagged, &s.category, !findings.is_empty());
        if !findings.is_empty() {
            let rules: Vec<_> = findings.iter().map(|f| f.rule).collect();
            false_positives.push(format!("{} ({})", s.line, rules.join(",")));
        }
    }
    let detection = pct(unsafe_samples.len() - missed.len(), unsafe_samples.len());
    let fp_rate = pct(false_positives.len(), benign.len());
    println!("safety corpus: {name}");
    print_tally("detected  ", &detected);
    print_tally("detected  ", &per_class);
    print_tally("false pos.", &flagged);
    println!(
        "  detection  {}/{} = {:.1}%",
        unsafe_samples.len() - missed.len(),
        unsafe_samples.len(),
        100.0 * detection
    );
    println!(
        "  false pos. {}/{} = {:.1}%",
        false_positives.len(),
        benign.len(),
        100.0 * fp_rate
    );
    println!("  missed unsafe lines: {missed:?}");
    println!("  false-positive benign lines: {false_positives:?}");

    let mut failures = Vec::new();
    if detection < MIN_DETECTION {
        failures.push(format!("{name}: detection {:.1}%", 100.0 * detection));
    }
    for (class, (hit, total)) in &per_class {
        if pct(*hit, *total) < MIN_DETECTION {
            failures.push(format!(
                "{name}: {class} detection {:.1}%",
                100.0 * pct(*hit, *total)
            ));
        }
    }
    if fp_rate > MAX_FALSE_POSITIVES {
        failures.push(format!("{name}: false positives {:.1}%", 100.0 * fp_rate));
    }
    failures
}

#[test]
fn corpus_detection_and_false_positive_rates() {
    // Informational timings: first scan compiles the automata.
    let clean = capsule("title", FIELDS[0].1);
    let t = Instant::now();
    let baseline = scan(&clean);
    let cold = t.elapsed();
    assert!(baseline.is_empty(), "template must be clean: {baseline:?}");

    let public_unsafe = parse_corpus(PUBLIC_UNSAFE, Format::Public, true);
    let public_benign = parse_corpus(PUBLIC_BENIGN, Format::Public, false);
    let malicious = parse_corpus(MALICIOUS, Format::Legacy, true);
    let benign = parse_corpus(BENIGN, Format::Legacy, false);
    assert!(
        public_unsafe.len() >= 500 && public_benign.len() >= 500,
        "public corpus too small"
    );
    assert!(
        malicious.len() >= 150 && benign.len() >= 150,
        "legacy corpus too small"
    );

    let mut failures = measure("public", &public_unsafe, &public_benign);
    failures.extend(measure("legacy", &malicious, &benign));

    // Warm timing over a full-size (about 4 KB) clean capsule.
    let (big, bytes) = full_size_capsule(&benign);
    assert!(scan(&big).is_empty(), "full-size capsule must be clean");
    let runs = 200;
    let t = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(scan(std::hint::black_box(&big)));
    }
    println!(
        "  timing: first scan (compile) {:?}, warm {:?} per {bytes}-byte capsule",
        cold,
        t.elapsed() / runs
    );

    assert!(
        failures.is_empty(),
        "below {:.0}% detection or above {:.0}% false positives: {failures:?}",
        100.0 * MIN_DETECTION,
        100.0 * MAX_FALSE_POSITIVES
    );
}
