//! The write Worker: every route of the service (it answers reads too when
//! reached directly), the Durable Object classes and the cron trigger. In
//! the split deployment only the entry Worker calls it, through a service
//! binding, with everything it does not answer itself. Its code is the root
//! library's `worker` feature (`src/worker/`, the Durable Objects exported
//! from there); this crate only names the runtime's entry points.

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
