//! Transactional sends with `sendAt`: nothing goes before the time, the bounds are
//! refused, and a waiting message is cancelled by its id or its `Idempotency-Key` (by a
//! sending token too), never once a worker sent it.

use mailroom_app::ports::Clock;
use mailroom_tests::{expect_json, expect_problem};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::campaign_setup::Setup;
use crate::scopes::{mint, raw};

/// The application clock's time `by` from now, in RFC 3339.
fn clock_in(setup: &Setup, by: time::Duration) -> String {
    setup
        .app
        .clock
        .now()
        .plus(by)
        .as_datetime()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("an RFC 3339 time")
}

async fn send(setup: &Setup, body: &Value, key: Option<&str>) -> Response {
    let mut request = setup
        .app
        .request(Method::POST, &setup.path("/messages"), Some(&setup.token))
        .json(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    request.send().await.expect("the send")
}

#[tokio::test]
async fn a_send_at_waits_until_then_and_out_of_bounds_times_are_refused() {
    let setup = Setup::new().await;
    for (send_at, why) in [
        (clock_in(&setup, time::Duration::hours(-1)), "past"),
        (clock_in(&setup, time::Duration::days(31)), "past 30 days"),
        ("soon".to_owned(), "not a time"),
    ] {
        let body = json!({"slug": "news", "email": "grace@example.org", "sendAt": send_at});
        let problem = expect_problem(send(&setup, &body, None).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], "sendAt", "{why}: {problem}");
    }

    let at = clock_in(&setup, time::Duration::hours(3));
    let body = json!({"slug": "news", "email": "grace@example.org", "sendAt": at});
    let queued = expect_json(send(&setup, &body, Some("later-1")).await, 200).await;
    assert_eq!(queued["status"], "queued");
    let due = time::OffsetDateTime::parse(
        queued["nextAttemptAt"].as_str().expect("nextAttemptAt"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("a time");
    let wanted = time::OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339)
        .expect("a time");
    assert!(
        (due - wanted).abs() < time::Duration::seconds(1),
        "{queued}"
    );
    // The same key and body answers the message; another time is another request.
    let again = expect_json(send(&setup, &body, Some("later-1")).await, 200).await;
    assert_eq!(again["_id"], queued["_id"]);
    let moved = json!({"slug": "news", "email": "grace@example.org",
                       "sendAt": clock_in(&setup, time::Duration::hours(4))});
    expect_problem(send(&setup, &moved, Some("later-1")).await, 400).await;

    assert_eq!(
        setup.drain_messages().await,
        0,
        "nothing is due before sendAt"
    );
    assert!(setup.smtp.messages().is_empty());
    setup.app.clock.advance(time::Duration::hours(3));
    assert_eq!(setup.drain_messages().await, 1);
    assert_eq!(setup.smtp.messages().len(), 1);
    let id = queued["_id"].as_str().expect("id");
    let sent = setup.get(&format!("/messages/{id}")).await;
    assert_eq!(sent["status"], "sent");
    let refused = expect_problem(
        setup
            .call(Method::POST, &format!("/messages/{id}/cancel"), &json!({}))
            .await,
        400,
    )
    .await;
    assert!(
        refused["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("a sent message cannot be cancelled"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_waiting_message_is_cancelled_by_id_or_key_and_is_never_sent() {
    let setup = Setup::new().await;
    let later = clock_in(&setup, time::Duration::hours(1));
    let body = |email: &str| json!({"slug": "news", "email": email, "sendAt": later});
    let by_id = expect_json(send(&setup, &body("a@example.org"), None).await, 200).await;
    let by_key = expect_json(
        send(&setup, &body("b@example.org"), Some("order-77")).await,
        200,
    )
    .await;
    let kept = expect_json(send(&setup, &body("c@example.org"), None).await, 200).await;

    let id = by_id["_id"].as_str().expect("id");
    let cancelled = setup
        .ok(Method::POST, &format!("/messages/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(cancelled["status"], "skipped");
    assert_eq!(cancelled["skipReason"], "cancelled");
    assert!(cancelled.get("nextAttemptAt").is_none(), "{cancelled}");
    // A sending token, as a product backend holds, cancels by the key it sent with.
    let sending = raw(&mint(
        &setup.app,
        &setup.token,
        json!({"name": "backend", "scope": "sending"}),
    )
    .await);
    let response = setup
        .app
        .send_json(
            Method::POST,
            &setup.path("/messages/cancel"),
            &sending,
            &json!({"idempotencyKey": "order-77"}),
        )
        .await;
    let cancelled = expect_json(response, 200).await;
    assert_eq!(cancelled["_id"], by_key["_id"]);
    assert_eq!(cancelled["skipReason"], "cancelled");

    for (rest, body, status) in [
        (format!("/messages/{id}/cancel"), json!({}), 400),
        (
            "/messages/cancel".to_owned(),
            json!({"idempotencyKey": "nobody-used-this"}),
            404,
        ),
        ("/messages/cancel".to_owned(), json!({}), 400),
        (
            "/messages/cancel".to_owned(),
            json!({"idempotencyKey": "order-77", "extra": 1}),
            400,
        ),
        (
            "/messages/01936c5e-7b2a-7cde-8f00-0123456789ab/cancel".to_owned(),
            json!({}),
            404,
        ),
    ] {
        expect_problem(setup.call(Method::POST, &rest, &body).await, status).await;
    }

    setup.app.clock.advance(time::Duration::hours(2));
    assert_eq!(setup.drain_messages().await, 1, "only the one left");
    let delivered: Vec<String> = setup
        .smtp
        .messages()
        .iter()
        .flat_map(|message| message.recipients.clone())
        .collect();
    assert_eq!(
        delivered,
        [kept["email"].as_str().expect("email").to_owned()]
    );
    let skipped = setup.get("/messages/count?status=skipped").await;
    assert_eq!(skipped["count"], 2);
}
