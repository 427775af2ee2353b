//! Template previews in the real `mailroom serve` process render in `render-sandbox`
//! children, like deliveries: a template that builds gigabytes of values in a few
//! instructions is a 400 for its preview, and the API process keeps answering, its peak
//! memory within 48 MiB of its peak before the bomb (whose first value alone is 100 MB).

mod support;

use std::time::Duration;

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
    assert!(detail.contains("render process ended"), "{detail}");

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
