//! The write Worker: the Durable Object classes (the agent's object runs
//! the write check, safety scanner included) and the routes of the
//! capsule's write path: writes, key events, long-polls, export.json, the
//! agent's WebSocket, bootstrap and the keyring (it answers reads too when
//! reached directly). In the deployed service only the entry Worker calls
//! it, through a service binding; the extras Worker reaches its objects
//! through cross-script bindings. Its code is the root library's `write`
//! feature (`src/worker/`, the Durable Objects exported from there); this
//! crate only names the runtime's entry points.

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod events {
    use worker::{event, web_sys, Context, Env};

    #[event(start)]
    fn start() {
        self_capsule::worker::start();
    }

    #[event(fetch)]
    async fn fetch(
        req: web_sys::Request,
        env: Env,
        ctx: Context,
    ) -> worker::Result<web_sys::Response> {
        self_capsule::worker::fetch(req, env, ctx).await
    }
}
