//! Reading a request body without ever buffering more than a cap.
//!
//! `Request::bytes()` would happily buffer a gigabyte before we could look at
//! its length. Instead: refuse early on a declared `Content-Length` above the
//! cap, otherwise pull chunks from the stream and stop the moment the
//! running total passes the cap (chunked uploads declare no length).
//!
//! A body that is refused, or never looked at (an early 404, 405 or 503), is
//! read and discarded up to [`DRAIN_MAX`] before the answer goes out. Locally
//! (workerd under Miniflare or `wrangler dev`) an answer sent with request
//! bytes still unread leaves them on the kept-alive connection, and the
//! client's next request on it fails with `ECONNRESET` (measured: 16 of 400
//! requests alternating a 70 KiB PUT refused as too large and another refused
//! before reading its body). The drain is bounded twice, so a client cannot
//! hold the answer back: at most [`DRAIN_MAX`] bytes (a declared length
//! beyond the cap plus that is not drained at all) and at most
//! [`DRAIN_WAIT`] of waiting for them (a client that stalls). Then the
//! upload is cancelled and the answer goes out anyway.

use crate::worker::request::Incoming;
use futures_util::future::select;
use std::time::Duration;
use worker::js_sys::{Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::{self, ReadableStream, ReadableStreamDefaultReader};
#[cfg(feature = "worker")]
use worker::Request;
use worker::{Delay, Response};

/// Why a body was not read.
pub enum BodyError {
    /// More than the cap. `observed` is the declared length if there was one,
    /// otherwise how far we read before stopping (so at least cap + 1).
    #[cfg(feature = "worker")]
    TooLarge { observed: u64 },
    /// The stream failed: the client's body ended before its declared
    /// length or broke off. Always the client's doing as far as the answer
    /// goes (a 400 that changes nothing).
    Read,
}

/// How much of a refused body is read and discarded before answering.
pub const DRAIN_MAX: usize = 1 << 20;

/// How long a drain may wait for the client's bytes.
pub const DRAIN_WAIT: Duration = Duration::from_millis(1000);

/// The whole body, or why not: more than `cap` bytes, or unreadable.
#[cfg(feature = "worker")]
pub async fn read_capped(req: &Incoming, cap: usize) -> Result<Vec<u8>, BodyError> {
    let stream = req.inner().body();
    let reader: Option<ReadableStreamDefaultReader> =
        stream.map(|s| s.get_reader().unchecked_into());
    if let Some(len) = declared_length(req).filter(|&len| len > cap as u64) {
        if let Some(r) = &reader {
            if len <= (cap + DRAIN_MAX) as u64 {
                drain(r, DRAIN_MAX).await;
            } else {
                let _ = r.cancel();
            }
        }
        return Err(BodyError::TooLarge { observed: len });
    }
    let Some(reader) = reader else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    loop {
        let Some(bytes) = next_chunk(&reader).await? else {
            return Ok(out);
        };
        let n = bytes.length() as usize;
        if out.len() + n > cap {
            // We have seen enough to refuse it.
            drain(&reader, DRAIN_MAX).await;
            return Err(BodyError::TooLarge {
                observed: (out.len() + n) as u64,
            });
        }
        let start = out.len();
        out.resize(start + n, 0);
        bytes.copy_to(&mut out[start..]);
    }
}

/// The length `req` declares (`Content-Length`), when it declares one that
/// reads; a chunked upload declares none.
pub fn declared_length(req: &Incoming) -> Option<u64> {
    let len = req.headers().get("Content-Length").ok().flatten()?;
    len.trim().parse().ok()
}

/// The stream's next chunk; `None` at its end.
async fn next_chunk(reader: &ReadableStreamDefaultReader) -> Result<Option<Uint8Array>, BodyError> {
    let chunk = JsFuture::from(reader.read())
        .await
        .map_err(|_| BodyError::Read)?;
    let done = Reflect::get(&chunk, &JsValue::from_str("done"))
        .map(|d| d.is_truthy())
        .unwrap_or(true);
    if done {
        return Ok(None);
    }
    let value = Reflect::get(&chunk, &JsValue::from_str("value")).map_err(|_| BodyError::Read)?;
    value
        .dyn_into::<Uint8Array>()
        .map(Some)
        .map_err(|_| BodyError::Read)
}

/// A whole response body in one `arrayBuffer()` call. worker-rs's
/// `Response::bytes` pulls the stream chunk by chunk through a reader: in a
/// V8 CPU profile of polls answered from the location's cache that was ~14 %
/// of the isolate's time (~4 % this way); every Durable Object hop reads one.
pub async fn response_bytes(resp: Response) -> worker::Result<Vec<u8>> {
    let raw: web_sys::Response = resp.into();
    bytes_of(raw.array_buffer()?).await
}

/// The whole of `stream` in one `arrayBuffer()` call (see
/// [`response_bytes`]). Uncapped: for a body whose declared length the
/// caller checked, whose runtime ends it there.
#[cfg(feature = "entry")]
pub async fn stream_bytes(stream: &ReadableStream) -> worker::Result<Vec<u8>> {
    let read = web_sys::Response::new_with_opt_readable_stream(Some(stream))?;
    bytes_of(read.array_buffer()?).await
}

/// The bytes an `arrayBuffer()` promise comes to.
async fn bytes_of(buffer: worker::js_sys::Promise) -> worker::Result<Vec<u8>> {
    let buffer = JsFuture::from(buffer).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// A whole request body in one `arrayBuffer()` call (see [`response_bytes`]).
/// Uncapped: for the internal calls between the Worker and its objects,
/// whose bodies the Worker built.
#[cfg(feature = "worker")]
pub async fn request_bytes(req: &Request) -> worker::Result<Vec<u8>> {
    bytes_of(req.inner().array_buffer()?).await
}

/// After the answer is decided: discards a body nobody read (`stream` is
/// the request's body, taken before routing). A body a handler read is
/// locked by its reader and left alone ([`read_capped`] drains its own).
pub async fn discard_unread(stream: Option<ReadableStream>) {
    if let Some(stream) = stream.filter(|s| !s.locked()) {
        let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
        drain(&reader, DRAIN_MAX).await;
    }
}

/// Reads and discards the rest of a refused body, up to `max` bytes and
/// [`DRAIN_WAIT`]; then cancels the upload if it is still going.
async fn drain(reader: &ReadableStreamDefaultReader, max: usize) {
    let discard = async {
        let mut seen = 0usize;
        while seen <= max {
            match next_chunk(reader).await {
                Ok(Some(bytes)) => seen += bytes.length() as usize,
                Ok(None) | Err(_) => break,
            }
        }
    };
    let _ = select(Box::pin(discard), Delay::from(DRAIN_WAIT)).await;
    let _ = reader.cancel();
}
