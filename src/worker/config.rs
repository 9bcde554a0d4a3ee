//! Configuration read from the Worker's environment (`[vars]` in
//! wrangler.toml, secrets). An isolate runs one deployed version with one set
//! of vars and secrets (changing either deploys a new version, which starts
//! new isolates), so [`Config::of`] and [`service_keys`] read them once per
//! isolate and hand out the same value after that. Reading them per request
//! cost about a millisecond of CPU in a write (some twenty lookups, most of
//! unset vars, plus deriving the service key's public half), paid by every
//! read and twice by every write (the Worker and the agent's object).

#[cfg(feature = "worker")]
use crate::core::bootstrap::parse_origin;
#[cfg(feature = "worker")]
use crate::core::crypto::PublicKey;
#[cfg(feature = "worker")]
use crate::core::history::{Keyring, ServiceKey};
use crate::core::limits::TierTable;
#[cfg(feature = "worker")]
use crate::core::upgrade::config::{UpgradeConfig, RPC_URL_VAR};
#[cfg(feature = "worker")]
use crate::core::upgrade::x402::cdp;
#[cfg(feature = "worker")]
use crate::core::upgrade::x402::config::X402Config;
use std::cell::OnceCell;
use std::rc::Rc;
use worker::{console_warn, Env};

// Wasm isolates are single-threaded: one value per isolate.
thread_local! {
    static CONFIG: OnceCell<Rc<Config>> = const { OnceCell::new() };
}
#[cfg(feature = "worker")]
thread_local! {
    static SERVICE_KEYS: OnceCell<Rc<ServiceKeys>> = const { OnceCell::new() };
}

/// The KV namespace binding.
pub const KV_BINDING: &str = "SELF";
/// The per-agent Durable Object binding (the entry Worker's across, for
/// the writes it sends straight to the agent's object).
pub const AGENT_DO_BINDING: &str = "AGENT_DO";
/// The per-address quota Durable Object binding.
#[cfg(feature = "worker")]
pub const IP_QUOTA_DO_BINDING: &str = "IP_QUOTA_DO";
/// The per-price invoice tag book binding.
#[cfg(feature = "worker")]
pub const TAGS_DO_BINDING: &str = "TAGS_DO";
/// The per-payment record binding.
#[cfg(feature = "worker")]
pub const PAYMENT_DO_BINDING: &str = "PAYMENT_DO";
/// One object per reader (agent id): the nonces of its signed reads (in the
/// entry Worker, a cross-script binding to the write Worker's class).
pub const NONCE_DO_BINDING: &str = "NONCE_DO";
/// The feed objects (`core::projection::push::shard_of`): watchers and
/// long-polls of projected heads.
#[cfg(feature = "worker")]
pub const FEED_DO_BINDING: &str = "FEED_DO";
/// The stats shards (`objects::stats`).
#[cfg(feature = "worker")]
pub const STATS_DO_BINDING: &str = "STATS_DO";
/// Var naming the service's public origin (`https://host[:port]`), which
/// bootstrap builds its absolute URLs on.
#[cfg(feature = "worker")]
pub const PUBLIC_ORIGIN_VAR: &str = "SELFCAP_PUBLIC_ORIGIN";

/// Var naming the ddv1 world feed projected watch feeds read (a base URL,
/// `https://host[:port]`); unset, the feed answers `watch_not_configured`.
#[cfg(feature = "worker")]
pub const WATCH_UPSTREAM_VAR: &str = "SELFCAP_WATCH_UPSTREAM";

/// The vars a request needs.
pub struct Config {
    /// The tier table with any overrides.
    pub tiers: TierTable,
    /// `SELFCAP_TEST_CLOCK == "1"`: honour the test clock header.
    pub test_clock: bool,
    /// [`PUBLIC_ORIGIN_VAR`], when set and well-formed.
    #[cfg(feature = "worker")]
    pub public_origin: Option<String>,
    /// [`WATCH_UPSTREAM_VAR`], when set and well-formed.
    #[cfg(feature = "worker")]
    pub watch_upstream: Option<String>,
}

impl Config {
    /// The isolate's configuration (read from `env` on first use).
    pub fn of(env: &Env) -> Rc<Config> {
        CONFIG.with(|c| c.get_or_init(|| Rc::new(Config::from_env(env))).clone())
    }

    fn from_env(env: &Env) -> Config {
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
            #[cfg(feature = "worker")]
            public_origin: origin_var(var, PUBLIC_ORIGIN_VAR),
            #[cfg(feature = "worker")]
            watch_upstream: origin_var(var, WATCH_UPSTREAM_VAR),
        }
    }
}

/// The origin var `name` (`SELFCAP_PUBLIC_ORIGIN`, `SELFCAP_WATCH_UPSTREAM`)
/// when set and well-formed; a malformed one is logged and ignored.
#[cfg(feature = "worker")]
fn origin_var(var: impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    let raw = var(name).filter(|v| !v.trim().is_empty());
    let parsed = raw.as_deref().and_then(parse_origin);
    if raw.is_some() && parsed.is_none() {
        console_warn!(
            "{{\"event\":\"config_ignored\",\"var\":\"{name}\",\"problem\":\"not http(s)://host[:port]\"}}"
        );
    }
    parsed
}

#[cfg(feature = "worker")]
impl Config {
    /// The origin absolute URLs handed to agents are built on: the
    /// configured public origin, else the request URL's (on Cloudflare, a
    /// hostname routed to this Worker).
    pub fn origin(&self, href: &str) -> String {
        match &self.public_origin {
            Some(o) => o.clone(),
            None => crate::core::urls::origin_of(href),
        }
    }
}

/// The USDC upgrade's settings, or (as `Err`) what keeps it off, by var
/// name. Read only by the quote and claim paths (parsing addresses is not
/// work a read should pay for), so not part of [`Config`].
#[cfg(feature = "worker")]
pub fn upgrade(env: &Env) -> Result<UpgradeConfig, Vec<String>> {
    UpgradeConfig::from_vars(|name| {
        let var = env.var(name).ok().map(|v| v.to_string());
        // The RPC URL may carry an API key, so it may be a secret.
        var.or_else(|| {
            (name == RPC_URL_VAR)
                .then(|| env.secret(name).ok().map(|s| s.to_string()))
                .flatten()
        })
    })
}

/// The x402 endpoint's settings on top of the upgrade's: `Ok(None)` when no
/// facilitator is configured (x402 off; the classic upgrade stays on),
/// `Err` naming each malformed var.
///
/// With `X402_FACILITATOR_AUTH=cdp` this also reads the CDP API key from the
/// secrets `CDP_API_KEY_ID` and `CDP_API_KEY_SECRET` (`wrangler secret put`);
/// the problems it reports name them, never their values.
#[cfg(feature = "worker")]
pub fn x402(env: &Env, up: &UpgradeConfig) -> Result<Option<X402Config>, Vec<String>> {
    X402Config::from_vars(
        |name| {
            if name == cdp::KEY_ID_SECRET || name == cdp::KEY_SECRET_SECRET {
                env.secret(name).ok().map(|s| s.to_string())
            } else {
                env.var(name).ok().map(|v| v.to_string())
            }
        },
        up.chain_id,
    )
}

/// Worker secret holding the operator API's bearer token.
#[cfg(feature = "extras")]
pub const ADMIN_TOKEN_SECRET: &str = "SELFCAP_ADMIN_TOKEN";
/// Vars naming the Cloudflare Access application in front of the operator
/// API (both, or neither).
#[cfg(feature = "extras")]
pub const ACCESS_VARS: [&str; 2] = ["SELFCAP_ACCESS_TEAM_DOMAIN", "SELFCAP_ACCESS_AUD"];

/// What guards the operator API here (off without any credential). A
/// credential that is set but unusable is logged by name, never by value,
/// and leaves its way in off.
#[cfg(feature = "extras")]
pub fn admin(env: &Env) -> crate::core::operator::auth::AdminConfig {
    use crate::core::operator::auth::{AdminConfig, ConfigProblem};
    let read = |name: &str| {
        env.secret(name)
            .ok()
            .map(|s| s.to_string())
            .or_else(|| env.var(name).ok().map(|v| v.to_string()))
    };
    let [team, aud] = ACCESS_VARS.map(read);
    let (cfg, problems) = AdminConfig::of(
        read(ADMIN_TOKEN_SECRET).as_deref(),
        team.as_deref(),
        aud.as_deref(),
    );
    for p in problems {
        let why = match p {
            ConfigProblem::TokenTooShort => {
                "SELFCAP_ADMIN_TOKEN is shorter than 32 characters: token access stays off"
            }
            ConfigProblem::Access(why) => why,
        };
        super::log::event("config_error", &[("area", "admin"), ("problem", why)]);
    }
    cfg
}

/// Worker secret holding the service's Ed25519 seed (64 hex characters).
#[cfg(feature = "worker")]
pub const SERVICE_KEY_SECRET: &str = "SERVICE_SIGNING_KEY";
/// Var listing retired service public keys (comma-separated hex), so seals
/// made before a rotation still verify.
#[cfg(feature = "worker")]
pub const RETIRED_KEYS_VAR: &str = "SERVICE_RETIRED_KEYS";

/// The service's sealing key and the keyring it publishes.
#[cfg(feature = "worker")]
pub struct ServiceKeys {
    /// `None` when the secret is missing or malformed: writes then fail
    /// closed (503) rather than sealing with a made-up key. Read by the
    /// agent's object (the write Worker's) only.
    #[cfg_attr(not(feature = "write"), allow(dead_code))]
    pub signing: Option<ServiceKey>,
    pub keyring: Keyring,
}

/// The isolate's service keys (read from `env` on first use; the service
/// key's public half is derived once).
#[cfg(feature = "worker")]
pub fn service_keys(env: &Env) -> Rc<ServiceKeys> {
    SERVICE_KEYS.with(|k| k.get_or_init(|| Rc::new(read_service_keys(env))).clone())
}

#[cfg(feature = "worker")]
fn read_service_keys(env: &Env) -> ServiceKeys {
    let raw = env
        .secret(SERVICE_KEY_SECRET)
        .ok()
        .map(|s| s.to_string())
        .filter(|s| !s.trim().is_empty());
    let signing = raw.as_deref().and_then(|s| {
        let mut seed = [0u8; 32];
        let s = s.trim();
        let ok = s.len() == 64 && hex::decode_to_slice(s, &mut seed).is_ok();
        if !ok {
            console_warn!(
                "{{\"event\":\"config_error\",\"var\":\"{SERVICE_KEY_SECRET}\",\"problem\":\"not 64 hex characters\"}}"
            );
        }
        ok.then(|| ServiceKey::from_seed(&seed))
    });
    let mut retired = Vec::new();
    if let Ok(list) = env.var(RETIRED_KEYS_VAR) {
        for item in list.to_string().split(',').map(str::trim) {
            if item.is_empty() {
                continue;
            }
            match PublicKey::from_hex(&item.to_ascii_lowercase()) {
                Ok(k) => retired.push(k),
                Err(_) => console_warn!(
                    "{{\"event\":\"config_ignored\",\"var\":\"{RETIRED_KEYS_VAR}\",\"problem\":\"not a public key\"}}"
                ),
            }
        }
    }
    let current = signing.as_ref().map(ServiceKey::public_key);
    ServiceKeys {
        keyring: Keyring::new(current.as_ref(), &retired),
        signing,
    }
}
