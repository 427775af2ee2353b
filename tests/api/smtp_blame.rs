//! Delivery's SMTP side: connections are never shared between accounts or across a
//! password change, and a refusal blames the party it is about (the contact only for its
//! own `RCPT TO`; the mail server for a refused login). Real loopback SMTP servers with
//! scripted replies; the worker's `run_once` is called directly.

use mailroom_server::message_worker::{MessageRound, MessageWorker};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const USER: &str = "apikey";

/// One account of a shared app: its token, id and mail server.
struct Account {
    token: String,
    id: String,
    server: String,
}

fn app_config(config: &mut mailroom_server::Config) {
    config.allow_private_egress = true;
    config.message_max_attempts = 3;
    config.smtp_timeout = std::time::Duration::from_secs(5);
}

/// A STARTTLS server with AUTH that takes `passwords` for the user `apikey`.
fn relay(passwords: &[&str]) -> TestSmtpServer {
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::StartTls,
        auth: Some((USER.to_owned(), passwords[0].to_owned())),
        ..TestSmtpOptions::default()
    });
    server.set_credentials(passwords.iter().map(|password| (USER, *password)));
    server
}

fn server_body(smtp: &TestSmtpServer, password: &str) -> Value {
    json!({
        "serviceType": "smtp", "host": "localhost", "port": smtp.port(),
        "secure": false, "requireTLS": true, "allowInsecureTLS": true,
        "user": USER, "password": password,
        "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
    })
}

async fn post(app: &TestApp, token: &str, path: &str, body: &Value) -> Value {
    expect_json(app.send_json(Method::POST, path, token, body).await, 200).await
}

async fn get(app: &TestApp, token: &str, path: &str) -> Value {
    expect_json(app.get(path, token).await, 200).await
}

/// An account named `name` with a mail server on `smtp` (password `password`) and the
/// `receipt` template (with `bcc` when given).
async fn account(
    app: &TestApp,
    token: &str,
    name: &str,
    smtp: &TestSmtpServer,
    password: &str,
    bcc: Option<&str>,
) -> Account {
    let id = app.create_account(token, name).await;
    let server = post(
        app,
        token,
        &format!("/v2/accounts/{id}/mail-servers"),
        &server_body(smtp, password),
    )
    .await;
    let mut template = json!({
        "name": "Receipt", "slug": "receipt",
        "subject": "Your receipt", "content": "<p>Thanks</p>"
    });
    if let Some(bcc) = bcc {
        template["bcc"] = json!(bcc);
    }
    post(
        app,
        token,
        &format!("/v2/accounts/{id}/templates"),
        &template,
    )
    .await;
    Account {
        token: token.to_owned(),
        id,
        server: server["_id"].as_str().expect("server id").to_owned(),
    }
}

impl Account {
    fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.id)
    }

    async fn queue(&self, app: &TestApp, email: &str) -> Value {
        let body = json!({"slug": "receipt", "email": email});
        post(app, &self.token, &self.path("/messages"), &body).await
    }

    async fn message(&self, app: &TestApp, queued: &Value) -> Value {
        let id = queued["_id"].as_str().expect("message id");
        get(app, &self.token, &self.path(&format!("/messages/{id}"))).await
    }

    async fn contact_of(&self, app: &TestApp, message: &Value) -> Value {
        let id = message["contactId"].as_str().expect("contact id");
        get(app, &self.token, &self.path(&format!("/contacts/{id}"))).await
    }

    async fn mail_server(&self, app: &TestApp) -> Value {
        let path = self.path(&format!("/mail-servers/{}", self.server));
        get(app, &self.token, &path).await
    }

    async fn change_password(&self, app: &TestApp, smtp: &TestSmtpServer, password: &str) {
        let path = self.path(&format!("/mail-servers/{}", self.server));
        let body = server_body(smtp, password);
        expect_json(
            app.send_json(Method::PATCH, &path, &self.token, &body)
                .await,
            200,
        )
        .await;
    }

    async fn today(&self, app: &TestApp) -> Value {
        let days = get(app, &self.token, &self.path("/messages/stats")).await;
        days.as_array()
            .and_then(|d| d.last())
            .cloned()
            .expect("today")
    }
}

async fn run_once(app: &TestApp) -> MessageRound {
    MessageWorker::new(app.services.clone(), &app.config)
        .run_once()
        .await
        .expect("round")
}

/// The password of the session that carried the message to `recipient`.
fn password_for(smtp: &TestSmtpServer, recipient: &str) -> String {
    let messages = smtp.messages();
    let message = messages
        .iter()
        .find(|m| m.recipients.iter().any(|r| r == recipient))
        .unwrap_or_else(|| panic!("no message to {recipient}"));
    message
        .authenticated_with
        .clone()
        .unwrap_or_else(|| panic!("the session to {recipient} was not authenticated"))
}

#[tokio::test]
async fn accounts_sharing_a_relay_user_name_never_share_a_session() {
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    let smtp = relay(&["key-of-acme", "key-of-globex"]);
    let acme = account(&app, &token, "Acme", &smtp, "key-of-acme", None).await;
    let globex = account(&app, &token, "Globex", &smtp, "key-of-globex", None).await;

    // Acme's sessions go idle in the pool first; Globex's messages come after, then
    // both again in one round.
    for n in 0..3 {
        acme.queue(&app, &format!("acme-{n}@example.org")).await;
    }
    run_once(&app).await;
    for n in 0..3 {
        globex.queue(&app, &format!("globex-{n}@example.org")).await;
    }
    run_once(&app).await;
    for n in 3..6 {
        acme.queue(&app, &format!("acme-{n}@example.org")).await;
        globex.queue(&app, &format!("globex-{n}@example.org")).await;
    }
    run_once(&app).await;

    assert_eq!(smtp.message_count(), 12);
    for n in 0..6 {
        assert_eq!(
            password_for(&smtp, &format!("acme-{n}@example.org")),
            "key-of-acme"
        );
        assert_eq!(
            password_for(&smtp, &format!("globex-{n}@example.org")),
            "key-of-globex",
            "Globex's message {n} went over a session of Acme's"
        );
    }
}

#[tokio::test]
async fn after_a_password_change_no_message_goes_over_a_session_of_the_old_one() {
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    // The provider takes both keys while the customer rotates, so a session opened with
    // the old one would still carry mail: only the pool can keep it out.
    let smtp = relay(&["old-key", "new-key"]);
    let acme = account(&app, &token, "Acme", &smtp, "old-key", None).await;
    for n in 0..3 {
        acme.queue(&app, &format!("before-{n}@example.org")).await;
    }
    run_once(&app).await;
    assert_eq!(smtp.message_count(), 3);

    acme.change_password(&app, &smtp, "new-key").await;
    for n in 0..3 {
        acme.queue(&app, &format!("after-{n}@example.org")).await;
    }
    run_once(&app).await;
    for n in 0..3 {
        acme.queue(&app, &format!("later-{n}@example.org")).await;
    }
    run_once(&app).await;

    assert_eq!(smtp.message_count(), 9);
    for n in 0..3 {
        assert_eq!(
            password_for(&smtp, &format!("before-{n}@example.org")),
            "old-key"
        );
        assert_eq!(
            password_for(&smtp, &format!("after-{n}@example.org")),
            "new-key"
        );
        assert_eq!(
            password_for(&smtp, &format!("later-{n}@example.org")),
            "new-key"
        );
    }
}

#[tokio::test]
async fn a_refused_bcc_does_not_bounce_the_contact_and_the_message_still_goes() {
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    let smtp = relay(&["secret"]);
    let acme = account(
        &app,
        &token,
        "Acme",
        &smtp,
        "secret",
        Some("audit@acme.example"),
    )
    .await;
    smtp.refuse_recipient(
        "audit@acme.example",
        "550 5.1.1 <audit@acme.example>: no such user",
    );

    let queued = acme.queue(&app, "grace@example.org").await;
    run_once(&app).await;

    let sent = acme.message(&app, &queued).await;
    assert_eq!(sent["status"], "sent", "{sent}");
    let last_reply = sent["lastReply"].as_str().expect("lastReply");
    assert!(last_reply.starts_with("250"), "{last_reply}");
    assert!(
        last_reply.contains("RCPT TO <audit@acme.example> refused: 550 5.1.1"),
        "{last_reply}"
    );
    let contact = acme.contact_of(&app, &sent).await;
    assert!(contact["hardBounced"].is_null(), "{contact}");
    let received = smtp.messages();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].recipients, ["grace@example.org"]);
    let today = acme.today(&app).await;
    assert_eq!(
        (today["sent"].as_u64(), today["bounced"].as_u64()),
        (Some(1), Some(0))
    );
}

#[tokio::test]
async fn a_550_to_mail_from_fails_the_message_without_bouncing_the_contact() {
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    let smtp = relay(&["secret"]);
    let acme = account(&app, &token, "Acme", &smtp, "secret", None).await;
    // No enhanced code: read as a recipient's 550 it would have bounced the contact.
    smtp.script_mail_replies(["550 Requested action not taken: sender not allowed"]);

    let queued = acme.queue(&app, "grace@example.org").await;
    run_once(&app).await;

    let failed = acme.message(&app, &queued).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["attempts"], 1);
    assert!(
        failed["lastReply"]
            .as_str()
            .expect("lastReply")
            .starts_with("MAIL FROM: 550"),
        "{failed}"
    );
    let contact = acme.contact_of(&app, &failed).await;
    assert!(contact["hardBounced"].is_null(), "{contact}");
    let today = acme.today(&app).await;
    assert_eq!(
        (today["failed"].as_u64(), today["bounced"].as_u64()),
        (Some(1), Some(0))
    );

    // The contact is not blocked: the next message to it goes.
    let next = acme.queue(&app, "grace@example.org").await;
    run_once(&app).await;
    assert_eq!(acme.message(&app, &next).await["status"], "sent");
}

#[tokio::test]
async fn a_refused_login_keeps_messages_queued_and_the_server_unhealthy_until_fixed() {
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    let smtp = relay(&["first-key"]);
    let acme = account(&app, &token, "Acme", &smtp, "first-key", None).await;
    assert_eq!(acme.mail_server(&app).await["health"]["status"], "healthy");

    // The provider revoked the key the account saved.
    smtp.set_credentials([(USER, "second-key")]);
    let mut queued = Vec::new();
    for n in 0..4 {
        queued.push(acme.queue(&app, &format!("m{n}@example.org")).await);
    }
    // More rounds than max_attempts (3), the clock moving past every backoff.
    for _ in 0..5 {
        run_once(&app).await;
        app.clock.advance(time::Duration::hours(2));
    }
    for queued in &queued {
        let waiting = acme.message(&app, queued).await;
        assert_eq!(waiting["status"], "queued", "{waiting}");
        assert_eq!(waiting["attempts"], 0, "no attempt spent: {waiting}");
        assert!(
            waiting["lastReply"]
                .as_str()
                .expect("lastReply")
                .starts_with("AUTH: 535"),
            "{waiting}"
        );
        let contact = acme.contact_of(&app, &waiting).await;
        assert!(contact["hardBounced"].is_null(), "{contact}");
    }
    let server = acme.mail_server(&app).await;
    assert_eq!(server["health"]["status"], "unhealthy", "{server}");
    assert!(server["health"]["since"].is_string(), "{server}");
    assert!(
        server["health"]["lastError"]
            .as_str()
            .expect("lastError")
            .contains("535"),
        "{server}"
    );
    let today = acme.today(&app).await;
    assert_eq!(
        (today["failed"].as_u64(), today["sent"].as_u64()),
        (Some(0), Some(0))
    );
    let metrics = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.contains("mailroom_mail_servers_unhealthy 1"),
        "{metrics}"
    );

    // The customer saves the new key: healthy at once, and the waiting mail goes.
    acme.change_password(&app, &smtp, "second-key").await;
    assert_eq!(acme.mail_server(&app).await["health"]["status"], "healthy");
    app.clock.advance(time::Duration::hours(2));
    run_once(&app).await;
    for queued in &queued {
        assert_eq!(acme.message(&app, queued).await["status"], "sent");
    }
    assert_eq!(smtp.message_count(), 4);
    for n in 0..4 {
        assert_eq!(
            password_for(&smtp, &format!("m{n}@example.org")),
            "second-key"
        );
    }
    let server = acme.mail_server(&app).await;
    assert_eq!(server["health"]["status"], "healthy", "{server}");
    assert!(server["health"]["since"].is_null(), "{server}");
}

#[tokio::test]
async fn a_stored_password_that_no_longer_opens_keeps_messages_queued_until_saved_again() {
    use diesel::RunQueryDsl;
    let app = spawn_app_with(app_config).await;
    let token = app.user_token("ada@example.com").await;
    let smtp = relay(&["secret"]);
    let acme = account(&app, &token, "Acme", &smtp, "secret", None).await;
    // As after a wrong MAILROOM_SECRET_KEY: the sealed password no longer opens.
    diesel::sql_query("UPDATE mail_servers SET password = '\\x00'::bytea")
        .execute(&mut app.database.connection())
        .expect("password spoiled");

    let queued = acme.queue(&app, "grace@example.org").await;
    for _ in 0..4 {
        run_once(&app).await;
        app.clock.advance(time::Duration::hours(2));
    }
    let waiting = acme.message(&app, &queued).await;
    assert_eq!(waiting["status"], "queued", "{waiting}");
    assert_eq!(waiting["attempts"], 0, "{waiting}");
    let server = acme.mail_server(&app).await;
    assert_eq!(server["health"]["status"], "unhealthy", "{server}");
    assert!(
        server["health"]["lastError"]
            .as_str()
            .expect("lastError")
            .contains("cannot be opened"),
        "{server}"
    );

    acme.change_password(&app, &smtp, "secret").await;
    app.clock.advance(time::Duration::hours(2));
    run_once(&app).await;
    assert_eq!(acme.message(&app, &queued).await["status"], "sent");
    assert_eq!(acme.mail_server(&app).await["health"]["status"], "healthy");
}
