//! The monthly per-account send limit (`MAILROOM_MONTHLY_SEND_LIMIT`), drained through the
//! real worker and a real SMTP server on loopback.

use serde_json::Value;

use crate::delivery_support::Delivery;

#[tokio::test]
async fn a_limit_of_three_sends_three_of_five_and_caps_the_rest() {
    let setup = Delivery::new(|config| config.monthly_send_limit = Some(3)).await;
    let mut queued = Vec::new();
    for n in 0..5 {
        queued.push(setup.queue(&format!("reader{n}@example.org")).await);
    }
    // One claim takes all five: it must let through only three.
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (5, 3));
    setup.drain().await;

    assert_eq!(setup.smtp.messages().len(), 3, "three emails on the wire");
    let mut statuses = Vec::new();
    for message in &queued {
        let message = setup.message(&message["_id"]).await;
        statuses.push((message["status"].clone(), message["skipReason"].clone()));
    }
    let sent = statuses
        .iter()
        .filter(|(status, _)| status == "sent")
        .count();
    let capped: Vec<_> = statuses
        .iter()
        .filter(|(status, _)| status == "skipped")
        .collect();
    assert_eq!(sent, 3, "{statuses:?}");
    assert_eq!(capped.len(), 2, "{statuses:?}");
    assert!(capped
        .iter()
        .all(|(_, reason)| reason == "free_limit_capped"));
    let today = setup.today().await;
    assert_eq!(today["sent"], 3);
    assert_eq!(today["freeLimitCapped"], 2);

    // A later claim reads the month's counters: the limit still holds.
    let later = setup.queue("late@example.org").await;
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 0), "no SMTP session");
    assert_eq!(
        setup.message(&later["_id"]).await["skipReason"],
        "free_limit_capped"
    );
    assert_eq!(setup.today().await["freeLimitCapped"], 3);
    assert_eq!(setup.smtp.messages().len(), 3);
}

#[tokio::test]
async fn without_a_limit_everything_is_sent() {
    let setup = Delivery::new(|_| {}).await;
    for n in 0..4 {
        setup.queue(&format!("reader{n}@example.org")).await;
    }
    setup.drain().await;
    assert_eq!(setup.smtp.messages().len(), 4);
    let today = setup.today().await;
    assert_eq!(today["sent"], 4);
    assert_eq!(today["freeLimitCapped"], Value::from(0));
}

#[tokio::test]
async fn the_limit_counts_each_account_apart_and_a_new_month_starts_afresh() {
    let setup = Delivery::new(|config| config.monthly_send_limit = Some(1)).await;
    setup.queue("first@example.org").await;
    setup.drain().await;
    let capped = setup.queue("second@example.org").await;
    setup.drain().await;
    assert_eq!(
        setup.message(&capped["_id"]).await["skipReason"],
        "free_limit_capped"
    );

    // Another account of the same user has its own allowance.
    let other = setup.app.create_account(&setup.token, "Other").await;
    let server = serde_json::json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": setup.smtp.port(),
        "secure": false, "requireTLS": false, "user": "", "password": "",
        "defaultFromEmail": "hello@other.example", "defaultFromName": "Other"
    });
    let template = serde_json::json!({
        "name": "Receipt", "slug": "order-receipt", "subject": "Hi", "content": "<p>Hi</p>"
    });
    for (rest, body) in [("/mail-servers", server), ("/templates", template)] {
        let response = setup
            .app
            .send_json(
                reqwest::Method::POST,
                &format!("/v2/accounts/{other}{rest}"),
                &setup.token,
                &body,
            )
            .await;
        mailroom_tests::expect_json(response, 200).await;
    }
    let body = serde_json::json!({"slug": "order-receipt", "email": "third@example.org"});
    let response = setup
        .app
        .send_json(
            reqwest::Method::POST,
            &format!("/v2/accounts/{other}/messages"),
            &setup.token,
            &body,
        )
        .await;
    let queued = mailroom_tests::expect_json(response, 200).await;
    setup.drain().await;
    let message = mailroom_tests::expect_json(
        setup
            .app
            .get(
                &format!(
                    "/v2/accounts/{other}/messages/{}",
                    queued["_id"].as_str().unwrap()
                ),
                &setup.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(message["status"], "sent", "{message}");

    // Next month the first account may send again.
    let today = time::OffsetDateTime::now_utc().date();
    let left_in_month = today.month().length(today.year()) - today.day() + 1;
    setup
        .app
        .clock
        .advance(time::Duration::days(i64::from(left_in_month)));
    let next_month = setup.queue("fourth@example.org").await;
    setup.drain().await;
    assert_eq!(setup.message(&next_month["_id"]).await["status"], "sent");
    assert_eq!(setup.smtp.messages().len(), 3);
}
