//! `selfcap admin`: the operator API (docs/PROTOCOL.md §17) from a shell.
//! The token comes from `SELFCAP_ADMIN_TOKEN` only: an argument would land
//! in the shell's history and in every process listing. Without it nothing
//! is sent (exit 1); a token the service refuses exits 6, as any refused
//! credential does.

use crate::cli::print::{emit, note, print_json};
use crate::cli::read::meta_text;
use crate::cli::{agent_arg, service_client, Global, JsonOut};
use crate::client::admin::{AdminToken, AgentsPage, AgentsQuery, ADMIN_TOKEN_ENV};
use crate::client::Error;
use crate::core::limits::Tier;
use clap::{Args, Subcommand, ValueEnum};

pub(crate) const AFTER_HELP: &str = "\
The operator's token is read from SELFCAP_ADMIN_TOKEN (the deployment's Worker secret of
that name), never from an argument. Without it nothing is sent and selfcap exits 1; a token
the service refuses (admin_auth_required, admin_auth_invalid) exits 6; an agent the service
never heard of, or a deployment where the operator API is off, exits 7.";

#[derive(Args)]
pub(crate) struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// One page of agents (agent-id order) and the next page's cursor; --all follows every cursor.
    Agents {
        /// Agents to read per page (1..1000; the service's default is 100).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Only agents on this tier now.
        #[arg(long, value_enum)]
        tier: Option<TierArg>,
        /// Only agents with a refused write in the last 24 hours.
        #[arg(long)]
        refused_24h: bool,
        /// Start at this cursor (the one the previous page printed).
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// Follow the cursors to the end and print every page as one.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        out: JsonOut,
    },
    /// One agent's operator record: its list entry, meta.json and head (private capsules too).
    Agent {
        /// The agent's id.
        agent_id: String,
        #[command(flatten)]
        out: JsonOut,
    },
    /// The deployment's totals (GET /api/v1/admin/stats).
    Stats {
        #[command(flatten)]
        out: JsonOut,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum TierArg {
    Free,
    Plus,
    Pro,
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Tier {
        match t {
            TierArg::Free => Tier::Free,
            TierArg::Plus => Tier::Plus,
            TierArg::Pro => Tier::Pro,
        }
    }
}

/// `selfcap admin …`.
pub(crate) fn run(g: &Global, args: AdminArgs) -> Result<(), Error> {
    // Before anything else: without a token nothing may be sent.
    let token = AdminToken::from_env_value(std::env::var(ADMIN_TOKEN_ENV).ok().as_deref())?;
    match args.command {
        AdminCommand::Agents {
            limit,
            tier,
            refused_24h,
            cursor,
            all,
            out,
        } => {
            let c = service_client(g)?;
            let q = AgentsQuery {
                cursor,
                limit,
                tier: tier.map(Tier::from),
                refused_24h,
            };
            let page = if all {
                let mut n = 0;
                c.admin_agents_all(&token, &q, |p| {
                    n += 1;
                    note(&format!(
                        "page {n}: {} agents of {} read",
                        p.agents.len(),
                        p.scanned
                    ));
                })?
            } else {
                c.admin_agents(&token, &q)?
            };
            if out.json {
                print_json(&page);
            } else {
                emit(&page_text(&page));
            }
        }
        AdminCommand::Agent { agent_id, out } => {
            let agent = agent_arg(Some(&agent_id))?.expect("given");
            let c = service_client(g)?;
            let r = c.admin_agent(&token, &agent)?;
            if out.json {
                print_json(&r);
            } else {
                let mut text = meta_text(&r.meta);
                text.push_str(&match &r.head {
                    Some(h) => format!(
                        "head      seq {} {} at {} ({})\n",
                        h.seq,
                        h.cursor,
                        h.updated_at,
                        if h.private { "private" } else { "public" }
                    ),
                    None => "head      none (nothing accepted yet)\n".into(),
                });
                emit(&text);
            }
        }
        AdminCommand::Stats { out } => {
            let c = service_client(g)?;
            let stats = c.admin_stats(&token)?;
            if out.json {
                print_json(&stats);
            } else {
                let mut lines = Vec::new();
                leaves("", &stats, &mut lines);
                let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
                let text: String = lines
                    .iter()
                    .map(|(k, v)| format!("{k:<width$}  {v}\n"))
                    .collect();
                emit(&text);
            }
        }
    }
    Ok(())
}

/// A page as a table, then where the next page starts.
fn page_text(p: &AgentsPage) -> String {
    let mut out = format!(
        "{:<64}  {:<4}  {:<20}  {:>11}  {:>8}\n",
        "AGENT", "TIER", "LAST WRITE", "REFUSED 24H", "DISPUTED"
    );
    for e in &p.agents {
        out.push_str(&format!(
            "{:<64}  {:<4}  {:<20}  {:>11}  {:>8}\n",
            e.agent_id,
            e.tier.as_str(),
            e.last_write_at.as_deref().unwrap_or("-"),
            e.refusals_24h,
            e.disputed_keys
        ));
    }
    out.push_str(&format!(
        "{} shown of {} read, as of {}\n",
        p.agents.len(),
        p.scanned,
        p.as_of
    ));
    out.push_str(&match &p.cursor {
        Some(c) => format!("next page: --cursor {c}\n"),
        None => "last page\n".into(),
    });
    out
}

/// Every leaf of `v` as `dotted.path` and its value, in the body's order.
fn leaves(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&key, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}
