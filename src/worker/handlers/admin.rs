//! The operator API (`/api/v1/admin/…`, docs/PROTOCOL.md §17): the gate
//! (`core::operator::admin`) before anything is read, an Access token's
//! RS256 signature verified with WebCrypto against the team's published
//! keys, then one page of agents from a KV list of the meta records' keys
//! (their list entries ride as KV metadata: no value is read), one agent's
//! operator record, or the deployment's totals from the sixteen stats
//! shards.

use crate::core::crypto::AgentId;
use crate::core::json;
use crate::core::operator::admin::{
    self, AdminRoute, AgentRecord, AgentsPage, Gate, HeadFacts, ListQuery,
};
use crate::core::operator::auth::{certs_url, rsa_key, AccessConfig, AccessToken};
use crate::core::operator::meta::{MetaRecord, Summary};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::record::{kv_key, meta_kv_key, Record, META_KV_PREFIX};
use crate::core::time::rfc3339;
use crate::core::urls::ALLOW_ADMIN;
use crate::worker::config::{self, Config};
use crate::worker::do_wire::StatsCall;
use crate::worker::failure::Failure;
use crate::worker::http::{self, CachedRead};
use crate::worker::kv::Kv;
use crate::worker::request::Incoming;
use crate::worker::{clock, log};
use sha2::{Digest, Sha256};
use worker::js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Env, Fetch, Response};

/// One request under the prefix (`rest`: the path after it).
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    rest: &str,
) -> Result<Response, Failure> {
    let admin_cfg = config::admin(env);
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let h = req.headers();
    let authorization = h.get("Authorization")?;
    let jwt = h.get("Cf-Access-Jwt-Assertion")?;
    let who = match admin::gate(
        &admin_cfg,
        authorization.as_deref(),
        jwt.as_deref(),
        now_ms / 1000,
    ) {
        Gate::Off => return Err(Failure::code(ReasonCode::NotFound)),
        Gate::Refused(r) => return Err(refused(r)),
        Gate::Token => "token".to_owned(),
        Gate::Access(token) => {
            let access = admin_cfg
                .access
                .as_ref()
                .ok_or(Failure::Unavailable(None))?;
            if !signed_by_the_team(access, &token).await? {
                return Err(refused(Refusal::new(
                    ReasonCode::AdminAuthInvalid,
                    crate::core::operator::auth::TokenProblem::Signature.detail(),
                )));
            }
            format!("access:{}", token.subject)
        }
    };
    let request = match admin::route(rest, &req.method()) {
        Ok(r) => r,
        Err(r) if r.code == ReasonCode::MethodNotAllowed => {
            return Ok(http::method_not_allowed(ALLOW_ADMIN, http::Audience::Read))
        }
        Err(r) => return Err(Failure::Refused(r)),
    };
    log::event("admin_read", &[("by", &who), ("path", rest)]);
    let body = match request.route {
        AdminRoute::Agents => {
            let query = ListQuery::parse(req.query_pairs()).map_err(Failure::Refused)?;
            serde_json::to_value(page(env, &query, now_ms).await?)?
        }
        AdminRoute::Agent(agent) => serde_json::to_value(record(env, &agent, cfg, now_ms).await?)?,
        // Every shard asked for its totals as of now, in parallel.
        AdminRoute::Stats => StatsCall::totals(env, now_ms).await.body(now_ms),
    };
    // For the operator alone: `private, no-store`, with an ETag so a
    // dashboard polling a page gets 304s.
    let bytes = serde_json::to_vec(&body)?;
    let etag = hex::encode(&Sha256::digest(&bytes)[..16]);
    Ok(CachedRead::of(req, request.head_only)
        .private()
        .answer(bytes, &etag))
}

fn refused(r: Refusal) -> Failure {
    log::event("admin_refused", &[("reason_code", r.code.as_str())]);
    Failure::Refused(r)
}

async fn page(env: &Env, q: &ListQuery, now_ms: u64) -> Result<AgentsPage, Failure> {
    let listed = Kv::of(env)?
        .list(META_KV_PREFIX, q.cursor.clone(), q.limit)
        .await
        .map_err(|e| match e.to_string() {
            // KV refuses a cursor it did not make.
            m if m.contains("cursor") => {
                Failure::refused(ReasonCode::BadQuery, "cursor is not one this list gave")
            }
            _ => Failure::Runtime(e),
        })?;
    let scanned = listed.keys.len() as u64;
    let agents = listed
        .keys
        .iter()
        .filter_map(|k| {
            let id = k.name.strip_prefix(META_KV_PREFIX)?;
            let summary: Summary = k
                .metadata
                .clone()
                .and_then(|m| serde_json::from_value(m).ok())
                .unwrap_or_default();
            Some(summary.entry(id, now_ms))
        })
        .filter(|e| q.filter.admits(e))
        .collect();
    Ok(AgentsPage {
        agents,
        cursor: (!listed.list_complete).then_some(listed.cursor).flatten(),
        scanned,
        as_of: rfc3339(now_ms),
    })
}

/// `GET /api/v1/admin/agents/{agent_id}`: the agent's list entry, its
/// meta.json as of now, and what its head says.
async fn record(
    env: &Env,
    agent: &AgentId,
    cfg: &Config,
    now_ms: u64,
) -> Result<AgentRecord, Failure> {
    let keys = [meta_kv_key(agent), kv_key(agent)];
    let found = Kv::of(env)?.texts_found(&keys).await?;
    let (meta, head) = (
        found.first().cloned().flatten(),
        found.get(1).cloned().flatten(),
    );
    let head: Option<Record> = head.and_then(|t| serde_json::from_str(&t).ok());
    let meta = match (meta, &head) {
        (Some(t), _) => serde_json::from_str::<MetaRecord>(&t).map_err(|e| {
            log::event(
                "kv_meta_unreadable",
                &[("agent_id", agent.as_str()), ("error", &e.to_string())],
            );
            Failure::Unavailable(None)
        })?,
        (None, Some(r)) => MetaRecord::from_record(r),
        (None, None) => return Err(Failure::code(ReasonCode::NotFound)),
    };
    Ok(AgentRecord {
        agent_id: agent.to_string(),
        summary: meta.summary().entry(agent.as_str(), now_ms),
        meta: meta.body(&cfg.tiers, now_ms),
        head: head.map(|r| HeadFacts {
            private: !crate::core::access::is_public(&r.capsule),
            cursor: r.cursor,
            seq: r.seq,
            updated_at: r.updated_at,
        }),
    })
}

/// Whether the token's signature verifies under the team's key `kid`
/// (fetched from the team's certs URL). A team that cannot be reached is a
/// 503: the operator retries; nothing is let through.
async fn signed_by_the_team(access: &AccessConfig, token: &AccessToken) -> Result<bool, Failure> {
    let unavailable = |e: &str| {
        log::event("access_certs_unavailable", &[("error", e)]);
        Failure::Unavailable(Some("the Access team's keys could not be read; retry"))
    };
    // A request from the URL's text: parsing it (`Url`) would link the
    // `url` crate's parser and IDNA tables into the Worker.
    let req = worker::Request::new(&certs_url(access), worker::Method::Get)
        .map_err(|e| unavailable(&e.to_string()))?;
    let mut resp = Fetch::Request(req)
        .send()
        .await
        .map_err(|e| unavailable(&e.to_string()))?;
    if resp.status_code() != 200 {
        return Err(unavailable(&format!("status {}", resp.status_code())));
    }
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| unavailable(&e.to_string()))?;
    let certs = json::parse(&bytes).map_err(|_| unavailable("certs are not JSON"))?;
    let Some((n, e)) = rsa_key(&certs, &token.kid) else {
        return Ok(false);
    };
    rs256_verify(&n, &e, &token.signing_input, &token.signature)
        .await
        .map_err(|e| {
            log::event("access_verify_error", &[("error", &format!("{e:?}"))]);
            Failure::Unavailable(None)
        })
}

/// RSASSA-PKCS1-v1_5 with SHA-256 (RS256) by the runtime's WebCrypto: the
/// key imported from its JWK modulus and exponent.
async fn rs256_verify(n: &str, e: &str, data: &[u8], signature: &[u8]) -> Result<bool, JsValue> {
    let subtle = Reflect::get(
        &Reflect::get(&worker::js_sys::global(), &"crypto".into())?,
        &"subtle".into(),
    )?;
    let call = |name: &str, args: Array| -> Result<Promise, JsValue> {
        let f: Function = Reflect::get(&subtle, &name.into())?.dyn_into()?;
        f.apply(&subtle, &args)?.dyn_into()
    };
    let obj = |pairs: &[(&str, JsValue)]| -> Result<Object, JsValue> {
        let o = Object::new();
        for (k, v) in pairs {
            Reflect::set(&o, &(*k).into(), v)?;
        }
        Ok(o)
    };
    let jwk = obj(&[
        ("kty", "RSA".into()),
        ("n", n.into()),
        ("e", e.into()),
        ("alg", "RS256".into()),
        ("ext", true.into()),
    ])?;
    let algorithm = obj(&[
        ("name", "RSASSA-PKCS1-v1_5".into()),
        ("hash", obj(&[("name", "SHA-256".into())])?.into()),
    ])?;
    let usages = Array::of1(&"verify".into());
    let key = JsFuture::from(call(
        "importKey",
        Array::of5(&"jwk".into(), &jwk, &algorithm, &false.into(), &usages),
    )?)
    .await?;
    let ok = JsFuture::from(call(
        "verify",
        Array::of4(
            &"RSASSA-PKCS1-v1_5".into(),
            &key,
            &Uint8Array::from(signature),
            &Uint8Array::from(data),
        ),
    )?)
    .await?;
    Ok(ok.as_bool() == Some(true))
}
