//! The public pages: the unsubscribe and preferences page and the console's
//! sign-in form in the reader's language (`Accept-Language`), the account's branding on
//! the unsubscribe page (set through the account PATCH, escaped, validated), and the
//! operator's template overrides (`MAILROOM_PAGE_TEMPLATES`), which a broken file stops
//! the start of.

use std::{path::PathBuf, sync::Arc};

use mailroom_app::tracking::LinkToken;
use mailroom_domain::{AccountId, ContactId, MessageId};
use mailroom_server::{Application, Config};
use mailroom_test_support::{TestClock, TestDatabase};
use mailroom_tests::{expect_json, expect_problem, spawn_app, spawn_app_with, TestApp};
use reqwest::{Method, Response};
use serde_json::{json, Value};

/// An account with one contact, and the path of that contact's unsubscribe page.
struct PublicPage {
    app: TestApp,
    token: String,
    account: String,
    page: String,
}

impl PublicPage {
    async fn new(app: TestApp) -> Self {
        let token = app.user_token("ada@example.com").await;
        let account = app.create_account(&token, "Acme").await;
        let contact = expect_json(
            app.send_json(
                Method::POST,
                &format!("/v2/accounts/{account}/contacts"),
                &token,
                &json!({"email": "grace@example.org"}),
            )
            .await,
            200,
        )
        .await;
        // The token the delivery worker would put in the message's unsubscribe link,
        // minted by the same code.
        let link = LinkToken::Unsubscribe {
            account: AccountId::parse(&account).expect("account id"),
            contact: ContactId::parse(contact["_id"].as_str().expect("contact id"))
                .expect("contact id"),
            message: MessageId::parse("00000000-0000-4000-8000-000000000001").expect("id"),
        };
        let page = format!("/u/{}", link.encode(app.services.secrets.as_ref()));
        Self {
            app,
            token,
            account,
            page,
        }
    }

    async fn get(&self, language: Option<&str>) -> Response {
        let mut request = self.app.request(Method::GET, &self.page, None);
        if let Some(language) = language {
            request = request.header("accept-language", language);
        }
        request.send().await.expect("sent")
    }

    async fn html(&self, language: Option<&str>) -> String {
        let response = self.get(language).await;
        let status = response.status();
        let body = response.text().await.expect("body");
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn patch(&self, body: &Value) -> Response {
        self.app
            .send_json(
                Method::PATCH,
                &format!("/v2/accounts/{}", self.account),
                &self.token,
                body,
            )
            .await
    }
}

#[tokio::test]
async fn the_unsubscribe_page_speaks_the_readers_language() {
    let subject = PublicPage::new(spawn_app().await).await;
    for (header, lang, heading, button) in [
        (
            Some("de-DE,de;q=0.9,en;q=0.5"),
            "de",
            "E-Mail-Einstellungen",
            "Von allen E-Mails abmelden",
        ),
        (
            Some("fr-CA, en;q=0.8"),
            "fr",
            "Préférences d’e-mail",
            "Se désabonner de tous les e-mails",
        ),
        (
            Some("en;q=0.4, es;q=0.8"),
            "es",
            "Preferencias de correo",
            "Cancelar la suscripción a todo el correo",
        ),
        (
            Some("nl, pt;q=0.5"),
            "en",
            "Email preferences",
            "Unsubscribe from all mail",
        ),
        (None, "en", "Email preferences", "Unsubscribe from all mail"),
    ] {
        let response = subject.get(header).await;
        assert_eq!(response.headers()["content-language"], lang);
        assert_eq!(response.headers()["vary"], "Accept-Language");
        let html = response.text().await.expect("body");
        assert!(
            html.contains(&format!("<html lang=\"{lang}\">")),
            "{header:?}: {html}"
        );
        assert!(html.contains(&format!("<h1>{heading}</h1>")), "{html}");
        assert!(html.contains(button), "{html}");
        assert!(html.contains("grace@example.org"), "{html}");
    }

    // The outcome of a post is in the reader's language too.
    let response = subject
        .app
        .request(Method::POST, &subject.page, None)
        .header("accept-language", "de")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("action=all")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let html = response.text().await.expect("body");
    assert!(
        html.contains("role=\"status\"><strong>Sie erhalten keine E-Mails dieses Absenders mehr."),
        "{html}"
    );
    assert!(
        html.contains("Sie sind von allen E-Mails dieses Absenders abgemeldet."),
        "{html}"
    );
}

#[tokio::test]
async fn branding_is_shown_escaped_and_can_be_cleared() {
    let subject = PublicPage::new(spawn_app().await).await;
    let plain = subject.html(None).await;
    assert!(
        plain.contains("<span class=\"brand-name\">Acme</span>"),
        "{plain}"
    );
    assert!(!plain.contains("<img"), "no logo: {plain}");
    assert!(
        plain.contains("--accent: #0b4fb3; --on-accent: #ffffff;"),
        "{plain}"
    );

    let account = expect_json(
        subject
            .patch(&json!({"branding": {
                "displayName": "<script>alert(1)</script> & Co",
                "logoUrl": "https://cdn.example.com/logo.png?v=1&w=2",
                "accentColor": "#FFD700"
            }}))
            .await,
        200,
    )
    .await;
    assert_eq!(
        account["branding"],
        json!({
            "displayName": "<script>alert(1)</script> & Co",
            "logoUrl": "https://cdn.example.com/logo.png?v=1&w=2",
            "accentColor": "#ffd700",
            "accentTextColor": "#000000"
        })
    );
    assert_eq!(account["name"], "Acme", "the name is untouched");
    let read = expect_json(
        subject
            .app
            .get(&format!("/v2/accounts/{}", subject.account), &subject.token)
            .await,
        200,
    )
    .await;
    assert_eq!(read["branding"], account["branding"]);

    let response = subject.get(Some("fr")).await;
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(policy.contains("img-src https:"), "{policy}");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    let html = response.text().await.expect("body");
    assert!(!html.contains("<script>"), "escaped: {html}");
    let escaped = "&lt;script&gt;alert(1)&lt;&#x2f;script&gt; &amp; Co";
    assert!(
        html.contains(&format!(
            "<span class=\"brand-name\" aria-hidden=\"true\">{escaped}</span>"
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!("<title>Préférences d’e-mail – {escaped}</title>")),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            "<img src=\"https:&#x2f;&#x2f;cdn.example.com&#x2f;logo.png?v=1&amp;w=2\" alt=\"{escaped}\""
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!("E-mails de {escaped} à grace@example.org.")),
        "{html}"
    );
    assert!(
        html.contains("--accent: #ffd700; --on-accent: #000000;"),
        "{html}"
    );

    // One part cleared, the others kept.
    let account = expect_json(
        subject
            .patch(&json!({"branding": {"logoUrl": null, "accentColor": "#222222"}}))
            .await,
        200,
    )
    .await;
    assert_eq!(account["branding"]["logoUrl"], Value::Null);
    assert_eq!(account["branding"]["accentTextColor"], "#ffffff");
    assert_eq!(
        account["branding"]["displayName"],
        "<script>alert(1)</script> & Co"
    );
    let html = subject.html(None).await;
    assert!(!html.contains("<img"), "{html}");
    assert!(
        html.contains("--accent: #222222; --on-accent: #ffffff;"),
        "{html}"
    );

    // `null` clears everything: the page shows the account's name again.
    let account = expect_json(subject.patch(&json!({"branding": null})).await, 200).await;
    assert_eq!(
        account["branding"],
        json!({"displayName": null, "logoUrl": null, "accentColor": null, "accentTextColor": null})
    );
    let html = subject.html(None).await;
    assert!(
        html.contains("<span class=\"brand-name\">Acme</span>"),
        "{html}"
    );
}

#[tokio::test]
async fn invalid_branding_is_refused_naming_the_field() {
    let subject = PublicPage::new(spawn_app().await).await;
    let long_url = format!("https://example.com/{}", "a".repeat(2048));
    for (branding, field) in [
        (
            json!({"displayName": "x".repeat(101)}),
            "branding.displayName",
        ),
        (json!({"displayName": "   "}), "branding.displayName"),
        (
            json!({"logoUrl": "http://example.com/logo.png"}),
            "branding.logoUrl",
        ),
        (
            json!({"logoUrl": "javascript:alert(1)"}),
            "branding.logoUrl",
        ),
        (
            json!({"logoUrl": "data:image/png;base64,AAAA"}),
            "branding.logoUrl",
        ),
        (json!({"logoUrl": long_url}), "branding.logoUrl"),
        (json!({"accentColor": "red"}), "branding.accentColor"),
        (json!({"accentColor": "#fff"}), "branding.accentColor"),
        (json!({"accentColor": "#12345g"}), "branding.accentColor"),
    ] {
        let problem =
            expect_problem(subject.patch(&json!({ "branding": branding })).await, 400).await;
        assert_eq!(
            problem["errors"][0]["field"], field,
            "{branding}: {problem}"
        );
    }
    // A type error and an unknown key are named too.
    let problem = expect_problem(
        subject
            .patch(&json!({"branding": {"accentColor": 5}}))
            .await,
        400,
    )
    .await;
    assert!(
        problem["errors"][0]["field"]
            .as_str()
            .is_some_and(|field| field.starts_with("branding")),
        "{problem}"
    );
    let problem = expect_problem(
        subject
            .patch(&json!({"branding": {"logo": "https://example.com/l.png"}}))
            .await,
        400,
    )
    .await;
    assert!(problem.to_string().contains("logo"), "{problem}");
    // Nothing was stored by the refused patches.
    let read = expect_json(
        subject
            .app
            .get(&format!("/v2/accounts/{}", subject.account), &subject.token)
            .await,
        200,
    )
    .await;
    assert_eq!(read["branding"]["displayName"], Value::Null);
    assert_eq!(read["branding"]["accentColor"], Value::Null);
}

#[tokio::test]
async fn the_console_sign_in_page_speaks_the_readers_language() {
    let app = spawn_app().await;
    for (header, lang, heading, label) in [
        ("de", "de", "Anmelden", "Persönliches Zugriffstoken"),
        ("fr-FR", "fr", "Connexion", "Jeton d’accès personnel"),
        ("es", "es", "Iniciar sesión", "Token de acceso personal"),
        ("ja", "en", "Sign in", "Personal access token"),
    ] {
        let response = app
            .request(Method::GET, "/console/sign-in", None)
            .header("accept-language", header)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-language"], lang);
        let html = response.text().await.expect("body");
        assert!(html.contains(&format!("<html lang=\"{lang}\">")), "{html}");
        assert!(html.contains(&format!("<h1>{heading}</h1>")), "{html}");
        assert!(
            html.contains(&format!("<label for=\"token\">{label}</label>")),
            "{html}"
        );
        assert!(html.contains("name=\"form_token\""), "{html}");
    }
}

/// A fresh directory under the system's temporary directory, removed by the caller.
fn template_directory(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!(
        "mailroom-{name}-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&directory).expect("directory");
    directory
}

#[tokio::test]
async fn an_operator_override_directory_is_used() {
    let directory = template_directory("page-templates");
    std::fs::write(
        directory.join("unsubscribe.html"),
        "<!doctype html><html lang=\"{{ lang }}\"><title>{{ t.preferences_title }}</title>\
         <main><h1>Our own page for {{ sender }}</h1><p>{{ email }}</p>\
         {% for topic in topics %}<p>{{ topic.name }}</p>{% endfor %}\
         <form method=\"post\"><button name=\"action\" value=\"all\">{{ t.unsubscribe_all_button }}</button></form></main></html>",
    )
    .expect("write");
    std::fs::write(
        directory.join("sign_in.html"),
        "<h1>{{ t.sign_in_title }} at Example Corp</h1>\
         <form method=\"post\" action=\"/console/sign-in\"><input type=\"hidden\" name=\"form_token\" value=\"{{ form_token }}\">\
         <label for=\"token\">{{ t.sign_in_token_label }}</label><input id=\"token\" name=\"token\" type=\"password\">\
         {% if error %}<p role=\"alert\">{{ error }}</p>{% endif %}<button>{{ t.sign_in_button }}</button></form>",
    )
    .expect("write");
    let configured = directory.clone();
    let app = spawn_app_with(move |config| config.page_templates = Some(configured)).await;
    let subject = PublicPage::new(app).await;
    let html = subject.html(Some("es")).await;
    assert!(
        html.starts_with("<!doctype html><html lang=\"es\">"),
        "{html}"
    );
    assert!(html.contains("<h1>Our own page for Acme</h1>"), "{html}");
    assert!(html.contains("<p>grace@example.org</p>"), "{html}");
    assert!(
        html.contains("Cancelar la suscripción a todo el correo"),
        "{html}"
    );
    assert!(
        !html.contains("brand-name"),
        "the default is replaced: {html}"
    );

    let response = subject
        .app
        .request(Method::GET, "/console/sign-in", None)
        .header("accept-language", "de")
        .send()
        .await
        .expect("sent");
    let html = response.text().await.expect("body");
    assert!(html.contains("<h1>Anmelden at Example Corp</h1>"), "{html}");
    // Still inside the console's layout.
    assert!(html.contains("/console/static/console.css"), "{html}");
    std::fs::remove_dir_all(&directory).expect("clean up");
}

#[tokio::test]
async fn a_broken_override_refuses_to_start() {
    let database = tokio::task::spawn_blocking(TestDatabase::create)
        .await
        .expect("database setup");
    let directory = template_directory("broken-templates");
    let start = |directory: &PathBuf| {
        let mut config = Config::new(database.url(), [42u8; 32]);
        config.listen = ([127, 0, 0, 1], 0).into();
        config.run_workers = false;
        config.page_templates = Some(directory.clone());
        Application::build_with_clock(&config, Arc::new(TestClock::new()))
    };

    // A syntax error: the file and the line are named.
    let file = directory.join("unsubscribe.html");
    std::fs::write(&file, "<h1>{{ sender }}</h1>\n{% for topic in %}\n").expect("write");
    let error = format!("{:#}", start(&directory).err().expect("refused"));
    assert!(error.contains(&file.display().to_string()), "{error}");
    assert!(error.contains("line 2"), "{error}");

    // A name that does not exist in the catalogue fails when checked, not on a page.
    std::fs::write(&file, "<p>{{ t.no_such_text }}</p>").expect("write");
    let error = format!("{:#}", start(&directory).err().expect("refused"));
    assert!(error.contains(&file.display().to_string()), "{error}");
    assert!(error.contains("undefined"), "{error}");

    // A file that is not a page template.
    std::fs::remove_file(&file).expect("remove");
    std::fs::write(directory.join("unsubcribe.html"), "typo").expect("write");
    let error = format!("{:#}", start(&directory).err().expect("refused"));
    assert!(
        error.contains("unsubcribe.html is not a page template"),
        "{error}"
    );
    assert!(error.contains("unsubscribe.html, sign_in.html"), "{error}");

    // A directory that does not exist.
    let missing = directory.join("missing");
    let error = format!("{:#}", start(&missing).err().expect("refused"));
    assert!(error.contains("cannot read"), "{error}");
    std::fs::remove_dir_all(&directory).expect("clean up");
}
