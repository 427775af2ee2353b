//! A server, a user and a client for it.

use mailroom_client::{AccountId, Client, NewAccount};
use mailroom_server::Config;
use mailroom_tests::{spawn_app_with, TestApp};

pub(crate) struct Setup {
    pub(crate) app: TestApp,
    pub(crate) client: Client,
}

impl Setup {
    /// A server whose outbound connections may reach loopback, and a client for a new user.
    pub(crate) async fn new(configure: impl FnOnce(&mut Config)) -> Self {
        let app = spawn_app_with(|config| {
            config.allow_private_egress = true;
            config.smtp_timeout = std::time::Duration::from_secs(5);
            config.webhook_retry_schedule = vec![0, 0];
            config.webhook_timeout = std::time::Duration::from_secs(2);
            configure(config);
        })
        .await;
        let token = app.user_token("ada@example.com").await;
        let client = Client::new(&app.address, token).expect("client");
        Self { app, client }
    }

    /// An account named Acme.
    pub(crate) async fn account(&self) -> AccountId {
        let account = NewAccount {
            name: "Acme".into(),
            ..NewAccount::default()
        };
        self.client
            .create_account(&account)
            .await
            .expect("account created")
            .id
    }
}

/// A JSON object literal as attributes or template data.
pub(crate) fn object(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().expect("an object").clone()
}
