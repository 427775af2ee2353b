//! Automations: validation, CRUD, and triggering (once, everytime, x_days_after with a
//! moved clock) through real events, the real delivery worker and a loopback SMTP server.

use mailroom_tests::expect_problem;
use reqwest::Method;
use serde_json::{json, Value};
use time::Duration;

use crate::campaign_setup::Setup;

fn body(template: &str) -> Value {
    json!({
        "name": "Welcome", "templateId": template, "triggerEventSlug": "Signed Up",
        "triggerEventCondition": "once", "timingCondition": "immediately", "isEnabled": true
    })
}

fn with(mut body: Value, changes: Value) -> Value {
    for (key, value) in changes.as_object().expect("object") {
        if value.is_null() {
            body.as_object_mut().expect("object").remove(key);
        } else {
            body[key] = value.clone();
        }
    }
    body
}

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|error| error["field"].as_str().expect("field").to_owned())
        .collect()
}

async fn create(setup: &Setup, body: &Value) -> Value {
    setup.ok(Method::POST, "/automations", body).await
}

async fn messages_of(setup: &Setup, automation: &Value) -> Vec<Value> {
    setup
        .messages()
        .await
        .into_iter()
        .filter(|message| message["automationId"] == automation["_id"])
        .collect()
}

#[tokio::test]
async fn each_validation_rule_answers_400_naming_the_field() {
    let setup = Setup::new().await;
    let valid = body(&setup.template);
    let cases = [
        (with(valid.clone(), json!({"name": null})), "name"),
        (
            with(valid.clone(), json!({"templateId": null})),
            "templateId",
        ),
        (
            with(valid.clone(), json!({"triggerEventSlug": null})),
            "triggerEventSlug",
        ),
        (
            with(valid.clone(), json!({"triggerEventCondition": null})),
            "triggerEventCondition",
        ),
        (
            with(valid.clone(), json!({"timingCondition": null})),
            "timingCondition",
        ),
        (with(valid.clone(), json!({"isEnabled": null})), "isEnabled"),
        // x_days_after needs a positive whole timingValue …
        (
            with(valid.clone(), json!({"timingCondition": "x_days_after"})),
            "timingValue",
        ),
        (
            with(
                valid.clone(),
                json!({"timingCondition": "x_days_after", "timingValue": 0}),
            ),
            "timingValue",
        ),
        (
            with(
                valid.clone(),
                json!({"timingCondition": "x_days_after", "timingValue": 2.5}),
            ),
            "timingValue",
        ),
        // … and accepts only once.
        (
            with(
                valid.clone(),
                json!({"timingCondition": "x_days_after", "timingValue": 2, "triggerEventCondition": "everytime"}),
            ),
            "triggerEventCondition",
        ),
        // immediately refuses a timingValue.
        (
            with(valid.clone(), json!({"timingValue": 3})),
            "timingValue",
        ),
        (
            with(valid.clone(), json!({"triggerEventCondition": "twice"})),
            "triggerEventCondition",
        ),
        (
            with(valid.clone(), json!({"timingCondition": "tomorrow"})),
            "timingCondition",
        ),
        // A well-formed id of no template of this account.
        (
            with(
                valid.clone(),
                json!({"templateId": "01936c5e-7b2a-7cde-8f00-0123456789ab"}),
            ),
            "templateId",
        ),
        (
            with(valid.clone(), json!({"triggerEventSlug": "!!!"})),
            "triggerEventSlug",
        ),
    ];
    for (body, field) in cases {
        let problem =
            expect_problem(setup.call(Method::POST, "/automations", &body).await, 400).await;
        assert_eq!(fields(&problem), [field], "{body}");
    }
    // An unknown field and a wrong type are refused too.
    expect_problem(
        setup
            .call(
                Method::POST,
                "/automations",
                &with(valid.clone(), json!({"extra": 1})),
            )
            .await,
        400,
    )
    .await;
    expect_problem(
        setup
            .call(
                Method::POST,
                "/automations",
                &with(valid, json!({"isEnabled": "yes"})),
            )
            .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn automations_are_created_listed_with_their_template_updated_whole_and_deleted() {
    let setup = Setup::new().await;
    let created = create(
        &setup,
        &with(
            body(&setup.template),
            json!({"timingCondition": "x_days_after", "timingValue": 3}),
        ),
    )
    .await;
    assert_eq!(created["triggerEventSlug"], "signed_up", "normalised");
    assert_eq!(created["timingValue"], 3);
    assert_eq!(created["isEnabled"], true);
    let id = created["_id"].as_str().unwrap().to_owned();

    assert_eq!(setup.get(&format!("/automations/{id}")).await, created);
    // The starter automation plus ours.
    assert_eq!(setup.get("/automations/count").await["count"], 2);
    let list = setup.get("/automations").await;
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["_id"] == created["_id"])
        .cloned()
        .expect("listed");
    assert_eq!(item["template"]["_id"], setup.template.as_str());
    assert_eq!(item["template"]["slug"], "news");
    assert_eq!(item["template"]["name"], "News");
    assert_eq!(item["template"]["subject"], "News for {{ email }}");

    // PATCH takes the complete body: a missing required field is 400, not a sparse patch.
    let problem = expect_problem(
        setup
            .call(
                Method::PATCH,
                &format!("/automations/{id}"),
                &json!({"isEnabled": false}),
            )
            .await,
        400,
    )
    .await;
    assert!(fields(&problem).contains(&"name".to_owned()), "{problem}");
    let updated = setup
        .ok(
            Method::PATCH,
            &format!("/automations/{id}"),
            &with(
                body(&setup.template),
                json!({"name": "Renamed", "triggerEventCondition": "everytime", "isEnabled": false}),
            ),
        )
        .await;
    assert_eq!(updated["name"], "Renamed");
    assert_eq!(updated["timingCondition"], "immediately");
    assert!(updated.get("timingValue").is_none(), "{updated}");
    assert_eq!(updated["createDate"], created["createDate"]);

    // The template cannot be deleted while the automation sends it.
    expect_problem(
        setup
            .call(
                Method::DELETE,
                &format!("/templates/{}", setup.template),
                &json!({}),
            )
            .await,
        400,
    )
    .await;
    let deleted = setup
        .ok(Method::DELETE, &format!("/automations/{id}"), &json!({}))
        .await;
    assert_eq!(deleted["name"], "Renamed");
    expect_problem(
        setup
            .app
            .get(&setup.path(&format!("/automations/{id}")), &setup.token)
            .await,
        404,
    )
    .await;
    expect_problem(
        setup
            .call(
                Method::PATCH,
                &format!("/automations/{id}"),
                &body(&setup.template),
            )
            .await,
        404,
    )
    .await;
}

#[tokio::test]
async fn once_fires_for_the_first_event_only_and_everytime_for_each() {
    let setup = Setup::new().await;
    let once = create(&setup, &body(&setup.template)).await;
    let every = create(
        &setup,
        &with(
            body(&setup.template),
            json!({"name": "Each", "triggerEventCondition": "everytime"}),
        ),
    )
    .await;
    let disabled = create(
        &setup,
        &with(
            body(&setup.template),
            json!({"name": "Off", "isEnabled": false}),
        ),
    )
    .await;
    let other = create(
        &setup,
        &with(
            body(&setup.template),
            json!({"name": "Other", "triggerEventSlug": "purchased"}),
        ),
    )
    .await;

    for _ in 0..3 {
        setup.event("grace@example.org", "signed-up").await;
    }
    setup.event("alan@example.org", "SignedUp").await;

    assert_eq!(messages_of(&setup, &once).await.len(), 2, "one per contact");
    assert_eq!(messages_of(&setup, &every).await.len(), 4, "one per event");
    assert!(messages_of(&setup, &disabled).await.is_empty());
    assert!(messages_of(&setup, &other).await.is_empty());

    setup.drain_messages().await;
    let sent = setup.smtp.messages();
    assert_eq!(sent.len(), 6, "every triggered message is delivered once");
    assert!(sent
        .iter()
        .all(|mail| mail.data.contains("Subject: News for ")));
    for message in setup.messages().await {
        assert_eq!(message["kind"], "automation");
        assert_eq!(message["status"], "sent");
    }
    // `once` holds even after the automation is disabled and enabled again.
    let id = once["_id"].as_str().unwrap();
    setup
        .ok(
            Method::PATCH,
            &format!("/automations/{id}"),
            &with(body(&setup.template), json!({"isEnabled": false})),
        )
        .await;
    setup
        .ok(
            Method::PATCH,
            &format!("/automations/{id}"),
            &body(&setup.template),
        )
        .await;
    setup.event("grace@example.org", "signed_up").await;
    assert_eq!(messages_of(&setup, &once).await.len(), 2);
}

#[tokio::test]
async fn concurrent_events_fire_a_once_automation_exactly_once() {
    let setup = Setup::new().await;
    let once = create(&setup, &body(&setup.template)).await;
    // The contact exists first, so every request races on the firing, not on the insert.
    setup.contact("grace@example.org", json!({})).await;
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let request = setup
            .app
            .request(Method::POST, &setup.path("/events"), Some(&setup.token))
            .json(&json!({"email": "grace@example.org", "slug": "signed_up"}));
        requests.spawn(async move { request.send().await.expect("sent").status() });
    }
    while let Some(status) = requests.join_next().await {
        assert_eq!(status.expect("task"), 200);
    }
    assert_eq!(messages_of(&setup, &once).await.len(), 1);
    let events = setup.get("/events/names").await;
    assert_eq!(events["items"][0]["count"], 16, "{events}");
}

async fn delayed(setup: &Setup) -> Value {
    create(
        setup,
        &with(
            body(&setup.template),
            json!({"timingCondition": "x_days_after", "timingValue": 2}),
        ),
    )
    .await
}

#[tokio::test]
async fn x_days_after_sends_when_due_and_not_before() {
    let setup = Setup::new().await;
    let automation = delayed(&setup).await;
    setup.event("grace@example.org", "signed_up").await;
    let queued = messages_of(&setup, &automation).await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["status"], "queued");

    assert_eq!(setup.drain_messages().await, 0, "not due yet");
    setup
        .app
        .clock
        .advance(Duration::days(2) - Duration::minutes(1));
    assert_eq!(setup.drain_messages().await, 0, "still a minute early");
    setup.app.clock.advance(Duration::minutes(1));
    assert_eq!(setup.drain_messages().await, 1);
    assert_eq!(setup.smtp.messages().len(), 1);
    assert_eq!(messages_of(&setup, &automation).await[0]["status"], "sent");
}

#[tokio::test]
async fn x_days_after_is_skipped_when_the_automation_was_disabled_or_deleted_meanwhile() {
    let setup = Setup::new().await;
    let disabled = delayed(&setup).await;
    let deleted = delayed(&setup).await;
    setup.event("grace@example.org", "signed_up").await;
    let id = disabled["_id"].as_str().unwrap();
    setup
        .ok(
            Method::PATCH,
            &format!("/automations/{id}"),
            &with(
                body(&setup.template),
                json!({"timingCondition": "x_days_after", "timingValue": 2, "isEnabled": false}),
            ),
        )
        .await;
    let id = deleted["_id"].as_str().unwrap();
    setup
        .ok(Method::DELETE, &format!("/automations/{id}"), &json!({}))
        .await;

    setup.app.clock.advance(Duration::days(3));
    assert_eq!(setup.drain_messages().await, 2);
    assert!(setup.smtp.messages().is_empty(), "nothing sent");
    for automation in [&disabled, &deleted] {
        let messages = messages_of(&setup, automation).await;
        assert_eq!(messages.len(), 1, "the log keeps it");
        assert_eq!(messages[0]["status"], "skipped");
        assert_eq!(messages[0]["skipReason"], "automation_disabled");
    }
}

#[tokio::test]
async fn x_days_after_is_skipped_when_the_contact_became_ineligible_meanwhile() {
    let setup = Setup::new().await;
    let automation = delayed(&setup).await;
    setup.event("grace@example.org", "signed_up").await;
    setup.event("alan@example.org", "signed_up").await;
    setup.event("kay@example.org", "signed_up").await;
    setup.sql(
        "UPDATE contacts SET unsubscribed_at = now() WHERE email = 'grace@example.org';
         UPDATE contacts SET complaint_at = now() WHERE email = 'alan@example.org'",
    );

    setup.app.clock.advance(Duration::days(2));
    assert_eq!(setup.drain_messages().await, 3);
    let by_email = |email: &str, messages: &[Value]| {
        messages
            .iter()
            .find(|message| message["email"] == email)
            .cloned()
            .expect("message")
    };
    let messages = messages_of(&setup, &automation).await;
    assert_eq!(
        by_email("grace@example.org", &messages)["skipReason"],
        "unsubscribed"
    );
    assert_eq!(
        by_email("alan@example.org", &messages)["skipReason"],
        "complaint_blocked"
    );
    assert_eq!(by_email("kay@example.org", &messages)["status"], "sent");
    let sent = setup.smtp.messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].recipients, ["kay@example.org".to_owned()]);
    assert_eq!(setup.today().await["complaintBlocked"], 1);
}
