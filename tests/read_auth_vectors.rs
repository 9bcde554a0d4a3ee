//! `tests/vectors/signed_reads.json` (signed reads made by npm
//! `http-message-sig`, an implementation independent of ours) replayed
//! through `core::read_auth`: each must give the expected reader or code.

use self_capsule::core::read_auth::{verify, SignedRead};
use serde_json::Value;

#[test]
fn independent_signed_reads_get_the_expected_answer() {
    let doc: Value =
        serde_json::from_str(include_str!("vectors/signed_reads.json")).expect("valid JSON");
    let vectors = doc["vectors"].as_array().expect("vectors");
    assert!(vectors.len() >= 10);
    let mut ok = 0;
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let headers = v["headers"].as_object().unwrap().clone();
        let header = move |n: &str| headers.get(n).and_then(Value::as_str).map(str::to_owned);
        let req = SignedRead {
            method: v["method"].as_str().unwrap(),
            target_uri: v["target_uri"].as_str().unwrap(),
            header: &header,
        };
        assert!(req.is_signed(), "{name}");
        let got = verify(&req, v["now"].as_u64().unwrap());
        let expect = v["expect"].as_str().unwrap();
        match (&got, expect) {
            (Ok(r), "ok") => {
                ok += 1;
                assert_eq!(r.agent_id.as_str(), v["reader"].as_str().unwrap(), "{name}");
                assert_eq!(r.nonce, v["nonce"].as_str().unwrap(), "{name}");
                assert_eq!(r.created_s, v["created"].as_u64().unwrap(), "{name}");
            }
            (Err(e), code) => assert_eq!(e.code().as_str(), code, "{name}: {e}"),
            (Ok(_), code) => panic!("{name}: accepted, expected {code}"),
        }
    }
    assert!(ok >= 4, "some vectors must verify");
}
