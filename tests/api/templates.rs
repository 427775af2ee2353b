use mailroom_tests::{expect_json, expect_problem, spawn_app};

#[tokio::test]
async fn list_count_and_get_templates() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    let count = expect_json(
        app.get(&format!("/v2/accounts/{id}/templates/count"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(count, serde_json::json!({"count": 2}));
    let list = expect_json(
        app.get(&format!("/v2/accounts/{id}/templates"), &token)
            .await,
        200,
    )
    .await;
    let first = &list["items"][0];
    let template_id = first["_id"].as_str().expect("id");
    let one = expect_json(
        app.get(
            &format!("/v2/accounts/{id}/templates/{template_id}"),
            &token,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(&one, first);
    assert_eq!(one["contentType"], "html");
    assert!(one.get("fromEmail").is_none(), "unset fields are omitted");
    expect_problem(
        app.get(
            &format!("/v2/accounts/{id}/templates/01936c5e-7b2a-7cde-8f00-0123456789ab"),
            &token,
        )
        .await,
        404,
    )
    .await;
    expect_problem(
        app.get(&format!("/v2/accounts/{id}/templates/not-an-id"), &token)
            .await,
        404,
    )
    .await;
}

use mailroom_tests::{spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

struct Fixture {
    app: TestApp,
    token: String,
    account: String,
}

async fn fixture() -> Fixture {
    let app = spawn_app_with(|config| config.allow_private_egress = true).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    Fixture {
        app,
        token,
        account,
    }
}

impl Fixture {
    fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}/templates{rest}", self.account)
    }

    async fn create(&self, body: Value) -> Value {
        expect_json(
            self.app
                .send_json(Method::POST, &self.path(""), &self.token, &body)
                .await,
            200,
        )
        .await
    }

    async fn patch(&self, id: &str, body: Value) -> reqwest::Response {
        self.app
            .send_json(
                Method::PATCH,
                &self.path(&format!("/{id}")),
                &self.token,
                &body,
            )
            .await
    }
}

fn receipt() -> Value {
    json!({"name": "Receipt", "slug": "receipt", "subject": "Your receipt, {{ first_name }}", "content": "<p>Total: {{ total }}</p>"})
}

fn full() -> Value {
    json!({
        "name": "Full", "slug": "full", "subject": "S", "content": "<p>C</p>", "textContent": "T",
        "contentType": "wysiwyg", "fromName": "Ada", "fromEmail": "ada@example.com",
        "cc": "{{ manager }}", "bcc": "audit@example.com", "rcptName": "{{ first_name }}",
        "replyTo": "support@example.com", "clickTracking": true, "openTracking": false
    })
}

#[tokio::test]
async fn create_requires_four_fields_and_defaults_the_rest() {
    let f = fixture().await;
    let created = f.create(receipt()).await;
    assert_eq!(created["contentType"], "html");
    assert_eq!(created["slug"], "receipt");
    assert!(
        created.get("clickTracking").is_none(),
        "unset means inherit"
    );
    let problem = expect_problem(
        f.app
            .send_json(Method::POST, &f.path(""), &f.token, &json!({}))
            .await,
        400,
    )
    .await;
    let fields: Vec<_> = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].clone())
        .collect();
    assert_eq!(
        fields,
        [
            json!("name"),
            json!("slug"),
            json!("subject"),
            json!("content")
        ]
    );
    let fetched = expect_json(
        f.app
            .get(
                &f.path(&format!("/{}", created["_id"].as_str().expect("id"))),
                &f.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(fetched, created);
}

#[tokio::test]
async fn slugs_are_unique_per_account_on_create_and_patch() {
    let f = fixture().await;
    f.create(receipt()).await;
    let problem = expect_problem(
        f.app
            .send_json(Method::POST, &f.path(""), &f.token, &receipt())
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "slug");
    let other = f
        .create(json!({"name": "Other", "slug": "other", "subject": "S", "content": "C"}))
        .await;
    let problem = expect_problem(
        f.patch(
            other["_id"].as_str().expect("id"),
            json!({"slug": "receipt"}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "slug");
    for slug in ["Receipt", "has space", "", "ünïcode"] {
        let mut body = receipt();
        body["slug"] = json!(slug);
        expect_problem(
            f.app
                .send_json(Method::POST, &f.path(""), &f.token, &body)
                .await,
            400,
        )
        .await;
    }
    // The same slug in another account is fine.
    let second = f.app.create_account(&f.token, "Second").await;
    let path = format!("/v2/accounts/{second}/templates");
    expect_json(
        f.app
            .send_json(Method::POST, &path, &f.token, &receipt())
            .await,
        200,
    )
    .await;
}

#[tokio::test]
async fn rule_1_omitted_keys_are_left_alone() {
    let f = fixture().await;
    let created = f.create(full()).await;
    let id = created["_id"].as_str().expect("id");
    let patched = expect_json(f.patch(id, json!({"subject": "New"})).await, 200).await;
    for key in [
        "name",
        "slug",
        "content",
        "textContent",
        "contentType",
        "fromName",
        "fromEmail",
        "cc",
        "bcc",
        "rcptName",
        "replyTo",
        "clickTracking",
        "openTracking",
        "createDate",
    ] {
        assert_eq!(patched[key], created[key], "{key}");
    }
    assert_eq!(patched["subject"], "New");
}

#[tokio::test]
async fn rule_2_null_clears_exactly_the_clearable_fields() {
    let f = fixture().await;
    let created = f.create(full()).await;
    let id = created["_id"].as_str().expect("id");
    let cleared = [
        "fromName",
        "fromEmail",
        "cc",
        "bcc",
        "rcptName",
        "replyTo",
        "clickTracking",
        "openTracking",
        "preferredEmailServer",
    ];
    let body: serde_json::Map<String, Value> = cleared
        .iter()
        .map(|k| ((*k).to_owned(), Value::Null))
        .collect();
    let patched = expect_json(f.patch(id, Value::Object(body)).await, 200).await;
    for key in cleared {
        assert!(patched.get(key).is_none(), "{key} cleared: {patched}");
    }
    assert_eq!(patched["textContent"], "T", "not clearable, untouched");
    for key in ["name", "slug", "subject", "contentType"] {
        let problem = expect_problem(f.patch(id, json!({ key: null })).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], key);
    }
}

#[tokio::test]
async fn rule_3_content_fields_are_not_nullable() {
    let f = fixture().await;
    let id = f.create(full()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    for key in ["content", "textContent"] {
        let problem = expect_problem(f.patch(&id, json!({ key: null })).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], key);
    }
    let unchanged = expect_json(f.app.get(&f.path(&format!("/{id}")), &f.token).await, 200).await;
    assert_eq!(unchanged["content"], "<p>C</p>");
    assert_eq!(unchanged["textContent"], "T");
}

#[tokio::test]
async fn rule_4_empty_string_is_refused_for_sender_reply_to_and_copy_fields() {
    let f = fixture().await;
    let id = f.create(full()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    for key in [
        "fromName",
        "fromEmail",
        "cc",
        "bcc",
        "replyTo",
        "preferredEmailServer",
    ] {
        let problem = expect_problem(f.patch(&id, json!({ key: "" })).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], key);
    }
    let mut body = receipt();
    body["fromName"] = json!("");
    expect_problem(
        f.app
            .send_json(Method::POST, &f.path(""), &f.token, &body)
            .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn rule_5_cleared_tracking_inherits_the_account_default() {
    let f = fixture().await;
    let id = f.create(full()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let patched = expect_json(
        f.patch(&id, json!({"clickTracking": null, "openTracking": null}))
            .await,
        200,
    )
    .await;
    assert!(
        patched.get("clickTracking").is_none() && patched.get("openTracking").is_none(),
        "{patched}"
    );
    let set_again = expect_json(f.patch(&id, json!({"openTracking": true})).await, 200).await;
    assert_eq!(set_again["openTracking"], true);
    assert!(set_again.get("clickTracking").is_none());
}

#[tokio::test]
async fn rule_6_copies_and_reply_to_may_hold_variables() {
    let f = fixture().await;
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let patched = expect_json(
        f.patch(
            &id,
            json!({"cc": "{{ manager_email }}", "bcc": "not-an-address", "replyTo": "{{ owner }}"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["cc"], "{{ manager_email }}");
    assert_eq!(patched["bcc"], "not-an-address");
    assert_eq!(patched["replyTo"], "{{ owner }}");
}

#[tokio::test]
async fn rule_7_content_type_and_from_email_are_checked() {
    let f = fixture().await;
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    expect_json(f.patch(&id, json!({"contentType": "wysiwyg"})).await, 200).await;
    let problem = expect_problem(f.patch(&id, json!({"contentType": "markdown"})).await, 400).await;
    assert_eq!(problem["errors"][0]["field"], "contentType");
    let problem = expect_problem(
        f.patch(&id, json!({"fromEmail": "not an email"})).await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "fromEmail");
    let ok = expect_json(
        f.patch(&id, json!({"fromEmail": "billing@example.com"}))
            .await,
        200,
    )
    .await;
    assert_eq!(ok["fromEmail"], "billing@example.com");
}

#[tokio::test]
async fn rule_8_the_stored_template_changes_at_once() {
    // Sends read the stored row when they render, so a read after PATCH is what the next
    // send uses (the delivery tests exercise the send itself).
    let f = fixture().await;
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    expect_json(f.patch(&id, json!({"content": "<p>v2</p>"})).await, 200).await;
    let fetched = expect_json(f.app.get(&f.path(&format!("/{id}")), &f.token).await, 200).await;
    assert_eq!(fetched["content"], "<p>v2</p>");
    assert_ne!(fetched["updateDate"], fetched["createDate"]);
}

#[tokio::test]
async fn empty_patch_and_broken_template_syntax_are_400() {
    let f = fixture().await;
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    expect_problem(f.patch(&id, json!({})).await, 400).await;
    let problem = expect_problem(
        f.patch(&id, json!({"content": "<p>\n{{ first_name </p>"}))
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "content");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .expect("message")
            .contains("line 2"),
        "{problem}"
    );
    let mut body = receipt();
    body["subject"] = json!("{% if %}");
    let problem = expect_problem(
        f.app
            .send_json(Method::POST, &f.path(""), &f.token, &body)
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "subject");
}

#[tokio::test]
async fn delete_is_refused_while_an_automation_sends_the_template() {
    let f = fixture().await;
    let list = expect_json(f.app.get(&f.path(""), &f.token).await, 200).await;
    let welcome = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|t| t["slug"] == "welcome")
        .expect("welcome")["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let problem = expect_problem(
        f.app
            .request(
                Method::DELETE,
                &f.path(&format!("/{welcome}")),
                Some(&f.token),
            )
            .send()
            .await
            .expect("sent"),
        400,
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("Welcome new sign-ups"),
        "{problem}"
    );
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let deleted = expect_json(
        f.app
            .request(Method::DELETE, &f.path(&format!("/{id}")), Some(&f.token))
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_eq!(deleted["slug"], "receipt");
    expect_problem(f.app.get(&f.path(&format!("/{id}")), &f.token).await, 404).await;
    expect_problem(
        f.app
            .request(Method::DELETE, &f.path(&format!("/{id}")), Some(&f.token))
            .send()
            .await
            .expect("sent"),
        404,
    )
    .await;
}

#[tokio::test]
async fn another_accounts_template_is_404_for_patch_and_delete() {
    let f = fixture().await;
    let id = f.create(receipt()).await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let other = f.app.create_account(&f.token, "Other").await;
    let path = format!("/v2/accounts/{other}/templates/{id}");
    expect_problem(
        f.app
            .send_json(Method::PATCH, &path, &f.token, &json!({"name": "x"}))
            .await,
        404,
    )
    .await;
    expect_problem(
        f.app
            .request(Method::DELETE, &path, Some(&f.token))
            .send()
            .await
            .expect("sent"),
        404,
    )
    .await;
    let unchanged = expect_json(f.app.get(&f.path(&format!("/{id}")), &f.token).await, 200).await;
    assert_eq!(unchanged["name"], "Receipt");
}

/// The value of `name` in the `Set-Cookie` headers of `response`.
fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            let (pair, _) = value.split_once(';').unwrap_or((value, ""));
            let (key, value) = pair.split_once('=')?;
            (key.trim() == name).then(|| value.to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} cookie"))
}

#[tokio::test]
async fn the_consoles_preview_frame_loads_no_remote_image() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let template = expect_json(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/templates"),
            &token,
            &json!({"name": "Pixel", "slug": "pixel", "subject": "Hi",
                    "content": "<img src=\"https://tracker.example/opened.gif\">"}),
        )
        .await,
        200,
    )
    .await;
    let template = template["_id"].as_str().expect("id").to_owned();

    // Sign in to the console with the token, as a browser would.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let form = http
        .get(format!("{}/console/sign-in", app.address))
        .send()
        .await
        .expect("the sign-in form");
    let form_cookie = set_cookie(&form, "mailroom_console_form");
    let page = form.text().await.expect("page");
    let form_token = page
        .split("name=\"form_token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form token")
        .to_owned();
    let signed_in = http
        .post(format!("{}/console/sign-in", app.address))
        .header("cookie", format!("mailroom_console_form={form_cookie}"))
        .form(&[
            ("form_token", form_token.as_str()),
            ("token", token.as_str()),
        ])
        .send()
        .await
        .expect("signed in");
    assert_eq!(signed_in.status(), 303);
    let session = set_cookie(&signed_in, "mailroom_console");

    let frame = http
        .get(format!(
            "{}/console/accounts/{account}/templates/{template}/preview",
            app.address
        ))
        .header("cookie", format!("mailroom_console={session}"))
        .send()
        .await
        .expect("the preview frame");
    assert_eq!(frame.status(), 200);
    let policy = frame.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(policy.contains("img-src data:;"), "{policy}");
    assert!(!policy.contains("https:"), "{policy}");
    assert!(policy.starts_with("sandbox"), "{policy}");
    let html = frame.text().await.expect("html");
    assert!(
        html.contains("tracker.example"),
        "the frame shows the template: {html}"
    );
}

#[tokio::test]
async fn a_visual_editor_templates_html_is_stored_valid_and_inert() {
    let f = fixture().await;
    let messy = "<p>Hi {{ first_name }}<p>News<ul><li>one</ul></p></p>\
                 <script>alert(1)</script><p onclick=\"steal()\">{% if seats > 3 %}big{% endif %}</p>";
    let visual = f
        .create(json!({
            "name": "Visual", "slug": "visual", "subject": "S", "contentType": "wysiwyg",
            "content": messy
        }))
        .await;
    assert_eq!(
        visual["content"],
        "<p>Hi {{ first_name }}</p><p>News</p><ul><li>one</li></ul><p></p><p></p>\
         <p>{% if seats > 3 %}big{% endif %}</p>"
    );
    let id = visual["_id"].as_str().expect("id");
    let read = expect_json(f.app.get(&f.path(&format!("/{id}")), &f.token).await, 200).await;
    assert_eq!(read["content"], visual["content"]);
    let patched = expect_json(
        f.patch(id, json!({"content": "<b>bold<i>both</b>italic</i>"}))
            .await,
        200,
    )
    .await;
    assert_eq!(patched["content"], "<b>bold<i>both</i></b><i>italic</i>");
    // An HTML template is stored as written, whatever it holds.
    let html = f
        .create(json!({"name": "Raw", "slug": "raw", "subject": "S", "content": messy}))
        .await;
    assert_eq!(html["content"], messy);
}

#[tokio::test]
async fn a_visual_template_nested_past_the_bound_is_a_400_answered_at_once() {
    let f = fixture().await;
    let started = std::time::Instant::now();
    let problem = expect_problem(
        f.app
            .send_json(
                Method::POST,
                &f.path(""),
                &f.token,
                &json!({
                    "name": "Deep", "slug": "deep", "subject": "S", "contentType": "wysiwyg",
                    "content": "<div>".repeat(30_000)
                }),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "content", "{problem}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "answered in {:?}",
        started.elapsed()
    );
}
