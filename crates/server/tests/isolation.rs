//! Rendering isolation: a template that builds gigabytes of values in
//! a few instructions (fuel bounds instructions, not memory) fails its own message,
//! visibly, and the real `mailroom worker` process keeps delivering everyone else's mail
//! with its memory bounded: it renders in `render-sandbox` children whose address space
//! is bounded (crates/server/src/render_sandbox.rs).

mod support;

use std::time::{Duration, Instant};

use mailroom_test_support::TestSmtpOptions;
use reqwest::Method;
use serde_json::json;
use support::Deployment;

/// 100,000,000 bytes, then doubled six times: 6.4 GB if nothing stops it.
const MEMORY_BOMB: &str = "{% set x = \"x\" * 100000000 %}{% set x = x ~ x %}{% set x = x ~ x %}\
{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{{ x | length }}";

/// A second account of the deployment's user, sending through the deployment's SMTP
/// server (from `hello@<name in lower case>.example`), with one template; its id.
async fn account_with_template(
    deployment: &Deployment,
    name: &str,
    template: serde_json::Value,
) -> String {
    let account = deployment
        .call(Method::POST, "/v2/accounts", Some(json!({ "name": name })))
        .await["_id"]
        .as_str()
        .expect("account id")
        .to_owned();
    let sender = format!("hello@{}.example", name.to_lowercase());
    deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{account}/mail-servers"),
            Some(json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": deployment.smtp.port(),
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": sender, "defaultFromName": name
            })),
        )
        .await;
    deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{account}/templates"),
            Some(template),
        )
        .await;
    account
}

/// The peak resident set of a process (`VmHWM` of `/proc/<pid>/status`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// Account "Bomb" queues one message of the memory-bomb template before account "Acme"
/// queues 30 ordinary ones. The worker fails the bomb's message with a reason naming the
/// render, delivers all 30 of Acme's, keeps running, and its peak RSS stays under 256 MiB
/// (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_template_fails_its_message_and_the_worker_delivers_the_rest() {
    let deployment = Deployment::start("render_bomb", TestSmtpOptions::default()).await;
    let bomb = account_with_template(
        &deployment,
        "Bomb",
        json!({"name": "Bomb", "slug": "bomb", "subject": "Boom", "content": MEMORY_BOMB}),
    )
    .await;
    let bombed = deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{bomb}/messages"),
            Some(json!({"slug": "bomb", "email": "victim@example.org"})),
        )
        .await["_id"]
        .as_str()
        .expect("message id")
        .to_owned();
    for n in 0..30 {
        deployment
            .account_call(
                Method::POST,
                "/messages",
                Some(json!({"slug": "news", "email": format!("reader-{n}@example.org")})),
            )
            .await;
    }

    let mut worker = deployment.start_worker("worker-a").await;
    let started = Instant::now();
    let bomb_message = loop {
        worker.assert_running();
        let message = deployment
            .call(
                Method::GET,
                &format!("/v2/accounts/{bomb}/messages/{bombed}"),
                None,
            )
            .await;
        if message["status"] != "sending"
            && message["status"] != "queued"
            && deployment.smtp.message_count() >= 30
        {
            break message;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not settled within 120 s: {message}, {} messages delivered",
            deployment.smtp.message_count()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let peak = peak_rss(worker.pid());
    println!(
        "render bomb: settled in {:.1} s, worker peak RSS {:.1} MiB; the bomb's message: {} ({})",
        started.elapsed().as_secs_f64(),
        peak as f64 / (1024.0 * 1024.0),
        bomb_message["status"],
        bomb_message["lastReply"]
    );
    worker.assert_running();
    assert_eq!(bomb_message["status"], "failed", "{bomb_message}");
    assert!(
        bomb_message["lastReply"]
            .as_str()
            .is_some_and(|reply| reply.contains("render")),
        "{bomb_message}"
    );
    assert_eq!(
        deployment.smtp.message_count(),
        30,
        "Acme's mail and nothing of the bomb"
    );
    assert!(peak < 256 * 1024 * 1024, "peak RSS {peak} bytes");
}

/// Every loop turn is one instruction that costs a tenth of a second or more of CPU
/// (`"x" * 50000000`, then `upper` over it); 1,000 turns stay far inside the fuel and
/// would take minutes.
const SLOW: &str =
    "{% for i in range(1000) %}{% set y = (\"x\" * 50000000) | upper %}{% endfor %}done";

/// Account "Slow" queues 5 messages of a template that would take minutes of CPU each
/// before account "Acme" queues 20 ordinary ones. The worker gives the template one 5 s
/// deadline: its first message fails with a reason about time, the other 4 with the
/// same reason without being rendered, and all 20 of Acme's arrive within 30 s of the
/// worker's start (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_past_the_5_s_render_deadline_fails_and_another_accounts_20_arrive_within_30_s()
{
    let deployment = Deployment::start("render_slow", TestSmtpOptions::default()).await;
    let slow = account_with_template(
        &deployment,
        "Slow",
        json!({"name": "Slow", "slug": "slow", "subject": "Slow", "content": SLOW}),
    )
    .await;
    let mut slowed = Vec::new();
    for n in 0..5 {
        slowed.push(
            deployment
                .call(
                    Method::POST,
                    &format!("/v2/accounts/{slow}/messages"),
                    Some(json!({"slug": "slow", "email": format!("victim-{n}@example.org")})),
                )
                .await["_id"]
                .as_str()
                .expect("message id")
                .to_owned(),
        );
    }
    for n in 0..20 {
        deployment
            .account_call(
                Method::POST,
                "/messages",
                Some(json!({"slug": "news", "email": format!("reader-{n}@example.org")})),
            )
            .await;
    }

    let mut worker = deployment.start_worker("worker-a").await;
    let started = Instant::now();
    let mut delivered_after = None;
    let settled = loop {
        worker.assert_running();
        if delivered_after.is_none() && deployment.smtp.message_count() >= 20 {
            delivered_after = Some(started.elapsed());
        }
        let mut messages = Vec::new();
        for id in &slowed {
            messages.push(
                deployment
                    .call(
                        Method::GET,
                        &format!("/v2/accounts/{slow}/messages/{id}"),
                        None,
                    )
                    .await,
            );
        }
        if delivered_after.is_some()
            && messages
                .iter()
                .all(|message| message["status"] != "sending" && message["status"] != "queued")
        {
            break messages;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not settled within 60 s: {messages:?}, {} messages delivered",
            deployment.smtp.message_count()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let delivered_after = delivered_after.expect("delivered");
    println!(
        "slow template: Acme's 20 delivered {:.1} s after the worker started; the slow \
         template's messages settled after {:.1} s: {:?}",
        delivered_after.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        settled
            .iter()
            .map(|message| message["lastReply"].clone())
            .collect::<Vec<_>>()
    );
    assert!(
        delivered_after < Duration::from_secs(30),
        "Acme's 20 took {delivered_after:?}"
    );
    let mut alone = 0;
    for message in &settled {
        assert_eq!(message["status"], "failed", "{message}");
        let reply = message["lastReply"].as_str().expect("a reason");
        assert!(reply.contains("took longer than 5 s"), "{message}");
        if !reply.contains("not rendered again") {
            alone += 1;
        }
    }
    assert_eq!(alone, 1, "one render ran into the deadline: {settled:?}");
    assert_eq!(
        deployment.smtp.message_count(),
        20,
        "Acme's mail and nothing of Slow's"
    );
    worker.assert_running();
}

/// 9 MB of HTML and 9 MB of text: each field under the 10 MiB a field could render to
/// before, 18 MB a message; 128 of them were over 2 GB for the worker to hold.
const HUGE: &str = "{{ 'x' * 9000000 }}";

/// Account "Huge" queues 128 messages of a template rendering 18 MB each before account
/// "Acme" queues 20 ordinary ones. The 128 end `failed` "too large" (a message renders to
/// at most 2 MiB across its fields), Acme's 20 arrive, and the worker's peak RSS stays
/// under 160 MiB (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_of_18_mb_to_128_contacts_fails_too_large_and_the_worker_stays_under_160_mib() {
    let deployment = Deployment::start("render_huge", TestSmtpOptions::default()).await;
    let huge = account_with_template(&deployment, "Huge", json!({"name": "Huge", "slug": "huge", "subject": "Huge", "content": HUGE, "textContent": HUGE})).await;
    for n in 0..128 {
        deployment
            .call(
                Method::POST,
                &format!("/v2/accounts/{huge}/messages"),
                Some(json!({"slug": "huge", "email": format!("victim-{n}@example.org")})),
            )
            .await;
    }
    for n in 0..20 {
        deployment
            .account_call(
                Method::POST,
                "/messages",
                Some(json!({"slug": "news", "email": format!("reader-{n}@example.org")})),
            )
            .await;
    }

    let mut worker = deployment.start_worker("worker-a").await;
    let started = Instant::now();
    loop {
        worker.assert_running();
        let failed = deployment
            .call(
                Method::GET,
                &format!("/v2/accounts/{huge}/messages/count?status=failed"),
                None,
            )
            .await["count"]
            .as_u64()
            .expect("a count");
        if failed == 128 && deployment.smtp.message_count() >= 20 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "after 120 s: {failed} of Huge's 128 failed, {} of Acme's 20 delivered",
            deployment.smtp.message_count()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let peak = peak_rss(worker.pid());
    let page = deployment
        .call(
            Method::GET,
            &format!("/v2/accounts/{huge}/messages?status=failed&limit=100"),
            None,
        )
        .await;
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 100);
    for message in items {
        let reply = message["lastReply"].as_str().expect("a reason");
        assert!(reply.contains("too large"), "{message}");
    }
    println!(
        "huge template: 128 failed and Acme's 20 delivered in {:.1} s; worker peak RSS \
         {:.1} MiB; a reason: {}",
        started.elapsed().as_secs_f64(),
        peak as f64 / (1024.0 * 1024.0),
        items[0]["lastReply"]
    );
    worker.assert_running();
    assert_eq!(
        deployment.smtp.message_count(),
        20,
        "Acme's mail and nothing of Huge's"
    );
    assert!(peak < 160 * 1024 * 1024, "peak RSS {peak} bytes");
}

/// 1,500,000 bytes of HTML: under the 2 MiB a message may render to.
const LARGE: &str = "{{ 'x' * 1500000 }}";

/// Account "Acme" queues 128 messages of 1.5 MB each (192 MB together). The worker
/// renders only while it holds under 64 MiB of rendered mail and queues the rest of a
/// claim again unrendered: all 128 arrive, and its peak RSS stays under 200 MiB (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_of_1_5_mb_to_128_contacts_arrives_with_the_worker_under_200_mib() {
    let deployment = Deployment::start("render_large", TestSmtpOptions::default()).await;
    deployment
        .account_call(
            Method::POST,
            "/templates",
            Some(json!({"name": "Large", "slug": "large", "subject": "Large",
                        "content": LARGE})),
        )
        .await;
    for n in 0..128 {
        deployment
            .account_call(
                Method::POST,
                "/messages",
                Some(json!({"slug": "large", "email": format!("reader-{n}@example.org")})),
            )
            .await;
    }
    let mut worker = deployment.start_worker("worker-a").await;
    let started = Instant::now();
    deployment
        .wait_for_deliveries(128, &mut [&mut worker], Duration::from_secs(240))
        .await;
    let peak = peak_rss(worker.pid());
    println!(
        "large mail: 128 of 1.5 MB delivered in {:.1} s; worker peak RSS {:.1} MiB",
        started.elapsed().as_secs_f64(),
        peak as f64 / (1024.0 * 1024.0)
    );
    worker.assert_running();
    assert_eq!(deployment.smtp.message_count(), 128);
    assert!(peak < 200 * 1024 * 1024, "peak RSS {peak} bytes");
}
