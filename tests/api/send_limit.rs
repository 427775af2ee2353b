//! The monthly send limit (`MAILROOM_MONTHLY_SEND_LIMIT`), kept per owner over every
//! account they own and counting each Cc and Bcc copy, drained through the real worker and
//! a real SMTP server on loopback.

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

/// Makes `token`'s user an account with the loopback mail server and the `order-receipt`
/// template, and queues one send of it to `email`; returns (account, message id).
async fn second_account_sends(setup: &Delivery, token: &str, email: &str) -> (String, String) {
    let other = setup.app.create_account(token, "Other").await;
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
                token,
                &body,
            )
            .await;
        mailroom_tests::expect_json(response, 200).await;
    }
    let body = serde_json::json!({"slug": "order-receipt", "email": email});
    let response = setup
        .app
        .send_json(
            reqwest::Method::POST,
            &format!("/v2/accounts/{other}/messages"),
            token,
            &body,
        )
        .await;
    let queued = mailroom_tests::expect_json(response, 200).await;
    let id = queued["_id"].as_str().expect("message id").to_owned();
    (other, id)
}

async fn message_of(setup: &Delivery, token: &str, account: &str, id: &str) -> Value {
    mailroom_tests::expect_json(
        setup
            .app
            .get(&format!("/v2/accounts/{account}/messages/{id}"), token)
            .await,
        200,
    )
    .await
}

/// With a limit of 1, a second account of the same owner is capped too (the allowance is
/// the owner's, not each account's), while another user's account sends; and next month
/// the first account may send again.
#[tokio::test]
async fn a_limit_of_1_is_the_owners_so_a_second_account_of_theirs_is_capped_and_a_new_month_starts_afresh(
) {
    let setup = Delivery::new(|config| config.monthly_send_limit = Some(1)).await;
    setup.queue("first@example.org").await;
    setup.drain().await;
    let capped = setup.queue("second@example.org").await;
    setup.drain().await;
    assert_eq!(
        setup.message(&capped["_id"]).await["skipReason"],
        "free_limit_capped"
    );

    // Another account of the same user shares the owner's allowance: spent.
    let (own, own_message) = second_account_sends(&setup, &setup.token, "third@example.org").await;
    setup.drain().await;
    let message = message_of(&setup, &setup.token, &own, &own_message).await;
    assert_eq!(message["status"], "skipped", "{message}");
    assert_eq!(message["skipReason"], "free_limit_capped", "{message}");

    // Another user's account has an allowance of its own.
    let grace = setup.app.user_token("grace@example.com").await;
    let (foreign, foreign_message) =
        second_account_sends(&setup, &grace, "fourth@example.org").await;
    setup.drain().await;
    let message = message_of(&setup, &grace, &foreign, &foreign_message).await;
    assert_eq!(message["status"], "sent", "{message}");

    // Next month the first account may send again.
    let today = time::OffsetDateTime::now_utc().date();
    let left_in_month = today.month().length(today.year()) - today.day() + 1;
    setup
        .app
        .clock
        .advance(time::Duration::days(i64::from(left_in_month)));
    let next_month = setup.queue("fifth@example.org").await;
    setup.drain().await;
    assert_eq!(setup.message(&next_month["_id"]).await["status"], "sent");
    assert_eq!(setup.smtp.messages().len(), 3);
}

/// Each Cc and Bcc copy on the wire is one send: with a limit of 4, a message with two Cc
/// and one Bcc (four recipients) spends the month, and the next message is capped.
#[tokio::test]
async fn a_message_with_3_copies_spends_4_of_a_limit_of_4_and_the_next_is_capped() {
    let setup = Delivery::new(|config| config.monthly_send_limit = Some(4)).await;
    let template = serde_json::json!({
        "name": "Copied", "slug": "copied", "subject": "Hi", "content": "<p>Hi</p>",
        "cc": "boss@example.net, team@example.net", "bcc": "archive@example.net"
    });
    setup.post("/templates", &template).await;
    let body = serde_json::json!({"slug": "copied", "email": "first@example.org"});
    let copied = setup.post("/messages", &body).await;
    setup.drain().await;
    assert_eq!(setup.message(&copied["_id"]).await["status"], "sent");
    assert_eq!(
        setup.smtp.messages()[0].recipients.len(),
        4,
        "contact and 3 copies"
    );

    let next = setup.queue("second@example.org").await;
    setup.drain().await;
    let next = setup.message(&next["_id"]).await;
    assert_eq!(next["status"], "skipped", "{next}");
    assert_eq!(next["skipReason"], "free_limit_capped", "{next}");
    assert_eq!(setup.smtp.messages().len(), 1);
    // The stats count messages, as the contract says: one sent.
    assert_eq!(setup.today().await["sent"], 1);
}
