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

#[tokio::test]
async fn every_account_route_answers_401_to_a_token_of_another_user() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let eve = app.user_token("eve@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let some_id = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    let mut checked = 0;
    for (method, path) in crate::openapi::ROUTES {
        if !path.contains("{accountId}") {
            continue;
        }
        let concrete = path.replace("{accountId}", &account);
        let concrete = concrete
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
        let mut request = app.request(method.clone(), &concrete, Some(&eve));
        if method != Method::GET && method != Method::DELETE {
            request = request.json(&json!({}));
        }
        let status = request.send().await.expect("sent").status().as_u16();
        if method == Method::GET || method == Method::DELETE {
            assert_eq!(status, 401, "{method} {concrete} must refuse a non-member");
        } else {
            // A body that fails validation is refused before the membership check (see
            // docs/api-decisions.md): 400 reveals nothing and writes nothing.
            assert!(
                status == 401 || status == 400,
                "{method} {concrete} answered {status} to a non-member"
            );
        }
        checked += 1;
    }
    assert!(checked >= 40, "checked {checked} account routes");
}
