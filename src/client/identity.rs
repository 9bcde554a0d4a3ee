//! Which key speaks for this identity, and the secret files behind it.
//!
//! An agent's id is the SHA-256 of its **genesis** key and never changes;
//! after a key rotation (docs/PROTOCOL.md §14) another key signs for it. So
//! the agent id comes from `identity.json`, not from the key: the key file
//! holds the *current* key, and `identity.json` says whose it is:
//!
//! - `{"agent_id", "public_key"}`: the genesis key (SHA-256 of `key`'s
//!   public half is `agent_id`), as every identity starts;
//! - `{"agent_id", "public_key", "key_index", "genesis_public_key"}`: after a
//!   rotation, `public_key` is the current key (the one in `key`),
//!   `key_index` its place in the key log (≥ 1), and `genesis_public_key`
//!   the key whose hash is the agent id (what `bootstrap` registers).
//!
//! A key that fits neither (copied into the wrong directory) is refused.
//!
//! `next.key` is the pre-committed next key: written by `keygen`, committed
//! by digest in the inception, revealed by the next rotation. Only the key
//! commands load it (`rotate`, `keys init`, and `selfcap mcp` only inside a
//! `self_rotate` call): writing (`put`, `publish`, every MCP write tool)
//! never reads it, so a leak of the current key through a write path never
//! includes the key that can rotate.
//!
//! The files of a key swap in flight (`next.key.new`, `key.new`,
//! `next.key.recommit`, and the `rotation.json` journal) are named here
//! too, beside the key files they become, so that loading a key can tell a
//! half-applied swap from a key copied into the wrong directory; the swap
//! itself is `keys`'.

use super::error::Error;
use super::state::{self, StateDir};
use crate::core::crypto::{AgentId, AgentKey, PublicKey};
use crate::core::json::Json;
use crate::core::key_log::Digest;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::Path;

/// The pre-committed next key's seed (64 hex, mode 0600): loaded only by
/// the key commands.
pub const NEXT_KEY_FILE: &str = "next.key";
/// A next key generated for a rotation or recovery in flight: written and
/// synced before anything is submitted, promoted to `next.key` once the
/// service accepted the event that commits it.
pub const NEXT_KEY_NEW_FILE: &str = "next.key.new";
/// A recommit's next key, pending until the recommit matures (or dropped
/// when a rotation cancels it).
pub const NEXT_KEY_RECOMMIT_FILE: &str = "next.key.recommit";
/// A recovery's new current key, until it is swapped into `key`.
pub const KEY_NEW_FILE: &str = "key.new";
/// A key event signed and not yet seen accepted (`keys::PendingEvent`):
/// while it is there, the key files may be mid-swap.
pub const ROTATION_FILE: &str = "rotation.json";

/// The key that signs for an agent: the identity's current key and the
/// agent id it speaks for (which is not its own hash after a rotation).
/// Its `Debug` shows no key material (`AgentKey`'s does not).
#[derive(Debug)]
pub struct Signer {
    agent_id: AgentId,
    key: AgentKey,
    key_index: u64,
}

impl Signer {
    /// The genesis key signing for its own agent id.
    pub fn genesis(key: AgentKey) -> Signer {
        Signer {
            agent_id: key.agent_id(),
            key,
            key_index: 0,
        }
    }

    /// `key` signing for `agent_id` as its `key_index`th key.
    pub(crate) fn from_parts(agent_id: AgentId, key: AgentKey, key_index: u64) -> Signer {
        Signer {
            agent_id,
            key,
            key_index,
        }
    }

    /// The agent id (SHA-256 of the genesis key, whichever key signs).
    pub fn agent_id(&self) -> AgentId {
        self.agent_id.clone()
    }

    /// The current key's public half.
    pub fn public_key(&self) -> PublicKey {
        self.key.public_key()
    }

    /// The current key's place in the key log (0: the genesis key).
    pub fn key_index(&self) -> u64 {
        self.key_index
    }

    /// The current key itself (for signing key events and claims).
    pub fn key(&self) -> &AgentKey {
        &self.key
    }

    /// A PUT envelope for `capsule` at `seq`: signed by the current key, as
    /// the agent.
    pub fn sign_envelope(&self, seq: u64, capsule: &Json) -> Json {
        self.key.sign_envelope_as(&self.agent_id, seq, capsule)
    }
}

/// identity.json: the public half of the identity (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityFile {
    /// The agent id.
    pub agent_id: String,
    /// The current key (hex).
    pub public_key: String,
    /// The current key's index in the key log; absent for the genesis key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_index: Option<u64>,
    /// The genesis key (hex), once another key is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genesis_public_key: Option<String>,
    /// SHA-256 (hex) of next.key's public key: what the inception commits
    /// (or the last event committed), so a write can build the inception
    /// without loading next.key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_key_digest: Option<String>,
    /// SHA-256 (hex) of the operator's recovery key, for the inception to
    /// commit (`keygen --recovery-digest`); never the key itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_key_digest: Option<String>,
}

impl IdentityFile {
    /// The identity of a genesis key.
    pub fn genesis(key: &AgentKey) -> IdentityFile {
        IdentityFile {
            agent_id: key.agent_id().to_string(),
            public_key: key.public_key().to_hex(),
            key_index: None,
            genesis_public_key: None,
            next_key_digest: None,
            recovery_key_digest: None,
        }
    }

    /// The key `bootstrap` registers: the genesis key, whose hash is the id.
    pub fn genesis_key_hex(&self) -> &str {
        self.genesis_public_key
            .as_deref()
            .unwrap_or(&self.public_key)
    }
}

impl StateDir {
    /// Creates the directory (0700) with a new identity: `key` (the genesis
    /// key), `next` as next.key (both 0600, never overwriting a key) and
    /// identity.json.
    pub fn create(&self, key: &AgentKey, next: Option<&AgentKey>) -> Result<(), Error> {
        let key_path = self.file(state::KEY_FILE);
        if key_path.exists() {
            return Err(Error::local(format!(
                "{} already holds a key; refusing to overwrite it",
                self.path().display()
            )));
        }
        state::create_private_dir(self.path())?;
        create_secret(&key_path, key)?;
        let mut identity = IdentityFile::genesis(key);
        if let Some(next) = next {
            create_secret(&self.file(NEXT_KEY_FILE), next)?;
            identity.next_key_digest = Some(Digest::of_key(&next.public_key()).to_hex());
        }
        self.save_identity(&identity)
    }

    /// identity.json, if present.
    pub fn identity(&self) -> Result<Option<IdentityFile>, Error> {
        self.read_json(state::IDENTITY_FILE)
    }

    /// Replaces identity.json (atomically).
    pub fn save_identity(&self, id: &IdentityFile) -> Result<(), Error> {
        self.write_json(state::IDENTITY_FILE, id)
    }

    /// Loads the current key and the agent it signs for. Refuses a
    /// malformed key file, one readable by group or others, and one that is
    /// neither the genesis key of identity.json's agent nor the current key
    /// identity.json records.
    pub fn load_key(&self) -> Result<Signer, Error> {
        let path = self.file(state::KEY_FILE);
        let Some(key) = self.read_secret(state::KEY_FILE)? else {
            return Err(Error::local(format!(
                "no key file {}: run `selfcap keygen` (or pass --state-dir)",
                path.display()
            )));
        };
        let Some(identity) = self.identity()? else {
            return Ok(Signer::genesis(key));
        };
        if identity.agent_id == key.agent_id().as_str() {
            return Ok(Signer::genesis(key));
        }
        match (
            AgentId::parse(&identity.agent_id),
            identity.key_index,
            identity.public_key == key.public_key().to_hex(),
        ) {
            (Some(agent_id), Some(key_index), true) if key_index > 0 => {
                Ok(Signer::from_parts(agent_id, key, key_index))
            }
            // A crash in the middle of a key swap leaves exactly this: the
            // command that finishes it is the one to run.
            _ if self.file(ROTATION_FILE).is_file() => Err(bad_key(
                &path,
                "a key event is half applied (rotation.json): run `selfcap rotate` (or the \
                 `recover`/`recommit` it names) to finish it",
            )),
            _ => Err(bad_key(
                &path,
                "it does not belong to the agent in identity.json",
            )),
        }
    }

    /// The pre-committed next key, if this identity has one. For the key
    /// commands only.
    pub fn load_next_key(&self) -> Result<Option<AgentKey>, Error> {
        self.read_secret(NEXT_KEY_FILE)
    }

    /// A key seed file by name (`None` when absent), with the key file's
    /// checks: 64 hex characters, mode 0600.
    pub fn read_secret(&self, name: &str) -> Result<Option<AgentKey>, Error> {
        read_seed_file(&self.file(name))
    }

    /// Writes a key seed file by name: 0600, synced, renamed into place, and
    /// the directory synced, so it survives a crash before anything that
    /// depends on it is sent. Replaces an existing file of that name.
    pub fn write_secret(&self, name: &str, key: &AgentKey) -> Result<(), Error> {
        let path = self.file(name);
        let tmp = self.file(&format!(".{name}.{}.tmp", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let result = create_secret(&tmp, key).and_then(|_| {
            fs::rename(&tmp, &path).map_err(|e| state::io_err("cannot write", &path, e))
        });
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result?;
        self.sync_dir()
    }

    /// Removes a file by name (absent is fine).
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        let path = self.file(name);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                Err(state::io_err("cannot remove", &path, e))
            }
            _ => Ok(()),
        }
    }

    /// Syncs the directory itself, so renames in it are durable.
    pub fn sync_dir(&self) -> Result<(), Error> {
        #[cfg(unix)]
        {
            fs::File::open(self.path())
                .and_then(|d| d.sync_all())
                .map_err(|e| state::io_err("cannot sync", self.path(), e))?;
        }
        Ok(())
    }
}

/// Creates `path` (which must not exist) holding `key`'s seed as hex, mode
/// 0600, synced.
fn create_secret(path: &Path, key: &AgentKey) -> Result<(), Error> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .map_err(|e| state::io_err("cannot create", path, e))?;
    f.write_all(format!("{}\n", hex::encode(key.seed())).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| state::io_err("cannot write", path, e))
}

/// Reads a seed file: `None` when absent; an error when it is malformed or
/// accessible by group or others.
pub fn read_seed_file(path: &Path) -> Result<Option<AgentKey>, Error> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == ErrorKind::InvalidData => {
            return Err(bad_key(path, "not text"));
        }
        Err(e) => return Err(state::io_err("cannot read", path, e)),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(path)
            .map_err(|e| state::io_err("cannot stat", path, e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(Error::local(format!(
                "key file {} is accessible by others (mode {:04o}): run `chmod 600 {}`",
                path.display(),
                mode & 0o7777,
                path.display()
            )));
        }
    }
    let hex_seed = text.trim();
    let mut seed = [0u8; 32];
    if hex_seed.len() != 64 || hex::decode_to_slice(hex_seed, &mut seed).is_err() {
        return Err(bad_key(
            path,
            "expected 64 hex characters (the 32-byte Ed25519 seed)",
        ));
    }
    Ok(Some(AgentKey::from_seed(&seed)))
}

fn bad_key(path: &Path, why: &str) -> Error {
    Error::local(format!("bad key file {}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "selfcap-identity-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn create_writes_the_next_key_private_and_apart() {
        let dir = tmp("next");
        let s = StateDir::new(&dir);
        let key = AgentKey::from_seed(&[7u8; 32]);
        let next = AgentKey::from_seed(&[8u8; 32]);
        s.create(&key, Some(&next)).unwrap();
        #[cfg(unix)]
        assert_eq!(mode(&dir.join(NEXT_KEY_FILE)), 0o600);
        let signer = s.load_key().unwrap();
        assert_eq!(signer.agent_id(), key.agent_id());
        assert_eq!(signer.key_index(), 0);
        assert_eq!(
            s.load_next_key().unwrap().unwrap().public_key(),
            next.public_key()
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rotated_identity_signs_as_its_agent_with_the_current_key() {
        let dir = tmp("rotated");
        let s = StateDir::new(&dir);
        let genesis = AgentKey::from_seed(&[1u8; 32]);
        let current = AgentKey::from_seed(&[2u8; 32]);
        s.create(&genesis, None).unwrap();
        s.write_secret(state::KEY_FILE, &current).unwrap();
        // The key no longer hashes to the agent, and identity.json does not
        // (yet) say it is the current key: refused.
        let e = s.load_key().unwrap_err().to_string();
        assert!(e.contains("does not belong"), "{e}");
        s.save_identity(&IdentityFile {
            agent_id: genesis.agent_id().to_string(),
            public_key: current.public_key().to_hex(),
            key_index: Some(1),
            genesis_public_key: Some(genesis.public_key().to_hex()),
            next_key_digest: None,
            recovery_key_digest: None,
        })
        .unwrap();
        let signer = s.load_key().unwrap();
        assert_eq!(signer.agent_id(), genesis.agent_id());
        assert_eq!(signer.key_index(), 1);
        let env = signer.sign_envelope(3, &Json::Object(vec![]));
        assert_eq!(
            env.get("agent_id").and_then(Json::as_str),
            Some(genesis.agent_id().as_str())
        );
        assert_eq!(
            env.get("public_key")
                .and_then(Json::as_str)
                .map(str::to_owned),
            Some(current.public_key().to_hex())
        );
        #[cfg(unix)]
        assert_eq!(mode(&dir.join(state::KEY_FILE)), 0o600);
        // Another key in the directory is still refused.
        s.write_secret(state::KEY_FILE, &AgentKey::from_seed(&[3u8; 32]))
            .unwrap();
        assert!(s.load_key().is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
