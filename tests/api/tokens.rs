use mailroom_tests::{expect_json, expect_problem, spawn_app};
use reqwest::Method;
use serde_json::{json, Value};
use time::Duration;

fn assert_token_format(token: &str) {
    let rest = token.strip_prefix("mailroom_pat_").expect("prefix");
    assert_eq!(rest.len(), 64, "64 hex digits");
    assert!(
        rest.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "lowercase hex"
    );
    let (body, check) = token.split_at(token.len() - 8);
    // CRC32 (IEEE) computed here independently of the service's implementation.
    let mut crc = 0xFFFF_FFFFu32;
    for byte in body.bytes() {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    assert_eq!(
        check,
        format!("{:08x}", !crc),
        "check digits are CRC32 of the rest"
    );
}

#[tokio::test]
async fn issued_token_has_the_format_and_is_shown_only_once() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &admin,
            &json!({"name": "ci", "expiresInDays": 30}),
        )
        .await,
        200,
    )
    .await;
    let raw = created["token"]
        .as_str()
        .expect("raw token in the create response");
    assert_token_format(raw);
    assert_eq!(created["name"], "ci");
    assert!(created["_id"].is_string() && created["createDate"].is_string());
    assert!(created["expiresAt"].is_string());

    let listed = expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await;
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "bootstrap token and the new one");
    assert!(
        items.iter().all(|t| t.get("token").is_none()),
        "raw values never on reads: {listed}"
    );
    assert_eq!(listed["start"], 0);

    // The new token works on its own.
    expect_json(app.get("/v2/users/me/tokens", raw).await, 200).await;
}

#[tokio::test]
async fn expires_in_days_accepts_30_60_90_and_null_only() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    for days in [json!(30), json!(60), json!(90), Value::Null] {
        let body = expect_json(
            app.send_json(
                Method::POST,
                "/v2/users/me/tokens",
                &admin,
                &json!({"name": "t", "expiresInDays": days}),
            )
            .await,
            200,
        )
        .await;
        assert_eq!(body["expiresAt"].is_null(), days.is_null(), "{days}");
    }
    let never = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &admin,
            &json!({"name": "t"}),
        )
        .await,
        200,
    )
    .await;
    assert!(never["expiresAt"].is_null());
    for days in [
        json!(0),
        json!(1),
        json!(45),
        json!(-30),
        json!(365),
        json!("30"),
        json!(30.5),
    ] {
        let problem = expect_problem(
            app.send_json(
                Method::POST,
                "/v2/users/me/tokens",
                &admin,
                &json!({"name": "t", "expiresInDays": days}),
            )
            .await,
            400,
        )
        .await;
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("expiresInDays"),
            "{days}: {problem}"
        );
    }
    expect_problem(
        app.send_json(Method::POST, "/v2/users/me/tokens", &admin, &json!({}))
            .await,
        400,
    )
    .await;
    expect_problem(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &admin,
            &json!({"name": "  "}),
        )
        .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn expired_tokens_are_refused() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &admin,
            &json!({"name": "short", "expiresInDays": 30}),
        )
        .await,
        200,
    )
    .await;
    let short = created["token"].as_str().expect("token").to_owned();
    expect_json(app.get("/v2/users/me/tokens", &short).await, 200).await;
    app.clock.advance(Duration::days(30) + Duration::seconds(1));
    expect_problem(app.get("/v2/users/me/tokens", &short).await, 401).await;
    // A token without expiry still works.
    expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await;
}

#[tokio::test]
async fn revoked_tokens_are_refused_and_leave_the_list() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &admin,
            &json!({"name": "old"}),
        )
        .await,
        200,
    )
    .await;
    let (id, raw) = (
        created["_id"].as_str().expect("id"),
        created["token"].as_str().expect("token"),
    );
    let revoked = expect_json(
        app.request(
            Method::DELETE,
            &format!("/v2/users/me/tokens/{id}"),
            Some(&admin),
        )
        .send()
        .await
        .expect("sent"),
        200,
    )
    .await;
    assert_eq!(revoked["_id"], id);
    assert!(revoked.get("token").is_none());
    expect_problem(app.get("/v2/users/me/tokens", raw).await, 401).await;
    let listed = expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await;
    assert!(listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .all(|t| t["_id"] != id));
    // Revoking again, an unknown id, or a malformed id: 404.
    for path in [
        format!("/v2/users/me/tokens/{id}"),
        "/v2/users/me/tokens/01936c5e-7b2a-7cde-8f00-0123456789ab".into(),
        "/v2/users/me/tokens/nope".into(),
    ] {
        expect_problem(
            app.request(Method::DELETE, &path, Some(&admin))
                .send()
                .await
                .expect("sent"),
            404,
        )
        .await;
    }
}

#[tokio::test]
async fn another_users_token_cannot_be_revoked() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let bob = app.user_token("bob@example.com").await;
    let listed = expect_json(app.get("/v2/users/me/tokens", &ada).await, 200).await;
    let ada_token_id = listed["items"][0]["_id"].as_str().expect("id").to_owned();
    expect_problem(
        app.request(
            Method::DELETE,
            &format!("/v2/users/me/tokens/{ada_token_id}"),
            Some(&bob),
        )
        .send()
        .await
        .expect("sent"),
        404,
    )
    .await;
    expect_json(app.get("/v2/users/me/tokens", &ada).await, 200).await;
}

#[tokio::test]
async fn missing_garbage_and_foreign_schemes_are_401() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let forged = {
        // Right shape and check digits, but never issued.
        let mut other = admin.clone();
        other.replace_range(
            13..14,
            if admin.as_bytes()[13] == b'0' {
                "1"
            } else {
                "0"
            },
        );
        other
    };
    let headers = [
        None,
        Some("Bearer".to_owned()),
        Some("Bearer garbage".to_owned()),
        Some(format!("Basic {admin}")),
        Some(format!("Token {admin}")),
        Some(format!("Bearer {forged}")),
        Some(format!("Bearer {}", admin.to_uppercase())),
    ];
    for header in headers {
        let mut request = app.request(Method::GET, "/v2/users/me/tokens", None);
        if let Some(value) = &header {
            request = request.header("Authorization", value);
        }
        let response = request.send().await.expect("sent");
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer realm=\"mailroom\""),
            "{header:?}"
        );
        expect_problem(response, 401).await;
    }
}

#[tokio::test]
async fn last_used_at_is_written_at_most_once_a_minute() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let last_used = |list: &Value| list["items"][0]["lastUsedAt"].as_str().map(str::to_owned);
    let first = last_used(&expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await);
    assert!(first.is_some(), "the request itself counts as a use");
    app.clock.advance(Duration::seconds(30));
    let second = last_used(&expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await);
    assert_eq!(first, second, "not rewritten within a minute");
    app.clock.advance(Duration::seconds(31));
    let third = last_used(&expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await);
    assert_ne!(second, third, "rewritten after a minute");
}

/// Creates a token with `days` (null: never expires) using `minter`, returning the response.
async fn mint(app: &mailroom_tests::TestApp, minter: &str, days: Value) -> reqwest::Response {
    app.send_json(
        Method::POST,
        "/v2/users/me/tokens",
        minter,
        &json!({"name": "child", "expiresInDays": days}),
    )
    .await
}

#[tokio::test]
async fn a_token_cannot_mint_a_token_that_outlives_it() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let sixty = expect_json(mint(&app, &admin, json!(60)).await, 200).await;
    let sixty = sixty["token"].as_str().expect("raw token").to_owned();
    let thirty = expect_json(mint(&app, &admin, json!(30)).await, 200).await;
    let thirty = thirty["token"].as_str().expect("raw token").to_owned();

    // A 30-day token creates neither a never-expiring nor a 90-day one, nor (a moment
    // later) another 30-day one, which would expire after it.
    app.clock.advance(Duration::seconds(1));
    for days in [Value::Null, json!(90), json!(60), json!(30)] {
        let problem = expect_problem(mint(&app, &thirty, days.clone()).await, 400).await;
        assert_eq!(
            problem["errors"][0]["field"], "expiresInDays",
            "{days}: {problem}"
        );
        let message = problem["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("may not outlive the token that creates it"),
            "{days}: {problem}"
        );
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("expiresInDays"),
            "{days}: {problem}"
        );
    }
    // A 60-day token 29 days on may still create a 30-day token (expiring a day before it),
    // but not 31 days on.
    app.clock.advance(Duration::days(29));
    let child = expect_json(mint(&app, &sixty, json!(30)).await, 200).await;
    assert!(child["expiresAt"].is_string());
    app.clock.advance(Duration::days(2));
    expect_problem(mint(&app, &sixty, json!(30)).await, 400).await;
    // A never-expiring token creates any lifetime, never-expiring included.
    for days in [Value::Null, json!(90)] {
        expect_json(mint(&app, &admin, days).await, 200).await;
    }
    let listed = expect_json(app.get("/v2/users/me/tokens", &admin).await, 200).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(6),
        "bootstrap, 60-day, 30-day, the 60-day's child and two from the bootstrap token: {listed}"
    );
}

/// Mints a token named `name` with `minter` and returns its id and raw value.
async fn minted(app: &mailroom_tests::TestApp, minter: &str, name: &str) -> (String, String) {
    let created = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            minter,
            &json!({"name": name}),
        )
        .await,
        200,
    )
    .await;
    (
        created["_id"].as_str().expect("id").to_owned(),
        created["token"].as_str().expect("token").to_owned(),
    )
}

#[tokio::test]
async fn revoking_through_the_api_evicts_the_cached_token_at_once() {
    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let (id, raw) = minted(&app, &admin, "cached").await;
    // The use puts the token in the process's cache.
    expect_json(app.get("/v2/users/me/tokens", &raw).await, 200).await;
    expect_json(
        app.request(
            Method::DELETE,
            &format!("/v2/users/me/tokens/{id}"),
            Some(&admin),
        )
        .send()
        .await
        .expect("sent"),
        200,
    )
    .await;
    // No time passes: the cache window is not what ends it.
    expect_problem(app.get("/v2/users/me/tokens", &raw).await, 401).await;
}

#[tokio::test]
async fn a_revocation_by_another_process_takes_effect_within_the_cache_window() {
    use diesel::{sql_query, sql_types::Text, RunQueryDsl};

    let app = spawn_app().await;
    let admin = app.user_token("ada@example.com").await;
    let (id, raw) = minted(&app, &admin, "elsewhere").await;
    expect_json(app.get("/v2/users/me/tokens", &raw).await, 200).await;
    // Another process revokes it: this one's cache does not hear of it.
    let revoked = sql_query("UPDATE tokens SET revoked_at = now() WHERE id = $1::uuid")
        .bind::<Text, _>(&id)
        .execute(&mut app.database.connection())
        .expect("revoking in SQL");
    assert_eq!(revoked, 1);
    expect_json(app.get("/v2/users/me/tokens", &raw).await, 200).await;
    app.clock.advance(Duration::seconds(4));
    expect_json(app.get("/v2/users/me/tokens", &raw).await, 200).await;
    // Past the window (docs/operations.md, "Token and membership caches"), the database answers again.
    app.clock.advance(Duration::seconds(1));
    expect_problem(app.get("/v2/users/me/tokens", &raw).await, 401).await;
}
