use mailroom_tests::{expect_json, expect_problem, spawn_app, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

struct Audience {
    app: TestApp,
    token: String,
    account: String,
}

async fn audience() -> Audience {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    Audience {
        app,
        token,
        account,
    }
}

impl Audience {
    fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    async fn event(&self, email: &str, slug: &str, attributes: Option<Value>) -> reqwest::Response {
        let mut body = json!({"email": email, "slug": slug});
        if let Some(attributes) = attributes {
            body["attributes"] = attributes;
        }
        self.app
            .send_json(Method::POST, &self.path("/events"), &self.token, &body)
            .await
    }

    async fn upsert(&self, body: Value) -> Value {
        expect_json(
            self.app
                .send_json(Method::POST, &self.path("/contacts"), &self.token, &body)
                .await,
            200,
        )
        .await
    }

    async fn list(&self, query: &str) -> Vec<String> {
        let page = expect_json(
            self.app
                .get(&self.path(&format!("/contacts?{query}")), &self.token)
                .await,
            200,
        )
        .await;
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|c| c["email"].as_str().expect("email").to_owned())
            .collect()
    }

    /// Sets a flag column directly: delivery and feedback, which set them in production,
    /// arrive with later issues.
    fn set_flag(&self, email: &str, column: &str) {
        use diesel::connection::SimpleConnection;
        let mut conn = self.app.database.connection();
        conn.batch_execute(&format!(
            "UPDATE contacts SET {column} = now() WHERE email_lower = lower('{email}')"
        ))
        .expect("update");
    }
}

#[tokio::test]
async fn events_normalise_slugs_and_create_the_contact() {
    let a = audience().await;
    for (given, stored) in [
        ("signedUp", "signed_up"),
        ("Signed Up", "signed_up"),
        ("signed-up", "signed_up"),
        ("HTTPRequest", "http_request"),
    ] {
        let event = expect_json(a.event("new@example.com", given, None).await, 200).await;
        assert_eq!(event["slug"], stored, "{given}");
        assert_eq!(event["accountId"], a.account.as_str());
        assert!(
            event["contactId"].is_string()
                && event["_id"].is_string()
                && event["timestamp"].is_string()
        );
    }
    let contacts = a.list("").await;
    assert_eq!(
        contacts,
        ["new@example.com"],
        "one contact, created by the first event"
    );
    let names = expect_json(a.app.get(&a.path("/events/names"), &a.token).await, 200).await;
    assert_eq!(names["items"][0]["slug"], "http_request");
    assert_eq!(names["items"][1]["slug"], "signed_up");
    assert_eq!(names["items"][1]["count"], 3);
    assert!(names["items"][1]["lastSeen"].is_string());
    for body in [
        json!({"email": "x@example.com"}),
        json!({"slug": "a"}),
        json!({"email": "nope", "slug": "a"}),
        json!({"email": "x@example.com", "slug": "--"}),
    ] {
        expect_problem(
            a.app
                .send_json(Method::POST, &a.path("/events"), &a.token, &body)
                .await,
            400,
        )
        .await;
    }
}

#[tokio::test]
async fn concurrent_first_events_for_one_email_make_one_contact() {
    let a = audience().await;
    let url = format!("{}{}", a.app.address, a.path("/events"));
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let request = a.app.client.post(&url).bearer_auth(&a.token).json(&json!({
                "email": if i % 2 == 0 { "Race@Example.com" } else { "race@example.com" },
                "slug": "signed_up"
            }));
            tokio::spawn(async move { request.send().await.expect("sent") })
        })
        .collect();
    let mut contact_ids = std::collections::HashSet::new();
    for task in tasks {
        let event = expect_json(task.await.expect("task"), 200).await;
        contact_ids.insert(event["contactId"].as_str().expect("id").to_owned());
    }
    assert_eq!(contact_ids.len(), 1, "every event went to the same contact");
    let count = expect_json(a.app.get(&a.path("/contacts/count"), &a.token).await, 200).await;
    assert_eq!(count["count"], 1);
}

#[tokio::test]
async fn upsert_merges_attributes_and_types_are_fixed_by_the_first_write() {
    let a = audience().await;
    let created = a
        .upsert(json!({"email": "Ada@Example.com", "attributes": {"first_name": "Ada", "score": 7, "vip": true, "renewal": "2026-12-01T10:00:00Z"}}))
        .await;
    assert_eq!(created["email"], "Ada@Example.com");
    assert_eq!(created["attributes"]["first_name"], "Ada");
    assert_eq!(created["attributes"]["score"], 7.0);
    assert_eq!(created["attributes"]["vip"], true);
    assert_eq!(created["attributes"]["renewal"], "2026-12-01T10:00:00.000Z");
    assert_eq!(
        created["attributes"]["email"], "Ada@Example.com",
        "system attributes resolved too"
    );
    assert_eq!(created["attributes"]["message_count"], 0.0);
    let merged = a
        .upsert(json!({"email": "ada@example.com", "attributes": {"score": 9}}))
        .await;
    assert_eq!(
        merged["_id"], created["_id"],
        "same contact, matched case-insensitively"
    );
    assert_eq!(merged["attributes"]["score"], 9.0);
    assert_eq!(
        merged["attributes"]["first_name"], "Ada",
        "untouched attributes stay"
    );
    let problem = expect_problem(
        a.app
            .send_json(
                Method::POST,
                &a.path("/contacts"),
                &a.token,
                &json!({"email": "b@example.com", "attributes": {"score": "high"}}),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "attributes.score");
    let problem = expect_problem(
        a.event("c@example.com", "x", Some(json!({"vip": 1}))).await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "attributes.vip");
    for attributes in [
        json!({"email": "x"}),
        json!({"bad-name": 1}),
        json!({"a": null}),
        json!({"a": [1]}),
    ] {
        expect_problem(
            a.app
                .send_json(
                    Method::POST,
                    &a.path("/contacts"),
                    &a.token,
                    &json!({"email": "d@example.com", "attributes": attributes}),
                )
                .await,
            400,
        )
        .await;
    }
    let count = expect_json(a.app.get(&a.path("/contacts/count"), &a.token).await, 200).await;
    assert_eq!(count["count"], 1, "rejected writes created no contact");
    let metas = expect_json(
        a.app.get(&a.path("/attributes?limit=100"), &a.token).await,
        200,
    )
    .await;
    let listed: Vec<(String, String, String)> = metas["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|m| {
            (
                m["slug"].as_str().unwrap_or_default().into(),
                m["type"].as_str().unwrap_or_default().into(),
                m["source"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("email", "string", "system"),
        ("create_date", "date", "system"),
        ("message_count", "number", "system"),
        ("first_name", "string", "custom"),
        ("renewal", "date", "custom"),
        ("score", "number", "custom"),
        ("vip", "boolean", "custom"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into()))
    .collect();
    assert_eq!(listed, expected);
    a.event("ada@example.com", "signedUp", None).await;
    let metas = expect_json(
        a.app.get(&a.path("/attributes?limit=100"), &a.token).await,
        200,
    )
    .await;
    assert!(metas["items"]
        .as_array()
        .expect("items")
        .iter()
        .any(|m| m["slug"] == "event.signed_up" && m["type"] == "date" && m["source"] == "event"));
    assert_eq!(
        expect_json(a.app.get(&a.path("/attributes/count"), &a.token).await, 200).await["count"],
        8
    );
}

#[tokio::test]
async fn list_sorts_by_every_key_and_filters() {
    let a = audience().await;
    a.upsert(json!({"email": "carol@example.com", "attributes": {"name": "carol"}}))
        .await;
    a.upsert(json!({"email": "alice@example.com", "attributes": {"name": "Alice"}}))
        .await;
    a.upsert(json!({"email": "bob@example.com"})).await;
    a.upsert(json!({"email": "dave@example.org", "attributes": {"name": "Dave"}}))
        .await;
    a.set_flag("carol@example.com", "unsubscribed_at");
    a.set_flag("dave@example.org", "hard_bounced_at");
    a.set_flag("alice@example.com", "complaint_at");
    assert_eq!(
        a.list("").await,
        [
            "alice@example.com",
            "carol@example.com",
            "dave@example.org",
            "bob@example.com"
        ],
        "default: name ascending, nameless last"
    );
    assert_eq!(
        a.list("sortBy=name&order=-1").await,
        [
            "dave@example.org",
            "carol@example.com",
            "alice@example.com",
            "bob@example.com"
        ],
        "nameless last in both directions"
    );
    assert_eq!(
        a.list("sortBy=email").await,
        [
            "alice@example.com",
            "bob@example.com",
            "carol@example.com",
            "dave@example.org"
        ]
    );
    assert_eq!(
        a.list("sortBy=email&order=-1").await,
        [
            "dave@example.org",
            "carol@example.com",
            "bob@example.com",
            "alice@example.com"
        ]
    );
    assert_eq!(
        a.list("sortBy=createDate").await,
        [
            "carol@example.com",
            "alice@example.com",
            "bob@example.com",
            "dave@example.org"
        ]
    );
    assert_eq!(
        a.list("sortBy=status").await,
        [
            "bob@example.com",
            "carol@example.com",
            "alice@example.com",
            "dave@example.org"
        ],
        "active < unsubscribed < complained < bounced"
    );
    assert_eq!(a.list("sortBy=messageCount&order=1").await.len(), 4);
    assert_eq!(
        a.list("search=EXAMPLE.ORG").await,
        ["dave@example.org"],
        "case-insensitive substring"
    );
    assert_eq!(
        a.list("email=BOB@example.com&search=example.org").await,
        ["bob@example.com"],
        "email takes precedence over search"
    );
    assert_eq!(
        a.list("email=nobody@example.com").await,
        Vec::<String>::new()
    );
    assert_eq!(a.list("status=bounced").await, ["dave@example.org"]);
    assert_eq!(a.list("status=unsubscribed").await, ["carol@example.com"]);
    let count = expect_json(
        a.app
            .get(&a.path("/contacts/count?search=example.com"), &a.token)
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 3, "count honours the same filters");
    assert_eq!(
        a.list("sortBy=email&limit=2&start=1").await,
        ["bob@example.com", "carol@example.com"]
    );
    let clamped = expect_json(
        a.app.get(&a.path("/contacts?limit=500"), &a.token).await,
        200,
    )
    .await;
    assert_eq!(clamped["limit"], 100);
    for query in [
        "sortBy=age",
        "order=0",
        "order=asc",
        "status=active",
        "email=not-an-email",
        "limit=-1",
    ] {
        expect_problem(
            a.app
                .get(&a.path(&format!("/contacts?{query}")), &a.token)
                .await,
            400,
        )
        .await;
    }
    let carol = expect_json(
        a.app
            .get(&a.path("/contacts?email=carol@example.com"), &a.token)
            .await,
        200,
    )
    .await;
    assert!(carol["items"][0]["unsubscribeDate"].is_string());
    assert!(carol["items"][0].get("hardBounced").is_none());
    assert_eq!(carol["items"][0]["topicUnsubscriptions"], json!([]));
}

#[tokio::test]
async fn unbounce_accepts_exactly_hard_bounced_false() {
    let a = audience().await;
    let id = a.upsert(json!({"email": "bounce@example.com"})).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    a.set_flag("bounce@example.com", "hard_bounced_at");
    let path = a.path(&format!("/contacts/{id}"));
    let flagged = expect_json(a.app.get(&path, &a.token).await, 200).await;
    assert!(flagged["hardBounced"].is_string());
    for body in [
        json!({}),
        json!({"hardBounced": true}),
        json!({"hardBounced": null}),
        json!({"hardBounced": "false"}),
        json!({"hardBounced": false, "email": "x@example.com"}),
    ] {
        expect_problem(
            a.app.send_json(Method::PATCH, &path, &a.token, &body).await,
            400,
        )
        .await;
    }
    let cleared = expect_json(
        a.app
            .send_json(
                Method::PATCH,
                &path,
                &a.token,
                &json!({"hardBounced": false}),
            )
            .await,
        200,
    )
    .await;
    assert!(
        cleared.get("hardBounced").is_none(),
        "absent after clearing: {cleared}"
    );
    expect_problem(
        a.app
            .send_json(
                Method::PATCH,
                &a.path("/contacts/01936c5e-7b2a-7cde-8f00-0123456789ab"),
                &a.token,
                &json!({"hardBounced": false}),
            )
            .await,
        404,
    )
    .await;
}

#[tokio::test]
async fn delete_removes_the_contact_its_events_and_attributes() {
    let a = audience().await;
    let event = expect_json(
        a.event(
            "gone@example.com",
            "signed_up",
            Some(json!({"plan": "pro"})),
        )
        .await,
        200,
    )
    .await;
    let id = event["contactId"].as_str().expect("id").to_owned();
    let deleted = expect_json(
        a.app
            .request(
                Method::DELETE,
                &a.path(&format!("/contacts/{id}")),
                Some(&a.token),
            )
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_eq!(deleted["email"], "gone@example.com");
    expect_problem(
        a.app
            .get(&a.path(&format!("/contacts/{id}")), &a.token)
            .await,
        404,
    )
    .await;
    expect_problem(
        a.app
            .request(
                Method::DELETE,
                &a.path(&format!("/contacts/{id}")),
                Some(&a.token),
            )
            .send()
            .await
            .expect("sent"),
        404,
    )
    .await;
    use diesel::{sql_types::BigInt, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut conn = a.app.database.connection();
    for table in ["contact_events", "contact_attributes", "contacts"] {
        let count: Count = diesel::sql_query(format!("SELECT count(*) AS n FROM {table}"))
            .get_result(&mut conn)
            .expect("count");
        assert_eq!(count.n, 0, "{table}");
    }
}

#[tokio::test]
async fn another_accounts_contact_is_404_and_non_members_401() {
    let a = audience().await;
    let id = a.upsert(json!({"email": "mine@example.com"})).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let other = a.app.create_account(&a.token, "Other").await;
    expect_problem(
        a.app
            .get(&format!("/v2/accounts/{other}/contacts/{id}"), &a.token)
            .await,
        404,
    )
    .await;
    expect_problem(
        a.app
            .request(
                Method::DELETE,
                &format!("/v2/accounts/{other}/contacts/{id}"),
                Some(&a.token),
            )
            .send()
            .await
            .expect("sent"),
        404,
    )
    .await;
    let eve = a.app.user_token("eve@example.com").await;
    expect_problem(a.app.get(&a.path("/contacts"), &eve).await, 401).await;
    expect_problem(
        a.app
            .send_json(
                Method::POST,
                &a.path("/events"),
                &eve,
                &json!({"email": "x@example.com", "slug": "s"}),
            )
            .await,
        401,
    )
    .await;
    expect_problem(a.app.get(&a.path("/attributes"), &eve).await, 401).await;
    assert_eq!(a.list("").await, ["mine@example.com"]);
}

impl Audience {
    async fn search(&self, body: Value) -> Vec<String> {
        let page = expect_json(
            self.app
                .send_json(
                    Method::POST,
                    &self.path("/contacts/search?limit=100"),
                    &self.token,
                    &body,
                )
                .await,
            200,
        )
        .await;
        let mut emails: Vec<String> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|c| c["email"].as_str().expect("email").to_owned())
            .collect();
        emails.sort();
        let count = expect_json(
            self.app
                .send_json(
                    Method::POST,
                    &self.path("/contacts/search/count"),
                    &self.token,
                    &body,
                )
                .await,
            200,
        )
        .await;
        assert_eq!(
            count["count"],
            emails.len(),
            "count agrees with the search for {body}"
        );
        emails
    }

    async fn search_with(&self, slug: &str, operator: &str, value: Value) -> Vec<String> {
        self.search(json!({"includeUnsubscribed": true, "attributes": [{"slug": slug, "operator": operator, "value": value}]})).await
    }
}

async fn seeded() -> Audience {
    let a = audience().await;
    a.upsert(json!({"email": "ann@example.com", "attributes": {"plan": "Pro", "seats": 12, "vip": true, "renewal": "2026-03-01T23:30:00Z"}})).await;
    a.upsert(json!({"email": "ben@example.com", "attributes": {"plan": "free", "seats": 1, "vip": false, "renewal": "2026-03-02T00:30:00+02:00"}})).await;
    a.upsert(json!({"email": "cat@example.com"})).await;
    a
}

#[tokio::test]
async fn search_evaluates_every_operator_family() {
    let a = seeded().await;
    assert_eq!(
        a.search_with("plan", "s_equal", json!("PRO")).await,
        ["ann@example.com"],
        "strings ignore case"
    );
    assert_eq!(
        a.search_with("plan", "s_not_equal", json!("pro")).await,
        ["ben@example.com"],
        "missing matches only not_exists"
    );
    assert_eq!(
        a.search_with("plan", "contains", json!("R")).await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("plan", "not_contains", json!("re")).await,
        ["ann@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "greater_than", json!(1)).await,
        ["ann@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "greater_than_equal", json!(1)).await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "less_than", json!(12)).await,
        ["ben@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "less_than_equal", json!(12)).await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "n_equal", json!(12)).await,
        ["ann@example.com"]
    );
    assert_eq!(
        a.search_with("seats", "n_not_equal", json!(12)).await,
        ["ben@example.com"]
    );
    assert_eq!(
        a.search_with("vip", "true", json!("")).await,
        ["ann@example.com"]
    );
    assert_eq!(
        a.search_with("vip", "false", json!("")).await,
        ["ben@example.com"]
    );
    assert_eq!(
        a.search_with("vip", "exists", json!("")).await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("vip", "not_exists", json!("")).await,
        ["cat@example.com"]
    );
    // 2026-03-01T23:30Z and 2026-03-02T00:30+02:00 (= 2026-03-01T22:30Z) fall on the same UTC day.
    assert_eq!(
        a.search_with("renewal", "d_equal", json!("2026-03-01"))
            .await,
        ["ann@example.com", "ben@example.com"],
        "dates compare by UTC day"
    );
    assert_eq!(
        a.search_with("renewal", "after", json!("2026-02-28T23:59:59Z"))
            .await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("renewal", "after", json!("2026-03-01")).await,
        Vec::<String>::new()
    );
    assert_eq!(
        a.search_with("renewal", "before", json!("2026-03-02"))
            .await,
        ["ann@example.com", "ben@example.com"]
    );
    assert_eq!(
        a.search_with("renewal", "d_not_equal", json!("2026-03-01"))
            .await,
        Vec::<String>::new()
    );
    assert_eq!(
        a.search_with("email", "contains", json!("BEN")).await,
        ["ben@example.com"],
        "system attributes are searchable"
    );
    let both = a
        .search(json!({"includeUnsubscribed": true, "attributes": [
        {"slug": "plan", "operator": "exists", "value": ""},
        {"slug": "seats", "operator": "greater_than", "value": 5}]}))
        .await;
    assert_eq!(both, ["ann@example.com"], "conditions combine with AND");
    assert_eq!(
        a.search(json!({"includeUnsubscribed": true})).await.len(),
        3,
        "no conditions reach everyone"
    );
}

#[tokio::test]
async fn search_returns_resolved_attributes_and_honours_unsubscriptions() {
    let a = seeded().await;
    let page = expect_json(a.app.send_json(Method::POST, &a.path("/contacts/search"), &a.token, &json!({"includeUnsubscribed": true, "attributes": [{"slug": "plan", "operator": "s_equal", "value": "pro"}]})).await, 200).await;
    let ann = &page["items"][0];
    assert_eq!(ann["attributes"]["plan"], "Pro");
    assert_eq!(ann["attributes"]["seats"], 12.0);
    assert_eq!(ann["attributes"]["renewal"], "2026-03-01T23:30:00.000Z");
    assert_eq!(ann["attributes"]["email"], "ann@example.com");
    a.set_flag("ben@example.com", "unsubscribed_at");
    assert_eq!(
        a.search(json!({"includeUnsubscribed": false})).await,
        ["ann@example.com", "cat@example.com"]
    );
    assert_eq!(
        a.search(json!({"includeUnsubscribed": true})).await.len(),
        3
    );
    let topics = expect_json(a.app.get(&a.path("/topics"), &a.token).await, 200).await;
    let topic = topics["items"][0]["_id"]
        .as_str()
        .expect("topic")
        .to_owned();
    {
        use diesel::connection::SimpleConnection;
        let mut conn = a.app.database.connection();
        conn.batch_execute(&format!(
            "INSERT INTO topic_unsubscriptions (account_id, contact_id, topic_id, created_at) \
             SELECT account_id, id, '{topic}', now() FROM contacts WHERE email = 'cat@example.com'"
        ))
        .expect("unsubscribe");
    }
    assert_eq!(
        a.search(json!({"includeUnsubscribed": true, "topicId": topic}))
            .await,
        ["ann@example.com", "ben@example.com"]
    );
    let cat = expect_json(
        a.app
            .get(&a.path("/contacts?email=cat@example.com"), &a.token)
            .await,
        200,
    )
    .await;
    assert_eq!(cat["items"][0]["topicUnsubscriptions"], json!([topic]));
}

#[tokio::test]
async fn bad_conditions_are_400_naming_the_part() {
    let a = seeded().await;
    let cases = [
        (
            json!({"slug": "nope", "operator": "exists", "value": ""}),
            "attributes[0].slug",
        ),
        (
            json!({"slug": "plan", "operator": "like", "value": "x"}),
            "attributes[0].operator",
        ),
        (
            json!({"slug": "plan", "operator": "greater_than", "value": 3}),
            "attributes[0].operator",
        ),
        (
            json!({"slug": "seats", "operator": "s_equal", "value": "3"}),
            "attributes[0].operator",
        ),
        (
            json!({"slug": "vip", "operator": "after", "value": "2026-01-01"}),
            "attributes[0].operator",
        ),
        (
            json!({"slug": "seats", "operator": "greater_than", "value": "3"}),
            "attributes[0].value",
        ),
        (
            json!({"slug": "renewal", "operator": "after", "value": "soon"}),
            "attributes[0].value",
        ),
        (
            json!({"slug": "plan", "operator": "s_equal", "value": 3}),
            "attributes[0].value",
        ),
        (
            json!({"slug": "plan", "operator": "exists", "value": "yes"}),
            "attributes[0].value",
        ),
    ];
    for (condition, field) in cases {
        let body = json!({"includeUnsubscribed": true, "attributes": [condition]});
        let problem = expect_problem(
            a.app
                .send_json(Method::POST, &a.path("/contacts/search"), &a.token, &body)
                .await,
            400,
        )
        .await;
        assert!(
            problem["errors"]
                .as_array()
                .expect("errors")
                .iter()
                .any(|e| e["field"] == field),
            "{condition} → {problem}"
        );
        expect_problem(
            a.app
                .send_json(
                    Method::POST,
                    &a.path("/contacts/search/count"),
                    &a.token,
                    &body,
                )
                .await,
            400,
        )
        .await;
    }
    let problem = expect_problem(
        a.app
            .send_json(
                Method::POST,
                &a.path("/contacts/search"),
                &a.token,
                &json!({}),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "includeUnsubscribed");
    let unknown_topic =
        json!({"includeUnsubscribed": true, "topicId": "01936c5e-7b2a-7cde-8f00-0123456789ab"});
    expect_problem(
        a.app
            .send_json(
                Method::POST,
                &a.path("/contacts/search"),
                &a.token,
                &unknown_topic,
            )
            .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn keyset_pages_of_a_search_equal_its_offset_pages() {
    let a = audience().await;
    for i in 0..7 {
        let plan = if i % 3 == 0 { "free" } else { "pro" };
        a.upsert(json!({"email": format!("k{i}@example.com"), "attributes": {"plan": plan}}))
            .await;
    }
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|c| c["_id"].as_str().expect("_id").to_owned())
            .collect()
    };
    for body in [
        json!({"includeUnsubscribed": true}),
        json!({"includeUnsubscribed": true, "attributes": [{"slug": "plan", "operator": "s_equal", "value": "pro"}]}),
    ] {
        let mut after: Option<String> = None;
        for n in 0.. {
            let by_offset = expect_json(
                a.app
                    .send_json(
                        Method::POST,
                        &a.path(&format!("/contacts/search?start={}&limit=2", n * 2)),
                        &a.token,
                        &body,
                    )
                    .await,
                200,
            )
            .await;
            let keyset_path = match &after {
                Some(last) => format!("/contacts/search?limit=2&after={last}"),
                None => "/contacts/search?limit=2".to_owned(),
            };
            let by_keyset = expect_json(
                a.app
                    .send_json(Method::POST, &a.path(&keyset_path), &a.token, &body)
                    .await,
                200,
            )
            .await;
            assert_eq!(ids(&by_keyset), ids(&by_offset), "page {n} of {body}");
            after = ids(&by_keyset).last().cloned();
            if after.is_none() {
                assert!(n >= 2, "the pages of {body} ended early");
                break;
            }
        }
    }
    // A malformed or repeated `after` is a 400 naming it.
    for query in ["after=nope", "after=1&after=2"] {
        let problem = expect_problem(
            a.app
                .send_json(
                    Method::POST,
                    &a.path(&format!("/contacts/search?{query}")),
                    &a.token,
                    &json!({"includeUnsubscribed": true}),
                )
                .await,
            400,
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], "after", "{query}: {problem}");
    }
}

#[tokio::test]
async fn attribute_pages_cross_from_system_to_stored_metas() {
    let a = audience().await;
    a.upsert(json!({"email": "m@example.com", "attributes": {"b": 1, "a": "x", "d": true, "c": "2026-01-01"}}))
        .await;
    let slugs = |page: Value| -> Vec<String> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|m| m["slug"].as_str().expect("slug").to_owned())
            .collect()
    };
    let all = slugs(
        expect_json(
            a.app.get(&a.path("/attributes?limit=100"), &a.token).await,
            200,
        )
        .await,
    );
    assert_eq!(
        all,
        ["email", "create_date", "message_count", "a", "b", "c", "d"]
    );
    for (start, limit) in [(0, 2), (2, 3), (3, 2), (5, 10), (7, 5), (100, 5)] {
        let page = slugs(
            expect_json(
                a.app
                    .get(
                        &a.path(&format!("/attributes?start={start}&limit={limit}")),
                        &a.token,
                    )
                    .await,
                200,
            )
            .await,
        );
        let expected: Vec<String> = all.iter().skip(start).take(limit).cloned().collect();
        assert_eq!(page, expected, "start {start} limit {limit}");
    }
    assert_eq!(
        expect_json(a.app.get(&a.path("/attributes/count"), &a.token).await, 200).await["count"],
        7
    );
}

#[tokio::test]
async fn event_names_are_the_same_before_and_after_folding_and_follow_deletions() {
    use mailroom_server::event_names_worker::EventNamesWorker;

    let a = audience().await;
    for (email, slug) in [
        ("p@example.com", "opened"),
        ("q@example.com", "opened"),
        ("p@example.com", "clicked"),
        ("q@example.com", "opened"),
    ] {
        expect_json(a.event(email, slug, None).await, 200).await;
        a.app.clock.advance(time::Duration::seconds(1));
    }
    let names = || async {
        let page = expect_json(a.app.get(&a.path("/events/names"), &a.token).await, 200).await;
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|n| {
                (
                    n["slug"].as_str().expect("slug").to_owned(),
                    n["count"].as_u64().expect("count"),
                    n["lastSeen"].as_str().expect("lastSeen").to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let before = names().await;
    assert_eq!(
        before
            .iter()
            .map(|(s, c, _)| (s.as_str(), *c))
            .collect::<Vec<_>>(),
        [("clicked", 1), ("opened", 3)]
    );
    let worker = EventNamesWorker::new(a.app.services.clone());
    assert_eq!(
        worker.run_once().await.expect("fold"),
        4,
        "every increment folded"
    );
    assert_eq!(worker.run_once().await.expect("fold"), 0, "nothing left");
    assert_eq!(names().await, before, "the same names after folding");
    // More events after the fold add to the totals.
    expect_json(a.event("r@example.com", "opened", None).await, 200).await;
    let after = names().await;
    assert_eq!(after[1].1, 4);
    // Deleting a contact takes its events out of the counts, folded or not.
    let contacts = expect_json(
        a.app.get(&a.path("/contacts?limit=100"), &a.token).await,
        200,
    )
    .await;
    let p = contacts["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|c| c["email"] == "p@example.com")
        .expect("p")["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    expect_json(
        a.app
            .request(
                Method::DELETE,
                &a.path(&format!("/contacts/{p}")),
                Some(&a.token),
            )
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    let deleted = names().await;
    assert_eq!(
        deleted
            .iter()
            .map(|(s, c, _)| (s.as_str(), *c))
            .collect::<Vec<_>>(),
        [("opened", 3)],
        "p's only `clicked` is gone, and one of the `opened`"
    );
    worker.run_once().await.expect("fold");
    assert_eq!(
        names().await,
        deleted,
        "the same after folding the deletion"
    );
}

#[tokio::test]
async fn a_contacts_events_are_listed_newest_first_and_paged() {
    let a = audience().await;
    for slug in ["signed_up", "opened_app", "bought"] {
        expect_json(a.event("ada@example.org", slug, None).await, 200).await;
        // Distinct times, so the order is the order of recording.
        a.app.clock.advance(time::Duration::seconds(1));
    }
    expect_json(a.event("grace@example.org", "signed_up", None).await, 200).await;
    let contact = a.upsert(json!({"email": "ada@example.org"})).await;
    let id = contact["_id"].as_str().expect("id");
    let page = expect_json(
        a.app
            .get(&a.path(&format!("/contacts/{id}/events")), &a.token)
            .await,
        200,
    )
    .await;
    let slugs: Vec<&str> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|event| event["slug"].as_str().expect("slug"))
        .collect();
    assert_eq!(slugs, ["bought", "opened_app", "signed_up"], "{page}");
    assert!(page["items"]
        .as_array()
        .expect("items")
        .iter()
        .all(|event| event["contactId"] == id));
    let second = expect_json(
        a.app
            .get(
                &a.path(&format!("/contacts/{id}/events?start=1&limit=1")),
                &a.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(second["items"][0]["slug"], "opened_app", "{second}");
    // An unknown contact, and one of another account, are 404s.
    let unknown = "01a00000-0000-7000-8000-000000000001";
    expect_problem(
        a.app
            .get(&a.path(&format!("/contacts/{unknown}/events")), &a.token)
            .await,
        404,
    )
    .await;
    let eve = a.app.user_token("eve@example.com").await;
    let elsewhere = a.app.create_account(&eve, "Elsewhere").await;
    expect_problem(
        a.app
            .get(
                &format!("/v2/accounts/{elsewhere}/contacts/{id}/events"),
                &eve,
            )
            .await,
        404,
    )
    .await;
}

/// The email filter matches its needle literally: LIKE's `%`, `_` and `\` (which the
/// filter uses so that a trigram index can serve it) are escaped, for needles of every
/// length, including the one- and two-character ones no trigram covers.
#[tokio::test]
async fn search_matches_like_metacharacters_literally() {
    let a = audience().await;
    for email in [
        "a%b@example.com",
        "a_b@example.com",
        "axb@example.com",
        "axxb@example.com",
        "ab@example.com",
    ] {
        a.upsert(json!({ "email": email })).await;
    }
    // %25 is `%`, %5C is `\`.
    assert_eq!(
        a.list("sortBy=email&search=a%25b").await,
        ["a%b@example.com"]
    );
    assert_eq!(
        a.list("sortBy=email&search=A_B@EXAMPLE").await,
        ["a_b@example.com"]
    );
    assert_eq!(a.list("sortBy=email&search=%25").await, ["a%b@example.com"]);
    assert_eq!(a.list("sortBy=email&search=_").await, ["a_b@example.com"]);
    assert_eq!(
        a.list("sortBy=email&search=%25b").await,
        ["a%b@example.com"]
    );
    assert_eq!(
        a.list("sortBy=email&search=a%5Cb").await,
        Vec::<String>::new()
    );
    assert_eq!(
        a.list("sortBy=email&search=%5C").await,
        Vec::<String>::new()
    );
    assert_eq!(
        a.list("sortBy=email&search=%5C%25").await,
        Vec::<String>::new()
    );
    assert_eq!(
        a.list("sortBy=email&search=xb@").await,
        ["axb@example.com", "axxb@example.com"]
    );
    let count = expect_json(
        a.app
            .get(&a.path("/contacts/count?search=%5F"), &a.token)
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 1, "the count uses the same literal match");
}

/// An account holds at most 1,000 custom attribute slugs: once it has them, a write that
/// would make a new one is a 400 naming the attribute and the bound, the existing slugs
/// still take values, and an event (a `sending` token's route) cannot add one either.
#[tokio::test]
async fn an_account_holds_at_most_1000_custom_attributes_and_the_1001st_is_a_400() {
    let audience = audience().await;
    let first: serde_json::Map<String, Value> =
        (0..1_000).map(|n| (format!("a{n}"), json!(n))).collect();
    audience
        .upsert(json!({"email": "ada@example.com", "attributes": first}))
        .await;
    let refused = expect_problem(
        audience
            .app
            .send_json(
                Method::POST,
                &audience.path("/contacts"),
                &audience.token,
                &json!({"email": "grace@example.com", "attributes": {"a1": 2, "plan": "pro"}}),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(
        refused["errors"][0]["field"], "attributes.plan",
        "{refused}"
    );
    let message = refused["errors"][0]["message"].as_str().expect("message");
    assert!(message.contains("1000 custom attributes"), "{message}");
    let grace = audience
        .upsert(json!({"email": "grace@example.com", "attributes": {"a999": 5}}))
        .await;
    assert_eq!(grace["attributes"]["a999"], 5.0);
    let event = audience
        .event(
            "grace@example.com",
            "signed_up",
            Some(json!({"plan": "pro"})),
        )
        .await;
    let refused = expect_problem(event, 400).await;
    assert_eq!(
        refused["errors"][0]["field"], "attributes.plan",
        "{refused}"
    );
}
