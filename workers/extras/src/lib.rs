//! The extras Worker: the routes off the capsule's write path (POST /mcp,
//! the upgrade's quote, claim and x402, projected feeds) and the cron
//! trigger (the world feed's refresh), kept out of the write Worker so that
//! each Worker stays small. It holds no Durable Object class: it calls the
//! write Worker's objects through cross-script bindings. In the deployed
//! service only the entry Worker calls it, through a service binding. Its
//! code is the root library's `extras` feature; this crate only names the
//! runtime's entry points.

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod events {
    use worker::{event, web_sys, Context, Env, ScheduleContext, ScheduledEvent};

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

    #[event(scheduled)]
    async fn scheduled(event: ScheduledEvent, env: Env, ctx: ScheduleContext) {
        self_capsule::worker::scheduled(event, env, ctx).await;
    }
}
