//! The entry Worker's one way to the write Worker: its service binding
//! (`WRITER` in wrangler.toml), a call into the same location with no
//! network hop. The request goes as it came (method, URL, headers, its body
//! still a stream, a WebSocket upgrade as an upgrade), and the answer comes
//! back untouched (a 101 with its socket included).

use crate::core::entry::Changed;
use crate::worker::entry_wire::{CHANGED_HEADER, CRON_URL, FORWARDED_HEADER};
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, worker_sys, Env};

/// The service binding to the write Worker.
pub const WRITER_BINDING: &str = "WRITER";

/// The write Worker's answer to `req`. What it says the request changed in
/// an agent's head.json or capsule.json is applied to this location's
/// copies before the answer goes out, without the saying.
pub async fn to_writer(req: &Incoming, env: &Env) -> worker::Result<web_sys::Response> {
    let writer: worker_sys::Fetcher = env.service(WRITER_BINDING)?.into_rpc();
    let headers = req.headers().clone();
    headers.set(FORWARDED_HEADER, "1")?;
    let init = web_sys::RequestInit::new();
    init.set_headers(&headers.0);
    let answer = JsFuture::from(writer.fetch_with_init(req.inner(), &init)?).await?;
    let answer: web_sys::Response = answer.dyn_into()?;
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

/// Hands a scheduled event to the write Worker (`entry_wire::CRON_URL`;
/// see `entry::scheduled`).
pub async fn scheduled_to_writer(env: &Env) -> worker::Result<()> {
    let writer: worker_sys::Fetcher = env.service(WRITER_BINDING)?.into_rpc();
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    let answer = JsFuture::from(writer.fetch_with_str_and_init(CRON_URL, &init)?).await?;
    let status = answer.dyn_into::<web_sys::Response>()?.status();
    if status != 204 {
        return Err(format!("the write Worker answered the cron {status}").into());
    }
    Ok(())
}
