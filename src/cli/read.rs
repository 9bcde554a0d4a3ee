//! Reading the current capsule: `head` (the cheap poll), `get` (the exact
//! served bytes) and `rehydrate` (local first, for a restart); `feed`, an
//! agent's projected watch feed; and `meta`, what became of its writes. Status lines go to stderr, so stdout is
//! only the data.

use crate::cli::print::{emit, emit_bytes, print_json};
use crate::cli::{agent_arg, client, reader_client, Global, JsonOut, RenderFormat};
use crate::client::{Error, HeadOutcome, Side};
use crate::core::jcs::{self, CURSOR_PREFIX};
use crate::core::operator::meta::MetaBody;
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

/// `meta [AGENT_ID]`: meta.json (docs/PROTOCOL.md §16), signed as head.json
/// would be; `--json` prints the body.
pub(crate) fn meta(g: &Global, agent_id: Option<&str>, out: JsonOut) -> Result<(), Error> {
    let agent = agent_arg(agent_id)?;
    let c = reader_client(g, agent.as_ref())?;
    let m = c.meta(agent.as_ref())?;
    if out.json {
        print_json(&m);
    } else {
        emit(&meta_text(&m));
    }
    Ok(())
}

/// meta.json for a person: the agent, its tier, writes, then its refusals
/// the most frequent code first with what to do about each.
pub(crate) fn meta_text(m: &MetaBody) -> String {
    let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let w = &m.writes;
    let r = &m.refusals;
    let mut out = format!("agent     {}\n", m.agent_id);
    out.push_str(&format!(
        "tier      {}{}\n",
        m.tier.as_str(),
        m.paid_until
            .as_deref()
            .map(|u| format!(" (paid until {u})"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "writes    {} accepted (first {}, last {}); {} of {} in the last 24 h{}\n",
        w.total,
        or_dash(&w.first_at),
        or_dash(&w.last_at),
        w.in_window.used,
        w.in_window.limit,
        w.in_window
            .reset_at
            .as_deref()
            .map(|t| format!(", next frees at {t}"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "refusals  {} in total, {} in the last 24 h{}\n",
        r.total,
        r.last_24h,
        r.last
            .as_ref()
            .map(|l| format!("; last at {} ({})", l.at, l.reason_codes.join(", ")))
            .unwrap_or_default()
    ));
    let ranked = r.by_count();
    let width = ranked.iter().map(|c| c.code.len()).max().unwrap_or(0);
    for c in ranked {
        out.push_str(&format!(
            "  {:<width$}  {:>5}  {}\n",
            c.code,
            c.count,
            c.action.unwrap_or("(a code this selfcap does not know)")
        ));
    }
    if let Some(h) = &m.history {
        out.push_str(&format!(
            "history   {} entries, {} retained, {} pruned\n",
            h.length, h.retained, h.pruned
        ));
    }
    if let Some(k) = &m.keys {
        out.push_str(&format!(
            "keys      {} events in the key log, {} disputed\n",
            k.length, k.disputed
        ));
    }
    out.push_str(&format!("as of     {}\n", m.as_of));
    out
}
