//! `selfcap`: the command-line client for Self Capsule as a library
//! function, [`run`] (native only; the work is done by [`crate::client`] on
//! top of the protocol core). The `selfcap` binary (`src/bin/selfcap.rs`)
//! and the Python package's `selfcap` command (`clients/python/`) are both
//! one call to it, so the two are the same program.
//!
//! This module parses the arguments and dispatches; each command is one
//! function, grouped by what it works on:
//!
//! - `identity`: keygen, id, bootstrap, status (the state directory)
//! - `canon`: canon, cursor (any JSON document; no identity needed)
//! - `publish`: template, set, sign, put, publish (writes)
//! - `read`: head, get, rehydrate (the current capsule), feed (a projected watch feed),
//!   meta (what became of an agent's writes)
//! - `history`: history, export, verify (the sealed history)
//! - `access`: grant, revoke, visibility (who may read: private capsules)
//! - `keys`: keys, keys init, rotate, recommit, recover (the key log, docs/PROTOCOL.md §14)
//! - `upgrade`: upgrade, upgrade claim (a paid plan, paid in USDC)
//! - `mcp`: mcp (the MCP server over stdio, for LLM agents)
//! - `admin`: admin agents, agent, stats (the operator API, with the token from the environment)
//! - `watch`: watch, feed --watch (follow an agent's head, or its feed's, as it changes)
//! - `print`: stdout and stderr, error reports and exit codes
//!
//! What a command prints and how it exits is a contract (scripts and
//! tests/e2e/cli.test.mjs rely on it): the exit codes are
//! [`crate::client::ExitCode`], listed in `--help`.

mod access;
mod admin;
mod canon;
mod history;
mod identity;
mod keys;
mod mcp;
mod print;
mod publish;
mod read;
mod upgrade;
mod watch;

use crate::client::http::UreqTransport;
use crate::client::watch::Followed;
use crate::client::{BackoffPolicy, Client, Error, ExitCode, Location, StateDir};
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

const ABOUT: &str = "Client for Self Capsule: keys, signing, publishing and \
local-first rehydration of an agent's signed self capsule.";

const LONG_ABOUT: &str = "\
Client for Self Capsule: keys, signing, publishing and local-first rehydration of
an agent's signed self capsule.

Quick start:
  selfcap keygen                                  # new identity in ~/.selfcap/<agent_id>/
  selfcap bootstrap --url https://self.example    # store the service URLs
  selfcap template > capsule.json                 # edit it, then:
  selfcap put capsule.json                        # sign with the next seq and publish
  selfcap head                                    # \"unchanged\" while nothing changed
  selfcap rehydrate                               # after a restart: the prompt block
  selfcap history; selfcap verify                 # the sealed history chain, checked locally
  selfcap visibility private                      # only this agent and granted readers may read
  selfcap grant READER_ID --scope capsule         # let READER_ID read capsule.json
  selfcap watch AGENT_ID                          # one JSON line per new head, as it happens
  selfcap feed --watch AGENT_ID                   # the same of its projected watch feed (Pro)
  selfcap keys; selfcap rotate                    # the key log; rotate to the committed next key
  selfcap meta                                    # why writes were refused, by reason code
  selfcap admin agents --all --refused-24h        # operator: the token in SELFCAP_ADMIN_TOKEN

State directory (--state-dir, else $SELFCAP_HOME/<agent_id>, default ~/.selfcap/<agent_id>):
  key             the current Ed25519 seed, 64 hex, mode 0600 (never printed)
  next.key        the pre-committed next key (same form); only the key commands load it
  identity.json   agent_id and current public key (plus key_index after a rotation)
  service.json    the URLs bootstrap returned
  capsule.json    the desired state: edit it (or `selfcap set FILE`); `publish` sends it
              only when it differs (by cursor) from published.json
  published.json  the last accepted write (seq, cursor, capsule)
  head.json       the last head seen and its ETag
  signed.json     the last envelope signed (a seq never signs two different capsules)
  pending.json    why capsule.json is not published yet (`selfcap mcp`'s failed writes)

For LLM agents: `selfcap mcp` serves these tools over MCP (stdio); see its --help.";

#[derive(Parser)]
#[command(
    name = "selfcap",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = ExitCode::help(),
    propagate_version = true
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
#[command(next_help_heading = "Global options")]
pub(crate) struct Global {
    /// The identity's state directory (overrides --home/--agent).
    #[arg(long, global = true, env = "SELFCAP_STATE_DIR", value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Where identities live, one directory per agent id [default: ~/.selfcap].
    #[arg(long, global = true, env = "SELFCAP_HOME", value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
    /// Which identity in --home (an agent id or a unique prefix); needed
    /// only when there are several.
    #[arg(long, global = true, env = "SELFCAP_AGENT", value_name = "ID")]
    pub(crate) agent: Option<String>,
    /// Service base URL (default: the one `bootstrap` stored).
    #[arg(long, global = true, env = "SELFCAP_URL", value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Retries after a network error or 5xx (capped exponential backoff from 0.5 s).
    #[arg(
        long,
        global = true,
        env = "SELFCAP_RETRIES",
        default_value_t = 3,
        value_name = "N"
    )]
    pub(crate) retries: u32,
    /// Per-request timeout in seconds.
    #[arg(long, global = true, default_value_t = 30, value_name = "SECS")]
    pub(crate) timeout: u64,
}

#[derive(Args, Clone, Copy)]
pub(crate) struct JsonOut {
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Clone)]
pub(crate) struct WriteOpts {
    /// Use this seq instead of max(local, service) + 1.
    #[arg(long, value_name = "N")]
    pub(crate) seq: Option<u64>,
    /// Send without the local schema/safety check.
    #[arg(long)]
    pub(crate) no_precheck: bool,
    /// On a 429, sleep up to SECS for the service's retry_after_sec and retry
    /// (0: report the wait and exit 5).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub(crate) wait: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RenderFormat {
    Text,
    Markdown,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new Ed25519 identity and its next key (files mode 0600; keys are never printed).
    Keygen {
        #[command(flatten)]
        recovery: keys::RecoveryDigest,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Import the identity of the public MCP server (@diffdelta/mcp-server),
    /// keeping its agent_id.
    ImportIdentity {
        /// Its identity file [default: ~/.diffdelta/identity.json].
        file: Option<PathBuf>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Print this identity's agent id and public key.
    Id {
        #[command(flatten)]
        out: JsonOut,
    },
    /// Register with a service (stateless): check the agent id, store the URLs.
    #[command(after_help = "The URL comes from --url (or SELFCAP_URL).")]
    Bootstrap {
        #[command(flatten)]
        out: JsonOut,
    },
    /// Print the RFC 8785 canonical bytes of a JSON document.
    Canon {
        /// The document ("-" or nothing: stdin).
        file: Option<PathBuf>,
    },
    /// Print the cursor ("sha256:" + hex of SHA-256 of the canonical bytes).
    Cursor {
        /// The document ("-" or nothing: stdin).
        file: Option<PathBuf>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Print a minimal valid capsule for this identity, to start from.
    Template,
    /// Replace the desired capsule (capsule.json in the state dir) after the local check.
    Set {
        /// The capsule ("-": stdin).
        file: PathBuf,
        /// Store it without the local schema/safety check.
        #[arg(long)]
        no_precheck: bool,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Show the local state: identity, service, last accepted write, dirty or not.
    Status {
        #[command(flatten)]
        out: JsonOut,
    },
    /// Print the signed envelope for a capsule with the next seq (dry run, nothing sent).
    #[command(
        after_help = "The next seq here is local knowledge only: above the last accepted \
and the last signed seq (`put` also asks the service). The seq is recorded as signed, so it is \
never reused for a different capsule."
    )]
    Sign {
        /// The capsule ("-": stdin).
        file: PathBuf,
        /// Use this seq.
        #[arg(long, value_name = "N")]
        seq: Option<u64>,
        /// Sign without the local schema/safety check.
        #[arg(long)]
        no_precheck: bool,
    },
    /// Sign a capsule with the next seq and PUT it; record it locally when accepted.
    #[command(after_help = ExitCode::help())]
    Put {
        /// The capsule ("-": stdin).
        file: PathBuf,
        #[command(flatten)]
        write: WriteOpts,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Publish the desired capsule (capsule.json) if it differs from the last accepted one.
    #[command(after_help = ExitCode::help())]
    Publish {
        /// Publish even when nothing changed (spends a write).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        write: WriteOpts,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Poll head.json with the stored ETag; prints "unchanged" on 304.
    Head {
        /// Another agent (default: this identity; no ETag is stored for others).
        agent_id: Option<String>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// An agent's projected watch feed (Pro; docs/PROTOCOL.md §15): its head
    /// (default), latest items, or digest, as JSON; or --watch its head as it moves.
    #[command(after_help = watch::FEED_AFTER_HELP)]
    Feed {
        /// Another agent (default: this identity).
        agent_id: Option<String>,
        /// The projected items (a ddv1 feed) instead of the head.
        #[arg(long, conflicts_with = "digest")]
        latest: bool,
        /// Counts per selected source instead of the head.
        #[arg(long)]
        digest: bool,
        /// With --latest: only what is new since this watch_cursor.
        #[arg(long, requires = "latest")]
        since: Option<String>,
        /// Follow the head as it moves: one JSON line per new head (WebSocket, or long-poll).
        #[arg(long, conflicts_with_all = ["latest", "digest"])]
        watch: bool,
        /// With --watch: instead of printing, run CMD through `sh -c` for each new head, the head JSON on stdin.
        #[arg(long, value_name = "CMD", requires = "watch")]
        exec: Option<String>,
        /// With --watch: how heads arrive (for tests), as `watch --transport`.
        #[arg(long, value_enum, requires = "watch", hide = true)]
        transport: Option<watch::TransportArg>,
    },
    /// An agent's meta.json: its writes and refused writes by reason code (signed when private).
    Meta {
        /// Another agent (default: this identity).
        agent_id: Option<String>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Fetch capsule.json (exact canonical bytes, checked against the ETag).
    Get {
        /// Another agent (default: this identity).
        agent_id: Option<String>,
        /// Indent the output.
        #[arg(long)]
        pretty: bool,
    },
    /// Local-first rehydration: the higher seq of the local copy and the service
    /// wins; stores it and prints the rehydration block.
    #[command(after_help = "Works offline from the local copy when the service is \
unreachable (with a warning). Status lines go to stderr; stdout is only the block.")]
    Rehydrate {
        /// Block format.
        #[arg(long, value_enum, default_value = "text")]
        format: RenderFormat,
        /// Print the raw capsule (RFC 8785) instead of the block.
        #[arg(long)]
        json: bool,
    },
    /// Follow an agent's head: one JSON line per change (WebSocket, or long-poll).
    #[command(after_help = watch::AFTER_HELP)]
    Watch(watch::WatchArgs),
    /// List retained versions (history.json), newest first.
    History {
        /// Another agent (default: this identity).
        agent_id: Option<String>,
        /// Only versions newer than this cursor (sha256:<hex> or the hex).
        #[arg(long, value_name = "CURSOR")]
        since: Option<String>,
        /// At most N versions (1..100; the service's default otherwise).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Download an agent's history export bundle (export.json) to stdout, for `verify --export`.
    Export {
        /// Another agent (default: this identity).
        agent_id: Option<String>,
    },
    /// Verify an agent's history chain offline with the core (exit 0 only when valid).
    #[command(
        after_help = "With AGENT_ID (default: this identity): downloads export.json and \
checks it locally against the service's published keyring (GET /api/v1/self/keys), or against \
--keys. With --export FILE: no network at all; the bundle's own keys are trusted unless --keys \
is given. Exit 0: valid; 8: not valid (the report says which check failed)."
    )]
    Verify {
        /// The agent whose chain to fetch and verify (default: this identity).
        #[arg(conflicts_with = "export")]
        agent_id: Option<String>,
        /// Verify this export bundle file instead (offline).
        #[arg(long, value_name = "FILE")]
        export: Option<PathBuf>,
        /// Trust this keyring (a saved GET /api/v1/self/keys body).
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Let another agent read this capsule while it is private (edits
    /// access_control.authorized_readers in capsule.json, then publishes).
    #[command(after_help = access::GRANT_AFTER_HELP)]
    Grant {
        /// The reader's agent id.
        agent_id: String,
        /// What it may read: comma-separated head, capsule, history, verify (or all).
        #[arg(long, value_name = "LIST", default_value = "all")]
        scope: String,
        /// When the grant ends (RFC 3339, e.g. 2027-01-31T00:00:00Z); must be in the future.
        #[arg(long, value_name = "RFC3339")]
        expires: Option<String>,
        /// Also make the capsule private (as `visibility private`).
        #[arg(long)]
        private: bool,
        #[command(flatten)]
        write: WriteOpts,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Take a reader out of access_control.authorized_readers, then publish.
    #[command(after_help = access::REVOKE_AFTER_HELP)]
    Revoke {
        /// The reader's agent id.
        agent_id: String,
        #[command(flatten)]
        write: WriteOpts,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Make the capsule public or private (access_control.public), then publish.
    #[command(after_help = access::VISIBILITY_AFTER_HELP)]
    Visibility {
        /// public: anyone may read; private: only this agent and granted readers.
        #[arg(value_enum)]
        visibility: access::Visibility,
        #[command(flatten)]
        write: WriteOpts,
        #[command(flatten)]
        out: JsonOut,
    },
    /// Show and verify an agent's key log (keys.json), pinned per agent; `keys init` starts one.
    #[command(after_help = keys::KEYS_AFTER_HELP)]
    Keys(keys::KeysArgs),
    /// Rotate to the pre-committed next key (next.key), committing a fresh one.
    #[command(after_help = keys::ROTATE_AFTER_HELP)]
    Rotate(keys::RotateArgs),
    /// Commit a fresh next key with the current key (matures after the recovery window).
    #[command(after_help = keys::RECOMMIT_AFTER_HELP)]
    Recommit(keys::RecommitArgs),
    /// Rotate with the operator's recovery key (a new current key is generated here).
    #[command(after_help = keys::RECOVER_AFTER_HELP)]
    Recover(keys::RecoverArgs),
    /// Buy a paid plan with USDC: quote, pay on-chain, claim (never pays twice).
    #[command(after_help = upgrade::AFTER_HELP)]
    Upgrade(upgrade::UpgradeArgs),
    /// Serve this identity's tools to an LLM agent over MCP (stdio).
    #[command(after_help = mcp::AFTER_HELP)]
    Mcp(mcp::McpArgs),
    /// The operator API: pages of agents, one agent's record, the totals (token from SELFCAP_ADMIN_TOKEN).
    #[command(after_help = admin::AFTER_HELP)]
    Admin(admin::AdminArgs),
}

/// Runs the CLI on `args` (the first one is the program's name, as in
/// `std::env::args_os()`); returns the process exit code. Everything it
/// writes to stdout is flushed before it returns, so a host that does not
/// exit through Rust's runtime (the Python package's `selfcap` command)
/// loses nothing.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    print::on_panic_one_line();
    let code = match Cli::try_parse_from(args) {
        Ok(cli) => print::exit_code(dispatch(cli)),
        Err(e) => {
            // --help and --version are "errors" printed to stdout: exit 0.
            let code = if e.use_stderr() {
                ExitCode::Usage
            } else {
                ExitCode::Ok
            };
            let _ = e.print();
            code.code()
        }
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

fn dispatch(cli: Cli) -> Result<(), Error> {
    let g = &cli.global;
    match cli.command {
        Command::Keygen { recovery, out } => identity::keygen(g, recovery.parse()?, out),
        Command::ImportIdentity { file, out } => identity::import(g, file, out),
        Command::Id { out } => identity::id(g, out),
        Command::Bootstrap { out } => identity::bootstrap(g, out),
        Command::Canon { file } => canon::canon(file.as_ref()),
        Command::Cursor { file, out } => canon::cursor(file.as_ref(), out),
        Command::Template => publish::template(g),
        Command::Set {
            file,
            no_precheck,
            out,
        } => publish::set(g, &file, no_precheck, out),
        Command::Status { out } => identity::status(g, out),
        Command::Sign {
            file,
            seq,
            no_precheck,
        } => publish::sign(g, &file, seq, no_precheck),
        Command::Put { file, write, out } => publish::put(g, &file, &write, out),
        Command::Publish { force, write, out } => publish::publish(g, force, &write, out),
        Command::Head { agent_id, out } => read::head(g, agent_id.as_deref(), out),
        Command::Get { agent_id, pretty } => read::get(g, agent_id.as_deref(), pretty),
        Command::Meta { agent_id, out } => read::meta(g, agent_id.as_deref(), out),
        Command::Feed {
            agent_id,
            watch: true,
            exec,
            transport,
            ..
        } => watch::follow(
            g,
            agent_id.as_deref(),
            Followed::FeedHead,
            exec,
            transport.unwrap_or_default(),
        ),
        Command::Feed {
            agent_id,
            latest,
            digest,
            since,
            ..
        } => read::feed(g, agent_id.as_deref(), latest, digest, since.as_deref()),
        Command::Rehydrate { format, json } => read::rehydrate(g, format, json),
        Command::Watch(args) => watch::run(g, args),
        Command::History {
            agent_id,
            since,
            limit,
            out,
        } => history::history(g, agent_id.as_deref(), since.as_deref(), limit, out),
        Command::Export { agent_id } => history::export(g, agent_id.as_deref()),
        Command::Verify {
            agent_id,
            export,
            keys,
            out,
        } => history::verify(g, agent_id.as_deref(), export.as_ref(), keys.as_ref(), out),
        Command::Grant {
            agent_id,
            scope,
            expires,
            private,
            write,
            out,
        } => access::grant(
            g,
            &agent_id,
            &scope,
            expires.as_deref(),
            private,
            &write,
            out,
        ),
        Command::Revoke {
            agent_id,
            write,
            out,
        } => access::revoke(g, &agent_id, &write, out),
        Command::Visibility {
            visibility,
            write,
            out,
        } => access::visibility(g, visibility, &write, out),
        Command::Keys(args) => keys::keys(g, args),
        Command::Rotate(args) => keys::rotate(g, args),
        Command::Recommit(args) => keys::recommit(g, args),
        Command::Recover(args) => keys::recover(g, args),
        Command::Upgrade(args) => upgrade::run(g, args),
        Command::Mcp(args) => mcp::run(g, args),
        Command::Admin(args) => admin::run(g, args),
    }
}

/// Where the identity lives, from the global options.
pub(crate) fn location(g: &Global) -> Location {
    Location {
        home: g.home.clone(),
        state_dir: g.state_dir.clone(),
        agent: g.agent.clone(),
    }
}

/// A client for the identity the global options select. `wait`: the
/// longest 429 wait to sleep through (`--wait`; 0 for every command
/// without that option).
pub(crate) fn client(g: &Global, wait: u64) -> Result<Client, Error> {
    Ok(configured(location(g).find()?, g, wait))
}

/// A client over `state` with the global options applied.
fn configured(state: StateDir, g: &Global, wait: u64) -> Client {
    let policy = BackoffPolicy {
        max_attempts: g.retries.saturating_add(1),
        max_quota_wait: Duration::from_secs(wait),
        ..BackoffPolicy::default()
    };
    Client::new(state)
        .with_base_url(g.url.clone())
        .with_transport(Box::new(UreqTransport::new(Duration::from_secs(
            g.timeout.max(1),
        ))))
        .with_policy(policy)
        .on_retry(Box::new(print::note_retry))
}

/// A client for reading `agent`'s documents. With an explicit agent and
/// no usable identity (none yet, or several and no `--agent`), an
/// anonymous one: reading or watching a public capsule needs no key, and
/// a private one answers it as the service answers any unsigned read.
/// Without an agent the identity is the target, so it must exist.
pub(crate) fn reader_client(g: &Global, agent: Option<&AgentId>) -> Result<Client, Error> {
    let loc = location(g);
    match (loc.find(), agent) {
        // The identities' home holds no key of its own: reads from it
        // find none, so nothing is ever signed with it.
        (Err(_), Some(_)) => Ok(configured(StateDir::new(loc.home_dir()?), g, 0)),
        _ => client(g, 0),
    }
}

/// A client for a request about no agent of its own (the operator API):
/// this identity's stored service URL when there is one, else `--url`
/// alone; no key is ever used.
pub(crate) fn service_client(g: &Global) -> Result<Client, Error> {
    let loc = location(g);
    let state = match loc.find() {
        Ok(s) => s,
        Err(_) => StateDir::new(loc.home_dir()?),
    };
    Ok(configured(state, g, 0))
}

/// An optional `AGENT_ID` argument.
pub(crate) fn agent_arg(s: Option<&str>) -> Result<Option<AgentId>, Error> {
    s.map(|s| {
        AgentId::parse(s).ok_or_else(|| {
            Error::Local(format!(
                "not an agent id: {s:?} (expected 64 lowercase hex characters)"
            ))
        })
    })
    .transpose()
}

/// Reads and strictly parses a JSON document from a file or stdin.
pub(crate) fn read_json(file: Option<&PathBuf>) -> Result<Json, Error> {
    let (name, bytes) = match file {
        Some(p) if p.as_os_str() != "-" => (
            p.display().to_string(),
            std::fs::read(p)
                .map_err(|e| Error::Local(format!("cannot read {}: {e}", p.display())))?,
        ),
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| Error::Local(format!("cannot read stdin: {e}")))?;
            ("stdin".to_string(), buf)
        }
    };
    json::parse(&bytes).map_err(|e| Error::Local(format!("{name}: malformed JSON: {e}")))
}
