//! Request bounds of the audience routes: at most 100 conditions per request.

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
