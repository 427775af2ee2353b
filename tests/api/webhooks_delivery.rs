//! Webhook events end to end: the outbox row written with the change, the delivery worker
//! against a real HTTP receiver on loopback, the event log, manual retry and the egress
//! guard.

use std::time::{Duration, Instant, SystemTime};

use base64::{engine::general_purpose::STANDARD as BASE64, Engine as _};
use hmac::{Hmac, Mac};
use mailroom_app::webhook_events::{
    claim_webhook_deliveries, record_webhook_attempts, send_webhook_delivery, AccountRoom,
    DeliveryRound,
};
use mailroom_domain::webhook_signature::{verify, VerifyError, DEFAULT_TOLERANCE};
use mailroom_server::{application::build_services, webhook_worker::WebhookWorker};
use mailroom_test_support::{ReceivedRequest, ReceiverReply, TestWebhookReceiver};
use mailroom_tests::{expect_json, expect_problem, spawn_app, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

/// An app whose webhooks may point at loopback, with two retries after the first attempt
/// (no wait between them) and a one-second attempt timeout.
async fn webhook_app() -> TestApp {
    spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.webhook_retry_schedule = vec![0, 0];
        config.webhook_timeout = Duration::from_secs(1);
    })
    .await
}

struct Account {
    token: String,
    id: String,
}

async fn account(app: &TestApp) -> Account {
    let token = app.user_token("ada@example.com").await;
    let id = app.create_account(&token, "Acme").await;
    Account { token, id }
}

/// PUTs the webhook configuration and returns the response (with the secret whole).
async fn configure(app: &TestApp, account: &Account, body: Value) -> Value {
    let path = format!("/v2/accounts/{}/webhooks", account.id);
    expect_json(
        app.send_json(Method::PUT, &path, &account.token, &body)
            .await,
        200,
    )
    .await
}

fn none_auth(receiver: &TestWebhookReceiver, events: &[&str]) -> Value {
    json!({"url": receiver.url("/hooks"), "authType": "none", "events": events})
}

/// Creates a contact and deletes it; returns its id.
async fn delete_a_contact(app: &TestApp, account: &Account, email: &str) -> String {
    let contacts = format!("/v2/accounts/{}/contacts", account.id);
    let created = expect_json(
        app.send_json(
            Method::POST,
            &contacts,
            &account.token,
            &json!({ "email": email }),
        )
        .await,
        200,
    )
    .await;
    let id = created["_id"].as_str().expect("contact id").to_owned();
    let response = app
        .request(
            Method::DELETE,
            &format!("{contacts}/{id}"),
            Some(&account.token),
        )
        .send()
        .await
        .expect("sent");
    expect_json(response, 200).await;
    id
}

async fn list_events(app: &TestApp, account: &Account, query: &str) -> Vec<Value> {
    let path = format!("/v2/accounts/{}/webhook-events{query}", account.id);
    let page = expect_json(app.get(&path, &account.token).await, 200).await;
    page["items"].as_array().expect("items").clone()
}

async fn count_events(app: &TestApp, account: &Account, query: &str) -> u64 {
    let path = format!("/v2/accounts/{}/webhook-events/count{query}", account.id);
    let body = expect_json(app.get(&path, &account.token).await, 200).await;
    body["count"].as_u64().expect("count")
}

async fn get_event(app: &TestApp, account: &Account, id: &str) -> Value {
    let path = format!("/v2/accounts/{}/webhook-events/{id}", account.id);
    expect_json(app.get(&path, &account.token).await, 200).await
}

async fn only_event(app: &TestApp, account: &Account) -> Value {
    let events = list_events(app, account, "").await;
    assert_eq!(events.len(), 1, "{events:?}");
    events[0].clone()
}

async fn run_worker(app: &TestApp) -> DeliveryRound {
    WebhookWorker::new(app.services.clone(), &app.config)
        .run_once()
        .await
        .expect("a worker round")
}

/// Standard Webhooks, written from the specification and independent of the service's
/// code: HMAC-SHA256 keyed with the base64 after `whsec_`, over `id.timestamp.body`.
fn independent_signature(secret: &str, id: &str, timestamp: &str, body: &[u8]) -> String {
    let key = BASE64
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64 key");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

fn header<'a>(request: &'a ReceivedRequest, name: &str) -> &'a str {
    request
        .header(name)
        .unwrap_or_else(|| panic!("no {name} header in {request:?}"))
}

/// Checks the request's signature with the domain's `verify` and with the independent
/// implementation; `Err` when `secret` does not sign it.
fn check_signature(request: &ReceivedRequest, secret: &str) -> Result<(), VerifyError> {
    let (id, timestamp, signature) = (
        header(request, "webhook-id"),
        header(request, "webhook-timestamp"),
        header(request, "webhook-signature"),
    );
    let verified = verify(
        id,
        timestamp,
        &request.body,
        signature,
        secret,
        DEFAULT_TOLERANCE,
        SystemTime::now(),
    );
    let independent = independent_signature(secret, id, timestamp, &request.body);
    let listed = signature.split(' ').any(|entry| entry == independent);
    assert_eq!(
        verified.is_ok(),
        listed,
        "the domain's verify and the independent check disagree"
    );
    verified
}

fn parse_time(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a timestamp"), &Rfc3339).expect("RFC 3339")
}

#[tokio::test]
async fn a_delivery_is_signed_and_shaped_per_standard_webhooks() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    let saved = configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    let secret = saved["signingSecret"].as_str().expect("secret").to_owned();
    let contact = delete_a_contact(&app, &account, "Grace@Example.com").await;

    let queued = only_event(&app, &account).await;
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["tryCount"], 0);
    assert_eq!(queued["event"], "contact.deleted");
    assert_eq!(queued["accountId"], account.id.as_str());
    assert_eq!(queued["payload"]["email"], "Grace@Example.com");
    assert_eq!(queued["payload"]["contactId"], contact.as_str());
    assert_eq!(queued["payload"]["accountId"], account.id.as_str());
    assert!(queued["payload"]["occurredAt"].is_string(), "{queued}");
    assert_eq!(queued["target"]["url"], receiver.url("/hooks"));
    assert_eq!(queued["target"]["authType"], "none");
    assert_eq!(
        queued["target"]["signingSecretSuffix"],
        &secret[secret.len() - 4..]
    );
    assert!(queued["target"].get("username").is_none(), "{queued}");
    assert!(queued.get("parentEventId").is_none(), "{queued}");
    assert!(queued.get("nextAttemptAt").is_some(), "{queued}");

    let round = run_worker(&app).await;
    assert_eq!(round.delivered, 1, "{round:?}");

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/hooks");
    assert_eq!(header(request, "content-type"), "application/json");
    assert_eq!(
        request.header("authorization"),
        None,
        "none sends no Authorization"
    );
    assert_eq!(
        header(request, "webhook-id"),
        queued["_id"].as_str().expect("id")
    );
    let sent_at: i64 = header(request, "webhook-timestamp")
        .parse()
        .expect("seconds");
    let now = OffsetDateTime::now_utc().unix_timestamp();
    assert!(
        (now - sent_at).abs() < 60,
        "timestamp {sent_at} vs now {now}"
    );
    assert_eq!(check_signature(request, &secret), Ok(()));
    let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
    assert_eq!(body["type"], "contact.deleted");
    assert_eq!(body["data"], queued["payload"]);
    assert_eq!(body["timestamp"], queued["payload"]["occurredAt"]);

    let delivered = get_event(&app, &account, queued["_id"].as_str().expect("id")).await;
    assert_eq!(delivered["status"], "delivered");
    assert_eq!(delivered["tryCount"], 1);
    assert_eq!(delivered["lastStatusCode"], 200);
    assert!(delivered["deliveredAt"].is_string(), "{delivered}");
    assert!(delivered.get("nextAttemptAt").is_none(), "{delivered}");
    assert!(delivered.get("lastError").is_none(), "{delivered}");

    assert_eq!(run_worker(&app).await.claimed, 0, "nothing left to deliver");
    assert_eq!(receiver.requests().len(), 1);
}

#[tokio::test]
async fn basic_and_bearer_send_their_authorization() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    configure(
        &app,
        &account,
        json!({
            "url": receiver.url("/basic"), "authType": "basic", "events": ["contact.deleted"],
            "username": "mailroom", "passwordOrToken": "pa55-word"
        }),
    )
    .await;
    delete_a_contact(&app, &account, "one@example.com").await;
    assert_eq!(run_worker(&app).await.delivered, 1);
    let expected = format!("Basic {}", BASE64.encode("mailroom:pa55-word"));
    assert_eq!(header(&receiver.requests()[0], "authorization"), expected);
    let basic = only_event(&app, &account).await;
    assert_eq!(basic["target"]["authType"], "basic");
    assert_eq!(basic["target"]["username"], "mailroom");
    assert_eq!(basic["target"]["passwordOrTokenSuffix"], "word");
    assert!(
        !basic.to_string().contains("pa55-word"),
        "secret never shown: {basic}"
    );

    configure(
        &app,
        &account,
        json!({
            "url": receiver.url("/bearer"), "authType": "bearer", "events": ["contact.deleted"],
            "passwordOrToken": "tok-12345678"
        }),
    )
    .await;
    delete_a_contact(&app, &account, "two@example.com").await;
    assert_eq!(run_worker(&app).await.delivered, 1);
    let second = &receiver.requests()[1];
    assert_eq!(second.path, "/bearer");
    assert_eq!(header(second, "authorization"), "Bearer tok-12345678");
    let events = list_events(&app, &account, "").await;
    assert_eq!(events[1]["target"]["authType"], "bearer");
    assert_eq!(events[1]["target"]["passwordOrTokenSuffix"], "5678");
    assert!(events[1]["target"].get("username").is_none());
}

#[tokio::test]
async fn a_500_then_200_is_delivered_on_the_second_try() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::with_body(500, "boom")]);
    let saved = configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    let secret = saved["signingSecret"].as_str().expect("secret");
    delete_a_contact(&app, &account, "ada@example.com").await;

    let first = run_worker(&app).await;
    assert_eq!((first.retrying, first.delivered), (1, 0), "{first:?}");
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "retrying");
    assert_eq!(event["tryCount"], 1);
    assert_eq!(event["lastStatusCode"], 500);
    let error = event["lastError"].as_str().expect("lastError");
    assert!(error.contains("500") && error.contains("boom"), "{error}");
    assert!(event["nextAttemptAt"].is_string(), "{event}");

    let second = run_worker(&app).await;
    assert_eq!(second.delivered, 1, "{second:?}");
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "delivered");
    assert_eq!(event["tryCount"], 2);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        header(&requests[0], "webhook-id"),
        header(&requests[1], "webhook-id"),
        "automatic retries keep the message id"
    );
    for request in &requests {
        assert_eq!(check_signature(request, secret), Ok(()));
    }
}

#[tokio::test]
async fn an_endpoint_that_always_fails_ends_failed_when_the_schedule_is_spent() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start_with(ReceiverReply::status(500));
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    // Schedule `0,0`: three attempts in all.
    for attempt in 1..=3 {
        let round = run_worker(&app).await;
        assert_eq!(round.claimed, 1, "attempt {attempt}: {round:?}");
    }
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "failed");
    assert_eq!(event["tryCount"], 3);
    assert_eq!(event["lastStatusCode"], 500);
    assert!(event.get("nextAttemptAt").is_none(), "{event}");
    assert_eq!(
        run_worker(&app).await.claimed,
        0,
        "a failed event is not attempted"
    );
    assert_eq!(receiver.requests().len(), 3);
    assert_eq!(count_events(&app, &account, "?status=failed").await, 1);
}

#[tokio::test]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::with_header(
        302,
        "Location",
        &receiver.url("/elsewhere"),
    )]);
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    let round = run_worker(&app).await;
    assert_eq!(round.retrying, 1, "{round:?}");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "the redirect was not followed");
    assert_eq!(requests[0].path, "/hooks");
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "retrying");
    assert_eq!(event["lastStatusCode"], 302);
    let error = event["lastError"].as_str().expect("lastError");
    assert!(error.contains("redirects are not followed"), "{error}");
}

#[tokio::test]
async fn a_hanging_endpoint_hits_the_timeout() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::Hang]);
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    let started = Instant::now();
    let round = run_worker(&app).await;
    let took = started.elapsed();
    assert_eq!(round.retrying, 1, "{round:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "the 1 s timeout bounds the attempt: {took:?}"
    );
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "retrying");
    assert!(event.get("lastStatusCode").is_none(), "{event}");
    let error = event["lastError"].as_str().expect("lastError");
    assert!(error.contains("did not answer in time"), "{error}");

    assert_eq!(
        run_worker(&app).await.delivered,
        1,
        "the next attempt succeeds"
    );
}

#[tokio::test]
async fn a_closed_connection_is_retried() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::Close]);
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    assert_eq!(run_worker(&app).await.retrying, 1);
    let event = only_event(&app, &account).await;
    assert!(event.get("lastStatusCode").is_none(), "{event}");
    assert!(event["lastError"].is_string(), "{event}");
    assert_eq!(run_worker(&app).await.delivered, 1);
}

#[tokio::test]
async fn a_410_fails_at_once() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::status(410)]);
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    let round = run_worker(&app).await;
    assert_eq!(round.failed, 1, "{round:?}");
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "failed");
    assert_eq!(event["tryCount"], 1);
    assert_eq!(event["lastStatusCode"], 410);
    assert!(event.get("nextAttemptAt").is_none(), "{event}");
    assert_eq!(run_worker(&app).await.claimed, 0);
    assert_eq!(receiver.requests().len(), 1);
}

#[tokio::test]
async fn retry_after_on_429_is_honoured() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::with_header(429, "Retry-After", "120")]);
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;

    assert_eq!(run_worker(&app).await.retrying, 1);
    let event = only_event(&app, &account).await;
    let wait = parse_time(&event["nextAttemptAt"]) - parse_time(&event["lastAttemptAt"]);
    assert!(
        wait >= time::Duration::seconds(119) && wait <= time::Duration::seconds(125),
        "the schedule says 0 s, the endpoint 120 s: {wait}"
    );
    assert_eq!(run_worker(&app).await.claimed, 0, "not before Retry-After");
    app.clock.advance(time::Duration::seconds(121));
    assert_eq!(run_worker(&app).await.delivered, 1);
}

#[tokio::test]
async fn retrying_a_failed_event_redelivers_it_with_its_parent() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::status(410)]);
    let saved = configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    let secret = saved["signingSecret"].as_str().expect("secret");
    delete_a_contact(&app, &account, "ada@example.com").await;
    run_worker(&app).await;
    let failed = only_event(&app, &account).await;
    assert_eq!(failed["status"], "failed");
    let failed_id = failed["_id"].as_str().expect("id");

    let members_path = format!("/v2/accounts/{}/members", account.id);
    let members = expect_json(app.get(&members_path, &account.token).await, 200).await;
    let user_id = members["items"][0]["_id"].as_str().expect("user id");

    let retry_path = format!(
        "/v2/accounts/{}/webhook-events/{failed_id}/retry",
        account.id
    );
    let retried = expect_json(
        app.request(Method::POST, &retry_path, Some(&account.token))
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    assert_ne!(retried["_id"], failed["_id"]);
    assert_eq!(retried["status"], "queued");
    assert_eq!(retried["tryCount"], 0);
    assert_eq!(retried["parentEventId"], failed_id);
    assert_eq!(retried["retriedByUserId"], user_id);
    assert_eq!(retried["event"], failed["event"]);
    assert_eq!(retried["payload"], failed["payload"]);

    assert_eq!(run_worker(&app).await.delivered, 1);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        header(&requests[1], "webhook-id"),
        retried["_id"].as_str().expect("id")
    );
    assert_eq!(check_signature(&requests[1], secret), Ok(()));
    let body: Value = serde_json::from_slice(&requests[1].body).expect("JSON");
    assert_eq!(body["data"], failed["payload"]);
    let retried_now = get_event(&app, &account, retried["_id"].as_str().expect("id")).await;
    assert_eq!(retried_now["status"], "delivered");
    assert_eq!(retried_now["parentEventId"], failed_id);
    let original = get_event(&app, &account, failed_id).await;
    assert_eq!(
        original["status"], "failed",
        "the original keeps its history"
    );

    // Unknown, malformed and foreign ids are 404.
    let unknown = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    for id in [unknown, "not-an-id"] {
        let path = format!("/v2/accounts/{}/webhook-events/{id}/retry", account.id);
        let response = app
            .request(Method::POST, &path, Some(&account.token))
            .send()
            .await
            .expect("sent");
        expect_problem(response, 404).await;
        let path = format!("/v2/accounts/{}/webhook-events/{id}", account.id);
        expect_problem(app.get(&path, &account.token).await, 404).await;
    }
    let other = app.create_account(&account.token, "Other").await;
    let foreign = format!("/v2/accounts/{other}/webhook-events/{failed_id}/retry");
    let response = app
        .request(Method::POST, &foreign, Some(&account.token))
        .send()
        .await
        .expect("sent");
    expect_problem(response, 404).await;
}

#[tokio::test]
async fn rotating_the_secret_signs_the_next_attempt_with_the_new_one() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    receiver.script([ReceiverReply::status(500)]);
    let mut body = none_auth(&receiver, &["contact.deleted"]);
    let old = configure(&app, &account, body.clone()).await["signingSecret"]
        .as_str()
        .expect("secret")
        .to_owned();
    delete_a_contact(&app, &account, "ada@example.com").await;
    assert_eq!(run_worker(&app).await.retrying, 1);

    let new = format!("whsec_{}", BASE64.encode([7u8; 32]));
    body["signingSecret"] = json!(new);
    assert_eq!(
        configure(&app, &account, body).await["signingSecret"],
        new.as_str()
    );
    assert_eq!(run_worker(&app).await.delivered, 1);

    let requests = receiver.requests();
    assert_eq!(check_signature(&requests[0], &old), Ok(()));
    assert_eq!(check_signature(&requests[1], &new), Ok(()));
    assert_eq!(
        check_signature(&requests[1], &old),
        Err(VerifyError::NoMatchingSignature),
        "the old secret no longer signs"
    );
    let event = only_event(&app, &account).await;
    assert_eq!(
        event["target"]["signingSecretSuffix"],
        &new[new.len() - 4..]
    );
}

#[tokio::test]
async fn contact_deleted_is_queued_only_when_configured() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();

    delete_a_contact(&app, &account, "no-config@example.com").await;
    assert_eq!(
        count_events(&app, &account, "").await,
        0,
        "no configuration"
    );

    configure(&app, &account, none_auth(&receiver, &["contact.bounced"])).await;
    delete_a_contact(&app, &account, "unlisted@example.com").await;
    assert_eq!(count_events(&app, &account, "").await, 0, "type not listed");

    configure(
        &app,
        &account,
        none_auth(&receiver, &["contact.bounced", "contact.deleted"]),
    )
    .await;
    let contact = delete_a_contact(&app, &account, "listed@example.com").await;
    let event = only_event(&app, &account).await;
    assert_eq!(event["payload"]["contactId"], contact.as_str());
    assert_eq!(event["payload"]["email"], "listed@example.com");
    assert_eq!(run_worker(&app).await.delivered, 1);
    assert_eq!(receiver.requests().len(), 1);
}

#[tokio::test]
async fn the_event_log_pages_filters_and_counts() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    for n in 0..3 {
        delete_a_contact(&app, &account, &format!("c{n}@example.com")).await;
    }
    assert_eq!(run_worker(&app).await.delivered, 3);
    delete_a_contact(&app, &account, "c3@example.com").await;

    assert_eq!(count_events(&app, &account, "").await, 4);
    assert_eq!(count_events(&app, &account, "?status=delivered").await, 3);
    assert_eq!(count_events(&app, &account, "?status=queued").await, 1);
    assert_eq!(
        count_events(&app, &account, "?event=contact.deleted").await,
        4
    );
    assert_eq!(
        count_events(&app, &account, "?event=contact.bounced").await,
        0
    );
    assert_eq!(
        count_events(&app, &account, "?status=queued&event=contact.deleted").await,
        1
    );

    let all = list_events(&app, &account, "").await;
    let emails: Vec<&str> = all
        .iter()
        .map(|e| e["payload"]["email"].as_str().expect("email"))
        .collect();
    assert_eq!(
        emails,
        [
            "c0@example.com",
            "c1@example.com",
            "c2@example.com",
            "c3@example.com"
        ],
        "oldest first"
    );
    let path = format!("/v2/accounts/{}/webhook-events?start=2&limit=1", account.id);
    let page = expect_json(app.get(&path, &account.token).await, 200).await;
    assert_eq!(
        (page["start"].as_u64(), page["limit"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(page["items"][0]["_id"], all[2]["_id"]);
    let queued = list_events(&app, &account, "?status=queued").await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["payload"]["email"], "c3@example.com");

    for (query, field) in [
        ("?status=sending", "status"),
        ("?event=contact.created", "event"),
        ("?limit=0", "limit"),
    ] {
        for path in ["", "/count"] {
            let path = format!("/v2/accounts/{}/webhook-events{path}{query}", account.id);
            if path.contains("/count") && field == "limit" {
                continue;
            }
            let problem = expect_problem(app.get(&path, &account.token).await, 400).await;
            assert_eq!(problem["errors"][0]["field"], field, "{path}: {problem}");
        }
    }

    let stranger = app.user_token("eve@example.com").await;
    let path = format!("/v2/accounts/{}/webhook-events", account.id);
    expect_problem(app.get(&path, &stranger).await, 401).await;
    let path = format!(
        "/v2/accounts/{}/webhook-events/{}",
        account.id,
        all[0]["_id"].as_str().expect("id")
    );
    expect_problem(app.get(&path, &stranger).await, 401).await;
}

#[tokio::test]
async fn an_expired_lease_returns_the_event_to_the_queue() {
    let app = webhook_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    configure(&app, &account, none_auth(&receiver, &["contact.deleted"])).await;
    delete_a_contact(&app, &account, "ada@example.com").await;
    let worker = WebhookWorker::new(app.services.clone(), &app.config);

    // A worker claims the event and then stalls (or dies) before recording anything.
    let (services, settings) = (app.services.clone(), worker.settings().clone());
    let stalled = tokio::task::spawn_blocking(move || {
        claim_webhook_deliveries(&services, &settings, &AccountRoom::default())
    })
    .await
    .expect("claim task")
    .expect("claim");
    assert_eq!(stalled.deliveries.len(), 1);
    assert_eq!(worker.run_once().await.expect("round").claimed, 0, "leased");

    let lease = time::Duration::try_from(worker.settings().lease).expect("lease");
    app.clock.advance(lease + time::Duration::seconds(1));
    assert_eq!(
        worker.run_once().await.expect("round").delivered,
        1,
        "lease ran out"
    );

    // The stalled worker wakes up: its attempt goes out, but its record is refused.
    let mut reports = Vec::new();
    for delivery in stalled.deliveries {
        reports.push(send_webhook_delivery(&app.services, delivery).await);
    }
    let (services, settings) = (app.services.clone(), worker.settings().clone());
    let late = tokio::task::spawn_blocking(move || {
        record_webhook_attempts(&services, &settings, &stalled.lease, reports)
    })
    .await
    .expect("record task")
    .expect("record");
    assert_eq!(late.lost, 1, "{late:?}");
    let event = only_event(&app, &account).await;
    assert_eq!(event["status"], "delivered");
    assert_eq!(event["tryCount"], 1, "the late write changed nothing");
}

#[tokio::test]
async fn the_guard_refuses_private_targets_when_the_switch_is_off() {
    let app = spawn_app().await;
    let account = account(&app).await;
    let receiver = TestWebhookReceiver::start();
    let port = receiver.address().port();
    let cases = [
        (receiver.url("/hooks"), "https"),
        (format!("https://127.0.0.1:{port}/hooks"), "loopback"),
        (
            "https://169.254.169.254/latest/meta-data".to_owned(),
            "link-local",
        ),
        ("https://10.1.2.3/hooks".to_owned(), "private network"),
        ("https://[::1]/hooks".to_owned(), "loopback"),
        (
            "https://[::ffff:192.168.1.9]/hooks".to_owned(),
            "private network",
        ),
        (
            "https://hooks.example.invalid/x".to_owned(),
            "could not be resolved",
        ),
    ];
    let path = format!("/v2/accounts/{}/webhooks", account.id);
    for (url, reason) in cases {
        let body = json!({"url": url, "authType": "none", "events": ["contact.deleted"]});
        let problem = expect_problem(
            app.send_json(Method::PUT, &path, &account.token, &body)
                .await,
            400,
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], "url", "{url}: {problem}");
        let message = problem["errors"][0]["message"].as_str().expect("message");
        assert!(message.contains(reason), "{url}: {message}");
    }
    let stored = expect_json(
        app.get(&format!("/v2/accounts/{}", account.id), &account.token)
            .await,
        200,
    )
    .await;
    assert!(stored["webhooks"].is_null(), "nothing stored: {stored}");
    // A public literal needs no lookup and passes.
    configure(
        &app,
        &account,
        json!({"url": "https://93.184.216.34/hooks", "authType": "none", "events": ["contact.deleted"]}),
    )
    .await;

    // At delivery time too: an event whose target was saved while private egress was on
    // fails at once when a worker runs with it off, without a connection.
    let dev = webhook_app().await;
    let dev_account = self::account(&dev).await;
    configure(
        &dev,
        &dev_account,
        none_auth(&receiver, &["contact.deleted"]),
    )
    .await;
    delete_a_contact(&dev, &dev_account, "ada@example.com").await;
    let mut strict = dev.config.clone();
    strict.allow_private_egress = false;
    let (services, _) = build_services(&strict, dev.clock.clone()).expect("services");
    let round = WebhookWorker::new(services, &strict)
        .run_once()
        .await
        .expect("round");
    assert_eq!(round.failed, 1, "{round:?}");
    let event = only_event(&dev, &dev_account).await;
    assert_eq!(event["status"], "failed");
    let error = event["lastError"].as_str().expect("lastError");
    assert!(error.contains("not allowed"), "{error}");
    assert_eq!(
        receiver.connection_count(),
        0,
        "no connection was attempted"
    );
}
