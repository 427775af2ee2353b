//! Engagement conditions end to end: mail goes through the real worker to SMTP servers on
//! loopback, its pixel and links are followed over HTTP, and searches and counts on
//! `engagement.*` then select the contacts whose mail was sent, opened, clicked or bounced.

use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, expect_problem};
use reqwest::Method;
use serde_json::{json, Value};

use crate::tracking::{links, LinkSetup};

async fn tracked_template(setup: &LinkSetup, slug: &str) -> String {
    let template = setup
        .post(
            "/templates",
            &json!({
                "name": slug, "slug": slug, "subject": "News",
                "openTracking": true, "clickTracking": true,
                "content": "<html><body><p>Hello</p>\
                    <a href=\"https://shop.example/sale\">Sale</a></body></html>"
            }),
        )
        .await;
    template["_id"].as_str().expect("id").to_owned()
}

/// The emails of the contacts matching one condition, in id order, and their count.
async fn matching(setup: &LinkSetup, slug: &str, operator: &str, value: Value) -> Vec<String> {
    let body = json!({
        "includeUnsubscribed": true,
        "attributes": [{"slug": slug, "operator": operator, "value": value}],
    });
    let found = setup.post("/contacts/search", &body).await;
    let mut emails: Vec<String> = found["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|contact| contact["email"].as_str().expect("email").to_owned())
        .collect();
    emails.sort();
    let count = setup.post("/contacts/search/count", &body).await;
    assert_eq!(count["count"], emails.len(), "{slug} {operator} {value}");
    emails
}

#[tokio::test]
async fn searches_and_counts_follow_what_happened_to_each_contacts_mail() {
    let setup = LinkSetup::new().await;
    let news = tracked_template(&setup, "news").await;
    let other = tracked_template(&setup, "other").await;
    for email in ["grace@example.org", "alan@example.org"] {
        setup.send("news", email, json!({})).await;
    }
    setup.send("other", "edsger@example.org", json!({})).await;
    // A contact with no mail at all.
    setup
        .post("/contacts", &json!({"email": "barbara@example.org"}))
        .await;
    // A test send to Barbara's address: not one of her messages.
    setup
        .post(
            &format!("/templates/{news}/test-send"),
            &json!({"email": "barbara@example.org", "data": {}}),
        )
        .await;
    setup.drain().await;

    let everyone_mailed = [
        "alan@example.org",
        "edsger@example.org",
        "grace@example.org",
    ];
    assert_eq!(
        matching(&setup, "engagement.sent", "within_days", json!(1)).await,
        everyone_mailed
    );
    assert_eq!(
        matching(&setup, "engagement.sent", "not_within_days", json!(1)).await,
        ["barbara@example.org"]
    );

    // Grace opens and clicks; Barbara opens her test send.
    let grace = setup.received_by("grace@example.org");
    setup.follow(&links(&grace, "/t/o/")[0]).await;
    setup.follow(&links(&grace, "/t/c/")[0]).await;
    let test_mail = setup.received_by("barbara@example.org");
    setup.follow(&links(&test_mail, "/t/o/")[0]).await;
    // Edsger clicks without loading images.
    let edsger = setup.received_by("edsger@example.org");
    setup.follow(&links(&edsger, "/t/c/")[0]).await;

    assert_eq!(
        matching(&setup, "engagement.opened", "within_days", json!(30)).await,
        ["grace@example.org"]
    );
    assert_eq!(
        matching(&setup, "engagement.clicked", "within_days", json!(30)).await,
        ["edsger@example.org", "grace@example.org"]
    );
    assert_eq!(
        matching(&setup, "engagement.opened", "not_within_days", json!(90)).await,
        [
            "alan@example.org",
            "barbara@example.org",
            "edsger@example.org"
        ]
    );
    // One template's messages only.
    assert_eq!(
        matching(
            &setup,
            "engagement.clicked",
            "within_days",
            json!({"days": 7, "templateId": other}),
        )
        .await,
        ["edsger@example.org"]
    );
    assert!(
        matching(&setup, "engagement.bounced", "within_days", json!(30))
            .await
            .is_empty()
    );

    // A saved segment keeps the condition and counts it at each call.
    let segment = setup
        .post(
            "/segments",
            &json!({
                "name": "Clicked lately", "includeUnsubscribed": true,
                "attributes": [{"slug": "engagement.clicked", "operator": "within_days", "value": 30}],
            }),
        )
        .await;
    let id = segment["_id"].as_str().expect("id");
    assert_eq!(segment["attributes"][0]["value"], 30, "{segment}");
    assert_eq!(
        setup.get_json(&format!("/segments/{id}/count")).await["count"],
        2
    );

    // Bad engagement conditions are 400s naming the field.
    let path = setup.path("/contacts/search/count");
    for (condition, field) in [
        (
            json!({"slug": "engagement.opened", "operator": "after", "value": 3}),
            "attributes[0].operator",
        ),
        (
            json!({"slug": "engagement.opened", "operator": "within_days", "value": 0}),
            "attributes[0].value",
        ),
        (
            json!({"slug": "engagement.viewed", "operator": "within_days", "value": 3}),
            "attributes[0].slug",
        ),
        (
            json!({"slug": "engagement.sent", "operator": "within_days",
                   "value": {"days": 3, "templateId": "0190a000-0000-7000-8000-000000000001"}}),
            "attributes[0].value",
        ),
    ] {
        let body = json!({"includeUnsubscribed": true, "attributes": [condition]});
        let response = setup
            .app
            .send_json(Method::POST, &path, &setup.token, &body)
            .await;
        let problem = expect_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
}

#[tokio::test]
async fn a_bounce_at_delivery_marks_the_contact_bounced() {
    let setup = LinkSetup::new().await;
    tracked_template(&setup, "news").await;
    // A second mail server that refuses every recipient, as the default.
    let refusing = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        reply_to_rcpt: Some("550 5.1.1 no such user".to_owned()),
        ..TestSmtpOptions::default()
    });
    let servers = setup.get_json("/mail-servers").await;
    let first = servers["items"][0]["_id"].as_str().expect("id").to_owned();
    expect_json(
        setup
            .app
            .send_json(
                Method::DELETE,
                &setup.path(&format!("/mail-servers/{first}")),
                &setup.token,
                &json!({}),
            )
            .await,
        200,
    )
    .await;
    setup
        .post(
            "/mail-servers",
            &json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": refusing.port(),
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
            }),
        )
        .await;
    let sent = setup.send("news", "gone@example.org", json!({})).await;
    setup.drain().await;
    let message = setup
        .get_json(&format!("/messages/{}", sent["_id"].as_str().expect("id")))
        .await;
    assert_eq!(message["status"], "bounced", "{message}");
    assert_eq!(
        matching(&setup, "engagement.bounced", "within_days", json!(1)).await,
        ["gone@example.org"]
    );
    assert!(matching(&setup, "engagement.sent", "within_days", json!(1))
        .await
        .is_empty());
}
