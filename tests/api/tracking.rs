//! Open and click tracking end to end: a message goes through the real worker to a real
//! SMTP server on loopback, and the pixel and links taken from the received HTML are
//! followed over HTTP.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use mailroom_server::message_worker::MessageWorker;
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, expect_problem, spawn_app_with, TestApp};
use reqwest::{redirect::Policy, Method, Response};
use serde_json::{json, Value};

/// The public base URL the app mints links under (nothing listens there: tests take the
/// path of each link and ask the app's real address).
pub(crate) const PUBLIC_URL: &str = "https://mail.acme.test";

/// An app with a mail server on a loopback SMTP test server.
pub(crate) struct LinkSetup {
    pub app: TestApp,
    pub token: String,
    pub account: String,
    pub smtp: TestSmtpServer,
    /// A client that does not follow redirects.
    pub raw_client: reqwest::Client,
}

impl LinkSetup {
    pub async fn new() -> Self {
        let app = spawn_app_with(|config| {
            config.allow_private_egress = true;
            config.public_url = PUBLIC_URL.to_owned();
            config.smtp_timeout = std::time::Duration::from_secs(5);
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
            raw_client: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("client"),
        };
        let server = json!({
            "serviceType": "smtp", "host": "127.0.0.1", "port": setup.smtp.port(),
            "secure": false, "requireTLS": false, "user": "", "password": "",
            "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
        });
        setup.post("/mail-servers", &server).await;
        setup
    }

    pub fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    pub async fn post(&self, rest: &str, body: &Value) -> Value {
        expect_json(
            self.app
                .send_json(Method::POST, &self.path(rest), &self.token, body)
                .await,
            200,
        )
        .await
    }

    pub async fn get_json(&self, rest: &str) -> Value {
        expect_json(self.app.get(&self.path(rest), &self.token).await, 200).await
    }

    /// Queues a transactional send of template `slug` and returns the message.
    pub async fn send(&self, slug: &str, email: &str, data: Value) -> Value {
        self.post(
            "/messages",
            &json!({"slug": slug, "email": email, "data": data}),
        )
        .await
    }

    /// Runs the worker until the queue is empty.
    pub async fn drain(&self) {
        let worker = MessageWorker::new(self.app.services.clone(), &self.app.config);
        while worker.run_once().await.expect("round").claimed > 0 {}
    }

    /// Today's counters.
    pub async fn today(&self) -> Value {
        self.get_json("/messages/stats")
            .await
            .as_array()
            .and_then(|days| days.last().cloned())
            .expect("today")
    }

    /// The `n`th received email, transfer encoding undone, and `&#x2f;` read as `/` as
    /// a mail client reads it (minijinja's HTML auto-escape writes `/` in variables so).
    pub fn received(&self, n: usize) -> String {
        let messages = self.smtp.messages();
        Self::readable(&messages.get(n).expect("received").data)
    }

    /// As [`Self::received`], for the email to `recipient` (messages of one drain are
    /// sent side by side, so their arrival order is not their queue order).
    pub fn received_by(&self, recipient: &str) -> String {
        let messages = self.smtp.messages();
        let message = messages
            .iter()
            .find(|message| message.recipients.iter().any(|to| to == recipient))
            .expect("received");
        Self::readable(&message.data)
    }

    fn readable(data: &str) -> String {
        let data = if data.contains("Content-Transfer-Encoding: quoted-printable") {
            // Enough of quoted-printable for URLs: soft breaks and `=`.
            data.replace("=\r\n", "").replace("=3D", "=")
        } else {
            data.to_owned()
        };
        data.replace("&#x2f;", "/")
    }

    /// GET of a public link by its path (the host is the configured public one).
    pub async fn follow(&self, url: &str) -> Response {
        let path = url.strip_prefix(PUBLIC_URL).expect("a public link");
        self.raw_client
            .get(format!("{}{path}", self.app.address))
            .send()
            .await
            .expect("sent")
    }
}

/// Every public link under `{PUBLIC_URL}{route}` in `text`, in order.
pub(crate) fn links(text: &str, route: &str) -> Vec<String> {
    let prefix = format!("{PUBLIC_URL}{route}");
    text.match_indices(&prefix)
        .map(|(at, _)| {
            let token: String = text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            format!("{prefix}{token}")
        })
        .collect()
}

/// `url` with its token's `index`th byte changed: the ids stay readable, the tag no
/// longer fits.
fn tampered(url: &str, index: usize, value: u8) -> String {
    let (base, token) = url.rsplit_once('/').expect("token");
    let mut bytes = URL_SAFE_NO_PAD.decode(token).expect("base64url");
    bytes[index] = value;
    format!("{base}/{}", URL_SAFE_NO_PAD.encode(bytes))
}

const ORDER_LINK: &str = "https://shop.example/orders?id=7&view=full";
const DATA_LINK: &str = "https://shop.example/track/a b?x=/y&z=1";

async fn tracked_template(setup: &LinkSetup) {
    setup
        .post(
            "/templates",
            &json!({
                "name": "Receipt", "slug": "receipt", "subject": "Your order",
                "openTracking": true, "clickTracking": true,
                "content": "<html><body><p>Hi {{ first_name }}</p>\
                    <a href=\"https://shop.example/orders?id=7&amp;view=full\">Order</a> \
                    <a href=\"{{ link }}\">Track</a> <a href=\"mailto:help@acme.example\">Help</a> \
                    <a href=\"{{ unsubscribe_url }}\">Unsubscribe</a></body></html>"
            }),
        )
        .await;
}

#[tokio::test]
async fn opens_and_clicks_are_tracked_through_signed_links_and_counted_once() {
    let setup = LinkSetup::new().await;
    tracked_template(&setup).await;
    let first = setup
        .send(
            "receipt",
            "grace@example.org",
            json!({"first_name": "Grace", "link": DATA_LINK}),
        )
        .await;
    let second = setup
        .send(
            "receipt",
            "alan@example.org",
            json!({"first_name": "Alan", "link": DATA_LINK}),
        )
        .await;
    setup.drain().await;
    let mail = setup.received_by("grace@example.org");
    assert!(mail.contains("grace@example.org"), "{mail}");

    // The body: the pixel before </body>, both web links rewritten, the mailto and the
    // unsubscribe link as they were.
    let pixels = links(&mail, "/t/o/");
    assert_eq!(pixels.len(), 1, "{mail}");
    assert!(mail.contains("width=\"1\" height=\"1\""), "{mail}");
    assert!(
        mail.find(&pixels[0]) < mail.find("</body>"),
        "pixel inside the body: {mail}"
    );
    let clicks = links(&mail, "/t/c/");
    assert_eq!(clicks.len(), 2, "{mail}");
    assert!(
        !mail.contains("shop.example"),
        "no original link left: {mail}"
    );
    assert!(mail.contains("href=\"mailto:help@acme.example\""), "{mail}");
    assert_eq!(links(&mail, "/u/").len(), 1, "{mail}");

    // The pixel: a real GIF, not cached, every time; the first open counts.
    for _ in 0..3 {
        let response = setup.follow(&pixels[0]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "image/gif");
        assert_eq!(response.headers()["cache-control"], "no-store");
        let gif = response.bytes().await.expect("body");
        assert_eq!(&gif[..6], b"GIF89a");
        assert_eq!(&gif[6..10], &[1, 0, 1, 0], "1×1");
    }
    assert_eq!(setup.today().await["opened"], 1);

    // The clicks: 302 to the stored link, entities decoded (`&amp;`, and minijinja's
    // `&#x2f;` for the variable), never to anything the request says.
    let response = setup.follow(&clicks[0]).await;
    assert_eq!(response.status(), 302);
    assert_eq!(response.headers()["location"], ORDER_LINK);
    let response = setup
        .follow(&format!("{}?url=https://evil.example/", clicks[1]))
        .await;
    assert_eq!(response.status(), 302);
    assert_eq!(
        response.headers()["location"],
        "https://shop.example/track/a%20b?x=/y&z=1"
    );
    setup.follow(&clicks[0]).await;
    let detail = setup
        .get_json(&format!("/messages/{}", first["_id"].as_str().expect("id")))
        .await;
    assert!(detail["openedAt"].is_string(), "{detail}");
    assert!(detail["clickedAt"].is_string(), "{detail}");
    let untouched = setup
        .get_json(&format!(
            "/messages/{}",
            second["_id"].as_str().expect("id")
        ))
        .await;
    assert!(untouched.get("openedAt").is_none(), "{untouched}");
    let today = setup.today().await;
    assert_eq!(
        (today["opened"].clone(), today["clicked"].clone()),
        (json!(1), json!(1))
    );

    // Forged tokens: the first message's tokens re-pointed at the second message (ids
    // are bytes 2..18 account, 18..34 message) record nothing and redirect nowhere.
    let other = uuid_bytes(second["_id"].as_str().expect("id"));
    let mut forged_click = clicks[0].clone();
    let mut forged_open = pixels[0].clone();
    for (offset, byte) in other.iter().enumerate() {
        forged_click = tampered(&forged_click, 18 + offset, *byte);
        forged_open = tampered(&forged_open, 18 + offset, *byte);
    }
    let response = setup.follow(&forged_open).await;
    assert_eq!(response.status(), 200, "the pixel is answered anyway");
    assert_eq!(response.headers()["content-type"], "image/gif");
    expect_problem(setup.follow(&forged_click).await, 404).await;
    expect_problem(
        setup.follow(&format!("{PUBLIC_URL}/t/c/not-a-token")).await,
        404,
    )
    .await;
    expect_problem(setup.follow(&format!("{PUBLIC_URL}/t/c/")).await, 404).await;
    // An open token is no click token, though both are signed.
    let swapped = pixels[0].replace("/t/o/", "/t/c/");
    expect_problem(setup.follow(&swapped).await, 404).await;
    let today = setup.today().await;
    assert_eq!(
        (today["opened"].clone(), today["clicked"].clone()),
        (json!(1), json!(1))
    );

    // The second message's own links count for it.
    let second_mail = setup.received_by("alan@example.org");
    setup.follow(&links(&second_mail, "/t/o/")[0]).await;
    assert_eq!(setup.today().await["opened"], 2);
    assert_ne!(first["_id"], second["_id"]);
}

fn uuid_bytes(id: &str) -> Vec<u8> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

#[tokio::test]
async fn without_tracking_the_body_is_sent_as_rendered() {
    let setup = LinkSetup::new().await;
    setup
        .post(
            "/templates",
            &json!({
                "name": "Plain", "slug": "plain", "subject": "Hi",
                "content": "<p><a href=\"https://shop.example/\">Shop</a></p>"
            }),
        )
        .await;
    setup.send("plain", "grace@example.org", json!({})).await;
    setup.drain().await;
    let mail = setup.received(0);
    assert!(
        mail.contains("<a href=\"https://shop.example/\">Shop</a>"),
        "{mail}"
    );
    assert!(links(&mail, "/t/").is_empty(), "{mail}");

    // The account default turns both on for templates that leave them unset.
    expect_json(
        setup
            .app
            .send_json(
                Method::PATCH,
                &setup.path(""),
                &setup.token,
                &json!({"openTracking": true, "clickTracking": true}),
            )
            .await,
        200,
    )
    .await;
    setup.send("plain", "alan@example.org", json!({})).await;
    setup.drain().await;
    let mail = setup.received(1);
    let pixel = links(&mail, "/t/o/");
    assert_eq!(pixel.len(), 1, "{mail}");
    assert_eq!(links(&mail, "/t/c/").len(), 1, "{mail}");

    // Concurrent first opens (a client fetching the image twice at once) count once.
    let url = format!(
        "{}{}",
        setup.app.address,
        pixel[0].strip_prefix(PUBLIC_URL).expect("public link")
    );
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let (client, url) = (setup.raw_client.clone(), url.clone());
            tokio::spawn(async move { client.get(url).send().await.expect("sent").status() })
        })
        .collect();
    for open in opens {
        assert_eq!(open.await.expect("task"), 200);
    }
    assert_eq!(setup.today().await["opened"], 1);
}
