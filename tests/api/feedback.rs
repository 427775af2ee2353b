//! Feedback intake: real ARF complaints and DSN bounces (tests/fixtures/feedback) posted
//! raw to `POST …/feedback`, against messages delivered by the real worker.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::delivery_support::Delivery;
use mailroom_tests::{expect_json, expect_problem};

/// A fixture with its placeholders filled in.
fn fixture(name: &str, message_id: &str, recipient: &str) -> String {
    let path = format!("{}/fixtures/feedback/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{path}: {error}"))
        .replace("{{MESSAGE_ID}}", message_id)
        .replace("{{RECIPIENT}}", recipient)
}

async fn post_feedback(setup: &Delivery, token: &str, body: impl Into<reqwest::Body>) -> Response {
    setup
        .app
        .request(Method::POST, &setup.path("/feedback"), Some(token))
        .header("content-type", "message/rfc822")
        .body(body)
        .send()
        .await
        .expect("sent")
}

async fn subscribe(setup: &Delivery, event: &str) {
    let body = json!({"url": "http://127.0.0.1:9/hooks", "authType": "none", "events": [event]});
    let response = setup
        .app
        .send_json(Method::PUT, &setup.path("/webhooks"), &setup.token, &body)
        .await;
    expect_json(response, 200).await;
}

async fn events(setup: &Delivery, event: &str) -> Vec<Value> {
    let page = setup.get(&format!("/webhook-events?event={event}")).await;
    page["items"].as_array().expect("items").clone()
}

/// Queues a send to `email` and delivers it; answers the message as sent.
async fn delivered(setup: &Delivery, email: &str) -> Value {
    let queued = setup.queue(email).await;
    setup.drain().await;
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "sent", "{message}");
    message
}

#[tokio::test]
async fn a_yahoo_complaint_matched_by_message_id_is_recorded_once_and_blocks_later_sends() {
    let setup = Delivery::new(|_| {}).await;
    subscribe(&setup, "contact.complained").await;
    let message = delivered(&setup, "grace@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    // The recipient field names nobody of the account: only the Message-ID can match.
    let report = fixture("arf-yahoo.eml", header, "forwarded@yahoo.example");

    let answer = expect_json(
        post_feedback(&setup, &setup.token, report.clone()).await,
        200,
    )
    .await;
    assert_eq!(
        answer,
        json!({"type": "complaint", "messageId": message["_id"], "contactId": message["contactId"], "recorded": true})
    );
    let contact = setup.contact(&message["contactId"]).await;
    assert!(contact["complaintDate"].is_string(), "{contact}");
    assert_eq!(setup.today().await["complained"], 1);
    let queued = events(&setup, "contact.complained").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["payload"]["email"], "grace@example.org");
    assert_eq!(queued[0]["payload"]["contactId"], message["contactId"]);

    // The same report again: answered, but nothing counted or queued twice.
    let again = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(again["recorded"], false);
    assert_eq!(again["type"], "complaint");
    assert_eq!(setup.today().await["complained"], 1);
    assert_eq!(events(&setup, "contact.complained").await.len(), 1);
    let unchanged = setup.contact(&message["contactId"]).await;
    assert_eq!(unchanged["complaintDate"], contact["complaintDate"]);
    let listed = setup.get("/suppressions").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        (&listed["items"][0]["reason"], &listed["items"][0]["source"]),
        (&json!("complaint"), &json!("feedback_report"))
    );

    // A complained contact is not mailed again.
    let next = setup.queue("grace@example.org").await;
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 0), "no SMTP session");
    let skipped = setup.message(&next["_id"]).await;
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["skipReason"], "complaint_blocked");
    assert_eq!(setup.today().await["complaintBlocked"], 1);
    assert_eq!(setup.smtp.messages().len(), 1);
}

#[tokio::test]
async fn a_complaint_without_message_id_is_matched_to_the_latest_message_to_its_recipient() {
    let setup = Delivery::new(|_| {}).await;
    delivered(&setup, "grace@example.org").await;
    let latest = delivered(&setup, "grace@example.org").await;
    delivered(&setup, "ada@example.org").await;
    // Recipients compare without case.
    let report = fixture("arf-headers-only.eml", "", "Grace@Example.ORG");
    let answer = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(answer["type"], "complaint");
    assert_eq!(answer["messageId"], latest["_id"]);
    assert_eq!(answer["contactId"], latest["contactId"]);
    assert!(setup.contact(&latest["contactId"]).await["complaintDate"].is_string());
    assert_eq!(setup.today().await["complained"], 1);
}

#[tokio::test]
async fn a_postfix_bounce_marks_the_sent_message_bounced_and_the_contact_hard_bounced() {
    let setup = Delivery::new(|_| {}).await;
    subscribe(&setup, "contact.bounced").await;
    let message = delivered(&setup, "gone@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let report = fixture("dsn-postfix.eml", header, "gone@example.org");

    let answer = expect_json(
        post_feedback(&setup, &setup.token, report.clone()).await,
        200,
    )
    .await;
    assert_eq!(
        answer,
        json!({"type": "bounce", "messageId": message["_id"], "contactId": message["contactId"], "recorded": true})
    );
    let bounced = setup.message(&message["_id"]).await;
    assert_eq!(bounced["status"], "bounced");
    assert_eq!(
        bounced["lastReply"],
        "550 5.1.1 <gone@example.org>: Recipient address rejected: User unknown in virtual mailbox table"
    );
    let contact = setup.contact(&message["contactId"]).await;
    assert!(contact["hardBounced"].is_string(), "{contact}");
    let today = setup.today().await;
    assert_eq!(
        (today["sent"].clone(), today["bounced"].clone()),
        (json!(1), json!(1))
    );
    let queued = events(&setup, "contact.bounced").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["payload"]["smtpReply"], bounced["lastReply"]);

    let listed = setup.get("/suppressions?email=gone%40example.org").await;
    assert_eq!(listed["items"][0]["reason"], "hard_bounce", "{listed}");
    assert_eq!(listed["items"][0]["source"], "feedback_report");
    assert_eq!(listed["items"][0]["detail"], bounced["lastReply"]);

    let again = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(again["recorded"], false);
    assert_eq!(setup.today().await["bounced"], 1, "counted once");
    assert_eq!(events(&setup, "contact.bounced").await.len(), 1);

    let next = setup.queue("gone@example.org").await;
    setup.drain().await;
    assert_eq!(
        setup.message(&next["_id"]).await["skipReason"],
        "bounce_blocked"
    );
}

#[tokio::test]
async fn a_bounce_for_a_message_not_yet_sent_leaves_its_state_but_flags_the_contact() {
    let setup = Delivery::new(|_| {}).await;
    let queued = setup.queue("gone@example.org").await;
    let header = queued["messageId"].as_str().unwrap();
    let report = fixture("dsn-postfix.eml", header, "gone@example.org");
    let answer = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(answer["type"], "bounce");
    assert_eq!(answer["recorded"], true);
    assert_eq!(setup.message(&queued["_id"]).await["status"], "queued");
    assert!(setup.contact(&queued["contactId"]).await["hardBounced"].is_string());
    assert_eq!(setup.today().await["bounced"], 1);
    // The worker then suppresses it.
    setup.drain().await;
    assert_eq!(
        setup.message(&queued["_id"]).await["skipReason"],
        "bounce_blocked"
    );
    assert!(setup.smtp.messages().is_empty());
}

#[tokio::test]
async fn a_bounce_matching_only_a_contact_flags_it_without_a_message() {
    let setup = Delivery::new(|_| {}).await;
    let contact = setup
        .post("/contacts", &json!({"email": "listed@example.org"}))
        .await;
    let report = fixture(
        "dsn-postfix.eml",
        "<unknown@elsewhere.example>",
        "listed@example.org",
    );
    let answer = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(
        answer,
        json!({"type": "bounce", "contactId": contact["_id"], "recorded": true})
    );
    assert!(setup.contact(&contact["_id"]).await["hardBounced"].is_string());
}

#[tokio::test]
async fn a_delay_notice_records_nothing() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "slow@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let report = fixture("dsn-delayed.eml", header, "slow@example.org");
    let answer = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(
        answer,
        json!({
            "type": "ignored", "messageId": message["_id"], "contactId": message["contactId"],
            "recorded": false, "reason": "action delayed with status 4.4.1"
        })
    );
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");
    let contact = setup.contact(&message["contactId"]).await;
    assert!(
        contact.get("hardBounced").is_none_or(Value::is_null),
        "{contact}"
    );
    assert_eq!(setup.today().await["bounced"], 0);
}

#[tokio::test]
async fn bodies_that_are_not_reports_or_match_nothing_are_refused_with_400() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "grace@example.org").await;
    let garbage: [&[u8]; 4] = [
        b"",
        b"\x00\xff\xfe garbage",
        b"From: someone@example.org\r\nSubject: hello\r\n\r\nJust a letter.",
        br#"{"type": "complaint"}"#,
    ];
    for body in garbage {
        let problem = expect_problem(
            post_feedback(&setup, &setup.token, body.to_vec()).await,
            400,
        )
        .await;
        assert!(
            problem["detail"].as_str().unwrap().contains("not"),
            "{problem}"
        );
    }
    let stranger = fixture(
        "arf-yahoo.eml",
        "<nobody@elsewhere.example>",
        "stranger@example.org",
    );
    let problem = expect_problem(post_feedback(&setup, &setup.token, stranger).await, 400).await;
    assert_eq!(
        problem["detail"],
        "the report matches no message or contact of this account \
         (Message-ID <nobody@elsewhere.example>, recipient stranger@example.org)"
    );

    // The message is found by the id its Message-ID embeds, but only a header that
    // matches in full is about it: the same id at another domain is not.
    let header = message["messageId"].as_str().unwrap();
    let elsewhere = header.replace('@', "@elsewhere.");
    assert_ne!(elsewhere, header);
    let stranger = fixture("arf-yahoo.eml", &elsewhere, "stranger@example.org");
    let problem = expect_problem(post_feedback(&setup, &setup.token, stranger).await, 400).await;
    assert_eq!(
        problem["detail"],
        format!(
            "the report matches no message or contact of this account \
             (Message-ID {elsewhere}, recipient stranger@example.org)"
        )
    );

    // The wrong content type, as JSON bodies are refused when not JSON.
    let report = fixture("arf-yahoo.eml", "<x@y.example>", "grace@example.org");
    for content_type in ["application/json", "text/plain"] {
        let response = setup
            .app
            .request(Method::POST, &setup.path("/feedback"), Some(&setup.token))
            .header("content-type", content_type)
            .body(report.clone())
            .send()
            .await
            .expect("sent");
        let problem = expect_problem(response, 400).await;
        assert!(problem["detail"]
            .as_str()
            .unwrap()
            .contains("message/rfc822"));
    }
    let untyped = setup
        .app
        .request(Method::POST, &setup.path("/feedback"), Some(&setup.token))
        .body(report)
        .send()
        .await
        .expect("sent");
    expect_problem(untyped, 400).await;

    let huge = format!(
        "{}\r\n{}",
        fixture("arf-yahoo.eml", "<x@y.example>", "grace@example.org"),
        "x".repeat(1024 * 1024)
    );
    expect_problem(post_feedback(&setup, &setup.token, huge).await, 413).await;
    assert_eq!(setup.today().await["complained"], 0, "nothing recorded");
}

#[tokio::test]
async fn another_users_token_gets_401_and_records_nothing() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "grace@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let report = fixture("arf-yahoo.eml", header, "grace@example.org");
    let eve = setup.app.user_token("eve@example.com").await;
    expect_problem(post_feedback(&setup, &eve, report.clone()).await, 401).await;
    // Eve's own account does not hold Ada's message either.
    let eves = setup.app.create_account(&eve, "Eve's").await;
    let response = setup
        .app
        .request(
            Method::POST,
            &format!("/v2/accounts/{eves}/feedback"),
            Some(&eve),
        )
        .header("content-type", "message/rfc822")
        .body(report.clone())
        .send()
        .await
        .expect("sent");
    expect_problem(response, 400).await;
    let anonymous = setup
        .app
        .request(Method::POST, &setup.path("/feedback"), None)
        .header("content-type", "message/rfc822")
        .body(report)
        .send()
        .await
        .expect("sent");
    expect_problem(anonymous, 401).await;
    let contact = setup.contact(&message["contactId"]).await;
    assert!(
        contact.get("complaintDate").is_none_or(Value::is_null),
        "{contact}"
    );
    assert_eq!(setup.today().await["complained"], 0);
}

#[tokio::test]
async fn two_identical_complaints_at_once_are_recorded_once() {
    let setup = Delivery::new(|_| {}).await;
    subscribe(&setup, "contact.complained").await;
    let message = delivered(&setup, "grace@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let report = fixture("arf-yahoo.eml", header, "grace@example.org");
    let (first, second) = tokio::join!(
        post_feedback(&setup, &setup.token, report.clone()),
        post_feedback(&setup, &setup.token, report)
    );
    let first = expect_json(first, 200).await;
    let second = expect_json(second, 200).await;
    let recorded = [&first, &second]
        .iter()
        .filter(|answer| answer["recorded"] == true)
        .count();
    assert_eq!(recorded, 1, "{first} {second}");
    assert_eq!(setup.today().await["complained"], 1);
    assert_eq!(events(&setup, "contact.complained").await.len(), 1);
}

/// Messages outlive their contact: a complaint about a message whose contact was deleted
/// and then added again under the same address flags the contact that holds the address
/// now, so the complaint still stops mail to it.
#[tokio::test]
async fn a_complaint_about_a_deleted_contacts_message_flags_whoever_holds_the_address_now() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "grace@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let old = message["contactId"].as_str().unwrap();
    let deleted = setup
        .app
        .request(
            Method::DELETE,
            &setup.path(&format!("/contacts/{old}")),
            Some(&setup.token),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(deleted.status(), 200);
    let again = setup
        .post("/contacts", &json!({"email": "grace@example.org"}))
        .await;
    assert_ne!(again["_id"], message["contactId"]);

    let report = fixture("arf-yahoo.eml", header, "forwarded@yahoo.example");
    let answer = expect_json(post_feedback(&setup, &setup.token, report).await, 200).await;
    assert_eq!(answer["recorded"], true, "{answer}");
    assert_eq!(answer["contactId"], again["_id"]);
    let contact = setup.contact(&again["_id"]).await;
    assert!(contact["complaintDate"].is_string(), "{contact}");
}

/// A DSN of `header` whose one recipient block names no recipient.
fn dsn_without_recipient(header: &str) -> String {
    format!(
        "From: MAILER-DAEMON@mx.example.net\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n\
         --b\r\nContent-Type: message/delivery-status\r\n\r\n\
         Reporting-MTA: dns; mx.example.net\r\n\r\n\
         Action: failed\r\nStatus: 5.1.1\r\n\r\n\
         --b\r\nContent-Type: text/rfc822-headers\r\n\r\n\
         Message-ID: {header}\r\nTo: grace@example.org\r\n\r\n--b--\r\n"
    )
}

#[tokio::test]
async fn late_reports_about_a_cc_or_bcc_recipient_are_noted_on_the_message_and_leave_its_contact() {
    let setup = Delivery::new(|_| {}).await;
    subscribe(&setup, "contact.bounced").await;
    let template = json!({
        "name": "Copied", "slug": "copied", "subject": "Order", "content": "<p>Order</p>",
        "cc": "boss@example.net", "bcc": "archive@example.net"
    });
    setup.post("/templates", &template).await;
    let queued = setup
        .post(
            "/messages",
            &json!({"slug": "copied", "email": "grace@example.org"}),
        )
        .await;
    setup.drain().await;
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "sent", "{message}");
    let header = message["messageId"].as_str().unwrap();

    // A dead Bcc: the message stays sent, the contact is not hard-bounced.
    let bounce = fixture("dsn-postfix.eml", header, "archive@example.net");
    let answer = expect_json(
        post_feedback(&setup, &setup.token, bounce.clone()).await,
        200,
    )
    .await;
    assert_eq!(answer["type"], "bounce");
    assert_eq!(answer["recorded"], true);
    assert!(
        answer["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("archive@example.net")),
        "{answer}"
    );
    // A Cc'd person's complaint: the contact is not marked as complaining.
    let complaint = fixture("arf-yahoo.eml", header, "boss@example.net");
    let answer = expect_json(post_feedback(&setup, &setup.token, complaint).await, 200).await;
    assert_eq!(
        (answer["type"].clone(), answer["recorded"].clone()),
        (json!("complaint"), json!(true))
    );
    // A bounce that names no recipient, of a message with copies: nobody is blamed.
    let unnamed = dsn_without_recipient(header);
    let answer = expect_json(post_feedback(&setup, &setup.token, unnamed).await, 200).await;
    assert_eq!(
        (answer["type"].clone(), answer["recorded"].clone()),
        (json!("bounce"), json!(true))
    );

    let noted = setup.message(&message["_id"]).await;
    assert_eq!(noted["status"], "sent", "{noted}");
    let reply = noted["lastReply"].as_str().expect("a last reply");
    for copy in [
        "late report: copy recipient archive@example.net bounced (550 5.1.1",
        "late report: copy recipient boss@example.net complained",
        "late report: copy recipient a recipient the report does not name bounced (5.1.1)",
    ] {
        assert!(reply.contains(copy), "{copy:?} not in {reply:?}");
    }
    let contact = setup.contact(&message["contactId"]).await;
    assert!(contact["hardBounced"].is_null(), "{contact}");
    assert!(contact["complaintDate"].is_null(), "{contact}");
    let today = setup.today().await;
    assert_eq!(
        (today["bounced"].clone(), today["complained"].clone()),
        (json!(0), json!(0))
    );
    assert!(events(&setup, "contact.bounced").await.is_empty());

    // The same report again notes nothing twice.
    let again = expect_json(post_feedback(&setup, &setup.token, bounce).await, 200).await;
    assert_eq!(again["recorded"], false);
    assert_eq!(
        setup.message(&message["_id"]).await["lastReply"],
        noted["lastReply"]
    );

    // A report naming the contact's own address still bounces it.
    let own = fixture("dsn-postfix.eml", header, "Grace@Example.org");
    let answer = expect_json(post_feedback(&setup, &setup.token, own).await, 200).await;
    assert_eq!(
        (answer["type"].clone(), answer["recorded"].clone()),
        (json!("bounce"), json!(true))
    );
    assert_eq!(setup.message(&message["_id"]).await["status"], "bounced");
    assert!(setup.contact(&message["contactId"]).await["hardBounced"].is_string());
}

#[tokio::test]
async fn a_bounce_naming_no_recipient_of_a_message_without_copies_bounces_its_contact() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "grace@example.org").await;
    let header = message["messageId"].as_str().unwrap();
    let answer = expect_json(
        post_feedback(&setup, &setup.token, dsn_without_recipient(header)).await,
        200,
    )
    .await;
    assert_eq!(
        answer,
        json!({"type": "bounce", "messageId": message["_id"], "contactId": message["contactId"], "recorded": true})
    );
    assert_eq!(setup.message(&message["_id"]).await["status"], "bounced");
    assert!(setup.contact(&message["contactId"]).await["hardBounced"].is_string());
}
