//! The rule of every generator test (docs/GENERATED.md): with
//! `SELFCAP_REGEN=1` the test writes the files it generates; without it, it
//! fails when a committed file is not byte for byte what it would write.

use std::path::{Path, PathBuf};

/// Whether this run writes the generated files (`SELFCAP_REGEN=1`).
pub fn regen() -> bool {
    std::env::var("SELFCAP_REGEN").is_ok_and(|v| v == "1")
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes `fresh` to `path` when regenerating (if it differs); otherwise
/// fails unless the committed file is exactly `fresh`. `cargo_test` is the cargo test command
/// that regenerates just this file, for the message.
pub fn check_or_write(path: &Path, fresh: &str, cargo_test: &str) {
    let shown = path.strip_prefix(root()).unwrap_or(path).display();
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if regen() {
        // Only when it changed: a new mtime would rebuild what embeds it.
        if committed != fresh {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            }
            std::fs::write(path, fresh).unwrap_or_else(|e| panic!("write {shown}: {e}"));
        }
        return;
    }
    assert!(
        committed == fresh,
        "{shown} is stale ({}): run `npm run regen` (or `SELFCAP_REGEN=1 {cargo_test}`); see \
         docs/GENERATED.md",
        first_difference(&committed, fresh)
    );
}

/// Where two texts first differ, by line, for the failure message.
fn first_difference(committed: &str, fresh: &str) -> String {
    let show = |line: Option<&str>| match line {
        None => "(end of file)".to_string(),
        Some(l) => format!("{:?}", l.chars().take(120).collect::<String>()),
    };
    let (mut old, mut new) = (committed.lines(), fresh.lines());
    let mut n = 1;
    loop {
        match (old.next(), new.next()) {
            (None, None) => return "they differ only in line endings".into(),
            (a, b) if a != b => return format!("line {n} is {} but would be {}", show(a), show(b)),
            _ => n += 1,
        }
    }
}
