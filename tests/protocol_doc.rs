//! Keeps the reason-code table in docs/PROTOCOL.md identical to the one in
//! `src/core/reason.rs` (the single source of truth). Regenerate with
//! `SELFCAP_REGEN_DOCS=1 cargo test --test protocol_doc`.

use self_capsule::core::reason::ReasonCode;
use std::path::PathBuf;

const BEGIN: &str = "<!-- reason-codes:begin";
const END: &str = "<!-- reason-codes:end -->";

fn table() -> String {
    let mut t = String::from("\n| reason code | HTTP | class | bot action |\n|---|---:|---|---|\n");
    for &c in ReasonCode::ALL {
        let class = serde_json::to_value(c.class()).unwrap();
        t.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            c.as_str(),
            c.http_status(),
            class.as_str().unwrap(),
            c.bot_action()
        ));
    }
    t
}

#[test]
fn protocol_doc_lists_every_reason_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).expect("begin marker");
    let start = start + doc[start..].find("-->").unwrap() + 3;
    let end = doc.find(END).expect("end marker");
    let want = table();
    if std::env::var("SELFCAP_REGEN_DOCS").is_ok_and(|v| v == "1") {
        let updated = format!("{}{}{}", &doc[..start], want, &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        &doc[start..end],
        want,
        "docs/PROTOCOL.md reason table is stale"
    );
}
