//! An account with a loopback SMTP server and a template, for the feedback and send-limit
//! tests: queue transactional sends, drain them with the real worker, read back messages,
//! contacts and today's counters.

use mailroom_server::message_worker::{MessageRound, MessageWorker};
use mailroom_server::Config;
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

pub(crate) struct Delivery {
    pub(crate) app: TestApp,
    pub(crate) token: String,
    pub(crate) account: String,
    pub(crate) smtp: TestSmtpServer,
}

impl Delivery {
    /// An account with a mail server (plain SMTP on loopback) and the `order-receipt`
    /// template; `configure` adjusts the configuration first.
    pub(crate) async fn new(configure: impl FnOnce(&mut Config)) -> Self {
        let app = spawn_app_with(|config| {
            config.allow_private_egress = true;
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
        let setup = Self {
            app,
            token,
            account,
            smtp,
        };
        let server = json!({
            "serviceType": "smtp", "host": "127.0.0.1", "port": setup.smtp.port(),
            "secure": false, "requireTLS": false, "user": "", "password": "",
            "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
        });
        setup.post("/mail-servers", &server).await;
        let template = json!({
            "name": "Receipt", "slug": "order-receipt",
            "subject": "Your receipt", "content": "<p>Total: {{ total }}</p>"
        });
        setup.post("/templates", &template).await;
        setup
    }

    pub(crate) fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    /// POSTs JSON and expects 200.
    pub(crate) async fn post(&self, rest: &str, body: &Value) -> Value {
        let response = self
            .app
            .send_json(Method::POST, &self.path(rest), &self.token, body)
            .await;
        expect_json(response, 200).await
    }

    /// GETs and expects 200.
    pub(crate) async fn get(&self, rest: &str) -> Value {
        expect_json(self.app.get(&self.path(rest), &self.token).await, 200).await
    }

    /// Queues a transactional send to `email`.
    pub(crate) async fn queue(&self, email: &str) -> Value {
        let body = json!({"slug": "order-receipt", "email": email, "data": {"total": "9.99"}});
        self.post("/messages", &body).await
    }

    /// One round of the real worker.
    pub(crate) async fn run_once(&self) -> MessageRound {
        MessageWorker::new(self.app.services.clone(), &self.app.config)
            .run_once()
            .await
            .expect("round")
    }

    /// Runs rounds until one claims nothing.
    pub(crate) async fn drain(&self) {
        for _ in 0..20 {
            if self.run_once().await.claimed == 0 {
                return;
            }
        }
        panic!("the queue did not drain");
    }

    pub(crate) async fn message(&self, id: &Value) -> Value {
        self.get(&format!("/messages/{}", id.as_str().expect("message id")))
            .await
    }

    pub(crate) async fn contact(&self, id: &Value) -> Value {
        self.get(&format!("/contacts/{}", id.as_str().expect("contact id")))
            .await
    }

    /// Today's counters (the last day of the stats window).
    pub(crate) async fn today(&self) -> Value {
        let days = self.get("/messages/stats").await;
        days.as_array()
            .expect("bare array")
            .last()
            .cloned()
            .expect("today")
    }
}
