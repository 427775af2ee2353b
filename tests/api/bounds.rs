//! Request bounds: at most 100 audience conditions per request, and the statement timeout
//! of request transactions.

use mailroom_tests::{expect_json, expect_problem};
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

/// `n` conditions every contact with an email matches (short, so 20,000 of them fit in
/// the 1 MiB body limit, well past PostgreSQL's 65,535 bind parameters).
fn conditions(n: usize) -> Vec<Value> {
    vec![json!({"slug": "email", "operator": "exists"}); n]
}

async fn status_and_body(setup: &Setup, path: &str, body: &Value) -> (u16, Value) {
    let response = setup
        .app
        .send_json(Method::POST, &setup.path(path), &setup.token, body)
        .await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn more_than_100_conditions_are_400_naming_the_limit_on_every_route_that_takes_them() {
    let setup = Setup::new().await;
    for count in [101, 20_000] {
        let search = json!({"includeUnsubscribed": true, "attributes": conditions(count)});
        let announcement = json!({"name": "Launch", "templateId": setup.template,
            "includeUnsubscribed": false, "attributes": conditions(count)});
        for (path, body) in [
            ("/contacts/search", &search),
            ("/contacts/search/count", &search),
            ("/announcements", &announcement),
        ] {
            let (status, problem) = status_and_body(&setup, path, body).await;
            assert_eq!(status, 400, "{count} conditions on {path}: {problem}");
            assert!(
                problem.to_string().contains("at most 100 conditions"),
                "{count} conditions on {path}: the problem names the limit: {problem}"
            );
        }
    }
}

#[tokio::test]
async fn exactly_100_conditions_are_accepted() {
    let setup = Setup::new().await;
    setup.contact("a1@example.org", json!({})).await;
    let search = json!({"includeUnsubscribed": true, "attributes": conditions(100)});
    let counted = expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/contacts/search/count"),
                &setup.token,
                &search,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(counted["count"], 1);
    let announcement = json!({"name": "Launch", "templateId": setup.template,
        "includeUnsubscribed": false, "attributes": conditions(100)});
    let (status, body) = status_and_body(&setup, "/announcements", &announcement).await;
    assert_eq!(status, 200, "{body}");
    // 101 on the same account is refused.
    let too_many = json!({"includeUnsubscribed": true, "attributes": conditions(101)});
    expect_problem(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/contacts/search"),
                &setup.token,
                &too_many,
            )
            .await,
        400,
    )
    .await;
}

/// Seeds `n` contacts straight into the database (the API would take minutes for this
/// many): real rows, so the search below is a real scan.
fn seed_contacts(app: &mailroom_tests::TestApp, account: &str, n: u32) {
    use diesel::connection::SimpleConnection;
    let mut conn = app.database.connection();
    conn.batch_execute(&format!(
        "INSERT INTO contacts (account_id, id, email, created_at, message_count) \
         SELECT '{account}', gen_random_uuid(), 'c' || i || '@example.org', now(), 0 \
         FROM generate_series(1, {n}) AS i"
    ))
    .expect("seed");
}

/// The 503's problem says the statement was cancelled, and it came within `bound_secs`
/// (the timeout is about 300 ms).
fn assert_cancelled_quickly(problem: &Value, took: std::time::Duration, bound_secs: u64) {
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("longer than the database allows")),
        "{problem}"
    );
    assert!(
        took.as_secs() < bound_secs,
        "cancelled after about 300 ms, took {took:?}"
    );
}

/// A request whose statement runs past `MAILROOM_STATEMENT_TIMEOUT` is cancelled by
/// PostgreSQL and answered 503 with `Retry-After`, quickly, and the service then answers
/// normal requests.
#[tokio::test]
async fn a_search_past_a_300_ms_statement_timeout_is_a_503_with_retry_after() {
    let setup = Setup::new_with(|config| {
        config.statement_timeout = Some(std::time::Duration::from_millis(300));
    })
    .await;
    seed_contacts(&setup.app, &setup.account, 200_000);
    // 100 substring conditions that every row meets (so none cuts the others short) over
    // 200,000 rows: 20 million case-insensitive matches, 1.3 s without a timeout here.
    let slow: Vec<Value> = (0..100)
        .map(|_| json!({"slug": "email", "operator": "contains", "value": "example.org"}))
        .collect();
    let search = json!({"includeUnsubscribed": true, "attributes": slow});
    let started = std::time::Instant::now();
    // A fresh connection: the pooled one idled through the seeding, past the server's
    // keep-alive.
    let response = reqwest::Client::new()
        .post(format!(
            "{}{}",
            setup.app.address,
            setup.path("/contacts/search/count")
        ))
        .bearer_auth(&setup.token)
        .json(&search)
        .send()
        .await
        .expect("sent");
    let took = started.elapsed();
    assert_eq!(response.status().as_u16(), 503, "after {took:?}");
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    let problem = expect_problem(response, 503).await;
    assert_cancelled_quickly(&problem, took, 10);
    // Normal requests still work.
    let page = expect_json(
        reqwest::Client::new()
            .get(format!(
                "{}{}",
                setup.app.address,
                setup.path("/contacts?limit=1")
            ))
            .bearer_auth(&setup.token)
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
}

/// An event nothing listens to is one statement outside a transaction (docs/performance.md,
/// "Design choices, measured"): the sessions' statement timeout
/// bounds it as `SET LOCAL` bounds a transaction. An event that waits on a row another
/// session holds is a 503 after about 300 ms, and succeeds once the row is free.
#[tokio::test]
async fn an_event_waiting_past_a_300_ms_statement_timeout_is_a_503_and_then_succeeds() {
    let setup = Setup::new_with(|config| {
        config.statement_timeout = Some(std::time::Duration::from_millis(300));
    })
    .await;
    setup.event("grace@example.org", "signed_up").await;
    let mut holder = setup.app.database.connection();
    diesel::connection::SimpleConnection::batch_execute(
        &mut holder,
        &format!(
            "BEGIN; SELECT 1 FROM contact_attributes \
             WHERE account_id = '{}' AND slug = 'event.signed_up' FOR UPDATE",
            setup.account
        ),
    )
    .expect("lock grace's event.signed_up");
    let event = json!({"email": "grace@example.org", "slug": "signed_up"});
    let started = std::time::Instant::now();
    let (status, problem) = status_and_body(&setup, "/events", &event).await;
    let took = started.elapsed();
    assert_eq!(status, 503, "after {took:?}: {problem}");
    assert_cancelled_quickly(&problem, took, 5);
    diesel::connection::SimpleConnection::batch_execute(&mut holder, "COMMIT").expect("release");
    setup.event("grace@example.org", "signed_up").await;
    let names = setup.get("/events/names").await;
    assert_eq!(
        names["items"][0]["count"], 2,
        "the refused event wrote nothing: {names}"
    );
}
