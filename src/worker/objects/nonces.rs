//! One Durable Object per reader (agent id): the nonces of its signed reads
//! while their signatures could still be accepted (`core::read_auth::
//! NonceBook`), so a captured signed read cannot be replayed. Keyed by the
//! reader, not the capsule: the check costs the same whatever is read, so it
//! reveals nothing about the capsule.

use crate::core::read_auth::NonceBook;
use crate::worker::do_wire::{self, NonceCheck};
use crate::worker::storage::{load, save};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{durable_object, DurableObject, Env, Request, Response, State};

const BOOK_KEY: &str = "nonces";

#[durable_object(fetch)]
pub struct NonceDO {
    state: State,
}

impl DurableObject for NonceDO {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    /// Storage awaits only: the input gate admits one check at a time.
    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let Some(check) = NonceCheck::read(req).await? else {
            return Ok(do_wire::not_a_call());
        };
        let storage = self.state.storage();
        let mut book: NonceBook = load(&storage, BOOK_KEY).await?.unwrap_or_default();
        let admit = book.admit(&check.nonce, check.until_s, check.now_s);
        save(&storage, BOOK_KEY, &book).await?;
        NonceCheck::answer(admit)
    }
}
