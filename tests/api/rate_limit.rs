//! The per-token rate limit: a token bucket answering 429 with `Retry-After` and the IETF
//! `RateLimit-*` headers.

use std::time::Duration;

use mailroom_server::config::RateLimit;
use mailroom_tests::{expect_problem, spawn_app_with, TestApp};
use reqwest::Response;

fn header(response: &Response, name: &str) -> u64 {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing: {:?}", response.headers()))
        .to_str()
        .expect("ascii")
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number"))
}

async fn list_accounts(app: &TestApp, token: &str) -> Response {
    app.get("/v2/accounts", token).await
}

#[tokio::test]
async fn a_token_gets_its_burst_then_429_with_headers_and_recovers_after_the_reset() {
    // One request every 2 s, bursts of 3: slow enough that a busy machine cannot refill
    // the bucket between the requests of the burst (they would need 2 s).
    let app = spawn_app_with(|config| {
        config.rate_limit = Some(RateLimit {
            per_second: 0.5,
            burst: 3,
        });
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let other = app.user_token("bob@example.com").await;
    for expected_remaining in [2, 1, 0] {
        let response = list_accounts(&app, &token).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit-limit"), 3);
        assert_eq!(header(&response, "ratelimit-remaining"), expected_remaining);
        assert!(header(&response, "ratelimit-reset") <= 6);
        assert!(!response.headers().contains_key("retry-after"));
    }
    let refused = list_accounts(&app, &token).await;
    assert_eq!(header(&refused, "ratelimit-limit"), 3);
    assert_eq!(header(&refused, "ratelimit-remaining"), 0);
    let reset = header(&refused, "ratelimit-reset");
    assert!((5..=6).contains(&reset), "reset {reset}");
    let retry_after = header(&refused, "retry-after");
    assert!((1..=2).contains(&retry_after), "retry-after {retry_after}");
    let body = expect_problem(refused, 429).await;
    assert!(
        body["detail"]
            .as_str()
            .expect("detail")
            .contains("Retry-After"),
        "{body}"
    );

    // Another token, even of another user, has its own bucket.
    let response = list_accounts(&app, &other).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit-remaining"), 2);

    // Unauthenticated requests are not counted nor stamped: they fail authentication.
    let anonymous = app
        .client
        .get(format!("{}/v2/accounts", app.address))
        .send()
        .await
        .expect("sent");
    assert!(!anonymous.headers().contains_key("ratelimit-limit"));
    expect_problem(anonymous, 401).await;

    tokio::time::sleep(Duration::from_secs(reset)).await;
    for _ in 0..3 {
        let response = list_accounts(&app, &token).await;
        assert_eq!(
            response.status(),
            200,
            "the bucket refilled after the reset"
        );
    }
}

#[tokio::test]
async fn with_the_limit_off_no_request_is_refused_or_stamped() {
    let app = spawn_app_with(|config| config.rate_limit = None).await;
    let token = app.user_token("ada@example.com").await;
    for _ in 0..50 {
        let response = list_accounts(&app, &token).await;
        assert_eq!(response.status(), 200);
        assert!(!response.headers().contains_key("ratelimit-limit"));
    }
}

#[tokio::test]
async fn the_default_limit_is_generous_and_announced() {
    let app = spawn_app_with(|config| config.rate_limit = Some(RateLimit::DEFAULT)).await;
    let token = app.user_token("ada@example.com").await;
    let mut last = None;
    for _ in 0..100 {
        let response = list_accounts(&app, &token).await;
        assert_eq!(response.status(), 200);
        last = Some(header(&response, "ratelimit-remaining"));
    }
    assert_eq!(
        header(&list_accounts(&app, &token).await, "ratelimit-limit"),
        200
    );
    assert!(
        last.expect("ran") >= 100,
        "100 requests leave at least half the burst"
    );
}

/// A well-formed token (valid check digits) that no user holds: it reaches the database.
fn unknown_token(n: u8) -> String {
    mailroom_domain::token::RawToken::from_random([n; mailroom_domain::token::TOKEN_RANDOM_BYTES])
        .expose()
        .to_owned()
}

#[tokio::test]
async fn five_failed_authentications_from_one_address_then_429_but_a_good_token_still_works() {
    let app = spawn_app_with(|config| {
        config.auth_failure_limit = Some(RateLimit {
            per_second: 5.0 / 60.0,
            burst: 5,
        });
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    assert_eq!(list_accounts(&app, &token).await.status(), 200);
    for n in 0..5 {
        expect_problem(list_accounts(&app, &unknown_token(n)).await, 401).await;
    }
    // The sixth failure, and any unknown token after it, is refused without a lookup.
    for n in 5..8 {
        let refused = list_accounts(&app, &unknown_token(n)).await;
        let retry_after = header(&refused, "retry-after");
        assert!((1..=12).contains(&retry_after), "retry-after {retry_after}");
        let body = expect_problem(refused, 429).await;
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("failed authentications")),
            "{body}"
        );
    }
    // Account routes too, before membership.
    let refused = app
        .get(
            "/v2/accounts/01936c5e-7b2a-7cde-8f00-0123456789ab/templates",
            &unknown_token(9),
        )
        .await;
    expect_problem(refused, 429).await;
    // Successful authentications are not charged, and a token that authenticated
    // recently still works from the refused address.
    for _ in 0..10 {
        assert_eq!(list_accounts(&app, &token).await.status(), 200);
    }
}

#[tokio::test]
async fn successful_authentications_never_use_up_the_failure_allowance() {
    let app = spawn_app_with(|config| {
        config.auth_failure_limit = Some(RateLimit {
            per_second: 1.0 / 60.0,
            burst: 1,
        });
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    for _ in 0..20 {
        assert_eq!(list_accounts(&app, &token).await.status(), 200);
    }
    expect_problem(list_accounts(&app, &unknown_token(1)).await, 401).await;
    expect_problem(list_accounts(&app, &unknown_token(2)).await, 429).await;
}
