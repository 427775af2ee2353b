//! Subscribe forms end to end: the forms of an account through `/v2`, the hosted page and
//! its posts at `/f/{formKey}`, double opt-in with its confirmation mail and link, the
//! bot defences, and what a pending, a suppressed and a subscribed address receive.

use mailroom_server::announcement_worker::AnnouncementWorker;
use mailroom_tests::{expect_json, expect_problem};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::tracking::{LinkSetup, PUBLIC_URL};

const URLENCODED: &str = "application/x-www-form-urlencoded";

struct Forms {
    setup: LinkSetup,
    /// The confirmation template.
    confirm: String,
    /// A topic of the account.
    topic: String,
}

impl Forms {
    async fn new() -> Self {
        let setup = LinkSetup::new().await;
        let confirm = setup
            .post(
                "/templates",
                &json!({
                    "name": "Confirm", "slug": "confirm", "subject": "Confirm, {{ first_name }}",
                    "content": "<p>Please confirm</p><a href=\"{{ confirm_url }}\">Confirm</a>",
                    "textContent": "Confirm: {{ confirm_url }}"
                }),
            )
            .await["_id"]
            .as_str()
            .expect("template id")
            .to_owned();
        setup
            .post(
                "/templates",
                &json!({"name": "News", "slug": "news", "subject": "News", "content": "<p>News</p>"}),
            )
            .await;
        let topic = setup.get_json("/topics").await["items"][0]["_id"]
            .as_str()
            .expect("starter topic")
            .to_owned();
        Self {
            setup,
            confirm,
            topic,
        }
    }

    /// Creates a form and answers it.
    async fn form(&self, body: Value) -> Value {
        self.setup.post("/forms", &body).await
    }

    /// A double opt-in form of the starter topic accepting `first_name`.
    async fn double_opt_in(&self) -> Value {
        self.form(json!({
            "name": "Newsletter", "topicIds": [self.topic], "attributes": ["first_name"],
            "doubleOptIn": true, "confirmationTemplateId": self.confirm
        }))
        .await
    }

    fn public(&self, path: &str) -> String {
        format!("{}{path}", self.setup.app.address)
    }

    async fn post_json(&self, form: &Value, body: &Value) -> Response {
        self.setup
            .raw_client
            .post(self.public(&format!("/f/{}", key(form))))
            .json(body)
            .send()
            .await
            .expect("sent")
    }

    async fn post_form(&self, form: &Value, body: &str) -> Response {
        self.setup
            .raw_client
            .post(self.public(&format!("/f/{}", key(form))))
            .header("content-type", URLENCODED)
            .body(body.to_owned())
            .send()
            .await
            .expect("sent")
    }

    async fn get_page(&self, path: &str) -> Response {
        self.setup
            .raw_client
            .get(self.public(path))
            .header("accept-language", "de")
            .send()
            .await
            .expect("sent")
    }

    /// The contact of `email`, if any.
    async fn contact(&self, email: &str) -> Option<Value> {
        let list = self
            .setup
            .get_json(&format!("/contacts?email={email}"))
            .await;
        let id = list["items"].as_array()?.first()?["_id"]
            .as_str()?
            .to_owned();
        Some(self.setup.get_json(&format!("/contacts/{id}")).await)
    }

    async fn contact_count(&self) -> u64 {
        self.setup.get_json("/contacts/count").await["count"]
            .as_u64()
            .expect("count")
    }

    /// The messages to `email`, oldest first.
    async fn messages_to(&self, email: &str) -> Vec<Value> {
        let page = self.setup.get_json("/messages?limit=100").await;
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|message| message["email"] == email)
            .cloned()
            .collect()
    }

    fn mails_to(&self, email: &str) -> Vec<String> {
        self.setup
            .smtp
            .messages()
            .into_iter()
            .filter(|message| message.recipients.iter().any(|to| to == email))
            .map(|message| message.data)
            .collect()
    }

    /// The confirmation link in the `n`th mail to `email`.
    fn confirm_link(&self, email: &str, n: usize) -> String {
        let mails = self.mails_to(email);
        let mail = mails.get(n).expect("the confirmation mail");
        let mail = mail
            .replace("=\r\n", "")
            .replace("=3D", "=")
            .replace("&#x2f;", "/");
        let prefix = format!("{PUBLIC_URL}/f/");
        let at = mail.find(&prefix).expect("a confirmation link");
        let path: String = mail[at + PUBLIC_URL.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/'))
            .collect();
        assert!(path.contains("/confirm/"), "{path}");
        path
    }

    async fn confirm(&self, path: &str) -> Response {
        self.setup
            .raw_client
            .post(self.public(path))
            .send()
            .await
            .expect("sent")
    }

    /// The hosted page's time token.
    async fn time_token(&self, form: &Value) -> String {
        let page = self.get_page(&format!("/f/{}", key(form))).await;
        assert_eq!(page.status(), 200);
        let html = page.text().await.expect("html");
        let marker = "name=\"form-token\" value=\"";
        let at = html.find(marker).expect("the time token field") + marker.len();
        html[at..].split('"').next().expect("token").to_owned()
    }

    fn wait(&self, seconds: i64) {
        self.setup
            .app
            .clock
            .advance(time::Duration::seconds(seconds));
    }
}

fn key(form: &Value) -> String {
    form["formKey"].as_str().expect("formKey").to_owned()
}

#[tokio::test]
async fn forms_are_validated_bounded_and_kept_to_their_account() {
    let forms = Forms::new().await;
    let setup = &forms.setup;
    let create = |body: Value| async move {
        setup
            .app
            .send_json(Method::POST, &setup.path("/forms"), &setup.token, &body)
            .await
    };
    for (body, field) in [
        (json!({}), "name"),
        (json!({"name": "  "}), "name"),
        (
            json!({"name": "N", "doubleOptIn": true}),
            "confirmationTemplateId",
        ),
        (
            json!({"name": "N", "confirmationTemplateId": "01936c5e-7b2a-7cde-8f00-0123456789ab"}),
            "confirmationTemplateId",
        ),
        (
            json!({"name": "N", "topicIds": ["01936c5e-7b2a-7cde-8f00-0123456789ab"]}),
            "topicIds[0]",
        ),
        (json!({"name": "N", "topicIds": ["nope"]}), "topicIds[0]"),
        (
            json!({"name": "N", "attributes": (0..21).map(|i| format!("a{i}")).collect::<Vec<_>>()}),
            "attributes",
        ),
        (
            json!({"name": "N", "attributes": ["email"]}),
            "attributes[0]",
        ),
        (
            json!({"name": "N", "successRedirectUrl": "javascript:alert(1)"}),
            "successRedirectUrl",
        ),
        (
            json!({"name": "N", "confirmationRedirectUrl": "https://user@evil.example/"}),
            "confirmationRedirectUrl",
        ),
        (json!({"name": "N", "colour": "red"}), "colour"),
    ] {
        let problem = expect_problem(create(body.clone()).await, 400).await;
        assert!(
            problem["errors"]
                .as_array()
                .expect("errors")
                .iter()
                .any(|error| error["field"] == field)
                || problem["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(field),
            "{body}: {problem}"
        );
    }

    let form = forms.double_opt_in().await;
    assert_eq!(form["doubleOptIn"], true);
    assert_eq!(form["attributes"], json!(["first_name"]));
    assert_eq!(form["formKey"].as_str().expect("key").len(), 43);
    let id = form["_id"].as_str().expect("id").to_owned();
    assert_eq!(setup.get_json(&format!("/forms/{id}")).await, form);
    assert_eq!(setup.get_json("/forms/count").await["count"], 1);
    assert_eq!(setup.get_json("/forms").await["items"][0], form);

    let patch = |body: Value| {
        let path = setup.path(&format!("/forms/{id}"));
        async move {
            setup
                .app
                .send_json(Method::PATCH, &path, &setup.token, &body)
                .await
        }
    };
    expect_problem(patch(json!({})).await, 400).await;
    expect_problem(patch(json!({"name": null})).await, 400).await;
    let problem = expect_problem(patch(json!({"confirmationTemplateId": null})).await, 400).await;
    assert_eq!(problem["errors"][0]["field"], "confirmationTemplateId");
    let patched = expect_json(
        patch(json!({"doubleOptIn": false, "confirmationTemplateId": null,
                     "successRedirectUrl": "https://acme.example/thanks"}))
        .await,
        200,
    )
    .await;
    assert_eq!(patched["doubleOptIn"], false);
    assert!(patched.get("confirmationTemplateId").is_none(), "{patched}");
    assert_eq!(patched["successRedirectUrl"], "https://acme.example/thanks");
    assert_eq!(patched["name"], "Newsletter", "omitted fields stay");

    // The template of a form's confirmation mail cannot be deleted from under it.
    let second = forms.double_opt_in().await;
    let refused = setup
        .app
        .request(
            Method::DELETE,
            &setup.path(&format!("/templates/{}", forms.confirm)),
            Some(&setup.token),
        )
        .send()
        .await
        .expect("sent");
    let problem = expect_problem(refused, 400).await;
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("Newsletter"),
        "{problem}"
    );

    // Another account sees none of it: its own path answers 404, this account's 401.
    let other_token = setup.app.user_token("mallory@example.com").await;
    let other = setup.app.create_account(&other_token, "Other").await;
    let foreign = setup
        .app
        .get(&format!("/v2/accounts/{other}/forms/{id}"), &other_token)
        .await;
    expect_problem(foreign, 404).await;
    let trespass = setup
        .app
        .get(&setup.path(&format!("/forms/{id}")), &other_token)
        .await;
    expect_problem(trespass, 401).await;
    let foreign_delete = setup
        .app
        .request(
            Method::DELETE,
            &format!("/v2/accounts/{other}/forms/{id}"),
            Some(&other_token),
        )
        .send()
        .await
        .expect("sent");
    expect_problem(foreign_delete, 404).await;

    // Deleting answers the form; then it is gone, and so is its hosted page.
    let delete = setup
        .app
        .request(
            Method::DELETE,
            &setup.path(&format!("/forms/{}", second["_id"].as_str().expect("id"))),
            Some(&setup.token),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(expect_json(delete, 200).await["_id"], second["_id"]);
    expect_problem(forms.get_page(&format!("/f/{}", key(&second))).await, 404).await;

    // At most 50 forms per account.
    for n in 1..50 {
        forms.form(json!({"name": format!("Form {n}")})).await;
    }
    let problem = expect_problem(create(json!({"name": "One too many"})).await, 400).await;
    assert!(
        problem["detail"].as_str().expect("detail").contains("50"),
        "{problem}"
    );
    assert_eq!(setup.get_json("/forms/count").await["count"], 50);
}

#[tokio::test]
async fn the_hosted_page_is_branded_translated_and_carries_its_token() {
    let forms = Forms::new().await;
    let form = forms.double_opt_in().await;
    let page = forms.get_page(&format!("/f/{}", key(&form))).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-language"], "de");
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .expect("policy")
        .to_owned();
    assert!(policy.contains("form-action 'self'"), "{policy}");
    let html = page.text().await.expect("html");
    assert!(html.contains("<html lang=\"de\">"), "{html}");
    assert!(html.contains("Acme abonnieren"), "{html}");
    assert!(html.contains("name=\"first_name\""), "{html}");
    assert!(html.contains("name=\"website-url\""), "the honeypot");
    assert!(html.contains("name=\"form-token\""), "the time token");
    assert!(html.contains("Newsletter"), "the topic's name: {html}");
    for unknown in ["/f/nope", &format!("/f/{}", "A".repeat(43))] {
        expect_problem(forms.get_page(unknown).await, 404).await;
    }
}

#[tokio::test]
async fn a_double_opt_in_contact_receives_only_its_confirmation_until_it_confirms() {
    let forms = Forms::new().await;
    let setup = &forms.setup;
    let form = forms.double_opt_in().await;
    expect_json(
        setup
            .app
            .send_json(
                Method::PUT,
                &setup.path("/webhooks"),
                &setup.token,
                &json!({"url": "https://127.0.0.1:9/hooks", "authType": "none",
                        "events": ["contact.subscribed"]}),
            )
            .await,
        200,
    )
    .await;
    let answer = forms
        .post_json(
            &form,
            &json!({"email": "grace@example.org", "first_name": "Grace"}),
        )
        .await;
    assert_eq!(
        expect_json(answer, 200).await,
        json!({"status": "pending_confirmation"})
    );
    let contact = forms.contact("grace@example.org").await.expect("created");
    assert!(contact["pendingSince"].is_string(), "{contact}");
    assert!(contact.get("confirmedAt").is_none(), "{contact}");
    assert!(
        contact["attributes"].get("first_name").is_none(),
        "written only once confirmed: {contact}"
    );

    // While pending: a transactional send is skipped with its reason, an announcement
    // leaves the contact out, and only the confirmation arrives.
    setup.send("news", "grace@example.org", json!({})).await;
    setup
        .post(
            "/announcements",
            &json!({"name": "Launch", "templateId": setup.get_json("/templates").await["items"]
                .as_array().expect("templates").iter()
                .find(|t| t["slug"] == "news").expect("news")["_id"], "includeUnsubscribed": true}),
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
    setup.drain().await;
    let messages = forms.messages_to("grace@example.org").await;
    assert_eq!(
        messages.len(),
        2,
        "the confirmation and the send: {messages:?}"
    );
    assert_eq!(messages[0]["formId"], form["_id"]);
    assert_eq!(messages[0]["status"], "sent");
    assert_eq!(messages[1]["status"], "skipped");
    assert_eq!(messages[1]["skipReason"], "pending_confirmation");
    assert!(
        messages.iter().all(|m| m.get("announcementId").is_none()),
        "the announcement's audience leaves a pending contact out"
    );
    let mails = forms.mails_to("grace@example.org");
    assert_eq!(mails.len(), 1);
    assert!(mails[0].contains("Confirm, Grace"), "{}", mails[0]);

    // A forged link is refused; the link's page changes nothing.
    let link = forms.confirm_link("grace@example.org", 0);
    let mut forged = link.clone();
    let last = forged.pop().expect("a character");
    forged.push(if last == 'A' { 'B' } else { 'A' });
    expect_problem(forms.confirm(&forged).await, 404).await;
    expect_problem(forms.get_page(&forged).await, 404).await;
    let page = forms.get_page(&link).await;
    assert_eq!(page.status(), 200);
    assert!(page
        .text()
        .await
        .expect("html")
        .contains("<form method=\"post\">"));
    assert!(forms.contact("grace@example.org").await.expect("contact")["pendingSince"].is_string());

    // Following it subscribes the contact once.
    let confirmed = forms.confirm(&link).await;
    assert_eq!(confirmed.status(), 200);
    let html = confirmed.text().await.expect("html");
    assert!(html.contains("Your subscription is confirmed."), "{html}");
    let contact = forms.contact("grace@example.org").await.expect("contact");
    assert!(contact.get("pendingSince").is_none(), "{contact}");
    let confirmed_at = contact["confirmedAt"].clone();
    assert!(confirmed_at.is_string(), "{contact}");
    assert_eq!(contact["attributes"]["first_name"], "Grace");
    forms.wait(60);
    let again = forms.confirm(&link).await;
    assert_eq!(again.status(), 200);
    assert!(again
        .text()
        .await
        .expect("html")
        .contains("already confirmed"));
    let contact = forms.contact("grace@example.org").await.expect("contact");
    assert_eq!(contact["confirmedAt"], confirmed_at, "not confirmed again");
    // One `contact.subscribed`, for the confirmation, naming the form.
    let events = setup.get_json("/webhook-events").await;
    let events = events["items"].as_array().expect("items");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "contact.subscribed");
    assert_eq!(events[0]["payload"]["formId"], form["_id"]);
    assert_eq!(events[0]["payload"]["email"], "grace@example.org");

    // Now mail reaches it.
    setup.send("news", "grace@example.org", json!({})).await;
    setup.drain().await;
    assert_eq!(forms.mails_to("grace@example.org").len(), 2);

    // A link past its week is refused.
    forms
        .post_json(&form, &json!({"email": "late@example.org"}))
        .await;
    setup.drain().await;
    let late = forms.confirm_link("late@example.org", 0);
    forms.wait(8 * 24 * 3600);
    let expired = expect_problem(forms.confirm(&late).await, 400).await;
    assert!(
        expired["detail"]
            .as_str()
            .expect("detail")
            .contains("expired"),
        "{expired}"
    );
    assert!(forms.contact("late@example.org").await.expect("contact")["pendingSince"].is_string());
}

#[tokio::test]
async fn bot_posts_create_nothing() {
    let forms = Forms::new().await;
    let form = forms
        .form(json!({"name": "Open", "attributes": ["first_name"]}))
        .await;

    // The honeypot filled: the same answer as a person gets, and nothing made.
    let answer = forms
        .post_json(
            &form,
            &json!({"email": "bot@example.org", "website-url": "http://spam.example"}),
        )
        .await;
    assert_eq!(
        expect_json(answer, 200).await,
        json!({"status": "subscribed"})
    );
    let page_bot = forms
        .post_form(
            &form,
            &format!(
                "email=bot2%40example.org&website-url=x&form-token={}",
                forms.time_token(&form).await
            ),
        )
        .await;
    assert_eq!(page_bot.status(), 400, "too soon as well");
    assert_eq!(forms.contact_count().await, 0);

    // From the page: without its token, with a forged one, or too soon after it.
    let missing = forms.post_form(&form, "email=a%40example.org").await;
    assert_eq!(missing.status(), 400);
    let token = forms.time_token(&form).await;
    let soon = forms
        .post_form(&form, &format!("email=a%40example.org&form-token={token}"))
        .await;
    assert_eq!(soon.status(), 400);
    let html = soon.text().await.expect("html");
    assert!(
        html.contains("name=\"form-token\""),
        "the page again: {html}"
    );
    forms.wait(5);
    let forged = forms
        .post_form(&form, &format!("email=a%40example.org&form-token={token}x"))
        .await;
    assert_eq!(forged.status(), 400);
    let forged_json = forms
        .post_json(
            &form,
            &json!({"email": "a@example.org", "form-token": format!("{token}x")}),
        )
        .await;
    expect_problem(forged_json, 400).await;
    assert_eq!(forms.contact_count().await, 0);

    // A person, a few seconds after the page: subscribed.
    let person = forms
        .post_form(
            &form,
            &format!("email=ann%40example.org&first_name=Ann&website-url=&form-token={token}"),
        )
        .await;
    assert_eq!(person.status(), 200);
    assert_eq!(forms.contact_count().await, 1);

    // Too many posts for one address: refused with Retry-After before anything is read.
    let mut refused = None;
    for n in 0..6 {
        let answer = forms
            .post_json(&form, &json!({"email": "Flood@example.org"}))
            .await;
        if answer.status() == 429 {
            refused = Some((n, answer));
            break;
        }
        assert_eq!(answer.status(), 200);
    }
    let (n, answer) = refused.expect("the sixth post is refused");
    assert_eq!(n, 5);
    assert!(answer.headers().contains_key("retry-after"));
    expect_problem(answer, 429).await;
    let again = forms
        .post_json(&form, &json!({"email": "flood@EXAMPLE.org"}))
        .await;
    assert_eq!(again.status(), 429, "the address, whatever its case");
    assert_eq!(forms.contact_count().await, 2);

    // Bounded bodies and fields.
    let large = forms
        .post_json(
            &form,
            &json!({"email": "big@example.org", "first_name": "x".repeat(20_000)}),
        )
        .await;
    expect_problem(large, 413).await;
    let unknown = forms
        .post_json(&form, &json!({"email": "u@example.org", "plan": "pro"}))
        .await;
    let problem = expect_problem(unknown, 400).await;
    assert_eq!(problem["errors"][0]["field"], "plan");
    let text = forms
        .setup
        .raw_client
        .post(forms.public(&format!("/f/{}", key(&form))))
        .header("content-type", "text/plain")
        .body("email=x")
        .send()
        .await
        .expect("sent");
    expect_problem(text, 415).await;
}

#[tokio::test]
async fn an_address_gets_at_most_three_confirmations_a_day() {
    let forms = Forms::new().await;
    let form = forms.double_opt_in().await;
    // Four posts: the fourth within the day is answered alike and mails nothing.
    for _ in 0..4 {
        let answer = forms
            .post_json(&form, &json!({"email": "many@example.org"}))
            .await;
        assert_eq!(
            expect_json(answer, 200).await,
            json!({"status": "pending_confirmation"})
        );
    }
    assert_eq!(forms.messages_to("many@example.org").await.len(), 3);
    forms.wait(24 * 3600 + 1);
    forms
        .post_json(&form, &json!({"email": "many@example.org"}))
        .await;
    assert_eq!(forms.messages_to("many@example.org").await.len(), 4);
}

#[tokio::test]
async fn a_suppressed_address_gets_the_same_answer_and_no_mail() {
    let forms = Forms::new().await;
    let setup = &forms.setup;
    let form = forms.double_opt_in().await;
    setup
        .post("/suppressions", &json!({"email": "gone@example.org"}))
        .await;
    // An existing, subscribed contact answers the same too.
    setup.send("news", "known@example.org", json!({})).await;
    setup.drain().await;
    let mut answers = Vec::new();
    for email in ["gone@example.org", "new@example.org", "known@example.org"] {
        let answer = forms.post_json(&form, &json!({"email": email})).await;
        let status = answer.status();
        answers.push((status, answer.text().await.expect("body")));
    }
    assert!(
        answers.iter().all(|answer| *answer == answers[0]),
        "{answers:?}"
    );
    setup.drain().await;
    assert!(forms.mails_to("gone@example.org").is_empty());
    assert_eq!(forms.mails_to("new@example.org").len(), 1);
    let gone = forms.messages_to("gone@example.org").await;
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0]["skipReason"], "suppressed", "{gone:?}");
    let known = forms.contact("known@example.org").await.expect("contact");
    assert!(
        known.get("pendingSince").is_none(),
        "a known contact is not made pending"
    );
}

#[tokio::test]
async fn without_double_opt_in_a_post_subscribes_at_once() {
    let forms = Forms::new().await;
    let setup = &forms.setup;
    let form = forms
        .form(
            json!({"name": "Open", "topicIds": [forms.topic], "attributes": ["first_name"],
                     "successRedirectUrl": "https://acme.example/thanks"}),
        )
        .await;
    let answer = forms
        .post_json(
            &form,
            &json!({"email": "ann@example.org", "first_name": "Ann"}),
        )
        .await;
    assert_eq!(answer.headers()["access-control-allow-origin"], "*");
    assert_eq!(
        expect_json(answer, 200).await,
        json!({"status": "subscribed"})
    );
    // A browser on the account's own site may ask first.
    let preflight = forms
        .setup
        .raw_client
        .request(Method::OPTIONS, forms.public(&format!("/f/{}", key(&form))))
        .header("origin", "https://acme.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("sent");
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert_eq!(preflight.headers()["access-control-allow-methods"], "POST");
    let contact = forms.contact("ann@example.org").await.expect("created");
    assert!(contact.get("pendingSince").is_none(), "{contact}");
    assert_eq!(contact["attributes"]["first_name"], "Ann");
    // An anonymous post does not rewrite a known contact's attributes.
    forms
        .post_json(
            &form,
            &json!({"email": "ann@example.org", "first_name": "Mallory"}),
        )
        .await;
    let contact = forms.contact("ann@example.org").await.expect("contact");
    assert_eq!(contact["attributes"]["first_name"], "Ann");

    // The topic's announcement reaches it at once.
    let news = setup.get_json("/templates").await["items"]
        .as_array()
        .expect("templates")
        .iter()
        .find(|t| t["slug"] == "news")
        .expect("news")["_id"]
        .clone();
    setup
        .post(
            "/announcements",
            &json!({"name": "Launch", "templateId": news, "topicId": forms.topic,
                    "includeUnsubscribed": false}),
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
    setup.drain().await;
    assert_eq!(forms.mails_to("ann@example.org").len(), 1);

    // From the page, the browser goes to the form's success redirect.
    let token = forms.time_token(&form).await;
    forms.wait(4);
    let redirected = forms
        .post_form(
            &form,
            &format!("email=bea%40example.org&form-token={token}"),
        )
        .await;
    assert_eq!(redirected.status(), 303);
    assert_eq!(
        redirected.headers()["location"],
        "https://acme.example/thanks"
    );
    assert!(forms.contact("bea@example.org").await.is_some());
}

#[tokio::test]
async fn a_confirmation_undoes_the_addresss_unsubscriptions_and_a_plain_post_changes_nothing() {
    let forms = &Forms::new().await;
    let setup = &forms.setup;
    let unsubscribe = |email: &'static str, body: String| async move {
        let contact = setup.post("/contacts", &json!({"email": email})).await;
        let token = mailroom_app::tracking::LinkToken::Unsubscribe {
            account: mailroom_domain::AccountId::parse(&setup.account).expect("account"),
            contact: mailroom_domain::ContactId::parse(contact["_id"].as_str().expect("id"))
                .expect("contact id"),
            message: mailroom_domain::MessageId::parse("00000000-0000-4000-8000-000000000001")
                .expect("id"),
        }
        .encode(setup.app.services.secrets.as_ref());
        let answer = setup
            .raw_client
            .post(forms.public(&format!("/u/{token}")))
            .header("content-type", URLENCODED)
            .body(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(answer.status(), 200);
    };

    expect_json(
        setup
            .app
            .send_json(
                Method::PUT,
                &setup.path("/webhooks"),
                &setup.token,
                &json!({"url": "https://127.0.0.1:9/hooks", "authType": "none",
                        "events": ["contact.subscribed"]}),
            )
            .await,
        200,
    )
    .await;
    // Unsubscribed from everything, so listed; the confirmation is transactional mail,
    // which an unsubscription does not stop, and following it takes the entry away.
    unsubscribe("left@example.org", "action=all".into()).await;
    let listed = setup.get_json("/suppressions?email=left@example.org").await;
    assert_eq!(listed["items"][0]["reason"], "unsubscribe", "{listed}");
    let form = forms.double_opt_in().await;
    forms
        .post_json(&form, &json!({"email": "left@example.org"}))
        .await;
    setup.drain().await;
    let link = forms.confirm_link("left@example.org", 0);
    assert_eq!(forms.confirm(&link).await.status(), 200);
    let contact = forms.contact("left@example.org").await.expect("contact");
    assert!(contact.get("unsubscribeDate").is_none(), "{contact}");
    assert!(contact["confirmedAt"].is_string(), "{contact}");
    let listed = setup
        .get_json("/suppressions/count?email=left@example.org")
        .await;
    assert_eq!(listed["count"], 0, "{listed}");

    // Unsubscribed from the form's topic: a post of a form without double opt-in leaves
    // it so (anyone can post an address), as it leaves the unsubscription from everything.
    unsubscribe(
        "topical@example.org",
        format!("action=topics&topic={}", forms.topic),
    )
    .await;
    let before = forms.contact("topical@example.org").await.expect("contact");
    assert_eq!(before["topicUnsubscriptions"], json!([forms.topic]));
    let open = forms
        .form(json!({"name": "Open", "topicIds": [forms.topic]}))
        .await;
    forms
        .post_json(&open, &json!({"email": "topical@example.org"}))
        .await;
    let after = forms.contact("topical@example.org").await.expect("contact");
    assert_eq!(
        after["topicUnsubscriptions"],
        json!([forms.topic]),
        "{after}"
    );
    unsubscribe("gone@example.org", "action=all".into()).await;
    forms
        .post_json(&open, &json!({"email": "gone@example.org"}))
        .await;
    let gone = forms.contact("gone@example.org").await.expect("contact");
    assert!(gone["unsubscribeDate"].is_string(), "{gone}");

    // `contact.subscribed` for the confirmation; none for the posts that changed nothing.
    let events = setup
        .get_json("/webhook-events?event=contact.subscribed")
        .await;
    let emails: Vec<&str> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|event| event["payload"]["email"].as_str().expect("email"))
        .collect();
    assert_eq!(emails, ["left@example.org"]);
}
