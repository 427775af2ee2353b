//! Transactional sends, the message log, the stats and the delivery worker against a real
//! SMTP server on loopback. The worker's `run_once` is called directly: no sleeping.

use mailroom_app::ports::Clock;
use mailroom_server::message_worker::{MessageRound, MessageWorker};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, expect_problem, spawn_app_with, TestApp};
use reqwest::{Method, Response};
use serde_json::{json, Value};

struct Setup {
    app: TestApp,
    token: String,
    account: String,
}

impl Setup {
    async fn new() -> Self {
        let app = spawn_app_with(|config| {
            config.allow_private_egress = true;
            config.message_max_attempts = 3;
            config.smtp_timeout = std::time::Duration::from_secs(5);
        })
        .await;
        let token = app.user_token("ada@example.com").await;
        let account = app.create_account(&token, "Acme").await;
        Self {
            app,
            token,
            account,
        }
    }

    fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    async fn add_mail_server(&self, server: &TestSmtpServer) -> Value {
        let body = json!({
            "serviceType": "smtp", "host": "127.0.0.1", "port": server.port(),
            "secure": false, "requireTLS": false, "user": "", "password": "",
            "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
        });
        expect_json(
            self.app
                .send_json(
                    Method::POST,
                    &self.path("/mail-servers"),
                    &self.token,
                    &body,
                )
                .await,
            200,
        )
        .await
    }

    async fn add_template(&self) {
        let body = json!({
            "name": "Receipt", "slug": "order-receipt",
            "subject": "Your receipt, {{ first_name }}",
            "content": "<p>Total: {{ total }}</p>"
        });
        expect_json(
            self.app
                .send_json(Method::POST, &self.path("/templates"), &self.token, &body)
                .await,
            200,
        )
        .await;
    }

    async fn send(&self, body: &Value, key: Option<&str>) -> Response {
        let mut request = self
            .app
            .request(Method::POST, &self.path("/messages"), Some(&self.token))
            .json(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.expect("request sent")
    }

    async fn queue(&self, email: &str) -> Value {
        let body = json!({"slug": "order-receipt", "email": email, "data": {"first_name": "Ada", "total": "9.99"}});
        expect_json(self.send(&body, None).await, 200).await
    }

    fn worker(&self) -> MessageWorker {
        MessageWorker::new(self.app.services.clone(), &self.app.config)
    }

    async fn run_once(&self) -> MessageRound {
        self.worker().run_once().await.expect("round")
    }

    async fn message(&self, id: &Value) -> Value {
        let id = id.as_str().expect("message id");
        expect_json(
            self.app
                .get(&self.path(&format!("/messages/{id}")), &self.token)
                .await,
            200,
        )
        .await
    }

    async fn today(&self) -> Value {
        let days = expect_json(
            self.app
                .get(&self.path("/messages/stats"), &self.token)
                .await,
            200,
        )
        .await;
        days.as_array()
            .expect("bare array")
            .last()
            .cloned()
            .expect("today")
    }
}

fn smtp() -> TestSmtpServer {
    TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    })
}

fn smtp_answering_rcpt(reply: &str) -> TestSmtpServer {
    TestSmtpServer::start(TestSmtpOptions {
        reply_to_rcpt: Some(reply.to_owned()),
        ..TestSmtpOptions::default()
    })
}

#[tokio::test]
async fn a_transactional_send_is_delivered_once_rendered_with_the_server_sender() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;

    let queued = setup.queue("grace@example.org").await;
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["kind"], "transactional");
    assert_eq!(queued["attempts"], 0);
    assert!(queued["messageId"]
        .as_str()
        .unwrap()
        .ends_with("@acme.example>"));

    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 1));
    assert_eq!(setup.run_once().await.claimed, 0, "nothing left to send");

    let received = server.messages();
    assert_eq!(received.len(), 1, "exactly one email");
    let mail = &received[0];
    assert_eq!(mail.from, "hello@acme.example");
    assert_eq!(mail.recipients, vec!["grace@example.org".to_owned()]);
    assert!(
        mail.data.contains("Subject: Your receipt, Ada"),
        "{}",
        mail.data
    );
    assert!(mail.data.contains("Total: 9.99"), "{}", mail.data);
    assert!(
        mail.data.contains("From: Acme <hello@acme.example>"),
        "{}",
        mail.data
    );
    let message_id = queued["messageId"].as_str().unwrap();
    assert!(
        mail.data.contains(&format!("Message-ID: {message_id}")),
        "{}",
        mail.data
    );

    let sent = setup.message(&queued["_id"]).await;
    assert_eq!(sent["status"], "sent");
    assert_eq!(sent["attempts"], 1);
    assert!(sent["sentAt"].is_string());
    assert!(sent["lastReply"].as_str().unwrap().starts_with("250"));

    // The contact was created by the send.
    let contacts = expect_json(
        setup.app.get(&setup.path("/contacts"), &setup.token).await,
        200,
    )
    .await;
    assert_eq!(contacts["items"][0]["email"], "grace@example.org");
    assert_eq!(setup.today().await["sent"], 1);

    // The log lists it, with filters and a count.
    let contact = sent["contactId"].as_str().unwrap();
    let listed = expect_json(
        setup
            .app
            .get(
                &setup.path(&format!("/messages?status=sent&contactId={contact}")),
                &setup.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(listed["items"][0]["_id"], queued["_id"]);
    assert_eq!(listed["start"], 0);
    let none = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count?status=failed"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(none["count"], 0);
    expect_problem(
        setup
            .app
            .get(&setup.path("/messages?status=lost"), &setup.token)
            .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn the_log_reads_newest_first_and_filters_by_address_and_template() {
    let setup = Setup::new().await;
    setup.add_template().await;
    let welcome = expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/templates"),
                &setup.token,
                &json!({"name": "Price drop", "slug": "price-drop", "subject": "Hi", "content": "<p>Hi</p>"}),
            )
            .await,
        200,
    )
    .await;
    let first = setup.queue("grace@example.org").await;
    let second = setup.queue("ada@example.org").await;
    let third = expect_json(
        setup
            .send(
                &json!({"slug": "price-drop", "email": "Grace@Example.org"}),
                None,
            )
            .await,
        200,
    )
    .await;
    let ids = |page: &Value| -> Vec<Value> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|message| message["_id"].clone())
            .collect()
    };
    let get = |query: &'static str| {
        let setup = &setup;
        async move {
            expect_json(
                setup
                    .app
                    .get(&setup.path(&format!("/messages{query}")), &setup.token)
                    .await,
                200,
            )
            .await
        }
    };

    let oldest = get("").await;
    assert_eq!(
        ids(&oldest),
        [
            first["_id"].clone(),
            second["_id"].clone(),
            third["_id"].clone()
        ]
    );
    let newest = get("?order=newest").await;
    assert_eq!(
        ids(&newest),
        [
            third["_id"].clone(),
            second["_id"].clone(),
            first["_id"].clone()
        ]
    );
    // The address matches in any letters' case.
    let grace = get("?email=GRACE%40example.org&order=newest").await;
    assert_eq!(ids(&grace), [third["_id"].clone(), first["_id"].clone()]);
    let welcome_id = welcome["_id"].as_str().expect("template id");
    let path = setup.path(&format!(
        "/messages?email=grace%40example.org&templateId={welcome_id}"
    ));
    let by_template = expect_json(setup.app.get(&path, &setup.token).await, 200).await;
    assert_eq!(ids(&by_template), [third["_id"].clone()]);
    let count = expect_json(
        setup
            .app
            .get(
                &setup.path("/messages/count?email=grace%40example.org"),
                &setup.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 2);

    for (query, field) in [
        ("?order=sideways", "order"),
        ("?email=not-an-address", "email"),
        ("?templateId=nope", "templateId"),
    ] {
        let problem = expect_problem(
            setup
                .app
                .get(&setup.path(&format!("/messages{query}")), &setup.token)
                .await,
            400,
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
}

#[tokio::test]
async fn an_idempotent_replay_answers_the_same_message_and_sends_one_email() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let body = json!({"slug": "order-receipt", "email": "grace@example.org", "data": {"total": 1}});

    let first = expect_json(setup.send(&body, Some("order-42")).await, 200).await;
    let (second, third) = tokio::join!(
        setup.send(&body, Some("order-42")),
        setup.send(&body, Some("order-42"))
    );
    let second = expect_json(second, 200).await;
    let third = expect_json(third, 200).await;
    assert_eq!(first["_id"], second["_id"]);
    assert_eq!(first["_id"], third["_id"]);
    setup.run_once().await;
    let replay = expect_json(setup.send(&body, Some("order-42")).await, 200).await;
    assert_eq!(replay["_id"], first["_id"]);
    assert_eq!(
        replay["status"], "sent",
        "the replay shows the message as it is now"
    );
    setup.run_once().await;
    assert_eq!(server.messages().len(), 1, "never a second email");

    let other =
        json!({"slug": "order-receipt", "email": "grace@example.org", "data": {"total": 2}});
    let problem = expect_problem(setup.send(&other, Some("order-42")).await, 400).await;
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("Idempotency-Key"));

    // After 24 hours the key is free again.
    setup.app.clock.advance(time::Duration::hours(25));
    let later = expect_json(setup.send(&other, Some("order-42")).await, 200).await;
    assert_ne!(later["_id"], first["_id"]);
}

#[tokio::test]
async fn concurrent_sends_with_one_new_key_queue_one_message() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let body = json!({"slug": "order-receipt", "email": "race@example.org"});
    let responses = futures_join_all(&setup, &body, "race-key", 6).await;
    let ids: std::collections::HashSet<String> = responses
        .iter()
        .map(|r| r["_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "one message for one key");
    setup.run_once().await;
    assert_eq!(server.messages().len(), 1);
}

async fn futures_join_all(setup: &Setup, body: &Value, key: &str, n: usize) -> Vec<Value> {
    let mut handles = Vec::new();
    for _ in 0..n {
        let request = setup
            .app
            .request(Method::POST, &setup.path("/messages"), Some(&setup.token))
            .header("Idempotency-Key", key)
            .json(body);
        handles.push(tokio::spawn(async move { request.send().await }));
    }
    let mut out = Vec::new();
    for handle in handles {
        let response = handle.await.expect("task").expect("sent");
        out.push(expect_json(response, 200).await);
    }
    out
}

#[tokio::test]
async fn an_unknown_slug_or_a_bad_body_is_refused() {
    let setup = Setup::new().await;
    setup.add_template().await;
    let problem = expect_problem(
        setup
            .send(&json!({"slug": "nope", "email": "a@example.org"}), None)
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "slug");
    expect_problem(
        setup
            .send(
                &json!({"slug": "order-receipt", "email": "not-an-email"}),
                None,
            )
            .await,
        400,
    )
    .await;
    expect_problem(
        setup
            .send(
                &json!({"slug": "order-receipt", "email": "a@example.org", "extra": 1}),
                None,
            )
            .await,
        400,
    )
    .await;
    let count = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 0);
    expect_problem(
        setup
            .app
            .get(&setup.path("/messages/not-an-id"), &setup.token)
            .await,
        404,
    )
    .await;
}

#[tokio::test]
async fn a_hard_bounce_flags_the_contact_and_blocks_the_next_send() {
    let setup = Setup::new().await;
    let server = smtp_answering_rcpt("550 5.1.1 <gone@example.org>: no such user");
    setup.add_mail_server(&server).await;
    setup.add_template().await;

    let webhooks = json!({"url": "http://127.0.0.1:9/hooks", "authType": "none", "events": ["contact.bounced"]});
    expect_json(
        setup
            .app
            .send_json(
                Method::PUT,
                &setup.path("/webhooks"),
                &setup.token,
                &webhooks,
            )
            .await,
        200,
    )
    .await;
    let queued = setup.queue("gone@example.org").await;
    setup.run_once().await;
    let bounced = setup.message(&queued["_id"]).await;
    assert_eq!(bounced["status"], "bounced");
    assert!(
        bounced["lastReply"]
            .as_str()
            .unwrap()
            .starts_with("550 5.1.1"),
        "{bounced}"
    );
    let contact = expect_json(
        setup
            .app
            .get(
                &setup.path(&format!(
                    "/contacts/{}",
                    bounced["contactId"].as_str().unwrap()
                )),
                &setup.token,
            )
            .await,
        200,
    )
    .await;
    assert!(contact["hardBounced"].is_string(), "{contact}");
    assert_eq!(setup.today().await["bounced"], 1);
    let events = expect_json(
        setup
            .app
            .get(
                &setup.path("/webhook-events?event=contact.bounced"),
                &setup.token,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(events["items"].as_array().unwrap().len(), 1, "{events}");
    assert!(events["items"][0]["payload"]["smtpReply"]
        .as_str()
        .unwrap()
        .starts_with("550 5.1.1"));

    let next = setup.queue("gone@example.org").await;
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 0), "no SMTP session");
    let skipped = setup.message(&next["_id"]).await;
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["skipReason"], "bounce_blocked");
    let today = setup.today().await;
    assert_eq!(today["bounceBlocked"], 1);
    assert_eq!(today["sent"], 0);
    // The save's credential check and the first send; the skip opened no session.
    assert_eq!(server.connection_count(), 2);
}

#[tokio::test]
async fn a_552_fails_the_message_without_flagging_the_contact() {
    let setup = Setup::new().await;
    let server = smtp_answering_rcpt("552 5.2.2 Mailbox full");
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let queued = setup.queue("full@example.org").await;
    setup.run_once().await;
    let failed = setup.message(&queued["_id"]).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["attempts"], 1);
    assert!(failed["lastReply"].as_str().unwrap().starts_with("552"));
    let contacts = expect_json(
        setup.app.get(&setup.path("/contacts"), &setup.token).await,
        200,
    )
    .await;
    assert!(contacts["items"][0]["hardBounced"].is_null());
    assert_eq!(setup.today().await["failed"], 1);
}

#[tokio::test]
async fn transient_refusals_are_retried_with_backoff_then_sent() {
    let setup = Setup::new().await;
    let server = smtp();
    server.script_rcpt_replies(["421 4.7.0 Try again later", "450 4.2.1 Slow down"]);
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let queued = setup.queue("busy@example.org").await;

    setup.run_once().await;
    let retrying = setup.message(&queued["_id"]).await;
    assert_eq!(
        retrying["status"], "queued",
        "never failed on the first transient error"
    );
    assert_eq!(retrying["attempts"], 1);
    assert!(retrying["lastReply"].as_str().unwrap().starts_with("421"));
    assert!(retrying["nextAttemptAt"].is_string());
    assert_eq!(
        setup.run_once().await.claimed,
        0,
        "not due before the backoff"
    );

    setup.app.clock.advance(time::Duration::hours(1));
    setup.run_once().await;
    assert_eq!(setup.message(&queued["_id"]).await["attempts"], 2);
    setup.app.clock.advance(time::Duration::hours(1));
    setup.run_once().await;
    let sent = setup.message(&queued["_id"]).await;
    assert_eq!(sent["status"], "sent");
    assert_eq!(sent["attempts"], 3);
    assert_eq!(server.messages().len(), 1);
    assert_eq!(setup.today().await["sent"], 1);
}

#[tokio::test]
async fn transient_refusals_fail_the_message_when_attempts_run_out() {
    let setup = Setup::new().await;
    let server = smtp_answering_rcpt("450 4.2.1 Slow down");
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let queued = setup.queue("busy@example.org").await;
    for _ in 0..3 {
        setup.run_once().await;
        setup.app.clock.advance(time::Duration::hours(7));
    }
    let failed = setup.message(&queued["_id"]).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["attempts"], 3);
    assert!(failed["lastReply"].as_str().unwrap().starts_with("450"));
    assert_eq!(setup.run_once().await.claimed, 0);
}

#[tokio::test]
async fn without_a_mail_server_the_message_is_skipped() {
    let setup = Setup::new().await;
    setup.add_template().await;
    let queued = setup.queue("grace@example.org").await;
    assert!(queued["messageId"]
        .as_str()
        .unwrap()
        .ends_with("@mailroom.invalid>"));
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 0));
    let skipped = setup.message(&queued["_id"]).await;
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["skipReason"], "no_mail_server");
}

#[tokio::test]
async fn stats_cover_thirty_days_oldest_first_with_zero_days() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    setup.queue("a@example.org").await;
    setup.queue("b@example.org").await;
    setup.run_once().await;

    let days = expect_json(
        setup
            .app
            .get(&setup.path("/messages/stats"), &setup.token)
            .await,
        200,
    )
    .await;
    let days = days.as_array().expect("a bare array");
    assert_eq!(days.len(), 30);
    let dates: Vec<&str> = days.iter().map(|d| d["day"].as_str().unwrap()).collect();
    let mut sorted = dates.clone();
    sorted.sort_unstable();
    assert_eq!(dates, sorted, "oldest first");
    // `day` is the RFC 3339 timestamp of the UTC day's start (spec: a timestamp).
    let today = setup.app.clock.now().as_datetime().date();
    assert_eq!(dates[29], format!("{today}T00:00:00.000Z"));
    assert!(
        days.iter().all(|d| d.get("date").is_none()),
        "no `date` key is left"
    );
    for key in [
        "bounceBlocked",
        "complained",
        "complaintBlocked",
        "freeLimitCapped",
        "bounced",
        "clicked",
        "failed",
        "opened",
        "sent",
        "unsubscribed",
    ] {
        assert_eq!(days[0][key], 0, "{key} on a quiet day");
        assert!(days[29][key].is_u64(), "{key} present");
    }
    assert_eq!(days[29]["sent"], 2);
}

#[tokio::test]
async fn two_concurrent_workers_never_send_a_message_twice() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    for n in 0..40 {
        setup.queue(&format!("reader{n}@example.org")).await;
    }
    let (one, two) = (setup.worker(), setup.worker());
    loop {
        let (a, b) = tokio::join!(one.run_once(), two.run_once());
        if a.expect("round").claimed + b.expect("round").claimed == 0 {
            break;
        }
    }
    let received = server.messages();
    assert_eq!(received.len(), 40);
    let mut recipients: Vec<&String> = received.iter().flat_map(|m| &m.recipients).collect();
    recipients.sort();
    recipients.dedup();
    assert_eq!(recipients.len(), 40, "each message once");
    let sent = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count?status=sent"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(sent["count"], 40);
}

#[tokio::test]
async fn an_expired_lease_returns_the_message_to_the_queue() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let queued = setup.queue("grace@example.org").await;
    // A worker claims and dies before sending (its claim is never followed up).
    let services = setup.app.services.clone();
    let settings = setup.worker().settings().clone();
    let claimed = tokio::task::spawn_blocking(move || {
        let request = mailroom_app::messages::ClaimRequest {
            lease_token: services.ids.next_uuid(),
            limit: 128,
            skip_accounts: Vec::new(),
        };
        mailroom_app::messages::prepare_messages(
            &services,
            &settings,
            &request,
            mailroom_app::messages::render_in_process,
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(claimed.jobs.len(), 1);
    assert_eq!(setup.message(&queued["_id"]).await["status"], "sending");
    assert_eq!(setup.run_once().await.claimed, 0, "leased");
    setup.app.clock.advance(time::Duration::hours(1));
    setup.run_once().await;
    assert_eq!(setup.message(&queued["_id"]).await["status"], "sent");
    assert_eq!(server.messages().len(), 1);
}

#[tokio::test]
async fn starttls_and_auth_are_used_when_the_server_asks_for_them() {
    let setup = Setup::new().await;
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::StartTls,
        auth: Some(("mailer".to_owned(), "s3cret-pass".to_owned())),
        ..TestSmtpOptions::default()
    });
    let body = json!({
        "serviceType": "smtp", "host": "localhost", "port": server.port(),
        "secure": false, "requireTLS": true, "allowInsecureTLS": true,
        "user": "mailer", "password": "s3cret-pass",
        "defaultFromEmail": "hello@acme.example", "defaultFromName": ""
    });
    expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/mail-servers"),
                &setup.token,
                &body,
            )
            .await,
        200,
    )
    .await;
    setup.add_template().await;
    let queued = setup.queue("grace@example.org").await;
    setup.run_once().await;
    assert_eq!(setup.message(&queued["_id"]).await["status"], "sent");
    let received = server.messages();
    assert_eq!(received.len(), 1);
    assert!(received[0].tls, "sent after STARTTLS");
    assert_eq!(received[0].authenticated_as.as_deref(), Some("mailer"));
    assert!(
        received[0].data.contains("From: hello@acme.example"),
        "no display name"
    );
}

#[tokio::test]
async fn implicit_tls_is_used_when_the_server_is_secure() {
    let setup = Setup::new().await;
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::Implicit,
        ..TestSmtpOptions::default()
    });
    let body = json!({
        "serviceType": "smtp", "host": "localhost", "port": server.port(),
        "secure": true, "requireTLS": false, "allowInsecureTLS": true,
        "user": "", "password": "",
        "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
    });
    expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/mail-servers"),
                &setup.token,
                &body,
            )
            .await,
        200,
    )
    .await;
    setup.add_template().await;
    let queued = setup.queue("grace@example.org").await;
    setup.run_once().await;
    assert_eq!(setup.message(&queued["_id"]).await["status"], "sent");
    assert!(server.messages()[0].tls);
}

/// How the scripted raw server misbehaves.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Accepts the connection and never says a word.
    Hang,
    /// Speaks SMTP up to the end of DATA, then closes without a reply.
    DropAfterData,
}

/// A plain TCP server on loopback that misbehaves as asked, for every connection.
fn raw_server(misbehaviour: Misbehaviour) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                if let Misbehaviour::Hang = misbehaviour {
                    std::thread::sleep(std::time::Duration::from_secs(30));
                    return;
                }
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let _ = stream.write_all(b"220 raw ESMTP\r\n");
                let mut line = String::new();
                let mut in_data = false;
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    let command = line.trim_end().to_ascii_uppercase();
                    if in_data {
                        if command == "." {
                            // Drop the connection instead of answering the end of DATA.
                            return;
                        }
                    } else if command.starts_with("EHLO") {
                        let _ = stream.write_all(b"250 raw\r\n");
                    } else if command.starts_with("DATA") {
                        in_data = true;
                        let _ = stream.write_all(b"354 go ahead\r\n");
                    } else {
                        let _ = stream.write_all(b"250 ok\r\n");
                    }
                    line.clear();
                }
            });
        }
    });
    port
}

async fn send_through_raw_server(misbehaviour: Misbehaviour) -> (Setup, Value) {
    let setup = Setup::new().await;
    setup.add_template().await;
    // The save's check would fail against this server, so the server is stored first
    // against a well-behaved one and then pointed at the raw port.
    let good = smtp();
    let created = setup.add_mail_server(&good).await;
    let raw_port = raw_server(misbehaviour);
    let id = created["_id"].as_str().unwrap().to_owned();
    let services = setup.app.services.clone();
    let account = setup.account.clone();
    tokio::task::spawn_blocking(move || repoint_mail_server(&services, &account, &id, raw_port))
        .await
        .unwrap();
    let queued = setup.queue("grace@example.org").await;
    (setup, queued)
}

/// Moves a stored mail server to another port, around the API (which would check it).
fn repoint_mail_server(services: &mailroom_app::Services, account: &str, id: &str, port: u16) {
    use mailroom_domain::{AccountId, MailServerId};
    let account = AccountId::parse(account).unwrap();
    let id = MailServerId::parse(id).unwrap();
    mailroom_app::ports::in_transaction(services.db.as_ref(), |tx| {
        let mut record = tx.find_mail_server(account, id)?.expect("stored");
        record.server.port = port;
        tx.update_mail_server(account, &record)?;
        Ok(())
    })
    .expect("repointed");
}

#[tokio::test]
async fn a_hanging_server_is_a_transient_failure() {
    let (setup, queued) = send_through_raw_server(Misbehaviour::Hang).await;
    let started = std::time::Instant::now();
    setup.run_once().await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "bounded by the timeout"
    );
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "queued", "{message}");
    assert_eq!(message["attempts"], 1);
    assert!(
        message["lastReply"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{message}"
    );
}

#[tokio::test]
async fn a_connection_dropped_after_data_is_retried() {
    let (setup, queued) = send_through_raw_server(Misbehaviour::DropAfterData).await;
    setup.run_once().await;
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "queued", "{message}");
    assert_eq!(message["attempts"], 1);
    assert!(message["nextAttemptAt"].is_string());
}

/// Sets a contact flag around the API (complaints and unsubscriptions have no endpoint in
/// this slice).
fn flag_contact(setup: &Setup, email: &str, column: &str) {
    use diesel::RunQueryDsl;
    let mut conn = setup.app.database.connection();
    diesel::sql_query(format!(
        "UPDATE contacts SET {column} = now() WHERE email = '{email}'"
    ))
    .execute(&mut conn)
    .expect("flag set");
}

#[tokio::test]
async fn complaints_block_and_unsubscribes_do_not_block_transactional_mail() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    // Contacts exist once a first message is queued.
    let complained = setup.queue("angry@example.org").await;
    let unsubscribed = setup.queue("quiet@example.org").await;
    flag_contact(&setup, "angry@example.org", "complaint_at");
    flag_contact(&setup, "quiet@example.org", "unsubscribed_at");
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (2, 1));
    let blocked = setup.message(&complained["_id"]).await;
    assert_eq!(blocked["status"], "skipped");
    assert_eq!(blocked["skipReason"], "complaint_blocked");
    assert_eq!(setup.message(&unsubscribed["_id"]).await["status"], "sent");
    let today = setup.today().await;
    assert_eq!(today["complaintBlocked"], 1);
    assert_eq!(today["sent"], 1);
    let skipped = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count?status=skipped"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(skipped["count"], 1);
}

#[tokio::test]
async fn a_round_shares_pooled_connections_and_counts_every_outcome_of_a_batch() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.smtp_timeout = std::time::Duration::from_secs(5);
        config.smtp_connections_per_server = 2;
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let setup = Setup {
        app,
        token,
        account,
    };
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    for n in 0..12 {
        setup.queue(&format!("reader{n}@example.org")).await;
    }
    // Saving the mail server probed it once.
    let probes = server.connection_count();
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (12, 12));
    assert_eq!(server.messages().len(), 12);
    assert!(
        (1..=2).contains(&(server.connection_count() - probes)),
        "{} connections for 12 messages",
        server.connection_count()
    );
    // A second round reuses the same connections.
    setup.queue("late@example.org").await;
    let before = server.connection_count();
    setup.run_once().await;
    assert_eq!(server.connection_count(), before);
    assert_eq!(setup.today().await["sent"], 13);
    let sent = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count?status=sent"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(sent["count"], 13);
}

/// Messages outlive their contact: a queued message whose contact is deleted stays
/// visible, keeps its Idempotency-Key (a retry answers it, never queues a second email),
/// and is skipped as `contact_deleted` when it falls due, with nothing sent.
#[tokio::test]
async fn deleting_a_contact_skips_its_queued_message_and_keeps_it() {
    let setup = Setup::new().await;
    let server = smtp();
    setup.add_mail_server(&server).await;
    setup.add_template().await;
    let body = json!({"slug": "order-receipt", "email": "gone@example.org", "data": {"first_name": "Ada", "total": "1"}});
    let queued = expect_json(setup.send(&body, Some("order-42")).await, 200).await;
    let contact = queued["contactId"].as_str().expect("contact id").to_owned();
    expect_json(
        setup
            .app
            .request(
                Method::DELETE,
                &setup.path(&format!("/contacts/{contact}")),
                Some(&setup.token),
            )
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_eq!(setup.message(&queued["_id"]).await["status"], "queued");
    let again = expect_json(setup.send(&body, Some("order-42")).await, 200).await;
    assert_eq!(
        again["_id"], queued["_id"],
        "the key still answers the first message"
    );
    let round = setup.run_once().await;
    assert_eq!((round.claimed, round.attempted), (1, 0));
    let skipped = setup.message(&queued["_id"]).await;
    assert_eq!(skipped["status"], "skipped", "{skipped}");
    assert_eq!(skipped["skipReason"], "contact_deleted");
    assert!(server.messages().is_empty());
    let count = expect_json(
        setup
            .app
            .get(&setup.path("/messages/count"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 1);
}

#[tokio::test]
async fn an_account_that_refuses_clear_text_auth_never_sends_a_password_without_tls() {
    let setup = Setup::new().await;
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        auth: Some(("mailer".to_owned(), "s3cret-pass".to_owned())),
        ..TestSmtpOptions::default()
    });
    let body = json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": server.port(),
        "secure": false, "requireTLS": false, "user": "mailer", "password": "s3cret-pass",
        "defaultFromEmail": "hello@acme.example", "defaultFromName": ""
    });
    // Saved while the account allows it: the check went in clear, and says so.
    let saved = expect_json(
        setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/mail-servers"),
                &setup.token,
                &body,
            )
            .await,
        200,
    )
    .await;
    assert_eq!(saved["credentialsSentInClear"], true);
    let account = expect_json(
        setup
            .app
            .send_json(
                Method::PATCH,
                &setup.path(""),
                &setup.token,
                &json!({"refuseClearTextAuth": true}),
            )
            .await,
        200,
    )
    .await;
    assert_eq!(account["refuseClearTextAuth"], true);
    let read = expect_json(setup.app.get(&setup.path(""), &setup.token).await, 200).await;
    assert_eq!(read["refuseClearTextAuth"], true);

    // Now a send through that server waits rather than sending the password in clear.
    setup.add_template().await;
    let queued = setup.queue("grace@example.org").await;
    setup.run_once().await;
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "queued", "{message}");
    assert!(server.messages().is_empty());

    // And saving it again is refused: its check needs STARTTLS, which it does not offer.
    let id = saved["_id"].as_str().expect("id");
    let refused = expect_problem(
        setup
            .app
            .send_json(
                Method::PATCH,
                &setup.path(&format!("/mail-servers/{id}")),
                &setup.token,
                &body,
            )
            .await,
        400,
    )
    .await;
    assert!(
        refused["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("TLS"),
        "{refused}"
    );
    // `null` is not a setting.
    expect_problem(
        setup
            .app
            .send_json(
                Method::PATCH,
                &setup.path(""),
                &setup.token,
                &json!({"refuseClearTextAuth": null}),
            )
            .await,
        400,
    )
    .await;
}
