//! Saved segments: create, read, list, update and delete with the search's validation;
//! tenancy; the bound of 1,000 per account; the live count agreeing with
//! `…/contacts/search/count`; announcements made from a segment (the definition copied
//! at creation); topics a segment names.

use mailroom_tests::{expect_json, expect_problem};
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

const UNKNOWN: &str = "01936c5e-7b2a-7cde-8f00-0123456789ab";

async fn create(setup: &Setup, body: &Value) -> Value {
    setup.ok(Method::POST, "/segments", body).await
}

fn id(value: &Value) -> &str {
    value["_id"].as_str().expect("id")
}

/// The fields a 400 problem names.
async fn fields_of(response: reqwest::Response) -> Vec<String> {
    let problem = expect_problem(response, 400).await;
    problem["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("errors in {problem}"))
        .iter()
        .map(|error| error["field"].as_str().expect("field").to_owned())
        .collect()
}

/// The emails an announcement's messages went to, sorted.
async fn recipients(setup: &Setup, announcement: &Value) -> Vec<String> {
    let mut emails: Vec<String> = setup
        .messages()
        .await
        .into_iter()
        .filter(|message| message["announcementId"] == announcement["_id"])
        .map(|message| message["email"].as_str().expect("email").to_owned())
        .collect();
    emails.sort();
    emails
}

async fn expand_all(setup: &Setup) {
    while setup.announcement_round(100).await.expanded.is_some() {}
}

#[tokio::test]
async fn segments_are_created_read_listed_updated_and_deleted() {
    let setup = Setup::new().await;
    setup.contact("a@example.org", json!({"plan": "pro"})).await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    assert_eq!(setup.get("/segments/count").await["count"], 0);
    let pros = create(
        &setup,
        &json!({"name": "  Pros ", "includeUnsubscribed": false, "topicId": topic["_id"],
                "attributes": [{"slug": "plan", "operator": "s_equal", "value": "pro"}]}),
    )
    .await;
    assert_eq!(pros["name"], "Pros", "trimmed");
    assert_eq!(
        pros["attributes"],
        json!([{"slug": "plan", "operator": "s_equal", "value": "pro"}])
    );
    assert_eq!(pros["includeUnsubscribed"], false);
    assert_eq!(pros["topicId"], topic["_id"]);
    assert_eq!(pros["createDate"], pros["updateDate"]);
    // Everyone: no conditions, no topic.
    setup.app.clock.advance(time::Duration::seconds(1));
    let everyone = create(
        &setup,
        &json!({"name": "Everyone", "includeUnsubscribed": true}),
    )
    .await;
    assert_eq!(everyone["attributes"], json!([]));
    assert!(everyone.get("topicId").is_none(), "{everyone}");

    assert_eq!(setup.get(&format!("/segments/{}", id(&pros))).await, pros);
    assert_eq!(setup.get("/segments/count").await["count"], 2);
    let list = setup.get("/segments").await;
    assert_eq!(list["items"], json!([pros, everyone]), "oldest first");
    let second = setup.get("/segments?start=1&limit=1").await;
    assert_eq!(second["items"], json!([everyone]));

    // PATCH: the name alone, then one field of the definition, then the topic cleared.
    setup.app.clock.advance(time::Duration::seconds(1));
    let path = format!("/segments/{}", id(&pros));
    let renamed = setup
        .ok(Method::PATCH, &path, &json!({"name": "Paying"}))
        .await;
    assert_eq!(renamed["name"], "Paying");
    assert_eq!(renamed["attributes"], pros["attributes"]);
    assert_ne!(renamed["updateDate"], pros["updateDate"]);
    assert_eq!(renamed["createDate"], pros["createDate"]);
    let widened = setup
        .ok(Method::PATCH, &path, &json!({"includeUnsubscribed": true}))
        .await;
    assert_eq!(widened["includeUnsubscribed"], true);
    assert_eq!(widened["topicId"], topic["_id"], "a field not sent is kept");
    assert_eq!(widened["attributes"], pros["attributes"]);
    let cleared = setup
        .ok(
            Method::PATCH,
            &path,
            &json!({"topicId": null, "attributes": [{"slug": "plan", "operator": "exists"}]}),
        )
        .await;
    assert!(cleared.get("topicId").is_none(), "{cleared}");
    assert_eq!(
        cleared["attributes"],
        json!([{"slug": "plan", "operator": "exists"}])
    );
    assert_eq!(setup.get(&path).await, cleared);

    let deleted = setup.ok(Method::DELETE, &path, &json!(null)).await;
    assert_eq!(deleted, cleared);
    for (method, rest) in [
        (Method::GET, path.clone()),
        (Method::GET, format!("{path}/count")),
        (Method::DELETE, path.clone()),
    ] {
        expect_problem(setup.call(method, &rest, &json!(null)).await, 404).await;
    }
    expect_problem(
        setup
            .call(Method::PATCH, &path, &json!({"name": "Back"}))
            .await,
        404,
    )
    .await;
    expect_problem(
        setup
            .call(Method::GET, "/segments/not-an-id", &json!(null))
            .await,
        404,
    )
    .await;
    assert_eq!(setup.get("/segments/count").await["count"], 1);
}

#[tokio::test]
async fn bad_segments_answer_400_naming_the_field_and_store_nothing() {
    let setup = Setup::new().await;
    setup.contact("a@example.org", json!({"plan": "pro"})).await;
    let long = "x".repeat(201);
    let cases = [
        (json!({"includeUnsubscribed": false}), "name"),
        (json!({"name": "  ", "includeUnsubscribed": false}), "name"),
        (json!({"name": long, "includeUnsubscribed": false}), "name"),
        (json!({"name": "No switch"}), "includeUnsubscribed"),
        (
            json!({"name": "x", "includeUnsubscribed": false, "topicId": UNKNOWN}),
            "topicId",
        ),
        (
            json!({"name": "x", "includeUnsubscribed": false, "topicId": "nope"}),
            "topicId",
        ),
        (
            json!({"name": "x", "includeUnsubscribed": false,
                   "attributes": [{"slug": "no_such", "operator": "exists"}]}),
            "attributes[0].slug",
        ),
        (
            json!({"name": "x", "includeUnsubscribed": false,
                   "attributes": [{"slug": "email", "operator": "greater_than", "value": 3}]}),
            "attributes[0].operator",
        ),
        (
            json!({"name": "x", "includeUnsubscribed": false,
                   "attributes": vec![json!({"slug": "plan", "operator": "exists"}); 101]}),
            "attributes",
        ),
    ];
    for (body, field) in &cases {
        let fields = fields_of(setup.call(Method::POST, "/segments", body).await).await;
        assert!(fields.contains(&(*field).to_owned()), "{body}: {fields:?}");
        // The search answers the same definition the same way (the name aside).
        if *field != "name" {
            let mut search = body.clone();
            search.as_object_mut().expect("object").remove("name");
            let searched = fields_of(
                setup
                    .call(Method::POST, "/contacts/search/count", &search)
                    .await,
            )
            .await;
            assert_eq!(searched, fields, "{body}");
        }
    }
    // An unknown field, and a name another segment has in other letters' case.
    let problem = expect_problem(
        setup
            .call(
                Method::POST,
                "/segments",
                &json!({"name": "x", "includeUnsubscribed": false, "audience": []}),
            )
            .await,
        400,
    )
    .await;
    assert!(problem.to_string().contains("audience"), "{problem}");
    let kept = create(
        &setup,
        &json!({"name": "Pros", "includeUnsubscribed": false}),
    )
    .await;
    assert_eq!(
        fields_of(
            setup
                .call(
                    Method::POST,
                    "/segments",
                    &json!({"name": "PROS", "includeUnsubscribed": true}),
                )
                .await
        )
        .await,
        ["name"]
    );
    assert_eq!(setup.get("/segments/count").await["count"], 1);

    // PATCH: nulls, nothing, a bad condition, an unknown topic, a taken name.
    let other = create(
        &setup,
        &json!({"name": "Others", "includeUnsubscribed": false}),
    )
    .await;
    let path = format!("/segments/{}", id(&other));
    for (body, field) in [
        (json!({"name": null}), "name"),
        (json!({"attributes": null}), "attributes"),
        (json!({"includeUnsubscribed": null}), "includeUnsubscribed"),
        (json!({}), "body"),
        (
            json!({"attributes": [{"slug": "no_such", "operator": "exists"}]}),
            "attributes[0].slug",
        ),
        (json!({"topicId": UNKNOWN}), "topicId"),
        (json!({"topicId": "nope"}), "topicId"),
        (json!({"name": "pros"}), "name"),
    ] {
        let fields = fields_of(setup.call(Method::PATCH, &path, &body).await).await;
        assert_eq!(fields, [field], "{body}");
    }
    assert_eq!(setup.get(&path).await, other, "nothing changed");
    assert_eq!(setup.get(&format!("/segments/{}", id(&kept))).await, kept);
}

#[tokio::test]
async fn another_accounts_segment_is_not_found() {
    let setup = Setup::new().await;
    let segment = create(
        &setup,
        &json!({"name": "Ours", "includeUnsubscribed": false}),
    )
    .await;
    let eve = setup.app.user_token("eve@example.com").await;
    let elsewhere = setup.app.create_account(&eve, "Elsewhere").await;
    let theirs = |rest: &str| format!("/v2/accounts/{elsewhere}/segments/{}{rest}", id(&segment));
    for (method, path) in [
        (Method::GET, theirs("")),
        (Method::GET, theirs("/count")),
        (Method::DELETE, theirs("")),
    ] {
        expect_problem(
            setup
                .app
                .request(method, &path, Some(&eve))
                .send()
                .await
                .expect("sent"),
            404,
        )
        .await;
    }
    expect_problem(
        setup
            .app
            .send_json(Method::PATCH, &theirs(""), &eve, &json!({"name": "Mine"}))
            .await,
        404,
    )
    .await;
    let listed = expect_json(
        setup
            .app
            .get(&format!("/v2/accounts/{elsewhere}/segments"), &eve)
            .await,
        200,
    )
    .await;
    assert_eq!(listed["items"], json!([]));
    // Nor can another account's announcement name it.
    let template = expect_json(
        setup
            .app
            .get(&format!("/v2/accounts/{elsewhere}/templates"), &eve)
            .await,
        200,
    )
    .await["items"][0]["_id"]
        .clone();
    let refused = setup
        .app
        .send_json(
            Method::POST,
            &format!("/v2/accounts/{elsewhere}/announcements"),
            &eve,
            &json!({"name": "Borrowed", "templateId": template, "segmentId": segment["_id"]}),
        )
        .await;
    assert_eq!(fields_of(refused).await, ["segmentId"]);
    // And the segment is still there, unchanged.
    assert_eq!(
        setup.get(&format!("/segments/{}", id(&segment))).await,
        segment
    );
}

#[tokio::test]
async fn an_account_holds_at_most_1000_segments() {
    let setup = Setup::new().await;
    setup.sql(&format!(
        "INSERT INTO segments (account_id, id, name, include_unsubscribed, created_at, updated_at)
         SELECT '{}', gen_random_uuid(), 'bulk ' || n, false, now(), now()
         FROM generate_series(1, 999) AS n",
        setup.account
    ));
    assert_eq!(setup.get("/segments/count").await["count"], 999);
    let last = create(
        &setup,
        &json!({"name": "The thousandth", "includeUnsubscribed": false}),
    )
    .await;
    let problem = expect_problem(
        setup
            .call(
                Method::POST,
                "/segments",
                &json!({"name": "One more", "includeUnsubscribed": false}),
            )
            .await,
        400,
    )
    .await;
    let detail = problem["detail"].as_str().expect("detail");
    assert!(detail.contains("at most 1000 segments"), "{problem}");
    assert_eq!(setup.get("/segments/count").await["count"], 1000);
    // Another account is not bound by this one's segments.
    let other = setup.app.create_account(&setup.token, "Second").await;
    expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &format!("/v2/accounts/{other}/segments"),
                &setup.token,
                &json!({"name": "One more", "includeUnsubscribed": false}),
            )
            .await,
        200,
    )
    .await;
    // Room again once one is deleted.
    setup
        .ok(
            Method::DELETE,
            &format!("/segments/{}", id(&last)),
            &json!(null),
        )
        .await;
    create(
        &setup,
        &json!({"name": "One more", "includeUnsubscribed": false}),
    )
    .await;
}

#[tokio::test]
async fn a_segments_count_is_the_search_count_of_its_definition_now() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    setup
        .contact("a@example.org", json!({"plan": "pro", "seats": 10}))
        .await;
    setup
        .contact("b@example.org", json!({"plan": "pro", "seats": 2}))
        .await;
    setup
        .contact("c@example.org", json!({"plan": "free", "seats": 1}))
        .await;
    setup.contact("d@example.org", json!({"plan": "pro"})).await;
    setup.contact("e@example.org", json!({})).await;
    let topic_id = topic["_id"].as_str().expect("id");
    setup.sql(&format!(
        "UPDATE contacts SET unsubscribed_at = now() WHERE email = 'b@example.org';
         INSERT INTO topic_unsubscriptions (account_id, contact_id, topic_id, created_at)
           SELECT account_id, id, '{topic_id}', now() FROM contacts WHERE email = 'd@example.org'"
    ));
    let definitions = [
        (json!({"includeUnsubscribed": true}), 5),
        (json!({"includeUnsubscribed": false}), 4),
        (
            json!({"includeUnsubscribed": false,
                   "attributes": [{"slug": "plan", "operator": "s_equal", "value": "PRO"}]}),
            2,
        ),
        (
            json!({"includeUnsubscribed": true, "topicId": topic_id,
                   "attributes": [{"slug": "plan", "operator": "s_equal", "value": "pro"}]}),
            2,
        ),
        (
            json!({"includeUnsubscribed": true,
                   "attributes": [{"slug": "seats", "operator": "greater_than", "value": 1},
                                  {"slug": "plan", "operator": "exists"}]}),
            2,
        ),
        (
            json!({"includeUnsubscribed": true,
                   "attributes": [{"slug": "seats", "operator": "not_exists"}]}),
            2,
        ),
    ];
    let mut saved = Vec::new();
    for (n, (definition, expected)) in definitions.iter().enumerate() {
        let mut body = definition.clone();
        body["name"] = json!(format!("Definition {n}"));
        let segment = create(&setup, &body).await;
        let counted = setup
            .get(&format!("/segments/{}/count", id(&segment)))
            .await;
        let searched = setup
            .ok(Method::POST, "/contacts/search/count", definition)
            .await;
        assert_eq!(counted, searched, "{definition}");
        assert_eq!(counted["count"], *expected, "{definition}");
        saved.push(segment);
    }
    // The count is of the contacts now, not of those when the segment was saved.
    setup
        .contact("f@example.org", json!({"plan": "pro", "seats": 3}))
        .await;
    let pros = setup
        .get(&format!("/segments/{}/count", id(&saved[2])))
        .await;
    assert_eq!(pros["count"], 3);
}

#[tokio::test]
async fn an_announcement_made_from_a_segment_reaches_its_contacts_and_keeps_its_copy() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    setup
        .contact("a-pro@example.org", json!({"plan": "pro"}))
        .await;
    setup
        .contact("b-pro@example.org", json!({"plan": "pro"}))
        .await;
    setup
        .contact("c-free@example.org", json!({"plan": "free"}))
        .await;
    setup
        .contact("d-unsub@example.org", json!({"plan": "pro"}))
        .await;
    setup
        .contact("e-topic@example.org", json!({"plan": "pro"}))
        .await;
    let topic_id = topic["_id"].as_str().expect("id");
    setup.sql(&format!(
        "UPDATE contacts SET unsubscribed_at = now() WHERE email = 'd-unsub@example.org';
         INSERT INTO topic_unsubscriptions (account_id, contact_id, topic_id, created_at)
           SELECT account_id, id, '{topic_id}', now() FROM contacts
           WHERE email = 'e-topic@example.org'"
    ));
    let pro = json!([{"slug": "plan", "operator": "s_equal", "value": "pro"}]);
    let segment = create(
        &setup,
        &json!({"name": "Pros", "includeUnsubscribed": false, "topicId": topic_id,
                "attributes": pro}),
    )
    .await;
    let made = setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Launch", "templateId": setup.template, "segmentId": segment["_id"]}),
        )
        .await;
    // The definition is copied into the announcement, and the segment named.
    assert_eq!(made["segmentId"], segment["_id"]);
    assert_eq!(made["attributes"], pro);
    assert_eq!(made["includeUnsubscribed"], false);
    assert_eq!(made["topicId"], topic["_id"]);
    // The segment changes before the expansion runs: the announcement does not.
    let everyone = setup
        .ok(
            Method::PATCH,
            &format!("/segments/{}", id(&segment)),
            &json!({"attributes": [], "includeUnsubscribed": true, "topicId": null}),
        )
        .await;
    assert_eq!(everyone["attributes"], json!([]));
    let read = setup.get(&format!("/announcements/{}", id(&made))).await;
    assert_eq!(read["attributes"], pro);
    assert_eq!(read["topicId"], topic["_id"]);
    assert_eq!(read["segmentId"], segment["_id"]);
    // A second announcement from the changed segment reaches its new audience.
    let later = setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Everyone", "templateId": setup.template,
                    "segmentId": segment["_id"]}),
        )
        .await;
    assert_eq!(later["attributes"], json!([]));
    assert_eq!(later["includeUnsubscribed"], true);
    // A plain announcement names no segment.
    let plain = setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Plain", "templateId": setup.template, "includeUnsubscribed": false}),
        )
        .await;
    assert!(plain.get("segmentId").is_none(), "{plain}");

    expand_all(&setup).await;
    setup.drain_messages().await;
    assert_eq!(
        recipients(&setup, &made).await,
        ["a-pro@example.org", "b-pro@example.org"]
    );
    assert_eq!(
        recipients(&setup, &later).await,
        [
            "a-pro@example.org",
            "b-pro@example.org",
            "c-free@example.org",
            "d-unsub@example.org",
            "e-topic@example.org"
        ]
    );
    let to_a = setup
        .smtp
        .messages()
        .iter()
        .filter(|message| {
            message
                .recipients
                .iter()
                .any(|to| to == "a-pro@example.org")
        })
        .count();
    assert_eq!(to_a, 3, "each of the three announcements reached a-pro");

    // Deleting the segment leaves the announcements as they are.
    setup
        .ok(
            Method::DELETE,
            &format!("/segments/{}", id(&segment)),
            &json!(null),
        )
        .await;
    let after = setup.get(&format!("/announcements/{}", id(&made))).await;
    assert_eq!(after["segmentId"], segment["_id"]);
    assert_eq!(after["attributes"], pro);
}

#[tokio::test]
async fn segment_id_beside_the_audience_fields_or_unknown_is_a_400() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    let segment = create(
        &setup,
        &json!({"name": "Everyone", "includeUnsubscribed": false}),
    )
    .await;
    let with = |extra: Value| {
        let mut body =
            json!({"name": "Launch", "templateId": setup.template, "segmentId": segment["_id"]});
        for (key, value) in extra.as_object().expect("object") {
            body[key] = value.clone();
        }
        body
    };
    for (body, field) in [
        (with(json!({"attributes": []})), "attributes"),
        (
            with(json!({"attributes": [{"slug": "email", "operator": "exists"}]})),
            "attributes",
        ),
        (
            with(json!({"includeUnsubscribed": false})),
            "includeUnsubscribed",
        ),
        (with(json!({"topicId": topic["_id"]})), "topicId"),
        (with(json!({"segmentId": UNKNOWN})), "segmentId"),
        (with(json!({"segmentId": "nope"})), "segmentId"),
    ] {
        let fields = fields_of(setup.call(Method::POST, "/announcements", &body).await).await;
        assert_eq!(fields, [field], "{body}");
    }
    // The specification's fields are accepted as before.
    setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Launch", "templateId": setup.template, "includeUnsubscribed": false,
                    "topicId": topic["_id"], "attributes": []}),
        )
        .await;
    assert_eq!(setup.get("/announcements/count").await["count"], 1);
}

#[tokio::test]
async fn a_topic_a_segment_names_cannot_be_deleted() {
    let setup = Setup::new().await;
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    let segment = create(
        &setup,
        &json!({"name": "Launch readers", "includeUnsubscribed": false, "topicId": topic["_id"]}),
    )
    .await;
    create(
        &setup,
        &json!({"name": "Also readers", "includeUnsubscribed": true, "topicId": topic["_id"]}),
    )
    .await;
    let topic_path = format!("/topics/{}", id(&topic));
    let problem = expect_problem(
        setup.call(Method::DELETE, &topic_path, &json!(null)).await,
        400,
    )
    .await;
    assert_eq!(
        problem["detail"],
        "the topic is named by saved segments (Also readers, Launch readers): change their \
         topicId or delete them first",
        "{problem}"
    );
    assert_eq!(setup.get(&topic_path).await["name"], "Launches");
    assert_eq!(
        setup.get(&format!("/segments/{}", id(&segment))).await["topicId"],
        topic["_id"]
    );
    // Once no segment names it, the topic goes.
    setup
        .ok(
            Method::PATCH,
            &format!("/segments/{}", id(&segment)),
            &json!({"topicId": null}),
        )
        .await;
    let left = expect_problem(
        setup.call(Method::DELETE, &topic_path, &json!(null)).await,
        400,
    )
    .await;
    assert!(
        left["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("(Also readers)")),
        "{left}"
    );
    let also = setup.get("/segments").await["items"][1]["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    setup
        .ok(Method::DELETE, &format!("/segments/{also}"), &json!(null))
        .await;
    setup.ok(Method::DELETE, &topic_path, &json!(null)).await;
    expect_problem(
        setup.call(Method::GET, &topic_path, &json!(null)).await,
        404,
    )
    .await;
}
