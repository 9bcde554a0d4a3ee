//! Reading the current capsule: `head` (the cheap poll), `get` (the exact
//! served bytes) and `rehydrate` (local first, for a restart); and `feed`,
//! an agent's projected watch feed. Status lines go to stderr, so stdout is
//! only the data.

use crate::cli::print::{emit, emit_bytes, print_json};
use crate::cli::{agent_arg, client, reader_client, Global, JsonOut, RenderFormat};
use crate::client::{Error, HeadOutcome, Side};
use crate::core::jcs::{self, CURSOR_PREFIX};
use crate::core::render::{self, Format};
use crate::core::urls::FeedDoc;

/// `head [AGENT_ID]`: "unchanged" on a 304 against the stored ETag, else
/// the new head (seq, cursor, write quota).
pub(crate) fn head(g: &Global, agent_id: Option<&str>, out: JsonOut) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    match c.head(agent.as_ref())? {
        HeadOutcome::Unchanged { etag } => {
            if out.json {
                print_json(&serde_json::json!({
                    "status": "unchanged",
                    "cursor": format!("{CURSOR_PREFIX}{}", crate::core::record::split_head_etag(&etag).0)
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
    Ok(())
}

/// `get [AGENT_ID]`: capsule.json as served (or `--pretty`); the cursor on
/// stderr.
pub(crate) fn get(g: &Global, agent_id: Option<&str>, pretty: bool) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    let f = c.get(agent.as_ref())?;
    if pretty {
        print_json(&f.capsule);
    } else {
        let mut bytes = f.body;
        bytes.push(b'\n');
        emit_bytes(&bytes);
    }
    eprintln!("selfcap: {}", f.cursor);
    Ok(())
}

/// `feed`: one document of a projected watch feed, printed as JSON.
pub(crate) fn feed(
    g: &Global,
    agent_id: Option<&str>,
    latest: bool,
    digest: bool,
    since: Option<&str>,
) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    let doc = match (latest, digest) {
        (true, _) => FeedDoc::Latest,
        (_, true) => FeedDoc::Digest,
        _ => FeedDoc::Head,
    };
    print_json(&c.feed(agent.as_ref(), doc, since)?);
    Ok(())
}

/// `rehydrate`: the newer of the local copy and the service's, as the
/// rehydration block (or `--json`: the raw capsule).
pub(crate) fn rehydrate(g: &Global, format: RenderFormat, json: bool) -> Result<(), Error> {
    let c = client(g, 0)?;
    let r = c.rehydrate()?;
    for w in &r.warnings {
        eprintln!("selfcap: warning: {w}");
    }
    let from = match r.side {
        Side::Local => "the local copy",
        Side::Server => "the service",
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
    Ok(())
}
