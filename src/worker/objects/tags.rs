//! One Durable Object per chain and price: the invoice tags held by
//! unexpired invoices at that price (`core::upgrade::invoice::TagBook`), so
//! no two open invoices anywhere ask for the same amount.

use crate::core::upgrade::invoice::TagBook;
use crate::worker::do_wire::{self, TagAsk};
use crate::worker::storage::{load, save};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{durable_object, DurableObject, Env, Request, Response, State};

const BOOK_KEY: &str = "book";

#[durable_object(fetch)]
pub struct TagsDO {
    state: State,
}

impl DurableObject for TagsDO {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    /// Storage awaits only: the input gate keeps allocations one at a time.
    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let Some(ask) = TagAsk::read(req).await? else {
            return Ok(do_wire::not_a_call());
        };
        let storage = self.state.storage();
        let mut book: TagBook = load(&storage, BOOK_KEY).await?.unwrap_or_default();
        let tag = book.allocate(ask.now_ms, ask.expires_at_ms, ask.random);
        save(&storage, BOOK_KEY, &book).await?;
        TagAsk::answer(tag)
    }
}
