//! The public unsubscribe page in a real browser, in the languages the browser asks for
//! (`Accept-Language` from Chromium's own setting), with an account's branding: axe-core
//! at 1280 and 390 px, nothing wider than the 390 px screen, the topic form used with the
//! keyboard, the page a link that cannot be served shows, the console's sign-in form in
//! German, and a subscribe form's hosted page filled in and sent.

use fantoccini::{
    actions::{InputSource, KeyAction, KeyActions},
    key::Key,
};
use mailroom_app::tracking::LinkToken;
use mailroom_domain::{AccountId, ContactId, MessageId};
use mailroom_tests::{spawn_app, TestApp};
use reqwest::Method;
use serde_json::json;

use crate::browser::Browser;

/// A branded account with one contact; returns the path of the contact's page.
async fn branded_page(app: &TestApp) -> String {
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let response = app
        .send_json(
            Method::PATCH,
            &format!("/v2/accounts/{account}"),
            &token,
            // A light accent (black text on it) and a logo that cannot load on this
            // closed network, so its alternative text is what shows.
            &json!({"branding": {"displayName": "Acme Rockets", "accentColor": "#ffd700",
                                 "logoUrl": "https://logo.invalid/acme.png"}}),
        )
        .await;
    assert_eq!(response.status(), 200, "branding");
    let contact: serde_json::Value = app
        .send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/contacts"),
            &token,
            &json!({"email": "grace.hopper.with.a.rather.long.address@example.org"}),
        )
        .await
        .json()
        .await
        .expect("contact");
    let link = LinkToken::Unsubscribe {
        account: AccountId::parse(&account).expect("account id"),
        contact: ContactId::parse(contact["_id"].as_str().expect("contact id")).expect("id"),
        message: MessageId::parse("00000000-0000-4000-8000-000000000001").expect("id"),
    };
    format!("/u/{}", link.encode(app.services.secrets.as_ref()))
}

/// Presses and releases `key` on whatever has the focus.
async fn press(browser: &Browser, key: char) {
    browser
        .client
        .perform_actions(
            KeyActions::new("keyboard".into())
                .then(KeyAction::Down { value: key })
                .then(KeyAction::Up { value: key }),
        )
        .await
        .expect("key press");
}

async fn focused_id(browser: &Browser) -> String {
    let id = browser
        .client
        .execute("return document.activeElement.id;", vec![])
        .await
        .expect("focus");
    id.as_str().unwrap_or_default().to_owned()
}

async fn focused_value(browser: &Browser) -> String {
    let value = browser
        .client
        .execute("return document.activeElement.value || '';", vec![])
        .await
        .expect("focus");
    value.as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_unsubscribe_page_is_accessible_in_two_languages_and_at_390_px() {
    let app = spawn_app().await;
    let page = branded_page(&app).await;
    for (language, heading, legend) in [
        (
            "de",
            "E-Mail-Einstellungen",
            "Von einzelnen Themen abmelden",
        ),
        (
            "fr",
            "Préférences d’e-mail",
            "Se désabonner de certains sujets",
        ),
    ] {
        let browser = Browser::start_in_language(language).await;
        browser.goto(&format!("{}{page}", app.address)).await;
        let lang = browser
            .find("html")
            .await
            .attr("lang")
            .await
            .expect("attribute");
        assert_eq!(lang.as_deref(), Some(language));
        let text = browser.text().await;
        assert!(text.contains(heading), "{text}");
        assert!(text.contains(legend), "{text}");
        assert!(text.contains("Acme Rockets"), "{text}");
        browser
            .check_screen(&format!("unsubscribe-{language}"))
            .await;

        // At 390 px nothing scrolls sideways, the long address included.
        browser
            .client
            .set_window_size(390, 844)
            .await
            .expect("window size");
        let fits = browser
            .client
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await
            .expect("measured");
        assert_eq!(fits, json!(true), "the page is wider than 390 px");

        // The keyboard alone: Tab to the first topic still open (the first thing to
        // focus; the first language's run left the one before), tick it with Space, Tab
        // on to the topic form's button, submit with Enter.
        browser.goto(&format!("{}{page}", app.address)).await;
        let open = browser
            .client
            .execute(
                "return document.querySelector('input[name=topic]:not([disabled])').id;",
                vec![],
            )
            .await
            .expect("an open topic");
        let open = open.as_str().expect("its id").to_owned();
        press(&browser, Key::Tab.into()).await;
        assert_eq!(focused_id(&browser).await, open);
        press(&browser, ' ').await;
        let checked = browser
            .find(&format!("#{open}"))
            .await
            .prop("checked")
            .await
            .expect("property");
        assert_eq!(checked.as_deref(), Some("true"));
        let mut tabs = 0;
        while focused_value(&browser).await != "topics" {
            tabs += 1;
            assert!(
                tabs < 20,
                "the topic form's button is not reachable with Tab"
            );
            press(&browser, Key::Tab.into()).await;
        }
        press(&browser, Key::Enter.into()).await;
        // The post answers with the page itself: wait for it to arrive.
        let started = std::time::Instant::now();
        while browser.count("[role='status']").await == 0 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "no answer to the topic form"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let status = browser.find("[role='status']").await;
        let saved = status.text().await.expect("text");
        let expected = if language == "de" {
            "Ihre Auswahl ist gespeichert."
        } else {
            "Votre choix est enregistré."
        };
        assert_eq!(saved, expected);
        browser
            .check_screen(&format!("unsubscribe-saved-{language}"))
            .await;
        browser.close().await;
    }
}

#[tokio::test]
async fn a_broken_link_shows_an_accessible_page_in_the_readers_language() {
    let app = spawn_app().await;
    let page = branded_page(&app).await;
    // The token cut short, as a mail client that wraps long lines might.
    let broken = &page[..page.len() - 4];
    let browser = Browser::start_in_language("de").await;
    browser.goto(&format!("{}{broken}", app.address)).await;
    let lang = browser
        .find("html")
        .await
        .attr("lang")
        .await
        .expect("attribute");
    assert_eq!(lang.as_deref(), Some("de"));
    let heading = browser.find("h1").await.text().await.expect("text");
    assert_eq!(heading, "Dieser Link ist ungültig");
    browser.check_screen("link-error-de").await;
    browser.close().await;
}

#[tokio::test]
async fn the_sign_in_form_is_accessible_in_german() {
    let app = spawn_app().await;
    let browser = Browser::start_in_language("de").await;
    browser
        .goto(&format!("{}/console/sign-in", app.address))
        .await;
    let text = browser.text().await;
    assert!(text.contains("Persönliches Zugriffstoken"), "{text}");
    let lang = browser
        .find("html")
        .await
        .attr("lang")
        .await
        .expect("attribute");
    assert_eq!(lang.as_deref(), Some("de"));
    browser.check_screen("sign-in-de").await;
    // A refused token: the error is announced in German.
    browser.fill("#token", "not-a-token").await;
    browser
        .click("form[action='/console/sign-in'] button")
        .await;
    let alert = browser.find("[role='alert']").await;
    let message = alert.text().await.expect("text");
    assert!(
        message.starts_with("Das ist kein persönliches Zugriffstoken"),
        "{message}"
    );
    browser.check_screen("sign-in-error-de").await;
    browser.close().await;
}

#[tokio::test]
async fn a_subscribe_forms_hosted_page_is_accessible_and_sends_in_german() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let templates: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/templates"), &token)
        .await
        .json()
        .await
        .expect("templates");
    let welcome = templates["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|template| template["slug"] == "welcome")
        .expect("the starter welcome template")["_id"]
        .clone();
    let form: serde_json::Value = app
        .send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/forms"),
            &token,
            &json!({"name": "Newsletter", "attributes": ["first_name"], "doubleOptIn": true,
                    "confirmationTemplateId": welcome}),
        )
        .await
        .json()
        .await
        .expect("form");
    let page = format!(
        "{}/f/{}",
        app.address,
        form["formKey"].as_str().expect("form key")
    );
    let browser = Browser::start_in_language("de").await;
    browser.goto(&page).await;
    let text = browser.text().await;
    assert!(text.contains("Acme abonnieren"), "{text}");
    assert!(
        !text.contains("Dieses Feld leer lassen"),
        "the honeypot is out of sight: {text}"
    );
    browser.check_screen("form-de").await;
    browser.fill("#email", "grace@example.org").await;
    browser.fill("#attribute-0", "Grace").await;
    // A person takes longer than the page's least time to fill it in.
    app.clock.advance(time::Duration::seconds(5));
    browser.click("form button").await;
    let status = browser.find("[role='status']").await;
    let notice = status.text().await.expect("text");
    assert!(
        notice.starts_with("Danke. Wir haben Ihnen eine E-Mail geschickt"),
        "{notice}"
    );
    browser.check_screen("form-sent-de").await;
    browser.close().await;
    let contacts: serde_json::Value = app
        .get(
            &format!("/v2/accounts/{account}/contacts?email=grace@example.org"),
            &token,
        )
        .await
        .json()
        .await
        .expect("contacts");
    assert!(
        contacts["items"][0]["pendingSince"].is_string(),
        "{contacts}"
    );
}
