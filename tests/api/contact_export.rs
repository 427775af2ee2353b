//! A person's data export: the contact, its attributes, its address's suppression
//! entries, and every event and message over more than one page, as one JSON document.

use mailroom_tests::{expect_json, expect_problem};
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

#[tokio::test]
async fn an_export_holds_the_whole_history_of_one_contact_and_no_one_elses() {
    let setup = Setup::new().await;
    let id = setup
        .contact("Kim@Example.org", json!({"plan": "pro"}))
        .await;
    setup.contact("lee@example.org", json!({})).await;
    // One page and a bit of events and of messages, so the export walks pages.
    for n in 0..103 {
        setup
            .ok(
                Method::POST,
                "/events",
                &json!({"email": "kim@example.org", "slug": format!("step_{n}")}),
            )
            .await;
    }
    setup.event("lee@example.org", "not_kims").await;
    for n in 0..101 {
        setup
            .ok(
                Method::POST,
                "/messages",
                &json!({"slug": "news", "email": "kim@example.org", "data": {"n": n}}),
            )
            .await;
    }
    setup
        .ok(
            Method::POST,
            "/messages",
            &json!({"slug": "news", "email": "lee@example.org"}),
        )
        .await;
    setup
        .ok(
            Method::POST,
            "/suppressions",
            &json!({"email": "KIM@example.org", "detail": "asked by phone"}),
        )
        .await;

    let response = setup
        .app
        .get(&setup.path(&format!("/contacts/{id}/export")), &setup.token)
        .await;
    assert_eq!(
        response
            .headers()
            .get("content-disposition")
            .and_then(|value| value.to_str().ok()),
        Some(format!("attachment; filename=\"contact-{id}.json\"").as_str())
    );
    let export: Value = expect_json(response, 200).await;
    assert!(export["exportDate"].is_string(), "{}", export["exportDate"]);
    assert_eq!(export["contact"]["_id"], id.as_str());
    assert_eq!(export["contact"]["attributes"]["plan"], "pro");
    let suppressions = export["suppressions"].as_array().expect("suppressions");
    assert_eq!(suppressions.len(), 1, "{suppressions:?}");
    assert_eq!(suppressions[0]["reason"], "manual");
    assert_eq!(suppressions[0]["detail"], "asked by phone");

    let events = export["events"].as_array().expect("events");
    assert_eq!(events.len(), 103);
    let mut slugs: Vec<&str> = events
        .iter()
        .map(|event| event["slug"].as_str().expect("slug"))
        .collect();
    slugs.sort_unstable();
    slugs.dedup();
    assert_eq!(slugs.len(), 103, "each event once");
    assert!(events.iter().all(|event| event["contactId"] == id.as_str()));

    let messages = export["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 101);
    let mut numbers: Vec<u64> = messages
        .iter()
        .map(|message| message["data"]["n"].as_u64().expect("n"))
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (0..101).collect::<Vec<u64>>(), "each message once");
    assert!(messages
        .iter()
        .all(|message| message["contactId"] == id.as_str()));

    // The other contact's export holds its own one event and one message.
    let lee = setup.contact("lee@example.org", json!({})).await;
    let lees = setup.get(&format!("/contacts/{lee}/export")).await;
    assert_eq!(lees["suppressions"], json!([]));
    assert_eq!(lees["events"][0]["slug"], "not_kims");
    assert_eq!(lees["events"].as_array().map(Vec::len), Some(1));
    assert_eq!(lees["messages"].as_array().map(Vec::len), Some(1));

    // Unknown, malformed, and another tenant's.
    expect_problem(
        setup
            .app
            .get(
                &setup.path("/contacts/0190a0b4-0000-7000-8000-000000000000/export"),
                &setup.token,
            )
            .await,
        404,
    )
    .await;
    expect_problem(
        setup
            .app
            .get(&setup.path("/contacts/nope/export"), &setup.token)
            .await,
        404,
    )
    .await;
    let other_token = setup.app.user_token("eve@example.com").await;
    let other = setup.app.create_account(&other_token, "Other").await;
    expect_problem(
        setup
            .app
            .get(
                &format!("/v2/accounts/{other}/contacts/{id}/export"),
                &other_token,
            )
            .await,
        404,
    )
    .await;
}
