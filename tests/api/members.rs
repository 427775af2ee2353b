//! Team members: add, change role, remove; who may; the owner stays; removal takes effect
//! at the removed user's next request.

use mailroom_tests::{expect_json, expect_problem, spawn_app, TestApp};
use reqwest::{Method, Response};
use serde_json::{json, Value};

async fn add(app: &TestApp, token: &str, account: &str, email: &str, role: &str) -> Response {
    app.send_json(
        Method::POST,
        &format!("/v2/accounts/{account}/members"),
        token,
        &json!({"email": email, "role": role}),
    )
    .await
}

async fn set_role(app: &TestApp, token: &str, account: &str, user: &str, role: &str) -> Response {
    app.send_json(
        Method::PATCH,
        &format!("/v2/accounts/{account}/members/{user}"),
        token,
        &json!({ "role": role }),
    )
    .await
}

async fn remove(app: &TestApp, token: &str, account: &str, user: &str) -> Response {
    app.request(
        Method::DELETE,
        &format!("/v2/accounts/{account}/members/{user}"),
        Some(token),
    )
    .send()
    .await
    .expect("sent")
}

async fn members(app: &TestApp, token: &str, account: &str) -> Vec<Value> {
    expect_json(
        app.get(&format!("/v2/accounts/{account}/members"), token)
            .await,
        200,
    )
    .await["items"]
        .as_array()
        .expect("items")
        .clone()
}

fn id_of(member: &Value) -> String {
    member["_id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn the_owner_adds_a_new_user_who_then_reaches_the_account() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let added = expect_json(
        add(&app, &ada, &account, "Bob@Example.com", "member").await,
        200,
    )
    .await;
    assert_eq!(added["role"], "member");
    assert!(added["email"]
        .as_str()
        .unwrap_or_default()
        .eq_ignore_ascii_case("bob@example.com"));
    let listed = members(&app, &ada, &account).await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["role"], "owner");
    assert_eq!(id_of(&listed[1]), id_of(&added));
    // The user was created without a token; the operator's bootstrap finds the same user.
    let bob = app.user_token("bob@example.com").await;
    expect_json(app.get(&format!("/v2/accounts/{account}"), &bob).await, 200).await;
    // Twice is 400 naming email; bad role and email name their field.
    for (body, field) in [
        (
            json!({"email": "bob@example.com", "role": "member"}),
            "email",
        ),
        (
            json!({"email": "carol@example.com", "role": "owner"}),
            "role",
        ),
        (json!({"email": "not an email", "role": "member"}), "email"),
        (json!({"email": "carol@example.com"}), "role"),
    ] {
        let problem = expect_problem(
            app.send_json(
                Method::POST,
                &format!("/v2/accounts/{account}/members"),
                &ada,
                &body,
            )
            .await,
            400,
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    assert_eq!(members(&app, &ada, &account).await.len(), 2);
}

#[tokio::test]
async fn only_the_owner_and_admins_manage_members() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "member").await,
            200,
        )
        .await,
    );
    let carol_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "carol@example.com", "member").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    let carol = app.user_token("carol@example.com").await;

    // A member may not add, change or remove others: 403 problem+json.
    expect_problem(
        add(&app, &bob, &account, "dan@example.com", "member").await,
        403,
    )
    .await;
    expect_problem(
        set_role(&app, &bob, &account, &carol_id, "admin").await,
        403,
    )
    .await;
    expect_problem(remove(&app, &bob, &account, &carol_id).await, 403).await;
    // Nor the owner: the role is checked before the owner rule (403, not 400).
    let ada_id = id_of(&members(&app, &ada, &account).await[0]);
    for role in ["member", "admin"] {
        let problem =
            expect_problem(set_role(&app, &bob, &account, &ada_id, role).await, 403).await;
        assert_eq!(
            problem["detail"],
            "only the owner and admins manage members"
        );
    }
    let problem = expect_problem(remove(&app, &bob, &account, &ada_id).await, 403).await;
    assert_eq!(
        problem["detail"],
        "only the owner and admins manage members"
    );

    // An admin may.
    let promoted = expect_json(set_role(&app, &ada, &account, &bob_id, "admin").await, 200).await;
    assert_eq!(promoted["role"], "admin");
    expect_json(
        add(&app, &bob, &account, "dan@example.com", "member").await,
        200,
    )
    .await;
    expect_json(
        set_role(&app, &bob, &account, &carol_id, "admin").await,
        200,
    )
    .await;
    expect_json(
        set_role(&app, &carol, &account, &bob_id, "member").await,
        200,
    )
    .await;
    let roles: Vec<(String, String)> = members(&app, &ada, &account)
        .await
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap_or_default().to_owned(),
                m["role"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![
            ("ada@example.com".to_owned(), "owner".to_owned()),
            ("bob@example.com".to_owned(), "member".to_owned()),
            ("carol@example.com".to_owned(), "admin".to_owned()),
            ("dan@example.com".to_owned(), "member".to_owned()),
        ]
    );
    // Unknown and malformed member ids are 404.
    expect_problem(
        remove(&app, &ada, &account, "01936c5e-7b2a-7cde-8f00-0123456789ab").await,
        404,
    )
    .await;
    expect_problem(set_role(&app, &ada, &account, "nope", "admin").await, 404).await;
}

#[tokio::test]
async fn the_owner_is_neither_removed_nor_demoted_and_the_last_admin_may_go() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let ada_id = id_of(&members(&app, &ada, &account).await[0]);
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "admin").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    for token in [&ada, &bob] {
        expect_problem(
            set_role(&app, token, &account, &ada_id, "member").await,
            400,
        )
        .await;
        expect_problem(remove(&app, token, &account, &ada_id).await, 400).await;
    }
    // The owner is the admin that always stays, so the last admin may be demoted or leave.
    expect_json(set_role(&app, &ada, &account, &bob_id, "member").await, 200).await;
    expect_json(set_role(&app, &ada, &account, &bob_id, "admin").await, 200).await;
    expect_json(remove(&app, &bob, &account, &bob_id).await, 200).await;
    let listed = members(&app, &ada, &account).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["role"], "owner");
}

#[tokio::test]
async fn a_member_may_leave_but_not_remove_others() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "member").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    expect_json(remove(&app, &bob, &account, &bob_id).await, 200).await;
    expect_problem(app.get(&format!("/v2/accounts/{account}"), &bob).await, 401).await;
}

/// Removal takes effect at the next request of any of the removed user's tokens.
#[tokio::test]
async fn a_removed_members_tokens_get_401_at_their_next_request() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "admin").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    let bob_sending = expect_json(
        app.send_json(
            Method::POST,
            "/v2/users/me/tokens",
            &bob,
            &json!({"name": "backend", "scope": "sending", "accountIds": [account]}),
        )
        .await,
        200,
    )
    .await["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let event = json!({"email": "new@example.org", "slug": "signed_up"});
    let events = format!("/v2/accounts/{account}/events");
    expect_json(
        app.get(&format!("/v2/accounts/{account}/templates"), &bob)
            .await,
        200,
    )
    .await;
    expect_json(
        app.send_json(Method::POST, &events, &bob_sending, &event)
            .await,
        200,
    )
    .await;

    expect_json(remove(&app, &ada, &account, &bob_id).await, 200).await;

    expect_problem(
        app.get(&format!("/v2/accounts/{account}/templates"), &bob)
            .await,
        401,
    )
    .await;
    expect_problem(
        app.send_json(Method::POST, &events, &bob_sending, &event)
            .await,
        401,
    )
    .await;
    // The tokens themselves still work elsewhere: only the membership went.
    expect_json(app.get("/v2/accounts", &bob).await, 200).await;
}

/// Two admins removing each other at once: the row locks serialise them, so one wins and
/// the other, no longer a member, gets 401; the owner stays either way.
#[tokio::test]
async fn concurrent_removals_leave_the_owner_and_one_answer_each() {
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "admin").await,
            200,
        )
        .await,
    );
    let carol_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "carol@example.com", "admin").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    let carol = app.user_token("carol@example.com").await;
    let (first, second) = tokio::join!(
        remove(&app, &bob, &account, &carol_id),
        remove(&app, &carol, &account, &bob_id)
    );
    let mut statuses = vec![first.status().as_u16(), second.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 401]);
    let listed = members(&app, &ada, &account).await;
    assert_eq!(listed[0]["role"], "owner");
    assert_eq!(listed.len(), 2);
}

/// A membership removed outside this process's API (another replica, `mailroom member
/// remove`, SQL) ends within the membership cache's 5 seconds (docs/operations.md, "Token
/// and membership caches"): the cached proof serves until then, and not after.
#[tokio::test]
async fn a_membership_removed_elsewhere_ends_within_the_cache_ttl() {
    use diesel::connection::SimpleConnection;
    let app = spawn_app().await;
    let ada = app.user_token("ada@example.com").await;
    let account = app.create_account(&ada, "Acme").await;
    let bob_id = id_of(
        &expect_json(
            add(&app, &ada, &account, "bob@example.com", "member").await,
            200,
        )
        .await,
    );
    let bob = app.user_token("bob@example.com").await;
    let templates = format!("/v2/accounts/{account}/templates");
    expect_json(app.get(&templates, &bob).await, 200).await;

    let mut conn = app.database.connection();
    conn.batch_execute(&format!(
        "DELETE FROM memberships WHERE account_id = '{account}' AND user_id = '{bob_id}'"
    ))
    .expect("remove behind the API's back");

    app.clock.advance(time::Duration::seconds(4));
    expect_json(app.get(&templates, &bob).await, 200).await;
    app.clock.advance(time::Duration::seconds(1));
    expect_problem(app.get(&templates, &bob).await, 401).await;
}
