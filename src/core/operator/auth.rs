//! Who may use the operator API (`/api/v1/admin/…`).
//!
//! The API is **off** unless the operator configures a credential: a bearer
//! token (the Worker secret `SELFCAP_ADMIN_TOKEN`, at least 32 characters),
//! or Cloudflare Access in front of the deployment (`SELFCAP_ACCESS_TEAM_DOMAIN`
//! and `SELFCAP_ACCESS_AUD`), or both. Off, every admin path answers the
//! `not_found` of an unknown route, so a deployment without it shows nothing.
//!
//! On, a request needs one of them: `Authorization: Bearer <token>` (compared
//! in constant time: both sides are hashed, and the digests compared with
//! `subtle`, so neither the token's bytes nor its length leak through
//! timing), or the `Cf-Access-Jwt-Assertion` header Access adds, an RS256
//! JWT whose issuer is the team domain, whose audience includes the
//! application's AUD tag and which is in its validity window. This module
//! reads and checks the JWT's claims; the signature is verified by the
//! Worker against the team's published keys (`certs_url`) with WebCrypto,
//! which costs the Worker no code.

use crate::core::json::{self, Json};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest bearer token accepted: a shorter secret leaves the API off
/// (and is logged), rather than guarded by a guessable word.
pub const MIN_TOKEN_CHARS: usize = 32;
/// Clock skew allowed on `nbf` and `iat` (seconds); `exp` gets none.
pub const SKEW_SEC: u64 = 60;

/// What guards the operator API in this deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminConfig {
    /// SHA-256 of the bearer token, if one is configured.
    token_digest: Option<[u8; 32]>,
    /// Cloudflare Access, if configured.
    pub access: Option<AccessConfig>,
}

/// A Cloudflare Access application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    /// `https://<team>.cloudflareaccess.com`: the tokens' issuer and where
    /// its keys are published (no trailing slash).
    pub team_domain: String,
    /// The application's audience tag.
    pub aud: String,
}

/// Why a configured value is not used (logged by name, never by value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigProblem {
    /// The token is shorter than [`MIN_TOKEN_CHARS`].
    TokenTooShort,
    /// One of the two Access settings is missing or malformed.
    Access(&'static str),
}

impl AdminConfig {
    /// The configuration from the token secret and the two Access vars
    /// (each `None` when unset), with what was ignored and why.
    pub fn of(
        token: Option<&str>,
        team_domain: Option<&str>,
        aud: Option<&str>,
    ) -> (AdminConfig, Vec<ConfigProblem>) {
        let mut problems = Vec::new();
        let token_digest = match token.map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) if t.chars().count() >= MIN_TOKEN_CHARS => Some(digest(t)),
            Some(_) => {
                problems.push(ConfigProblem::TokenTooShort);
                None
            }
            None => None,
        };
        let access = match (team_domain, aud) {
            (None, None) => None,
            (Some(d), Some(a)) => match (team_domain_ok(d), !a.trim().is_empty()) {
                (Some(d), true) => Some(AccessConfig {
                    team_domain: d,
                    aud: a.trim().to_owned(),
                }),
                (None, _) => {
                    problems.push(ConfigProblem::Access(
                        "SELFCAP_ACCESS_TEAM_DOMAIN must be an https origin (http only on loopback)",
                    ));
                    None
                }
                (_, false) => {
                    problems.push(ConfigProblem::Access("SELFCAP_ACCESS_AUD is empty"));
                    None
                }
            },
            _ => {
                problems.push(ConfigProblem::Access(
                    "Cloudflare Access needs both SELFCAP_ACCESS_TEAM_DOMAIN and SELFCAP_ACCESS_AUD",
                ));
                None
            }
        };
        (
            AdminConfig {
                token_digest,
                access,
            },
            problems,
        )
    }

    /// Whether the API is on at all.
    pub fn is_on(&self) -> bool {
        self.token_digest.is_some() || self.access.is_some()
    }

    /// Whether `presented` (an `Authorization` header's bearer token) is the
    /// configured token, in constant time.
    pub fn token_matches(&self, presented: &str) -> bool {
        match &self.token_digest {
            Some(want) => bool::from(digest(presented).ct_eq(want)),
            None => false,
        }
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// The origin `d` (trailing slash dropped) if it is https, or http on a
/// loopback host (local tests and development).
fn team_domain_ok(d: &str) -> Option<String> {
    let d = d.trim().trim_end_matches('/');
    let rest = d
        .strip_prefix("https://")
        .or_else(|| d.strip_prefix("http://").filter(|r| is_loopback(r)))?;
    let host_ok = !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@', ' '])
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    host_ok.then(|| d.to_owned())
}

fn is_loopback(host_port: &str) -> bool {
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

/// Where the team publishes the keys its tokens are signed with.
pub fn certs_url(access: &AccessConfig) -> String {
    format!("{}/cdn-cgi/access/certs", access.team_domain)
}

/// A bearer token from an `Authorization` header (`Bearer <token>`, the
/// scheme in any case).
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// An Access token whose claims passed: what the Worker still verifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    /// The signing key's id (`kid`), to pick it from the team's keys.
    pub kid: String,
    /// `base64url(header) "." base64url(payload)`: what was signed.
    pub signing_input: Vec<u8>,
    /// The RS256 signature.
    pub signature: Vec<u8>,
    /// Who it names (`email`, else `sub`), for the log.
    pub subject: String,
}

/// Why an Access token is refused (each a `403 admin_auth_invalid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenProblem {
    /// Not three base64url parts of JSON objects.
    Malformed,
    /// `alg` is not RS256, or no `kid`.
    Algorithm,
    /// `iss` is not the team domain.
    Issuer,
    /// `aud` does not include the application's tag.
    Audience,
    /// Past `exp`, before `nbf`, or issued in the future.
    Expired,
    /// The signature does not verify under the team's key `kid` (or the key
    /// is unknown): decided by the Worker.
    Signature,
}

impl TokenProblem {
    /// The refusal's detail.
    pub fn detail(&self) -> &'static str {
        match self {
            TokenProblem::Malformed => "the Access token is not a JWT",
            TokenProblem::Algorithm => "the Access token is not RS256 with a key id",
            TokenProblem::Issuer => "the Access token was issued by another team",
            TokenProblem::Audience => "the Access token is for another application",
            TokenProblem::Expired => "the Access token is expired or not yet valid",
            TokenProblem::Signature => {
                "the Access token's signature does not verify under the team's keys"
            }
        }
    }
}

fn part(s: &str) -> Result<(Vec<u8>, Json), TokenProblem> {
    let bytes = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| TokenProblem::Malformed)?;
    let v = json::parse(&bytes).map_err(|_| TokenProblem::Malformed)?;
    if v.as_object().is_none() {
        return Err(TokenProblem::Malformed);
    }
    Ok((bytes, v))
}

/// Reads an Access token (`Cf-Access-Jwt-Assertion`) and checks its claims
/// against `access` at `now_s` (Unix seconds).
pub fn read_access_token(
    token: &str,
    access: &AccessConfig,
    now_s: u64,
) -> Result<AccessToken, TokenProblem> {
    let mut parts = token.trim().split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenProblem::Malformed);
    };
    let (_, header) = part(h)?;
    let (_, claims) = part(p)?;
    let signature = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| TokenProblem::Malformed)?;
    let kid = match (
        header.get("alg").and_then(Json::as_str),
        header.get("kid").and_then(Json::as_str),
    ) {
        (Some("RS256"), Some(kid)) if !kid.is_empty() => kid.to_owned(),
        _ => return Err(TokenProblem::Algorithm),
    };
    if claims.get("iss").and_then(Json::as_str) != Some(access.team_domain.as_str()) {
        return Err(TokenProblem::Issuer);
    }
    let aud_ok = match claims.get("aud") {
        Some(Json::String(a)) => *a == access.aud,
        Some(Json::Array(list)) => list.iter().any(|a| a.as_str() == Some(&access.aud)),
        _ => false,
    };
    if !aud_ok {
        return Err(TokenProblem::Audience);
    }
    let time = |k: &str| claims.get(k).and_then(Json::as_safe_u64);
    let Some(exp) = time("exp") else {
        return Err(TokenProblem::Expired);
    };
    let early = |k: &str| time(k).is_some_and(|t| t > now_s + SKEW_SEC);
    if now_s >= exp || early("nbf") || early("iat") {
        return Err(TokenProblem::Expired);
    }
    let subject = ["email", "sub"]
        .iter()
        .find_map(|k| claims.get(k).and_then(Json::as_str))
        .unwrap_or("")
        .to_owned();
    Ok(AccessToken {
        kid,
        signing_input: format!("{h}.{p}").into_bytes(),
        signature,
        subject,
    })
}

/// The RSA public key `kid` in a team's published keys (`{"keys": [JWK…]}`):
/// its modulus and exponent, base64url, as WebCrypto imports them.
pub fn rsa_key(certs: &Json, kid: &str) -> Option<(String, String)> {
    certs.get("keys")?.as_array()?.iter().find_map(|k| {
        let s = |n: &str| k.get(n).and_then(Json::as_str);
        (s("kid") == Some(kid) && s("kty") == Some("RSA"))
            .then(|| Some((s("n")?.to_owned(), s("e")?.to_owned())))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef-operator";

    fn access() -> AccessConfig {
        AccessConfig {
            team_domain: "https://team.cloudflareaccess.com".into(),
            aud: "aud-tag".into(),
        }
    }

    fn jwt(header: &str, claims: &str) -> String {
        format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims),
            URL_SAFE_NO_PAD.encode([7u8; 256])
        )
    }

    #[test]
    fn off_unless_configured_and_a_short_token_is_not_used() {
        let (c, p) = AdminConfig::of(None, None, None);
        assert!(!c.is_on() && p.is_empty());
        let (c, p) = AdminConfig::of(Some("hunter2"), None, None);
        assert!(!c.is_on());
        assert_eq!(p, [ConfigProblem::TokenTooShort]);
        let (c, p) = AdminConfig::of(None, Some("https://team.cloudflareaccess.com"), None);
        assert!(!c.is_on());
        assert_eq!(p.len(), 1);
        let (c, _) = AdminConfig::of(None, Some("http://evil.example"), Some("a"));
        assert!(!c.is_on(), "plain http only on loopback");
        let (c, p) = AdminConfig::of(None, Some("http://127.0.0.1:9000/"), Some("a"));
        assert!(c.is_on() && p.is_empty());
        assert_eq!(c.access.unwrap().team_domain, "http://127.0.0.1:9000");
    }

    #[test]
    fn the_token_matches_exactly() {
        let (c, _) = AdminConfig::of(Some(TOKEN), None, None);
        assert!(c.token_matches(TOKEN));
        for wrong in [
            "",
            "0123456789abcdef0123456789abcdef",
            &format!("{TOKEN} "),
            &TOKEN.to_uppercase(),
        ] {
            assert!(!c.token_matches(wrong), "{wrong:?}");
        }
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn access_claims_are_checked() {
        let a = access();
        let h = r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#;
        let now = 1_800_000_000;
        let ok = format!(
            r#"{{"iss":"https://team.cloudflareaccess.com","aud":["aud-tag"],"exp":{},"iat":{},"email":"op@example.com"}}"#,
            now + 600,
            now - 10
        );
        let t = read_access_token(&jwt(h, &ok), &a, now).unwrap();
        assert_eq!(
            (t.kid.as_str(), t.subject.as_str()),
            ("k1", "op@example.com")
        );
        assert_eq!(t.signature.len(), 256);
        let cases = [
            (
                r#"{"alg":"HS256","kid":"k1"}"#,
                ok.clone(),
                TokenProblem::Algorithm,
            ),
            (r#"{"alg":"RS256"}"#, ok.clone(), TokenProblem::Algorithm),
            (
                h,
                ok.replace("team.cloud", "other.cloud"),
                TokenProblem::Issuer,
            ),
            (
                h,
                ok.replace("aud-tag", "another-app"),
                TokenProblem::Audience,
            ),
            (
                h,
                ok.replace(&(now + 600).to_string(), &now.to_string()),
                TokenProblem::Expired,
            ),
            (
                h,
                ok.replace(&(now - 10).to_string(), &(now + 600).to_string()),
                TokenProblem::Expired,
            ),
        ];
        for (header, claims, want) in cases {
            assert_eq!(read_access_token(&jwt(header, &claims), &a, now), Err(want));
        }
        assert_eq!(
            read_access_token("a.b", &a, now),
            Err(TokenProblem::Malformed)
        );
    }

    #[test]
    fn the_key_is_found_by_id() {
        let certs = json::parse_str(
            r#"{"keys":[{"kid":"k0","kty":"RSA","n":"AA","e":"AQAB"},{"kid":"k1","kty":"RSA","n":"BB","e":"AQAB"}]}"#,
        )
        .unwrap();
        assert_eq!(rsa_key(&certs, "k1"), Some(("BB".into(), "AQAB".into())));
        assert_eq!(rsa_key(&certs, "k9"), None);
    }
}
