//! Loads the JSON Schemas in `schemas/` into the independent `jsonschema`
//! validator. Cross-file `$ref`s use `$id`s under an `.invalid` host, which
//! the retriever maps to the local files: nothing is ever fetched.

use serde_json::Value;
use std::path::PathBuf;

pub const ID_BASE: &str = "https://selfcapsule.invalid/schemas/";

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

pub fn load(name: &str) -> Value {
    let text =
        std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("schemas/{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("schemas/{name}: {e}"))
}

/// Resolves `$id`s under [`ID_BASE`] to the files in `schemas/`.
pub struct LocalFiles;

impl jsonschema::Retrieve for LocalFiles {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let name = uri
            .as_str()
            .strip_prefix(ID_BASE)
            .ok_or_else(|| format!("refusing to retrieve {uri}: not a local schema"))?;
        let name = name.split('#').next().unwrap_or(name);
        Ok(load(name))
    }
}

/// A draft 2020-12 validator for `schemas/<name>`.
pub fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_retriever(LocalFiles)
        .build(&load(name))
        .unwrap_or_else(|e| panic!("schemas/{name} does not compile: {e}"))
}
