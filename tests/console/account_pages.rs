//! The account pages in a real browser: settings and webhook settings, the CSV import
//! with its progress bar, the contact list and a contact, the segment builder with its
//! live count, saved segments, the message log and one message, and the webhook-event
//! log with a retry.
//! A stranger sees none of it; cross-site and tokenless posts to its forms are refused.

use std::time::{Duration, Instant};

use diesel::{connection::SimpleConnection, RunQueryDsl};
use mailroom_tests::{spawn_app_with, TestApp};
use reqwest::{header, StatusCode};

use super::{browser::Browser, client, fill_dashboard, session_cookie, sign_in_with_token};

/// Waits until the script `condition` (an expression) is true in the page.
async fn wait_for(browser: &Browser, condition: &str, what: &str) {
    let started = Instant::now();
    loop {
        let value = browser
            .client
            .execute(&format!("return Boolean({condition});"), vec![])
            .await
            .expect("script runs");
        if value.as_bool() == Some(true) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what} never happened: {}",
            browser.text().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn attribute(browser: &Browser, css: &str, name: &str) -> Option<String> {
    browser.find(css).await.attr(name).await.expect("attribute")
}

/// A CSV of `rows` good contacts (`plan` pro for even numbers, free for odd ones, and an
/// `age`), with two bad rows among them: a bad email on line 3 and a short row on line 6.
fn csv_file(rows: usize) -> String {
    let mut csv = String::from("email,plan,age,joined\n");
    for n in 0..rows {
        if n == 1 {
            csv.push_str("not-an-email,pro,1,2026-01-01\n");
        }
        if n == 3 {
            csv.push_str("short@example.org\n");
        }
        let plan = if n % 2 == 0 { "pro" } else { "free" };
        // `joined` as a spreadsheet writes a day.
        csv.push_str(&format!(
            "reader{n}@example.org,{plan},{},2026-01-{:02}\n",
            20 + n % 50,
            1 + n % 28
        ));
    }
    csv
}

async fn app() -> TestApp {
    // The webhook endpoint of the test is on loopback.
    spawn_app_with(|config| config.allow_private_egress = true).await
}

#[tokio::test]
async fn import_segment_contacts_settings_and_logs() {
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    fill_dashboard(&app, &token, &account).await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);

    // Import: a file large enough to go up in several pieces, watched on the progress bar.
    browser.goto(&format!("{base}/contacts/import")).await;
    browser.check_screen("import").await;
    let rows = 6_000;
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("console-import-{}.csv", std::process::id()));
    std::fs::write(&file, csv_file(rows)).expect("csv written");
    browser
        .fill("#import-file", &file.display().to_string())
        .await;
    browser
        .find("#import-form button[type=submit]")
        .await
        .click()
        .await
        .expect("click");
    wait_for(
        &browser,
        "document.querySelector('[data-testid=import-progress]').dataset.done === '1'",
        "the import",
    )
    .await;
    let _ = std::fs::remove_file(&file);
    // The page stayed (the script sent the file), the bar saw the upload and ended full.
    assert_eq!(
        browser.path().await,
        format!("/console/accounts/{account}/contacts/import")
    );
    let progress_events: u32 = attribute(&browser, "[data-testid=import-progress]", "data-events")
        .await
        .expect("progress was reported")
        .parse()
        .expect("a count");
    assert!(progress_events >= 1, "{progress_events}");
    let value = browser
        .client
        .execute(
            "return document.querySelector('[data-testid=import-progress]').value;",
            vec![],
        )
        .await
        .expect("value");
    assert_eq!(value, serde_json::json!(100));
    let created = browser
        .find("[data-testid=import-created]")
        .await
        .text()
        .await
        .expect("text");
    assert_eq!(created, rows.to_string());
    let rejected = browser
        .find("[data-testid=import-rejected]")
        .await
        .text()
        .await
        .expect("text");
    assert_eq!(rejected, "2");
    let lines = browser
        .client
        .execute(
            "return [...document.querySelectorAll('#import-result tbody tr td:first-child')]
                 .map(cell => cell.textContent);",
            vec![],
        )
        .await
        .expect("rejected lines");
    assert_eq!(lines, serde_json::json!(["3", "6"]));
    browser.check_screen("import-report").await;
    // The API sees the imported contacts.
    let count: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/contacts/count"), &token)
        .await
        .json()
        .await
        .expect("json");
    // Two contacts came with the dashboard's messages.
    assert_eq!(count["count"], (rows + 2) as u64);

    // The same import as a plain form (no script): the report is the answering page.
    browser
        .client
        .execute(
            "document.getElementById('import-form').replaceWith(document.getElementById('import-form').cloneNode(true));",
            vec![],
        )
        .await
        .expect("the script's listener removed");
    let small = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("console-import-small-{}.csv", std::process::id()));
    std::fs::write(
        &small,
        "email,plan\nreader0@example.org,gold\nnew@example.org,pro\n",
    )
    .expect("csv written");
    browser
        .fill("#import-file", &small.display().to_string())
        .await;
    browser.click("#import-form button[type=submit]").await;
    let _ = std::fs::remove_file(&small);
    assert_eq!(
        browser
            .find("[data-testid=import-created]")
            .await
            .text()
            .await
            .expect("text"),
        "1"
    );
    assert_eq!(
        browser
            .find("[data-testid=import-updated]")
            .await
            .text()
            .await
            .expect("text"),
        "1"
    );

    // The contact list, filtered and sorted.
    browser
        .goto(&format!(
            "{base}/contacts?search=reader1%40&sort=email&order=desc"
        ))
        .await;
    let first = browser
        .find("table tbody tr td a")
        .await
        .text()
        .await
        .expect("text");
    assert_eq!(first, "reader1@example.org");
    assert_eq!(browser.count("table tbody tr").await, 1);
    browser.check_screen("contacts").await;
    // An event of the contact, recorded through the API, shows on its page.
    let event = app
        .send_json(
            reqwest::Method::POST,
            &format!("/v2/accounts/{account}/events"),
            &token,
            &serde_json::json!({ "email": "reader1@example.org", "slug": "opened_app" }),
        )
        .await;
    assert_eq!(event.status(), 200, "event");
    browser.click("table tbody tr td a").await;
    let text = browser.text().await;
    assert!(text.contains("free"), "{text}");
    assert!(text.contains("age"), "{text}");
    assert!(text.contains("opened_app"), "{text}");
    // Numbers as entered, and the day column imported as a date.
    assert!(text.contains("21"), "{text}");
    assert!(!text.contains("21.0"), "{text}");
    let attributes: serde_json::Value = app
        .get(
            &format!("/v2/accounts/{account}/attributes?limit=100"),
            &token,
        )
        .await
        .json()
        .await
        .expect("json");
    let joined = attributes["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|attribute| attribute["slug"] == "joined")
        .cloned()
        .expect("joined");
    assert_eq!(joined["type"], "date", "{joined}");
    browser.check_screen("contact").await;

    // The segment builder: the live count as a condition is typed, then the plain form.
    browser.goto(&format!("{base}/contacts/segment")).await;
    browser.check_screen("segment").await;
    browser.fill("#c0-slug", "plan").await;
    browser
        .find("#c0-operator option[value=s_equal]")
        .await
        .click()
        .await
        .expect("operator");
    browser.fill("#c0-value", "pro").await;
    wait_for(
        &browser,
        "document.querySelector('[data-testid=segment-count-value]')",
        "the live count",
    )
    .await;
    // Half of the imported rows are pro, plus new@example.org; reader0 became gold.
    let expected = (rows / 2 - 1 + 1).to_string();
    wait_for(
        &browser,
        &format!(
            "document.querySelector('[data-testid=segment-count-value]').textContent === '{expected}'"
        ),
        "the live count of plan = pro",
    )
    .await;
    browser.fill("#c1-slug", "age").await;
    browser
        .find("#c1-operator option[value=greater_than_equal]")
        .await
        .click()
        .await
        .expect("operator");
    browser.fill("#c1-value", "60").await;
    browser.click("button[name=count]").await;
    // Without the script's help: ages 60 to 69 are 10 of every 50 rows, pro or not.
    let pro_and_old = (0..rows)
        .filter(|n| n % 2 == 0 && 20 + n % 50 >= 60 && *n != 0)
        .count()
        .to_string();
    assert_eq!(
        browser
            .find("[data-testid=segment-count-value]")
            .await
            .text()
            .await
            .expect("text"),
        pro_and_old
    );
    browser.check_screen("segment-counted").await;
    browser.click("button[name=show]").await;
    assert!(browser.count("section table tbody tr").await > 0);
    // The number attribute's row offers number operators only; an operator that does
    // not fit it (a link or an older page can still ask for one) is kept on its row and
    // is a listed error, not a failure.
    assert_eq!(
        browser.count("#c1-operator option[value=contains]").await,
        0
    );
    browser
        .goto(&format!(
            "{base}/contacts/segment?rows=2&c0_slug=plan&c0_operator=s_equal&c0_value=pro\
             &c1_slug=age&c1_operator=contains&c1_value=6&count=1"
        ))
        .await;
    assert_eq!(
        browser
            .find("#c1-operator option:checked")
            .await
            .attr("value")
            .await
            .expect("value")
            .as_deref(),
        Some("contains")
    );
    let text = browser.text().await;
    assert!(text.contains("Condition 2"), "{text}");
    assert!(text.contains("does not apply"), "{text}");

    // Settings: rename, tracking off, then a webhook endpoint whose secret shows once.
    browser.goto(&format!("{base}/settings")).await;
    browser.check_screen("settings").await;
    browser
        .find("#account-name")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#account-name", "Ada's bakery").await;
    // Branding of the public pages: a colour that is not #rrggbb is refused by name and
    // nothing is stored; then a valid one is saved with the display name.
    browser.fill("#branding-name", "Ada's Bakery").await;
    browser.fill("#branding-accent", "teal").await;
    browser
        .click("form[action$='/settings'] button[type=submit]")
        .await;
    let text = browser.text().await;
    // Said in the form's words, on its field.
    assert!(text.contains("Accent colour: "), "{text}");
    assert!(!text.contains("branding.accentColor"), "{text}");
    assert_eq!(
        attribute(&browser, "#branding-accent", "aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    assert_eq!(browser.count("#branding-accent-error").await, 1);
    browser.check_screen("settings-error").await;
    // What was typed stays in the fields.
    for (field, typed) in [
        ("#branding-accent", "teal"),
        ("#branding-name", "Ada's Bakery"),
    ] {
        assert_eq!(
            browser
                .find(field)
                .await
                .prop("value")
                .await
                .expect("value")
                .as_deref(),
            Some(typed)
        );
    }
    let details: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}"), &token)
        .await
        .json()
        .await
        .expect("json");
    assert!(details["branding"]["displayName"].is_null(), "{details}");
    browser
        .find("#account-name")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#account-name", "Ada's bakery").await;
    browser
        .find("#branding-name")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#branding-name", "Ada's Bakery").await;
    browser
        .find("#branding-accent")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#branding-accent", "#2A9D8F").await;
    browser
        .find("#refuse-clear-text-auth")
        .await
        .click()
        .await
        .expect("tick");
    browser
        .click("form[action$='/settings'] button[type=submit]")
        .await;
    assert!(browser.text().await.contains("The settings were saved."));
    let details: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}"), &token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(details["name"], "Ada's bakery");
    assert_eq!(details["branding"]["displayName"], "Ada's Bakery");
    assert_eq!(details["branding"]["accentColor"], "#2a9d8f");
    assert!(details["branding"]["logoUrl"].is_null(), "{details}");
    assert_eq!(details["refuseClearTextAuth"], true, "{details}");
    assert_eq!(
        browser
            .find("#branding-accent")
            .await
            .prop("value")
            .await
            .expect("value")
            .as_deref(),
        Some("#2a9d8f")
    );
    browser
        .fill("#webhook-url", "https://127.0.0.1:9/hooks")
        .await;
    browser
        .click("form[action$='/webhooks'] button[type=submit]")
        .await;
    let secret = browser
        .find("[data-testid=signing-secret]")
        .await
        .text()
        .await
        .expect("secret");
    assert!(secret.starts_with("whsec_"), "{secret}");
    browser.check_screen("settings-secret").await;
    browser.goto(&format!("{base}/settings")).await;
    assert_eq!(browser.count("[data-testid=signing-secret]").await, 0);
    assert!(!browser.text().await.contains(&secret));

    // Messages: the log, filtered, and one message with its attempts and reply.
    browser
        .goto(&format!("{base}/messages?status=failed"))
        .await;
    browser.check_screen("messages").await;
    assert_eq!(browser.count("table tbody tr").await, 1);
    browser.click("table tbody tr td a").await;
    assert_eq!(
        browser
            .find("[data-testid=message-attempts]")
            .await
            .text()
            .await
            .expect("text"),
        "5"
    );
    assert!(browser
        .text()
        .await
        .contains("554 5.7.1 <linus@example.org>: Relay access denied"));
    browser.check_screen("message").await;

    // Webhook events: deleting a contact queues one; the worker (off in tests) is
    // played by SQL to fail it; the console retries it.
    browser
        .goto(&format!("{base}/contacts?search=reader5%40"))
        .await;
    browser.click("table tbody tr td a").await;
    browser.click("form[action$='/delete'] button").await;
    browser.check_screen("confirm-delete-contact").await;
    browser.confirm("reader5@").await;
    assert!(browser.text().await.contains("was deleted"));
    assert_eq!(browser.count("nav[aria-label='This account']").await, 1);
    app.database
        .connection()
        .batch_execute(&format!(
            "UPDATE webhook_events SET status = 'failed', try_count = 8, next_attempt_at = NULL,
                    last_attempt_at = now(), last_status_code = 500,
                    last_error = 'the endpoint answered 500'
              WHERE account_id = '{account}'"
        ))
        .expect("a failed event");
    browser.goto(&format!("{base}/webhook-events")).await;
    assert!(browser.text().await.contains("the endpoint answered 500"));
    browser.check_screen("webhook-events").await;
    browser.click("form[action$='/retry'] button").await;
    let notice = browser
        .find("[data-testid=retried]")
        .await
        .text()
        .await
        .expect("notice");
    assert!(notice.contains("Queued again"), "{notice}");
    let events: serde_json::Value = app
        .get(
            &format!("/v2/accounts/{account}/webhook-events?status=queued"),
            &token,
        )
        .await
        .json()
        .await
        .expect("json");
    let queued = events["items"].as_array().expect("events");
    assert_eq!(queued.len(), 1, "{events}");
    assert!(queued[0]["parentEventId"].is_string(), "{events}");
    browser.check_screen("webhook-events-retried").await;
    browser.close().await;
}

#[tokio::test]
async fn a_stranger_sees_nothing_and_forged_posts_are_refused() {
    let app = app().await;
    let owner = app.user_token("ada@example.com").await;
    let account = app.create_account(&owner, "Ada's secret shop").await;
    fill_dashboard(&app, &owner, &account).await;
    let contacts: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/contacts"), &owner)
        .await
        .json()
        .await
        .expect("json");
    let contact = contacts["items"][0]["_id"]
        .as_str()
        .expect("a contact")
        .to_owned();
    let messages: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/messages"), &owner)
        .await
        .json()
        .await
        .expect("json");
    let message = messages["items"][0]["_id"]
        .as_str()
        .expect("a message")
        .to_owned();

    let stranger = app.user_token("eve@example.com").await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &stranger).await;
    let base = format!("{}/console/accounts/{account}", app.address);
    for page in [
        "/settings".to_owned(),
        "/contacts".to_owned(),
        format!("/contacts/{contact}"),
        "/contacts/segment?count=1&c0_slug=email&c0_operator=contains&c0_value=example".to_owned(),
        "/contacts/segment/count?c0_slug=email&c0_operator=exists".to_owned(),
        "/contacts/import".to_owned(),
        "/messages".to_owned(),
        format!("/messages/{message}"),
        "/webhook-events".to_owned(),
        "/topics".to_owned(),
        "/segments".to_owned(),
        "/forms".to_owned(),
        "/automations".to_owned(),
        "/automations/new".to_owned(),
    ] {
        browser.goto(&format!("{base}{page}")).await;
        let text = browser.text().await;
        assert!(text.contains("Not found"), "{page}: {text}");
        for secret in [
            "Ada's secret shop",
            "grace@example.org",
            "linus@example.org",
        ] {
            assert!(!text.contains(secret), "{page}: {text}");
        }
    }
    browser.check_screen("account-page-not-found").await;

    // The stranger's own forms, posted cross-site or without the token, change nothing;
    // nor do the owner's forms posted by the stranger with a valid token of their own.
    let cookie = format!("mailroom_console={}", session_cookie(&browser).await);
    browser
        .goto(&format!("{}/console/accounts", app.address))
        .await;
    let csrf = browser
        .find("form[action='/console/sign-out'] input[name=csrf]")
        .await
        .prop("value")
        .await
        .expect("csrf field")
        .expect("csrf value");
    let post = |path: String, body: String, origin: Option<&str>, site: Option<&str>| {
        let mut request = client()
            .post(format!("{base}{path}"))
            .header(header::COOKIE, cookie.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request.send()
    };
    let own = app.address.clone();
    for path in [
        "/settings".to_owned(),
        "/webhooks".to_owned(),
        format!("/contacts/{contact}/delete"),
        format!("/contacts/{contact}/unbounce"),
        "/topics".to_owned(),
        "/segments".to_owned(),
        "/segments/01936c5e-7b2a-7cde-8f00-0123456789ab/delete".to_owned(),
        "/automations".to_owned(),
    ] {
        let foreign = post(
            path.clone(),
            format!("csrf={csrf}&name=Forged&url=https://evil.example/"),
            Some("http://evil.example"),
            None,
        )
        .await
        .expect("post");
        assert_eq!(foreign.status(), StatusCode::FORBIDDEN, "{path}");
        let cross_site = post(
            path.clone(),
            format!("csrf={csrf}&name=Forged"),
            None,
            Some("cross-site"),
        )
        .await
        .expect("post");
        assert_eq!(cross_site.status(), StatusCode::FORBIDDEN, "{path}");
        let tokenless = post(path.clone(), "name=Forged".into(), Some(&own), None)
            .await
            .expect("post");
        assert_eq!(tokenless.status(), StatusCode::FORBIDDEN, "{path}");
        let not_member = post(
            path.clone(),
            format!("csrf={csrf}&name=Forged"),
            Some(&own),
            None,
        )
        .await
        .expect("post");
        assert_eq!(not_member.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // The import form is multipart: refused cross-site before its body is read.
    let import = client()
        .post(format!("{base}/contacts/import"))
        .header(header::COOKIE, cookie.clone())
        .header(header::ORIGIN, "http://evil.example")
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=x")
        .body(format!(
            "--x\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n--x\r\n\
             Content-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\
             Content-Type: text/csv\r\n\r\nemail\r\nforged@evil.example\r\n--x--\r\n"
        ))
        .send()
        .await
        .expect("post");
    assert_eq!(import.status(), StatusCode::FORBIDDEN);
    // From the console's own origin with the stranger's valid token: not their account.
    let import = client()
        .post(format!("{base}/contacts/import"))
        .header(header::COOKIE, cookie.clone())
        .header(header::ORIGIN, own.as_str())
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=x")
        .body(format!(
            "--x\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n--x\r\n\
             Content-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\
             Content-Type: text/csv\r\n\r\nemail\r\nforged@evil.example\r\n--x--\r\n"
        ))
        .send()
        .await
        .expect("post");
    assert_eq!(import.status(), StatusCode::NOT_FOUND);
    let after: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}"), &owner)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(after["name"], "Ada's secret shop");
    assert!(after["webhooks"].is_null(), "{after}");
    let count: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/contacts/count"), &owner)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(count["count"], 2);
    browser.close().await;
}

/// How long the account pages take with many contacts in the account, measured from a
/// client on loopback (so an upper bound of the server's time): 100 requests of each
/// page after 10 to warm up. `CONSOLE_TIMES_CONTACTS` contacts (default 100,000), half of
/// them `plan` = pro, are written with SQL. Every page is measured twice: first just after
/// the bulk insert, with autovacuum off for the three tables (no visibility map yet: an
/// index-only scan still visits the table), then after `VACUUM`, the state autovacuum
/// reaches on its own soon after a bulk insert (docs/console.md, "Page times"). Run by
/// hand: `cargo xtask test -p mailroom-tests --test console --run-ignored only
/// -E 'test(account_page_times)' --no-capture`.
#[tokio::test]
#[ignore = "a measurement, printed; no assertion on the machine's speed"]
async fn account_page_times() {
    let n: u64 = std::env::var("CONSOLE_TIMES_CONTACTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    fill_dashboard(&app, &token, &account).await;
    let started = Instant::now();
    app.database
        .connection()
        .batch_execute(&format!(
            "ALTER TABLE contacts SET (autovacuum_enabled = off);
             ALTER TABLE contact_attributes SET (autovacuum_enabled = off);
             ALTER TABLE contact_slots SET (autovacuum_enabled = off);
             INSERT INTO contacts (account_id, id, email, created_at)
               SELECT '{account}',
                      ('01a00000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                      'c' || g || '@bench.example', now() - interval '1 day'
               FROM generate_series(1, {n}) g;
             INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at,
                                          slot)
               VALUES ('{account}', 'plan', 'string', 'custom', now(), 1);
             INSERT INTO contact_attributes (account_id, contact_id, slug, string_value)
               SELECT account_id, id, 'plan',
                      CASE WHEN split_part(substr(email, 2), '@', 1)::bigint % 2 = 0
                           THEN 'pro' ELSE 'free' END
               FROM contacts WHERE account_id = '{account}' AND email LIKE 'c%@bench.example';
             -- The slot rows the repository writes with the values (SQL by hand writes
             -- the meta's slot and the rows itself).
             INSERT INTO contact_slots (account_id, contact_id, string_1)
               SELECT account_id, contact_id, lower(string_value) FROM contact_attributes
               WHERE account_id = '{account}' AND slug = 'plan';
             ANALYZE contacts; ANALYZE contact_attributes; ANALYZE contact_slots;"
        ))
        .expect("contacts written");
    println!("{n} contacts written in {:?}", started.elapsed());
    let browser_free_cookie = {
        let browser = Browser::start().await;
        sign_in_with_token(&browser, &app, &token).await;
        let cookie = session_cookie(&browser).await;
        browser.close().await;
        format!("mailroom_console={cookie}")
    };
    let contact = "01a00000-0000-7000-8000-000000000007";
    let client = client();
    let pages = [
        "/settings".to_owned(),
        "/contacts".to_owned(),
        "/contacts?sort=email&order=desc".to_owned(),
        "/contacts?sort=status".to_owned(),
        "/contacts?sort=status&order=desc".to_owned(),
        "/contacts?status=bounced".to_owned(),
        "/contacts?search=c4242".to_owned(),
        // Short needles (no trigram) and one every contact contains.
        "/contacts?search=7".to_owned(),
        "/contacts?search=c4".to_owned(),
        "/contacts?search=42&sort=email&order=desc".to_owned(),
        "/contacts?search=bench".to_owned(),
        "/contacts?search=bench&sort=createDate&order=desc".to_owned(),
        // Short needles no contact contains (two characters, one): nothing stops a scan
        // early, so they are looked up in an index (docs/console.md, "Short needles").
        "/contacts?search=zq".to_owned(),
        "/contacts?search=q".to_owned(),
        "/contacts?start=5000".to_owned(),
        format!("/contacts/{contact}"),
        "/contacts/segment".to_owned(),
        "/contacts/segment?show=1&c0_slug=plan&c0_operator=s_equal&c0_value=pro".to_owned(),
        "/contacts/segment/count?c0_slug=plan&c0_operator=s_equal&c0_value=pro".to_owned(),
        "/contacts/import".to_owned(),
        "/messages".to_owned(),
        "/webhook-events".to_owned(),
        "/topics".to_owned(),
        "/automations".to_owned(),
    ];
    for vacuumed in [false, true] {
        if vacuumed {
            let mut conn = app.database.connection();
            // One statement each: VACUUM cannot run in the transaction of a batch.
            for table in ["contacts", "contact_attributes", "contact_slots"] {
                conn.batch_execute(&format!("VACUUM (ANALYZE) {table}"))
                    .expect("vacuum");
            }
            println!("after VACUUM:");
        } else {
            println!("just after the insert (not vacuumed):");
        }
        // A rare needle that the statistics contain (an address from the column's
        // histogram): the planner's estimate made it walk every contact (docs/console.md,
        // "The email filter's plan"). Read after each ANALYZE, since the sample changes.
        let needle: HistogramBound = diesel::sql_query(
            "SELECT (histogram_bounds::text::text[])[50] AS bound FROM pg_stats \
             WHERE tablename = 'contacts' AND attname = 'email_lower'",
        )
        .get_result(&mut app.database.connection())
        .expect("a histogram of email_lower");
        let mut pages = pages.to_vec();
        pages.push(format!("/contacts?search={}", needle.bound));
        measure_pages(&client, &app, &account, &browser_free_cookie, &pages).await;
    }
}

#[derive(diesel::QueryableByName)]
struct HistogramBound {
    #[diesel(sql_type = diesel::sql_types::Text)]
    bound: String,
}

/// 100 requests of each page after 10 to warm up; prints p50, p95 and the slowest.
async fn measure_pages(
    client: &reqwest::Client,
    app: &TestApp,
    account: &str,
    cookie: &str,
    pages: &[String],
) {
    for page in pages {
        let mut times = Vec::new();
        for round in 0..110 {
            let started = Instant::now();
            let response = client
                .get(format!("{}/console/accounts/{account}{page}", app.address))
                .header(header::COOKIE, cookie)
                .send()
                .await
                .expect("page");
            assert_eq!(response.status(), StatusCode::OK, "{page}");
            response.bytes().await.expect("body");
            if round >= 10 {
                times.push(started.elapsed());
            }
        }
        times.sort();
        let at =
            |quantile: f64| times[((times.len() as f64 * quantile) as usize).min(times.len() - 1)];
        println!(
            "{page}: p50 {:?}, p95 {:?}, max {:?} over {} requests",
            at(0.50),
            at(0.95),
            times[times.len() - 1],
            times.len()
        );
    }
}

#[tokio::test]
async fn topics_and_automations_are_created_edited_and_deleted() {
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    fill_dashboard(&app, &token, &account).await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);

    // Topics: a bad form comes back with its error, a good one is listed, then edited.
    let topic_count = || async {
        let count: serde_json::Value = app
            .get(&format!("/v2/accounts/{account}/topics/count"), &token)
            .await
            .json()
            .await
            .expect("json");
        count["count"].as_u64().expect("a count")
    };
    let starting = topic_count().await;
    browser.goto(&format!("{base}/topics")).await;
    browser
        .click("form[action$='/topics'] button[type=submit]")
        .await;
    assert!(browser.text().await.contains("The topic was not created"));
    browser.check_screen("topics-error").await;
    browser.fill("#topic-name", "Product news").await;
    browser
        .fill("#topic-description", "New things, monthly")
        .await;
    browser
        .click("form[action$='/topics'] button[type=submit]")
        .await;
    assert!(browser.text().await.contains("New things, monthly"));
    assert_eq!(topic_count().await, starting + 1);
    browser.check_screen("topics").await;
    let link = |name: &'static str| {
        format!(
            "return [...document.querySelectorAll('table a')].find(a => a.textContent === '{name}').href;"
        )
    };
    let href = browser
        .client
        .execute(&link("Product news"), vec![])
        .await
        .expect("link");
    browser.goto(href.as_str().expect("href")).await;
    browser.check_screen("topic").await;
    browser
        .find("#topic-name")
        .await
        .clear()
        .await
        .expect("clear");
    browser.fill("#topic-name", "Releases").await;
    browser
        .click("form[action*='/topics/'] button[type=submit]")
        .await;
    assert!(browser.text().await.contains("Releases"));
    assert!(!browser.text().await.contains("Product news"));
    let href = browser
        .client
        .execute(&link("Releases"), vec![])
        .await
        .expect("link");
    browser.goto(href.as_str().expect("href")).await;
    browser.click("form[action$='/delete'] button").await;
    assert_ne!(
        topic_count().await,
        starting,
        "nothing goes on the first click"
    );
    browser.confirm("Releases").await;
    assert!(browser.text().await.contains("was deleted"));
    assert_eq!(browser.count("nav[aria-label='This account']").await, 1);
    assert_eq!(topic_count().await, starting);

    // Automations: created with the dashboard's template, edited to wait three days.
    browser.goto(&format!("{base}/automations/new")).await;
    browser.check_screen("automation-new").await;
    browser.fill("#automation-name", "Welcome").await;
    browser
        .find("#automation-template option:nth-child(2)")
        .await
        .click()
        .await
        .expect("template");
    browser.fill("#automation-event", "signed_up").await;
    browser
        .find("#automation-timing option[value=x_days_after]")
        .await
        .click()
        .await
        .expect("timing");
    browser
        .click("form[action$='/automations'] button[type=submit]")
        .await;
    // No days given: the use case's error, the form kept.
    assert!(browser
        .text()
        .await
        .contains("The automation was not saved"));
    assert_eq!(
        browser
            .find("#automation-name")
            .await
            .prop("value")
            .await
            .expect("value")
            .as_deref(),
        Some("Welcome")
    );
    browser.check_screen("automation-error").await;
    browser.fill("#automation-days", "3").await;
    browser
        .click("form[action$='/automations'] button[type=submit]")
        .await;
    assert!(browser.text().await.contains("3 days after"));
    browser.check_screen("automations").await;
    let welcome = || async {
        let automations: serde_json::Value = app
            .get(&format!("/v2/accounts/{account}/automations"), &token)
            .await
            .json()
            .await
            .expect("json");
        automations["items"]
            .as_array()
            .expect("automations")
            .iter()
            .find(|automation| automation["name"] == "Welcome")
            .cloned()
    };
    let created = welcome().await.expect("the automation");
    assert_eq!(created["timingValue"], 3, "{created}");
    assert_eq!(created["triggerEventSlug"], "signed_up");
    let href = browser
        .client
        .execute(&link("Welcome"), vec![])
        .await
        .expect("link");
    browser.goto(href.as_str().expect("href")).await;
    browser
        .find("#automation-enabled")
        .await
        .click()
        .await
        .expect("untick");
    browser
        .click("form[action*='/automations/'] button[type=submit]")
        .await;
    let edited = welcome().await.expect("the automation");
    assert_eq!(edited["isEnabled"], false, "{edited}");
    let href = browser
        .client
        .execute(&link("Welcome"), vec![])
        .await
        .expect("link");
    browser.goto(href.as_str().expect("href")).await;
    browser.click("form[action$='/delete'] button").await;
    assert!(welcome().await.is_some(), "nothing goes on the first click");
    // Cancel leads back to the automation, which is still there.
    browser.click("main a[href*='/automations/']").await;
    assert!(browser.text().await.contains("Welcome"));
    browser.click("form[action$='/delete'] button").await;
    browser.confirm("Welcome").await;
    assert!(browser.text().await.contains("was deleted"));
    assert_eq!(browser.count("nav[aria-label='This account']").await, 1);
    assert!(welcome().await.is_none());
    browser.close().await;
}

#[tokio::test]
async fn a_segment_is_saved_from_the_builder_listed_with_its_count_and_deleted() {
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    for (email, plan) in [
        ("a@example.org", "pro"),
        ("b@example.org", "pro"),
        ("c@example.org", "free"),
    ] {
        let response = app
            .send_json(
                reqwest::Method::POST,
                &format!("/v2/accounts/{account}/contacts"),
                &token,
                &serde_json::json!({"email": email, "attributes": {"plan": plan}}),
            )
            .await;
        assert_eq!(response.status(), 200, "contact");
    }
    let segments = || async {
        let list: serde_json::Value = app
            .get(&format!("/v2/accounts/{account}/segments"), &token)
            .await
            .json()
            .await
            .expect("json");
        list["items"].as_array().expect("items").clone()
    };
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);

    // The builder's conditions, offered for saving with a summary of what is saved.
    browser.goto(&format!("{base}/contacts/segment")).await;
    browser.fill("#c0-slug", "plan").await;
    browser
        .find("#c0-operator option[value=s_equal]")
        .await
        .click()
        .await
        .expect("operator");
    browser.fill("#c0-value", "pro").await;
    browser.click("button[name=save]").await;
    let card = browser
        .find("[data-testid=save-segment]")
        .await
        .text()
        .await
        .expect("text");
    assert!(card.contains("plan is “pro”"), "{card}");
    // Drawn again, the row of a text attribute offers the text operators and the two for
    // any type; a row without an attribute offers every operator, grouped by type.
    assert_eq!(browser.count("#c0-operator option[value=s_equal]").await, 1);
    assert_eq!(browser.count("#c0-operator option[value=exists]").await, 1);
    assert_eq!(
        browser
            .count("#c0-operator option[value=greater_than]")
            .await,
        0
    );
    assert_eq!(
        browser
            .count("#c0-operator option[value=within_days]")
            .await,
        0
    );
    assert_eq!(browser.count("#c1-operator optgroup").await, 6);
    assert_eq!(
        browser
            .count("#c1-operator optgroup[label=Number] option[value=greater_than]")
            .await,
        1
    );
    browser.check_screen("segment-save").await;
    // No name: the card says why, the conditions are kept, nothing is saved.
    browser
        .click("#save-segment-form button[type=submit]")
        .await;
    assert!(browser.text().await.contains("The segment was not saved"));
    assert!(segments().await.is_empty());
    browser.fill("#segment-name", "Pros").await;
    browser
        .click("#save-segment-form button[type=submit]")
        .await;
    assert_eq!(
        browser.path().await,
        format!("/console/accounts/{account}/segments")
    );
    let saved = segments().await;
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0]["name"], "Pros");
    assert_eq!(
        saved[0]["attributes"],
        serde_json::json!([{"slug": "plan", "operator": "s_equal", "value": "pro"}])
    );
    // The list: the name, the live count (the API's), reached from the navigation.
    let count: serde_json::Value = app
        .get(
            &format!(
                "/v2/accounts/{account}/segments/{}/count",
                saved[0]["_id"].as_str().expect("id")
            ),
            &token,
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(count["count"], 2);
    assert_eq!(
        browser
            .find("[data-testid=segment-row-count]")
            .await
            .text()
            .await
            .expect("text"),
        "2"
    );
    assert!(browser.text().await.contains("Saved."));
    assert_eq!(
        attribute(&browser, ".account-nav a[aria-current=page]", "href")
            .await
            .as_deref(),
        Some(format!("/console/accounts/{account}/segments").as_str())
    );
    browser.check_screen("segments").await;
    // The name opens the builder with the definition filled in and counted.
    browser.click("[data-testid=segment-row] a").await;
    assert_eq!(
        browser
            .find("[data-testid=segment-count-value]")
            .await
            .text()
            .await
            .expect("text"),
        "2"
    );
    // A second segment of the same name, in other letters' case, is refused.
    browser.click("button[name=save]").await;
    browser.fill("#segment-name", "PROS").await;
    browser
        .click("#save-segment-form button[type=submit]")
        .await;
    assert!(browser.text().await.contains("already the name"));
    assert_eq!(segments().await.len(), 1);

    // Delete from the list.
    browser.goto(&format!("{base}/segments")).await;
    browser.click("form[action$='/delete'] button").await;
    assert_eq!(segments().await.len(), 1, "nothing goes on the first click");
    browser.confirm("Pros").await;
    assert!(browser.text().await.contains("No saved segments yet"));
    assert!(segments().await.is_empty());
    browser.close().await;
}

#[tokio::test]
async fn subscribe_forms_are_listed_with_their_hosted_pages() {
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);
    browser.goto(&format!("{base}/forms")).await;
    assert!(browser.text().await.contains("No subscribe forms yet."));
    let topics: serde_json::Value = app
        .get(&format!("/v2/accounts/{account}/topics"), &token)
        .await
        .json()
        .await
        .expect("json");
    let form: serde_json::Value = app
        .send_json(
            reqwest::Method::POST,
            &format!("/v2/accounts/{account}/forms"),
            &token,
            &serde_json::json!({"name": "Newsletter sign-up", "attributes": ["first_name"],
                                "topicIds": [topics["items"][0]["_id"]]}),
        )
        .await
        .json()
        .await
        .expect("form");
    browser.goto(&format!("{base}/forms")).await;
    let text = browser.text().await;
    assert!(text.contains("Newsletter sign-up"), "{text}");
    assert!(text.contains("first_name"), "{text}");
    browser.check_screen("forms").await;
    browser.click("table a[href^='/f/']").await;
    assert_eq!(
        browser.path().await,
        format!("/f/{}", form["formKey"].as_str().expect("form key"))
    );
    assert!(browser.text().await.contains("Subscribe to Ada's shop"));
    browser.close().await;
}

#[tokio::test]
async fn the_builder_offers_engagement_conditions_and_counts_them() {
    let app = app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Ada's shop").await;
    for email in ["a@example.org", "b@example.org"] {
        let response = app
            .send_json(
                reqwest::Method::POST,
                &format!("/v2/accounts/{account}/contacts"),
                &token,
                &serde_json::json!({"email": email}),
            )
            .await;
        assert_eq!(response.status(), 200, "contact");
    }
    let browser = Browser::start().await;
    sign_in_with_token(&browser, &app, &token).await;
    let base = format!("{}/console/accounts/{account}", app.address);
    browser.goto(&format!("{base}/contacts/segment")).await;
    let offered = browser
        .find("#attribute-slugs")
        .await
        .html(false)
        .await
        .expect("datalist");
    assert!(offered.contains("engagement.opened"), "{offered}");
    // Operators read as words; the form still sends their names.
    let words = browser
        .find("#c0-operator option[value=not_within_days]")
        .await
        .text()
        .await
        .expect("option");
    assert_eq!(words, "did not happen in the last … days");

    // Nobody has been mailed: "not sent in 30 days" is everyone, "sent" no one.
    let builder = format!("{base}/contacts/segment");
    let ask = |operator: &'static str, value: &'static str| {
        let (browser, builder) = (&browser, &builder);
        async move {
            // A fresh builder each time: filling adds to what a field holds.
            browser.goto(builder).await;
            browser.fill("#c0-slug", "engagement.sent").await;
            browser
                .find(&format!("#c0-operator option[value={operator}]"))
                .await
                .click()
                .await
                .expect("operator");
            browser.fill("#c0-value", value).await;
            browser.click("button[name=count]").await;
        }
    };
    let counted = || async {
        browser
            .find("[data-testid=segment-count-value]")
            .await
            .text()
            .await
            .expect("count")
    };
    ask("not_within_days", "30").await;
    assert_eq!(counted().await, "2");
    ask("within_days", "30").await;
    assert_eq!(counted().await, "0");
    // A window on a template the account does not have is explained, not counted.
    ask(
        "within_days",
        r#"{"days": 7, "templateId": "0190a000-0000-7000-8000-000000000001"}"#,
    )
    .await;
    let page = browser.text().await;
    assert!(
        page.contains("templateId must be the id of a template of this account"),
        "{page}"
    );
    assert_eq!(browser.count("[data-testid=segment-count-value]").await, 0);
}
