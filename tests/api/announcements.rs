//! Announcements: validation, create-and-start, the audience (conditions, topic,
//! includeUnsubscribed, suppressed contacts), a restart in the middle of the expansion,
//! and completion only once every message is final.

use mailroom_tests::expect_problem;
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

fn body(template: &str) -> Value {
    json!({"name": "Launch", "templateId": template, "includeUnsubscribed": false})
}

async fn announce(setup: &Setup, body: &Value) -> Value {
    setup.ok(Method::POST, "/announcements", body).await
}

async fn announcement(setup: &Setup, created: &Value) -> Value {
    let id = created["_id"].as_str().expect("id");
    setup.get(&format!("/announcements/{id}")).await
}

/// Expands every announcement fully with batches of `batch_size`.
async fn expand(setup: &Setup, batch_size: u32) {
    loop {
        let round = setup.announcement_round(batch_size).await;
        if round.expanded.is_none() {
            return;
        }
    }
}

async fn recipients(setup: &Setup, created: &Value) -> Vec<(String, String, Option<String>)> {
    let mut messages: Vec<_> = setup
        .messages()
        .await
        .into_iter()
        .filter(|message| message["announcementId"] == created["_id"])
        .map(|message| {
            (
                message["email"].as_str().unwrap().to_owned(),
                message["status"].as_str().unwrap().to_owned(),
                message["skipReason"].as_str().map(str::to_owned),
            )
        })
        .collect();
    messages.sort();
    messages
}

#[tokio::test]
async fn bad_bodies_answer_400_and_there_is_no_update_path() {
    let setup = Setup::new().await;
    let unknown = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    let cases = [
        (
            json!({"templateId": setup.template, "includeUnsubscribed": false}),
            "name",
        ),
        (
            json!({"name": "x", "includeUnsubscribed": false}),
            "templateId",
        ),
        (
            json!({"name": "x", "templateId": setup.template}),
            "includeUnsubscribed",
        ),
        (
            json!({"name": "x", "templateId": unknown, "includeUnsubscribed": false}),
            "templateId",
        ),
        (
            json!({"name": "x", "templateId": setup.template, "includeUnsubscribed": false, "topicId": unknown}),
            "topicId",
        ),
        (
            json!({"name": "x", "templateId": setup.template, "includeUnsubscribed": false, "topicId": "nope"}),
            "topicId",
        ),
        (
            json!({"name": "x", "templateId": setup.template, "includeUnsubscribed": false,
                   "attributes": [{"slug": "no_such", "operator": "exists"}]}),
            "attributes[0].slug",
        ),
        (
            json!({"name": "x", "templateId": setup.template, "includeUnsubscribed": false,
                   "attributes": [{"slug": "email", "operator": "greater_than", "value": 3}]}),
            "attributes[0].operator",
        ),
    ];
    for (body, field) in cases {
        let problem =
            expect_problem(setup.call(Method::POST, "/announcements", &body).await, 400).await;
        let fields: Vec<_> = problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|error| error["field"].as_str().unwrap().to_owned())
            .collect();
        assert!(fields.contains(&field.to_owned()), "{body}: {problem}");
    }
    assert_eq!(setup.get("/announcements/count").await["count"], 0);

    let created = announce(&setup, &body(&setup.template)).await;
    let id = created["_id"].as_str().unwrap();
    for method in [Method::PATCH, Method::PUT] {
        let response = setup
            .call(
                method,
                &format!("/announcements/{id}"),
                &json!({"name": "y"}),
            )
            .await;
        assert_eq!(response.status(), 405);
    }
}

#[tokio::test]
async fn an_announcement_starts_running_with_the_template_subject_and_is_listed() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    setup.contact("a@example.org", json!({"plan": "pro"})).await;
    let created = announce(
        &setup,
        &json!({
            "name": "Launch", "templateId": setup.template, "topicId": topic["_id"],
            "includeUnsubscribed": false,
            "attributes": [{"slug": "plan", "operator": "exists"}]
        }),
    )
    .await;
    assert_eq!(created["status"], "running");
    assert_eq!(created["subject"], "News for {{ email }}");
    assert_eq!(created["topicId"], topic["_id"]);
    assert_eq!(created["includeUnsubscribed"], false);
    assert!(created["processDate"].is_null());
    assert_eq!(
        created["attributes"],
        json!([{"slug": "plan", "operator": "exists"}])
    );
    // The read is the created announcement plus its counters (nothing queued yet).
    let mut read = announcement(&setup, &created).await;
    let counters = read
        .as_object_mut()
        .and_then(|read| read.remove("counters"))
        .expect("counters on the read");
    assert_eq!(counters["queued"], 0);
    assert_eq!(read, created);
    let list = setup.get("/announcements").await;
    assert_eq!(list["items"], json!([created]));
    assert_eq!(setup.get("/announcements/count").await["count"], 1);
    expect_problem(
        setup
            .app
            .get(
                &setup.path("/announcements/01936c5e-7b2a-7cde-8f00-0123456789ab"),
                &setup.token,
            )
            .await,
        404,
    )
    .await;
}

#[tokio::test]
async fn the_audience_honours_conditions_topic_unsubscriptions_and_suppression() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    let pro = json!({"plan": "pro"});
    setup.contact("a-plain@example.org", pro.clone()).await;
    setup
        .contact("b-free@example.org", json!({"plan": "free"}))
        .await;
    setup.contact("c-unsub@example.org", pro.clone()).await;
    setup.contact("d-topic@example.org", pro.clone()).await;
    setup.contact("e-bounced@example.org", pro.clone()).await;
    setup.contact("f-complained@example.org", pro.clone()).await;
    setup.contact("g-noplan@example.org", json!({})).await;
    let topic_id = topic["_id"].as_str().unwrap();
    setup.sql(&format!(
        "UPDATE contacts SET unsubscribed_at = now() WHERE email = 'c-unsub@example.org';
         UPDATE contacts SET hard_bounced_at = now() WHERE email = 'e-bounced@example.org';
         UPDATE contacts SET complaint_at = now() WHERE email = 'f-complained@example.org';
         INSERT INTO topic_unsubscriptions (account_id, contact_id, topic_id, created_at)
           SELECT account_id, id, '{topic_id}', now() FROM contacts
           WHERE email = 'd-topic@example.org'"
    ));
    let conditions = json!([{"slug": "plan", "operator": "s_equal", "value": "PRO"}]);
    let ordinary = announce(
        &setup,
        &json!({"name": "Ordinary", "templateId": setup.template, "topicId": topic_id,
                "includeUnsubscribed": false, "attributes": conditions}),
    )
    .await;
    let everyone = announce(
        &setup,
        &json!({"name": "Must receive", "templateId": setup.template,
                "includeUnsubscribed": true, "attributes": conditions}),
    )
    .await;
    // A contact created after the announcements is not in their audience.
    setup.app.clock.advance(time::Duration::seconds(1));
    setup.contact("h-late@example.org", pro).await;

    expand(&setup, 2).await;
    setup.drain_messages().await;

    let sent = |email: &str| (email.to_owned(), "sent".to_owned(), None);
    let skipped = |email: &str, reason: &str| {
        (
            email.to_owned(),
            "skipped".to_owned(),
            Some(reason.to_owned()),
        )
    };
    assert_eq!(
        recipients(&setup, &ordinary).await,
        [
            sent("a-plain@example.org"),
            skipped("e-bounced@example.org", "bounce_blocked"),
            skipped("f-complained@example.org", "complaint_blocked"),
        ]
    );
    assert_eq!(
        recipients(&setup, &everyone).await,
        [
            sent("a-plain@example.org"),
            sent("c-unsub@example.org"),
            sent("d-topic@example.org"),
            skipped("e-bounced@example.org", "bounce_blocked"),
            skipped("f-complained@example.org", "complaint_blocked"),
        ]
    );
    assert_eq!(setup.smtp.messages().len(), 4);
    let today = setup.today().await;
    assert_eq!(today["sent"], 4);
    assert_eq!(today["bounceBlocked"], 2);
    assert_eq!(today["complaintBlocked"], 2);

    setup.announcement_round(2).await;
    for created in [&ordinary, &everyone] {
        let done = announcement(&setup, created).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert!(done["processDate"].is_string());
        assert!(done["lastSampledContactId"].is_string());
    }
    assert_eq!(announcement(&setup, &ordinary).await["audienceSize"], 3);
}

#[tokio::test]
async fn a_restart_in_the_middle_of_the_expansion_sends_exactly_one_message_per_contact() {
    let setup = Setup::new().await;
    for n in 0..25 {
        setup
            .contact(&format!("c{n:02}@example.org"), json!({}))
            .await;
    }
    let created = announce(&setup, &body(&setup.template)).await;

    // Two batches, then the worker "dies": a new one picks up from lastSampledContactId.
    for _ in 0..2 {
        let batch = setup.announcement_round(10).await.expanded.expect("batch");
        assert_eq!((batch.contacts, batch.queued), (10, 10));
    }
    let halfway = announcement(&setup, &created).await;
    assert_eq!(halfway["audienceSize"], 20);
    assert_eq!(halfway["status"], "running");
    // Worse than a clean stop: progress written before the crash is lost, so the next
    // worker repeats batches it already did. The unique key keeps one message each.
    setup.sql("UPDATE announcements SET last_sampled_contact_id = NULL");
    expand(&setup, 10).await;

    let messages = recipients(&setup, &created).await;
    assert_eq!(messages.len(), 25, "one message per contact");
    let mut emails: Vec<_> = messages.iter().map(|(email, _, _)| email.clone()).collect();
    emails.dedup();
    assert_eq!(emails.len(), 25, "no duplicates");
    assert_eq!(
        announcement(&setup, &created).await["audienceSize"],
        25,
        "repeated batches queued nothing new"
    );
    setup.drain_messages().await;
    assert_eq!(setup.smtp.messages().len(), 25);
}

#[tokio::test]
async fn completed_comes_only_after_every_message_is_final() {
    let setup = Setup::new().await;
    for n in 0..3 {
        setup.contact(&format!("c{n}@example.org"), json!({})).await;
    }
    let created = announce(&setup, &body(&setup.template)).await;
    expand(&setup, 100).await;
    setup.announcement_round(100).await;
    let expanded = announcement(&setup, &created).await;
    assert_eq!(expanded["status"], "running", "messages still queued");
    assert_eq!(expanded["audienceSize"], 3);

    // One recipient's server answers 450 first: that message is retried later.
    setup
        .smtp
        .script_rcpt_replies(["450 4.2.0 try again later"]);
    setup.drain_messages().await;
    setup.announcement_round(100).await;
    assert_eq!(
        announcement(&setup, &created).await["status"],
        "running",
        "a message is waiting for its retry"
    );
    setup.app.clock.advance(time::Duration::hours(7));
    setup.drain_messages().await;
    let round = setup.announcement_round(100).await;
    assert_eq!(round.completed, 1);
    let done = announcement(&setup, &created).await;
    assert_eq!(done["status"], "completed");
    assert!(done["processDate"].is_string());
    assert_eq!(setup.smtp.messages().len(), 3);
}

#[tokio::test]
async fn an_empty_audience_completes_at_once() {
    let setup = Setup::new().await;
    let created = announce(&setup, &body(&setup.template)).await;
    let round = setup.announcement_round(100).await;
    let batch = round.expanded.expect("a batch");
    assert!(batch.finished);
    assert_eq!(batch.contacts, 0);
    assert_eq!(round.completed, 1);
    assert_eq!(announcement(&setup, &created).await["status"], "completed");
}

/// The application clock's time `by` from now, as the API writes times.
fn clock_in(setup: &Setup, by: time::Duration) -> String {
    use mailroom_app::ports::Clock;
    setup
        .app
        .clock
        .now()
        .plus(by)
        .as_datetime()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("an RFC 3339 time")
}

async fn control(setup: &Setup, created: &Value, action: &str) -> reqwest::Response {
    let id = created["_id"].as_str().expect("id");
    setup
        .call(
            Method::POST,
            &format!("/announcements/{id}/{action}"),
            &json!({}),
        )
        .await
}

async fn controlled(setup: &Setup, created: &Value, action: &str) -> Value {
    let response = control(setup, created, action).await;
    assert_eq!(response.status(), 200, "{action}");
    response.json().await.expect("the announcement")
}

#[tokio::test]
async fn a_scheduled_announcement_sends_nothing_before_its_send_at_and_reaches_who_joined_until_then(
) {
    let setup = Setup::new().await;
    setup.contact("early@example.org", json!({})).await;
    for (send_at, field) in [
        (clock_in(&setup, time::Duration::hours(-2)), "sendAt"),
        (clock_in(&setup, time::Duration::days(400)), "sendAt"),
        ("next tuesday".to_owned(), "sendAt"),
    ] {
        let mut refused = body(&setup.template);
        refused["sendAt"] = json!(send_at);
        let response = setup.call(Method::POST, "/announcements", &refused).await;
        let problem = expect_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["field"], field, "{send_at}: {problem}");
    }

    let send_at = clock_in(&setup, time::Duration::hours(2));
    let mut scheduled = body(&setup.template);
    scheduled["sendAt"] = json!(send_at);
    let created = announce(&setup, &scheduled).await;
    assert_eq!(created["status"], "scheduled");
    assert!(created["sendAt"].is_string(), "{created}");
    setup.contact("meanwhile@example.org", json!({})).await;

    let round = setup.announcement_round(100).await;
    assert!(round.expanded.is_none(), "nothing is due before sendAt");
    assert_eq!(setup.drain_messages().await, 0);
    assert_eq!(announcement(&setup, &created).await["status"], "scheduled");

    setup.app.clock.advance(time::Duration::hours(2));
    expand(&setup, 100).await;
    let started = announcement(&setup, &created).await;
    assert_eq!(started["status"], "running");
    assert_eq!(
        started["audienceSize"], 2,
        "contacts made until sendAt are in"
    );
    setup.drain_messages().await;
    setup.announcement_round(100).await;
    assert_eq!(announcement(&setup, &created).await["status"], "completed");
    assert_eq!(setup.smtp.messages().len(), 2);
}

#[tokio::test]
async fn pause_holds_every_waiting_message_and_resume_sends_each_contact_exactly_once() {
    let setup = Setup::new().await;
    for n in 0..25 {
        setup
            .contact(&format!("c{n:02}@example.org"), json!({}))
            .await;
    }
    let created = announce(&setup, &body(&setup.template)).await;
    // The expansion is part way: 10 of 25 queued.
    setup
        .announcement_round(10)
        .await
        .expanded
        .expect("a batch");

    let paused = controlled(&setup, &created, "pause").await;
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["counters"]["queued"], 10, "{paused}");
    assert!(paused["processDate"].is_null());
    assert_eq!(
        setup.drain_messages().await,
        0,
        "no claim takes a held message"
    );
    let round = setup.announcement_round(10).await;
    assert!(round.expanded.is_none(), "the expansion stops while paused");
    let queued = recipients(&setup, &created).await;
    assert_eq!(queued.len(), 10);
    assert!(
        queued.iter().all(|(_, status, _)| status == "queued"),
        "{queued:?}"
    );
    let filtered = setup.get("/messages?status=queued&limit=100").await;
    assert_eq!(filtered["items"].as_array().expect("items").len(), 10);

    // A message a worker held across the pause (its lease ran out) waits when claimed.
    // (Each statement names the account: on Citus the tests refuse any that is not one
    // shard's.)
    let held = setup.messages().await[0]["_id"]
        .as_str()
        .expect("a message")
        .to_owned();
    let account = &setup.account;
    setup.sql(&format!(
        "UPDATE messages SET status = 'queued', lease_token = '01936c5e-7b2a-7cde-8f00-00000000cafe', \
         locked_until = '2000-01-01' WHERE account_id = '{account}' AND id = '{held}'; \
         UPDATE delivery_lanes SET next_due_at = '2000-01-01' WHERE account_id = '{account}'"
    ));
    assert_eq!(setup.drain_messages().await, 1);
    assert!(
        setup.smtp.messages().is_empty(),
        "nothing is sent while paused"
    );

    for (action, from) in [("pause", "paused"), ("resume", "running")] {
        if action == "resume" {
            controlled(&setup, &created, "resume").await;
        }
        let problem = expect_problem(control(&setup, &created, action).await, 400).await;
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(from),
            "{action} of a {from} one: {problem}"
        );
    }
    expand(&setup, 10).await;
    setup.app.clock.advance(time::Duration::minutes(2));
    setup.drain_messages().await;
    setup.announcement_round(10).await;
    let done = announcement(&setup, &created).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counters"]["sent"], 25);
    let mut delivered: Vec<String> = setup
        .smtp
        .messages()
        .iter()
        .flat_map(|message| message.recipients.clone())
        .collect();
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), 25, "each contact once");
    assert_eq!(setup.smtp.messages().len(), 25, "no duplicates");
}

#[tokio::test]
async fn cancel_skips_every_unsent_message_and_ends_the_announcement() {
    let setup = Setup::new().await;
    for n in 0..12 {
        setup
            .contact(&format!("c{n:02}@example.org"), json!({}))
            .await;
    }
    let created = announce(&setup, &body(&setup.template)).await;
    setup.announcement_round(5).await.expanded.expect("a batch");
    // Two go out before the cancel.
    let first: Vec<String> = setup.messages().await[..2]
        .iter()
        .map(|message| format!("'{}'", message["_id"].as_str().expect("id")))
        .collect();
    setup.sql(&format!(
        "UPDATE messages SET next_attempt_at = '2100-01-01' \
         WHERE account_id = '{}' AND id NOT IN ({})",
        setup.account,
        first.join(", ")
    ));
    setup.drain_messages().await;
    assert_eq!(setup.smtp.messages().len(), 2);
    controlled(&setup, &created, "pause").await;

    let cancelled = controlled(&setup, &created, "cancel").await;
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["processDate"].is_string());
    assert_eq!(cancelled["counters"]["skipped"], 3, "{cancelled}");
    assert_eq!(cancelled["counters"]["queued"], 0, "{cancelled}");
    assert_eq!(cancelled["counters"]["sent"], 2, "{cancelled}");
    let messages = recipients(&setup, &created).await;
    let skipped: Vec<_> = messages
        .iter()
        .filter(|(_, status, _)| status == "skipped")
        .collect();
    assert_eq!(skipped.len(), 3);
    assert!(skipped
        .iter()
        .all(|(_, _, reason)| reason.as_deref() == Some("cancelled")));

    setup.app.clock.advance(time::Duration::days(2));
    assert!(setup.announcement_round(5).await.expanded.is_none());
    assert_eq!(setup.drain_messages().await, 0);
    assert_eq!(setup.smtp.messages().len(), 2, "nothing more is sent");
    for action in ["pause", "resume", "cancel"] {
        expect_problem(control(&setup, &created, action).await, 400).await;
    }
    let unknown = json!({"_id": "01936c5e-7b2a-7cde-8f00-0123456789ab"});
    expect_problem(control(&setup, &unknown, "cancel").await, 404).await;

    // A scheduled one is cancelled before it starts and never expands.
    let mut scheduled = body(&setup.template);
    scheduled["sendAt"] = json!(clock_in(&setup, time::Duration::hours(1)));
    let later = announce(&setup, &scheduled).await;
    expect_problem(control(&setup, &later, "pause").await, 400).await;
    assert_eq!(
        controlled(&setup, &later, "cancel").await["status"],
        "cancelled"
    );
    setup.app.clock.advance(time::Duration::hours(2));
    assert!(setup.announcement_round(5).await.expanded.is_none());
}
