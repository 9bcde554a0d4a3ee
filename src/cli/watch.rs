//! `watch [AGENT_ID]`: each new head of an agent as one JSON line on stdout,
//! or `--exec CMD` run once per head; the work is
//! `self_capsule::client::watch`. Progress goes to stderr.

use crate::cli::print::{emit_line, note};
use crate::cli::{agent_arg, reader_client, Global};
use crate::client::http::UreqTransport;
use crate::client::watch::{
    run_hook, Channel, ChannelChoice, Note, TungsteniteConnector, WatchIo, WatchedHead, PING_EVERY,
    POLL_WAIT_SECS,
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

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Auto,
    Ws,
    Longpoll,
}

pub(crate) fn run(g: &Global, args: WatchArgs) -> Result<(), Error> {
    let timeout = Duration::from_secs(g.timeout.max(1));
    // A long-poll answer may be held for POLL_WAIT_SECS before it starts.
    let held = Duration::from_secs(POLL_WAIT_SECS);
    let given = agent_arg(args.agent_id.as_deref())?;
    let c = reader_client(g, given.as_ref())?
        .with_transport(Box::new(UreqTransport::new(timeout + held)));
    let agent = match given {
        Some(a) => a,
        None => c.agent_id()?,
    };
    let choice = match args.transport {
        TransportArg::Auto => ChannelChoice::Auto,
        TransportArg::Ws => ChannelChoice::Only(Channel::WebSocket),
        TransportArg::Longpoll => ChannelChoice::Only(Channel::LongPoll),
    };
    let connector = TungsteniteConnector {
        timeout,
        idle: PING_EVERY,
    };
    let start = Instant::now();
    let exec = args.exec;
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
    c.watch(
        &agent,
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
