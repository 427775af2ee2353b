//! Rendering isolation (issue 13, defect 2): a template that builds gigabytes of values in
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
    let bomb = deployment
        .call(Method::POST, "/v2/accounts", Some(json!({"name": "Bomb"})))
        .await["_id"]
        .as_str()
        .expect("account id")
        .to_owned();
    deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{bomb}/mail-servers"),
            Some(json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": deployment.smtp.port(),
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@bomb.example", "defaultFromName": "Bomb"
            })),
        )
        .await;
    deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{bomb}/templates"),
            Some(json!({"name": "Bomb", "slug": "bomb", "subject": "Boom",
                        "content": MEMORY_BOMB})),
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
