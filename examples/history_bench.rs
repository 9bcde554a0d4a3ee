//! Times the history work natively and (built for `wasm32-wasip1`, run under
//! Node's WASI) inside V8, the engine a Worker runs in:
//!
//! - `append`: what a Durable Object adds to each accepted write (seal the
//!   entry and the head, verify the new entry incrementally);
//! - `verify_export/N`: a full offline verification of an N-entry bundle
//!   (what verify.json would cost per read if it were computed on the fly);
//! - `history_body/20`: building a 20-version history.json page from stored
//!   texts (what a Worker read costs beyond its KV gets).
//!
//! ```sh
//! cargo run --release --example history_bench
//! cargo build --release --example history_bench --target wasm32-wasip1
//! node -e 'const {WASI}=require("node:wasi");const fs=require("node:fs");const w=new WASI({version:"preview1",args:["b"]});w.start(new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(process.argv[1])),w.getImportObject()))' target/wasm32-wasip1/release/examples/history_bench.wasm
//! ```
//!
//! Prints one JSON line per case: mean microseconds per operation.

use self_capsule::core::crypto::{write_digest, AgentKey};
use self_capsule::core::history::export::ExportBundle;
use self_capsule::core::history::{
    append, verify_export, HistoryIndex, Keyring, NewVersion, Query, ServiceKey, Viewer,
};
use self_capsule::core::jcs;
use self_capsule::core::json::{parse_str, Json};
use std::hint::black_box;
use std::time::Instant;

const T0: u64 = 1_770_681_600_000;

fn time(name: &str, iters: u32, mut f: impl FnMut()) {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    println!(r#"{{"case":"{name}","iters":{iters},"us_per_op":{us:.1}}}"#);
}

fn capsule(agent: &AgentKey, i: u64) -> Json {
    parse_str(&format!(
        r#"{{"schema_version":"self_capsule_v0","agent_id":"{}","policy":{{"policy_version":"v0","rehydrate_mode":"strict","deny_external_instructions":true,"deny_tool_instructions_in_text":true,"memory_budget":{{"max_rehydrate_tokens":900,"max_objectives":8}}}},"constraints":[{{"id":"no-shell","type":"no_shell","value":true}},{{"id":"allowed-tools","type":"allowed_tools","value":["diffdelta.self.head","diffdelta.self.get","web.read"]}}],"objectives":[{{"id":"rehydrate-v0","status":"in_progress","priority":"high","title":"Maintain a compact self capsule for restart-safe continuity","checkpoint":"Update only on objective state transitions; poll head every 10 minutes."}}],"capabilities":{{"tool_allowlist":["diffdelta.self.head","diffdelta.self.get","web.read"],"feature_flags":["rehydrate_on_start","poll_head_10m"]}},"self_motto":"Rehydrate from primitives. Version {i}."}}"#,
        agent.agent_id()
    ))
    .unwrap()
}

struct Write {
    capsule: Json,
    cursor: String,
    signature: String,
}

fn main() {
    let agent = AgentKey::from_seed(&[1; 32]);
    let service = ServiceKey::from_seed(&[2; 32]);
    let ring = Keyring::new(Some(&service.public_key()), &[]);
    let public_key = agent.public_key().to_hex();
    let writes: Vec<Write> = (1..=101)
        .map(|i| {
            let c = capsule(&agent, i);
            Write {
                cursor: jcs::cursor(&c),
                signature: hex::encode(agent.sign(&write_digest(&agent.agent_id(), i, &c))),
                capsule: c,
            }
        })
        .collect();
    let mut index: Option<HistoryIndex> = None;
    let mut entries = Vec::new();
    for (i, w) in writes.iter().take(100).enumerate() {
        let out = append(
            index.take(),
            NewVersion {
                agent_id: agent.agent_id().as_str(),
                seq: i as u64 + 1,
                cursor: &w.cursor,
                prev_cursor: entries
                    .last()
                    .map(|e: &self_capsule::core::history::Entry| e.cursor.as_str()),
                capsule: &w.capsule,
                public_key: &public_key,
                signature: &w.signature,
                accepted_at_ms: T0,
                // The report measures everything itself (a write check's
                // `WriteChecked` spares it the schema, scan and signature).
                checked: None,
                keys: None,
            },
            &service,
            &ring,
            100,
            i as u64 + 1,
        );
        entries.push(out.entry);
        index = Some(out.index);
    }
    let index = index.unwrap();
    println!(
        r#"{{"case":"sizes","entry_bytes":{},"index_bytes_100":{}}}"#,
        entries[0].stored_text().len(),
        serde_json::to_string(&index).unwrap().len()
    );

    // One more append onto a full 100-entry window (prunes one).
    let last = &writes[100];
    time("append/onto_100", 200, || {
        let out = append(
            Some(index.clone()),
            NewVersion {
                agent_id: agent.agent_id().as_str(),
                seq: 101,
                cursor: &last.cursor,
                prev_cursor: Some(&entries[99].cursor),
                capsule: &last.capsule,
                public_key: &public_key,
                signature: &last.signature,
                accepted_at_ms: T0,
                // The report measures everything itself (a write check's
                // `WriteChecked` spares it the schema, scan and signature).
                checked: None,
                keys: None,
            },
            &service,
            &ring,
            100,
            101,
        );
        black_box(out);
    });

    for n in [1usize, 10, 100] {
        let kept = &entries[100 - n..];
        let mut idx = index.clone();
        idx.head.first_sequence = kept[0].sequence;
        idx.head.first_previous_hash = kept[0].previous_hash.clone();
        let bundle = serde_json::to_string(&ExportBundle::new(&idx, kept, &ring)).unwrap();
        let iters = (2000 / n as u32).max(5);
        time(&format!("verify_export/{n}_entries"), iters, || {
            let v = parse_str(&bundle).unwrap();
            black_box(verify_export(&v));
        });
    }

    let texts: Vec<String> = entries.iter().map(|e| e.stored_text()).collect();
    let index_text = serde_json::to_string(&index).unwrap();
    time("history_body/parse_index_100_and_page_20", 500, || {
        let idx: HistoryIndex = serde_json::from_str(&index_text).unwrap();
        let anyone = Viewer {
            owner: &idx.agent_id,
            reader: None,
            now_ms: 0,
        };
        let sel = idx.select(&Query::default(), &anyone).unwrap();
        let page: Vec<String> = sel
            .sequences
            .iter()
            .map(|s| texts[*s as usize].clone())
            .collect();
        black_box(idx.history_body(&sel, &page));
    });
}
