//! The unsubscribe link end to end: `List-Unsubscribe` on announcement and automation mail
//! (and not on transactional mail), the page, the RFC 8058 one-click post and the topic
//! form, each change counted and reported once.

use mailroom_domain::message::MessageKind;
use mailroom_server::announcement_worker::AnnouncementWorker;
use mailroom_tests::{expect_json, expect_problem};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::tracking::{links, LinkSetup, PUBLIC_URL};

const ONE_CLICK: &str = "List-Unsubscribe=One-Click";
const FORM: &str = "application/x-www-form-urlencoded";

/// Queues one message of `kind` to grace@example.org the way production does: an
/// announcement to the whole audience, expanded by its worker, or an automation fired by
/// an event.
async fn queue_by(setup: &LinkSetup, kind: MessageKind, template: &str) {
    match kind {
        MessageKind::Announcement => {
            setup
                .post(
                    "/announcements",
                    &json!({"name": "Launch", "templateId": template, "includeUnsubscribed": false}),
                )
                .await;
            let worker = AnnouncementWorker::new(setup.app.services.clone(), 100);
            while worker
                .run_once()
                .await
                .expect("announcement round")
                .expanded
                .is_some()
            {}
        }
        MessageKind::Automation => {
            setup
                .post(
                    "/automations",
                    &json!({"name": "Welcome", "templateId": template,
                            "triggerEventSlug": "signed_up", "triggerEventCondition": "once",
                            "timingCondition": "immediately", "isEnabled": true}),
                )
                .await;
            setup
                .post(
                    "/events",
                    &json!({"email": "grace@example.org", "slug": "signed_up"}),
                )
                .await;
        }
        MessageKind::Transactional => unreachable!("sent through POST …/messages"),
    }
}

/// The value of header `name` in a raw message, unfolded.
fn header(mail: &str, name: &str) -> Option<String> {
    let head = mail.split("\r\n\r\n").next().unwrap_or_default();
    let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
    unfolded.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().to_owned())
    })
}

struct Unsubscribing {
    setup: LinkSetup,
    template: String,
    news: String,
    offers: String,
    contact: String,
    /// The unsubscribe URL of the transactional message.
    url: String,
}

impl Unsubscribing {
    async fn new() -> Self {
        let setup = LinkSetup::new().await;
        let template = setup
            .post(
                "/templates",
                &json!({
                    "name": "News", "slug": "news", "subject": "News",
                    "content": "<p>News</p><a href=\"{{ unsubscribe_url }}\">Unsubscribe</a>",
                    "textContent": "Preferences: {{ preferences_url }}"
                }),
            )
            .await["_id"]
            .as_str()
            .expect("template id")
            .to_owned();
        let topics = setup.get_json("/topics").await;
        for starter in topics["items"].as_array().expect("topics") {
            let path = setup.path(&format!("/topics/{}", starter["_id"].as_str().unwrap()));
            setup
                .app
                .request(Method::DELETE, &path, Some(&setup.token))
                .send()
                .await
                .expect("sent");
        }
        let news = setup
            .post(
                "/topics",
                &json!({"name": "Product <news>", "description": "New & improved"}),
            )
            .await["_id"]
            .as_str()
            .expect("topic id")
            .to_owned();
        let offers = setup.post("/topics", &json!({"name": "Offers"})).await["_id"]
            .as_str()
            .expect("topic id")
            .to_owned();
        expect_json(
            setup
                .app
                .send_json(
                    Method::PUT,
                    &setup.path("/webhooks"),
                    &setup.token,
                    &json!({"url": "https://127.0.0.1:9/hooks", "authType": "none", "events": ["contact.unsubscribed"]}),
                )
                .await,
            200,
        )
        .await;
        let message = setup.send("news", "grace@example.org", json!({})).await;
        setup.drain().await;
        let mail = setup.received(0);
        let urls = links(&mail, "/u/");
        assert_eq!(urls.len(), 2, "HTML and text both carry it: {mail}");
        assert_eq!(urls[0], urls[1], "preferences_url is the same page");
        Self {
            template,
            news,
            offers,
            contact: message["contactId"].as_str().expect("contact").to_owned(),
            url: urls[0].clone(),
            setup,
        }
    }

    async fn post(&self, url: &str, body: &str) -> Response {
        let path = url.strip_prefix(PUBLIC_URL).expect("public link");
        self.setup
            .raw_client
            .post(format!("{}{path}", self.setup.app.address))
            .header("content-type", FORM)
            .body(body.to_owned())
            .send()
            .await
            .expect("sent")
    }

    async fn contact(&self) -> Value {
        self.setup
            .get_json(&format!("/contacts/{}", self.contact))
            .await
    }

    async fn events(&self) -> Vec<Value> {
        self.setup.get_json("/webhook-events").await["items"]
            .as_array()
            .expect("items")
            .clone()
    }
}

#[tokio::test]
async fn list_unsubscribe_is_on_announcement_and_automation_mail_only() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;
    let transactional = setup.received(0);
    assert_eq!(
        header(&transactional, "List-Unsubscribe"),
        None,
        "{transactional}"
    );
    assert_eq!(header(&transactional, "List-Unsubscribe-Post"), None);
    let mut last_url = String::new();

    for (n, kind) in [MessageKind::Announcement, MessageKind::Automation]
        .into_iter()
        .enumerate()
    {
        queue_by(setup, kind, &subject.template).await;
        setup.drain().await;
        let mail = setup.received(n + 1);
        let list = header(&mail, "List-Unsubscribe").expect("List-Unsubscribe");
        let url = list
            .strip_prefix('<')
            .and_then(|rest| rest.strip_suffix('>'))
            .expect("one <URL>, no mailto unless configured");
        assert!(url.starts_with(&format!("{PUBLIC_URL}/u/")), "{list}");
        assert_eq!(links(&mail, "/u/")[0], url, "the header and the body agree");
        assert_eq!(
            header(&mail, "List-Unsubscribe-Post").as_deref(),
            Some(ONE_CLICK),
            "{kind:?}"
        );
        last_url = url.to_owned();
    }
    // The header's URL is a working one-click target (after which the contact gets no
    // more announcement or automation mail).
    let page = expect_json_free(subject.post(&last_url, ONE_CLICK).await).await;
    assert!(page.contains("unsubscribed from all mail"), "{page}");
    assert_eq!(setup.today().await["unsubscribed"], 1);
}

/// Reads a 200 HTML answer.
async fn expect_json_free(response: Response) -> String {
    let status = response.status();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    let body = response.text().await.expect("body");
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_type, "text/html; charset=utf-8");
    body
}

#[tokio::test]
async fn the_page_lists_topics_and_one_click_unsubscribes_once() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;

    let response = setup.follow(&subject.url).await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["referrer-policy"], "no-referrer");
    let page = expect_json_free(response).await;
    assert!(page.contains("<html lang=\"en\">"), "{page}");
    assert!(page.contains("grace@example.org"), "{page}");
    assert!(page.contains("Product &lt;news&gt;"), "escaped: {page}");
    assert!(page.contains("New &amp; improved"), "{page}");
    assert!(
        page.contains(&format!("value=\"{}\"", subject.news)),
        "{page}"
    );
    assert!(
        page.contains(&format!("value=\"{}\"", subject.offers)),
        "{page}"
    );
    assert_eq!(page.matches("<label for=").count(), 2, "{page}");
    assert!(page.contains("method=\"post\""), "{page}");
    // Looking changes nothing.
    assert!(subject.contact().await["unsubscribeDate"].is_null());

    for _ in 0..2 {
        let page = expect_json_free(subject.post(&subject.url, ONE_CLICK).await).await;
        assert!(page.contains("unsubscribed from all mail"), "{page}");
    }
    let contact = subject.contact().await;
    assert!(contact["unsubscribeDate"].is_string(), "{contact}");
    assert_eq!(setup.today().await["unsubscribed"], 1, "counted once");
    // The address is on the suppression list once, by the link.
    let listed = setup.get_json("/suppressions").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["items"][0]["email"], "grace@example.org");
    assert_eq!(listed["items"][0]["reason"], "unsubscribe");
    assert_eq!(listed["items"][0]["source"], "unsubscribe_link");
    let events = subject.events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "contact.unsubscribed");
    assert_eq!(events[0]["payload"]["contactId"], subject.contact.as_str());
    assert_eq!(events[0]["payload"]["email"], "grace@example.org");
    assert!(
        events[0]["payload"].get("topicId").is_none(),
        "{}",
        events[0]
    );

    // A body in another encoding (RFC 8058 allows multipart) is a one-click too, and
    // still changes nothing the second time.
    let path = subject.url.strip_prefix(PUBLIC_URL).unwrap();
    let response = setup
        .raw_client
        .post(format!("{}{path}", setup.app.address))
        .header("content-type", "multipart/form-data; boundary=x")
        .body("--x\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--x--\r\n")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    assert_eq!(setup.today().await["unsubscribed"], 1);
    assert_eq!(subject.events().await.len(), 1);
}

#[tokio::test]
async fn the_topic_form_unsubscribes_from_the_ticked_topics_only() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;
    let body = format!("action=topics&topic={}", subject.news);
    for _ in 0..2 {
        let page = expect_json_free(subject.post(&subject.url, &body).await).await;
        assert!(
            page.contains("Product &lt;news&gt; (unsubscribed)"),
            "{page}"
        );
        assert!(page.contains("checked disabled"), "{page}");
    }
    let contact = subject.contact().await;
    assert_eq!(contact["topicUnsubscriptions"], json!([subject.news]));
    assert!(contact["unsubscribeDate"].is_null(), "{contact}");
    assert_eq!(setup.today().await["unsubscribed"], 1);
    let events = subject.events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["topicId"], subject.news.as_str());

    // Bad forms: no topic, a topic of nobody, not an id.
    for bad in [
        "action=topics".to_owned(),
        "action=topics&topic=01936c5e-7b2a-7cde-8f00-0123456789ab".to_owned(),
        "action=topics&topic=nope".to_owned(),
    ] {
        expect_problem(subject.post(&subject.url, &bad).await, 400).await;
    }
    assert_eq!(setup.today().await["unsubscribed"], 1);

    // The page's "all" button.
    let page = expect_json_free(subject.post(&subject.url, "action=all").await).await;
    assert!(page.contains("unsubscribed from all mail"), "{page}");
    assert_eq!(setup.today().await["unsubscribed"], 2);
    assert_eq!(subject.events().await.len(), 2);
}

#[tokio::test]
async fn forged_unsubscribe_tokens_are_404_and_change_nothing() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;
    let (base, token) = subject.url.rsplit_once('/').unwrap();
    // Flip one character of the tag.
    let last = token.chars().last().unwrap();
    let flipped = format!(
        "{base}/{}{}",
        &token[..token.len() - 1],
        if last == 'A' { 'B' } else { 'A' }
    );
    expect_problem(setup.follow(&flipped).await, 404).await;
    expect_problem(subject.post(&flipped, ONE_CLICK).await, 404).await;
    expect_problem(setup.follow(&format!("{PUBLIC_URL}/u/garbage")).await, 404).await;
    // An unsubscribe token is no click token.
    expect_problem(
        setup.follow(&subject.url.replace("/u/", "/t/c/")).await,
        404,
    )
    .await;
    assert!(subject.contact().await["unsubscribeDate"].is_null());
    assert_eq!(setup.today().await["unsubscribed"], 0);
    assert!(subject.events().await.is_empty());
}

/// What a browser sends: HTML first.
const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// Requests `path` of the app as a browser reading `language` would.
async fn as_browser(setup: &LinkSetup, method: Method, url: &str, body: &str) -> Response {
    let path = url.strip_prefix(PUBLIC_URL).expect("public link");
    setup
        .raw_client
        .request(method, format!("{}{path}", setup.app.address))
        .header("accept", BROWSER_ACCEPT)
        .header("accept-language", "es-ES,es;q=0.9")
        .header("content-type", FORM)
        .body(body.to_owned())
        .send()
        .await
        .expect("sent")
}

#[tokio::test]
async fn a_browser_gets_a_page_in_its_language_for_a_link_that_cannot_be_served() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;
    let forged = format!("{PUBLIC_URL}/u/garbage");
    let click = subject.url.replace("/u/", "/t/c/");
    for (method, url, body, status, heading) in [
        (
            Method::GET,
            forged.as_str(),
            "",
            404,
            "Este enlace no es válido",
        ),
        (
            Method::POST,
            forged.as_str(),
            ONE_CLICK,
            404,
            "Este enlace no es válido",
        ),
        (
            Method::GET,
            click.as_str(),
            "",
            404,
            "Este enlace no es válido",
        ),
        (
            Method::POST,
            subject.url.as_str(),
            "action=topics&topic=nope",
            400,
            "No se pudo leer esta solicitud",
        ),
    ] {
        let response = as_browser(setup, method.clone(), url, body).await;
        assert_eq!(response.status(), status, "{method} {url}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(content_type.starts_with("text/html"), "{content_type}");
        assert_eq!(response.headers()["content-language"], "es");
        let page = response.text().await.unwrap();
        assert!(page.contains("<html lang=\"es\">"), "{page}");
        assert!(page.contains(&format!("<h1>{heading}</h1>")), "{page}");
    }
    // The good link still answers the page itself, and an API client keeps its problem.
    let page = as_browser(setup, Method::GET, &subject.url, "").await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Preferencias"));
    expect_problem(setup.follow(&forged).await, 404).await;
    assert!(subject.contact().await["unsubscribeDate"].is_null());
}

#[tokio::test]
async fn a_topic_form_naming_10000_topics_is_a_400_and_a_repeated_topic_is_written_once() {
    let subject = Unsubscribing::new().await;
    let setup = &subject.setup;
    // 10,000 copies of one topic (about 400 KB), where the account has two topics.
    let mut body = "action=topics".to_owned();
    for _ in 0..10_000 {
        body.push_str("&topic=");
        body.push_str(&subject.news);
    }
    let started = std::time::Instant::now();
    let problem = expect_problem(subject.post(&subject.url, &body).await, 400).await;
    let took = started.elapsed();
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("names 10000 topics; the account has 2")),
        "{problem}"
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    let contact = subject.contact().await;
    assert_eq!(contact["topicUnsubscriptions"], json!([]), "{contact}");
    assert_eq!(setup.today().await["unsubscribed"], 0);
    assert!(subject.events().await.is_empty());

    // The same topic twice (no more than the account's two): one unsubscription.
    let twice = format!("action=topics&topic={0}&topic={0}", subject.news);
    let page = expect_json_free(subject.post(&subject.url, &twice).await).await;
    assert!(
        page.contains("Product &lt;news&gt; (unsubscribed)"),
        "{page}"
    );
    let contact = subject.contact().await;
    assert_eq!(contact["topicUnsubscriptions"], json!([subject.news]));
    assert_eq!(setup.today().await["unsubscribed"], 1);
    assert_eq!(subject.events().await.len(), 1);

    // Both topics, one already unsubscribed: only the other is new.
    let both = format!(
        "action=topics&topic={}&topic={}",
        subject.news, subject.offers
    );
    expect_json_free(subject.post(&subject.url, &both).await).await;
    let contact = subject.contact().await;
    let mut unsubscribed: Vec<String> = contact["topicUnsubscriptions"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|topic| topic.as_str().expect("an id").to_owned())
        .collect();
    unsubscribed.sort();
    let mut expected = vec![subject.news.clone(), subject.offers.clone()];
    expected.sort();
    assert_eq!(unsubscribed, expected);
    assert_eq!(setup.today().await["unsubscribed"], 2);
    assert_eq!(subject.events().await.len(), 2);
}
