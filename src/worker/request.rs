//! A public request as the handlers see it: the runtime's own request with
//! the few accessors they use (headers, URL, path, method text).
//!
//! Why not `worker::Request`: building one reads the `request.cf` property
//! into it, and that getter alone was ~10 % of a cached poll's CPU in a V8
//! profile (the runtime builds the object afresh on every access). No
//! public route looks at `cf`, so the entry point keeps the runtime's
//! request as it is. The Durable Objects still take `worker::Request`
//! (their trait's signature); their requests come from `do_wire`.

use worker::web_sys;
use worker::{Headers, Url};

/// One incoming public request.
pub struct Incoming {
    raw: web_sys::Request,
    headers: Headers,
}

impl From<web_sys::Request> for Incoming {
    fn from(raw: web_sys::Request) -> Self {
        let headers = Headers(raw.headers());
        Self { raw, headers }
    }
}

impl Incoming {
    /// The request headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The full URL, parsed.
    pub fn url(&self) -> worker::Result<Url> {
        Ok(Url::parse(&self.raw.url())?)
    }

    /// The method as sent (`core::urls::Method::parse` decides what it is).
    pub fn method(&self) -> String {
        self.raw.method()
    }

    /// The runtime's request (its body stream, its method).
    pub fn inner(&self) -> &web_sys::Request {
        &self.raw
    }
}
