//! Structured logging: one JSON object per line, so `wrangler tail` and Logpush
//! can filter on fields. Callers pass only identifiers, counts and codes, never
//! capsule text, signatures or request bodies.

use serde_json::{Map, Value};
use worker::console_log;

/// Logs `{"event": name, k: v, ...}` with string fields.
pub fn event(name: &str, fields: &[(&str, &str)]) {
    let mut m = Map::new();
    m.insert("event".into(), Value::from(name));
    for (k, v) in fields {
        m.insert((*k).into(), Value::from(*v));
    }
    line(&Value::Object(m));
}

/// Logs an already-built JSON value as one line.
pub fn line(v: &Value) {
    console_log!("{}", v);
}

/// Logs a line that is already JSON text.
#[cfg(feature = "worker")]
pub fn line_str(s: &str) {
    console_log!("{}", s);
}
