use mailroom_tests::{expect_json, spawn_app};

#[tokio::test]
async fn health_readiness_and_metrics_need_no_token() {
    let app = spawn_app().await;
    let health = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(expect_json(health, 200).await["status"], "ok");
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("sent");
    assert!(
        ready.headers().contains_key("x-request-id"),
        "every response names its request"
    );
    assert_eq!(expect_json(ready, 200).await["status"], "ready");
    let token = app.user_token("ada@example.com").await;
    app.get("/v2/accounts", &token).await;
    let metrics = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.expect("text");
    assert!(
        text.contains(
            r#"mailroom_http_requests_total{method="GET",route="/v2/accounts",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(text.contains("mailroom_http_request_duration_seconds_bucket"));
    assert!(text.contains("mailroom_db_pool_connections"));
}

#[tokio::test]
async fn readiness_fails_with_503_when_the_database_is_gone() {
    let app = spawn_app().await;
    let name = app.database.name().to_owned();
    {
        use diesel::{connection::SimpleConnection, Connection};
        let mut admin =
            diesel::PgConnection::establish(&mailroom_test_support::admin_url()).expect("admin");
        admin
            .batch_execute(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
            .expect("drop");
    }
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("sent");
    let status = ready.status().as_u16();
    let body = ready.text().await.expect("body");
    assert_eq!(status, 503, "{body}");
    let health = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(
        health.status(),
        200,
        "liveness does not depend on the database"
    );
}
