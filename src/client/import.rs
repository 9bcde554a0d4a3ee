//! Importing the identity of the public `@diffdelta/mcp-server`
//! (`~/.diffdelta/identity.json`), so an agent that used it keeps its
//! `agent_id` (and with it its capsule and history) when it moves here.
//!
//! That file holds `{agent_id, public_key_hex, private_key_pem, seq,
//! created_at}`, the key as PKCS#8 PEM (what Node's `crypto` exports). The
//! import refuses a file whose three parts disagree: a wrong key would
//! silently become another agent.

use super::state::{parse_json_file, Location, StateDir};
use super::Error;
use crate::core::crypto::AgentKey;
use ed25519_dalek::pkcs8::DecodePrivateKey;
use std::path::{Path, PathBuf};

/// Where the public server keeps its identity: `$HOME/.diffdelta/identity.json`.
pub fn default_identity_file() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".diffdelta").join("identity.json"))
}

/// Reads and checks an identity file of the public server.
pub fn read_identity_file(path: &Path) -> Result<AgentKey, Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::local(format!("cannot read {}: {e}", path.display())))?;
    let doc = parse_json_file(path, &bytes)?;
    let field = |k: &str| {
        doc.get(k).and_then(|v| v.as_str()).ok_or_else(|| {
            Error::local(format!(
                "{}: no {k} (not a diffdelta identity file)",
                path.display()
            ))
        })
    };
    let pem = field("private_key_pem")?;
    let signing = ed25519_dalek::SigningKey::from_pkcs8_pem(pem).map_err(|e| {
        Error::local(format!(
            "{}: private_key_pem is not an Ed25519 PKCS#8 key: {e}",
            path.display()
        ))
    })?;
    let key = AgentKey::from_seed(&signing.to_bytes());
    if field("public_key_hex")? != key.public_key().to_hex() {
        return Err(Error::local(format!(
            "{}: public_key_hex does not belong to private_key_pem; not imported",
            path.display()
        )));
    }
    if field("agent_id")? != key.agent_id().as_str() {
        return Err(Error::local(format!(
            "{}: agent_id is not the SHA-256 of the public key; not imported",
            path.display()
        )));
    }
    Ok(key)
}

/// Imports the identity in `file` into a new state directory (where `loc`
/// puts a new identity); refuses to overwrite one.
pub fn import_identity(loc: &Location, file: &Path) -> Result<(StateDir, AgentKey), Error> {
    let key = read_identity_file(file)?;
    let dir = StateDir::new(loc.for_new(&key.agent_id())?);
    dir.create(&key, Some(&super::fresh_key()?))?;
    Ok((dir, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    // An identity file's key as Node writes it (PKCS#8 PEM): RFC 8410's
    // example key (section 10.3), kept with the other test fixtures.
    const PEM: &str = include_str!("../../tests/fixtures/rfc8410-ed25519-private-key.txt");

    fn write(name: &str, doc: serde_json::Value) -> PathBuf {
        let p =
            std::env::temp_dir().join(format!("selfcap-import-{name}-{}.json", std::process::id()));
        std::fs::write(&p, doc.to_string()).unwrap();
        p
    }

    #[test]
    fn a_consistent_file_imports_and_an_inconsistent_one_is_refused() {
        // RFC 8410 §10.3's key; its public key is 19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1.
        let key = AgentKey::from_seed(
            &hex::decode("d4ee72dbf913584ad5b6d8f1f769f8ad3afe7c28cbf1d4fbe097a88f44755842")
                .unwrap()
                .try_into()
                .unwrap(),
        );
        assert_eq!(
            key.public_key().to_hex(),
            "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"
        );
        let good = serde_json::json!({
            "agent_id": key.agent_id().as_str(),
            "public_key_hex": key.public_key().to_hex(),
            "private_key_pem": PEM, "seq": 3, "created_at": "2026-01-01T00:00:00.000Z"
        });
        let p = write("good", good.clone());
        assert_eq!(read_identity_file(&p).unwrap().agent_id(), key.agent_id());
        let mut wrong_id = good.clone();
        wrong_id["agent_id"] = "0".repeat(64).into();
        let e = read_identity_file(&write("id", wrong_id))
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent_id"), "{e}");
        let mut wrong_pk = good;
        wrong_pk["public_key_hex"] = "1".repeat(64).into();
        let e = read_identity_file(&write("pk", wrong_pk))
            .unwrap_err()
            .to_string();
        assert!(e.contains("public_key_hex"), "{e}");
        let e = read_identity_file(&write("junk", serde_json::json!({"private_key_pem": "x"})))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PKCS#8"), "{e}");
    }
}
