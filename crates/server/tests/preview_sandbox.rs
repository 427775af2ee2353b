//! Template previews in the real `mailroom serve` process render in `render-sandbox`
//! children, like deliveries: a template that builds gigabytes of values in a few
//! instructions is a 400 for its preview, and the API process keeps answering, its peak
//! memory within 48 MiB of its peak before the bomb (whose first value alone is 100 MB).

mod support;

use std::time::{Duration, Instant};

use mailroom_test_support::TestSmtpOptions;
use reqwest::Method;
use serde_json::{json, Value};
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

async fn preview(deployment: &Deployment, template: &str) -> (u16, Value) {
    let response = deployment
        .http
        .request(
            Method::POST,
            format!(
                "{}/v2/accounts/{}/templates/{template}/preview",
                deployment.base, deployment.account
            ),
        )
        .bearer_auth(&deployment.token)
        .json(&json!({}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("preview answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test]
async fn a_memory_bomb_preview_is_a_400_and_the_api_process_keeps_answering() {
    let mut deployment = Deployment::start("preview_bomb", TestSmtpOptions::default()).await;
    let bomb = deployment
        .account_call(
            Method::POST,
            "/templates",
            Some(
                json!({"name": "Bomb", "slug": "bomb", "subject": "Boom", "content": MEMORY_BOMB}),
            ),
        )
        .await["_id"]
        .as_str()
        .expect("template id")
        .to_owned();

    // The process's own peak before the bomb, after one ordinary preview (its render
    // child, pools and caches are warm): the bomb's first value alone is 100 MB.
    let template = deployment.template.clone();
    let (status, rendered) = preview(&deployment, &template).await;
    assert_eq!(status, 200, "{rendered}");
    let peak_before = peak_rss(deployment.api.pid());

    let (status, problem) = preview(&deployment, &bomb).await;
    assert_eq!(status, 400, "{problem}");
    let detail = problem["detail"].as_str().expect("detail");
    // Whichever bound stops it first: the address space, or (on a loaded machine, where
    // building the first gigabytes takes a while) the preview's 2 s deadline.
    assert!(
        detail.contains("render process ended") || detail.contains("took longer than 2 s"),
        "{detail}"
    );

    // The next preview gets a fresh child; the API process never held the bomb's values.
    let (status, rendered) = preview(&deployment, &template).await;
    assert_eq!(status, 200, "{rendered}");
    assert_eq!(rendered["subject"], "News for preview@example.com");
    deployment.api.assert_running();
    let growth = peak_rss(deployment.api.pid()).saturating_sub(peak_before);
    assert!(
        growth < 48 * 1024 * 1024,
        "the API process's peak grew by {} MiB over the bomb's preview",
        growth / (1024 * 1024)
    );
}

/// Minutes of CPU in a few thousand instructions: every loop turn builds a 50 MB string
/// and runs `upper` over it.
const SLOW: &str =
    "{% for i in range(1000) %}{% set y = (\"x\" * 50000000) | upper %}{% endfor %}done";

async fn preview_of(deployment: &Deployment, account: &str, template: &str) -> (u16, Value) {
    let response = deployment
        .http
        .request(
            Method::POST,
            format!(
                "{}/v2/accounts/{account}/templates/{template}/preview",
                deployment.base
            ),
        )
        .bearer_auth(&deployment.token)
        .json(&json!({}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("preview answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// Two previews of a template that would take minutes answer 400 about time within 10 s
/// (the preview deadline is 2 s); a third of the same account at once is a 429; another
/// account's preview meanwhile answers within 1 s, without waiting for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_previews_answer_400_within_10_s_and_another_accounts_preview_within_1_s() {
    let deployment = Deployment::start("preview_slow", TestSmtpOptions::default()).await;
    let slow_account = deployment
        .call(Method::POST, "/v2/accounts", Some(json!({"name": "Slow"})))
        .await["_id"]
        .as_str()
        .expect("account id")
        .to_owned();
    let slow = deployment
        .call(
            Method::POST,
            &format!("/v2/accounts/{slow_account}/templates"),
            Some(json!({"name": "Slow", "slug": "slow", "subject": "Slow", "content": SLOW})),
        )
        .await["_id"]
        .as_str()
        .expect("template id")
        .to_owned();
    let deployment = std::sync::Arc::new(deployment);

    let started = Instant::now();
    let slow_previews: Vec<_> = (0..2)
        .map(|_| {
            let deployment = std::sync::Arc::clone(&deployment);
            let (account, template) = (slow_account.clone(), slow.clone());
            tokio::spawn(async move {
                let answer = preview_of(&deployment, &account, &template).await;
                (answer, started.elapsed())
            })
        })
        .collect();
    // Half a second in, both are rendering (their deadline is 2 s).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let third = preview_of(&deployment, &slow_account, &slow).await;
    assert_eq!(third.0, 429, "a third preview at once: {}", third.1);

    let other_started = Instant::now();
    let (status, rendered) =
        preview_of(&deployment, &deployment.account, &deployment.template).await;
    let other_took = other_started.elapsed();
    assert_eq!(status, 200, "{rendered}");
    assert_eq!(rendered["subject"], "News for preview@example.com");

    let mut slowest = Duration::ZERO;
    for handle in slow_previews {
        let ((status, problem), took) = handle.await.expect("preview task");
        assert_eq!(status, 400, "{problem}");
        let detail = problem["detail"].as_str().expect("detail");
        assert!(detail.contains("took longer than 2 s"), "{detail}");
        slowest = slowest.max(took);
    }
    println!(
        "slow previews answered 400 after {:.1} s; another account's preview took {} ms \
         meanwhile",
        slowest.as_secs_f64(),
        other_took.as_millis()
    );
    assert!(slowest < Duration::from_secs(10), "{slowest:?}");
    assert!(other_took < Duration::from_secs(1), "{other_took:?}");
}
