//! A small JSON-RPC client ([`Rpc`]) over the client's own transport and
//! retry policy: no provider library, no async runtime. The URL may hold an
//! API key, so messages name its origin only.

use crate::client::http::{Request, Response};
use crate::client::{backoff, Client, Error};
use serde_json::{json, Value};

/// A JSON-RPC endpoint, spoken over the client's transport. The URL may
/// hold an API key, so messages name its origin only.
pub(super) struct Rpc<'a> {
    client: &'a Client,
    url: String,
    shown: String,
}

/// A failed JSON-RPC call.
pub(super) enum NodeError {
    /// The node answered with an `error` member.
    Node(String),
    /// No usable answer.
    Fail(Error),
}

impl From<Error> for NodeError {
    fn from(e: Error) -> Self {
        NodeError::Fail(e)
    }
}

impl NodeError {
    pub(super) fn into_error(self, what: &str) -> Error {
        match self {
            NodeError::Node(m) => Error::Unavailable(format!("{what}: the node refused: {m}")),
            NodeError::Fail(e) => e,
        }
    }
}

/// `scheme://host[:port]` of a URL, for messages.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

impl<'a> Rpc<'a> {
    pub(super) fn new(client: &'a Client, url: &str) -> Rpc<'a> {
        Rpc {
            client,
            url: url.to_owned(),
            shown: origin(url),
        }
    }

    /// One call under the client's retry policy (network errors and 5xx).
    pub(super) fn call(&self, method: &str, params: Value) -> Result<Value, NodeError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let req = Request::json("POST", self.url.clone(), body.to_string().into_bytes());
        let resp = self.send(&req, method)?;
        if resp.status != 200 {
            return Err(NodeError::Fail(Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered HTTP {}",
                self.shown, resp.status
            ))));
        }
        let v: Value = serde_json::from_slice(&resp.body).map_err(|_| {
            Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered something that is not JSON",
                self.shown
            ))
        })?;
        if let Some(e) = v.get("error") {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_owned);
            return Err(NodeError::Node(msg.chars().take(300).collect()));
        }
        v.get("result").cloned().ok_or_else(|| {
            NodeError::Fail(Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered no result",
                self.shown
            )))
        })
    }

    /// The retry loop of `Client::exchange`, without naming the URL.
    fn send(&self, req: &Request, method: &str) -> Result<Response, Error> {
        let c = self.client;
        let mut attempt = 1;
        loop {
            let sent = c.transport.send(req);
            let outcome = match &sent {
                Ok(r) => backoff::Outcome::Status {
                    status: r.status,
                    retry_after: r.retry_after(),
                },
                Err(_) => backoff::Outcome::Network,
            };
            match (c.policy.decide(attempt, outcome), sent) {
                (backoff::Decision::Retry(wait), _) => {
                    (c.sleeper)(wait);
                    attempt += 1;
                }
                (_, Ok(r)) => return Ok(r),
                (_, Err(e)) => {
                    return Err(Error::Unavailable(format!(
                        "JSON-RPC {} ({method}) unreachable: {e} ({attempt} attempt{})",
                        self.shown,
                        if attempt == 1 { "" } else { "s" }
                    )))
                }
            }
        }
    }

    /// A call that must answer a quantity.
    pub(super) fn quantity(&self, method: &str, params: Value) -> Result<u128, Error> {
        let v = self
            .call(method, params)
            .map_err(|e| e.into_error(method))?;
        v.as_str().and_then(big_quantity).ok_or_else(|| {
            Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered {v}, not a quantity",
                self.shown
            ))
        })
    }

    pub(super) fn chain_id(&self) -> Result<u64, Error> {
        let id = self.quantity("eth_chainId", json!([]))?;
        u64::try_from(id).map_err(|_| Error::Unavailable("eth_chainId is out of range".into()))
    }

    pub(super) fn block_number(&self) -> Result<u64, Error> {
        let n = self.quantity("eth_blockNumber", json!([]))?;
        u64::try_from(n).map_err(|_| Error::Unavailable("eth_blockNumber is out of range".into()))
    }

    /// `None`: the chain does not know it (or it is not mined yet).
    pub(super) fn lookup(&self, method: &str, hash: &str) -> Result<Option<Value>, Error> {
        let v = self
            .call(method, json!([hash]))
            .map_err(|e| e.into_error(method))?;
        Ok((!v.is_null()).then_some(v))
    }
}

/// A quantity (`0x` + hex) as a u128.
pub(super) fn big_quantity(s: &str) -> Option<u128> {
    let h = s.strip_prefix("0x")?;
    if h.is_empty() || h.len() > 32 {
        return None;
    }
    u128::from_str_radix(h, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_urls_are_shown_without_their_path_or_credentials() {
        assert_eq!(
            origin("https://base.example/v2/SECRETKEY"),
            "https://base.example"
        );
        assert_eq!(
            origin("http://user:pw@127.0.0.1:8545"),
            "http://127.0.0.1:8545"
        );
        assert_eq!(
            origin("http://127.0.0.1:8545?key=x"),
            "http://127.0.0.1:8545"
        );
    }
}
