//! A public request as the handlers see it: the runtime's own request with
//! the few accessors they use (headers, URL, path, method text).
//!
//! Why not `worker::Request`: building one reads the `request.cf` property
//! into it, and that getter alone was ~10 % of a cached poll's CPU in a V8
//! profile (the runtime builds the object afresh on every access). No
//! public route looks at `cf`, so the entry point keeps the runtime's
//! request as it is. The Durable Objects still take `worker::Request`
//! (their trait's signature); their requests come from `do_wire`.

#[cfg(feature = "worker")]
use crate::core::entry::Changed;
use crate::core::urls::split_href;
#[cfg(feature = "worker")]
use std::cell::RefCell;
use worker::url::form_urlencoded;
use worker::web_sys;
use worker::Headers;

/// One incoming public request.
pub struct Incoming {
    raw: web_sys::Request,
    headers: Headers,
    /// The URL as the runtime serialised it.
    href: String,
    /// What answering it changed in agents' head.json and capsule.json, for
    /// the entry Worker when it forwarded the request (`entry_wire`).
    #[cfg(feature = "worker")]
    changed: RefCell<Vec<Changed>>,
}

impl From<web_sys::Request> for Incoming {
    fn from(raw: web_sys::Request) -> Self {
        let headers = Headers(raw.headers());
        let href = raw.url();
        Self {
            raw,
            headers,
            href,
            #[cfg(feature = "worker")]
            changed: RefCell::default(),
        }
    }
}

impl Incoming {
    /// The request headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The path, percent-encoded as sent (what routing matches). Read off
    /// the runtime's URL without parsing it again: a poll needs nothing else.
    pub fn path(&self) -> &str {
        split_href(&self.href).0
    }

    /// The URL as the runtime serialised it.
    pub fn href(&self) -> &str {
        &self.href
    }

    /// The query's `name=value` pairs, decoded.
    pub fn query_pairs(&self) -> form_urlencoded::Parse<'_> {
        let query = split_href(&self.href).1.unwrap_or("");
        form_urlencoded::parse(query.as_bytes())
    }

    /// The method as sent (`core::urls::Method::parse` decides what it is).
    pub fn method(&self) -> String {
        self.raw.method()
    }

    /// The runtime's request (its body stream, its method).
    pub fn inner(&self) -> &web_sys::Request {
        &self.raw
    }

    /// Whether the entry Worker forwarded it (`entry_wire`): the write
    /// Worker is answering behind it.
    #[cfg(feature = "worker")]
    pub fn forwarded(&self) -> bool {
        self.headers
            .has(super::entry_wire::FORWARDED_HEADER)
            .unwrap_or(false)
    }

    /// Notes a change for the entry's copies (`read_cache`).
    #[cfg(feature = "worker")]
    pub fn note_changed(&self, changed: Changed) {
        self.changed.borrow_mut().push(changed);
    }

    /// The changes noted while answering it.
    #[cfg(feature = "worker")]
    pub fn changed(&self) -> Vec<Changed> {
        self.changed.borrow().clone()
    }
}
