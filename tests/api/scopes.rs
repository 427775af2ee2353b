//! Scoped tokens: the `sending` scope, pins to accounts, and minting within both.

use mailroom_tests::{expect_json, expect_problem, spawn_app, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// Mints a token with `token` and returns the creation answer.
pub(crate) async fn mint(app: &TestApp, token: &str, body: Value) -> Value {
    expect_json(
        app.send_json(Method::POST, "/v2/users/me/tokens", token, &body)
            .await,
        200,
    )
    .await
}

async fn mint_refused(app: &TestApp, token: &str, body: Value, field: &str) {
    let problem = expect_problem(
        app.send_json(Method::POST, "/v2/users/me/tokens", token, &body)
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], field, "{problem}");
}

pub(crate) fn raw(answer: &Value) -> String {
    answer["token"].as_str().expect("raw token").to_owned()
}

#[tokio::test]
async fn a_sending_token_records_sends_and_looks_a_contact_up() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let sending = raw(&mint(
        &app,
        &ada,
        json!({"name": "backend", "scope": "sending", "accountIds": [account]}),
    )
    .await);
    expect_json(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/events"),
            &sending,
            &json!({"email": "new@example.org", "slug": "signed_up"}),
        )
        .await,
        200,
    )
    .await;
    let found = expect_json(
        app.get(
            &format!("/v2/accounts/{account}/contacts?email=new%40example.org"),
            &sending,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(found["items"][0]["email"], "new@example.org", "{found}");
    // The same list without the look-up is every contact: outside the scope.
    let refused = expect_problem(
        app.get(&format!("/v2/accounts/{account}/contacts"), &sending)
            .await,
        403,
    )
    .await;
    assert!(
        refused["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("sending"),
        "{refused}"
    );
}

#[tokio::test]
async fn tokens_mint_only_within_their_scope_and_pins() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let eve = app.user_token("eve@example.com").await;
    let first = app.create_account(&ada, "First").await;
    let second = app.create_account(&ada, "Second").await;
    let foreign = app.create_account(&eve, "Eve's").await;

    // The answer and the list show scope and pins; a full unpinned token shows the defaults.
    let created = mint(
        &app,
        &ada,
        json!({"name": "backend", "scope": "sending", "accountIds": [first, first]}),
    )
    .await;
    assert_eq!(created["scope"], "sending");
    assert_eq!(created["accountIds"], json!([first]));
    let listed = expect_json(app.get("/v2/users/me/tokens", &ada).await, 200).await;
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items[0]["scope"], "full");
    assert!(items[0]["accountIds"].is_null());
    assert_eq!(items[1]["scope"], "sending");
    assert_eq!(items[1]["accountIds"], json!([first]));

    // Bad input names its field.
    mint_refused(&app, &ada, json!({"name": "x", "scope": "admin"}), "scope").await;
    mint_refused(
        &app,
        &ada,
        json!({"name": "x", "accountIds": []}),
        "accountIds",
    )
    .await;
    mint_refused(
        &app,
        &ada,
        json!({"name": "x", "accountIds": ["nope"]}),
        "accountIds",
    )
    .await;
    mint_refused(
        &app,
        &ada,
        json!({"name": "x", "accountIds": [foreign]}),
        "accountIds",
    )
    .await;

    // A sending token mints sending tokens only, within its pins.
    let sending = raw(&created);
    mint_refused(
        &app,
        &sending,
        json!({"name": "x", "accountIds": [first]}),
        "scope",
    )
    .await;
    mint_refused(
        &app,
        &sending,
        json!({"name": "x", "scope": "full", "accountIds": [first]}),
        "scope",
    )
    .await;
    mint_refused(
        &app,
        &sending,
        json!({"name": "x", "scope": "sending"}),
        "accountIds",
    )
    .await;
    mint_refused(
        &app,
        &sending,
        json!({"name": "x", "scope": "sending", "accountIds": [second]}),
        "accountIds",
    )
    .await;
    let successor = mint(
        &app,
        &sending,
        json!({"name": "successor", "scope": "sending", "accountIds": [first]}),
    )
    .await;
    assert_eq!(successor["scope"], "sending");

    // A pinned full token mints within its pins, any scope.
    let pinned = raw(&mint(
        &app,
        &ada,
        json!({"name": "pinned", "accountIds": [first, second]}),
    )
    .await);
    mint_refused(&app, &pinned, json!({"name": "x"}), "accountIds").await;
    mint(
        &app,
        &pinned,
        json!({"name": "narrower", "accountIds": [second]}),
    )
    .await;
    mint(
        &app,
        &pinned,
        json!({"name": "narrower sending", "scope": "sending", "accountIds": [first]}),
    )
    .await;
}

#[tokio::test]
async fn pinned_and_sending_tokens_reach_only_their_own_part() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let first = app.create_account(&ada, "First").await;
    let second = app.create_account(&ada, "Second").await;
    let pinned = raw(&mint(
        &app,
        &ada,
        json!({"name": "pinned", "accountIds": [second]}),
    )
    .await);

    // A pinned token lists only its accounts, reaches only them, and creates none.
    let listed = expect_json(app.get("/v2/accounts", &pinned).await, 200).await;
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["_id"].as_str())
        .collect();
    assert_eq!(ids, vec![second.as_str()]);
    expect_json(
        app.get(&format!("/v2/accounts/{second}"), &pinned).await,
        200,
    )
    .await;
    expect_problem(
        app.get(&format!("/v2/accounts/{first}"), &pinned).await,
        401,
    )
    .await;
    expect_problem(
        app.send_json(
            Method::POST,
            "/v2/accounts",
            &pinned,
            &json!({"name": "New"}),
        )
        .await,
        403,
    )
    .await;

    // A sending token may revoke itself but not its user's full token.
    let sending_answer = mint(&app, &ada, json!({"name": "backend", "scope": "sending"})).await;
    let sending = raw(&sending_answer);
    let full_id = expect_json(app.get("/v2/users/me/tokens", &ada).await, 200).await["items"][0]
        ["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    expect_problem(
        app.request(
            Method::DELETE,
            &format!("/v2/users/me/tokens/{full_id}"),
            Some(&sending),
        )
        .send()
        .await
        .expect("sent"),
        403,
    )
    .await;
    let own = sending_answer["_id"].as_str().expect("id");
    expect_json(
        app.request(
            Method::DELETE,
            &format!("/v2/users/me/tokens/{own}"),
            Some(&sending),
        )
        .send()
        .await
        .expect("sent"),
        200,
    )
    .await;
    expect_problem(
        app.get(&format!("/v2/accounts/{first}/messages/x"), &sending)
            .await,
        401,
    )
    .await;
    expect_json(app.get("/v2/accounts", &ada).await, 200).await;
}

/// The router decodes `%61` to `a`: the scope and membership checks must see the path the
/// router matches, or an encoded path reaches a route unchecked.
#[tokio::test]
async fn percent_encoded_paths_get_the_same_checks_as_plain_ones() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let sending = raw(&mint(
        &app,
        &ada,
        json!({"name": "backend", "scope": "sending", "accountIds": [account]}),
    )
    .await);
    for path in ["/v2/accounts", "/v2/%61ccounts", "/v2/%75sers/me/tokens"] {
        expect_problem(app.get(path, &sending).await, 403).await;
    }
    expect_problem(
        app.send_json(
            Method::POST,
            "/v2/%61ccounts",
            &sending,
            &json!({"name": "made by a sending token"}),
        )
        .await,
        403,
    )
    .await;
    // A full token reaches the same routes through either spelling.
    let listed = expect_json(app.get("/v2/%61ccounts", &ada).await, 200).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    // Account routes: a stranger's or no token is 401 (not a 500), a member's works.
    let templates = format!("/v2/%61ccounts/{account}/templates");
    let response = app
        .request(Method::GET, &templates, None)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 401);
    let bob = app.user_token("bob@example.com").await;
    expect_problem(app.get(&templates, &bob).await, 401).await;
    expect_json(app.get(&templates, &ada).await, 200).await;
    expect_problem(
        app.get(&format!("/v2/%61ccounts/{account}/contacts"), &sending)
            .await,
        403,
    )
    .await;
}
