//! The client's state directory: one directory per identity.
//!
//! ```text
//! $SELFCAP_HOME (default ~/.selfcap)/
//!   <agent_id>/          mode 0700; or any directory given with --state-dir
//!     key                the current Ed25519 secret seed, 64 hex characters, mode 0600;
//!                        never printed (the genesis key until a rotation)
//!     next.key           the pre-committed next key's seed (same form): written by `keygen`,
//!                        committed by the inception, revealed by `rotate`; loaded only by
//!                        the key commands, never by put/publish/mcp (see `identity`)
//!     next.key.new       a next key generated for a rotation or recovery in flight
//!     key.new            a recovery's new current key, until it is swapped into `key`
//!     next.key.recommit  a recommit's next key, kept until the recommit matures
//!     rotation.json      a key event signed and not yet seen accepted (resent as is)
//!     identity.json      {"agent_id", "public_key"} (public); after a rotation also
//!                        "key_index" and "genesis_public_key" (see `identity`)
//!     key_pins.json      the last key log seen per agent: {agent_id: {"length", "head_hash"}}
//!     service.json       what `bootstrap` returned: base_url, head_url, capsule_url, limits
//!     capsule.json       the desired state: edit it freely (or `selfcap set FILE`)
//!     published.json     the last accepted write: {"seq", "cursor", "capsule", "recorded_at"}
//!     head.json          the last head seen and its ETag: {"etag", "head"}
//!     signed.json        the last envelope signed: {"seq", "cursor"} (written before sending)
//!     pending.json       why capsule.json is not published yet (`selfcap mcp`: the last failed
//!                        write's reason codes and retry time); gone once a write is accepted
//! ```
//!
//! The desired capsule is **dirty** when its cursor (SHA-256 of its RFC 8785
//! bytes) differs from `published.json`'s, so formatting changes never count
//! and no flag file can go stale. Every file is written atomically (temp file
//! + rename).
//!
//! `signed.json` keeps the rule that one seq never signs two different
//! capsules (an envelope whose answer was lost stays valid and could still
//! arrive): the next seq is above every seq ever signed here, except that the
//! same capsule re-signed at the same seq is the identical envelope (Ed25519
//! is deterministic), so resending it is safe.

use super::error::Error;
use super::wire::Head;
use crate::core::crypto::AgentId;
use crate::core::jcs;
use crate::core::json::{self, Json};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

// The file names of the layout above. They are a contract: scripts, the
// e2e tests and a second machine's copy of the directory rely on them.

/// The Ed25519 secret seed (64 hex characters, mode 0600). Its presence is
/// what makes a directory an identity.
pub const KEY_FILE: &str = "key";
/// `{"agent_id", "public_key"}`: the public half, checked against the key
/// on every load so a key copied into the wrong directory is refused.
pub const IDENTITY_FILE: &str = "identity.json";
/// The service's URLs as `bootstrap` returned them ([`Service`]).
pub const SERVICE_FILE: &str = "service.json";
/// The desired capsule: the one file an operator edits by hand.
pub const DESIRED_FILE: &str = "capsule.json";
/// The last accepted write ([`Published`]): what rehydration falls back on
/// offline, and what "dirty" is measured against.
pub const PUBLISHED_FILE: &str = "published.json";
/// The last head seen and its ETag ([`HeadCache`]), for conditional reads
/// and the tier `status` reports.
pub const HEAD_FILE: &str = "head.json";
/// The highest seq ever signed here ([`Signed`]), so one seq never signs two
/// different capsules.
pub const SIGNED_FILE: &str = "signed.json";
/// Why `capsule.json` is not published yet ([`Pending`]).
pub const PENDING_FILE: &str = "pending.json";

/// Where the service lives for this identity (from `bootstrap`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// The URL every request is built from (no trailing slash); `--url`
    /// overrides it for one command.
    pub base_url: String,
    /// This identity's head.json as the service spelled it (kept for
    /// people reading the file; requests are built from `base_url`).
    pub head_url: String,
    /// This identity's capsule.json, likewise.
    pub capsule_url: String,
    /// The tier limits bootstrap reported, kept as sent (the service's
    /// shape, not interpreted by the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
}

/// The last write the service accepted, as recorded locally.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The accepted seq: the next write signs above it.
    pub seq: u64,
    /// `sha256:<hex>` of the capsule's RFC 8785 bytes; recomputed on load,
    /// so a hand-edited copy is refused.
    pub cursor: String,
    /// The capsule exactly as accepted.
    pub capsule: Json,
    /// When this copy was recorded (the service's `generated_at` when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
}

/// The last head seen, with the ETag to revalidate it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadCache {
    /// The cursor's hex, sent as `If-None-Match` so an unchanged head costs
    /// a 304 and no body.
    pub etag: String,
    /// The head itself (`None` in a file written before heads were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Head>,
}

/// The last envelope signed with this key from this directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signed {
    /// The highest seq signed; the next new capsule signs above it.
    pub seq: u64,
    /// The cursor of the capsule it carried.
    pub cursor: String,
}

/// Why the desired capsule is not published yet: the last failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The cursor of the capsule that failed.
    pub cursor: String,
    /// When it failed (RFC 3339).
    pub at: String,
    /// `write_rejected` (with `reason_codes`) or `service_unavailable`.
    pub error: String,
    /// The service's (or the local pre-check's) reason codes for a
    /// rejection; empty when the service was unreachable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
    /// The rejection's detail or the network error, for the agent to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For a back-off rejection: when a write is allowed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_write_at: Option<String>,
}

/// How to find the state directory: an explicit directory wins; otherwise
/// `home/<agent>` (the only identity in `home` when no agent is named).
#[derive(Debug, Clone, Default)]
pub struct Location {
    /// The identities' home (`SELFCAP_HOME`); `None`: `$HOME/.selfcap`.
    pub home: Option<PathBuf>,
    /// One identity's directory given outright (`--state-dir`); `home` and
    /// `agent` are then not consulted.
    pub state_dir: Option<PathBuf>,
    /// An agent id or a unique prefix of one.
    pub agent: Option<String>,
}

impl Location {
    /// `home`, else `$HOME/.selfcap`.
    pub fn home_dir(&self) -> Result<PathBuf, Error> {
        if let Some(h) = &self.home {
            return Ok(h.clone());
        }
        match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".selfcap")),
            _ => Err(Error::local(
                "no home directory: set SELFCAP_HOME or pass --state-dir",
            )),
        }
    }

    /// The directory a new identity goes to.
    pub fn for_new(&self, agent: &AgentId) -> Result<PathBuf, Error> {
        match &self.state_dir {
            Some(d) => Ok(d.clone()),
            None => Ok(self.home_dir()?.join(agent.as_str())),
        }
    }

    /// The state directory of an existing identity.
    pub fn find(&self) -> Result<StateDir, Error> {
        if let Some(d) = &self.state_dir {
            return Ok(StateDir::new(d));
        }
        let home = self.home_dir()?;
        let mut ids: Vec<String> = match fs::read_dir(&home) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().join(KEY_FILE).is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| AgentId::parse(n).is_some())
                .collect(),
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("cannot read", &home, e)),
        };
        ids.sort();
        if let Some(want) = &self.agent {
            ids.retain(|id| id.starts_with(want.as_str()));
        }
        match ids.as_slice() {
            [one] => Ok(StateDir::new(home.join(one))),
            [] => Err(Error::local(match &self.agent {
                Some(a) => format!("no identity {a} in {}", home.display()),
                None => format!(
                    "no identity in {}: run `selfcap keygen` (or pass --state-dir)",
                    home.display()
                ),
            })),
            many => Err(Error::local(format!(
                "{} identities in {}: pass --agent ID (or --state-dir)",
                many.len(),
                home.display()
            ))),
        }
    }
}

/// One identity's directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The directory at `root`; nothing is read or created until used.
    pub fn new(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    /// The directory itself (for messages and `selfcap status`).
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The path of one of its files (`KEY_FILE`, …).
    pub fn file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The stored service URLs, if `bootstrap` ran here.
    pub fn service(&self) -> Result<Option<Service>, Error> {
        self.read_json(SERVICE_FILE)
    }

    /// Records the service URLs (atomically, as every write here).
    pub fn save_service(&self, s: &Service) -> Result<(), Error> {
        self.write_json(SERVICE_FILE, s)
    }

    /// The last accepted write recorded here. Its cursor is recomputed and
    /// must match (a hand-edited copy is refused, not trusted).
    pub fn published(&self) -> Result<Option<Published>, Error> {
        let Some(p) = self.read_json::<Published>(PUBLISHED_FILE)? else {
            return Ok(None);
        };
        if jcs::cursor(&p.capsule) != p.cursor {
            return Err(Error::local(format!(
                "{} is corrupt (its capsule does not match its cursor); delete it and run \
                 `selfcap rehydrate`",
                self.file(PUBLISHED_FILE).display()
            )));
        }
        Ok(Some(p))
    }

    /// Records an accepted write; from now on the desired capsule is dirty
    /// only if it differs from this one.
    pub fn save_published(&self, p: &Published) -> Result<(), Error> {
        self.write_json(PUBLISHED_FILE, p)
    }

    /// The desired capsule (capsule.json), strictly parsed.
    pub fn desired(&self) -> Result<Option<Json>, Error> {
        let path = self.file(DESIRED_FILE);
        match fs::read(&path) {
            Ok(bytes) => parse_json_file(&path, &bytes).map(Some),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("cannot read", &path, e)),
        }
    }

    /// Replaces the desired capsule (pretty-printed: it is the file people
    /// edit; its cursor is what counts, not its formatting).
    pub fn save_desired(&self, capsule: &Json) -> Result<(), Error> {
        self.write_json(DESIRED_FILE, capsule)
    }

    /// The last head seen, if any.
    pub fn head_cache(&self) -> Result<Option<HeadCache>, Error> {
        self.read_json(HEAD_FILE)
    }

    /// Records a head and its ETag.
    pub fn save_head_cache(&self, h: &HeadCache) -> Result<(), Error> {
        self.write_json(HEAD_FILE, h)
    }

    /// The highest seq signed here, if any (see [`StateDir::note_signed`]).
    pub fn signed(&self) -> Result<Option<Signed>, Error> {
        self.read_json(SIGNED_FILE)
    }

    /// Records a signature at `seq` (never lowering the recorded seq).
    pub fn note_signed(&self, seq: u64, cursor: &str) -> Result<(), Error> {
        if self.signed()?.is_some_and(|s| s.seq > seq) {
            return Ok(());
        }
        self.write_json(
            SIGNED_FILE,
            &Signed {
                seq,
                cursor: cursor.to_string(),
            },
        )
    }

    /// The last failed attempt to publish the desired capsule, if any.
    pub fn pending(&self) -> Result<Option<Pending>, Error> {
        self.read_json(PENDING_FILE)
    }

    /// Records why the desired capsule is not published yet.
    pub fn save_pending(&self, p: &Pending) -> Result<(), Error> {
        self.write_json(PENDING_FILE, p)
    }

    /// Forgets the last failure (after an accepted write).
    pub fn clear_pending(&self) -> Result<(), Error> {
        let path = self.file(PENDING_FILE);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(io_err("cannot remove", &path, e)),
            _ => Ok(()),
        }
    }

    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, Error> {
        let path = self.file(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("cannot read", &path, e)),
        };
        // Strict parse first (duplicate keys etc.), then the typed view.
        parse_json_file(&path, &bytes)?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::local(format!("{} is malformed: {e}", path.display())))
    }

    pub(crate) fn write_json<T: Serialize + ?Sized>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<(), Error> {
        let mut text = serde_json::to_string_pretty(value)
            .map_err(|e| Error::local(format!("cannot encode {name}: {e}")))?;
        text.push('\n');
        write_atomic(&self.file(name), text.as_bytes())
    }
}

/// Strictly parses a JSON file (the core's parser: duplicate keys, lone
/// surrogates, NaN and deep nesting are errors), naming the file on failure.
pub fn parse_json_file(path: &Path, bytes: &[u8]) -> Result<Json, Error> {
    json::parse(bytes).map_err(|e| Error::local(format!("{}: malformed JSON: {e}", path.display())))
}

/// Writes `bytes` to `path` via a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.as_os_str().is_empty() && !dir.exists() {
        create_private_dir(dir)?;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(io_err("cannot write", path, e));
    }
    Ok(())
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), Error> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(|e| io_err("cannot create", dir, e))
}

pub(crate) fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::local(format!("{what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::crypto::AgentKey;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "selfcap-state-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn key_round_trips_with_private_modes_and_is_never_overwritten() {
        let dir = tmp("key");
        let s = StateDir::new(&dir);
        let key = AgentKey::from_seed(&[7u8; 32]);
        s.create(&key, None).unwrap();
        assert_eq!(s.load_key().unwrap().agent_id(), key.agent_id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
            assert_eq!(mode(&dir), 0o700);
        }
        let other = AgentKey::from_seed(&[8u8; 32]);
        assert!(s
            .create(&other, None)
            .unwrap_err()
            .to_string()
            .contains("refusing"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_key_files_are_refused_with_one_line() {
        let dir = tmp("badkey");
        let s = StateDir::new(&dir);
        assert!(s
            .load_key()
            .unwrap_err()
            .to_string()
            .contains("no key file"));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        for bad in ["", "zz", &"a".repeat(63), &"g".repeat(64)] {
            write_atomic(&path, bad.as_bytes()).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
            }
            let e = s.load_key().unwrap_err().to_string();
            assert!(e.starts_with("bad key file"), "{e}");
            assert!(!e.contains('\n'));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            write_atomic(&path, "a".repeat(64).as_bytes()).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
            let e = s.load_key().unwrap_err().to_string();
            assert!(e.contains("chmod 600"), "{e}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn locate_picks_the_only_identity_or_asks() {
        let home = tmp("home");
        let loc = Location {
            home: Some(home.clone()),
            ..Location::default()
        };
        assert!(loc.find().unwrap_err().to_string().contains("keygen"));
        let a = AgentKey::from_seed(&[1u8; 32]);
        StateDir::new(loc.for_new(&a.agent_id()).unwrap())
            .create(&a, None)
            .unwrap();
        assert_eq!(loc.find().unwrap().path(), home.join(a.agent_id().as_str()));
        let b = AgentKey::from_seed(&[2u8; 32]);
        StateDir::new(loc.for_new(&b.agent_id()).unwrap())
            .create(&b, None)
            .unwrap();
        assert!(loc.find().unwrap_err().to_string().contains("--agent"));
        let by_prefix = Location {
            agent: Some(b.agent_id().as_str()[..8].to_string()),
            ..loc.clone()
        };
        assert_eq!(
            by_prefix.find().unwrap().path(),
            home.join(b.agent_id().as_str())
        );
        fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_tampered_published_copy_is_refused() {
        let dir = tmp("published");
        let s = StateDir::new(&dir);
        let capsule = json::parse_str(r#"{"a":1}"#).unwrap();
        let p = Published {
            seq: 1,
            cursor: jcs::cursor(&capsule),
            capsule,
            recorded_at: None,
        };
        s.save_published(&p).unwrap();
        assert_eq!(s.published().unwrap(), Some(p.clone()));
        let tampered = Published {
            capsule: json::parse_str(r#"{"a":2}"#).unwrap(),
            ..p
        };
        s.save_published(&tampered).unwrap();
        assert!(s.published().unwrap_err().to_string().contains("corrupt"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
