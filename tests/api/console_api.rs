//! The API additions the console reads: per-announcement counters on the
//! announcement read, the message log's `announcementId` filter, template previews
//! rendered as a send would, and test sends.

use mailroom_tests::expect_problem;
use reqwest::Method;
use serde_json::{json, Value};

use crate::campaign_setup::Setup;

const PUBLIC_URL: &str = "https://mail.console.test";

async fn setup() -> Setup {
    Setup::new_with(|config| config.public_url = PUBLIC_URL.to_owned()).await
}

/// The mail `recipient` received whose subject contains `subject`, with enough
/// quoted-printable undone for URLs. The subject tells an announcement's mail from a
/// transactional one to the same address, whichever arrived first.
fn received_by(setup: &Setup, recipient: &str, subject: &str) -> String {
    let messages = setup.smtp.messages();
    let message = messages
        .iter()
        .find(|message| {
            message.recipients.iter().any(|to| to == recipient)
                && message
                    .data
                    .lines()
                    .any(|line| line.starts_with("Subject:") && line.contains(subject))
        })
        .expect("received");
    message.data.replace("=\r\n", "").replace("=3D", "=")
}

fn first_link(mail: &str, route: &str) -> String {
    let prefix = format!("{PUBLIC_URL}{route}");
    let at = mail
        .find(&prefix)
        .unwrap_or_else(|| panic!("no {route} link in {mail}"));
    let token: String = mail[at + prefix.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    format!("/{}{token}", route.trim_start_matches('/'))
}

/// Expects a 400 problem whose detail or errors name `field`.
async fn problem_naming(response: reqwest::Response, field: &str) -> Value {
    let problem = expect_problem(response, 400).await;
    assert!(
        problem["errors"]
            .as_array()
            .is_some_and(|errors| errors.iter().any(|e| e.to_string().contains(field)))
            || problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains(field)),
        "{field} named: {problem}"
    );
    problem
}

fn counters(announcement: &Value) -> Value {
    announcement["counters"].clone()
}

#[tokio::test]
async fn announcement_counters_follow_every_message_and_the_log_filters_by_announcement() {
    let setup = setup().await;
    let tracked = setup
        .ok(
            Method::POST,
            "/templates",
            &json!({
                "name": "Promo", "slug": "promo", "subject": "Hi {{ email }}",
                "content": "<html><body><p><a href=\"https://shop.example/sale\">Sale</a></p></body></html>",
                "openTracking": true, "clickTracking": true
            }),
        )
        .await;
    for name in ["a", "b", "c"] {
        setup
            .contact(&format!("{name}@example.org"), json!({}))
            .await;
    }
    setup.contact("d-unsub@example.org", json!({})).await;
    // A transactional message of the same account is in no announcement's counters.
    setup
        .ok(
            Method::POST,
            "/messages",
            &json!({"slug": "news", "email": "a@example.org"}),
        )
        .await;

    let created = setup
        .ok(
            Method::POST,
            "/announcements",
            &json!({"name": "Sale", "templateId": tracked["_id"], "includeUnsubscribed": false}),
        )
        .await;
    let id = created["_id"].as_str().expect("id").to_owned();
    assert!(
        created.get("counters").is_none(),
        "only the read carries counters"
    );
    let read = setup.get(&format!("/announcements/{id}")).await;
    assert_eq!(
        counters(&read),
        json!({"queued": 0, "sending": 0, "sent": 0, "failed": 0, "bounced": 0,
               "skipped": 0, "opened": 0, "clicked": 0})
    );

    setup.announcement_round(100).await;
    let expanded = setup.get(&format!("/announcements/{id}")).await;
    assert_eq!(expanded["audienceSize"], 4);
    assert_eq!(counters(&expanded)["queued"], 4);
    // Unsubscribed after the expansion queued it: skipped when it falls due.
    setup.sql("UPDATE contacts SET unsubscribed_at = now() WHERE email = 'd-unsub@example.org'");

    // One recipient's server refuses the mailbox for good: a hard bounce.
    setup.smtp.script_rcpt_replies(["550 5.1.1 no such user"]);
    setup.drain_messages().await;
    let sent = setup.get(&format!("/announcements/{id}")).await;
    let sent_counters = counters(&sent);
    assert_eq!(sent_counters["queued"], 0, "{sent_counters}");
    assert_eq!(sent_counters["sending"], 0, "{sent_counters}");
    assert_eq!(
        sent_counters["skipped"], 1,
        "the unsubscribed contact: {sent_counters}"
    );
    // The transactional message took the scripted refusal when it went first; count what
    // the announcement's messages got from the log itself.
    let log = setup
        .get(&format!("/messages?announcementId={id}&limit=100"))
        .await;
    let items = log["items"].as_array().expect("items");
    assert_eq!(items.len(), 4, "only the announcement's messages: {log}");
    assert!(items.iter().all(|m| m["announcementId"] == id.as_str()));
    let with_status = |status: &str| items.iter().filter(|m| m["status"] == status).count() as u64;
    assert_eq!(sent_counters["sent"], with_status("sent"));
    assert_eq!(sent_counters["bounced"], with_status("bounced"));
    assert_eq!(with_status("sent") + with_status("bounced"), 3);
    let count = setup
        .get(&format!(
            "/messages/count?announcementId={id}&status=skipped"
        ))
        .await;
    assert_eq!(count["count"], 1);

    // First opens and clicks count once per message, however often they come.
    let recipient = items
        .iter()
        .find(|m| m["status"] == "sent")
        .and_then(|m| m["email"].as_str())
        .expect("a sent message")
        .to_owned();
    let mail = received_by(&setup, &recipient, &format!("Hi {recipient}"));
    let pixel = first_link(&mail, "/t/o/");
    let click = first_link(&mail, "/t/c/");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    for path in [&pixel, &pixel, &click, &click] {
        let response = client
            .get(format!("{}{path}", setup.app.address))
            .send()
            .await
            .expect("sent");
        assert!(
            response.status().as_u16() < 400,
            "{path}: {}",
            response.status()
        );
    }
    let engaged = counters(&setup.get(&format!("/announcements/{id}")).await);
    assert_eq!(engaged["opened"], 1, "{engaged}");
    assert_eq!(engaged["clicked"], 1, "{engaged}");
    // Later state changes move a message between counters: a late bounce report, posted
    // to the feedback endpoint, makes the sent message bounced.
    let header = items
        .iter()
        .find(|m| m["email"] == recipient.as_str())
        .and_then(|m| m["messageId"].as_str())
        .expect("the sent message's Message-ID")
        .to_owned();
    let report = std::fs::read_to_string(format!(
        "{}/fixtures/feedback/dsn-postfix.eml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the DSN fixture")
    .replace("{{MESSAGE_ID}}", &header)
    .replace("{{RECIPIENT}}", &recipient);
    let response = setup
        .app
        .request(Method::POST, &setup.path("/feedback"), Some(&setup.token))
        .header("content-type", "message/rfc822")
        .body(report)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200, "the bounce report");
    let late = counters(&setup.get(&format!("/announcements/{id}")).await);
    assert_eq!(late["sent"].as_u64(), Some(with_status("sent") - 1));
    assert_eq!(late["bounced"].as_u64(), Some(with_status("bounced") + 1));

    // A bad filter is the client's mistake.
    let response = setup
        .call(Method::GET, "/messages?announcementId=nope", &Value::Null)
        .await;
    problem_naming(response, "announcementId").await;
}

#[tokio::test]
async fn a_preview_renders_as_a_send_would_with_the_contacts_attributes_and_data() {
    let setup = setup().await;
    setup
        .contact(
            "grace@example.org",
            json!({"first_name": "Grace", "plan": "pro"}),
        )
        .await;
    let template = setup
        .ok(
            Method::POST,
            "/templates",
            &json!({
                "name": "Welcome", "slug": "console-welcome",
                "subject": "Welcome {{ first_name }}\r\nBcc: x@evil.example",
                "content": "<p>Hi {{ first_name }} on {{ plan }}: {{ note }}</p><a href=\"{{ unsubscribe_url }}\">u</a>",
                "textContent": "Hi {{ first_name }}"
            }),
        )
        .await;
    let id = template["_id"].as_str().expect("id");
    let preview = setup
        .ok(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({"email": "grace@example.org", "data": {"plan": "team", "note": "<b>new</b>"}}),
        )
        .await;
    // The subject is single-line as in a send; data wins over the contact's attribute;
    // the HTML body escapes variables; the sender is the server's default pair.
    assert_eq!(preview["subject"], "Welcome Grace Bcc: x@evil.example");
    assert_eq!(
        preview["html"],
        "<p>Hi Grace on team: &lt;b&gt;new&lt;&#x2f;b&gt;</p>\
         <a href=\"https:&#x2f;&#x2f;mail.console.test&#x2f;u&#x2f;preview\">u</a>"
    );
    assert_eq!(preview["text"], "Hi Grace");
    assert_eq!(preview["fromEmail"], "hello@acme.example");
    assert_eq!(preview["fromName"], "Acme");
    assert_eq!(preview["toEmail"], "grace@example.org");

    // Without an address: the reserved example recipient, no attributes.
    let bare = setup
        .ok(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({}),
        )
        .await;
    assert_eq!(bare["subject"], "Welcome  Bcc: x@evil.example");
    assert_eq!(bare["toEmail"], "preview@example.com");
    // An unknown address renders with no attributes and creates nothing.
    let unknown = setup
        .ok(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({"email": "nobody@example.org"}),
        )
        .await;
    assert_eq!(unknown["toEmail"], "nobody@example.org");
    let contacts = setup.get("/contacts/count").await;
    assert_eq!(contacts["count"], 1);
    assert!(setup.messages().await.is_empty(), "a preview sends nothing");

    // Failures are 400s that say where.
    setup.sql(&format!(
        "UPDATE templates SET content = E'<p>ok</p>\\n<p>{{{{ 1 | nosuchfilter }}}}</p>' WHERE id = '{id}'"
    ));
    let response = setup
        .call(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({}),
        )
        .await;
    let problem = problem_naming(response, "content").await;
    assert!(problem.to_string().contains("line 2"), "{problem}");
    setup.sql(&format!(
        "UPDATE templates SET content = E'<p>ok</p>\\n\\n<p>{{{{ broken </p>' WHERE id = '{id}'"
    ));
    let response = setup
        .call(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({}),
        )
        .await;
    let problem = problem_naming(response, "content").await;
    assert!(problem.to_string().contains("line 3"), "{problem}");
    let response = setup
        .call(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({"email": "not an address"}),
        )
        .await;
    problem_naming(response, "email").await;
    let response = setup
        .call(
            Method::POST,
            &format!("/templates/{id}/preview"),
            &json!({"extra": 1}),
        )
        .await;
    problem_naming(response, "extra").await;
    let response = setup
        .call(
            Method::POST,
            "/templates/01936c5e-7b2a-7cde-8f00-0123456789ab/preview",
            &json!({}),
        )
        .await;
    assert_eq!(response.status(), 404);
}

/// The account's contacts, by address.
async fn contact_emails(setup: &Setup) -> Vec<String> {
    setup.get("/contacts").await["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|contact| contact["email"].as_str().expect("email").to_owned())
        .collect()
}

#[tokio::test]
async fn a_test_send_is_marked_as_a_test_and_makes_or_changes_no_contact() {
    let setup = setup().await;
    let path = format!("/templates/{}/test-send", setup.template);
    let queued = setup
        .ok(
            Method::POST,
            &path,
            &json!({"email": "qa@example.org", "data": {"note": "x"}}),
        )
        .await;
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["kind"], "transactional");
    assert_eq!(queued["test"], true);
    assert_eq!(queued["data"]["note"], "x");
    setup.drain_messages().await;
    let mail = received_by(&setup, "qa@example.org", "News for qa@example.org");
    assert!(mail.contains("News for qa@example.org"), "{mail}");
    let logged = setup
        .get(&format!("/messages/{}", queued["_id"].as_str().unwrap()))
        .await;
    assert_eq!(logged["status"], "sent");
    assert_eq!(logged["test"], true);
    assert_eq!(
        contact_emails(&setup).await,
        Vec::<String>::new(),
        "no contact made"
    );

    // To a contact's address: its attributes render, and it counts no message.
    let ann = setup.contact("ann@example.org", json!({})).await;
    let to_ann = setup
        .ok(Method::POST, &path, &json!({"email": "Ann@Example.org"}))
        .await;
    assert_eq!(to_ann["contactId"], ann.as_str());
    setup.drain_messages().await;
    received_by(&setup, "ann@example.org", "News for ann@example.org");
    let read = setup.get(&format!("/contacts/{ann}")).await;
    assert_eq!(read["attributes"]["message_count"], 0.0, "{read}");

    // The list stops a test to an address without a contact like any send.
    setup
        .ok(
            Method::POST,
            "/suppressions",
            &json!({"email": "held@example.org"}),
        )
        .await;
    let held = setup
        .ok(Method::POST, &path, &json!({"email": "held@example.org"}))
        .await;
    setup.drain_messages().await;
    let held = setup
        .get(&format!("/messages/{}", held["_id"].as_str().unwrap()))
        .await;
    assert_eq!(
        (&held["status"], &held["skipReason"]),
        (&json!("skipped"), &json!("suppressed"))
    );
    assert_eq!(contact_emails(&setup).await, ["ann@example.org"]);
    // An ordinary send is not marked.
    let ordinary = setup
        .ok(
            Method::POST,
            "/messages",
            &json!({"slug": "news", "email": "qa@example.org"}),
        )
        .await;
    assert!(ordinary.get("test").is_none(), "{ordinary}");

    for (body, field) in [
        (json!({}), "email"),
        (json!({"email": "nope"}), "email"),
        (json!({"email": "qa@example.org", "data": []}), "data"),
    ] {
        let response = setup.call(Method::POST, &path, &body).await;
        problem_naming(response, field).await;
    }
    let response = setup
        .call(
            Method::POST,
            "/templates/01936c5e-7b2a-7cde-8f00-0123456789ab/test-send",
            &json!({"email": "qa@example.org"}),
        )
        .await;
    assert_eq!(response.status(), 404);
}
