//! `POST /api/v1/self/bootstrap`: reads the (small) body and answers with
//! `core::bootstrap`. Touches no storage.

use crate::core::bootstrap::{self, MAX_BOOTSTRAP_BODY};
use crate::core::reason::ReasonCode;
use crate::worker::body::{self, BodyError};
use crate::worker::config::Config;
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::request::Incoming;
use worker::Response;

/// The answer for one public key. URLs are built on the configured public
/// origin when there is one, else on the request URL's origin (on
/// Cloudflare that is a hostname routed to this Worker).
pub async fn handle(req: &Incoming, cfg: &Config) -> Result<Response, Failure> {
    let bytes = body::read_capped(req, MAX_BOOTSTRAP_BODY)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge { .. } => Failure::code(ReasonCode::PayloadTooLarge),
            BodyError::Read => Failure::refused(
                ReasonCode::InvalidJson,
                "the request body could not be read to its end",
            ),
        })?;
    let answer = bootstrap::answer(&bytes, &cfg.origin(req.href()), &cfg.tiers.free)?;
    Ok(http::json(200, &answer, NO_STORE)?)
}
