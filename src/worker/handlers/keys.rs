//! `GET /api/v1/self/keys`: the keyring history seals are checked against.

use crate::core::history::KeysDoc;
use crate::worker::config::{self, SERVICE_KEY_SECRET};
use crate::worker::failure::Failure;
use crate::worker::http::CachedRead;
use crate::worker::log;
use sha2::{Digest, Sha256};
use worker::{Env, Response};

/// The keyring, tagged by a hash of its bytes (it changes only on rotation).
pub fn handle(env: &Env, read: CachedRead) -> Result<Response, Failure> {
    let keys = config::service_keys(env);
    let Some(doc) = KeysDoc::new(&keys.keyring) else {
        log::event(
            "config_error",
            &[
                ("missing", SERVICE_KEY_SECRET),
                ("effect", "keys unavailable"),
            ],
        );
        return Err(Failure::Unavailable(Some(
            "the service signing key is not configured",
        )));
    };
    let body = serde_json::to_vec(&doc)?;
    let etag = hex::encode(&Sha256::digest(&body)[..16]);
    Ok(read.answer(body, &etag))
}
