//! Delivery fairness and quarantine (docs/operations.md, "Delivery engine"): a mail server that stalls fills its own lane only, a webhook endpoint that
//! hangs holds only its own account's events, and a message whose claims keep ending
//! without an outcome is quarantined instead of being claimed forever.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use mailroom_app::messages::{claim_messages, ClaimRequest};
use mailroom_app::{ports::in_transaction, webhook_events::queue_webhook_event};
use mailroom_domain::{
    webhook_event::{ContactChange, ContactNotice},
    AccountId, ContactId,
};
use mailroom_server::{
    message_worker::{MessageWorker, PARALLEL_ROUNDS},
    webhook_worker::{self, WebhookWorker},
};
use mailroom_test_support::{
    ReceiverReply, TestSmtpOptions, TestSmtpServer, TestWebhookReceiver, TlsMode,
};
use mailroom_tests::{expect_json, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::watch;

/// An account with its own mail server (`server`) and an `order-receipt` template.
async fn account_with_server(
    app: &TestApp,
    token: &str,
    name: &str,
    server: &TestSmtpServer,
) -> String {
    let account = app.create_account(token, name).await;
    let post = |rest: &str, body: Value| {
        let path = format!("/v2/accounts/{account}{rest}");
        async move { expect_json(app.send_json(Method::POST, &path, token, &body).await, 200).await }
    };
    post(
        "/mail-servers",
        json!({
            "serviceType": "smtp", "host": "127.0.0.1", "port": server.port(),
            "secure": false, "requireTLS": false, "user": "", "password": "",
            "defaultFromEmail": "hello@acme.example", "defaultFromName": name
        }),
    )
    .await;
    post(
        "/templates",
        json!({"name": "Receipt", "slug": "order-receipt", "subject": "Receipt",
               "content": "<p>Total: {{ total }}</p>"}),
    )
    .await;
    account
}

/// Queues `count` transactional sends to `account`, a few at a time; returns their ids.
async fn queue(
    app: &TestApp,
    token: &str,
    account: &str,
    prefix: &str,
    count: usize,
) -> Vec<Value> {
    let path = format!("/v2/accounts/{account}/messages");
    let mut ids = Vec::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(25) {
        let sends = chunk.iter().map(|n| {
            let body = json!({"slug": "order-receipt", "email": format!("{prefix}-{n}@example.org"),
                              "data": {"total": "9.99"}});
            let path = path.clone();
            async move { expect_json(app.send_json(Method::POST, &path, token, &body).await, 200).await }
        });
        ids.extend(
            join_all(sends)
                .await
                .into_iter()
                .map(|sent| sent["_id"].clone()),
        );
    }
    ids
}

/// Account A's server takes every message and then stalls 30 s before answering its DATA;
/// account B's server answers at once. A's 450 messages are queued first, more than the
/// worker's claims could take in rounds that each wait for their slowest session, then
/// B's 50. All of B's 50 arrive within 10 s of the worker starting: A's lane fills, claims
/// skip A, and B's messages go out through B's own lane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_mail_server_does_not_hold_another_accounts_mail() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.smtp_timeout = Duration::from_secs(40);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let stalled = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        accept_delay: Some(Duration::from_secs(30)),
        ..TestSmtpOptions::default()
    });
    let prompt = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let slow_account = account_with_server(&app, &token, "Slow", &stalled).await;
    let fast_account = account_with_server(&app, &token, "Fast", &prompt).await;
    queue(&app, &token, &slow_account, "slow", 450).await;
    queue(&app, &token, &fast_account, "fast", 50).await;

    let worker = MessageWorker::new(app.services.clone(), &app.config);
    let (_stop, stopped) = watch::channel(false);
    let mut loops: Vec<_> = (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    loops.push({
        let (worker, stopped) = (worker.clone(), stopped.clone());
        tokio::spawn(async move { worker.renew_leases(stopped).await })
    });
    let started = Instant::now();
    while prompt.message_count() < 50 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    println!(
        "lanes: account B's {} of 50 messages arrived in {:.2} s; account A's server had accepted {} of 450",
        prompt.message_count(),
        elapsed.as_secs_f64(),
        stalled.message_count(),
    );
    // The stalled sessions would keep the loops for minutes; the test is over.
    for handle in loops {
        handle.abort();
    }
    assert_eq!(
        prompt.message_count(),
        50,
        "account B's mail waited for account A's server"
    );
    assert!(elapsed <= Duration::from_secs(10));
}

/// One user's sixteen accounts all send through servers that stall 30 s before answering
/// DATA, 40 messages each, queued first: with 16 sessions per server their lanes could
/// hold every message the worker allows (16 × 32 ≥ 512), and they are let fill it before
/// another account's 20 messages are queued. Those still arrive within 10 s, through the
/// part of the bound kept for accounts that hold nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_stalled_accounts_of_one_user_do_not_hold_another_accounts_mail() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.smtp_timeout = Duration::from_secs(40);
        config.smtp_connections_per_server = 16;
        // Past the default bound on accounts per user: the reserve is what is tested.
        config.max_accounts_per_user = Some(16);
    })
    .await;
    let token = app.user_token("mallory@example.com").await;
    let stalled = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        accept_delay: Some(Duration::from_secs(30)),
        ..TestSmtpOptions::default()
    });
    let prompt = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let mut hostile = Vec::new();
    for n in 0..16 {
        hostile.push(account_with_server(&app, &token, &format!("Slow {n}"), &stalled).await);
    }
    let victim_token = app.user_token("ada@example.com").await;
    let victim = account_with_server(&app, &victim_token, "Fast", &prompt).await;
    for (n, account) in hostile.iter().enumerate() {
        queue(&app, &token, account, &format!("slow{n}"), 40).await;
    }

    let worker = MessageWorker::new(app.services.clone(), &app.config);
    let (_stop, stopped) = watch::channel(false);
    let mut loops: Vec<_> = (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    loops.push({
        let (worker, stopped) = (worker.clone(), stopped.clone());
        tokio::spawn(async move { worker.renew_leases(stopped).await })
    });
    // The stalled accounts take what they can before the victim's mail is queued.
    let filling = Instant::now();
    while worker.held() < 384 && filling.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held_before = worker.held();
    queue(&app, &victim_token, &victim, "fast", 20).await;
    let started = Instant::now();
    while prompt.message_count() < 20 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "reserve: the stalled accounts held {held_before}; the victim's {} of 20 messages arrived in {:.2} s; the worker held {}",
        prompt.message_count(),
        started.elapsed().as_secs_f64(),
        worker.held(),
    );
    for handle in loops {
        handle.abort();
    }
    assert_eq!(
        prompt.message_count(),
        20,
        "the victim's mail waited for one user's stalled accounts"
    );
}

/// The reserve is for owners who hold nothing, not only accounts: one user's sixteen
/// stalled accounts fill the worker to its reserve, and that user's seventeenth account,
/// whose own server answers at once and which holds nothing, gets none of the reserve (0 of
/// its 40 messages while the stalls last), while another user's 20 messages arrive
/// through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserve_skips_a_17th_account_of_an_owner_whose_16_accounts_hold_the_worker() {
    if mailroom_test_support::on_citus() {
        eprintln!("skipped on Citus: the worker's bound is overrun there (see docs/operations.md)");
        return;
    }
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.smtp_timeout = Duration::from_secs(40);
        config.smtp_connections_per_server = 16;
        config.max_accounts_per_user = Some(17);
    })
    .await;
    let token = app.user_token("mallory@example.com").await;
    let server = |accept_delay| {
        TestSmtpServer::start(TestSmtpOptions {
            tls: TlsMode::None,
            accept_delay,
            ..TestSmtpOptions::default()
        })
    };
    let stalled = server(Some(Duration::from_secs(30)));
    let sibling_server = server(None);
    let victim_server = server(None);
    let sibling = account_with_server(&app, &token, "Sibling", &sibling_server).await;
    let worker = MessageWorker::new(app.services.clone(), &app.config);
    // One send of the sibling first: the worker learns whose account it is, and then it
    // holds nothing.
    queue(&app, &token, &sibling, "first", 1).await;
    worker.run_once().await.expect("a round");
    assert_eq!(sibling_server.message_count(), 1);
    let mut hostile = Vec::new();
    for n in 0..16 {
        hostile.push(account_with_server(&app, &token, &format!("Slow {n}"), &stalled).await);
    }
    let victim_token = app.user_token("ada@example.com").await;
    let victim = account_with_server(&app, &victim_token, "Fast", &victim_server).await;
    for (n, account) in hostile.iter().enumerate() {
        queue(&app, &token, account, &format!("slow{n}"), 40).await;
    }
    let (_stop, stopped) = watch::channel(false);
    let mut loops: Vec<_> = (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    loops.push({
        let (worker, stopped) = (worker.clone(), stopped.clone());
        tokio::spawn(async move { worker.renew_leases(stopped).await })
    });
    let filling = Instant::now();
    while worker.held() < 384 && filling.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held_before = worker.held();
    queue(&app, &token, &sibling, "sibling", 40).await;
    queue(&app, &victim_token, &victim, "fast", 20).await;
    let started = Instant::now();
    while victim_server.message_count() < 20 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sibling_sent = sibling_server.message_count() - 1;
    println!(
        "owner reserve: the stalled accounts held {held_before}; the victim's {} of 20 arrived in {:.2} s; the stalled owner's other account sent {sibling_sent} of 40",
        victim_server.message_count(),
        started.elapsed().as_secs_f64(),
    );
    for handle in loops {
        handle.abort();
    }
    assert!(
        held_before >= 384,
        "the stalled accounts reach the reserve: {held_before}"
    );
    assert_eq!(
        victim_server.message_count(),
        20,
        "another owner's mail uses the reserve"
    );
    assert_eq!(
        sibling_sent, 0,
        "an account of the owner who holds the worker took from the reserve"
    );
}

/// A message claimed three times without an outcome (its worker died each time while
/// holding it) is quarantined by the fourth claim: `failed`, with a `lastReply` that
/// says why, and counted; it is never sent.
#[tokio::test]
async fn a_message_whose_claims_keep_ending_without_an_outcome_is_quarantined() {
    let app = spawn_app_with(|config| config.allow_private_egress = true).await;
    let token = app.user_token("ada@example.com").await;
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let account = account_with_server(&app, &token, "Acme", &server).await;
    let ids = queue(&app, &token, &account, "grace", 1).await;
    let worker = MessageWorker::new(app.services.clone(), &app.config);
    for claim in 1..=4 {
        // A worker that claims and dies: a fresh lease token, no render, no record.
        let (services, settings) = (app.services.clone(), worker.settings().clone());
        let claimed = tokio::task::spawn_blocking(move || {
            let request = ClaimRequest {
                lease_token: services.ids.next_uuid(),
                limit: 10,
                skip_accounts: Vec::new(),
            };
            claim_messages(&services, &settings, &request)
        })
        .await
        .expect("claim task")
        .expect("claim");
        assert_eq!(claimed.claimed, 1, "claim {claim}");
        let expected = if claim <= 3 { 1 } else { 0 };
        assert_eq!(claimed.to_render.len(), expected, "claim {claim}");
        app.clock.advance(time::Duration::minutes(5));
    }
    let path = format!(
        "/v2/accounts/{account}/messages/{}",
        ids[0].as_str().expect("id")
    );
    let message = expect_json(app.get(&path, &token).await, 200).await;
    assert_eq!(message["status"], "failed", "{message}");
    assert!(
        message["lastReply"]
            .as_str()
            .is_some_and(|reply| reply.starts_with("quarantined:")),
        "{message}"
    );
    let worker_round = worker.run_once().await.expect("round");
    assert_eq!(
        worker_round.claimed, 0,
        "a quarantined message is never claimed again"
    );
    assert!(server.messages().is_empty());
    let stats = expect_json(
        app.get(&format!("/v2/accounts/{account}/messages/stats"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(
        stats
            .as_array()
            .and_then(|days| days.last())
            .expect("today")["failed"],
        1
    );
}

/// Queues `count` `contact.deleted` events for `account` (as contact deletions would).
async fn queue_webhook_events(app: &TestApp, account: &str, count: usize) {
    let services = app.services.clone();
    let account = AccountId::parse(account).expect("account id");
    tokio::task::spawn_blocking(move || {
        in_transaction(services.db.as_ref(), |tx| {
            for n in 0..count {
                queue_webhook_event(
                    tx,
                    &services,
                    &ContactNotice {
                        account_id: account,
                        contact_id: ContactId::from_uuid(services.ids.next_uuid()),
                        email: format!("gone-{n}@example.org"),
                        occurred_at: services.clock.now(),
                        change: ContactChange::Deleted,
                    },
                )?;
            }
            Ok(())
        })
    })
    .await
    .expect("queue task")
    .expect("events queued");
}

/// Account A's webhook endpoint accepts connections and never answers; account B's
/// answers at once. A's 600 events are queued first (more than the worker's claims could
/// take in rounds that each wait for their slowest attempt), then B's 20. All of B's
/// events arrive within 5 s: attempts are recorded one by one, and A never has more than
/// its bound in flight (a claim takes at most an account's room, and skips an account at
/// its bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_endpoint_does_not_hold_another_accounts_events() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.webhook_timeout = Duration::from_secs(20);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let hanging = TestWebhookReceiver::start_with(ReceiverReply::Hang);
    let prompt = TestWebhookReceiver::start();
    let mut accounts = Vec::new();
    for (name, receiver) in [("Slow", &hanging), ("Fast", &prompt)] {
        let account = app.create_account(&token, name).await;
        let body = json!({"url": receiver.url("/hooks"), "authType": "none",
                          "events": ["contact.deleted"]});
        let path = format!("/v2/accounts/{account}/webhooks");
        expect_json(app.send_json(Method::PUT, &path, &token, &body).await, 200).await;
        accounts.push(account);
    }
    queue_webhook_events(&app, &accounts[0], 600).await;
    queue_webhook_events(&app, &accounts[1], 20).await;

    let worker = WebhookWorker::new(app.services.clone(), &app.config);
    let (_stop, stopped) = watch::channel(false);
    let loops: Vec<_> = (0..webhook_worker::PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    let started = Instant::now();
    while prompt.requests().len() < 20 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    // B may be done before the worker's first claims of A's events have all connected.
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "webhook fairness: account B's {} of 20 events arrived in {:.2} s; account A's endpoint got {} requests",
        prompt.requests().len(),
        elapsed.as_secs_f64(),
        hanging.requests().len(),
    );
    for handle in loops {
        handle.abort();
    }
    assert_eq!(
        prompt.requests().len(),
        20,
        "account B's events waited for account A's endpoint"
    );
    assert!(
        hanging.requests().len() <= webhook_worker::ACCOUNT_IN_FLIGHT,
        "{} attempts in flight to one endpoint, more than the worker allows one account ({})",
        hanging.requests().len(),
        webhook_worker::ACCOUNT_IN_FLIGHT
    );
}

/// One user's eight accounts all have endpoints that never answer, each with 100 events
/// queued first: together they could hold every attempt the worker allows (8 × 64 ≥ 512).
/// Another account's 20 events still arrive within 5 s, through the part of the worker's
/// bound kept for accounts with nothing in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_hanging_accounts_of_one_user_do_not_hold_another_accounts_events() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.webhook_timeout = Duration::from_secs(20);
    })
    .await;
    let token = app.user_token("mallory@example.com").await;
    let hanging = TestWebhookReceiver::start_with(ReceiverReply::Hang);
    let prompt = TestWebhookReceiver::start();
    let mut hostile = Vec::new();
    for n in 0..8 {
        let account = app.create_account(&token, &format!("Slow {n}")).await;
        subscribe(&app, &token, &account, &hanging).await;
        hostile.push(account);
    }
    let victim_token = app.user_token("ada@example.com").await;
    let victim = app.create_account(&victim_token, "Fast").await;
    subscribe(&app, &victim_token, &victim, &prompt).await;
    for account in &hostile {
        queue_webhook_events(&app, account, 100).await;
    }
    queue_webhook_events(&app, &victim, 20).await;

    let worker = WebhookWorker::new(app.services.clone(), &app.config);
    let (_stop, stopped) = watch::channel(false);
    let loops: Vec<_> = (0..webhook_worker::PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    let started = Instant::now();
    while prompt.requests().len() < 20 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "webhook reserve: the victim's {} of 20 events arrived in {:.2} s; the hanging endpoint got {} requests",
        prompt.requests().len(),
        started.elapsed().as_secs_f64(),
        hanging.requests().len(),
    );
    for handle in loops {
        handle.abort();
    }
    assert_eq!(
        prompt.requests().len(),
        20,
        "the victim's events waited for one user's hanging accounts"
    );
    assert!(hanging.requests().len() <= webhook_worker::MAX_IN_FLIGHT);
}

/// Points `account`'s webhook at `receiver` for `contact.deleted`.
async fn subscribe(app: &TestApp, token: &str, account: &str, receiver: &TestWebhookReceiver) {
    let body = json!({"url": receiver.url("/hooks"), "authType": "none",
                      "events": ["contact.deleted"]});
    let path = format!("/v2/accounts/{account}/webhooks");
    expect_json(app.send_json(Method::PUT, &path, token, &body).await, 200).await;
}

/// A live worker renews the leases of what it holds: a message whose session outlasts the
/// lease (the server waits 12 s before accepting; the lease is 6 s, and the test clock
/// moves 12 s meanwhile) is never claimed by a second worker, and is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_lease_keeps_a_slow_message_from_a_second_worker() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.message_lease = Duration::from_secs(6);
        config.smtp_timeout = Duration::from_secs(30);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let server = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        accept_delay: Some(Duration::from_secs(12)),
        ..TestSmtpOptions::default()
    });
    let account = account_with_server(&app, &token, "Acme", &server).await;
    let ids = queue(&app, &token, &account, "grace", 1).await;
    let holder = MessageWorker::new(app.services.clone(), &app.config);
    let (_stop, stopped) = watch::channel(false);
    let loops = [
        {
            let (worker, stopped) = (holder.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        },
        {
            let (worker, stopped) = (holder.clone(), stopped.clone());
            tokio::spawn(async move { worker.renew_leases(stopped).await })
        },
    ];
    let started = Instant::now();
    while holder.held() == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = MessageWorker::new(app.services.clone(), &app.config);
    for _ in 0..4 {
        // Renewals run every 2 s (a third of the lease); the clock moves 3 s per 2.5 s.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        app.clock.advance(time::Duration::seconds(3));
        let round = second.run_once().await.expect("round");
        assert_eq!(
            round.claimed, 0,
            "a second worker took a message a live worker holds"
        );
    }
    let path = format!(
        "/v2/accounts/{account}/messages/{}",
        ids[0].as_str().expect("id")
    );
    let sent = loop {
        let message = expect_json(app.get(&path, &token).await, 200).await;
        if message["status"] != "sending" {
            break message;
        }
        assert!(started.elapsed() < Duration::from_secs(40), "{message}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for handle in loops {
        handle.abort();
    }
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(server.messages().len(), 1);
}
