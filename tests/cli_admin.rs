//! `selfcap admin stats` (the binary) against a stand-in of `GET
//! /api/v1/admin/stats` on loopback that answers with the core's own body
//! (`Totals::body`, what the route serves): the token sent as a bearer
//! credential, the totals printed one figure a line or as the body with
//! `--json`; a refused token exits 6 and a deployment without the route
//! exits 7. The rest of `selfcap admin` runs against the Worker in
//! tests/e2e/cli_admin.test.mjs.

use self_capsule::core::operator::stats::Totals;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::mpsc;

const TOKEN: &str = "op-5e1fca5e1fca5e1fca5e1fca5e1fca5e1fca";
const NOW_MS: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z

/// Serves one request with `status` and `body`; the request line and its
/// `authorization` header come back on the channel.
fn stand_in(status: u16, body: String) -> (String, mpsc::Receiver<(String, Option<String>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let mut auth = None;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).unwrap();
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("authorization") {
                    auth = Some(v.trim().to_owned());
                }
            }
        }
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        tx.send((line.trim().to_owned(), auth)).unwrap();
    });
    (url, rx)
}

fn admin_stats(url: &str, token: &str, json: bool) -> Output {
    let home = std::env::temp_dir().join(format!("selfcap-cli-admin-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mut args = vec!["--url", url, "--retries", "0", "admin", "stats"];
    if json {
        args.push("--json");
    }
    Command::new(env!("CARGO_BIN_EXE_selfcap"))
        .args(&args)
        .env("HOME", &home)
        .env_remove("SELFCAP_HOME")
        .env_remove("SELFCAP_STATE_DIR")
        .env_remove("SELFCAP_AGENT")
        .env("SELFCAP_ADMIN_TOKEN", token)
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .expect("run selfcap")
}

fn totals() -> serde_json::Value {
    let t = Totals {
        agents: 7,
        pro: 2,
        plus: 1,
        shards: 16,
        ..Totals::default()
    };
    t.body(NOW_MS)
}

#[test]
fn stats_sends_the_token_and_prints_the_totals() {
    let body = totals();
    let (url, seen) = stand_in(200, body.to_string());
    let out = admin_stats(&url, TOKEN, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (line, auth) = seen.recv().unwrap();
    assert_eq!(line, "GET /api/v1/admin/stats HTTP/1.1");
    assert_eq!(auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    let figure = |path: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(path).filter(|r| r.starts_with(' ')))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{path} not printed:\n{stdout}"))
            .to_owned()
    };
    assert_eq!(figure("agents.total"), "7");
    assert_eq!(figure("agents.by_tier.free"), "4");
    assert_eq!(figure("agents.by_tier.pro"), "2");
    assert_eq!(figure("as_of"), "2026-02-10T00:00:00Z");
    assert!(!stdout.contains(TOKEN));

    let (url, _) = stand_in(200, body.to_string());
    let out = admin_stats(&url, TOKEN, true);
    assert_eq!(out.status.code(), Some(0));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, body);
}

#[test]
fn a_refused_token_exits_6_and_a_deployment_without_the_route_exits_7() {
    let refused = serde_json::json!({"error": "admin_auth_invalid",
        "detail": "the bearer token is not this deployment's operator token"});
    let (url, _) = stand_in(403, refused.to_string());
    let wrong = "op-0000000000000000000000000000000000000000";
    let out = admin_stats(&url, wrong, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("admin_auth_invalid"), "{stderr}");
    assert!(!stderr.contains(wrong), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    let (url, _) = stand_in(404, r#"{"error":"not_found"}"#.to_owned());
    let out = admin_stats(&url, TOKEN, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(stderr.contains("operator API is off"), "{stderr}");
}
