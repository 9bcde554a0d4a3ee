//! Per-request configuration read from the Worker's environment (`[vars]` in
//! wrangler.toml). Reading a handful of vars is cheap, so nothing is cached
//! across requests and a redeploy with new vars takes effect immediately.

use crate::core::limits::TierTable;
use worker::{console_warn, Env};

/// Binding names, shared by the Worker and the Durable Objects.
pub const KV_BINDING: &str = "SELF";
pub const AGENT_DO_BINDING: &str = "AGENT_DO";
pub const IP_QUOTA_DO_BINDING: &str = "IP_QUOTA_DO";

pub struct Config {
    pub tiers: TierTable,
    /// `SELFCAP_TEST_CLOCK == "1"`: honour the test clock header.
    pub test_clock: bool,
}

impl Config {
    pub fn from_env(env: &Env) -> Config {
        let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
        let (tiers, ignored) = TierTable::default().with_overrides(var);
        if !ignored.is_empty() {
            // Loud but not fatal: a typo in a var must not take the service down,
            // and the default (spec) limit stays in force.
            console_warn!(
                "{{\"event\":\"config_ignored\",\"vars\":{}}}",
                serde_json::to_string(&ignored).unwrap_or_default()
            );
        }
        Config {
            tiers,
            test_clock: var("SELFCAP_TEST_CLOCK").as_deref() == Some("1"),
        }
    }
}
