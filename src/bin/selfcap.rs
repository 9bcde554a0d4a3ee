//! `selfcap`: the command-line client for Self Capsule (native only; the
//! work is done by `self_capsule::client` on top of the protocol core).

#[cfg(target_arch = "wasm32")]
fn main() {
    // The CLI is native only; this keeps a wasm build of every target quiet.
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use clap::{Args, Parser, Subcommand, ValueEnum};
    use self_capsule::client::{
        self, BackoffPolicy, Client, Error, ExitCode, HeadOutcome, Location, PublishOutcome,
        PutOptions, PutResult, Rejected, RetryNote,
    };
    use self_capsule::core::crypto::AgentId;
    use self_capsule::core::jcs;
    use self_capsule::core::json::{self, Json};
    use self_capsule::core::render::{self, Format};
    use std::io::{IsTerminal, Read, Write};
    use std::path::PathBuf;
    use std::time::Duration;

    const EXIT_CODES: &str = "\
Exit codes:
  0  success (also: head \"unchanged\", publish with nothing to send)
  1  local error: bad file or JSON, bad key file, no identity, no service URL
  2  usage error
  3  service unreachable or failing after retries (network, 5xx, protocol)
  4  write rejected: fix the payload (class fix_payload: schema, unsafe_content,
     replay_seq, capsule_too_large, ...; also the local pre-check, nothing sent)
  5  write rejected: back off until next_write_at (class back_off: quota, cooldown)
  6  write rejected: signature problem (class signature): check key and signing
  7  not found: no capsule published for that agent
  8  verification failed";

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

State directory (--state-dir, else $SELFCAP_HOME/<agent_id>, default ~/.selfcap/<agent_id>):
  key             Ed25519 seed, 64 hex, mode 0600 (never printed)
  identity.json   agent_id and public key
  service.json    the URLs bootstrap returned
  capsule.json    the desired state: edit it (or `selfcap set FILE`); `publish` sends it
                  only when it differs (by cursor) from published.json
  published.json  the last accepted write (seq, cursor, capsule)
  head.json       the last head seen and its ETag
  signed.json     the last envelope signed (a seq never signs two different capsules)";

    #[derive(Parser)]
    #[command(
        name = "selfcap",
        version,
        about = ABOUT,
        long_about = LONG_ABOUT,
        after_help = EXIT_CODES,
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
    struct Global {
        /// The identity's state directory (overrides --home/--agent).
        #[arg(long, global = true, env = "SELFCAP_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Where identities live, one directory per agent id [default: ~/.selfcap].
        #[arg(long, global = true, env = "SELFCAP_HOME", value_name = "DIR")]
        home: Option<PathBuf>,
        /// Which identity in --home (an agent id or a unique prefix); needed
        /// only when there are several.
        #[arg(long, global = true, env = "SELFCAP_AGENT", value_name = "ID")]
        agent: Option<String>,
        /// Service base URL (default: the one `bootstrap` stored).
        #[arg(long, global = true, env = "SELFCAP_URL", value_name = "URL")]
        url: Option<String>,
        /// Retries after a network error or 5xx (capped exponential backoff from 0.5 s).
        #[arg(
            long,
            global = true,
            env = "SELFCAP_RETRIES",
            default_value_t = 3,
            value_name = "N"
        )]
        retries: u32,
        /// Per-request timeout in seconds.
        #[arg(long, global = true, default_value_t = 30, value_name = "SECS")]
        timeout: u64,
    }

    #[derive(Args, Clone, Copy)]
    struct JsonOut {
        /// Machine-readable JSON on stdout.
        #[arg(long)]
        json: bool,
    }

    #[derive(Args, Clone)]
    struct WriteOpts {
        /// Use this seq instead of max(local, service) + 1.
        #[arg(long, value_name = "N")]
        seq: Option<u64>,
        /// Send without the local schema/safety check.
        #[arg(long)]
        no_precheck: bool,
        /// On a 429, sleep up to SECS for the service's retry_after_sec and retry
        /// (0: report the wait and exit 5).
        #[arg(long, value_name = "SECS", default_value_t = 0)]
        wait: u64,
    }

    #[derive(Clone, Copy, ValueEnum)]
    enum RenderFormat {
        Text,
        Markdown,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Create a new Ed25519 identity (key file mode 0600; the key is never printed).
        Keygen {
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
        #[command(after_help = EXIT_CODES)]
        Put {
            /// The capsule ("-": stdin).
            file: PathBuf,
            #[command(flatten)]
            write: WriteOpts,
            #[command(flatten)]
            out: JsonOut,
        },
        /// Publish the desired capsule (capsule.json) if it differs from the last accepted one.
        #[command(after_help = EXIT_CODES)]
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
    }

    /// Runs the CLI; returns the exit code.
    pub fn main() -> i32 {
        std::panic::set_hook(Box::new(|info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            eprintln!("selfcap: internal error: {msg}");
        }));
        let cli = match Cli::try_parse() {
            Ok(c) => c,
            Err(e) => {
                let code = if e.use_stderr() {
                    ExitCode::Usage.code()
                } else {
                    0
                };
                let _ = e.print();
                return code;
            }
        };
        match run(cli) {
            Ok(()) => 0,
            Err(e) => {
                report(&e);
                e.exit_code().code()
            }
        }
    }

    fn location(g: &Global) -> Location {
        Location {
            home: g.home.clone(),
            state_dir: g.state_dir.clone(),
            agent: g.agent.clone(),
        }
    }

    fn client(g: &Global, wait: u64) -> Result<Client, Error> {
        let state = location(g).find()?;
        let policy = BackoffPolicy {
            max_attempts: g.retries.saturating_add(1),
            max_quota_wait: Duration::from_secs(wait),
            ..BackoffPolicy::default()
        };
        Ok(Client::new(state)
            .with_base_url(g.url.clone())
            .with_transport(Box::new(client::http::UreqTransport::new(
                Duration::from_secs(g.timeout.max(1)),
            )))
            .with_policy(policy)
            .on_retry(Box::new(note_retry)))
    }

    fn note_retry(n: &RetryNote) {
        let what = if n.reason == "HTTP 429" {
            "waiting as the service asked"
        } else {
            "retrying"
        };
        eprintln!(
            "selfcap: {} {}: {}; {what} in {} (attempt {} of {})",
            n.method,
            n.url,
            n.reason,
            human_secs(n.wait),
            n.attempt + 1,
            n.max_attempts
        );
    }

    fn human_secs(d: Duration) -> String {
        if d < Duration::from_secs(10) {
            format!("{:.1} s", d.as_secs_f64())
        } else {
            format!("{} s", d.as_secs())
        }
    }

    fn run(cli: Cli) -> Result<(), Error> {
        let g = &cli.global;
        match cli.command {
            Command::Keygen { out } => {
                let (dir, key) = Client::keygen(&location(g))?;
                let v = serde_json::json!({
                    "agent_id": key.agent_id().as_str(),
                    "public_key": key.public_key().to_hex(),
                    "state_dir": dir.path().display().to_string(),
                });
                if out.json {
                    print_json(&v);
                } else {
                    print_id(&v);
                    eprintln!("selfcap: next: selfcap bootstrap --url URL");
                }
            }
            Command::Id { out } => {
                let state = location(g).find()?;
                let key = state.load_key()?;
                let v = serde_json::json!({
                    "agent_id": key.agent_id().as_str(),
                    "public_key": key.public_key().to_hex(),
                    "state_dir": state.path().display().to_string(),
                });
                if out.json {
                    print_json(&v);
                } else {
                    print_id(&v);
                }
            }
            Command::Bootstrap { out } => {
                if g.url.is_none() {
                    return Err(Error::Local(
                        "bootstrap needs the service URL: --url URL (or SELFCAP_URL)".into(),
                    ));
                }
                let c = client(g, 0)?;
                let b = c.bootstrap()?;
                if out.json {
                    print_json(&b);
                } else {
                    emit(&format!(
                        "agent_id     {}\nhead_url     {}\ncapsule_url  {}\n",
                        b.agent_id, b.head_url, b.capsule_url
                    ));
                    eprintln!(
                        "selfcap: stored in {}",
                        c.state().file(client::state::SERVICE_FILE).display()
                    );
                }
            }
            Command::Canon { file } => {
                let doc = read_json(file.as_ref())?;
                let mut bytes = jcs::canonical_bytes(&doc);
                if std::io::stdout().is_terminal() {
                    bytes.push(b'\n');
                }
                emit_bytes(&bytes);
            }
            Command::Cursor { file, out } => {
                let doc = read_json(file.as_ref())?;
                let canonical = jcs::canonical_bytes(&doc);
                let cursor = jcs::cursor_of_canonical(&canonical);
                if out.json {
                    print_json(&serde_json::json!({"cursor": cursor, "bytes": canonical.len()}));
                } else {
                    emit(&format!("{cursor}\n"));
                }
            }
            Command::Template => {
                let state = location(g).find()?;
                let agent = state.load_key()?.agent_id();
                print_json(&client::template(&agent));
            }
            Command::Set {
                file,
                no_precheck,
                out,
            } => {
                let capsule = read_json(Some(&file))?;
                let c = client(g, 0)?;
                let s = c.set_desired(&capsule, no_precheck)?;
                if out.json {
                    print_json(&s);
                } else if s.dirty {
                    emit(
                        "dirty: differs from the last accepted write; `selfcap publish` sends it\n",
                    );
                } else {
                    emit("clean: same as the last accepted write\n");
                }
            }
            Command::Status { out } => {
                let s = client(g, 0)?.status()?;
                if out.json {
                    print_json(&s);
                } else {
                    let none = || "-".to_string();
                    emit(&format!(
                        "agent_id    {}\nstate_dir   {}\nservice     {}\npublished   {}\ndesired     {}\n",
                        s.agent_id,
                        s.state_dir,
                        s.base_url.clone().unwrap_or_else(none),
                        match (&s.published_seq, &s.published_cursor) {
                            (Some(q), Some(c)) => format!("seq {q} {c}"),
                            _ => none(),
                        },
                        match &s.desired_cursor {
                            Some(c) if s.dirty => format!("{c} (dirty: run `selfcap publish`)"),
                            Some(c) => format!("{c} (clean)"),
                            None => none(),
                        }
                    ));
                }
            }
            Command::Sign {
                file,
                seq,
                no_precheck,
            } => {
                let capsule = read_json(Some(&file))?;
                let c = client(g, 0)?;
                if !no_precheck {
                    c.precheck(&capsule)?;
                }
                let (_, env) = c.sign(&capsule, seq)?;
                emit(&format!("{}\n", jcs::canonicalize(&env)));
            }
            Command::Put { file, write, out } => {
                let capsule = read_json(Some(&file))?;
                let c = client(g, write.wait)?;
                let r = c.put(&capsule, &put_options(&write));
                report_put(r, out)?;
            }
            Command::Publish { force, write, out } => {
                let c = client(g, write.wait)?;
                match c.publish(&put_options(&write), force) {
                    Ok(PublishOutcome::Clean { seq, cursor }) => {
                        if out.json {
                            print_json(&serde_json::json!({
                                "published": false, "seq": seq, "cursor": cursor
                            }));
                        } else {
                            emit(&format!(
                                "clean: nothing to publish (seq {seq}, {cursor})\n"
                            ));
                        }
                    }
                    Ok(PublishOutcome::Published(r)) => report_put(Ok(r), out)?,
                    Err(e) => report_put(Err(e), out)?,
                }
            }
            Command::Head { agent_id, out } => {
                let c = client(g, 0)?;
                let agent = agent_id.as_deref().map(parse_agent).transpose()?;
                match c.head(agent.as_ref())? {
                    HeadOutcome::Unchanged { etag } => {
                        if out.json {
                            print_json(&serde_json::json!({
                                "status": "unchanged", "cursor": format!("sha256:{etag}")
                            }));
                        } else {
                            emit("unchanged\n");
                        }
                    }
                    HeadOutcome::Changed { head } => {
                        if out.json {
                            print_json(&serde_json::json!({"status": "changed", "head": head}));
                        } else {
                            let w = &head.writes;
                            emit(&format!(
                                "seq {} {} (writes: {} of {} used in 24 h{})\n",
                                head.seq,
                                head.cursor,
                                w.used_24h,
                                w.limit_24h,
                                w.reset_at
                                    .as_deref()
                                    .map(|r| format!(", next frees at {r}"))
                                    .unwrap_or_default()
                            ));
                        }
                    }
                }
            }
            Command::Get { agent_id, pretty } => {
                let c = client(g, 0)?;
                let agent = agent_id.as_deref().map(parse_agent).transpose()?;
                let f = c.get(agent.as_ref())?;
                if pretty {
                    print_json(&f.capsule);
                } else {
                    let mut bytes = f.body;
                    bytes.push(b'\n');
                    emit_bytes(&bytes);
                }
                eprintln!("selfcap: {}", f.cursor);
            }
            Command::Rehydrate { format, json } => {
                let c = client(g, 0)?;
                let r = c.rehydrate()?;
                for w in &r.warnings {
                    eprintln!("selfcap: warning: {w}");
                }
                let from = match r.side {
                    client::Side::Local => "the local copy",
                    client::Side::Server => "the service",
                };
                eprintln!(
                    "selfcap: rehydrated seq {} {} from {from} ({})",
                    r.seq,
                    r.cursor,
                    r.resolution.as_str()
                );
                if json {
                    emit(&format!("{}\n", jcs::canonicalize(&r.capsule)));
                } else {
                    let f = match format {
                        RenderFormat::Text => Format::Text,
                        RenderFormat::Markdown => Format::Markdown,
                    };
                    let mut block = render::render(&r.typed, f);
                    if !block.ends_with('\n') {
                        block.push('\n');
                    }
                    emit(&block);
                }
            }
            Command::History {
                agent_id,
                since,
                limit,
                out,
            } => {
                let c = client(g, 0)?;
                let agent = agent_id.as_deref().map(parse_agent).transpose()?;
                let page = c.history(agent.as_ref(), since.as_deref(), limit)?;
                if out.json {
                    print_json(&page);
                } else {
                    print_history(&page);
                }
            }
            Command::Export { agent_id } => {
                let c = client(g, 0)?;
                let agent = agent_id.as_deref().map(parse_agent).transpose()?;
                let mut bytes = c.export_raw(agent.as_ref())?;
                bytes.push(b'\n');
                emit_bytes(&bytes);
            }
            Command::Verify {
                agent_id,
                export,
                keys,
                out,
            } => {
                let trusted = keys
                    .as_ref()
                    .map(|k| {
                        client::keyring_of(&read_json(Some(k))?)
                            .map_err(|e| Error::Local(format!("{}: {e}", k.display())))
                    })
                    .transpose()?;
                let report = match &export {
                    Some(file) => client::verify_bundle(&read_json(Some(file))?, trusted, None),
                    None => {
                        let c = client(g, 0)?;
                        let agent = agent_id.as_deref().map(parse_agent).transpose()?;
                        c.verify(agent.as_ref(), trusted)?
                    }
                };
                if out.json {
                    print_json(&report);
                } else {
                    print_report(&report);
                }
                for w in &report.warnings {
                    eprintln!("selfcap: warning: {w}");
                }
                if !report.valid {
                    let failing: Vec<&str> = report.failing().iter().map(|c| c.as_str()).collect();
                    return Err(Error::Unverified(format!(
                        "failing checks: {}",
                        failing.join(", ")
                    )));
                }
            }
        }
        Ok(())
    }

    fn print_history(page: &serde_json::Value) {
        let s = |v: &serde_json::Value| match v {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut out = String::new();
        for v in page["versions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            out.push_str(&format!(
                "seq {} {} accepted {} (entry {})\n",
                s(&v["seq"]),
                s(&v["cursor"]),
                s(&v["accepted_at"]),
                s(&v["sequence"])
            ));
        }
        let shown = page["versions"].as_array().map_or(0, Vec::len);
        out.push_str(&format!(
            "{shown} shown; {} retained, {} pruned, {} writes in all\n",
            s(&page["retained"]),
            s(&page["pruned"]),
            s(&page["total_writes"])
        ));
        if let Some(next) = page["next"].as_str() {
            out.push_str(&format!("more: {next}\n"));
        }
        emit(&out);
    }

    fn print_report(r: &self_capsule::core::history::Report) {
        use self_capsule::core::history::CheckName;
        let level = serde_json::to_value(r.level).unwrap_or_default();
        let mut out = format!(
            "{}: agent {} (level {}; {} entries{}; newest seq {} {})\n",
            if r.valid { "valid" } else { "NOT VALID" },
            r.agent_id,
            level.as_str().unwrap_or("?"),
            r.window.entries,
            r.window
                .length
                .map(|l| format!(" of {l} ever written"))
                .unwrap_or_default(),
            r.seq.map_or("-".into(), |s| s.to_string()),
            r.cursor.as_deref().unwrap_or("-")
        );
        for name in CheckName::ALL {
            let c = r.checks.get(name);
            out.push_str(&format!(
                "  {:<9} {} ({} checked)\n",
                name.as_str(),
                if c.ok { "ok" } else { "FAILED" },
                c.checked
            ));
            for f in &c.failures {
                let at = f.sequence.map_or("head".into(), |s| format!("entry {s}"));
                out.push_str(&format!("    {at}: {}\n", f.detail));
            }
        }
        emit(&out);
    }

    fn put_options(w: &WriteOpts) -> PutOptions {
        PutOptions {
            seq: w.seq,
            skip_precheck: w.no_precheck,
        }
    }

    fn report_put(r: Result<PutResult, Error>, out: JsonOut) -> Result<(), Error> {
        match r {
            Ok(r) => {
                let a = &r.accepted;
                if out.json {
                    print_json(a);
                } else {
                    emit(&format!(
                        "accepted seq {} {} (writes: {} of {} used in 24 h, {} left)\n",
                        a.seq,
                        a.cursor,
                        a.writes.used_24h,
                        a.writes.limit_24h,
                        a.writes.remaining_24h
                    ));
                }
                if r.confirmed_from_head {
                    eprintln!("selfcap: the answer was lost; head.json confirms the write");
                }
                Ok(())
            }
            Err(Error::Rejected(rej)) => {
                if out.json {
                    let mut v = serde_json::to_value(&*rej).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("accepted".into(), false.into());
                        let code = ExitCode::for_class(rej.class()).code();
                        o.insert("exit_code".into(), code.into());
                    }
                    print_json(&v);
                }
                Err(Error::Rejected(rej))
            }
            Err(e) => Err(e),
        }
    }

    fn report_rejection(r: &Rejected) {
        let mut lines = vec![format!("selfcap: {}", r.summary())];
        for (code, action) in r.actions() {
            lines.push(format!("  {code}: {action}"));
        }
        for f in r.finding_lines() {
            lines.push(format!("  finding {f}"));
        }
        if let (Some(b), Some(o)) = (r.max_bytes, r.observed_bytes) {
            lines.push(format!("  size: {o} bytes, limit {b}"));
        }
        if let Some(secs) = r.retry_after_sec {
            let at = r.next_write_at.as_deref().unwrap_or("?");
            lines.push(format!(
                "  next write at {at} (in {secs} s); not waiting (`--wait {secs}` would wait and retry)"
            ));
        }
        let code = ExitCode::for_class(r.class());
        lines.push(format!("  exit {}: {}", code.code(), code.describe()));
        eprintln!("{}", lines.join("\n"));
    }

    fn report(e: &Error) {
        match e {
            Error::Rejected(r) => report_rejection(r),
            other => eprintln!("selfcap: {other}"),
        }
    }

    fn parse_agent(s: &str) -> Result<AgentId, Error> {
        AgentId::parse(s).ok_or_else(|| {
            Error::Local(format!(
                "not an agent id: {s:?} (expected 64 lowercase hex characters)"
            ))
        })
    }

    /// Reads and strictly parses a JSON document from a file or stdin.
    fn read_json(file: Option<&PathBuf>) -> Result<Json, Error> {
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

    fn print_id(v: &serde_json::Value) {
        emit(&format!(
            "agent_id    {}\npublic_key  {}\nstate_dir   {}\n",
            v["agent_id"].as_str().unwrap_or(""),
            v["public_key"].as_str().unwrap_or(""),
            v["state_dir"].as_str().unwrap_or("")
        ));
    }

    fn print_json<T: serde::Serialize + ?Sized>(v: &T) {
        let text = serde_json::to_string_pretty(v).unwrap_or_default();
        emit(&format!("{text}\n"));
    }

    fn emit(s: &str) {
        emit_bytes(s.as_bytes());
    }

    /// Writes to stdout; a closed pipe (`selfcap ... | head`) is not an error.
    fn emit_bytes(b: &[u8]) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b).and_then(|_| out.flush());
    }
}
