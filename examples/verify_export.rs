//! Verifies a history export bundle (`GET /self/{id}/export.json`) offline
//! with the core's `verify_export`. (The `selfcap` CLI is meant to grow the
//! same thing; this is the minimal, dependency-free form.)
//!
//! ```sh
//! cargo run --example verify_export -- BUNDLE.json [--keys KEYS.json] [--agent AGENT_ID]
//! ```
//!
//! `--keys`: trust this keyring (the body of `GET /api/v1/self/keys`)
//! instead of the keys inside the bundle. Prints the report as JSON; exits
//! 0 when valid, 1 when not, 2 on usage or read errors.

use self_capsule::core::history::{verify_export_with, Keyring, VerifyOptions};
use self_capsule::core::json::{self, Json};
use std::process::ExitCode;

fn read(path: &str) -> Result<Json, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    json::parse(&bytes).map_err(|e| format!("{path}: {e}"))
}

fn run() -> Result<bool, String> {
    let mut args = std::env::args().skip(1);
    let mut bundle = None;
    let mut opts = VerifyOptions::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keys" => {
                let doc = read(&args.next().ok_or("--keys needs a file")?)?;
                let (ring, problems) = Keyring::from_json(
                    doc.get("keys").unwrap_or(&Json::Null),
                    doc.get("current").and_then(Json::as_str),
                );
                if !problems.is_empty() {
                    return Err(format!("--keys: {}", problems.join("; ")));
                }
                opts.trusted_keys = Some(ring);
            }
            "--agent" => opts.agent_id = Some(args.next().ok_or("--agent needs an id")?),
            _ if bundle.is_none() && !a.starts_with("--") => bundle = Some(a),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    let bundle =
        read(&bundle.ok_or("usage: verify_export BUNDLE.json [--keys KEYS.json] [--agent ID]")?)?;
    opts.now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64);
    let report = verify_export_with(&bundle, &opts);
    println!(
        "{}",
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
    );
    Ok(report.valid)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("verify_export: {e}");
            ExitCode::from(2)
        }
    }
}
