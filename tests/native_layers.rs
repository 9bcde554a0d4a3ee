//! The native layers stack one way: `core` uses none of the shells,
//! `client` uses `core` but never the command line (`cli`) or the Worker,
//! and `cli` sits on `client`. Read from the source (`crate::…` paths), so a
//! shortcut from a lower layer into a higher one fails here, not in review.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
}

/// Whether `code` holds `needle` as a whole path segment (`crate::cli`
/// is not in `crate::client`).
fn names(code: &str, needle: &str) -> bool {
    code.match_indices(needle).any(|(i, _)| {
        !code[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Every file of `layer` (a directory under src/) naming one of `forbidden`.
fn uses(layer: &str, forbidden: &[&str]) -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(layer);
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(
        files.len() > 5,
        "src/{layer} has only {} files?",
        files.len()
    );
    let mut found = Vec::new();
    for (path, text) in files {
        for f in forbidden {
            let needle = format!("crate::{f}");
            if text
                .lines()
                .any(|l| names(l.split("//").next().unwrap_or(""), &needle))
            {
                found.push(format!("{} uses {needle}", path.display()));
            }
        }
    }
    found
}

#[test]
fn core_uses_no_shell() {
    let found = uses("core", &["client", "cli", "worker"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn client_never_uses_the_command_line_or_the_worker() {
    let found = uses("client", &["cli", "worker"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_command_line_does_not_reach_into_the_worker() {
    let found = uses("cli", &["worker"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_forbidden_use_is_found() {
    // The check itself: src/cli does use the client.
    assert!(!uses("cli", &["client"]).is_empty());
}

#[test]
fn each_worker_crate_is_glue_over_its_own_feature() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("workers");
    let mut crates: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert_eq!(crates, ["entry", "extras", "write"]);
    for name in crates {
        // The root library with this Worker's feature alone: a second
        // Worker's feature would compile that Worker's code into this one.
        let manifest = std::fs::read_to_string(root.join(&name).join("Cargo.toml")).unwrap();
        let dep = manifest
            .lines()
            .find(|l| l.starts_with("self-capsule = "))
            .unwrap_or_else(|| panic!("workers/{name}: no self-capsule dependency"));
        assert!(
            dep.contains("default-features = false")
                && dep.contains(&format!("features = [\"{name}\"]")),
            "workers/{name}: {dep}"
        );
        // Its code only names the runtime's entry points in the Worker layer.
        let lib = std::fs::read_to_string(root.join(&name).join("src/lib.rs")).unwrap();
        for (i, _) in lib.match_indices("self_capsule::") {
            assert!(
                lib[i..].starts_with("self_capsule::worker"),
                "workers/{name}/src/lib.rs reaches past the Worker layer"
            );
        }
    }
}
