//! `canon` and `cursor`: the RFC 8785 bytes and the cursor of any JSON
//! document, computed by the core exactly as the service computes them.

use crate::cli::print::{emit, emit_bytes, print_json};
use crate::cli::{read_json, JsonOut};
use crate::client::Error;
use crate::core::jcs;
use std::io::IsTerminal;
use std::path::PathBuf;

/// `canon [FILE|-]`: the canonical bytes; a newline only on a terminal, so
/// a pipe gets exactly the bytes that are hashed and signed.
pub(crate) fn canon(file: Option<&PathBuf>) -> Result<(), Error> {
    let doc = read_json(file)?;
    let mut bytes = jcs::canonical_bytes(&doc);
    if std::io::stdout().is_terminal() {
        bytes.push(b'\n');
    }
    emit_bytes(&bytes);
    Ok(())
}

/// `cursor [FILE|-]`: `sha256:` + the hex SHA-256 of the canonical bytes.
pub(crate) fn cursor(file: Option<&PathBuf>, out: JsonOut) -> Result<(), Error> {
    let doc = read_json(file)?;
    let canonical = jcs::canonical_bytes(&doc);
    let cursor = jcs::cursor_of_canonical(&canonical);
    if out.json {
        print_json(&serde_json::json!({"cursor": cursor, "bytes": canonical.len()}));
    } else {
        emit(&format!("{cursor}\n"));
    }
    Ok(())
}
