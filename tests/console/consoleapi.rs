//! The console's mail server, announcement and template test pages in a real browser:
//! a mail server created against the loopback SMTP test server (and one refused, with the
//! server's answer shown), an announcement sent and watched until it completes while the
//! workers run beside the page, and a template previewed with sample data and test-sent.

use diesel::connection::SimpleConnection;
use mailroom_server::{announcement_worker::AnnouncementWorker, message_worker::MessageWorker};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use mailroom_tests::{expect_json, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

use crate::account_pages::attribute;
use crate::browser::Browser;
use crate::sign_in_with_token;

async fn api_ok(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    expect_json(app.send_json(method, path, token, &body).await, 200).await
}

/// Waits until `css`'s text is `expected` on the page as it is (no navigation: htmx
/// swaps the element in place).
async fn wait_for_text(browser: &Browser, css: &str, expected: &str, within: Duration) {
    let started = Instant::now();
    loop {
        if let Ok(element) = browser.client.find(fantoccini::Locator::Css(css)).await {
            if element.text().await.is_ok_and(|text| text == expected) {
                return;
            }
        }
        assert!(
            started.elapsed() < within,
            "{css} never showed {expected:?}: {}",
            browser.text().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_mail_server_is_checked_live_and_an_announcement_is_watched_until_completed() {
    let app = spawn_app_with(|config| {
        config.allow_private_egress = true;
        config.smtp_timeout = Duration::from_secs(5);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    let smtp = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);

    // Mail servers: none yet.
    browser.goto(&format!("{base}/mail-servers")).await;
    assert!(browser.text().await.contains("No mail servers yet"));
    browser.check_screen("mail-servers-empty").await;

    // A server that does not answer: refused, with what the check met.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let closed_port = closed.local_addr().expect("address").port();
    drop(closed);
    browser.click("main a[href$='/mail-servers/new']").await;
    browser.fill("#server-host", "127.0.0.1").await;
    browser
        .find("#server-port")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#server-port", &closed_port.to_string()).await;
    browser
        .find("#server-security option[value='opportunistic']")
        .await
        .click()
        .await
        .expect("choose");
    browser
        .fill("#server-from-email", "hello@shop.example")
        .await;
    browser.click("form[action$='/mail-servers'] button").await;
    let text = browser.text().await;
    assert!(text.contains("The server was not saved"), "{text}");
    assert!(text.contains("the live server, which answered"), "{text}");
    assert!(text.contains("Host: Could not connect"), "{text}");
    assert_eq!(
        attribute(&browser, "#server-host", "aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    browser.check_screen("mail-server-refused").await;

    // A host that is no host name is Mailroom's own refusal: nothing reached a server.
    browser
        .find("#server-host")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#server-host", "not a host!").await;
    browser.click("form[action$='/mail-servers'] button").await;
    let text = browser.text().await;
    assert!(text.contains("nothing was sent to the server"), "{text}");
    assert!(!text.contains("the live server"), "{text}");
    browser
        .find("#server-host")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#server-host", "127.0.0.1").await;

    // The test server: saved, and the check's answer shown (it offers no AUTH).
    browser
        .find("#server-port")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#server-port", &smtp.port().to_string()).await;
    browser.fill("#server-from-name", "Ada's shop").await;
    browser.click("form[action$='/mail-servers'] button").await;
    let check = browser
        .find("[data-testid='check-result']")
        .await
        .text()
        .await
        .expect("text");
    assert!(check.contains("Saved. The live check connected"), "{check}");
    assert_eq!(
        browser
            .find("[data-testid='server-health']")
            .await
            .text()
            .await
            .expect("text"),
        "Healthy"
    );
    browser.check_screen("mail-server-saved").await;
    let servers = expect_json(
        app.get(&format!("/v2/accounts/{account}/mail-servers"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(servers["items"][0]["port"], smtp.port());

    // What the delivery engine records about a failing server shows on its pages.
    app.database
        .connection()
        .batch_execute(
            "UPDATE mail_servers SET unhealthy_since = now(), \
             last_error = 'the mail server''s stored password cannot be opened'",
        )
        .expect("marked");
    browser.goto(&format!("{base}/mail-servers")).await;
    let text = browser.text().await;
    assert!(text.contains("Unhealthy"), "{text}");
    assert!(text.contains("stored password cannot be opened"), "{text}");
    browser.check_screen("mail-servers-unhealthy").await;
    browser.click("main table a").await;
    assert_eq!(
        browser
            .find("[data-testid='server-health']")
            .await
            .text()
            .await
            .expect("text"),
        "Unhealthy"
    );
    // Saving it again checks it again and clears the state.
    browser.click("main form.card button").await;
    assert_eq!(
        browser
            .find("[data-testid='server-health']")
            .await
            .text()
            .await
            .expect("text"),
        "Healthy"
    );

    // An announcement to the three `pro` contacts of four, watched until completed.
    for n in 0..4 {
        let plan = if n < 3 { "pro" } else { "free" };
        api_ok(
            &app,
            &token,
            Method::POST,
            &format!("/v2/accounts/{account}/contacts"),
            json!({"email": format!("reader{n}@example.org"), "attributes": {"plan": plan}}),
        )
        .await;
    }
    api_ok(&app, &token, Method::POST, &format!("/v2/accounts/{account}/templates"),
        json!({"name": "Launch", "slug": "launch", "subject": "We launched", "content": "<p>Hello {{ email }}</p>"})).await;
    let topic = api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/topics"),
        json!({"name": "Product news"}),
    )
    .await;
    let topic = topic["_id"].as_str().expect("topic id").to_owned();
    browser.goto(&format!("{base}/announcements")).await;
    assert!(browser.text().await.contains("No announcements yet"));
    browser.check_screen("announcements-empty").await;
    browser.click("main a[href$='/announcements/new']").await;
    browser.check_screen("announcement-new").await;
    browser.click("form[action$='/announcements'] button").await;
    let text = browser.text().await;
    assert!(
        text.contains("The announcement cannot be sent yet"),
        "{text}"
    );
    // Each error is on its field, in the form's words, never the API's field names.
    assert_eq!(
        attribute(&browser, "#announcement-name", "aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    assert_eq!(
        attribute(&browser, "#announcement-template", "aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    assert!(text.contains("Template: "), "{text}");
    assert!(!text.contains("templateId"), "{text}");
    browser.check_screen("announcement-errors").await;
    browser.fill("#announcement-name", "Launch day").await;
    let option = browser
        .client
        .find(fantoccini::Locator::XPath(
            "//select[@id='announcement-template']/option[contains(., '(launch)')]",
        ))
        .await
        .expect("the template");
    option.click().await.expect("choose");
    browser
        .find(&format!("#announcement-topic option[value='{topic}']"))
        .await
        .click()
        .await
        .expect("choose the topic");
    browser.fill("#c0-slug", "plan").await;
    browser
        .client
        .find(fantoccini::Locator::Css(
            "#c0-operator option[value='s_equal']",
        ))
        .await
        .expect("the operator")
        .click()
        .await
        .expect("choose");
    browser.fill("#c0-value", "PRO").await;
    browser.click("form[action$='/announcements'] button").await;

    // The review: how many, the mail as the first of them receives it, what it lacks.
    assert_eq!(text_of(&browser, "[data-testid='review-count']").await, "3");
    assert_eq!(
        text_of(&browser, "[data-testid='review-subject']").await,
        "We launched"
    );
    assert!(text_of(&browser, "[data-testid='review-audience']")
        .await
        .contains("plan is “PRO”"));
    // The audience can be saved as a segment: the builder opens with it filled in.
    let save = attribute(&browser, "[data-testid='review-save-segment']", "href")
        .await
        .expect("a link to save the audience");
    assert!(save.contains("/contacts/segment?"), "{save}");
    assert!(
        save.contains("c0_slug=plan") && save.contains("c0_value=PRO"),
        "{save}"
    );
    assert!(save.contains(&format!("topic={topic}")), "{save}");
    let warnings = text_of(&browser, "[data-testid='review-warnings']").await;
    assert!(warnings.contains("no unsubscribe link"), "{warnings}");
    assert!(warnings.contains("no text part"), "{warnings}");
    assert_eq!(smtp.messages().len(), 0, "nothing is sent by a review");
    browser.check_screen("announcement-review").await;
    // A test to an address that is not one is refused on its field; then one to Ada.
    browser.fill("#review-test-email", "not an address").await;
    browser.click("button[formaction$='action=test']").await;
    assert_eq!(
        text_of(&browser, "#review-test-email-error").await,
        "Is not an email address."
    );
    browser
        .find("#review-test-email")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#review-test-email", "ada@example.com").await;
    browser.click("button[formaction$='action=test']").await;
    assert!(text_of(&browser, "[data-testid='review-notice']")
        .await
        .contains("A test was queued to ada@example.com"));
    let tests = expect_json(
        app.get(&format!("/v2/accounts/{account}/messages"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(tests["items"].as_array().expect("items").len(), 1);
    assert_eq!(tests["items"][0]["test"], true);
    assert_eq!(tests["items"][0]["email"], "ada@example.com");
    // The text part, written from the HTML: the warning goes, the text shows.
    browser.click("button[formaction$='action=text']").await;
    assert!(text_of(&browser, "[data-testid='review-text']")
        .await
        .contains("Hello reader"));
    let warnings = text_of(&browser, "[data-testid='review-warnings']").await;
    assert!(!warnings.contains("no text part"), "{warnings}");
    assert_eq!(browser.count("button[formaction$='action=text']").await, 0);
    // The draft went through every step unchanged: send it.
    browser.click("[data-testid='review-send']").await;
    assert!(browser
        .path()
        .await
        .starts_with(&format!("/console/accounts/{account}/announcements/")));
    assert_eq!(
        browser
            .find("[data-testid='announcement-status']")
            .await
            .text()
            .await
            .expect("status"),
        "running"
    );
    browser.check_screen("announcement-running").await;

    // The workers run beside the open page; htmx brings the progress in.
    let services = app.services.clone();
    AnnouncementWorker::new(services.clone(), 100)
        .run_once()
        .await
        .expect("expansion");
    wait_for_text(
        &browser,
        "[data-testid='count-audience']",
        "3",
        Duration::from_secs(15),
    )
    .await;
    let worker = MessageWorker::new(services.clone(), &app.config);
    while worker.run_once().await.expect("messages").claimed > 0 {}
    AnnouncementWorker::new(services, 100)
        .run_once()
        .await
        .expect("completion");
    wait_for_text(
        &browser,
        "[data-testid='announcement-status']",
        "completed",
        Duration::from_secs(15),
    )
    .await;
    assert_eq!(
        browser
            .find("[data-testid='count-sent']")
            .await
            .text()
            .await
            .expect("sent"),
        "3"
    );
    // The three of the announcement, and the test.
    assert_eq!(smtp.messages().len(), 4);
    browser.check_screen("announcement-completed").await;
    // Its page names what it sends and to whom, in words.
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-template']").await,
        "Launch (launch)"
    );
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-topic']").await,
        "Product news"
    );
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-conditions']").await,
        "plan is “PRO”"
    );

    // Its messages: the log filtered by the announcement, by name, newest first.
    browser
        .click("main a[href*='/messages?announcement=']")
        .await;
    assert_eq!(browser.count("[data-testid='message-row']").await, 3);
    let selected = browser
        .find("#messages-announcement option:checked")
        .await
        .text()
        .await
        .expect("selected");
    assert_eq!(selected, "Launch day");
    let rows = browser.text().await;
    assert!(rows.contains("announcement: Launch day"), "{rows}");
    assert!(rows.contains("Launch (launch)"), "{rows}");
    let listed: Vec<String> = {
        let mut emails = Vec::new();
        for row in browser
            .client
            .find_all(fantoccini::Locator::Css(
                "[data-testid='message-row'] td:nth-child(2)",
            ))
            .await
            .expect("rows")
        {
            emails.push(row.text().await.expect("email"));
        }
        emails
    };
    let log = expect_json(
        app.get(
            &format!(
                "/v2/accounts/{account}/messages?order=newest&announcementId={}",
                browser
                    .find("#messages-announcement option:checked")
                    .await
                    .attr("value")
                    .await
                    .expect("value")
                    .expect("the announcement's id")
            ),
            &token,
        )
        .await,
        200,
    )
    .await;
    let newest: Vec<String> = log["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|message| message["email"].as_str().expect("email").to_owned())
        .collect();
    assert_eq!(listed, newest);
    browser.check_screen("messages-of-announcement").await;

    // One message: its names, its content as it renders and its timeline.
    browser.click("[data-testid='message-row'] td a").await;
    assert_eq!(
        text_of(&browser, "[data-testid='message-template']").await,
        "Launch"
    );
    assert_eq!(
        text_of(&browser, "[data-testid='message-announcement']").await,
        "Launch day"
    );
    assert_eq!(
        text_of(&browser, "[data-testid='message-subject']").await,
        "We launched"
    );
    let timeline = text_of(&browser, "[data-testid='message-timeline']").await;
    assert!(timeline.contains("Queued"), "{timeline}");
    assert!(
        timeline.contains("Sent after 1 attempt(s): 250"),
        "{timeline}"
    );
    let frame = attribute(&browser, "iframe.preview", "src")
        .await
        .expect("the frame's address");
    let session = crate::session_cookie(&browser).await;
    let framed = crate::client()
        .get(format!("{}{frame}", app.address))
        .header(
            reqwest::header::COOKIE,
            format!("mailroom_console={session}"),
        )
        .send()
        .await
        .expect("frame");
    assert_eq!(framed.status(), 200);
    let policy = framed
        .headers()
        .get("content-security-policy")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(policy.starts_with("sandbox"), "{policy}");
    let html = framed.text().await.expect("html");
    assert!(html.contains("<p>Hello reader"), "{html}");
    browser.check_screen("message-of-announcement").await;

    // A filter that is not one says so on its field, in the form's words.
    browser
        .goto(&format!("{base}/messages?email=not-an-address"))
        .await;
    assert_eq!(
        attribute(&browser, "#messages-email", "aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    assert_eq!(
        text_of(&browser, "#messages-email-error").await,
        "Is not an email address."
    );
    assert!(browser
        .text()
        .await
        .contains("Address: Is not an email address."));

    browser.goto(&format!("{base}/announcements")).await;
    assert!(browser.text().await.contains("Launch day"));
    browser.check_screen("announcements").await;
    browser.close().await;
}

#[tokio::test]
async fn a_template_is_previewed_with_sample_data_and_test_sent() {
    let app = spawn_app_with(|config| config.allow_private_egress = true).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/contacts"),
        json!({"email": "grace@example.org", "attributes": {"first_name": "Grace"}}),
    )
    .await;
    let template = api_ok(&app, &token, Method::POST, &format!("/v2/accounts/{account}/templates"),
        json!({"name": "Hello", "slug": "hello", "subject": "Hi {{ first_name }}",
               "content": "<h1>Hi {{ first_name }}, {{ plan }}</h1>", "textContent": "Hi {{ first_name }}"})).await;
    let id = template["_id"].as_str().expect("id");
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    browser
        .goto(&format!(
            "{}/console/accounts/{account}/templates/{id}",
            app.address
        ))
        .await;
    browser.fill("#sample-email", "grace@example.org").await;
    browser.fill("#sample-data", r#"{"plan": "pro"}"#).await;
    browser.click("#sample-data ~ button").await;
    assert_eq!(
        browser
            .find("[data-testid='preview-subject']")
            .await
            .text()
            .await
            .expect("subject"),
        "Hi Grace"
    );
    browser
        .find("iframe.preview")
        .await
        .enter_frame()
        .await
        .expect("into the preview");
    assert_eq!(
        browser.find("h1").await.text().await.expect("heading"),
        "Hi Grace, pro"
    );
    browser.client.enter_parent_frame().await.expect("back out");
    browser.check_screen("template-preview").await;

    // Bad sample data is shown, not a failure.
    browser
        .find("#sample-data")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#sample-data", "[1]").await;
    browser.click("#sample-data ~ button").await;
    let error = browser
        .find("[data-testid='preview-error']")
        .await
        .text()
        .await
        .expect("error");
    assert!(error.contains("JSON object"), "{error}");

    // A syntax error is shown at its line when saving.
    browser
        .find("#template-content")
        .await
        .clear()
        .await
        .expect("clear");
    browser
        .fill("#template-content", "<p>one</p>\n<p>{{ broken </p>")
        .await;
    browser.click("form.card button[type='submit']").await;
    let text = browser.text().await;
    assert!(text.contains("line 2"), "{text}");
    browser.check_screen("template-syntax-error").await;

    // A test send.
    browser
        .goto(&format!(
            "{}/console/accounts/{account}/templates/{id}",
            app.address
        ))
        .await;
    browser.fill("#test-email", "qa@example.org").await;
    browser.click("form[action$='/test-send'] button").await;
    let sent = browser
        .find("[data-testid='test-sent']")
        .await
        .text()
        .await
        .expect("notice");
    assert!(sent.contains("Test message queued"), "{sent}");
    browser.check_screen("template-test-sent").await;
    let log = expect_json(
        app.get(&format!("/v2/accounts/{account}/messages"), &token)
            .await,
        200,
    )
    .await;
    assert_eq!(log["items"][0]["test"], true, "{log}");
    assert_eq!(log["items"][0]["email"], "qa@example.org");
    // The console's log marks it.
    browser
        .goto(&format!(
            "{}/console/accounts/{account}/messages",
            app.address
        ))
        .await;
    assert_eq!(browser.count("[data-testid='test-badge']").await, 1);
    browser.close().await;
}

#[tokio::test]
async fn a_template_is_written_in_the_visual_editor_and_previewed() {
    let app = spawn_app_with(|_| {}).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    browser
        .goto(&format!(
            "{}/console/accounts/{account}/templates/new",
            app.address
        ))
        .await;
    browser.fill("#template-name", "Visual").await;
    browser.fill("#template-slug", "visual").await;
    browser.fill("#template-subject", "News").await;
    browser.fill("#template-content", "<p>draft</p>").await;
    browser
        .find("#template-type option[value='wysiwyg']")
        .await
        .click()
        .await
        .expect("choose");
    // The editor opens as soon as it is chosen, and the preview follows the draft
    // before anything is saved.
    assert_eq!(browser.count(".editable").await, 1);
    wait_for_frame_text(&browser, "iframe[name='template-preview']", "draft").await;
    let templates = expect_json(
        app.get(
            &format!("/v2/accounts/{account}/templates?limit=100"),
            &token,
        )
        .await,
        200,
    )
    .await;
    assert!(!templates["items"]
        .as_array()
        .expect("items")
        .iter()
        .any(|t| t["slug"] == "visual"));
    browser.click("form.card button[type='submit']").await;
    assert!(browser.text().await.contains("Saved."));

    // The editor replaces the textarea; write a heading, a bold word and an image.
    let area = browser.find(".editable").await;
    assert_eq!(
        browser
            .find("#template-content")
            .await
            .attr("hidden")
            .await
            .expect("attr")
            .as_deref(),
        Some("true")
    );
    browser
        .client
        .execute(
            "const a = document.querySelector('.editable'); a.focus(); \
             document.getSelection().selectAllChildren(a); return true;",
            vec![],
        )
        .await
        .expect("select");
    area.send_keys("Big news").await.expect("typing");
    let select_all = "const a = document.querySelector('.editable'); \
                      document.getSelection().selectAllChildren(a.firstElementChild || a); return true;";
    browser
        .client
        .execute(select_all, vec![])
        .await
        .expect("select");
    browser
        .find("button[title='Bold']")
        .await
        .click()
        .await
        .expect("bold");
    browser
        .client
        .execute(select_all, vec![])
        .await
        .expect("select");
    browser
        .find("button[title='Heading']")
        .await
        .click()
        .await
        .expect("heading");
    browser
        .client
        .execute(
            "const a = document.querySelector('.editable'); const r = document.createRange(); \
             r.selectNodeContents(a); r.collapse(false); const s = document.getSelection(); \
             s.removeAllRanges(); s.addRange(r); return true;",
            vec![],
        )
        .await
        .expect("caret at the end");
    browser
        .fill("#template-content-url", "https://img.example/logo.png")
        .await;
    browser.fill("#template-content-alt", "Logo").await;
    browser
        .find("button[title='Insert the image at the URL']")
        .await
        .click()
        .await
        .expect("image");
    browser.check_screen("template-visual-editor").await;
    browser.click("form.card button[type='submit']").await;
    assert!(browser.text().await.contains("Saved."));

    let stored = expect_json(
        app.get(
            &format!("/v2/accounts/{account}/templates?limit=100"),
            &token,
        )
        .await,
        200,
    )
    .await;
    let template = stored["items"]
        .as_array()
        .and_then(|items| items.iter().find(|t| t["slug"] == "visual"))
        .cloned()
        .expect("saved");
    let html = template["content"].as_str().expect("content");
    assert_eq!(template["contentType"], "wysiwyg");
    assert!(html.contains("<h2>"), "{html}");
    assert!(html.contains("<b>Big news</b>"), "{html}");
    assert!(
        html.contains("<img src=\"https://img.example/logo.png\" alt=\"Logo\">"),
        "{html}"
    );

    // The preview shows what the editor wrote.
    browser
        .find("iframe.preview")
        .await
        .enter_frame()
        .await
        .expect("into the preview");
    assert_eq!(
        browser.find("h2").await.text().await.expect("heading"),
        "Big news"
    );
    browser.client.enter_parent_frame().await.expect("back out");
    browser.close().await;
}

/// A template's HTML is any member's to write, and the visual editor shows it inside the
/// form that carries the CSRF token: htmx attributes, forms, handlers and javascript: URLs
/// in it must not act as the person who opens the page.
#[tokio::test]
async fn a_hostile_template_in_the_visual_editor_acts_as_nobody() {
    let app = spawn_app_with(|_| {}).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    let hostile = "<p>Hello</p>\
        <img hx-post=\"/console/tokens\" hx-trigger=\"load\" hx-vals='{\"name\":\"pwned\"}' src=\"data:,\" alt=\"\">\
        <div data-hx-post=\"/console/accounts\" data-hx-trigger=\"load\">x</div>\
        <form action=\"/console/tokens\" method=\"post\"><button>Go</button></form>\
        <a href=\" javascript:alert(1)\" onclick=\"alert(2)\">link</a>";
    let template = api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/templates"),
        json!({"name": "Hostile", "slug": "hostile", "subject": "Hi",
               "content": hostile, "contentType": "wysiwyg"}),
    )
    .await;
    let template_id = template["_id"].as_str().expect("id").to_owned();
    // The ids of Ada's tokens and accounts (their use times change as the test reads).
    let ids = |listing: serde_json::Value| -> Vec<String> {
        let items = listing["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|item| item["_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let tokens_before = ids(expect_json(app.get("/v2/users/me/tokens", &token).await, 200).await);
    let accounts_before = ids(expect_json(app.get("/v2/accounts", &token).await, 200).await);
    assert!(!tokens_before.is_empty() && !accounts_before.is_empty());

    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    browser
        .goto(&format!(
            "{}/console/accounts/{account}/templates/{template_id}",
            app.address
        ))
        .await;
    let shown = browser
        .client
        .execute(
            "return document.querySelector('.editable').innerHTML;",
            vec![],
        )
        .await
        .expect("editor content");
    let shown = shown.as_str().expect("html").to_owned();
    assert!(shown.contains("<p>Hello</p>"), "{shown}");
    for gone in ["hx-", "<form", "<button", "onclick", "javascript:"] {
        assert!(!shown.contains(gone), "{gone} still in the editor: {shown}");
    }
    // Give any load trigger time to fire, then nothing was created in Ada's name.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let tokens_after = ids(expect_json(app.get("/v2/users/me/tokens", &token).await, 200).await);
    let accounts_after = ids(expect_json(app.get("/v2/accounts", &token).await, 200).await);
    assert_eq!(tokens_before, tokens_after);
    assert_eq!(accounts_before, accounts_after);
    browser.close().await;
}

/// How long this module's pages take with a million contacts in the account, measured from
/// a client on loopback (an upper bound of the server's time): 100 requests of each page
/// after 10 to warm up. The announcement has a million messages' worth of counters and the
/// template preview looks a contact up among the million. Run by hand:
/// `cargo xtask test -p mailroom-tests --test console --run-ignored only
/// -E 'test(consoleapi_page_times)' --no-capture`.
#[tokio::test]
#[ignore = "a measurement, printed; it fills a million contacts"]
async fn consoleapi_page_times() {
    let app = spawn_app_with(|_| {}).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Big").await;
    let template = api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/templates"),
        json!({"name": "Big", "slug": "big", "subject": "Hi {{ first_name }}",
               "content": "<p>Hi {{ first_name }}</p>"}),
    )
    .await;
    let template_id = template["_id"].as_str().expect("id").to_owned();
    let announcement = api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/announcements"),
        json!({"name": "Big", "templateId": template_id, "includeUnsubscribed": false}),
    )
    .await;
    let announcement_id = announcement["_id"].as_str().expect("id").to_owned();
    app.database
        .connection()
        .batch_execute(&format!(
            "INSERT INTO contacts (account_id, id, email, created_at) \
             SELECT '{account}', gen_random_uuid(), 'c' || n || '@example.org', now() \
             FROM generate_series(1, 1000000) n; \
             INSERT INTO announcement_counters (account_id, announcement_id, slot, queued, sent) \
             SELECT '{account}', '{announcement_id}', s, 5000, 10625 FROM generate_series(0, 63) s; \
             UPDATE announcements SET audience_size = 1000000 WHERE id = '{announcement_id}'; \
             ANALYZE;"
        ))
        .expect("a million contacts");
    let signed_in = crate::post_sign_in(&app, &token, None).await;
    let session = signed_in.headers()[reqwest::header::SET_COOKIE]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("name=value")
        .to_owned();
    let client = crate::client();
    let base = format!("/console/accounts/{account}");
    for page in [
        format!("{base}/announcements"),
        format!("{base}/announcements/{announcement_id}"),
        format!("{base}/announcements/{announcement_id}/progress"),
        format!("{base}/mail-servers"),
        format!("{base}/templates/{template_id}?email=c500000%40example.org&data=%7B%7D"),
        format!("{base}/templates/{template_id}/preview?email=c500000%40example.org"),
    ] {
        let mut times = Vec::new();
        for round in 0..110 {
            let started = Instant::now();
            let response = client
                .get(format!("{}{page}", app.address))
                .header(reqwest::header::COOKIE, session.clone())
                .send()
                .await
                .expect("page");
            assert_eq!(response.status(), reqwest::StatusCode::OK, "{page}");
            response.bytes().await.expect("body");
            if round >= 10 {
                times.push(started.elapsed());
            }
        }
        times.sort();
        let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        println!(
            "{page}: p50 {:?}, p95 {:?}, max {:?} over {} requests",
            at(0.50),
            at(0.95),
            times[times.len() - 1],
            times.len()
        );
    }
}

async fn text_of(browser: &Browser, css: &str) -> String {
    browser.find(css).await.text().await.expect("text")
}

/// Waits (up to 15 s) until the frame `css` shows `expected` in its body.
async fn wait_for_frame_text(browser: &Browser, css: &str, expected: &str) {
    let started = Instant::now();
    loop {
        browser
            .find(css)
            .await
            .enter_frame()
            .await
            .expect("into the frame");
        let text = match browser.client.find(fantoccini::Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        browser.client.enter_parent_frame().await.expect("back out");
        if text.contains(expected) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the frame {css} shows {text:?}, not {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_announcement_is_scheduled_cancelled_paused_and_resumed_from_its_page() {
    let app = spawn_app_with(|_| {}).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/contacts"),
        json!({"email": "grace@example.org"}),
    )
    .await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);

    // Scheduled from the form, a day ahead (UTC, as the field says).
    browser.goto(&format!("{base}/announcements/new")).await;
    browser.fill("#announcement-name", "Next week").await;
    browser
        .client
        .find(fantoccini::Locator::XPath(
            "//select[@id='announcement-template']/option[contains(., '(welcome)')]",
        ))
        .await
        .expect("the starter template")
        .click()
        .await
        .expect("choose");
    let tomorrow = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    let local = format!(
        "{}T{:02}:{:02}",
        tomorrow.date(),
        tomorrow.hour(),
        tomorrow.minute()
    );
    browser
        .client
        .execute(
            "document.querySelector('#announcement-send-at').value = arguments[0];",
            vec![json!(local)],
        )
        .await
        .expect("the start time");
    browser.click("form[action$='/announcements'] button").await;
    assert!(text_of(&browser, "[data-testid='review-send-at']")
        .await
        .contains(&tomorrow.date().to_string()));
    assert!(text_of(&browser, "[data-testid='review-send']")
        .await
        .starts_with("Schedule for 1 contact"));
    browser.click("[data-testid='review-send']").await;
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-status']").await,
        "scheduled"
    );
    assert!(text_of(&browser, "[data-testid='announcement-send-at']")
        .await
        .contains(&tomorrow.date().to_string()));
    assert_eq!(browser.count("[data-testid='announcement-pause']").await, 0);
    browser.check_screen("announcement-scheduled").await;
    // Cancelling asks first.
    browser.click("[data-testid='announcement-cancel']").await;
    assert!(browser.text().await.contains("Cancel this announcement?"));
    browser.confirm("Next week").await;
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-status']").await,
        "cancelled"
    );
    assert_eq!(
        browser.count("[data-testid='announcement-cancel']").await,
        0
    );

    // A running one is paused and resumed.
    let templates = expect_json(
        app.get(&format!("/v2/accounts/{account}/templates"), &token)
            .await,
        200,
    )
    .await;
    let template = templates["items"][0]["_id"].as_str().expect("a template");
    let running = api_ok(
        &app,
        &token,
        Method::POST,
        &format!("/v2/accounts/{account}/announcements"),
        json!({"name": "Now", "templateId": template, "includeUnsubscribed": false}),
    )
    .await;
    let id = running["_id"].as_str().expect("id");
    browser.goto(&format!("{base}/announcements/{id}")).await;
    browser.click("[data-testid='announcement-pause']").await;
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-status']").await,
        "paused"
    );
    browser.check_screen("announcement-paused").await;
    browser.click("[data-testid='announcement-resume']").await;
    assert_eq!(
        text_of(&browser, "[data-testid='announcement-status']").await,
        "running"
    );
    browser.close().await;
}
