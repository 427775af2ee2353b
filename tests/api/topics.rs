use mailroom_tests::{expect_json, expect_problem, spawn_app};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn topics_can_be_created_listed_patched_and_deleted() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{account}/topics");
    let starter = expect_json(app.get(&path, &token).await, 200).await;
    assert_eq!(starter["items"].as_array().expect("items").len(), 2);
    let created = expect_json(
        app.send_json(
            Method::POST,
            &path,
            &token,
            &json!({"name": "Billing", "description": "Invoices"}),
        )
        .await,
        200,
    )
    .await;
    let id = created["_id"].as_str().expect("id");
    assert_eq!(
        expect_json(app.get(&format!("{path}/count"), &token).await, 200).await["count"],
        3
    );
    let renamed = expect_json(
        app.send_json(
            Method::PATCH,
            &format!("{path}/{id}"),
            &token,
            &json!({"name": "Invoices"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(renamed["name"], "Invoices");
    assert_eq!(
        renamed["description"], "Invoices",
        "omitted description kept"
    );
    let cleared = expect_json(
        app.send_json(
            Method::PATCH,
            &format!("{path}/{id}"),
            &token,
            &json!({"description": null}),
        )
        .await,
        200,
    )
    .await;
    assert!(cleared.get("description").is_none());
    expect_problem(
        app.send_json(Method::PATCH, &format!("{path}/{id}"), &token, &json!({}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(
            Method::PATCH,
            &format!("{path}/{id}"),
            &token,
            &json!({"name": null}),
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::POST, &path, &token, &json!({"description": "x"}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::POST, &path, &token, &json!({"name": " "}))
            .await,
        400,
    )
    .await;
    let deleted = expect_json(
        app.request(Method::DELETE, &format!("{path}/{id}"), Some(&token))
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_eq!(deleted["name"], "Invoices");
    expect_problem(app.get(&format!("{path}/{id}"), &token).await, 404).await;
    let page = expect_json(
        app.get(&format!("{path}?limit=1&start=1"), &token).await,
        200,
    )
    .await;
    assert_eq!(page["items"][0]["name"], "Product updates");
}

#[tokio::test]
async fn another_accounts_topic_is_404_and_unchanged() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let first = app.create_account(&token, "First").await;
    let second = app.create_account(&token, "Second").await;
    let list = expect_json(
        app.get(&format!("/v2/accounts/{first}/topics"), &token)
            .await,
        200,
    )
    .await;
    let id = list["items"][0]["_id"].as_str().expect("id");
    let foreign = format!("/v2/accounts/{second}/topics/{id}");
    expect_problem(app.get(&foreign, &token).await, 404).await;
    expect_problem(
        app.send_json(Method::PATCH, &foreign, &token, &json!({"name": "x"}))
            .await,
        404,
    )
    .await;
    expect_problem(
        app.request(Method::DELETE, &foreign, Some(&token))
            .send()
            .await
            .expect("sent"),
        404,
    )
    .await;
    let eve = app.user_token("eve@example.com").await;
    expect_problem(
        app.get(&format!("/v2/accounts/{first}/topics"), &eve).await,
        401,
    )
    .await;
    let unchanged = expect_json(
        app.get(&format!("/v2/accounts/{first}/topics/{id}"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(unchanged["name"], "Newsletter");
}

#[tokio::test]
async fn a_topic_name_is_one_topics_in_any_letters_case() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{account}/topics");
    let billing = expect_json(
        app.send_json(Method::POST, &path, &token, &json!({"name": "Billing"}))
            .await,
        200,
    )
    .await;
    let other = expect_json(
        app.send_json(Method::POST, &path, &token, &json!({"name": "Receipts"}))
            .await,
        200,
    )
    .await;
    let taken = expect_problem(
        app.send_json(Method::POST, &path, &token, &json!({"name": "BILLING"}))
            .await,
        400,
    )
    .await;
    assert_eq!(taken["errors"][0]["field"], "name", "{taken}");
    let id = other["_id"].as_str().expect("id");
    let renamed = expect_problem(
        app.send_json(
            Method::PATCH,
            &format!("{path}/{id}"),
            &token,
            &json!({"name": "billing"}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(renamed["errors"][0]["field"], "name", "{renamed}");
    // A topic keeps its own name under another case, and another account may use it.
    let billing_id = billing["_id"].as_str().expect("id");
    let recased = expect_json(
        app.send_json(
            Method::PATCH,
            &format!("{path}/{billing_id}"),
            &token,
            &json!({"name": "billing"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(recased["name"], "billing");
    let elsewhere = app.create_account(&token, "Globex").await;
    expect_json(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{elsewhere}/topics"),
            &token,
            &json!({"name": "Billing"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        expect_json(app.get(&format!("{path}/count"), &token).await, 200).await["count"],
        4
    );
}
