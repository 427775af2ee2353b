use mailroom_tests::{expect_json, expect_problem, spawn_app};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn another_users_account_is_401_on_every_account_path_and_unchanged() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let eve = app.user_token("eve@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let list = expect_json(
        app.get(&format!("/v2/accounts/{account}/templates"), &ada)
            .await,
        200,
    )
    .await;
    let template = list["items"][0]["_id"].as_str().expect("id").to_owned();
    let webhook = json!({"url": "https://evil.example.com/", "authType": "none", "events": ["contact.deleted"]});
    let calls = [
        (Method::GET, format!("/v2/accounts/{account}"), None),
        (
            Method::PATCH,
            format!("/v2/accounts/{account}"),
            Some(json!({"name": "Pwned"})),
        ),
        (Method::GET, format!("/v2/accounts/{account}/members"), None),
        (
            Method::PUT,
            format!("/v2/accounts/{account}/webhooks"),
            Some(webhook),
        ),
        (
            Method::GET,
            format!("/v2/accounts/{account}/templates"),
            None,
        ),
        (
            Method::GET,
            format!("/v2/accounts/{account}/templates/count"),
            None,
        ),
        (
            Method::GET,
            format!("/v2/accounts/{account}/templates/{template}"),
            None,
        ),
    ];
    for (method, path, body) in &calls {
        let mut request = app.request(method.clone(), path, Some(&eve));
        if let Some(body) = body {
            request = request.json(body);
        }
        expect_problem(request.send().await.expect("sent"), 401).await;
    }
    // Unknown and malformed account ids look the same: 401.
    for path in [
        "/v2/accounts/01936c5e-7b2a-7cde-8f00-0123456789ab",
        "/v2/accounts/not-an-id",
        "/v2/accounts/not-an-id/templates",
    ] {
        expect_problem(app.get(path, &ada).await, 401).await;
    }
    let unchanged = expect_json(app.get(&format!("/v2/accounts/{account}"), &ada).await, 200).await;
    assert_eq!(unchanged["name"], "Acme");
    assert!(unchanged["webhooks"].is_null());
    let eves = expect_json(app.get("/v2/accounts", &eve).await, 200).await;
    assert_eq!(eves["items"], json!([]));
}

#[tokio::test]
async fn a_template_of_another_account_is_404() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let first = app.create_account(&ada, "First").await;
    let second = app.create_account(&ada, "Second").await;
    let list = expect_json(
        app.get(&format!("/v2/accounts/{first}/templates"), &ada)
            .await,
        200,
    )
    .await;
    let template = list["items"][0]["_id"].as_str().expect("id");
    expect_problem(
        app.get(&format!("/v2/accounts/{second}/templates/{template}"), &ada)
            .await,
        404,
    )
    .await;
}

/// A body that a member's request would pass validation with, for each route that takes
/// one: (content type, body). Ids are real ids of the member's account.
fn valid_body(method: &Method, path: &str, template: &str) -> Option<(&'static str, Vec<u8>)> {
    let json =
        |value: serde_json::Value| Some(("application/json", value.to_string().into_bytes()));
    let conditions = json!({"includeUnsubscribed": true, "attributes": [{"slug": "email", "operator": "contains", "value": "@"}]});
    let route = path
        .split_once("/v2/accounts/{accountId}")
        .map_or(path, |(_, rest)| rest);
    match (method.as_str(), route) {
        ("PATCH", "") => json(json!({"name": "Renamed"})),
        ("PUT", "/webhooks") => json(
            json!({"url": "https://hooks.example.com/", "authType": "none", "events": ["contact.deleted"]}),
        ),
        ("POST" | "PATCH", r) if r.starts_with("/templates") => {
            json(json!({"name": "T", "slug": "tenancy-t", "subject": "S", "content": "C"}))
        }
        ("POST" | "PATCH", r) if r.starts_with("/mail-servers") => json(json!({
            "serviceType": "smtp", "host": "smtp.example.com", "port": 587,
            "secure": false, "requireTLS": true, "user": "mailer", "password": "secret",
            "defaultFromEmail": "hello@example.com", "defaultFromName": "Acme"
        })),
        ("POST", "/domains") => json(json!({"name": "acme.example"})),
        ("POST" | "PATCH", r) if r.starts_with("/automations") => json(json!({
            "name": "Welcome", "templateId": template, "triggerEventSlug": "signed_up",
            "triggerEventCondition": "once", "timingCondition": "immediately", "isEnabled": true
        })),
        ("POST", "/announcements") => {
            json(json!({"name": "Launch", "templateId": template, "includeUnsubscribed": false}))
        }
        ("POST" | "PATCH", r) if r.starts_with("/topics") => json(json!({"name": "News"})),
        ("POST" | "PATCH", r) if r.starts_with("/forms") => json(json!({"name": "Sign-up"})),
        ("POST", "/segments") => json(json!({"name": "Everyone", "includeUnsubscribed": false})),
        ("PATCH", "/segments/{segmentId}") => json(json!({"name": "Renamed"})),
        ("POST", "/contacts") => json(json!({"email": "new@example.org"})),
        ("PATCH", "/contacts/{contactId}") => json(json!({"attributes": {"plan": "pro"}})),
        ("POST", "/contacts/search" | "/contacts/search/count") => json(conditions),
        ("POST", "/contacts/import") => Some(("text/csv", b"email\nnew@example.org\n".to_vec())),
        ("POST", "/members") => json(json!({"email": "new@example.org", "role": "member"})),
        ("PATCH", "/members/{userId}") => json(json!({"role": "admin"})),
        ("POST", "/events") => json(json!({"email": "new@example.org", "slug": "signed_up"})),
        ("POST", "/messages") => {
            json(json!({"slug": "order-receipt", "email": "new@example.org", "data": {}}))
        }
        ("POST", "/feedback") => Some((
            "message/rfc822",
            b"From: fbl@example.net\r\nSubject: FW\r\n\r\nreport\r\n".to_vec(),
        )),
        _ => None,
    }
}

/// One way of sending a request: what it is, its (content type, body), its query string.
type Variant = (&'static str, Option<(&'static str, Vec<u8>)>, &'static str);

/// Spec, Authentication rule 4: membership is checked before anything else, so every
/// method of every account route answers a non-member 401 whatever the request carries:
/// a valid body, an invalid one, a wrong content type, a bad query string.
#[tokio::test]
async fn every_account_route_answers_401_to_a_non_member_whatever_the_body() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let eve = app.user_token("eve@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let list = expect_json(
        app.get(&format!("/v2/accounts/{account}/templates"), &ada)
            .await,
        200,
    )
    .await;
    let template = list["items"][0]["_id"].as_str().expect("id").to_owned();
    let some_id = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    let mut checked = 0;
    let mut failures = Vec::new();
    for (method, path) in crate::openapi::ROUTES {
        if !path.contains("{accountId}") {
            continue;
        }
        let concrete = path
            .replace("{accountId}", &account)
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    some_id
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        let mut variants: Vec<Variant> = vec![
            ("no body", None, ""),
            ("a bad query", None, "?limit=-1&start=x"),
        ];
        if method != Method::GET && method != Method::DELETE {
            if let Some(valid) = valid_body(&method, path, &template) {
                variants.push(("a valid body", Some(valid), ""));
            }
            variants.extend([
                (
                    "an invalid body",
                    Some(("application/json", br#"{"name": 5, "x": [}"#.to_vec())),
                    "",
                ),
                (
                    "an empty object",
                    Some(("application/json", b"{}".to_vec())),
                    "",
                ),
                (
                    "a wrong content type",
                    Some(("text/plain", b"hello".to_vec())),
                    "",
                ),
            ]);
        }
        for (what, body, query) in variants {
            let mut request =
                app.request(method.clone(), &format!("{concrete}{query}"), Some(&eve));
            if let Some((content_type, bytes)) = body {
                request = request.header("content-type", content_type).body(bytes);
            }
            let response = request.send().await.expect("sent");
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if status != 401 || content_type != "application/problem+json" {
                failures.push(format!(
                    "{method} {concrete}{query} with {what}: {status} {content_type}"
                ));
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "a non-member got past membership:\n{}",
        failures.join("\n")
    );
    assert!(checked >= 150, "checked {checked} requests");
    // Nothing was written on the way.
    let unchanged = expect_json(app.get(&format!("/v2/accounts/{account}"), &ada).await, 200).await;
    assert_eq!(unchanged["name"], "Acme");
    assert!(unchanged["webhooks"].is_null());
}

/// Unknown and malformed account ids are 401 too, even with a body that fails validation.
#[tokio::test]
async fn unknown_or_malformed_accounts_are_401_before_the_body_is_read() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    for account in ["01936c5e-7b2a-7cde-8f00-0123456789ab", "not-an-id", "%20"] {
        for (method, path) in [
            (Method::POST, "templates"),
            (Method::PATCH, "automations/x"),
            (Method::POST, "contacts/import"),
        ] {
            let response = app
                .request(
                    method,
                    &format!("/v2/accounts/{account}/{path}"),
                    Some(&ada),
                )
                .header("content-type", "application/json")
                .body("{not json")
                .send()
                .await
                .expect("sent");
            expect_problem(response, 401).await;
        }
    }
}

/// Authentication comes before the body on the routes outside an account too: a
/// well-formed token nobody holds gets 401, not a 400 about the body.
#[tokio::test]
async fn a_bad_token_is_401_before_the_body_on_the_tokens_and_accounts_routes() {
    let app = spawn_app().await;
    let unknown = mailroom_domain::token::RawToken::from_random([7; 28]);
    for (method, path) in [
        (Method::POST, "/v2/accounts"),
        (Method::GET, "/v2/accounts"),
        (Method::POST, "/v2/users/me/tokens"),
        (Method::GET, "/v2/users/me/tokens"),
        (Method::DELETE, "/v2/users/me/tokens/x"),
    ] {
        for (content_type, body) in [
            ("application/json", "{not json"),
            ("application/json", r#"{"name": 5}"#),
            ("text/plain", "hello"),
        ] {
            let response = app
                .request(method.clone(), path, Some(unknown.expose()))
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .expect("sent");
            expect_problem(response, 401).await;
        }
    }
}

/// The routes a `sending` token may call: the four of the scope, and minting or revoking
/// tokens within its own scope (docs/api-decisions.md, "Scoped tokens").
fn sending_may_call(method: &str, path: &str) -> bool {
    matches!(
        (method, path),
        ("post", "/v2/accounts/{accountId}/events")
            | ("post", "/v2/accounts/{accountId}/messages")
            | ("get", "/v2/accounts/{accountId}/messages/{messageId}")
            | (
                "post",
                "/v2/accounts/{accountId}/messages/{messageId}/cancel"
            )
            | ("post", "/v2/accounts/{accountId}/messages/cancel")
            | ("post", "/v2/users/me/tokens")
            | ("delete", "/v2/users/me/tokens/{tokenId}")
    )
}

/// Every route × {full, sending, pinned elsewhere}: a full token is never refused by
/// authentication or scope; a sending token gets 403 problem+json naming its scope except
/// on its routes; a token pinned to another account gets 401 on every account route.
#[tokio::test]
async fn every_route_answers_each_token_scope_as_the_table_says() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let elsewhere = app.create_account(&ada, "Elsewhere").await;
    let full = crate::scopes::raw(&crate::scopes::mint(&app, &ada, json!({"name": "full"})).await);
    let sending = crate::scopes::raw(
        &crate::scopes::mint(&app, &ada, json!({"name": "backend", "scope": "sending"})).await,
    );
    let pinned = crate::scopes::raw(
        &crate::scopes::mint(
            &app,
            &ada,
            json!({"name": "pinned", "accountIds": [elsewhere]}),
        )
        .await,
    );
    let some_id = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    let mut failures = Vec::new();
    let mut checked = 0;
    for (method, path) in crate::openapi::ROUTES {
        // Public routes (links, health, the API document) take no token at all.
        if !path.starts_with("/v2/accounts") && !path.starts_with("/v2/users/") {
            continue;
        }
        let concrete = path
            .replace("{accountId}", &account)
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    some_id
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let http_method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        let mut calls = vec![(concrete.clone(), sending_may_call(method, path))];
        if (method, path) == ("get", "/v2/accounts/{accountId}/contacts") {
            calls = vec![
                (concrete.clone(), false),
                (format!("{concrete}?email=someone%40example.org"), true),
            ];
        }
        for (url, allowed) in calls {
            let mut outcomes = vec![("full", full.as_str(), None)];
            outcomes.push(("sending", sending.as_str(), (!allowed).then_some(403)));
            if path.contains("{accountId}") {
                outcomes.push(("pinned elsewhere", pinned.as_str(), Some(401)));
            }
            for (who, token, expected) in outcomes {
                let mut request = app.request(http_method.clone(), &url, Some(token));
                // A body that fails to parse: scope and pins are judged before any body.
                if http_method != Method::GET && http_method != Method::DELETE {
                    request = request
                        .header("content-type", "application/json")
                        .body("{not json");
                }
                let response = request.send().await.expect("sent");
                let status = response.status().as_u16();
                let content_type = response
                    .headers()
                    .get("content-type")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let body = response.text().await.unwrap_or_default();
                let ok = match expected {
                    None => status != 401 && status != 403,
                    Some(403) => {
                        status == 403
                            && content_type == "application/problem+json"
                            && body.contains("scope sending")
                    }
                    Some(want) => status == want && content_type == "application/problem+json",
                };
                if !ok {
                    let body: String = body.chars().take(200).collect();
                    failures.push(format!("{who}: {method} {url}: {status} {body}"));
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 175, "checked {checked} requests");
}
