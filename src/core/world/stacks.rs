//! The stack map: a dependency name (a capsule's `watch.stacks`) to the
//! ddv1 sources that track it. The upstream deleted its own map, so the last
//! one it published is committed here (`stacks.json`, in the upstream's
//! schema); an operator may serve a newer one in the same schema.

use super::ddv1::Malformed;
use crate::core::json::{self, Json};
use std::collections::BTreeMap;

/// The committed map's text.
pub const COMMITTED: &str = include_str!("stacks.json");

/// Dependency names (lowercase) to source ids (sorted, deduplicated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stacks {
    /// By lowercase name.
    pub names: BTreeMap<String, Vec<String>>,
}

impl Stacks {
    /// Reads `{"dependencies": {name: {"sources": [id, …]}}}`.
    pub fn parse(v: &Json) -> Result<Stacks, Malformed> {
        let deps = v
            .get("dependencies")
            .and_then(Json::as_object)
            .ok_or_else(|| Malformed("stacks.json has no dependencies object".into()))?;
        let mut names = BTreeMap::new();
        for (name, entry) in deps {
            let mut ids: Vec<String> = entry
                .get("sources")
                .and_then(Json::as_array)
                .ok_or_else(|| Malformed(format!("stacks.json {name}: no sources array")))?
                .iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect();
            ids.sort();
            ids.dedup();
            names.insert(name.to_lowercase(), ids);
        }
        Ok(Stacks { names })
    }

    /// The committed map (read once per process).
    pub fn committed() -> &'static Stacks {
        static MAP: std::sync::OnceLock<Stacks> = std::sync::OnceLock::new();
        MAP.get_or_init(|| {
            let v = json::parse(COMMITTED.as_bytes()).expect("the committed stacks.json is JSON");
            Stacks::parse(&v).expect("the committed stacks.json is a stack map")
        })
    }

    /// The sources `name` maps to (matched after lowercasing, nothing else).
    pub fn sources(&self, name: &str) -> Option<&[String]> {
        self.names.get(&name.to_lowercase()).map(Vec::as_slice)
    }
}
