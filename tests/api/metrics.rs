//! `/metrics` beyond HTTP: the outboxes (depth, due rows, oldest due age), messages by
//! status, SMTP replies by class and webhook deliveries by outcome, after real sends
//! through the workers against a real SMTP server and a real webhook receiver.
//!
//! The delivery counters are per process; nextest runs each test in its own process, so
//! the values asserted here are this test's alone.

use mailroom_server::{message_worker::MessageWorker, webhook_worker::WebhookWorker};
use mailroom_test_support::{ReceiverReply, TestSmtpOptions, TestSmtpServer, TestWebhookReceiver};
use mailroom_tests::{expect_json, spawn_app, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::json;

async fn scrape(app: &TestApp) -> String {
    let response = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    response.text().await.expect("text")
}

/// The value of the sample named exactly `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} is missing from:\n{text}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{series} is not a number"))
}

fn messages(text: &str, status: &str) -> f64 {
    value(text, &format!(r#"mailroom_messages{{status="{status}"}}"#))
}

fn queue(text: &str, name: &str, queue: &str) -> f64 {
    value(text, &format!(r#"mailroom_{name}{{queue="{queue}"}}"#))
}

fn replies(text: &str, class: &str) -> f64 {
    value(
        text,
        &format!(r#"mailroom_smtp_replies_total{{class="{class}"}}"#),
    )
}

fn webhooks(text: &str, outcome: &str) -> f64 {
    value(
        text,
        &format!(r#"mailroom_webhook_deliveries_total{{outcome="{outcome}"}}"#),
    )
}

#[tokio::test]
async fn metrics_follow_messages_and_webhooks_through_the_workers() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.message_max_attempts = 3;
        config.smtp_timeout = std::time::Duration::from_secs(5);
        config.webhook_retry_schedule = vec![0, 0];
        config.webhook_timeout = std::time::Duration::from_secs(2);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let path = |rest: &str| format!("/v2/accounts/{account}{rest}");
    let smtp = TestSmtpServer::start(TestSmtpOptions::default());
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::with_body(500, "boom")]);
    for (method, rest, body) in [
        (
            Method::PUT,
            "/webhooks",
            json!({"url": receiver.url("/hooks"), "authType": "none", "events": ["contact.bounced"]}),
        ),
        (
            Method::POST,
            "/mail-servers",
            json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": smtp.port(),
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
            }),
        ),
        (
            Method::POST,
            "/templates",
            json!({"name": "Receipt", "slug": "receipt", "subject": "Receipt", "content": "<p>Thanks</p>"}),
        ),
    ] {
        expect_json(app.send_json(method, &path(rest), &token, &body).await, 200).await;
    }
    for n in 0..4 {
        let body = json!({"slug": "receipt", "email": format!("r{n}@example.com")});
        expect_json(
            app.send_json(Method::POST, &path("/messages"), &token, &body)
                .await,
            200,
        )
        .await;
    }

    let before = scrape(&app).await;
    assert_eq!(value(&before, "mailroom_queue_stats_up"), 1.0);
    assert_eq!(value(&before, "mailroom_messages_counts_exact"), 1.0);
    assert_eq!(messages(&before, "queued"), 4.0);
    assert_eq!(messages(&before, "sent"), 0.0);
    assert_eq!(queue(&before, "queue_depth", "messages"), 4.0);
    assert_eq!(queue(&before, "queue_due", "messages"), 4.0);
    assert_eq!(queue(&before, "queue_depth", "webhook_events"), 0.0);
    assert_eq!(
        replies(&before, "accepted"),
        0.0,
        "every class is exported from the start"
    );
    assert_eq!(webhooks(&before, "delivered"), 0.0);

    // Nobody worked the queue for 30 s.
    app.clock.advance(time::Duration::seconds(30));
    let waiting = scrape(&app).await;
    let age = queue(&waiting, "queue_oldest_due_age_seconds", "messages");
    assert!((30.0..60.0).contains(&age), "oldest due age {age}");

    // One recipient does not exist, one server is busy, two are accepted.
    smtp.script_rcpt_replies(["550 5.1.1 no such user", "451 4.3.0 try again later"]);
    let round = MessageWorker::new(app.services.clone(), &app.config)
        .run_once()
        .await
        .expect("round");
    assert_eq!(round.attempted, 4);
    assert_eq!(smtp.messages().len(), 2);

    let after = scrape(&app).await;
    assert_eq!(replies(&after, "accepted"), 2.0);
    assert_eq!(replies(&after, "hard_bounce"), 1.0);
    assert_eq!(replies(&after, "transient"), 1.0);
    assert_eq!(replies(&after, "permanent"), 0.0);
    assert_eq!(replies(&after, "connection"), 0.0);
    assert_eq!(messages(&after, "sent"), 2.0);
    assert_eq!(messages(&after, "bounced"), 1.0);
    assert_eq!(
        messages(&after, "queued"),
        1.0,
        "the 451 waits for its retry"
    );
    assert_eq!(messages(&after, "sending"), 0.0);
    assert_eq!(queue(&after, "queue_depth", "messages"), 1.0);
    assert_eq!(
        queue(&after, "queue_due", "messages"),
        0.0,
        "its retry is not due yet"
    );
    assert_eq!(
        queue(&after, "queue_oldest_due_age_seconds", "messages"),
        0.0
    );
    // The bounce queued `contact.bounced`.
    assert_eq!(queue(&after, "queue_depth", "webhook_events"), 1.0);
    assert_eq!(queue(&after, "queue_due", "webhook_events"), 1.0);

    // The receiver fails once (retrying), then takes it (delivered).
    let first = WebhookWorker::new(app.services.clone(), &app.config)
        .run_once()
        .await
        .expect("round");
    assert_eq!(first.retrying, 1);
    let second = WebhookWorker::new(app.services.clone(), &app.config)
        .run_once()
        .await
        .expect("round");
    assert_eq!(second.delivered, 1);
    let last = scrape(&app).await;
    assert_eq!(webhooks(&last, "retrying"), 1.0);
    assert_eq!(webhooks(&last, "delivered"), 1.0);
    assert_eq!(webhooks(&last, "failed"), 0.0);
    assert_eq!(queue(&last, "queue_depth", "webhook_events"), 0.0);
}

#[tokio::test]
async fn metrics_still_answer_without_the_database_and_drop_the_queue_series() {
    let app = spawn_app().await;
    assert_eq!(value(&scrape(&app).await, "mailroom_queue_stats_up"), 1.0);
    let name = app.database.name().to_owned();
    {
        use diesel::{connection::SimpleConnection, Connection};
        let mut admin =
            diesel::PgConnection::establish(&mailroom_test_support::admin_url()).expect("admin");
        admin
            .batch_execute(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
            .expect("drop");
    }
    let text = scrape(&app).await;
    assert_eq!(value(&text, "mailroom_queue_stats_up"), 0.0);
    assert!(!text.contains("mailroom_queue_depth{"), "{text}");
    assert!(!text.contains("mailroom_messages{"), "{text}");
    assert!(text.contains("mailroom_http_requests_total"), "{text}");
}

/// With `MAILROOM_METRICS_LISTEN` set, `serve` exposes `/metrics` on that listener only:
/// the public port answers 404 (problem+json), the metrics listener answers the HTTP
/// series and the delivery counters (which the server owns and hands to both).
#[tokio::test]
async fn a_separate_metrics_listener_takes_metrics_off_the_public_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let app = spawn_app_with(|config| {
        config.metrics_listen = Some(([127, 0, 0, 1], port).into());
    })
    .await;
    let public = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(public.status(), 404);
    assert_eq!(public.headers()["content-type"], "application/problem+json");
    let healthz = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(healthz.status(), 200, "only /metrics moves");
    let mut text = None;
    for _ in 0..100 {
        if let Ok(response) = app
            .client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        {
            assert_eq!(response.status(), 200);
            text = Some(response.text().await.expect("text"));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let text = text.expect("the metrics listener answers");
    assert!(text.contains("mailroom_http_requests_total"), "{text}");
    assert!(
        text.contains(r#"mailroom_smtp_replies_total{class="accepted"}"#),
        "{text}"
    );
}
