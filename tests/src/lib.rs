//! The API test harness: [`spawn_app`] starts the real HTTP server in-process on a random
//! port, over a fresh database of its own, with a clock the test can move.

use std::sync::Arc;

use mailroom_app::{
    users::{bootstrap_user, BootstrapRequest},
    Services,
};
use mailroom_server::{Application, Config};
use mailroom_test_support::{TestClock, TestDatabase};
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

/// A running server and what a test needs to talk to it.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// A plain HTTP client (no default headers).
    pub client: reqwest::Client,
    /// The server's clock.
    pub clock: Arc<TestClock>,
    /// The server's use-case dependencies, for setup that has no endpoint.
    pub services: Services,
    /// The test's database (dropped with the app).
    pub database: TestDatabase,
    /// The configuration the app runs with (workers are driven by the test).
    pub config: Config,
    /// The port of the inbound SMTP listener, when the configuration set
    /// `inbound.listen`.
    pub inbound_port: Option<u16>,
}

/// Starts the API on a random loopback port over a fresh database, with production
/// defaults (the egress guard refuses private addresses).
///
/// # Panics
/// When the server cannot start: the test cannot run.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// As [`spawn_app`], after `configure` adjusts the configuration (for example
/// `allow_private_egress` for tests against SMTP servers on loopback).
///
/// # Panics
/// When the server cannot start: the test cannot run.
pub async fn spawn_app_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    if let Ok(filter) = std::env::var("MAILROOM_TEST_LOG") {
        // Only the first test of a process installs it; nextest runs one per process.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let database = tokio::task::spawn_blocking(TestDatabase::create)
        .await
        .expect("database setup");
    let mut config = Config::new(database.url(), [42u8; 32]);
    config.listen = ([127, 0, 0, 1], 0).into();
    config.db_pool_size = 4;
    config.http_workers = 1;
    config.run_workers = false;
    // Tests fire requests faster than any client should; tests/api/rate_limit.rs turns
    // the limit back on with a small bucket.
    config.rate_limit = None;
    configure(&mut config);
    let clock = Arc::new(TestClock::new());
    let build_config = config.clone();
    let build_clock = clock.clone();
    let application = tokio::task::spawn_blocking(move || {
        Application::build_with_clock(&build_config, build_clock)
    })
    .await
    .expect("build task")
    .expect("application starts");
    let address = format!("http://127.0.0.1:{}", application.port());
    let services = application.services();
    let inbound_port = application.inbound_port();
    tokio::spawn(application.run_until_stopped());
    TestApp {
        address,
        client: reqwest::Client::new(),
        clock,
        services,
        database,
        config,
        inbound_port,
    }
}

impl TestApp {
    /// Creates a user the way `mailroom user create` does and returns a raw token.
    ///
    /// # Panics
    /// When bootstrapping fails.
    pub async fn user_token(&self, email: &str) -> String {
        let services = self.services.clone();
        let request = BootstrapRequest {
            email: email.to_owned(),
            token_name: "test".into(),
            expires_in_days: None,
        };
        let created = tokio::task::spawn_blocking(move || bootstrap_user(&services, request))
            .await
            .expect("bootstrap task")
            .expect("bootstrap succeeds");
        created.token.raw.expose().to_owned()
    }

    /// A request to `path` (relative to the server) with `token` as bearer, if any.
    pub fn request(&self, method: Method, path: &str, token: Option<&str>) -> RequestBuilder {
        let builder = self
            .client
            .request(method, format!("{}{path}", self.address));
        match token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends `body` as JSON and returns the response.
    ///
    /// # Panics
    /// When the request cannot be sent.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: &Value,
    ) -> Response {
        self.request(method, path, Some(token))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// GETs `path` with `token`.
    ///
    /// # Panics
    /// When the request cannot be sent.
    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.request(Method::GET, path, Some(token))
            .send()
            .await
            .expect("request sent")
    }

    /// Creates an account named `name` and returns its id.
    ///
    /// # Panics
    /// When creation does not answer 200.
    pub async fn create_account(&self, token: &str, name: &str) -> String {
        let response = self
            .send_json(
                Method::POST,
                "/v2/accounts",
                token,
                &serde_json::json!({ "name": name }),
            )
            .await;
        assert_eq!(response.status(), 200, "account creation");
        let body: Value = response.json().await.expect("json");
        body["_id"].as_str().expect("account id").to_owned()
    }
}

/// Reads a response as JSON, asserting its status first.
///
/// # Panics
/// When the status differs or the body is not JSON.
pub async fn expect_json(response: Response, status: u16) -> Value {
    let actual = response.status().as_u16();
    let text = response.text().await.expect("body");
    assert_eq!(actual, status, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Asserts an `application/problem+json` error with `status` and returns its body.
///
/// # Panics
/// When the response is anything else.
pub async fn expect_problem(response: Response, status: u16) -> Value {
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = expect_json(response, status).await;
    assert_eq!(
        content_type, "application/problem+json",
        "problem content type; body: {body}"
    );
    assert_eq!(body["status"], status, "problem status field");
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "problem shape: {body}"
    );
    assert!(body["errors"].is_array(), "problem errors array: {body}");
    body
}
