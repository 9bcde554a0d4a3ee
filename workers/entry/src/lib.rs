//! The entry Worker: the one a request reaches first. It answers the reads
//! (head.json, capsule.json, history, snapshots, verify.json, keys.json; GET
//! and HEAD, public and signed) from KV and the location's read cache, and
//! forwards every other request to the write Worker through a service
//! binding. Its code is the root library's `entry` feature
//! (`src/worker/entry/`); this crate only names the runtime's entry points.

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod events {
    use self_capsule::worker::entry;
    use worker::{event, web_sys, Context, Env, ScheduleContext, ScheduledEvent};

    #[event(start)]
    fn start() {
        entry::start();
    }

    #[event(fetch)]
    async fn fetch(
        req: web_sys::Request,
        env: Env,
        ctx: Context,
    ) -> worker::Result<web_sys::Response> {
        entry::fetch(req, env, ctx).await
    }

    /// Locally only (the cron trigger is the write Worker's): see
    /// `entry::scheduled`.
    #[event(scheduled)]
    async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
        entry::scheduled(env).await;
    }
}
