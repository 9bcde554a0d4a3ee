//! The transport of the typed calls into a Durable Object (`do_wire`,
//! `nonce_wire`): a call is a JSON body posted to the call's internal URL on
//! the named object, its answer a JSON body with status 200. Both halves:
//! [`ask`] for the caller; reading a call and answering it for the object
//! (the objects live in the write Worker only).

use super::body;
use serde::{Deserialize, Serialize};
use worker::{Env, Method, Request, RequestInit};
#[cfg(feature = "worker")]
use worker::{Response, ResponseBuilder};

/// Posts `body` to `url` on the object `name` of `binding` and reads the
/// JSON answer (200 only).
pub async fn ask<A: for<'de> Deserialize<'de>>(
    env: &Env,
    binding: &str,
    name: &str,
    url: &str,
    body: &impl Serialize,
) -> worker::Result<A> {
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(serde_json::to_string(body)?.into()));
    let stub = env
        .durable_object(binding)?
        .id_from_name(name)?
        .get_stub()?;
    let resp = stub
        .fetch_with_request(Request::new_with_init(url, &init)?)
        .await?;
    if resp.status_code() != 200 {
        return Err(format!("{binding} answered {}", resp.status_code()).into());
    }
    Ok(serde_json::from_slice(&body::response_bytes(resp).await?)?)
}

/// Object side: reads a call of type `T` posted to `url`; `None` for
/// anything else.
#[cfg(feature = "worker")]
pub async fn read_posted<T: for<'de> Deserialize<'de>>(
    req: Request,
    url: &str,
) -> worker::Result<Option<T>> {
    // The URL as the runtime serialised it, compared as text: parsing it
    // (`Request::url`) would link the `url` crate's parser and its IDNA
    // tables, about 70 KB of the gzipped Worker, for a string compare.
    if req.method() != Method::Post || req.inner().url() != url {
        return Ok(None);
    }
    Ok(Some(json_of(&req).await?))
}

/// Object side: an internal call's JSON body.
#[cfg(feature = "worker")]
pub async fn json_of<T: for<'de> Deserialize<'de>>(req: &Request) -> worker::Result<T> {
    Ok(serde_json::from_slice(&body::request_bytes(req).await?)?)
}

/// Object side: the JSON answer of an internal call.
#[cfg(feature = "worker")]
pub fn answer(value: &impl Serialize) -> worker::Result<Response> {
    Ok(ResponseBuilder::new()
        .with_status(200)
        .fixed(serde_json::to_vec(value)?))
}

/// Object side: a 200 whose body is `json`, JSON text as stored.
#[cfg(feature = "write")]
pub fn answer_text(json: &str) -> Response {
    ResponseBuilder::new()
        .with_status(200)
        .fixed(json.as_bytes().to_vec())
}

/// Object side: the answer to anything that is not a call.
#[cfg(feature = "write")]
pub fn not_a_call() -> Response {
    ResponseBuilder::new().with_status(404).empty()
}
