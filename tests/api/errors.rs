use mailroom_tests::{expect_problem, spawn_app};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn problem_shape_is_pinned() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let response = app
        .send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &token,
            &json!({"name": "x", "expiresInDays": 7}),
        )
        .await;
    let problem = expect_problem(response, 400).await;
    assert_eq!(
        problem,
        json!({
            "status": 400,
            "title": "Bad Request",
            "detail": "expiresInDays: must be 30, 60, 90 or null",
            "errors": [{"field": "expiresInDays", "message": "must be 30, 60, 90 or null"}]
        })
    );
}

#[tokio::test]
async fn malformed_bodies_are_400_problems() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let send = |body: &'static str, content_type: Option<&'static str>| {
        let mut request = app
            .request(Method::POST, "/v2/accounts", Some(&token))
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request.send()
    };
    for (body, content_type) in [
        ("{", Some("application/json")),
        ("", Some("application/json")),
        ("[]", Some("application/json")),
        ("null", Some("application/json")),
        (r#"{"name": "A", "bogus": 1}"#, Some("application/json")),
        (r#"{"name": ["A"]}"#, Some("application/json")),
        (r#"{"name": "A"}"#, Some("text/plain")),
        (r#"{"name": "A"}"#, None),
        ("\u{feff}{}", Some("application/json")),
    ] {
        let problem = expect_problem(send(body, content_type).await.expect("sent"), 400).await;
        assert!(
            !problem["detail"].as_str().unwrap_or_default().is_empty(),
            "{body}"
        );
    }
    let problem = expect_problem(
        send(r#"{"name": "A", "bogus": 1}"#, Some("application/json"))
            .await
            .expect("sent"),
        400,
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("bogus"),
        "names the unknown field: {problem}"
    );
    let invalid_utf8 = app
        .request(Method::POST, "/v2/accounts", Some(&token))
        .header("content-type", "application/json")
        .body(vec![
            b'{', b'"', b'n', b'"', b':', b'"', 0xff, 0xfe, b'"', b'}',
        ])
        .send()
        .await
        .expect("sent");
    expect_problem(invalid_utf8, 400).await;
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let huge = format!(r#"{{"name": "{}"}}"#, "a".repeat(1024 * 1024 + 10));
    let response = app
        .request(Method::POST, "/v2/accounts", Some(&token))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("sent");
    expect_problem(response, 413).await;
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    expect_problem(app.get("/v2/nothing-here", &token).await, 404).await;
    expect_problem(app.get("/", &token).await, 404).await;
    let response = app
        .request(Method::DELETE, "/v2/accounts", Some(&token))
        .send()
        .await
        .expect("sent");
    assert_eq!(
        response
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok()),
        Some("GET, POST")
    );
    expect_problem(response, 405).await;
    let id = app.create_account(&token, "Acme").await;
    let response = app
        .request(Method::POST, &format!("/v2/accounts/{id}"), Some(&token))
        .send()
        .await
        .expect("sent");
    expect_problem(response, 405).await;
    let response = app
        .request(
            Method::GET,
            &format!("/v2/accounts/{id}/webhooks"),
            Some(&token),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(
        response
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok()),
        Some("PUT")
    );
    expect_problem(response, 405).await;
}

#[tokio::test]
async fn paging_parameters_are_checked_and_clamped() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let page = |query: &'static str| {
        let path = format!("/v2/accounts/{id}/templates?{query}");
        let app = &app;
        let token = token.clone();
        async move { app.get(&path, &token).await }
    };
    let clamped = mailroom_tests::expect_json(page("limit=1000").await, 200).await;
    assert_eq!(clamped["limit"], 100);
    assert_eq!(clamped["start"], 0);
    let second = mailroom_tests::expect_json(page("start=1&limit=1").await, 200).await;
    assert_eq!(
        (second["start"].clone(), second["limit"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(second["items"].as_array().expect("items").len(), 1);
    let defaults = mailroom_tests::expect_json(page("").await, 200).await;
    assert_eq!(defaults["limit"], 25);
    let past_end = mailroom_tests::expect_json(page("start=1000").await, 200).await;
    assert_eq!(past_end["items"], json!([]));
    for query in [
        "start=-1",
        "limit=-1",
        "limit=0",
        "start=abc",
        "limit=2.5",
        "limit=",
        "start=1e3",
    ] {
        expect_problem(page(query).await, 400).await;
    }
}

#[tokio::test]
async fn no_route_answers_5xx_to_junk() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let huge = format!(
        r#"{{"name": "{}", "email": "{}", "slug": "{}"}}"#,
        "x".repeat(100_000),
        "y".repeat(100_000),
        "z".repeat(100_000)
    );
    let bodies: Vec<(String, &str)> = vec![
        ("{".into(), "application/json"),
        ("null".into(), "application/json"),
        ("[]".into(), "application/json"),
        ("\"text\"".into(), "application/json"),
        (deep, "application/json"),
        (huge, "application/json"),
        (r#"{"name": null, "email": 5, "slug": [], "attributes": {"a": {"b": 1}}, "port": 1e400, "url": {}, "events": [null], "expiresInDays": 9223372036854775808}"#.into(), "application/json"),
        (r#"{"attributes": [{"slug": "email", "operator": "contains", "value": null}], "includeUnsubscribed": "yes"}"#.into(), "application/json"),
        ("email,name\n\"unterminated\n".into(), "text/csv"),
        ("\u{0}\u{1}\u{2}".into(), "text/plain"),
    ];
    let ids = [
        "not-an-id",
        "01936c5e-7b2a-7cde-8f00-0123456789ab",
        "%00",
        "..%2f..%2f",
    ];
    let queries = [
        "",
        "?start=-1&limit=abc",
        "?limit=99999999999999999999&start=99999999999999999999",
        "?sortBy=%00&order=2&status=x&email=%zz",
        "?search=%25%5F'%22;--",
    ];
    let mut requests = 0;
    for (method, path) in crate::openapi::ROUTES {
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        for id in ids {
            let concrete = path.replace("{accountId}", &account);
            let concrete: String = concrete
                .split('/')
                .map(|segment| {
                    if segment.starts_with('{') {
                        id
                    } else {
                        segment
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            for query in queries {
                let url = format!("{concrete}{query}");
                let bodies_here: Vec<Option<&(String, &str)>> =
                    if method == Method::GET || method == Method::DELETE {
                        vec![None]
                    } else {
                        bodies.iter().map(Some).collect()
                    };
                for body in bodies_here {
                    let mut request = app.request(method.clone(), &url, Some(&token));
                    if let Some((text, content_type)) = body {
                        request = request
                            .header("content-type", *content_type)
                            .body(text.clone());
                    }
                    let response = request.send().await.expect("sent");
                    let status = response.status().as_u16();
                    assert!(
                        status < 500,
                        "{method} {url} answered {status}: {}",
                        response.text().await.unwrap_or_default()
                    );
                    requests += 1;
                }
            }
        }
    }
    let health = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(
        health.status(),
        200,
        "healthy after {requests} hostile requests"
    );
    assert!(requests > 2000, "{requests}");
}

/// Found by schemathesis (`cargo xtask fuzz`): a `start` beyond what the database can
/// express was clamped to `i64::MAX`, so the page echoed another `start` than asked.
#[tokio::test]
async fn a_start_beyond_the_largest_offset_is_refused_not_clamped() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let largest = app
        .get(
            &format!("/v2/accounts/{id}/topics?start=9223372036854775807"),
            &token,
        )
        .await;
    let page = mailroom_tests::expect_json(largest, 200).await;
    assert_eq!(page["start"], json!(9_223_372_036_854_775_807_u64));
    assert_eq!(page["items"], json!([]));
    for path in [
        "topics",
        "templates",
        "contacts",
        "messages",
        "webhook-events",
    ] {
        let response = app
            .get(
                &format!("/v2/accounts/{id}/{path}?start=9223372036854775808"),
                &token,
            )
            .await;
        let problem = expect_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["field"], "start", "{path}: {problem}");
    }
}

/// Found by schemathesis (`cargo xtask fuzz`): every error is sent as
/// `application/problem+json`, and the document said `application/json`.
#[tokio::test]
async fn error_answers_are_documented_as_problem_json() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/v2/openapi.json", app.address))
        .send()
        .await
        .expect("GET openapi.json");
    let document: serde_json::Value = mailroom_tests::expect_json(response, 200).await;
    let mut problem_responses = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Some(responses) = operation["responses"].as_object() else {
                continue;
            };
            for (status, response) in responses {
                let Some(content) = response["content"].as_object() else {
                    continue;
                };
                for (media_type, body) in content {
                    let is_problem = body["schema"]["$ref"] == "#/components/schemas/Problem";
                    assert_eq!(
                        is_problem,
                        media_type == "application/problem+json",
                        "{method} {path} {status}: {media_type} {body}"
                    );
                    problem_responses += usize::from(is_problem);
                }
            }
        }
    }
    assert!(
        problem_responses > 100,
        "only {problem_responses} problem answers documented"
    );
    // And the answers really carry that media type.
    let unauthorized = app
        .client
        .get(format!("{}/v2/accounts", app.address))
        .send()
        .await;
    expect_problem(unauthorized.expect("GET /v2/accounts"), 401).await;
}

/// Found by schemathesis (`cargo xtask fuzz`): `limit` was documented as an int32 of at
/// least 0, but 0 is refused and any larger whole number is clamped to 100.
#[tokio::test]
async fn limit_is_documented_as_clamped_whole_number_of_at_least_one() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/v2/openapi.json", app.address))
        .send()
        .await
        .expect("GET openapi.json");
    let document: serde_json::Value = mailroom_tests::expect_json(response, 200).await;
    let mut limits = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for operation in item.as_object().expect("path item").values() {
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["name"] == "limit" {
                    assert_eq!(
                        parameter["schema"],
                        json!({"type": "integer", "minimum": 1}),
                        "{path}"
                    );
                    limits += 1;
                }
            }
        }
    }
    assert!(limits >= 10, "only {limits} lists document `limit`");
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let huge = app
        .get(
            &format!("/v2/accounts/{id}/topics?limit=2147483648"),
            &token,
        )
        .await;
    assert_eq!(mailroom_tests::expect_json(huge, 200).await["limit"], 100);
}
