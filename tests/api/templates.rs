use mailroom_tests::{expect_json, expect_problem, spawn_app};

#[tokio::test]
async fn list_count_and_get_templates() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let count = expect_json(
        app.get(&format!("/v2/accounts/{id}/templates/count"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(count, serde_json::json!({"count": 2}));
    let list = expect_json(
        app.get(&format!("/v2/accounts/{id}/templates"), &token)
            .await,
        200,
    )
    .await;
    let first = &list["items"][0];
    let template_id = first["_id"].as_str().expect("id");
    let one = expect_json(
        app.get(
            &format!("/v2/accounts/{id}/templates/{template_id}"),
            &token,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(&one, first);
    assert_eq!(one["contentType"], "html");
    assert!(one.get("fromEmail").is_none(), "unset fields are omitted");
    expect_problem(
        app.get(
            &format!("/v2/accounts/{id}/templates/01936c5e-7b2a-7cde-8f00-0123456789ab"),
            &token,
        )
        .await,
        404,
    )
    .await;
    expect_problem(
        app.get(&format!("/v2/accounts/{id}/templates/not-an-id"), &token)
            .await,
        404,
    )
    .await;
}
