//! The sealed history: `history` (retained versions), `export` (the offline
//! bundle) and `verify` (the chain checked locally by the core; exit 8 when
//! it does not verify).

use crate::cli::print::{emit, emit_bytes, print_json};
use crate::cli::{agent_arg, read_json, reader_client, Global, JsonOut};
use crate::client::{self, Error};
use crate::core::history::{CheckName, Report};
use crate::core::json::Json;
use std::path::PathBuf;

/// `history [AGENT_ID] [--since CURSOR] [--limit N]`: newest first.
pub(crate) fn history(
    g: &Global,
    agent_id: Option<&str>,
    since: Option<&str>,
    limit: Option<u32>,
    out: JsonOut,
) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    let page = c.history(agent.as_ref(), since, limit)?;
    if out.json {
        print_json(&page);
    } else {
        print_history(&page);
    }
    Ok(())
}

/// `export [AGENT_ID]`: export.json exactly as served.
pub(crate) fn export(g: &Global, agent_id: Option<&str>) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    let mut bytes = c.export_raw(agent.as_ref())?;
    bytes.push(b'\n');
    emit_bytes(&bytes);
    Ok(())
}

/// `verify [AGENT_ID] | --export FILE [--keys FILE]`: the report on stdout,
/// warnings on stderr, and an error (exit 8) unless every check passed.
pub(crate) fn verify(
    g: &Global,
    agent_id: Option<&str>,
    export: Option<&PathBuf>,
    keys: Option<&PathBuf>,
    out: JsonOut,
) -> Result<(), Error> {
    let trusted = keys
        .map(|k| {
            client::keyring_of(&read_json(Some(k))?)
                .map_err(|e| Error::Local(format!("{}: {e}", k.display())))
        })
        .transpose()?;
    let (report, bundle) = match export {
        Some(file) => {
            let bundle = read_json(Some(file))?;
            (client::verify_bundle(&bundle, trusted, None), bundle)
        }
        None => {
            let agent = agent_arg(agent_id)?;
            let c = reader_client(g, agent.as_ref())?;
            c.verify_export(agent.as_ref(), trusted)?
        }
    };
    // The key log the export carries (§14), verified with the chain.
    let key_log: Vec<serde_json::Value> = match bundle.get("key_log") {
        Some(Json::Array(records)) => records
            .iter()
            .map(crate::client::keys::event_line_json)
            .collect(),
        _ => Vec::new(),
    };
    // --json is the core's report exactly (the Explorer's wasm prints the
    // same bytes); the key log's events are `selfcap keys --json`.
    if out.json {
        print_json(&report);
    } else {
        print_report(&report);
        print_key_log(&key_log);
    }
    for w in &report.warnings {
        eprintln!("selfcap: warning: {w}");
    }
    if !report.valid {
        let failing: Vec<&str> = report.failing().iter().map(|c| c.as_str()).collect();
        return Err(Error::Unverified(format!(
            "failing checks: {}",
            failing.join(", ")
        )));
    }
    Ok(())
}

fn print_history(page: &serde_json::Value) {
    let s = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "-".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = String::new();
    for v in page["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        if v["withheld"] == true {
            out.push_str(&format!(
                "entry {} withheld (written private; not readable by this reader)\n",
                s(&v["sequence"])
            ));
            continue;
        }
        out.push_str(&format!(
            "seq {} {} accepted {} (entry {})\n",
            s(&v["seq"]),
            s(&v["cursor"]),
            s(&v["accepted_at"]),
            s(&v["sequence"])
        ));
    }
    let shown = page["versions"].as_array().map_or(0, Vec::len);
    out.push_str(&format!(
        "{shown} shown; {} retained, {} pruned, {} writes in all\n",
        s(&page["retained"]),
        s(&page["pruned"]),
        s(&page["total_writes"])
    ));
    if let Some(n) = page["pruned_since"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!(
            "{n} newer version(s) after that cursor were pruned and are not shown\n"
        ));
    }
    if let Some(next) = page["next"].as_str() {
        out.push_str(&format!("more: {next}\n"));
    }
    emit(&out);
}

fn print_report(r: &Report) {
    let level = serde_json::to_value(r.level).unwrap_or_default();
    let mut out = format!(
        "{}: agent {} (level {}; {} entries{}; newest seq {} {})\n",
        if r.valid { "valid" } else { "NOT VALID" },
        r.agent_id,
        level.as_str().unwrap_or("?"),
        r.window.entries,
        r.window
            .length
            .map(|l| format!(" of {l} ever written"))
            .unwrap_or_default(),
        r.seq.map_or("-".into(), |s| s.to_string()),
        r.cursor.as_deref().unwrap_or("-")
    );
    for name in CheckName::ALL {
        let c = r.checks.get(name);
        out.push_str(&format!(
            "  {:<9} {} ({} checked)\n",
            name.as_str(),
            if c.ok { "ok" } else { "FAILED" },
            c.checked
        ));
        for f in &c.failures {
            let at = f.sequence.map_or("head".into(), |s| format!("entry {s}"));
            out.push_str(&format!("    {at}: {}\n", f.detail));
        }
    }
    if !r.disputed.is_empty() {
        let list: Vec<String> = r.disputed.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "  disputed  entries {} (signed by a key its owner rotated out as stolen: in the chain, not the owner's)\n",
            list.join(", ")
        ));
    }
    if !r.withheld.is_empty() {
        let list: Vec<String> = r.withheld.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "  withheld  entries {} (written private: place and seal checked, content not shown)\n",
            list.join(", ")
        ));
    }
    emit(&out);
}

/// The key log's events under the report (nothing without a log).
fn print_key_log(events: &[serde_json::Value]) {
    if events.is_empty() {
        return;
    }
    let mut out = format!("  key log   {} event(s)\n", events.len());
    for e in events {
        let s = |k: &str| e[k].as_str().unwrap_or("-").to_owned();
        out.push_str(&format!(
            "    event {} {} ({}) key {} accepted {}\n",
            e["index"],
            s("type"),
            s("authority"),
            s("public_key"),
            s("accepted_at")
        ));
    }
    emit(&out);
}
