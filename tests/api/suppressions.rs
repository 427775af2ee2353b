//! The suppression list: an address that bounced, complained or unsubscribed stays listed
//! when its contact is deleted, so a contact made again for it is not mailed by any path;
//! addresses listed by hand; topics left by a deleted contact; taking an address off; the
//! list's reads, bounds and tenancy.

use mailroom_tests::{expect_json, expect_problem};
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

async fn list(setup: &Setup, query: &str) -> Vec<Value> {
    setup.get(&format!("/suppressions{query}")).await["items"]
        .as_array()
        .expect("items")
        .clone()
}

async fn count(setup: &Setup, query: &str) -> u64 {
    setup.get(&format!("/suppressions/count{query}")).await["count"]
        .as_u64()
        .expect("count")
}

async fn send(setup: &Setup, email: &str) -> Value {
    setup
        .ok(
            Method::POST,
            "/messages",
            &json!({"slug": "news", "email": email}),
        )
        .await
}

async fn message(setup: &Setup, queued: &Value) -> Value {
    setup
        .get(&format!(
            "/messages/{}",
            queued["_id"].as_str().expect("message id")
        ))
        .await
}

async fn delete_contact(setup: &Setup, id: &str) {
    expect_json(
        setup
            .call(Method::DELETE, &format!("/contacts/{id}"), &json!({}))
            .await,
        200,
    )
    .await;
}

#[tokio::test]
async fn a_bounced_address_stays_listed_after_its_contact_is_deleted_and_is_not_mailed_again() {
    let setup = Setup::new().await;
    setup
        .smtp
        .script_rcpt_replies(["550 5.1.1 <gone@example.org>: no such user"]);
    let first = send(&setup, "Gone@Example.org").await;
    setup.drain_messages().await;
    assert_eq!(message(&setup, &first).await["status"], "bounced");

    let listed = list(&setup, "").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let entry = &listed[0];
    assert_eq!(entry["email"], "Gone@Example.org");
    assert_eq!(entry["reason"], "hard_bounce");
    assert_eq!(entry["source"], "smtp_reply");
    assert!(
        entry["detail"].as_str().unwrap().starts_with("550 5.1.1"),
        "{entry}"
    );
    assert_eq!(entry["addressHash"].as_str().unwrap().len(), 64);

    delete_contact(&setup, first["contactId"].as_str().unwrap()).await;
    assert_eq!(count(&setup, "").await, 1, "the deletion keeps the entry");

    // The next send makes a new contact, without the flag; the list still stops it, on
    // the transactional path and on an announcement's.
    let again = send(&setup, "gone@example.org").await;
    assert_ne!(again["contactId"], first["contactId"]);
    let fresh = setup
        .get(&format!(
            "/contacts/{}",
            again["contactId"].as_str().unwrap()
        ))
        .await;
    assert!(fresh.get("hardBounced").is_none(), "{fresh}");
    setup.contact("kept@example.org", json!({})).await;
    setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Launch", "templateId": setup.template, "includeUnsubscribed": true}),
        )
        .await;
    while setup.announcement_round(100).await.expanded.is_some() {}
    setup.drain_messages().await;

    let skipped = message(&setup, &again).await;
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["skipReason"], "bounce_blocked");
    let announced: Vec<Value> = setup
        .messages()
        .await
        .into_iter()
        .filter(|message| message["kind"] == "announcement")
        .collect();
    assert_eq!(announced.len(), 2, "{announced:?}");
    for message in &announced {
        let expected = if message["email"] == "gone@example.org" {
            ("skipped", json!("bounce_blocked"))
        } else {
            ("sent", Value::Null)
        };
        assert_eq!(message["status"], expected.0, "{message}");
        assert_eq!(
            message.get("skipReason").cloned().unwrap_or(Value::Null),
            expected.1
        );
    }
    let received = setup.smtp.messages();
    assert_eq!(received.len(), 1, "only kept@ received mail");
    assert_eq!(received[0].recipients, vec!["kept@example.org".to_owned()]);
}

#[tokio::test]
async fn an_address_listed_by_hand_gets_nothing_until_it_is_taken_off() {
    let setup = Setup::new().await;
    let contact = setup.contact("ann@example.org", json!({})).await;
    let listed = setup
        .ok(
            Method::POST,
            "/suppressions",
            &json!({"email": "ANN@example.org", "detail": "asked us by phone"}),
        )
        .await;
    assert_eq!(listed["reason"], "manual");
    assert_eq!(listed["source"], "api");
    assert_eq!(listed["email"], "ANN@example.org");
    assert_eq!(listed["detail"], "asked us by phone");
    // Again: the first entry stands.
    let again = setup
        .ok(
            Method::POST,
            "/suppressions",
            &json!({"email": "ann@example.org"}),
        )
        .await;
    assert_eq!(again, listed);
    assert_eq!(count(&setup, "?reason=manual").await, 1);
    assert_eq!(count(&setup, "?reason=hard_bounce").await, 0);
    assert_eq!(list(&setup, "?email=Ann@Example.org").await, vec![listed]);

    // Transactional mail too.
    let blocked = send(&setup, "ann@example.org").await;
    assert_eq!(blocked["contactId"], contact.as_str());
    setup.drain_messages().await;
    let blocked = message(&setup, &blocked).await;
    assert_eq!(blocked["status"], "skipped");
    assert_eq!(blocked["skipReason"], "suppressed");
    assert!(setup.smtp.messages().is_empty());

    let removed = expect_json(
        setup
            .call(
                Method::DELETE,
                "/suppressions?email=ann%40example.org",
                &json!({}),
            )
            .await,
        200,
    )
    .await;
    assert_eq!(removed["removed"].as_array().unwrap().len(), 1, "{removed}");
    expect_problem(
        setup
            .call(
                Method::DELETE,
                "/suppressions?email=ann%40example.org",
                &json!({}),
            )
            .await,
        404,
    )
    .await;
    let sent = send(&setup, "ann@example.org").await;
    setup.drain_messages().await;
    assert_eq!(message(&setup, &sent).await["status"], "sent");
    assert_eq!(setup.smtp.messages().len(), 1);
}

#[tokio::test]
async fn taking_a_bounce_off_the_list_clears_the_contact_and_unbouncing_clears_the_entry() {
    let setup = Setup::new().await;
    setup
        .smtp
        .script_rcpt_replies(["550 5.1.1 no such user", "550 5.1.1 no such user"]);
    let first = send(&setup, "a@example.org").await;
    let second = send(&setup, "b@example.org").await;
    setup.drain_messages().await;
    assert_eq!(count(&setup, "?reason=hard_bounce").await, 2);

    // Off the list: the contact's flag goes too.
    expect_json(
        setup
            .call(
                Method::DELETE,
                "/suppressions?email=a%40example.org&reason=hard_bounce",
                &json!({}),
            )
            .await,
        200,
    )
    .await;
    let contact = setup
        .get(&format!(
            "/contacts/{}",
            first["contactId"].as_str().unwrap()
        ))
        .await;
    assert!(contact.get("hardBounced").is_none(), "{contact}");

    // The contact unbounced: its entry goes too.
    let id = second["contactId"].as_str().unwrap();
    expect_json(
        setup
            .call(
                Method::PATCH,
                &format!("/contacts/{id}"),
                &json!({"hardBounced": false}),
            )
            .await,
        200,
    )
    .await;
    assert_eq!(count(&setup, "").await, 0);
    let resent = send(&setup, "b@example.org").await;
    setup.drain_messages().await;
    assert_eq!(message(&setup, &resent).await["status"], "sent");
}

#[tokio::test]
async fn a_contact_marked_before_it_had_an_entry_is_listed_when_it_is_deleted() {
    let setup = Setup::new().await;
    let id = setup.contact("old@example.org", json!({})).await;
    // A mark as it was written before the list existed: on the contact only.
    setup.sql(&format!(
        "UPDATE contacts SET complaint_at = now() WHERE id = '{id}'"
    ));
    assert_eq!(count(&setup, "").await, 0);
    delete_contact(&setup, &id).await;
    let listed = list(&setup, "").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["reason"], "complaint");
    assert_eq!(listed[0]["source"], "contact_deleted");
    let again = send(&setup, "old@example.org").await;
    setup.drain_messages().await;
    assert_eq!(
        message(&setup, &again).await["skipReason"],
        "complaint_blocked"
    );
}

/// Makes a topic, with an announcement on it, and unsubscribes `email`'s contact from
/// it the way the preference page does.
async fn topic_left_by(setup: &Setup, contact: &str) -> String {
    let topic = setup
        .ok(Method::POST, "/topics", &json!({"name": "Launches"}))
        .await;
    let topic = topic["_id"].as_str().expect("topic id").to_owned();
    setup.sql(&format!(
        "INSERT INTO topic_unsubscriptions (account_id, contact_id, topic_id, created_at) \
         SELECT account_id, id, '{topic}', now() FROM contacts WHERE id = '{contact}'"
    ));
    topic
}

#[tokio::test]
async fn a_topic_left_by_a_deleted_or_erased_contact_stays_left_when_the_address_returns() {
    for erase in [false, true] {
        let setup = Setup::new().await;
        let first = setup.contact("tess@example.org", json!({})).await;
        let topic = topic_left_by(&setup, &first).await;
        let query = if erase { "?erase=true" } else { "" };
        expect_json(
            setup
                .call(
                    Method::DELETE,
                    &format!("/contacts/{first}{query}"),
                    &json!({}),
                )
                .await,
            200,
        )
        .await;
        // A topic left is not a listing: the whole-address list stays empty.
        assert_eq!(count(&setup, "").await, 0);
        assert_eq!(kept_topic_rows(&setup), 1, "erase: {erase}");

        let again = setup.contact("Tess@Example.org", json!({})).await;
        assert_ne!(again, first);
        setup.contact("stays@example.org", json!({})).await;
        setup
            .ok(
                Method::POST,
                "/announcements",
                &json!({"name": "Launch", "templateId": setup.template, "topicId": topic,
                        "includeUnsubscribed": false}),
            )
            .await;
        while setup.announcement_round(100).await.expanded.is_some() {}
        setup.drain_messages().await;

        let mut outcomes: Vec<(String, String, Value)> = setup
            .messages()
            .await
            .into_iter()
            .map(|message| {
                (
                    message["email"].as_str().unwrap().to_owned(),
                    message["status"].as_str().unwrap().to_owned(),
                    message.get("skipReason").cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        outcomes.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            outcomes,
            [
                (
                    "Tess@Example.org".to_owned(),
                    "skipped".to_owned(),
                    json!("unsubscribed")
                ),
                (
                    "stays@example.org".to_owned(),
                    "sent".to_owned(),
                    Value::Null
                ),
            ],
            "erase: {erase}"
        );
        let received = setup.smtp.messages();
        assert_eq!(received.len(), 1, "erase: {erase}");
        assert_eq!(received[0].recipients, vec!["stays@example.org".to_owned()]);
        // The new contact carries the topic it had left; the hash keeps nothing more.
        let contact = setup.get(&format!("/contacts/{again}")).await;
        assert_eq!(contact["topicUnsubscriptions"], json!([topic]), "{contact}");
        assert_eq!(kept_topic_rows(&setup), 0, "erase: {erase}");
    }
}

#[tokio::test]
async fn the_list_pages_newest_first_refuses_bad_input_and_is_the_accounts_own() {
    let setup = Setup::new().await;
    for n in 0..3 {
        setup
            .ok(
                Method::POST,
                "/suppressions",
                &json!({"email": format!("p{n}@example.org")}),
            )
            .await;
    }
    let page = list(&setup, "?limit=2").await;
    assert_eq!(page.len(), 2);
    let rest = list(&setup, "?start=2&limit=2").await;
    assert_eq!(rest.len(), 1);
    let emails: Vec<&str> = page
        .iter()
        .chain(&rest)
        .map(|entry| entry["email"].as_str().unwrap())
        .collect();
    let mut sorted = emails.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 3, "each entry once: {emails:?}");
    let dates: Vec<&str> = page
        .iter()
        .chain(&rest)
        .map(|entry| entry["createDate"].as_str().unwrap())
        .collect();
    assert!(dates.windows(2).all(|pair| pair[0] >= pair[1]), "{dates:?}");

    for (method, rest, body, field) in [
        (
            Method::GET,
            "/suppressions?reason=bounce",
            json!({}),
            "reason",
        ),
        (Method::GET, "/suppressions?email=nope", json!({}), "email"),
        (Method::DELETE, "/suppressions", json!({}), "email"),
        (
            Method::POST,
            "/suppressions",
            json!({"email": "x"}),
            "email",
        ),
        (
            Method::POST,
            "/suppressions",
            json!({"email": "a@example.org", "detail": "d".repeat(1001)}),
            "detail",
        ),
    ] {
        let problem = expect_problem(setup.call(method, rest, &body).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], field, "{rest}: {problem}");
    }
    expect_problem(
        setup
            .call(
                Method::POST,
                "/suppressions",
                &json!({"email": "a@example.org", "reason": "hard_bounce"}),
            )
            .await,
        400,
    )
    .await;

    // Another account sees none of it, and cannot take anything off.
    let other = setup.app.create_account(&setup.token, "Other").await;
    let theirs = expect_json(
        setup
            .app
            .get(&format!("/v2/accounts/{other}/suppressions"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(theirs["items"], json!([]));
    expect_problem(
        setup
            .app
            .send_json(
                Method::DELETE,
                &format!("/v2/accounts/{other}/suppressions?email=p0%40example.org"),
                &setup.token,
                &json!({}),
            )
            .await,
        404,
    )
    .await;
    assert_eq!(count(&setup, "").await, 3);
}

async fn import(setup: &Setup, body: &str) -> Value {
    let response = setup
        .app
        .request(
            Method::POST,
            &setup.path("/suppressions/import"),
            Some(&setup.token),
        )
        .header("content-type", "text/csv")
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent");
    expect_json(response, 200).await
}

async fn export(setup: &Setup) -> String {
    let response = setup
        .app
        .get(&setup.path("/suppressions/export"), &setup.token)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/csv; charset=utf-8"
    );
    response.text().await.expect("body")
}

#[tokio::test]
async fn an_import_lists_each_good_row_once_and_an_export_streams_every_entry() {
    let setup = Setup::new().await;
    setup
        .ok(
            Method::POST,
            "/suppressions",
            &json!({"email": "known@example.org"}),
        )
        .await;
    let mut csv = String::from("\u{feff}email,detail\n");
    csv.push_str("a@example.org,from the old system\n");
    csv.push_str("not-an-address,\n");
    csv.push_str("A@example.org,again\n");
    csv.push_str("known@example.org,\n");
    for n in 0..2_500 {
        csv.push_str(&format!("bulk{n}@example.org,\n"));
    }
    let report = import(&setup, &csv).await;
    assert_eq!(report["added"], 2_501, "{report}");
    assert_eq!(report["alreadyListed"], 2, "{report}");
    assert_eq!(report["rejected"], 1);
    assert_eq!(report["errors"][0]["line"], 3);
    assert!(
        report["errors"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("email"),
        "{report}"
    );
    assert_eq!(count(&setup, "?reason=manual").await, 2_502);
    let entry = &list(&setup, "?email=a%40example.org").await[0];
    assert_eq!(
        (&entry["source"], &entry["detail"]),
        (&json!("import"), &json!("from the old system"))
    );
    // Sending the file again adds nothing.
    let again = import(&setup, &csv).await;
    assert_eq!(
        (&again["added"], &again["alreadyListed"]),
        (&json!(0), &json!(2_503))
    );

    for (body, field) in [
        ("", "header"),
        ("address\nx@example.org\n", "header"),
        ("email,email\n", "header"),
    ] {
        let response = setup
            .app
            .request(
                Method::POST,
                &setup.path("/suppressions/import"),
                Some(&setup.token),
            )
            .header("content-type", "text/csv")
            .body(body.to_owned())
            .send()
            .await
            .expect("request sent");
        let problem = expect_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body:?}: {problem}");
    }

    // The export: a header and one line per entry, over three pages of 1,000.
    let text = export(&setup).await;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "email",
            "address_hash",
            "reason",
            "source",
            "detail",
            "created_at"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|row| row.unwrap()).collect();
    assert_eq!(rows.len(), 2_502);
    let mut hashes: Vec<&str> = rows.iter().map(|row| &row[1]).collect();
    hashes.dedup();
    assert_eq!(hashes.len(), 2_502, "each entry once, in hash order");
    assert!(rows.iter().any(|row| &row[0] == "bulk2499@example.org"));
}

/// How many topic unsubscriptions of deleted contacts are kept by address hash.
fn kept_topic_rows(setup: &Setup) -> i64 {
    use diesel::{sql_query, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Found {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let found: Found = sql_query("SELECT count(*) AS n FROM topic_suppressions")
        .get_result(&mut setup.app.database.connection())
        .expect("count");
    found.n
}

/// Every text, JSON and text-array column of every table holding `needle`, as
/// `table.column`.
fn columns_holding(setup: &Setup, needle: &str) -> Vec<String> {
    use diesel::{sql_query, sql_types::Text, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Column {
        #[diesel(sql_type = Text)]
        table_name: String,
        #[diesel(sql_type = Text)]
        column_name: String,
    }
    #[derive(QueryableByName)]
    struct Found {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut connection = setup.app.database.connection();
    let columns: Vec<Column> = sql_query(
        "SELECT c.table_name::text AS table_name, c.column_name::text AS column_name \
         FROM information_schema.columns c \
         JOIN information_schema.tables t USING (table_schema, table_name) \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
           AND (c.data_type IN ('text', 'character varying', 'jsonb', 'json') \
                OR c.udt_name IN ('_text', '_varchar'))",
    )
    .load(&mut connection)
    .expect("columns");
    assert!(columns.len() > 50, "the scan reads the schema");
    columns
        .into_iter()
        .filter(|column| {
            let found: Found = sql_query(format!(
                "SELECT count(*) AS n FROM \"{}\" WHERE lower(\"{}\"::text) LIKE $1",
                column.table_name, column.column_name
            ))
            .bind::<Text, _>(format!("%{needle}%"))
            .get_result(&mut connection)
            .expect("scan");
            found.n > 0
        })
        .map(|column| format!("{}.{}", column.table_name, column.column_name))
        .collect()
}

#[tokio::test]
async fn an_erased_person_leaves_no_address_in_any_table_and_stays_suppressed() {
    let setup = Setup::new().await;
    setup
        .ok(
            Method::PUT,
            "/webhooks",
            &json!({"url": "http://127.0.0.1:9/hooks", "authType": "none",
                    "events": ["contact.bounced", "contact.deleted"]}),
        )
        .await;
    setup
        .smtp
        .script_rcpt_replies(["250 2.1.5 ok", "550 5.1.1 <erin@example.org>: mailbox gone"]);
    let id = setup
        .contact("Erin@Example.org", json!({"nickname": "erin@example.org"}))
        .await;
    setup.event("erin@example.org", "signed_up").await;
    let first = setup
        .ok(
            Method::POST,
            "/messages",
            &json!({"slug": "news", "email": "erin@example.org",
                    "data": {"note": "for erin@example.org"}}),
        )
        .await;
    setup.drain_messages().await;
    assert_eq!(message(&setup, &first).await["status"], "sent");
    let bounced = send(&setup, "erin@example.org").await;
    setup.drain_messages().await;
    assert_eq!(message(&setup, &bounced).await["status"], "bounced");
    // Someone else's data stays.
    setup.contact("other@example.org", json!({})).await;
    let before = columns_holding(&setup, "erin@example.org");
    assert!(before.len() >= 5, "{before:?}");

    let erased = expect_json(
        setup
            .call(
                Method::DELETE,
                &format!("/contacts/{id}?erase=true"),
                &json!({}),
            )
            .await,
        200,
    )
    .await;
    assert_eq!(erased["_id"], id.as_str());
    assert_eq!(
        columns_holding(&setup, "erin@example.org"),
        Vec::<String>::new()
    );
    assert!(!columns_holding(&setup, "other@example.org").is_empty());

    // The history keeps its shape; the list keeps the hash.
    let kept = message(&setup, &first).await;
    assert_eq!(
        (&kept["status"], &kept["email"]),
        (&json!("sent"), &json!(""))
    );
    let listed = list(&setup, "").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0]["email"].is_null(), "{}", listed[0]);
    assert!(listed[0].get("detail").is_none(), "{}", listed[0]);
    assert_eq!(list(&setup, "?email=erin%40example.org").await.len(), 1);
    let deleted: Vec<Value> = setup.get("/webhook-events?event=contact.deleted").await["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(deleted[0]["payload"]["email"], "", "{deleted:?}");

    // Back again by a signup: still not mailed.
    let again = send(&setup, "erin@example.org").await;
    setup.drain_messages().await;
    assert_eq!(
        message(&setup, &again).await["skipReason"],
        "bounce_blocked"
    );
    expect_problem(
        setup
            .call(
                Method::DELETE,
                &format!(
                    "/contacts/{}?erase=maybe",
                    again["contactId"].as_str().unwrap()
                ),
                &json!({}),
            )
            .await,
        400,
    )
    .await;
}
