//! Retries after 429 and 503: against the real server's rate limiter first, then against
//! a scripted HTTP server (crates/test-support's receiver) for what a real server cannot
//! be made to answer on cue: 503s in a row, a `Retry-After` beyond the budget.

use std::time::{Duration, Instant};

use mailroom_client::{
    AccountId, Client, Error, NewAccount, NewEvent, RetryPolicy, SendMessage,
    IDEMPOTENCY_KEY_HEADER,
};
use mailroom_server::config::RateLimit;
use mailroom_test_support::{ReceiverReply, TestWebhookReceiver};

use crate::support::Setup;

fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> ReceiverReply {
    ReceiverReply::Respond {
        status,
        headers: headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        body: body.to_owned(),
    }
}

const UNAVAILABLE: &str = r#"{"status":503,"title":"Service Unavailable","detail":"the database cannot be reached","errors":[]}"#;

#[tokio::test]
async fn a_429_from_the_real_rate_limiter_is_retried_after_retry_after() {
    // One request back to back, then one per second.
    let setup = Setup::new(|config| {
        config.rate_limit = Some(RateLimit {
            per_second: 1.0,
            burst: 1,
        });
    })
    .await;
    let client = &setup.client;
    client
        .list_accounts()
        .await
        .expect("the bucket's one request");

    // The bucket is empty: the server answers 429 with Retry-After, the client waits and
    // the second attempt succeeds.
    let started = Instant::now();
    client
        .list_accounts()
        .await
        .expect("retried after the wait");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "waited {waited:?}");
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");

    // With retries off the same refusal is the caller's, as a typed problem.
    let error = client
        .with_retry(RetryPolicy::NONE)
        .list_accounts()
        .await
        .expect_err("refused");
    let problem = error.problem().expect("a problem");
    assert_eq!(problem.status, 429);
    assert_eq!(problem.retry_after, Some(Duration::from_secs(1)));

    // A POST without a key is never retried: it fails at once.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.list_accounts().await.expect("a fresh token");
    let started = Instant::now();
    let error = client
        .create_account(&NewAccount {
            name: "Second".into(),
            ..NewAccount::default()
        })
        .await
        .expect_err("refused, not retried");
    assert_eq!(error.status(), Some(429));
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn retries_stop_at_the_count_and_the_total_wait() {
    let stub = TestWebhookReceiver::start_with(reply(503, &[("Retry-After", "0")], UNAVAILABLE));
    let policy = RetryPolicy {
        max_retries: 2,
        max_wait: Duration::from_secs(5),
        default_delay: Duration::from_millis(10),
    };
    let client = Client::builder(stub.url(""))
        .token("mailroom_pat_stub")
        .retry(policy)
        .build()
        .expect("client");
    let error = client.list_accounts().await.expect_err("still unavailable");
    assert_eq!(error.status(), Some(503));
    assert_eq!(
        error.problem().expect("problem").detail,
        "the database cannot be reached"
    );
    assert_eq!(stub.requests().len(), 3, "one attempt and two retries");

    // A Retry-After beyond the wait budget is not waited for.
    stub.script([reply(429, &[("Retry-After", "60")], "")]);
    let started = Instant::now();
    let error = client.list_accounts().await.expect_err("refused");
    assert!(started.elapsed() < Duration::from_secs(2));
    let problem = error.problem().expect("problem");
    assert_eq!(problem.status, 429);
    assert_eq!(
        problem.title, "Too Many Requests",
        "a bodiless answer still reads"
    );
    assert_eq!(problem.retry_after, Some(Duration::from_secs(60)));
    assert_eq!(stub.requests().len(), 4);
}

#[tokio::test]
async fn a_send_is_retried_with_the_same_key_and_an_event_is_not_retried() {
    let stub = TestWebhookReceiver::start();
    let client = Client::builder(stub.url(""))
        .token("mailroom_pat_stub")
        .build()
        .expect("client");
    let account: AccountId = "0193b1c4-0000-7000-8000-000000000001".parse().expect("id");
    let message = serde_json::json!({
        "_id": "0193b1c4-0000-7000-8000-000000000002",
        "accountId": account.to_string(),
        "contactId": "0193b1c4-0000-7000-8000-000000000003",
        "email": "grace@example.com",
        "templateId": "0193b1c4-0000-7000-8000-000000000004",
        "kind": "transactional", "status": "queued", "data": {}, "attempts": 0,
        "messageId": "<x@acme.example>",
        "createDate": "2026-11-24T10:00:00.000Z", "updateDate": "2026-11-24T10:00:00.000Z"
    });
    stub.script([
        reply(503, &[("Retry-After", "0")], UNAVAILABLE),
        reply(429, &[("Retry-After", "0")], ""),
        reply(
            200,
            &[("Content-Type", "application/json")],
            &message.to_string(),
        ),
    ]);
    let send = SendMessage {
        slug: "order-receipt".into(),
        email: "grace@example.com".into(),
        data: None,
        send_at: None,
    };
    let sent = client
        .send_message(account, &send, None)
        .await
        .expect("third time");
    assert_eq!(sent.status, "queued");
    let requests = stub.requests();
    assert_eq!(requests.len(), 3);
    let key = requests[0]
        .header(IDEMPOTENCY_KEY_HEADER)
        .expect("a generated key");
    assert!(!key.is_empty());
    for request in &requests {
        assert_eq!(request.path, format!("/v2/accounts/{account}/messages"));
        assert_eq!(
            request.header(IDEMPOTENCY_KEY_HEADER),
            Some(key),
            "the same key"
        );
        assert_eq!(
            request.header("authorization"),
            Some("Bearer mailroom_pat_stub")
        );
    }

    // Recording an event carries no key: one attempt, the 429 returned.
    stub.script([reply(429, &[("Retry-After", "0")], "")]);
    let error = client
        .record_event(
            account,
            &NewEvent {
                slug: "signed_up".into(),
                email: "grace@example.com".into(),
                attributes: None,
            },
        )
        .await
        .expect_err("not retried");
    assert!(
        matches!(&error, Error::Api(problem) if problem.status == 429),
        "{error:?}"
    );
    assert_eq!(stub.requests().len(), 4);
}

#[tokio::test]
async fn a_hanging_server_hits_the_per_call_timeout() {
    let stub = TestWebhookReceiver::start_with(ReceiverReply::Hang);
    let client = Client::new(stub.url(""), "mailroom_pat_stub").expect("client");
    let started = Instant::now();
    let error = client
        .with_timeout(Duration::from_millis(300))
        .healthz()
        .await
        .expect_err("timed out");
    assert!(
        matches!(
            error,
            Error::Timeout {
                operation: "healthz"
            }
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}
