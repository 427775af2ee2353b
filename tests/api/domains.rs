//! Sending domains over the API: create with a DKIM key, list, count, get, verify through
//! a real DNS server on loopback (the operator's `MAILROOM_DNS_SERVER`), rotate and remove
//! selectors, delete; the sender rule once a domain is verified; and DKIM signatures of
//! delivered mail checked by dkimpy, an independent verifier.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use mailroom_test_support::TestDnsServer;
use mailroom_tests::{expect_json, expect_problem, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

use crate::delivery_support::Delivery;

const INBOUND_HOST: &str = "in.mailroom.test";

struct Setup {
    app: TestApp,
    token: String,
    account: String,
    dns: TestDnsServer,
}

impl Setup {
    async fn new() -> Self {
        let dns = TestDnsServer::start();
        let address = dns.address();
        let app = spawn_app_with(|config| {
            config.dns_server = Some(address);
            config.inbound_host = Some(INBOUND_HOST.to_owned());
        })
        .await;
        let token = app.user_token("ada@example.com").await;
        let account = app.create_account(&token, "Acme").await;
        Self {
            app,
            token,
            account,
            dns,
        }
    }

    fn path(&self, rest: &str) -> String {
        format!("/v2/accounts/{}{rest}", self.account)
    }

    async fn send(&self, method: Method, rest: &str, body: &Value) -> reqwest::Response {
        self.app
            .send_json(method, &self.path(rest), &self.token, body)
            .await
    }

    async fn create(&self, name: &str) -> Value {
        expect_json(
            self.send(Method::POST, "/domains", &json!({ "name": name }))
                .await,
            200,
        )
        .await
    }

    async fn verify(&self, domain: &Value) -> Value {
        let path = format!("/domains/{}/verify", domain["_id"].as_str().expect("id"));
        expect_json(self.send(Method::POST, &path, &json!({})).await, 200).await
    }
}

/// Publishes every record `domain` lists (the return path as the MX it asks for).
fn publish(dns: &TestDnsServer, domain: &Value) {
    for record in domain["records"].as_array().expect("records") {
        let name = record["name"].as_str().expect("name");
        let value = record["value"].as_str().expect("value");
        match record["type"].as_str() {
            Some("TXT") => dns.add_txt(name, value),
            Some("MX") => dns.add_mx(name, 10, value),
            other => panic!("unexpected record type {other:?}"),
        }
    }
}

fn statuses(domain: &Value) -> Vec<(String, String)> {
    domain["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            (
                r["purpose"].as_str().expect("purpose").to_owned(),
                r["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn domains_are_created_with_a_dkim_key_listed_counted_and_deleted() {
    let setup = Setup::new().await;
    let domain = setup.create("Mail.Acme.Example.").await;
    assert_eq!(domain["name"], "mail.acme.example");
    assert_eq!(domain["status"], "pending");
    assert_eq!(domain["verifiedAt"], Value::Null);
    let selector = domain["dkim"]["selectors"][0]["selector"]
        .as_str()
        .expect("a selector");
    assert_eq!(domain["dkim"]["signingSelector"], Value::Null);
    let public_key = domain["dkim"]["selectors"][0]["publicKey"]
        .as_str()
        .expect("a public key");
    assert_eq!(public_key.len(), 392, "a 2048-bit key: {public_key}");
    let records = domain["records"].as_array().expect("records");
    let listed: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["purpose"].as_str().unwrap(),
                r["type"].as_str().unwrap(),
                r["name"].as_str().unwrap(),
            )
        })
        .collect();
    let dkim_name = format!("{selector}._domainkey.mail.acme.example");
    assert_eq!(
        listed,
        [
            ("dkim", "TXT", dkim_name.as_str()),
            ("spf", "TXT", "mail.acme.example"),
            ("dmarc", "TXT", "_dmarc.mail.acme.example"),
            ("returnPath", "MX", "bounces.mail.acme.example"),
        ]
    );
    assert_eq!(
        records[0]["value"],
        format!("v=DKIM1; k=rsa; p={public_key}")
    );
    assert_eq!(records[3]["value"], INBOUND_HOST);
    assert!(records.iter().all(|r| r["status"] == "pending"));

    // The private key is sealed at rest: nothing in the row reads as a PEM.
    let stored: String = {
        let url = setup.app.database.url().to_owned();
        tokio::task::spawn_blocking(move || {
            use diesel::RunQueryDsl;
            #[derive(diesel::QueryableByName)]
            struct Row {
                #[diesel(sql_type = diesel::sql_types::Text)]
                text: String,
            }
            let mut conn = mailroom_test_support::assertion_connection(&url);
            diesel::sql_query(
                "SELECT encode(private_key, 'escape') AS text FROM sending_domain_keys",
            )
            .get_result::<Row>(&mut conn)
            .expect("one key")
            .text
        })
        .await
        .expect("query")
    };
    assert!(!stored.contains("PRIVATE KEY"), "the key is stored sealed");

    for (body, field) in [
        (json!({ "name": "localhost" }), "name"),
        (json!({ "name": "10.0.0.1" }), "name"),
        (json!({ "name": "exa mple.com" }), "name"),
        (
            json!({ "name": format!("{}.com", "a".repeat(250)) }),
            "name",
        ),
        (json!({}), "name"),
        (json!({ "name": 7 }), "name"),
        (json!({ "name": "mail.acme.example" }), "name"),
    ] {
        let problem = expect_problem(setup.send(Method::POST, "/domains", &body).await, 400).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let other = setup.create("news.acme.example").await;
    let list = expect_json(
        setup.app.get(&setup.path("/domains"), &setup.token).await,
        200,
    )
    .await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    let count = expect_json(
        setup
            .app
            .get(&setup.path("/domains/count"), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(count["count"], 2);
    let id = domain["_id"].as_str().expect("id");
    let got = expect_json(
        setup
            .app
            .get(&setup.path(&format!("/domains/{id}")), &setup.token)
            .await,
        200,
    )
    .await;
    assert_eq!(got["_id"], domain["_id"]);

    // Another account sees none of it.
    let stranger = setup.app.user_token("eve@example.com").await;
    let theirs = setup.app.create_account(&stranger, "Eve").await;
    let response = setup
        .app
        .get(&format!("/v2/accounts/{theirs}/domains/{id}"), &stranger)
        .await;
    expect_problem(response, 404).await;

    let deleted = expect_json(
        setup
            .send(Method::DELETE, &format!("/domains/{id}"), &json!({}))
            .await,
        200,
    )
    .await;
    assert_eq!(deleted["_id"], domain["_id"]);
    expect_problem(
        setup
            .app
            .get(&setup.path(&format!("/domains/{id}")), &setup.token)
            .await,
        404,
    )
    .await;
    assert_eq!(other["status"], "pending");
}

#[tokio::test]
async fn verify_reads_the_records_from_the_operators_resolver_and_rotation_keeps_the_old_key() {
    let setup = Setup::new().await;
    let domain = setup.create("acme.example").await;
    let id = domain["_id"].as_str().expect("id").to_owned();

    let failed = setup.verify(&domain).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["checkedAt"].is_string());
    assert!(
        statuses(&failed).iter().all(|(_, s)| s == "failed"),
        "{failed}"
    );

    // A wrong key does not verify.
    let dkim_name = domain["records"][0]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    setup.dns.add_txt(
        &dkim_name,
        "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong",
    );
    assert_eq!(setup.verify(&domain).await["status"], "failed");
    setup.dns.remove(&dkim_name);

    publish(&setup.dns, &domain);
    let verified = setup.verify(&domain).await;
    assert_eq!(verified["status"], "verified", "{verified}");
    assert!(verified["verifiedAt"].is_string());
    assert_eq!(
        statuses(&verified),
        [
            ("dkim".to_owned(), "verified".to_owned()),
            ("spf".to_owned(), "verified".to_owned()),
            ("dmarc".to_owned(), "verified".to_owned()),
            ("returnPath".to_owned(), "verified".to_owned()),
        ]
    );
    let old = verified["dkim"]["selectors"][0]["selector"]
        .as_str()
        .expect("selector")
        .to_owned();
    assert_eq!(verified["dkim"]["signingSelector"], old.as_str());

    // Rotation: a new selector, pending; the old one still signs and stays listed.
    let rotated = expect_json(
        setup
            .send(Method::POST, &format!("/domains/{id}/rotate"), &json!({}))
            .await,
        200,
    )
    .await;
    let selectors = rotated["dkim"]["selectors"].as_array().expect("selectors");
    assert_eq!(selectors.len(), 2);
    let new = selectors[1]["selector"]
        .as_str()
        .expect("selector")
        .to_owned();
    assert_ne!(new, old);
    assert_ne!(selectors[0]["publicKey"], selectors[1]["publicKey"]);
    assert_eq!(rotated["status"], "verified");
    assert_eq!(rotated["dkim"]["signingSelector"], old.as_str());
    let new_record = rotated["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["name"].as_str().is_some_and(|n| n.starts_with(&new)))
        .cloned()
        .expect("the new key's record");
    assert_eq!(new_record["status"], "pending");

    // Published and verified, the new key signs; the old one still verifies.
    setup.dns.add_txt(
        new_record["name"].as_str().unwrap(),
        new_record["value"].as_str().unwrap(),
    );
    let both = setup.verify(&domain).await;
    assert_eq!(both["dkim"]["signingSelector"], new.as_str());
    assert!(both["dkim"]["selectors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k["status"] == "verified"));

    // The old selector goes; the last one cannot.
    let left = expect_json(
        setup
            .send(
                Method::DELETE,
                &format!("/domains/{id}/selectors/{old}"),
                &json!({}),
            )
            .await,
        200,
    )
    .await;
    assert_eq!(left["dkim"]["selectors"].as_array().map(Vec::len), Some(1));
    assert_eq!(left["status"], "verified");
    expect_problem(
        setup
            .send(
                Method::DELETE,
                &format!("/domains/{id}/selectors/{new}"),
                &json!({}),
            )
            .await,
        400,
    )
    .await;
    expect_problem(
        setup
            .send(
                Method::DELETE,
                &format!("/domains/{id}/selectors/{old}"),
                &json!({}),
            )
            .await,
        404,
    )
    .await;

    // The bound on keys: three more rotations fill it, the next is refused.
    for _ in 0..3 {
        expect_json(
            setup
                .send(Method::POST, &format!("/domains/{id}/rotate"), &json!({}))
                .await,
            200,
        )
        .await;
    }
    expect_problem(
        setup
            .send(Method::POST, &format!("/domains/{id}/rotate"), &json!({}))
            .await,
        400,
    )
    .await;
}

#[tokio::test]
async fn once_a_domain_is_verified_senders_must_be_at_a_verified_domain() {
    let setup = Setup::new().await;
    let template = |slug: &str, from: &str| {
        json!({
            "name": slug, "slug": slug, "subject": "Hi", "content": "<p>Hi</p>",
            "fromEmail": from
        })
    };
    // No verified domain: any sender, as before.
    expect_json(
        setup
            .send(
                Method::POST,
                "/templates",
                &template("before", "x@elsewhere.example"),
            )
            .await,
        200,
    )
    .await;
    let domain = setup.create("acme.example").await;
    // A pending domain changes nothing.
    expect_json(
        setup
            .send(
                Method::POST,
                "/templates",
                &template("pending", "x@elsewhere.example"),
            )
            .await,
        200,
    )
    .await;
    publish(&setup.dns, &domain);
    assert_eq!(setup.verify(&domain).await["status"], "verified");

    let problem = expect_problem(
        setup
            .send(
                Method::POST,
                "/templates",
                &template("after", "x@elsewhere.example"),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "fromEmail", "{problem}");
    assert!(problem["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("acme.example")));
    for (slug, from) in [
        ("same", "hello@acme.example"),
        ("sub", "news@mail.ACME.example"),
    ] {
        expect_json(
            setup
                .send(Method::POST, "/templates", &template(slug, from))
                .await,
            200,
        )
        .await;
    }
    // A look-alike domain is not a subdomain.
    expect_problem(
        setup
            .send(
                Method::POST,
                "/templates",
                &template("alike", "x@badacme.example"),
            )
            .await,
        400,
    )
    .await;
    // Editing an older template without touching its sender still works; changing the
    // sender to an outside domain does not.
    let list = expect_json(
        setup.app.get(&setup.path("/templates"), &setup.token).await,
        200,
    )
    .await;
    let before = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["slug"] == "before")
        .cloned()
        .expect("the older template");
    let path = format!("/templates/{}", before["_id"].as_str().unwrap());
    expect_json(
        setup
            .send(Method::PATCH, &path, &json!({ "subject": "Hello" }))
            .await,
        200,
    )
    .await;
    let problem = expect_problem(
        setup
            .send(
                Method::PATCH,
                &path,
                &json!({ "fromEmail": "y@other.example" }),
            )
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "fromEmail");

    // A mail server's default sender follows the same rule (refused before any
    // connection is tried).
    let server = json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": 9,
        "secure": false, "requireTLS": false, "user": "", "password": "",
        "defaultFromEmail": "hello@elsewhere.example", "defaultFromName": "Acme"
    });
    let problem = expect_problem(
        setup.send(Method::POST, "/mail-servers", &server).await,
        400,
    )
    .await;
    assert_eq!(
        problem["errors"][0]["field"], "defaultFromEmail",
        "{problem}"
    );

    // Without its verified domain the account is back to any sender.
    let id = domain["_id"].as_str().unwrap();
    expect_json(
        setup
            .send(Method::DELETE, &format!("/domains/{id}"), &json!({}))
            .await,
        200,
    )
    .await;
    expect_json(
        setup
            .send(
                Method::POST,
                "/templates",
                &template("later", "x@elsewhere.example"),
            )
            .await,
        200,
    )
    .await;
}

/// The Python of the virtualenv with dkimpy: `MAILROOM_DKIM_PYTHON`, else
/// `target/dkim-venv` of the workspace (`cargo xtask test` installs it there).
fn dkim_python() -> PathBuf {
    if let Some(python) = std::env::var_os("MAILROOM_DKIM_PYTHON") {
        return PathBuf::from(python);
    }
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dkim-venv/bin/python");
    assert!(
        python.exists(),
        "dkimpy is missing: run `cargo xtask test` once (it installs it into \
         target/dkim-venv), or set MAILROOM_DKIM_PYTHON to a Python with dkimpy"
    );
    python
}

/// The value of the first header `name`, its folded lines joined.
fn unfolded_header(message: &str, name: &str) -> Option<String> {
    let head = message.split("\r\n\r\n").next()?;
    let mut lines = head.split("\r\n").skip_while(|line| {
        !line
            .get(..=name.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(&format!("{name}:")))
    });
    let mut value = lines.next()?[name.len() + 1..].trim().to_owned();
    for line in lines.take_while(|line| line.starts_with([' ', '\t'])) {
        value.push(' ');
        value.push_str(line.trim());
    }
    Some(value)
}

/// Whether dkimpy verifies `message` against the keys `dns` serves.
fn dkimpy_verifies(dns: &TestDnsServer, message: &str) -> bool {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/dkim/verify.py");
    let mut child = Command::new(dkim_python())
        .arg(script)
        .arg(dns.address().ip().to_string())
        .arg(dns.address().port().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the verifier");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(message.as_bytes())
        .expect("write the message");
    let output = child.wait_with_output().expect("the verifier ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.trim() == "pass" || stdout.trim() == "fail",
        "the verifier did not run: {stdout} {stderr}"
    );
    output.status.success()
}

#[tokio::test]
async fn mail_from_a_verified_domain_is_dkim_signed_and_verifies_independently() {
    let dns = TestDnsServer::start();
    let address = dns.address();
    let setup = Delivery::new(|config| config.dns_server = Some(address)).await;
    // Unsigned before the domain is verified.
    setup.queue("before@example.org").await;
    setup.drain().await;
    let unsigned = setup.smtp.messages();
    assert_eq!(unsigned.len(), 1);
    assert!(!unsigned[0].data.contains("DKIM-Signature"));

    let domain = setup
        .post("/domains", &json!({ "name": "acme.example" }))
        .await;
    publish(&dns, &domain);
    let id = domain["_id"].as_str().unwrap();
    let verified = setup
        .post(&format!("/domains/{id}/verify"), &json!({}))
        .await;
    assert_eq!(verified["status"], "verified");
    let selector = verified["dkim"]["signingSelector"]
        .as_str()
        .unwrap()
        .to_owned();

    // A multipart message (text and HTML), a single-part one, and an automation's (with
    // List-Unsubscribe and List-Unsubscribe-Post). The multipart one has 46 copies: its
    // Cc header is folded after signing, which relaxed canonicalization undoes.
    let copies: Vec<String> = (0..46)
        .map(|n| format!("copy-{n:02}@example.net"))
        .collect();
    let both = setup
        .post(
            "/templates",
            &json!({
                "name": "Both", "slug": "both", "subject": "Ünïcode subject, long enough to be folded by the encoder at some point",
                "content": "<p>Hello   there</p>\n<p>Line two</p>", "textContent": "Hello there\nLine two",
                "cc": copies.join(", ")
            }),
        )
        .await;
    setup
        .post(
            "/messages",
            &json!({"slug": "both", "email": "ada@example.org"}),
        )
        .await;
    setup.queue("bob@example.org").await;
    setup
        .post(
            "/automations",
            &json!({
                "name": "Welcome", "templateId": both["_id"], "triggerEventSlug": "signed_up",
                "triggerEventCondition": "once", "timingCondition": "immediately", "isEnabled": true
            }),
        )
        .await;
    setup
        .post(
            "/events",
            &json!({"email": "carol@example.org", "slug": "signed_up"}),
        )
        .await;
    setup.drain().await;
    let messages = setup.smtp.messages();
    assert_eq!(messages.len(), 4);
    let copied = messages
        .iter()
        .find(|m| m.data.contains("copy-45@example.net"))
        .expect("a message with copies");
    assert!(
        copied.data.contains(",\r\n copy-"),
        "Cc folded: {}",
        copied.data
    );
    let listed = messages
        .iter()
        .find(|m| m.data.contains("List-Unsubscribe-Post:"))
        .expect("the automation's message carries List-Unsubscribe");
    let moved = listed.data.replacen("/u/", "/u/x", 1);
    assert_ne!(moved, listed.data);
    assert!(dkimpy_verifies(&dns, &listed.data));
    assert!(!dkimpy_verifies(&dns, &moved), "List-Unsubscribe is signed");
    for message in &messages[1..] {
        let signature = unfolded_header(&message.data, "DKIM-Signature")
            .unwrap_or_else(|| panic!("signed: {}", message.data));
        assert!(signature.contains("d=acme.example"), "{signature}");
        assert!(signature.contains(&format!("s={selector}")), "{signature}");
        assert!(signature.contains("c=relaxed/relaxed"), "{signature}");
        assert!(signature.contains("a=rsa-sha256"), "{signature}");
        assert!(
            dkimpy_verifies(&dns, &message.data),
            "dkimpy verifies: {}",
            message.data
        );
        // Altered after signing: the subject, the top-level content type (signed although
        // lettre keeps it with the MIME body), or a word of the body.
        let subject_changed = message.data.replacen("Subject: ", "Subject: Re: ", 1);
        assert!(!dkimpy_verifies(&dns, &subject_changed));
        let type_changed = message
            .data
            .replacen("charset=utf-8", "charset=us-ascii", 1);
        assert_ne!(type_changed, message.data);
        assert!(!dkimpy_verifies(&dns, &type_changed));
        let body_at = message.data.find("\r\n\r\n").expect("a body");
        let (head, body) = message.data.split_at(body_at);
        let body_changed = format!(
            "{head}{}",
            body.replacen("9", "8", 1).replacen("Hello", "Jello", 1)
        );
        assert_ne!(body_changed, message.data);
        assert!(!dkimpy_verifies(&dns, &body_changed));
    }
    // With the key's record gone, nothing verifies.
    dns.remove(&format!("{selector}._domainkey.acme.example"));
    assert!(!dkimpy_verifies(&dns, &messages[1].data));
}
