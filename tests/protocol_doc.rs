//! Keeps the reason-code table in docs/PROTOCOL.md identical to the one in
//! `src/core/reason.rs` (the single source of truth). Regenerate with
//! `npm run regen`, or `SELFCAP_REGEN=1 cargo test --test protocol_doc`
//! (docs/GENERATED.md).

mod support;

use self_capsule::core::reason::ReasonCode;
use support::generated::{check_or_write, root};

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
    let path = root().join("docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).expect("begin marker");
    let start = start + doc[start..].find("-->").unwrap() + 3;
    let end = doc.find(END).expect("end marker");
    let fresh = format!("{}{}{}", &doc[..start], table(), &doc[end..]);
    check_or_write(&path, &fresh, "cargo test --test protocol_doc");
}
