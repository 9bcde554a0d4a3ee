//! One Durable Object per payment (`{chain_id}:{tx_hash}:{log_index}`): the
//! invoice and agent it credited. Keyed by the payment itself, so "each
//! payment credits once" holds globally, across all agents and invoices,
//! without a read-then-write race on KV.

use crate::core::upgrade::outcome::PaymentRecord;
use crate::worker::do_wire::{self, PaymentBind};
use crate::worker::storage::{load, save};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{durable_object, DurableObject, Env, Request, Response, State};

const RECORD_KEY: &str = "record";

#[durable_object(fetch)]
pub struct PaymentDO {
    state: State,
}

impl DurableObject for PaymentDO {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    /// Storage awaits only: the input gate makes the bind atomic.
    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let Some(bind) = PaymentBind::read(req).await? else {
            return Ok(do_wire::not_a_call());
        };
        let storage = self.state.storage();
        let stored: Option<PaymentRecord> = load(&storage, RECORD_KEY).await?;
        let bound = match PaymentRecord::bind(stored.as_ref(), &bind.record) {
            Ok(true) => {
                save(&storage, RECORD_KEY, &bind.record).await?;
                true
            }
            Ok(false) => true,
            Err(_) => false,
        };
        PaymentBind::answer(bound)
    }
}
