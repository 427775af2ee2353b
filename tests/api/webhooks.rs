use mailroom_tests::{expect_json, expect_problem, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// These tests are about what is stored and shown, not about the network: private egress
/// is on, so `hooks.example.com` is saved without a lookup (this machine may be offline).
/// The egress checks of `PUT` have their own tests in `webhooks_delivery.rs`.
async fn spawn_app() -> TestApp {
    spawn_app_with(|config| config.allow_private_egress = true).await
}

fn valid() -> Value {
    json!({
        "url": "https://hooks.example.com/mailroom",
        "authType": "bearer",
        "passwordOrToken": "s3cr3t-token-9876",
        "events": ["contact.bounced", "contact.unsubscribed"]
    })
}

#[tokio::test]
async fn first_save_generates_a_secret_that_later_saves_keep() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{id}/webhooks");
    let first = expect_json(
        app.send_json(Method::PUT, &path, &token, &valid()).await,
        200,
    )
    .await;
    let secret = first["signingSecret"].as_str().expect("secret").to_owned();
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{secret}"
    );
    assert_eq!(first["url"], "https://hooks.example.com/mailroom");
    assert_eq!(first["authType"], "bearer");
    assert_eq!(
        first["events"],
        json!(["contact.bounced", "contact.unsubscribed"])
    );
    assert_eq!(
        first["passwordOrToken"], "****9876",
        "write-only credential masked even here"
    );

    let mut changed = valid();
    changed["events"] = json!(["contact.deleted"]);
    let second = expect_json(
        app.send_json(Method::PUT, &path, &token, &changed).await,
        200,
    )
    .await;
    assert_eq!(
        second["signingSecret"],
        secret.as_str(),
        "kept across saves"
    );
    assert_eq!(second["events"], json!(["contact.deleted"]));

    let account = expect_json(app.get(&format!("/v2/accounts/{id}"), &token).await, 200).await;
    let masked = account["webhooks"]["signingSecret"]
        .as_str()
        .expect("masked");
    assert_eq!(masked, format!("****{}", &secret[secret.len() - 4..]));
    assert_eq!(account["webhooks"]["passwordOrToken"], "****9876");
    assert!(
        !account.to_string().contains(&secret),
        "secret never on reads"
    );
    assert!(
        !account.to_string().contains("s3cr3t-token"),
        "credential never on reads"
    );
}

#[tokio::test]
async fn a_supplied_secret_rotates_the_stored_one() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{id}/webhooks");
    expect_json(
        app.send_json(Method::PUT, &path, &token, &valid()).await,
        200,
    )
    .await;
    let rotated_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let mut body = valid();
    body["signingSecret"] = json!(rotated_secret);
    let rotated = expect_json(app.send_json(Method::PUT, &path, &token, &body).await, 200).await;
    assert_eq!(rotated["signingSecret"], rotated_secret);
    let kept = expect_json(
        app.send_json(Method::PUT, &path, &token, &valid()).await,
        200,
    )
    .await;
    assert_eq!(kept["signingSecret"], rotated_secret);
    let mut bad = valid();
    bad["signingSecret"] = json!("not-a-secret");
    expect_problem(app.send_json(Method::PUT, &path, &token, &bad).await, 400).await;
}

#[tokio::test]
async fn secrets_are_encrypted_at_rest() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let saved = expect_json(
        app.send_json(
            Method::PUT,
            &format!("/v2/accounts/{id}/webhooks"),
            &token,
            &valid(),
        )
        .await,
        200,
    )
    .await;
    let secret = saved["signingSecret"].as_str().expect("secret");
    use diesel::{sql_types::Bytea, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bytea)]
        signing_secret: Vec<u8>,
        #[diesel(sql_type = Bytea)]
        password_or_token: Vec<u8>,
    }
    let rows: Vec<Row> =
        diesel::sql_query("SELECT signing_secret, password_or_token FROM webhook_configs")
            .load(&mut app.database.connection())
            .expect("row");
    let contains =
        |haystack: &[u8], needle: &[u8]| haystack.windows(needle.len()).any(|w| w == needle);
    assert!(!contains(&rows[0].signing_secret, secret.as_bytes()));
    assert!(!contains(&rows[0].signing_secret, &secret.as_bytes()[6..]));
    assert!(!contains(&rows[0].password_or_token, b"s3cr3t-token-9876"));
}

#[tokio::test]
async fn invalid_configurations_are_400_and_change_nothing() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{id}/webhooks");
    let without = |key: &str| {
        let mut body = valid();
        body.as_object_mut().expect("object").remove(key);
        body
    };
    let with = |key: &str, value: Value| {
        let mut body = valid();
        body[key] = value;
        body
    };
    let cases = [
        ("url", without("url")),
        ("events", without("events")),
        ("authType", without("authType")),
        ("events", with("events", json!([]))),
        ("events", with("events", json!(["contact.created"]))),
        ("events", with("events", json!("contact.bounced"))),
        ("authType", with("authType", json!("digest"))),
        ("url", with("url", json!("not a url"))),
        ("url", with("url", json!("ftp://example.com/x"))),
        ("passwordOrToken", without("passwordOrToken")),
        ("unknown", with("secretSauce", json!(true))),
    ];
    for (field, body) in cases {
        let problem =
            expect_problem(app.send_json(Method::PUT, &path, &token, &body).await, 400).await;
        if field != "unknown" && problem["errors"].as_array().is_some_and(|e| !e.is_empty()) {
            assert!(
                problem["errors"]
                    .as_array()
                    .expect("errors")
                    .iter()
                    .any(|e| e["field"] == field),
                "{field}: {problem}"
            );
        }
    }
    let basic = json!({"url": "https://h.example.com/", "authType": "basic", "events": ["contact.bounced"], "passwordOrToken": "pw"});
    let problem =
        expect_problem(app.send_json(Method::PUT, &path, &token, &basic).await, 400).await;
    assert_eq!(problem["errors"][0]["field"], "username");
    let account = expect_json(app.get(&format!("/v2/accounts/{id}"), &token).await, 200).await;
    assert!(account["webhooks"].is_null(), "nothing stored");
}

#[tokio::test]
async fn auth_type_none_stores_no_credentials() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let body =
        json!({"url": "https://h.example.com/", "authType": "none", "events": ["contact.deleted"]});
    let saved = expect_json(
        app.send_json(
            Method::PUT,
            &format!("/v2/accounts/{id}/webhooks"),
            &token,
            &body,
        )
        .await,
        200,
    )
    .await;
    assert!(
        saved.get("passwordOrToken").is_none() && saved.get("username").is_none(),
        "{saved}"
    );
}

#[tokio::test]
async fn credentials_of_1_to_7_characters_are_accepted_and_read_back_as_4_stars_and_8_show_their_last_4(
) {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let path = format!("/v2/accounts/{id}/webhooks");
    // The endpoint decides its credentials: any non-empty one is stored. `****` and the
    // last four would show all of a 4-character one and four of seven: masked whole.
    for (auth_type, credential) in [
        ("bearer", "§"),
        ("bearer", "ab§d"),
        ("basic", "abc§efg"),
        ("bearer", "é12§456"),
    ] {
        let mut body = valid();
        body["authType"] = json!(auth_type);
        body["username"] = json!("mailroom");
        body["passwordOrToken"] = json!(credential);
        let saved = expect_json(app.send_json(Method::PUT, &path, &token, &body).await, 200).await;
        assert_eq!(saved["passwordOrToken"], "****", "{credential}: {saved}");
        assert!(!saved.to_string().contains(credential), "{saved}");
        let account = expect_json(app.get(&format!("/v2/accounts/{id}"), &token).await, 200).await;
        assert_eq!(account["webhooks"]["passwordOrToken"], "****", "{account}");
        assert!(!account.to_string().contains(credential), "{account}");
    }
    // Empty is still no credential: 400 for an auth type that needs one.
    let mut body = valid();
    body["authType"] = json!("bearer");
    body["passwordOrToken"] = json!("");
    let problem = expect_problem(app.send_json(Method::PUT, &path, &token, &body).await, 400).await;
    assert_eq!(
        problem["errors"][0]["field"], "passwordOrToken",
        "{problem}"
    );

    let mut body = valid();
    body["passwordOrToken"] = json!("abcd1234");
    let saved = expect_json(app.send_json(Method::PUT, &path, &token, &body).await, 200).await;
    assert_eq!(saved["passwordOrToken"], "****1234");
    let account = expect_json(app.get(&format!("/v2/accounts/{id}"), &token).await, 200).await;
    assert_eq!(account["webhooks"]["passwordOrToken"], "****1234");
}
