//! What the automation and announcement tests share: an account with a mail server on a
//! loopback SMTP test server, a template, and the workers driven directly.

use diesel::connection::SimpleConnection;
use mailroom_server::{
    announcement_worker::{AnnouncementRound, AnnouncementWorker},
    message_worker::MessageWorker,
};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, spawn_app_with, TestApp};
use reqwest::{Method, Response};
use serde_json::{json, Value};

pub(crate) struct Setup {
    pub app: TestApp,
    pub token: String,
    pub account: String,
    pub smtp: TestSmtpServer,
    pub template: String,
}

impl Setup {
    pub async fn new() -> Self {
        Self::new_with(|_| {}).await
    }

    /// As [`Setup::new`], after `configure` adjusts the configuration.
    pub async fn new_with(configure: impl FnOnce(&mut mailroom_server::Config)) -> Self {
        let app = spawn_app_with(|config| {
            config.allow_private_egress = true;
            config.message_max_attempts = 3;
            config.smtp_timeout = std::time::Duration::from_secs(5);
            configure(config);
        })
        .await;
        let token = app.user_token("ada@example.com").await;
        let account = app.create_account(&token, "Acme").await;
        let smtp = TestSmtpServer::start(TestSmtpOptions {
            tls: TlsMode::None,
            ..TestSmtpOptions::default()
        });
        let mut setup = Self {
            app,
            token,
            account,
            smtp,
            template: String::new(),
        };
        let port = setup.smtp.port();
        setup
            .ok(
                Method::POST,
                "/mail-servers",
                &json!({
                    "serviceType": "smtp", "host": "127.0.0.1", "port": port,
                    "secure": false, "requireTLS": false, "user": "", "password": "",
                    "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
                }),
            )
            .await;
        let template = setup
            .ok(
                Method::POST,
                "/templates",
                &json!({
                    "name": "News", "slug": "news", "subject": "News for {{ email }}",
                    "content": "<p>Hello {{ email }}</p>"
                }),
            )
            .await;
        setup.template = template["_id"].as_str().expect("template id").to_owned();
        setup
    }

    pub fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    pub async fn call(&self, method: Method, rest: &str, body: &Value) -> Response {
        self.app
            .send_json(method, &self.path(rest), &self.token, body)
            .await
    }

    /// Sends `body` and expects 200.
    pub async fn ok(&self, method: Method, rest: &str, body: &Value) -> Value {
        expect_json(self.call(method, rest, body).await, 200).await
    }

    pub async fn get(&self, rest: &str) -> Value {
        expect_json(self.app.get(&self.path(rest), &self.token).await, 200).await
    }

    /// Records event `slug` for `email` and expects 200.
    pub async fn event(&self, email: &str, slug: &str) -> Value {
        self.ok(
            Method::POST,
            "/events",
            &json!({ "email": email, "slug": slug }),
        )
        .await
    }

    /// Upserts a contact with attributes and returns its id.
    pub async fn contact(&self, email: &str, attributes: Value) -> String {
        let contact = self
            .ok(
                Method::POST,
                "/contacts",
                &json!({ "email": email, "attributes": attributes }),
            )
            .await;
        contact["_id"].as_str().expect("contact id").to_owned()
    }

    /// Every message of the account (the log pages by 100).
    pub async fn messages(&self) -> Vec<Value> {
        let mut all = Vec::new();
        loop {
            let page = self
                .get(&format!("/messages?start={}&limit=100", all.len()))
                .await;
            let items = page["items"].as_array().expect("items").clone();
            let done = items.len() < 100;
            all.extend(items);
            if done {
                return all;
            }
        }
    }

    /// Runs the message worker until a round claims nothing.
    pub async fn drain_messages(&self) -> usize {
        let worker = MessageWorker::new(self.app.services.clone(), &self.app.config);
        let mut claimed = 0;
        loop {
            let round = worker.run_once().await.expect("message round");
            if round.claimed == 0 {
                return claimed;
            }
            claimed += round.claimed;
        }
    }

    /// One announcement round with `batch_size` contacts per batch.
    pub async fn announcement_round(&self, batch_size: u32) -> AnnouncementRound {
        AnnouncementWorker::new(self.app.services.clone(), batch_size)
            .run_once()
            .await
            .expect("announcement round")
    }

    /// Runs SQL statements against the test's database, for states no endpoint sets.
    pub fn sql(&self, statements: &str) {
        self.app
            .database
            .connection()
            .batch_execute(statements)
            .expect("statements run");
    }

    /// The day of today in the stats.
    pub async fn today(&self) -> Value {
        let days = self.get("/messages/stats").await;
        days.as_array()
            .and_then(|days| days.last())
            .cloned()
            .expect("today")
    }
}
