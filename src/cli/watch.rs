//! `watch [AGENT_ID]`: each new head of an agent as one JSON line on stdout,
//! or `--exec CMD` run once per head; `feed --watch [AGENT_ID]` the same of
//! its projected watch feed's head ([`follow`] does both). The work is
//! `self_capsule::client::watch`. Progress goes to stderr.

use crate::cli::print::{emit_line, note};
use crate::cli::{agent_arg, reader_client, Global};
use crate::client::http::UreqTransport;
use crate::client::watch::{
    run_hook, Channel, ChannelChoice, Followed, Note, TungsteniteConnector, WatchIo, WatchedHead,
    PING_EVERY, POLL_WAIT_SECS,
};
use crate::client::Error;
use clap::{Args, ValueEnum};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

pub(crate) const AFTER_HELP: &str = "\
Each new head (the head.json body; new: its cursor differs from the last one shown, and the
first one always) is printed as one line of compact JSON and flushed. With --exec CMD, CMD runs
through `sh -c` once per new head instead, with the head on its stdin, one at a time; a failing
CMD is reported on stderr and the watch goes on.

Heads come over a WebSocket (GET /self/AGENT_ID/watch; a text \"ping\" after 25 s of silence keeps
it open) or, when that cannot be used, by long-poll (GET head.json?wait=25 with If-None-Match).
A lost connection is reopened with backoff (1 s doubling to 60 s, plus jitter), and the first head
after it is compared by cursor, so no change is missed; changes faster than a reconnect may show
only as their latest head (`selfcap history --since CURSOR` lists every version). Reads of a
private capsule are signed with this identity's key when needed, as for `head`; watching another
agent's public capsule needs no identity at all.

Runs until interrupted, retrying forever. Exits 7 when the capsule is not readable by this
identity (private and not granted, or made private while watching), 6 when the service refuses
the read signature, 1 on a local error.";

pub(crate) const FEED_AFTER_HELP: &str = "\
With --watch, follows the projected head as it moves instead of reading it once: each new head
(new: its cursor, the watch_cursor, differs from the last one shown, and the first one always)
is printed as one line of compact JSON and flushed; a refresh that moves only sources the watch
does not select prints nothing. With --exec CMD, CMD runs through `sh -c` once per new head
instead, with the head on its stdin, one at a time; a failing CMD is reported on stderr and the
watch goes on.

Heads come over a WebSocket (GET /api/v1/watch/socket?agent_id=AGENT_ID; a text \"ping\" after
25 s of silence keeps it open) or, when that cannot be used, by long-poll (GET
/api/v1/watch/head?agent_id=AGENT_ID&wait=25 with If-None-Match), reconnecting with backoff (1 s
doubling to 60 s, plus jitter) exactly as `selfcap watch` does; reads of a private capsule's feed
are signed when needed, as for `head`. Progress goes to stderr.

--watch runs until interrupted, retrying forever, and stops when a read of the feed would be
refused: with the code `selfcap feed` exits with for that refusal (watch_requires_pro: the plan
is free or lapsed; watch_not_set: the capsule has no watch; watch_not_configured), 7 when the
capsule is not readable by this identity, 6 when the service refuses the read signature, 1 on a
local error.";

#[derive(Args)]
pub(crate) struct WatchArgs {
    /// The agent to watch (default: this identity).
    agent_id: Option<String>,
    /// Instead of printing, run CMD through `sh -c` for each new head, the head JSON on stdin.
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// How heads arrive (for tests): WebSocket falling back to long-poll, or one of them only.
    #[arg(long, value_enum, default_value = "auto", hide = true)]
    transport: TransportArg,
}

/// `--transport` of `watch` and `feed --watch`.
#[derive(Clone, Copy, Default, ValueEnum)]
pub(crate) enum TransportArg {
    #[default]
    Auto,
    Ws,
    Longpoll,
}

pub(crate) fn run(g: &Global, args: WatchArgs) -> Result<(), Error> {
    follow(
        g,
        args.agent_id.as_deref(),
        Followed::Head,
        args.exec,
        args.transport,
    )
}

/// Follows `followed` of `agent_id` (default: this identity): each new
/// head printed as one line, or handed to `exec`, until a fatal error.
pub(crate) fn follow(
    g: &Global,
    agent_id: Option<&str>,
    followed: Followed,
    exec: Option<String>,
    transport: TransportArg,
) -> Result<(), Error> {
    let timeout = Duration::from_secs(g.timeout.max(1));
    // A long-poll answer may be held for POLL_WAIT_SECS before it starts.
    let held = Duration::from_secs(POLL_WAIT_SECS);
    let given = agent_arg(agent_id)?;
    let c = reader_client(g, given.as_ref())?
        .with_transport(Box::new(UreqTransport::new(timeout + held)));
    let agent = match given {
        Some(a) => a,
        None => c.agent_id()?,
    };
    let choice = match transport {
        TransportArg::Auto => ChannelChoice::Auto,
        TransportArg::Ws => ChannelChoice::Only(Channel::WebSocket),
        TransportArg::Longpoll => ChannelChoice::Only(Channel::LongPoll),
    };
    let connector = TungsteniteConnector {
        timeout,
        idle: PING_EVERY,
    };
    let start = Instant::now();
    let mut on_head = |h: &WatchedHead| match &exec {
        Some(cmd) => {
            if let Err(e) = run_hook(cmd, &h.line) {
                note(&format!("--exec: {e}; watching on"));
            }
            ControlFlow::Continue(())
        }
        // Nobody reads stdout any more (`selfcap watch | head -1`): done.
        None if emit_line(&h.line) => ControlFlow::Continue(()),
        None => ControlFlow::Break(()),
    };
    c.follow(
        &agent,
        followed,
        choice,
        &mut WatchIo {
            connector: &connector,
            clock: &move || start.elapsed(),
            on_head: &mut on_head,
            on_note: &|n: &Note| note(&n.to_string()),
            stopped: &|| false,
        },
    )
}
