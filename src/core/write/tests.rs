use super::*;
use crate::core::crypto::AgentKey;
use crate::core::json::parse_str;
use crate::core::testing;

const T0: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z
const HOUR: u64 = 3_600_000;

type Entries = Vec<(String, Json)>;

fn key(n: u8) -> AgentKey {
    AgentKey::from_seed(&[n; 32])
}

/// The spec's example with the agent id of `k`.
fn capsule_for(k: &AgentKey) -> Json {
    testing::example_for(k.agent_id())
}

fn body(envelope: &Json) -> Vec<u8> {
    serde_json::to_vec(envelope).unwrap()
}

fn put(
    state: &mut AgentState,
    k: &AgentKey,
    seq: u64,
    capsule: &Json,
    now: u64,
) -> Result<AcceptedBody, Rejection> {
    let tiers = TierTable::default();
    match check(
        state,
        &body(&k.sign_envelope(seq, capsule)),
        &k.agent_id(),
        now,
        &tiers,
        &Terms::genesis(Signature::Verify),
    ) {
        Ok(c) => Ok(state.commit(c, now, &tiers).1),
        Err(r) => {
            state.note_rejection(&k.agent_id(), &r, now);
            Err(r)
        }
    }
}

fn codes(r: &Rejection) -> Vec<&'static str> {
    r.reason_codes.iter().map(|c| c.as_str()).collect()
}

fn run(state: &AgentState, raw: &[u8], k: &AgentKey) -> Result<Candidate, Rejection> {
    check(
        state,
        raw,
        &k.agent_id(),
        T0,
        &TierTable::default(),
        &Terms::genesis(Signature::Verify),
    )
}

#[test]
fn accepts_the_spec_example_and_reports_cursor_and_quota() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    let ok = put(&mut s, &k, 1, &cap, T0).unwrap();
    assert!(ok.accepted && ok.changed);
    assert_eq!(ok.prev_cursor, None);
    assert_eq!(ok.cursor, jcs::cursor(&cap));
    assert_eq!((ok.writes.used_24h, ok.writes.remaining_24h), (1, 4));
    assert_eq!(ok.writes.reset_at.as_deref(), Some("2026-02-11T00:00:00Z"));
    // Same capsule again: cursor unchanged, prev_cursor = cursor, changed false.
    let again = put(&mut s, &k, 2, &cap, T0 + 1).unwrap();
    assert!(!again.changed);
    assert_eq!(again.prev_cursor.as_deref(), Some(ok.cursor.as_str()));
}

#[test]
fn body_cap_comes_first() {
    let k = key(1);
    let big = vec![b' '; MAX_BODY_BYTES + 1];
    let r = run(&AgentState::default(), &big, &k).unwrap_err();
    assert_eq!(codes(&r), ["payload_too_large"]);
    assert_eq!(
        (r.status(), r.max_bytes, r.observed_bytes),
        (413, Some(65536), Some(65537))
    );
}

#[test]
fn body_lengths_beyond_4_gib_are_reported_exactly() {
    // u64 end to end: in wasm a usize is 32 bits and once wrapped this.
    let r = Rejection::payload_too_large(5_000_000_000);
    assert_eq!((r.status(), r.observed_bytes), (413, Some(5_000_000_000)));
    let body = serde_json::to_value(&r).unwrap();
    assert_eq!(body["observed_bytes"], 5_000_000_000u64);
}

#[test]
fn an_unreadable_body_is_a_client_error() {
    let r = Rejection::unreadable_body();
    assert_eq!((r.status(), codes(&r)), (400, vec!["invalid_json"]));
}

#[test]
fn malformed_json_is_invalid_json() {
    let k = key(1);
    for raw in [
        &b"{"[..],
        b"[]",
        b"{\"seq\":1,\"seq\":2}",
        b"\"x\"",
        b"\xff",
    ] {
        let r = run(&AgentState::default(), raw, &k).unwrap_err();
        assert_eq!(
            (codes(&r), r.status()),
            (vec!["invalid_json"], 400),
            "{raw:?}"
        );
    }
}

#[test]
fn envelope_shape_codes() {
    let k = key(1);
    let cap = capsule_for(&k);
    let mk = |edit: &dyn Fn(&mut Entries)| {
        let mut env = k.sign_envelope(1, &cap);
        if let Json::Object(e) = &mut env {
            edit(e);
        }
        body(&env)
    };
    let set = |e: &mut Vec<(String, Json)>, key: &str, v: Json| {
        e.retain(|(k, _)| k != key);
        e.push((key.into(), v));
    };
    let cases: Vec<(Vec<u8>, Vec<&str>, u16)> = vec![
        (mk(&|e| e.retain(|(k, _)| k != "seq")), vec!["bad_seq"], 400),
        (
            mk(&|e| set(e, "seq", Json::Number(-1.0))),
            vec!["bad_seq"],
            400,
        ),
        (
            mk(&|e| set(e, "seq", Json::Number(1.5))),
            vec!["bad_seq"],
            400,
        ),
        (
            mk(&|e| set(e, "seq", Json::from("1"))),
            vec!["bad_seq"],
            400,
        ),
        (
            mk(&|e| set(e, "seq", Json::Number(9007199254740992.0))),
            vec!["bad_seq"],
            400,
        ),
        (
            mk(&|e| e.retain(|(k, _)| k != "capsule")),
            vec!["invalid_capsule"],
            422,
        ),
        (
            mk(&|e| set(e, "capsule", Json::Array(vec![]))),
            vec!["invalid_capsule"],
            422,
        ),
        (
            mk(&|e| set(e, "agent_id", Json::from(key(2).agent_id().as_str()))),
            vec!["agent_id"],
            422,
        ),
        (
            mk(&|e| set(e, "extra", Json::Null)),
            vec!["unknown_field"],
            422,
        ),
        // Several shape problems are reported together; status of the first.
        (
            mk(&|e| {
                e.retain(|(k, _)| k != "seq");
                set(e, "capsule", Json::Null)
            }),
            vec!["bad_seq", "invalid_capsule"],
            400,
        ),
    ];
    for (raw, want, status) in cases {
        let r = run(&AgentState::default(), &raw, &k).unwrap_err();
        assert_eq!((codes(&r), r.status()), (want.clone(), status), "{want:?}");
    }
    // A capsule whose agent_id differs from the path, correctly signed.
    let mut other = cap.clone();
    if let Json::Object(e) = &mut other {
        e.retain(|(k, _)| k != "agent_id");
        e.push(("agent_id".into(), Json::from(key(2).agent_id().as_str())));
    }
    let r = run(
        &AgentState::default(),
        &body(&k.sign_envelope(1, &other)),
        &k,
    )
    .unwrap_err();
    assert_eq!(codes(&r), ["agent_id"]);
}

#[test]
fn signature_problems_are_401_bad_signature() {
    let k = key(1);
    let cap = capsule_for(&k);
    let good = k.sign_envelope(1, &cap);
    let edit = |key: &str, v: Option<Json>| {
        let mut env = good.clone();
        if let Json::Object(e) = &mut env {
            e.retain(|(k, _)| k != key);
            if let Some(v) = v {
                e.push((key.into(), v));
            }
        }
        body(&env)
    };
    let sig = good.get("signature").unwrap().as_str().unwrap().to_string();
    let mut flipped = sig.clone().into_bytes();
    flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
    let cases = vec![
        edit("signature", None),
        edit(
            "signature",
            Some(Json::String(String::from_utf8(flipped).unwrap())),
        ),
        edit("signature", Some(Json::String(sig.to_uppercase()))),
        edit("signature", Some(Json::String(sig[..126].to_string()))),
        edit("public_key", None),
        edit("public_key", Some(Json::from(key(2).public_key().to_hex()))),
        edit(
            "public_key",
            Some(Json::from(format!("01{}", "00".repeat(31)))),
        ),
        edit("signature_alg", Some(Json::from("hmac-sha256"))),
        // Signed for seq 1, sent as seq 2.
        edit("seq", Some(Json::from(2u64))),
    ];
    for raw in &cases {
        let r = run(&AgentState::default(), raw, &k).unwrap_err();
        assert_eq!((codes(&r), r.status()), (vec!["bad_signature"], 401));
        assert!(
            r.counts_toward_cooldown.is_none(),
            "unauthenticated rejects never count"
        );
    }
    // signature_alg absent is fine.
    assert!(run(&AgentState::default(), &edit("signature_alg", None), &k).is_ok());

    // The agent's object skips only the Ed25519 verification the Worker's
    // precheck did: a signature that fails only cryptographically passes
    // there, and every other problem above is still refused.
    let prechecked = |raw: &[u8]| {
        check(
            &AgentState::default(),
            raw,
            &k.agent_id(),
            T0,
            &TierTable::default(),
            &Terms::genesis(Signature::Prechecked),
        )
    };
    let passed: Vec<usize> = (0..cases.len())
        .filter(|&i| prechecked(&cases[i]).is_ok())
        .collect();
    assert_eq!(
        passed,
        vec![1, 8],
        "only the flipped signature and the re-sequenced envelope"
    );
}

#[test]
fn unauthenticated_rejects_reveal_nothing_stored() {
    let k = key(1);
    let mut s = AgentState::default();
    put(&mut s, &k, 5, &capsule_for(&k), T0).unwrap();
    let forged = {
        let mut env = key(2).sign_envelope(1, &capsule_for(&k));
        if let Json::Object(e) = &mut env {
            for (name, v) in e.iter_mut() {
                if name == "public_key" {
                    *v = Json::from(k.public_key().to_hex());
                }
                if name == "agent_id" {
                    *v = Json::from(k.agent_id().as_str());
                }
            }
        }
        body(&env)
    };
    let fresh = run(&AgentState::default(), &forged, &k).unwrap_err();
    let known = run(&s, &forged, &k).unwrap_err();
    assert_eq!(fresh, known, "same answer whether or not the agent exists");
}

#[test]
fn replay_and_out_of_order_seq() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    put(&mut s, &k, 10, &cap, T0).unwrap();
    for seq in [10, 9, 0] {
        let r = put(&mut s, &k, seq, &cap, T0).unwrap_err();
        assert_eq!((codes(&r), r.status()), (vec!["replay_seq"], 409));
    }
    assert_eq!(
        s.cooldown.consecutive_rejects, 0,
        "replays never count toward cooldown"
    );
    assert!(put(&mut s, &k, 11, &cap, T0).is_ok());
}

#[test]
fn schema_then_safety_then_size() {
    let k = key(1);
    let with = |f: &dyn Fn(&mut Entries)| {
        let mut c = capsule_for(&k);
        if let Json::Object(e) = &mut c {
            f(e);
        }
        c
    };
    // Schema beats safety: unknown field + a URL in the motto -> only schema codes.
    let both = with(&|e| {
        e.push(("bogus".into(), Json::Null));
        e.retain(|(k, _)| k != "self_motto");
        e.push((
            "self_motto".into(),
            Json::from("see https://evil.example/x"),
        ));
    });
    let r = put(&mut AgentState::default(), &k, 1, &both, T0).unwrap_err();
    assert_eq!((codes(&r), r.status()), (vec!["unknown_field"], 422));
    assert!(matches!(&r.findings[0], FindingOut::Schema(v) if v.path == "$.bogus"));

    // Too large for free (but schema-valid): 413 with sizes.
    let big = with(&|e| {
        let objectives: Vec<Json> = (0..8)
            .map(|i| {
                parse_str(&format!(
                    r#"{{"id":"objective-{i}","status":"open","priority":"high","title":"{}","checkpoint":"{}"}}"#,
                    "t".repeat(120),
                    "c".repeat(200)
                ))
                .unwrap()
            })
            .collect();
        e.retain(|(k, _)| k != "objectives");
        e.push(("objectives".into(), Json::Array(objectives)));
    });
    let r = put(&mut AgentState::default(), &k, 1, &big, T0).unwrap_err();
    assert_eq!((codes(&r), r.status()), (vec!["capsule_too_large"], 413));
    assert_eq!(r.max_bytes, Some(4096));
    assert_eq!(r.observed_bytes, Some(jcs::canonicalize(&big).len() as u64));
    // The same capsule fits the pro tier.
    let mut pro = AgentState::default();
    pro.paid.credit(Tier::Pro, 30, T0);
    assert!(put(&mut pro, &k, 1, &big, T0).is_ok());

    // The capsule's own checks alone (the offline checker's entry point):
    // the same refusal, in the same order, and the canonical text when it passes.
    let tiers = TierTable::default();
    let off = check_capsule_in_tier(&big, Tier::Free, tiers.get(Tier::Free)).unwrap_err();
    assert_eq!(
        (codes(&off), off.max_bytes, off.observed_bytes),
        (codes(&r), r.max_bytes, r.observed_bytes)
    );
    assert_eq!(
        check_capsule_in_tier(&big, Tier::Pro, tiers.get(Tier::Pro)).unwrap(),
        jcs::canonicalize(&big)
    );
    let r = check_capsule_in_tier(&both, Tier::Pro, tiers.get(Tier::Pro)).unwrap_err();
    assert_eq!(codes(&r), ["unknown_field"]);
}

#[test]
fn quota_is_a_rolling_window_of_accepted_writes() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    for i in 0..5 {
        put(&mut s, &k, i + 1, &cap, T0 + i * HOUR).unwrap();
    }
    let r = put(&mut s, &k, 6, &cap, T0 + 5 * HOUR).unwrap_err();
    assert_eq!((codes(&r), r.status()), (vec!["write_quota_exceeded"], 429));
    assert_eq!(r.next_write_at.as_deref(), Some("2026-02-11T00:00:00Z"));
    assert_eq!(r.retry_after_sec, Some(19 * 3600));
    // Rejections spent no quota; the first write leaves the window at T0+24h.
    assert_eq!(s.writes.times_ms.len(), 5);
    let ok = put(&mut s, &k, 6, &cap, T0 + 24 * HOUR).unwrap();
    assert_eq!(ok.writes.used_24h, 5);
    assert_eq!(ok.writes.reset_at.as_deref(), Some("2026-02-11T01:00:00Z"));
}

#[test]
fn rejects_never_change_published_state() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    put(&mut s, &k, 1, &cap, T0).unwrap();
    let before = s.published.clone();
    let writes_before = s.writes.clone();
    let mut bad = cap.clone();
    if let Json::Object(e) = &mut bad {
        e.push(("nope".into(), Json::Null));
    }
    put(&mut s, &k, 2, &bad, T0 + 1).unwrap_err();
    put(&mut s, &k, 1, &cap, T0 + 2).unwrap_err();
    assert_eq!(s.published, before);
    assert_eq!(s.writes, writes_before);
}

#[test]
fn cooldown_after_five_signed_rejects_and_reset_on_accept() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    put(&mut s, &k, 1, &cap, T0).unwrap();
    let mut bad = cap.clone();
    if let Json::Object(e) = &mut bad {
        e.push(("nope".into(), Json::Null));
    }
    for seq in 2..7 {
        let r = put(&mut s, &k, seq, &bad, T0).unwrap_err();
        assert_eq!(codes(&r), ["unknown_field"]);
    }
    let r = put(&mut s, &k, 7, &cap, T0 + 1000).unwrap_err();
    assert_eq!((codes(&r), r.status()), (vec!["cooldown_active"], 429));
    assert_eq!(r.retry_after_sec, Some(9));
    // That was a new signed payload during cooldown: counted, doubling to 20 s.
    assert_eq!(s.cooldown.until_ms, Some(T0 + 1000 + 20_000));
    // Once the wait is over, a good write is accepted and clears the counter.
    assert!(put(&mut s, &k, 8, &cap, T0 + 30_000).is_ok());
    assert_eq!(s.cooldown, Cooldown::default());
}

#[test]
fn garbage_from_others_never_locks_an_agent_out() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    put(&mut s, &k, 1, &cap, T0).unwrap();
    // Forged signatures (anyone) and replays of a real rejected write.
    let mut bad = cap.clone();
    if let Json::Object(e) = &mut bad {
        e.push(("nope".into(), Json::Null));
    }
    let replayed = body(&k.sign_envelope(2, &bad));
    for i in 0..50 {
        let forged = body(&key(3).sign_envelope(i, &cap));
        let r = check(
            &s,
            &forged,
            &k.agent_id(),
            T0,
            &TierTable::default(),
            &Terms::genesis(Signature::Verify),
        )
        .unwrap_err();
        s.note_rejection(&k.agent_id(), &r, T0);
        let r = check(
            &s,
            &replayed,
            &k.agent_id(),
            T0,
            &TierTable::default(),
            &Terms::genesis(Signature::Verify),
        )
        .unwrap_err();
        s.note_rejection(&k.agent_id(), &r, T0);
    }
    assert_eq!(s.cooldown.consecutive_rejects, 1);
    assert!(put(&mut s, &k, 3, &cap, T0).is_ok());
}

#[test]
fn rejection_body_shape() {
    let k = key(1);
    let r = run(&AgentState::default(), b"{}", &k).unwrap_err();
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["accepted"], false);
    assert_eq!(
        v["reason_codes"],
        serde_json::json!(["bad_seq", "invalid_capsule"])
    );
    assert!(v["detail"].as_str().unwrap().contains("envelope"));
    assert_eq!(v["findings"][0]["path"], "$.seq");
    assert!(v.get("retry_after_sec").is_none());
}

#[test]
fn record_and_head_follow_the_window() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    put(&mut s, &k, 3, &cap, T0).unwrap();
    let rec = s.record(&k.agent_id(), &TierTable::default(), T0).unwrap();
    assert_eq!(
        crate::core::jcs::cursor_of_canonical(rec.capsule_body().as_bytes()),
        rec.cursor
    );
    assert_eq!(rec.etag(), &rec.cursor[7..]);
    let head = rec.head(T0 + HOUR, &TierTable::default());
    assert_eq!((head.seq, head.ttl_sec, head.writes.used_24h), (3, 600, 1));
    assert_eq!(head.generated_at, "2026-02-10T01:00:00Z");
    assert_eq!(
        head.capsule_url,
        format!("/self/{}/capsule.json", k.agent_id())
    );
    let later = rec.head(T0 + 25 * HOUR, &TierTable::default());
    assert_eq!(
        (
            later.writes.used_24h,
            later.writes.remaining_24h,
            later.writes.reset_at
        ),
        (0, 5, None)
    );
    // The record survives a JSON round trip (it lives in KV).
    let back: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
    assert_eq!(back, rec);
}

#[test]
fn state_round_trips_through_storage() {
    let k = key(1);
    let mut s = AgentState::default();
    put(&mut s, &k, 1, &capsule_for(&k), T0).unwrap();
    let back: AgentState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
}

#[test]
fn replays_during_a_cooldown_get_replay_seq_and_never_extend_it() {
    let k = key(1);
    let mut s = AgentState::default();
    let cap = capsule_for(&k);
    // An attacker has collected the agent's accepted envelopes 1..=40.
    let accepted: Vec<Vec<u8>> = (1..=40)
        .map(|seq| body(&k.sign_envelope(seq, &cap)))
        .collect();
    for (i, b) in accepted.iter().enumerate() {
        // The first five are accepted; the rest were never sent (quota).
        if i < 5 {
            let c = check(
                &s,
                b,
                &k.agent_id(),
                T0 + i as u64,
                &TierTable::default(),
                &Terms::genesis(Signature::Verify),
            )
            .unwrap();
            s.commit(c, T0 + i as u64, &TierTable::default());
        }
    }
    // The agent storms itself into a cooldown with new broken writes.
    let mut bad = cap.clone();
    if let Json::Object(e) = &mut bad {
        e.push(("nope".into(), Json::Null));
    }
    for seq in 6..11 {
        put(&mut s, &k, seq, &bad, T0 + HOUR).unwrap_err();
    }
    let until = s.cooldown.until_ms.expect("cooling down");
    // Replays of accepted envelopes: replay_seq, never cooldown_active, no extension.
    for b in &accepted[..5] {
        let r = check(
            &s,
            b,
            &k.agent_id(),
            T0 + HOUR + 1,
            &TierTable::default(),
            &Terms::genesis(Signature::Verify),
        )
        .unwrap_err();
        assert_eq!(codes(&r), ["replay_seq"]);
        s.note_rejection(&k.agent_id(), &r, T0 + HOUR + 1);
    }
    // Replays of the agent's own rejected envelopes do not count again either.
    for seq in 6..11 {
        let b = body(&k.sign_envelope(seq, &bad));
        let r = check(
            &s,
            &b,
            &k.agent_id(),
            T0 + HOUR + 2,
            &TierTable::default(),
            &Terms::genesis(Signature::Verify),
        )
        .unwrap_err();
        assert_eq!(codes(&r), ["cooldown_active"]);
        s.note_rejection(&k.agent_id(), &r, T0 + HOUR + 2);
    }
    assert_eq!(s.cooldown.until_ms, Some(until));
}

#[test]
fn the_largest_seq_is_the_last_write_and_the_refusal_says_so() {
    let k = key(41);
    let mut s = AgentState::default();
    let c = capsule_for(&k);
    // 2^53 - 1 is a valid seq (one more is bad_seq) …
    let over = run(&s, &body(&k.sign_envelope(MAX_SEQ + 1, &c)), &k).unwrap_err();
    assert_eq!(codes(&over), ["bad_seq"]);
    put(&mut s, &k, MAX_SEQ, &c, T0).unwrap();
    // … and after it nothing is greater: every later write is a replay,
    // with a detail that tells the agent to stop retrying.
    let r = put(&mut s, &k, MAX_SEQ, &c, T0 + HOUR).unwrap_err();
    assert_eq!(codes(&r), ["replay_seq"]);
    assert!(r.detail.contains("no further writes"), "{}", r.detail);
    // An ordinary replay keeps the ordinary detail.
    let k2 = key(42);
    let mut s2 = AgentState::default();
    put(&mut s2, &k2, 5, &capsule_for(&k2), T0).unwrap();
    let r = put(&mut s2, &k2, 5, &capsule_for(&k2), T0 + HOUR).unwrap_err();
    assert!(!r.detail.contains("no further writes"), "{}", r.detail);
}

#[test]
fn a_projection_may_be_kept_while_a_watch_is_current_and_for_a_while_after() {
    let k = key(1);
    let mut s = AgentState::default();
    let plain = capsule_for(&k);
    let mut watched = plain.clone();
    if let Json::Object(entries) = &mut watched {
        entries.push((
            "watch".into(),
            parse_str(r#"{"tags":["security"]}"#).unwrap(),
        ));
    }
    put(&mut s, &k, 1, &plain, T0).unwrap();
    assert!(!s.projection_may_be_kept(T0), "no capsule had a watch");
    put(&mut s, &k, 2, &watched, T0 + 1).unwrap();
    assert!(
        s.projection_may_be_kept(T0 + 1),
        "the current capsule has one"
    );
    // Replaced by a capsule without one: copies made of it may live on.
    put(&mut s, &k, 3, &plain, T0 + 2).unwrap();
    assert!(s.projection_may_be_kept(T0 + 2));
    assert!(s.projection_may_be_kept(T0 + 2 + PROJECTION_KEPT_MS - 1));
    assert!(!s.projection_may_be_kept(T0 + 2 + PROJECTION_KEPT_MS));
    // A later write keeps the window of the replaced watch, then drops it.
    put(&mut s, &k, 4, &plain, T0 + 3).unwrap();
    assert_eq!(s.projected_until_ms, Some(T0 + 2 + PROJECTION_KEPT_MS));
    put(&mut s, &k, 5, &plain, T0 + 2 + PROJECTION_KEPT_MS).unwrap();
    assert_eq!(s.projected_until_ms, None);
    // States stored before the field read as "none replaced".
    let text = serde_json::to_string(&s).unwrap();
    assert!(!text.contains("projected_until_ms"));
    assert_eq!(serde_json::from_str::<AgentState>(&text).unwrap(), s);
}
