//! The entry Worker's way to the two Workers behind it: a service binding
//! each (`WRITER` and `EXTRAS` in wrangler.toml), a call into the same
//! location with no network hop. The request goes as it came (method, URL,
//! headers, its body still a stream, a WebSocket upgrade as an upgrade), and
//! the answer comes back untouched (a 101 with its socket included).

use crate::core::entry::Changed;
use crate::worker::entry_wire::{CHANGED_HEADER, CRON_URL, FORWARDED_HEADER};
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, worker_sys, Env};

/// The service binding to the write Worker.
pub const WRITER_BINDING: &str = "WRITER";

/// The service binding to the extras Worker.
pub const EXTRAS_BINDING: &str = "EXTRAS";

/// The answer to `req` of the Worker behind `binding`. What it says the
/// request changed in an agent's head.json or capsule.json is applied to
/// this location's copies before the answer goes out, without the saying.
/// `body`: the other branch of a body the entry teed to read itself, sent
/// in place of the request's own (`None`: the request's, unread).
pub async fn to(
    binding: &str,
    req: &Incoming,
    env: &Env,
    body: Option<&web_sys::ReadableStream>,
) -> worker::Result<web_sys::Response> {
    let behind: worker_sys::Fetcher = env.service(binding)?.into_rpc();
    let headers = req.headers().clone();
    headers.set(FORWARDED_HEADER, "1")?;
    let init = web_sys::RequestInit::new();
    init.set_headers(&headers.0);
    let sent = match body {
        None => behind.fetch_with_init(req.inner(), &init)?,
        Some(body) => {
            init.set_method(&req.method());
            init.set_body(body);
            behind.fetch_with_str_and_init(req.href(), &init)?
        }
    };
    relayed(JsFuture::from(sent).await?.dyn_into()?).await
}

/// The answer of the Worker behind, its changes applied (see [`to`]).
async fn relayed(answer: web_sys::Response) -> worker::Result<web_sys::Response> {
    let Some(changed) = answer.headers().get(CHANGED_HEADER)? else {
        return Ok(answer);
    };
    for c in Changed::parse_all(&changed) {
        read_cache::apply(&c).await;
    }
    // The answer as it came, the header aside (a fetched answer's headers
    // cannot be changed in place).
    let headers = web_sys::Headers::new_with_headers(&answer.headers())?;
    headers.delete(CHANGED_HEADER)?;
    let init = web_sys::ResponseInit::new();
    init.set_status(answer.status());
    init.set_status_text(&answer.status_text());
    init.set_headers(&headers);
    web_sys::Response::new_with_opt_readable_stream_and_init(answer.body().as_ref(), &init)
        .map_err(Into::into)
}

/// Hands a scheduled event to the extras Worker, whose cron it is
/// (`entry_wire::CRON_URL`; see `entry::scheduled`).
pub async fn scheduled_to_extras(env: &Env) -> worker::Result<()> {
    let extras: worker_sys::Fetcher = env.service(EXTRAS_BINDING)?.into_rpc();
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    let answer = JsFuture::from(extras.fetch_with_str_and_init(CRON_URL, &init)?).await?;
    let status = answer.dyn_into::<web_sys::Response>()?.status();
    if status != 204 {
        return Err(format!("the extras Worker answered the cron {status}").into());
    }
    Ok(())
}
