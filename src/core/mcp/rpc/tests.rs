use super::*;
use serde_json::json;

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn post(v: Value) -> Outcome {
    handle(v.to_string().as_bytes(), None)
}

fn post_with(v: Value, header: &str) -> Outcome {
    handle(v.to_string().as_bytes(), Some(header))
}

fn reply(o: Outcome) -> (u16, Value) {
    match o {
        Outcome::Reply { status, body } => (status, body),
        other => panic!("expected a reply, got {other:?}"),
    }
}

fn error_of(o: Outcome) -> (u16, i64, Value) {
    let (status, body) = reply(o);
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body.get("result").is_none(), "{body}");
    (
        status,
        body["error"]["code"].as_i64().expect("error.code"),
        body,
    )
}

fn req(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
}

fn call(name: &str, args: Value) -> Value {
    req("tools/call", json!({ "name": name, "arguments": args }))
}

#[test]
fn initialize_echoes_a_supported_version_and_otherwise_offers_the_latest() {
    for v in SUPPORTED_VERSIONS {
        let (status, body) = reply(post(req(
            "initialize",
            json!({ "protocolVersion": v, "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
        )));
        assert_eq!(status, 200);
        assert_eq!(body["id"], 7);
        let r = &body["result"];
        assert_eq!(r["protocolVersion"], v);
        assert_eq!(r["serverInfo"]["name"], "self-capsule");
        assert_eq!(r["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            r["capabilities"],
            json!({ "tools": { "listChanged": false } })
        );
        assert!(r["instructions"].as_str().unwrap().len() < 400);
    }
    for v in ["2024-11-05", "2026-07-28", "nonsense"] {
        let (_, body) = reply(post(req("initialize", json!({ "protocolVersion": v }))));
        assert_eq!(body["result"]["protocolVersion"], LATEST_VERSION, "{v}");
    }
    assert_eq!(LATEST_VERSION, "2025-11-25");
}

#[test]
fn initialize_without_a_version_is_invalid_params() {
    let (status, code, _) = error_of(post(req("initialize", json!({}))));
    assert_eq!((status, code), (200, code::INVALID_PARAMS));
}

#[test]
fn the_version_header_must_name_a_supported_version() {
    let (status, body) = reply(post_with(req("ping", json!({})), "2025-06-18"));
    assert_eq!((status, &body["result"]), (200, &json!({})));
    // Stray whitespace is not a different version.
    let (status, _) = reply(post_with(req("ping", json!({})), " 2025-11-25 "));
    assert_eq!(status, 200);
    for bad in ["2026-07-28", "2024-11-05", "", "latest"] {
        let (status, code, body) = error_of(post_with(req("tools/list", json!({})), bad));
        assert_eq!((status, code), (400, code::INVALID_REQUEST), "{bad}");
        assert_eq!(body["id"], 7, "the id is echoed");
        assert_eq!(body["error"]["data"]["requested"], bad);
        assert_eq!(
            body["error"]["data"]["supported"],
            json!(SUPPORTED_VERSIONS)
        );
    }
    // Notifications are checked too (a 400 instead of the 202).
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(error_of(post_with(note, "1999-01-01")).0, 400);
}

#[test]
fn a_stateless_era_version_in_meta_gets_the_fallback_answer() {
    let m = req(
        "tools/list",
        json!({ "_meta": { META_VERSION_KEY: "2026-07-28" } }),
    );
    let (status, code, body) = error_of(post(m));
    assert_eq!((status, code), (400, code::INVALID_REQUEST));
    assert_eq!(body["error"]["data"]["requested"], "2026-07-28");
    let ok = req(
        "tools/list",
        json!({ "_meta": { META_VERSION_KEY: "2025-11-25" } }),
    );
    assert_eq!(reply(post(ok)).0, 200);
}

#[test]
fn tools_list_is_the_remote_catalogue_with_schemas_and_hints() {
    let (status, body) = reply(post(req("tools/list", json!({}))));
    assert_eq!(status, 200);
    let tools = body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "self_read",
            "self_subscribe",
            "self_history",
            "self_verify",
            "self_feed",
            "self_submit"
        ]
    );
    for t in tools {
        let tool = Tool::at(Door::Remote, t["name"].as_str().unwrap()).unwrap();
        assert_eq!(t["inputSchema"], tool.input_schema(Door::Remote));
        assert_eq!(t["title"], tool.title());
        assert_eq!(t["description"], tool.description(Door::Remote));
        assert_eq!(t["annotations"]["readOnlyHint"], tool.read_only());
    }
    assert_eq!(tools[5]["annotations"]["readOnlyHint"], false);
    // Params are optional (a cursor is ignored: there is one page).
    let (status, _) = reply(post(
        json!({ "jsonrpc": "2.0", "id": "x", "method": "tools/list" }),
    ));
    assert_eq!(status, 200);
}

#[test]
fn a_valid_tool_call_becomes_a_typed_call_to_run() {
    let o = post(call("self_read", json!({ "agent_id": A })));
    let Outcome::Run { id, call: typed } = o else {
        panic!("{o:?}")
    };
    assert_eq!(id, 7);
    assert!(matches!(typed, Call::Read { agent: Some(a) } if a.as_str() == A));

    let o = post(call(
        "self_history",
        json!({ "agent_id": A, "since_cursor": format!("sha256:{}", "b".repeat(64)), "limit": 3 }),
    ));
    assert!(matches!(
        o,
        Outcome::Run {
            call: Call::History { limit: Some(3), .. },
            ..
        }
    ));
    // self_feed takes the local tool's arguments, the agent required here.
    let cursor = format!("sha256:{}", "c".repeat(64));
    let o = post(call(
        "self_feed",
        json!({ "agent_id": A, "doc": "latest", "since": cursor }),
    ));
    assert!(matches!(
        o,
        Outcome::Run {
            call: Call::Feed { agent: Some(_), doc: crate::core::urls::FeedDoc::Latest, since: Some(ref s) },
            ..
        } if *s == cursor
    ));
    let o = post(call("self_feed", json!({ "doc": "digest" })));
    assert!(
        matches!(&o, Outcome::Reply { .. }),
        "no agent_id at the remote door: {o:?}"
    );
    let o = post(call(
        "self_submit",
        json!({ "envelope": { "agent_id": A } }),
    ));
    assert!(matches!(
        o,
        Outcome::Run {
            call: Call::Submit { .. },
            ..
        }
    ));
}

#[test]
fn bad_arguments_are_a_tool_error_the_model_can_read() {
    let (status, body) = reply(post(call("self_read", json!({}))));
    assert_eq!(status, 200);
    assert!(body.get("error").is_none());
    let r = &body["result"];
    assert_eq!(r["isError"], true);
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["error"], "invalid_arguments");
    assert_eq!(text["field"], "agent_id");
    // Arguments absent entirely: the same.
    let m = req("tools/call", json!({ "name": "self_verify" }));
    assert_eq!(reply(post(m)).1["result"]["isError"], true);
}

#[test]
fn an_unknown_tool_is_invalid_params_and_a_keyed_tool_says_where_it_lives() {
    let (status, code, body) = error_of(post(call("self_nope", json!({}))));
    assert_eq!((status, code), (200, code::INVALID_PARAMS));
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("self_nope"));
    assert_eq!(body["error"]["data"]["tools"].as_array().unwrap().len(), 6);
    let (_, code, body) = error_of(post(call("self_write", json!({ "capsule": {} }))));
    assert_eq!(code, code::INVALID_PARAMS);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("selfcap mcp"));
    // No name, or arguments that are not an object.
    let m = req("tools/call", json!({ "arguments": {} }));
    assert_eq!(error_of(post(m)).1, code::INVALID_PARAMS);
    let m = req(
        "tools/call",
        json!({ "name": "self_read", "arguments": [A] }),
    );
    assert_eq!(error_of(post(m)).1, code::INVALID_PARAMS);
}

#[test]
fn unknown_methods_are_method_not_found() {
    for m in [
        "resources/list",
        "prompts/list",
        "server/discover",
        "tools/cal",
        "",
    ] {
        let (status, code, body) = error_of(post(req(m, json!({}))));
        assert_eq!((status, code), (200, code::METHOD_NOT_FOUND), "{m}");
        assert_eq!(body["id"], 7);
    }
}

#[test]
fn notifications_and_responses_are_accepted_without_an_answer() {
    for m in [
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } }),
        json!({ "jsonrpc": "2.0", "method": "anything/at/all" }),
        json!({ "jsonrpc": "2.0", "id": 3, "result": {} }),
        json!({ "jsonrpc": "2.0", "id": "s1", "error": { "code": -1, "message": "no" } }),
    ] {
        assert_eq!(post(m.clone()), Outcome::Accepted, "{m}");
    }
}

#[test]
fn malformed_messages_are_refused_with_400_and_the_right_code() {
    let raw = |b: &[u8]| error_of(handle(b, None));
    for body in [
        &b"{"[..],
        b"",
        b"not json",
        b"\xff\xfe",
        b"{\"a\":1,\"a\":2}",
    ] {
        let (status, code, e) = raw(body);
        assert_eq!((status, code), (400, code::PARSE_ERROR), "{body:?}");
        assert_eq!(e["id"], Value::Null);
        assert_eq!(e["error"]["data"]["reason_code"], "invalid_json");
    }
    // Deeper than the service's JSON depth bound.
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    assert_eq!(raw(deep.as_bytes()).1, code::PARSE_ERROR);

    let invalid = |v: Value| {
        let (status, code, body) = error_of(post(v));
        assert_eq!((status, code), (400, code::INVALID_REQUEST));
        body
    };
    let batch = invalid(json!([req("ping", json!({})), req("ping", json!({}))]));
    assert!(batch["error"]["message"]
        .as_str()
        .unwrap()
        .contains("batch"));
    invalid(json!([]));
    invalid(json!("ping"));
    invalid(json!({ "id": 1, "method": "ping" }));
    assert_eq!(
        invalid(json!({ "jsonrpc": "1.0", "id": 1, "method": "ping" }))["id"],
        1
    );
    invalid(json!({ "jsonrpc": "2.0", "id": null, "method": "ping" }));
    invalid(json!({ "jsonrpc": "2.0", "id": 1.5, "method": "ping" }));
    invalid(json!({ "jsonrpc": "2.0", "id": {}, "method": "ping" }));
    invalid(json!({ "jsonrpc": "2.0", "id": 1, "method": 5 }));
    invalid(json!({ "jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1] }));
    invalid(json!({ "jsonrpc": "2.0", "id": 1 }));
    invalid(json!({ "jsonrpc": "2.0", "id": 1, "result": {}, "error": {} }));
}

#[test]
fn string_ids_are_echoed_exactly() {
    let (_, body) = reply(post(
        json!({ "jsonrpc": "2.0", "id": "abc-1", "method": "ping" }),
    ));
    assert_eq!(body["id"], "abc-1");
    let big = json!({ "jsonrpc": "2.0", "id": 9007199254740993u64, "method": "ping" });
    let (_, body) = reply(post(big));
    assert_eq!(body["id"], 9007199254740993u64);
}

#[test]
fn the_size_refusals_are_json_rpc_errors_with_their_status() {
    let (status, code, body) = error_of(too_large(1 << 20));
    assert_eq!((status, code), (413, code::INVALID_REQUEST));
    assert_eq!(body["error"]["data"]["reason_code"], "payload_too_large");
    assert_eq!(body["error"]["data"]["max_bytes"], MAX_MESSAGE_BYTES);
    let (status, code, _) = error_of(unreadable());
    assert_eq!((status, code), (400, code::PARSE_ERROR));
}

#[test]
fn a_tool_answer_is_one_text_content_with_is_error() {
    let ok = tool_response(&json!(3), &Answer::ok(json!({ "a": 1 })));
    assert_eq!(
        ok,
        json!({ "jsonrpc": "2.0", "id": 3, "result": {
            "content": [{ "type": "text", "text": "{\"a\":1}" }], "isError": false } })
    );
    let err = tool_response(&json!("x"), &results::error("capsule_not_found", "d", "h"));
    assert_eq!(err["result"]["isError"], true);
}

#[test]
fn submit_needs_the_envelopes_agent_id() {
    let env = |v: Value| -> Json { serde_json::from_value(v).unwrap() };
    assert_eq!(
        submit_target(&env(json!({ "agent_id": A })))
            .unwrap()
            .as_str(),
        A
    );
    for bad in [
        json!({}),
        json!({ "agent_id": "ABC" }),
        json!({ "agent_id": 5 }),
    ] {
        let a = submit_target(&env(bad)).unwrap_err();
        assert!(a.is_error);
        assert_eq!(a.body["reason_codes"], json!(["agent_id"]));
        assert_eq!(a.body["http_status"], 422);
    }
}

#[test]
fn the_envelope_is_taken_as_sent_whitespace_and_escapes_included() {
    let env = "{ \"seq\" : 1 ,\n  \"capsule\":{\"a\":\"\\u0041\"}   }";
    let msg = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"self_submit","arguments":{{"envelope":{env}}}}}}}"#
    );
    assert_eq!(envelope_text(msg.as_bytes()), Some(env));
    // An escaped member name is still the envelope.
    let msg = msg.replace("\"envelope\"", "\"envel\\u006fpe\"");
    assert_eq!(envelope_text(msg.as_bytes()), Some(env));
    let none = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self_read","arguments":{"agent_id":"x"}}}"#;
    assert_eq!(envelope_text(none.as_bytes()), None);
}
