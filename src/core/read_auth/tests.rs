use super::*;
use base64::{engine::general_purpose::STANDARD as B64, Engine as _};
use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha256};
use web_bot_auth::keyring::KeyRing;

/// RFC 9421 Appendix B.1.4 `test-key-ed25519` (the PKCS#8 seed's last 32 bytes).
const RFC_SEED_B64: &str = "MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF";
const RFC_PUBLIC_B64: &str = "MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=";

/// RFC 9421 B.2.6 verbatim: the request of B.2 signed with test-key-ed25519.
struct B26;

impl SignedMessage for B26 {
    fn lookup_component(&self, c: &CoveredComponent) -> Vec<String> {
        let v = match c {
            CoveredComponent::HTTP(HTTPField { name, .. }) => match name.as_str() {
                "signature-input" => "sig-b26=(\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\"",
                "signature" => "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:",
                "date" => "Tue, 20 Apr 2021 02:07:55 GMT",
                "content-type" => "application/json",
                "content-length" => "18",
                _ => return Vec::new(),
            },
            CoveredComponent::Derived(DerivedComponent::Method { .. }) => "POST",
            CoveredComponent::Derived(DerivedComponent::Path { .. }) => "/foo",
            CoveredComponent::Derived(DerivedComponent::Authority { .. }) => "example.com",
            _ => return Vec::new(),
        };
        vec![v.to_string()]
    }
}

#[test]
fn rfc9421_b26_ed25519_vector_verifies_and_signs_byte_for_byte() {
    let public = B64.decode(RFC_PUBLIC_B64).unwrap()[12..].to_vec();
    let v = MessageVerifier::parse(&B26, |_| true).unwrap();
    // The signature base as RFC 9421 B.2.6 prints it.
    let base = "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n\"@method\": POST\n\"@path\": /foo\n\"@authority\": example.com\n\"content-type\": application/json\n\"content-length\": 18\n\"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\"";
    let mut ring = KeyRing::default();
    ring.import_raw("test-key-ed25519".into(), Algorithm::Ed25519, public);
    // The library rebuilds that base from the message (any byte off and
    // Ed25519 would refuse the RFC's signature).
    v.verify(&ring, None).unwrap();
    // Ed25519 is deterministic: the RFC's key over that base gives the RFC's signature.
    let seed: [u8; 32] = B64.decode(RFC_SEED_B64).unwrap()[16..].try_into().unwrap();
    let sig = SigningKey::from_bytes(&seed).sign(base.as_bytes());
    assert_eq!(
        B64.encode(sig.to_bytes()),
        "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="
    );
}

const NOW: u64 = 1_800_000_000;
const URL: &str = "https://self.example.com/self/aaaa/capsule.json";

/// A signed GET built by hand from RFC 9421 §2.5 (not with the library),
/// with `params` after the component list.
fn signed(seed: u8, method: &str, url: &str, params: &str) -> (String, String, String) {
    let key = SigningKey::from_bytes(&[seed; 32]);
    let inner = format!("(\"@method\" \"@target-uri\"){params}");
    let base =
        format!("\"@method\": {method}\n\"@target-uri\": {url}\n\"@signature-params\": {inner}");
    let sig = key.sign(base.as_bytes());
    (
        format!("sig1={inner}"),
        format!("sig1=:{}:", B64.encode(sig.to_bytes())),
        hex::encode(key.verifying_key().to_bytes()),
    )
}

fn agent_of(pk_hex: &str) -> String {
    hex::encode(Sha256::digest(hex::decode(pk_hex).unwrap()))
}

fn check(
    method: &str,
    url: &str,
    input: &str,
    sig: &str,
    pk: &str,
    now: u64,
) -> Result<Reader, ReadAuthError> {
    let (input, sig, pk) = (input.to_string(), sig.to_string(), pk.to_string());
    let header = move |n: &str| match n {
        "signature-input" => Some(input.clone()),
        "signature" => Some(sig.clone()),
        PUBLIC_KEY_HEADER => Some(pk.clone()),
        _ => None,
    };
    verify(
        &SignedRead {
            method,
            target_uri: url,
            header: &header,
        },
        now,
    )
}

fn params(agent: &str, created: u64, nonce: &str) -> String {
    format!(";created={created};keyid=\"{agent}\";nonce=\"{nonce}\";alg=\"ed25519\"")
}

#[test]
fn a_well_formed_signed_read_names_its_reader() {
    let (_, _, pk) = signed(7, "GET", URL, "");
    let agent = agent_of(&pk);
    let (i, s, pk) = signed(7, "GET", URL, &params(&agent, NOW - 10, "n0nce-0001"));
    let r = check("GET", URL, &i, &s, &pk, NOW).unwrap();
    assert_eq!(r.agent_id.as_str(), agent);
    assert_eq!(r.nonce, "n0nce-0001");
    assert_eq!(r.replay_until_s, NOW - 10 + MAX_AGE_S);
    // Parameters in another order verify too (the base keeps the order sent).
    let other = format!(";keyid=\"{agent}\";nonce=\"n0nce-0002\";created={}", NOW);
    let (i, s, pk) = signed(7, "GET", URL, &other);
    assert!(check("GET", URL, &i, &s, &pk, NOW).is_ok());
}

#[test]
fn another_method_path_or_key_does_not_verify() {
    let (_, _, pk) = signed(7, "GET", URL, "");
    let agent = agent_of(&pk);
    let (i, s, pk) = signed(7, "GET", URL, &params(&agent, NOW, "n0nce-0003"));
    let other_url = "https://self.example.com/self/aaaa/history.json";
    assert!(matches!(
        check("GET", other_url, &i, &s, &pk, NOW),
        Err(ReadAuthError::Invalid(_))
    ));
    assert!(matches!(
        check("HEAD", URL, &i, &s, &pk, NOW),
        Err(ReadAuthError::Invalid(_))
    ));
    // Someone else's key header under this signature: it does not verify.
    let (_, _, pk8) = signed(8, "GET", URL, "");
    assert!(matches!(
        check("GET", URL, &i, &s, &pk8, NOW),
        Err(ReadAuthError::Invalid(_))
    ));
    // Key 8 signing as agent 7: a valid signature by a key that is not
    // agent 7's (no key log names it), so it speaks for nobody.
    let (i87, s87, _) = signed(8, "GET", URL, &params(&agent, NOW, "n0nce-0005"));
    let r = check("GET", URL, &i87, &s87, &pk8, NOW).expect("the signature itself verifies");
    assert_eq!(standing(&r, None), Standing::Foreign);
    assert_eq!(standing(&r, Some(&"00".repeat(32))), Standing::AskTheLog);
    assert_eq!(standing(&r, Some(&r.key.to_hex())), Standing::Current);
    // Agent 7's own (genesis) key: current without a log, rotated out once
    // its log names another key.
    let own = check("GET", URL, &i, &s, &pk, NOW).unwrap();
    assert_eq!(standing(&own, None), Standing::Current);
    assert_eq!(standing(&own, Some(&r.key.to_hex())), Standing::Rotated);
    // Signed by key 8 but naming agent 7's keyid with 7's public key.
    let (i8, s8, _) = signed(8, "GET", URL, &params(&agent, NOW, "n0nce-0004"));
    assert!(matches!(
        check("GET", URL, &i8, &s8, &pk, NOW),
        Err(ReadAuthError::Invalid(_))
    ));
}

#[test]
fn the_time_window_is_enforced() {
    let (_, _, pk) = signed(7, "GET", URL, "");
    let agent = agent_of(&pk);
    let stale = signed(
        7,
        "GET",
        URL,
        &params(&agent, NOW - MAX_AGE_S - 1, "n0nce-0005"),
    );
    assert!(matches!(
        check("GET", URL, &stale.0, &stale.1, &pk, NOW),
        Err(ReadAuthError::Expired(_))
    ));
    let future = signed(
        7,
        "GET",
        URL,
        &params(&agent, NOW + MAX_SKEW_S + 1, "n0nce-0006"),
    );
    assert!(matches!(
        check("GET", URL, &future.0, &future.1, &pk, NOW),
        Err(ReadAuthError::Expired(_))
    ));
    let edge = signed(
        7,
        "GET",
        URL,
        &params(&agent, NOW - MAX_AGE_S, "n0nce-0007"),
    );
    assert!(check("GET", URL, &edge.0, &edge.1, &pk, NOW).is_ok());
    let expired = signed(
        7,
        "GET",
        URL,
        &format!("{};expires={}", params(&agent, NOW - 5, "n0nce-0008"), NOW),
    );
    assert!(matches!(
        check("GET", URL, &expired.0, &expired.1, &pk, NOW),
        Err(ReadAuthError::Expired(_))
    ));
}

#[test]
fn missing_parameters_and_components_are_named() {
    let (_, _, pk) = signed(7, "GET", URL, "");
    let agent = agent_of(&pk);
    for (p, want) in [
        (
            format!(";keyid=\"{agent}\";nonce=\"n0nce-0009\""),
            "created",
        ),
        (format!(";created={NOW};nonce=\"n0nce-0010\""), "keyid"),
        (format!(";created={NOW};keyid=\"{agent}\""), "nonce"),
        (
            format!(";created={NOW};keyid=\"{agent}\";nonce=\"short\""),
            "nonce",
        ),
        (
            format!(";created={NOW};keyid=\"SOMEONE\";nonce=\"n0nce-0011\""),
            "keyid",
        ),
        (
            format!(";created={NOW};keyid=\"{agent}\";nonce=\"n0nce-0012\";alg=\"rsa-pss-sha512\""),
            "alg",
        ),
    ] {
        let (i, s, pk) = signed(7, "GET", URL, &p);
        let e = check("GET", URL, &i, &s, &pk, NOW).unwrap_err().to_string();
        assert!(e.contains(want), "{p}: {e}");
    }
    // Only @method covered.
    let key = SigningKey::from_bytes(&[7; 32]);
    let inner = format!("(\"@method\"){}", params(&agent, NOW, "n0nce-0013"));
    let base = format!("\"@method\": GET\n\"@signature-params\": {inner}");
    let sig = format!(
        "sig1=:{}:",
        B64.encode(key.sign(base.as_bytes()).to_bytes())
    );
    let e = check("GET", URL, &format!("sig1={inner}"), &sig, &pk, NOW)
        .unwrap_err()
        .to_string();
    assert!(e.contains("@target-uri"), "{e}");
    // Garbage headers.
    assert!(matches!(
        check("GET", URL, "nonsense(", "x", &pk, NOW),
        Err(ReadAuthError::Invalid(_))
    ));
    let (i, s, _) = signed(7, "GET", URL, &params(&agent, NOW, "n0nce-0014"));
    assert!(check("GET", URL, &i, &s, "zz", NOW)
        .unwrap_err()
        .to_string()
        .contains("64 hex"));
}

#[test]
fn a_nonce_is_single_use_while_its_signature_lives() {
    let mut book = NonceBook::default();
    assert_eq!(book.admit("n1", NOW + 300, NOW), Admit::Fresh);
    assert_eq!(book.admit("n1", NOW + 300, NOW + 299), Admit::Replayed);
    assert_eq!(book.admit("n2", NOW + 300, NOW), Admit::Fresh);
    // Past its horizon a nonce is forgotten (its signature is stale anyway).
    assert_eq!(book.admit("n1", NOW + 700, NOW + 301), Admit::Fresh);
    let mut full = NonceBook::default();
    for i in 0..MAX_LIVE_NONCES {
        assert_eq!(full.admit(&format!("n{i}"), NOW + 300, NOW), Admit::Fresh);
    }
    assert_eq!(full.admit("one-more", NOW + 300, NOW), Admit::Full);
    assert_eq!(full.admit("one-more", NOW + 300, NOW + 301), Admit::Fresh);
}

/// Small-order points and non-canonical encodings, as raw key bytes: the
/// identity (y = 1), y = 1 + p (non-canonical identity), the identity with
/// the x sign bit set (x = 0 cannot be negative), and the order-2 point
/// (0, -1). With R = the identity and S = 0, the loose Ed25519 equation
/// [S]B = R + [k]A holds for the identity always and for the order-2 point
/// whenever k is even: a forgery with no private key.
fn weak_keys() -> Vec<(&'static str, [u8; 32])> {
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let mut y_plus_p = [0xffu8; 32];
    y_plus_p[0] = 0xee;
    y_plus_p[31] = 0x7f;
    let mut signed_zero = identity;
    signed_zero[31] = 0x80;
    let mut order2 = [0xffu8; 32];
    order2[0] = 0xec;
    order2[31] = 0x7f;
    vec![
        ("identity", identity),
        ("identity as y = 1 + p", y_plus_p),
        ("identity with the sign bit", signed_zero),
        ("order 2", order2),
    ]
}

#[test]
fn weak_or_non_canonical_reader_keys_never_sign_a_read() {
    let mut forged = [0u8; 64];
    forged[0] = 1; // R = identity, S = 0
    for (name, key) in weak_keys() {
        let pk = hex::encode(key);
        let agent = agent_of(&pk);
        // Many nonces: the order-2 forgery passes a loose check for about half of them.
        for n in 0..16 {
            let inner = format!(
                "(\"@method\" \"@target-uri\"){}",
                params(&agent, NOW, &format!("weak-nonce-{n:04}"))
            );
            let input = format!("sig1={inner}");
            let sig = format!("sig1=:{}:", B64.encode(forged));
            let e = check("GET", URL, &input, &sig, &pk, NOW).unwrap_err();
            assert!(matches!(e, ReadAuthError::Invalid(_)), "{name}: {e}");
            assert_eq!(e.code(), ReasonCode::ReadSignatureInvalid, "{name}");
        }
    }
}

#[test]
fn the_library_alone_would_have_taken_the_forgery() {
    // Shows the check above is ours: the library's own verification accepts
    // the identity-key forgery, so relying on it would let it through.
    let (_, key) = weak_keys()[0];
    let mut forged = [0u8; 64];
    forged[0] = 1;
    let agent = agent_of(&hex::encode(key));
    let inner = format!(
        "(\"@method\" \"@target-uri\"){}",
        params(&agent, NOW, "weak-nonce-lib")
    );
    let (input, sig) = (
        format!("sig1={inner}"),
        format!("sig1=:{}:", B64.encode(forged)),
    );
    let header = move |n: &str| match n {
        "signature-input" => Some(input.clone()),
        "signature" => Some(sig.clone()),
        _ => None,
    };
    let req = SignedRead {
        method: "GET",
        target_uri: URL,
        header: &header,
    };
    let v = MessageVerifier::parse(&Message(&req), |_| true).unwrap();
    let mut ring = KeyRing::default();
    ring.import_raw(agent.clone(), Algorithm::Ed25519, key.to_vec());
    assert!(v.verify(&ring, Some(agent)).is_ok());
}
