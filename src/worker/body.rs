//! Reading a request body without ever buffering more than a cap.
//!
//! `Request::bytes()` would happily buffer a gigabyte before we could look at
//! its length. Instead: refuse early on a declared `Content-Length` above the
//! cap, otherwise pull chunks from the stream and cancel it the moment the
//! running total passes the cap (chunked uploads declare no length).

use worker::js_sys::{Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::ReadableStreamDefaultReader;
use worker::Request;

/// Why a body was not read.
pub enum BodyError {
    /// More than the cap. `observed` is the declared length if there was one,
    /// otherwise how far we read before stopping (so at least cap + 1).
    TooLarge { observed: u64 },
    /// The stream failed: the client's body ended before its declared
    /// length or broke off. Always the client's doing as far as the answer
    /// goes (a 400 that changes nothing).
    Read,
}

/// The whole body, or why not: more than `cap` bytes, or unreadable.
pub async fn read_capped(req: &Request, cap: usize) -> Result<Vec<u8>, BodyError> {
    if let Ok(Some(len)) = req.headers().get("Content-Length") {
        if let Ok(len) = len.trim().parse::<u64>() {
            if len > cap as u64 {
                return Err(BodyError::TooLarge { observed: len });
            }
        }
    }
    let Some(stream) = req.inner().body() else {
        return Ok(Vec::new());
    };
    let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    let mut out = Vec::new();
    loop {
        let chunk = JsFuture::from(reader.read())
            .await
            .map_err(|_| BodyError::Read)?;
        let done = Reflect::get(&chunk, &JsValue::from_str("done"))
            .map(|d| d.is_truthy())
            .unwrap_or(true);
        if done {
            return Ok(out);
        }
        let value =
            Reflect::get(&chunk, &JsValue::from_str("value")).map_err(|_| BodyError::Read)?;
        let Some(bytes) = value.dyn_ref::<Uint8Array>() else {
            return Err(BodyError::Read);
        };
        let n = bytes.length() as usize;
        if out.len() + n > cap {
            // Stop the upload; we have seen enough to refuse it.
            let _ = reader.cancel();
            return Err(BodyError::TooLarge {
                observed: (out.len() + n) as u64,
            });
        }
        let start = out.len();
        out.resize(start + n, 0);
        bytes.copy_to(&mut out[start..]);
    }
}
