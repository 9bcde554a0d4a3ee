use super::*;

const ID: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

fn route(path: &str) -> Route<'_> {
    Route::parse(path)
}

#[test]
fn every_document_parses_under_both_prefixes_and_round_trips() {
    for prefix in PREFIXES {
        for doc in Doc::FIXED {
            let path = format!("{prefix}{ID}/{}", doc.file());
            assert_eq!(route(&path), Route::Agent { doc, raw_id: ID }, "{path}");
        }
        let path = format!("{prefix}{ID}/snapshot/abc.json");
        assert_eq!(
            route(&path),
            Route::Agent {
                doc: Doc::Snapshot("abc"),
                raw_id: ID
            }
        );
    }
    assert_eq!(Doc::Head.path(ID), format!("/self/{ID}/head.json"));
    assert_eq!(Doc::Capsule.path(ID), format!("/self/{ID}/capsule.json"));
    let cursor = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        Doc::Snapshot(&cursor).path(ID),
        format!("/self/{ID}/snapshot/{}.json", "ab".repeat(32))
    );
    assert_eq!(
        route(&Doc::Snapshot(&cursor).path(ID)),
        Route::Agent {
            doc: Doc::Snapshot(&"ab".repeat(32)),
            raw_id: ID
        }
    );
}

#[test]
fn one_spelling_per_document() {
    for path in [
        "/",
        "/self",
        "/self/",
        &format!("/self/{ID}"),
        &format!("/self/{ID}/"),
        &format!("/self/{ID}/head.json/"),
        &format!("/self/{ID}/HEAD.JSON"),
        &format!("/self/{ID}/head"),
        "/self//head.json",
        &format!("/self/{ID}/snapshot/.json"),
        &format!("/self/{ID}/snapshot/a/b.json"),
        &format!("/self/{ID}/snapshot/abc"),
        &format!("/api/v2/self/{ID}/head.json"),
        &format!("/api/v1/self/{ID}/nope.json"),
        &format!("/self/{ID}/watch/"),
        &format!("/self/{ID}/watch.json"),
        &format!("/self/{ID}/WATCH"),
        "/self//watch",
        "/api/v1/self/bootstrap/",
        "/self/bootstrap",
        "/self/keys",
        "/api/v1/self/",
    ] {
        assert_eq!(route(path), Route::NotFound, "{path}");
    }
    assert_eq!(route("/api/v1/self/bootstrap"), Route::Bootstrap);
    assert_eq!(route("/api/v1/self/keys"), Route::Keys);
    for prefix in PREFIXES {
        assert_eq!(
            route(&format!("{prefix}{ID}/watch")),
            Route::Watch { raw_id: ID }
        );
    }
    // A service route's name in the id position is just a (bad) agent id.
    assert_eq!(
        route("/api/v1/self/keys/head.json"),
        Route::Agent {
            doc: Doc::Head,
            raw_id: "keys"
        }
    );
}

#[test]
fn methods_parse_case_insensitively_and_unknown_ones_are_other() {
    assert_eq!(Method::parse("GET"), Method::Get);
    assert_eq!(Method::parse("get"), Method::Get);
    assert_eq!(Method::parse("Put"), Method::Put);
    for raw in [
        "PROPFIND", "MKCOL", "LOCK", "COPY", "DELETE", "PATCH", "TRACE", "",
    ] {
        assert_eq!(Method::parse(raw), Method::Other, "{raw}");
    }
}

#[test]
fn dispatch_decides_preflight_then_method_then_agent_id() {
    use Method::*;
    let agent = AgentId::parse(ID).unwrap();
    let head = format!("/self/{ID}/head.json");
    let capsule = format!("/api/v1/self/{ID}/capsule.json");
    let bad_capsule = "/self/not-an-id/capsule.json";
    let key_log = format!("/self/{ID}/keys.json");
    let cases: Vec<(&str, Method, Action)> = vec![
        (
            &head,
            Get,
            Action::Read {
                doc: Doc::Head,
                agent: agent.clone(),
                head_only: false,
            },
        ),
        (
            &head,
            Head,
            Action::Read {
                doc: Doc::Head,
                agent: agent.clone(),
                head_only: true,
            },
        ),
        (&head, Put, Action::MethodNotAllowed { allow: ALLOW_READ }),
        (&head, Other, Action::MethodNotAllowed { allow: ALLOW_READ }),
        (
            &head,
            Options,
            Action::Preflight {
                allow: ALLOW_READ,
                headers: PREFLIGHT_HEADERS,
            },
        ),
        (
            &capsule,
            Put,
            Action::Write {
                agent: agent.clone(),
            },
        ),
        (
            &capsule,
            Post,
            Action::MethodNotAllowed {
                allow: ALLOW_CAPSULE,
            },
        ),
        (
            &key_log,
            Post,
            Action::KeyEvent {
                agent: agent.clone(),
            },
        ),
        (
            &key_log,
            Get,
            Action::Read {
                doc: Doc::KeyLog,
                agent: agent.clone(),
                head_only: false,
            },
        ),
        (
            &key_log,
            Put,
            Action::MethodNotAllowed {
                allow: ALLOW_KEY_LOG,
            },
        ),
        (&head, Post, Action::MethodNotAllowed { allow: ALLOW_READ }),
        (bad_capsule, Put, Action::BadAgentId),
        (bad_capsule, Get, Action::BadAgentId),
        (
            bad_capsule,
            Options,
            Action::Preflight {
                allow: ALLOW_CAPSULE,
                headers: PREFLIGHT_HEADERS,
            },
        ),
        (
            bad_capsule,
            Other,
            Action::MethodNotAllowed {
                allow: ALLOW_CAPSULE,
            },
        ),
        ("/api/v1/self/bootstrap", Post, Action::Bootstrap),
        (
            "/api/v1/self/bootstrap",
            Get,
            Action::MethodNotAllowed { allow: ALLOW_POST },
        ),
        (
            "/api/v1/self/bootstrap",
            Options,
            Action::Preflight {
                allow: ALLOW_POST,
                headers: PREFLIGHT_HEADERS,
            },
        ),
        ("/api/v1/self/keys", Head, Action::Keys { head_only: true }),
        ("/api/v1/self/upgrade/quote", Post, Action::Quote),
        ("/api/v1/self/upgrade/claim", Post, Action::Claim),
        (
            "/api/v1/self/upgrade/claim",
            Get,
            Action::MethodNotAllowed { allow: ALLOW_POST },
        ),
        ("/self/upgrade/claim", Post, Action::NotFound),
        (
            "/api/v1/self/keys",
            Put,
            Action::MethodNotAllowed { allow: ALLOW_READ },
        ),
        ("/mcp", Post, Action::Mcp),
        (
            "/mcp",
            Options,
            Action::Preflight {
                allow: ALLOW_POST,
                headers: MCP_PREFLIGHT_HEADERS,
            },
        ),
        // No server-initiated stream: GET (and everything else) is a 405.
        ("/mcp", Get, Action::MethodNotAllowed { allow: ALLOW_POST }),
        ("/mcp", Head, Action::MethodNotAllowed { allow: ALLOW_POST }),
        ("/mcp", Put, Action::MethodNotAllowed { allow: ALLOW_POST }),
        (
            "/mcp",
            Other,
            Action::MethodNotAllowed { allow: ALLOW_POST },
        ),
        // One spelling only.
        ("/mcp/", Post, Action::NotFound),
        ("/api/v1/mcp", Post, Action::NotFound),
        ("/MCP", Post, Action::NotFound),
        ("/nowhere", Options, Action::NotFound),
        ("/nowhere", Get, Action::NotFound),
        // The x402 purchase: POST only, its query checked by the handler.
        ("/api/v1/self/upgrade/x402", Post, Action::X402),
        (
            "/api/v1/self/upgrade/x402",
            Get,
            Action::MethodNotAllowed { allow: ALLOW_POST },
        ),
        // The projected head's socket: GET only, the upgrade checked later.
        ("/api/v1/watch/socket", Get, Action::FeedSocket),
        (
            "/api/v1/watch/socket",
            Post,
            Action::MethodNotAllowed { allow: ALLOW_WATCH },
        ),
        ("/api/v1/watch/socket/", Get, Action::NotFound),
    ];
    for (path, method, want) in cases {
        assert_eq!(route(path).dispatch(method), want, "{method:?} {path}");
    }
}

#[test]
fn templates_list_every_route_once() {
    let t = templates();
    assert_eq!(t.len(), 2 * 9 + 6 + 3 + 1 + 3);
    let mut paths: Vec<&str> = t.iter().map(|(p, _)| p.as_str()).collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), t.len());
    for (template, allow) in &t {
        let concrete = template.replace("{agent_id}", ID).replace("{cursor}", "ab");
        let r = route(&concrete);
        assert_eq!(r.allow(), Some(*allow), "{template}");
    }
}

#[test]
fn a_watch_is_a_get_of_a_valid_agent_id() {
    let path = format!("/self/{ID}/watch");
    let agent = AgentId::parse(ID).unwrap();
    assert_eq!(route(&path).dispatch(Method::Get), Action::Watch { agent });
    for m in [Method::Head, Method::Put, Method::Post, Method::Other] {
        assert_eq!(
            route(&path).dispatch(m),
            Action::MethodNotAllowed { allow: ALLOW_WATCH },
            "{m:?}"
        );
    }
    assert!(matches!(
        route(&path).dispatch(Method::Options),
        Action::Preflight {
            allow: ALLOW_WATCH,
            ..
        }
    ));
    assert_eq!(
        route("/self/not-an-id/watch").dispatch(Method::Get),
        Action::BadAgentId
    );
    assert_eq!(watch_path(ID), path);
}

#[test]
fn an_href_splits_into_path_and_query() {
    let cases = [
        (
            "https://h.example/self/ab/head.json",
            "/self/ab/head.json",
            None,
        ),
        (
            "http://127.0.0.1:8787/self/ab/head.json?wait=30",
            "/self/ab/head.json",
            Some("wait=30"),
        ),
        ("https://h.example/a?b=1#frag?x", "/a", Some("b=1")),
        ("https://h.example/a#f", "/a", None),
        ("https://h.example", "/", None),
        ("https://h.example?x=1", "/", Some("x=1")),
        ("https://h.example/a%3Fb/c?", "/a%3Fb/c", Some("")),
        ("https://user:pw@h.example:1/p/q", "/p/q", None),
    ];
    for (href, path, query) in cases {
        assert_eq!(split_href(href), (path, query), "{href}");
    }
}

#[test]
fn an_upgrade_reported_as_get_is_read_from_its_headers() {
    use Method::*;
    assert_eq!(Method::of_upgrade(Get, false, false), Get);
    assert_eq!(Method::of_upgrade(Get, true, false), Options);
    assert_eq!(Method::of_upgrade(Get, true, true), Options);
    assert_eq!(Method::of_upgrade(Get, false, true), Other);
    // A method the runtime did report is taken as it is.
    assert_eq!(Method::of_upgrade(Put, false, true), Put);
    assert_eq!(Method::of_upgrade(Head, false, false), Head);
    // And what it means on the watch route: a preflight, or 405.
    let watch = || Route::parse("/self/aa/watch");
    assert!(matches!(
        watch().dispatch(Method::of_upgrade(Get, true, false)),
        Action::Preflight { .. }
    ));
    assert!(matches!(
        watch().dispatch(Method::of_upgrade(Get, false, true)),
        Action::MethodNotAllowed { .. }
    ));
}

#[test]
fn origins_and_host_paths_are_read_off_the_text_as_a_parser_gives_them() {
    for (href, origin) in [
        (
            "https://h.example/self/ab/head.json?wait=3",
            "https://h.example",
        ),
        (
            "http://127.0.0.1:8787/api/v1/self/bootstrap",
            "http://127.0.0.1:8787",
        ),
        ("https://h.example", "https://h.example"),
        ("https://h.example?x=1", "https://h.example"),
        ("https://user:pw@h.example:1/p/q", "https://h.example:1"),
        ("not a url", ""),
    ] {
        assert_eq!(origin_of(href), origin, "{href}");
    }
    for (url, host_path) in [
        (
            "https://api.cdp.coinbase.com/platform/v2/x402/verify",
            Some("api.cdp.coinbase.com/platform/v2/x402/verify"),
        ),
        (
            "http://127.0.0.1:4022/settle",
            Some("127.0.0.1:4022/settle"),
        ),
        ("https://API.Example:443/a?b=1", Some("api.example/a")),
        ("http://h.example:80", Some("h.example/")),
        ("https://h.example:8443/x", Some("h.example:8443/x")),
        ("h.example/x", None),
    ] {
        assert_eq!(host_and_path(url).as_deref(), host_path, "{url}");
    }
}
