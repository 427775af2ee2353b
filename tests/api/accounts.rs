use mailroom_app::ports::in_transaction;
use mailroom_domain::AccountId;
use mailroom_tests::{expect_json, expect_problem, spawn_app};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn create_get_and_list_accounts() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/accounts",
            &token,
            &json!({"name": "Acme", "openTracking": true}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(created["name"], "Acme");
    assert_eq!(created["openTracking"], true);
    assert_eq!(created["clickTracking"], false, "off unless set");
    assert!(created["webhooks"].is_null());
    let id = created["_id"].as_str().expect("id");
    let fetched = expect_json(app.get(&format!("/v2/accounts/{id}"), &token).await, 200).await;
    assert_eq!(fetched, created);
    app.create_account(&token, "Second").await;
    let listed = expect_json(app.get("/v2/accounts", &token).await, 200).await;
    let names: Vec<_> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert_eq!(names, [json!("Acme"), json!("Second")]);
}

#[tokio::test]
async fn account_creation_validates_the_body() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "   "}),
        json!({"name": 5}),
        json!({"name": "x".repeat(201)}),
        json!({"name": "A", "openTracking": "yes"}),
    ] {
        expect_problem(
            app.send_json(Method::POST, "/v2/accounts", &token, &body)
                .await,
            400,
        )
        .await;
    }
    let listed = expect_json(app.get("/v2/accounts", &token).await, 200).await;
    assert_eq!(
        listed["items"].as_array().expect("items").len(),
        0,
        "nothing created by bad requests"
    );
}

#[tokio::test]
async fn starter_data_is_loaded_with_the_account() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let templates = expect_json(
        app.get(&format!("/v2/accounts/{id}/templates"), &token)
            .await,
        200,
    )
    .await;
    let items = templates["items"].as_array().expect("items");
    let welcome = items
        .iter()
        .find(|t| t["slug"] == "welcome")
        .expect("welcome template");
    assert!(welcome["content"]
        .as_str()
        .expect("content")
        .contains("{{ first_name }}"));
    assert!(items.iter().any(|t| t["slug"] == "newsletter"));
    let account = AccountId::parse(&id).expect("id");
    let counts = in_transaction(app.services.db.as_ref(), |tx| {
        Ok(tx.count_starter_records(account)?)
    })
    .expect("counts");
    assert_eq!(counts, (2, 1, 2), "templates, automations, topics");
    let mut conn = app.database.connection();
    use diesel::{
        sql_types::{Bool, Text},
        QueryableByName, RunQueryDsl,
    };
    #[derive(QueryableByName, Debug, PartialEq)]
    struct Row {
        #[diesel(sql_type = Text)]
        trigger_event_slug: String,
        #[diesel(sql_type = Text)]
        trigger_condition: String,
        #[diesel(sql_type = Text)]
        timing_condition: String,
        #[diesel(sql_type = Bool)]
        is_enabled: bool,
    }
    let rows: Vec<Row> = diesel::sql_query("SELECT trigger_event_slug, trigger_condition, timing_condition, is_enabled FROM automations")
        .load(&mut conn)
        .expect("automations");
    assert_eq!(
        rows,
        [Row {
            trigger_event_slug: "signed_up".into(),
            trigger_condition: "once".into(),
            timing_condition: "immediately".into(),
            is_enabled: false
        }]
    );
    #[derive(QueryableByName)]
    struct Topic {
        #[diesel(sql_type = Text)]
        name: String,
    }
    let topics: Vec<Topic> = diesel::sql_query("SELECT name FROM topics ORDER BY id")
        .load(&mut conn)
        .expect("topics");
    assert_eq!(
        topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["Newsletter", "Product updates"]
    );
}

#[tokio::test]
async fn patch_is_partial_and_refuses_empty_or_null() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{id}");
    let patched = expect_json(
        app.send_json(
            Method::PATCH,
            &path,
            &token,
            &json!({"clickTracking": true}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["name"], "Acme", "untouched");
    assert_eq!(patched["clickTracking"], true);
    assert_eq!(patched["openTracking"], false);
    let renamed = expect_json(
        app.send_json(Method::PATCH, &path, &token, &json!({"name": "Acme Inc"}))
            .await,
        200,
    )
    .await;
    assert_eq!(renamed["name"], "Acme Inc");
    assert_eq!(renamed["clickTracking"], true, "earlier change kept");
    expect_problem(
        app.send_json(Method::PATCH, &path, &token, &json!({}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::PATCH, &path, &token, &json!({"name": null}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::PATCH, &path, &token, &json!({"openTracking": null}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::PATCH, &path, &token, &json!({"name": ""}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(Method::PATCH, &path, &token, &json!({"webhooks": {}}))
            .await,
        400,
    )
    .await;
    let fetched = expect_json(app.get(&path, &token).await, 200).await;
    assert_eq!(fetched["name"], "Acme Inc");
}

#[tokio::test]
async fn members_lists_the_owner() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let members = expect_json(
        app.get(&format!("/v2/accounts/{id}/members"), &token).await,
        200,
    )
    .await;
    let items = members["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["email"], "ada@example.com");
    assert_eq!(items[0]["role"], "owner");
    assert!(items[0]["_id"].is_string() && items[0]["createDate"].is_string());
}

#[tokio::test]
async fn timestamps_are_utc_with_milliseconds() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/accounts",
            &token,
            &json!({"name": "Acme"}),
        )
        .await,
        200,
    )
    .await;
    let date = created["createDate"].as_str().expect("date");
    assert_eq!(date.len(), 24, "{date}");
    assert!(date.ends_with('Z') && date.as_bytes()[19] == b'.', "{date}");
    let id = created["_id"].as_str().expect("id");
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "7", "UUIDv7: {id}");
}

/// `MAILROOM_MAX_ACCOUNTS_PER_USER` (10 by default): a user's 11th account is a 403 whose
/// detail names the bound, and another user still creates accounts.
#[tokio::test]
async fn a_user_owns_at_most_10_accounts_by_default_and_the_11th_is_a_403() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    for n in 0..10 {
        app.create_account(&token, &format!("Brand {n}")).await;
    }
    let refused = expect_problem(
        app.send_json(
            Method::POST,
            "/v2/accounts",
            &token,
            &json!({"name": "Brand 10"}),
        )
        .await,
        403,
    )
    .await;
    assert_eq!(
        refused["detail"], "the user owns 10 accounts; this server lets a user own at most 10",
        "{refused}"
    );
    let listed = expect_json(app.get("/v2/accounts", &token).await, 200).await;
    assert_eq!(listed["items"].as_array().expect("items").len(), 10);
    let other = app.user_token("grace@example.com").await;
    app.create_account(&other, "Grace's").await;
}

/// The bound holds against concurrent creations: with a bound of 3, eight creations sent
/// at once make exactly three accounts (the owner's creations take turns).
#[tokio::test]
async fn eight_concurrent_creations_under_a_bound_of_3_make_exactly_3_accounts() {
    let app = mailroom_tests::spawn_app_with(|config| config.max_accounts_per_user = Some(3)).await;
    let token = app.user_token("ada@example.com").await;
    let creations = (0..8).map(|n| {
        let (app, token) = (&app, &token);
        async move {
            app.send_json(
                Method::POST,
                "/v2/accounts",
                token,
                &json!({"name": format!("Race {n}")}),
            )
            .await
            .status()
            .as_u16()
        }
    });
    let mut statuses = futures_util::future::join_all(creations).await;
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 403, 403, 403, 403, 403]);
    let listed = expect_json(app.get("/v2/accounts", &token).await, 200).await;
    assert_eq!(listed["items"].as_array().expect("items").len(), 3);
}

/// `unlimited` lifts the bound.
#[tokio::test]
async fn without_a_bound_a_user_creates_an_11th_account() {
    let app = mailroom_tests::spawn_app_with(|config| config.max_accounts_per_user = None).await;
    let token = app.user_token("ada@example.com").await;
    for n in 0..11 {
        app.create_account(&token, &format!("Brand {n}")).await;
    }
}
