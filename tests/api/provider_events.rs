//! Provider bounce and complaint events (`…/feedback-sources`): the providers' documented
//! example payloads, signed as each provider signs them (SNS with an RSA certificate
//! served from a real loopback HTTP server standing in for SNS, Mailgun's HMAC,
//! SendGrid's ECDSA P-256, Postmark's basic-auth secret), against messages delivered by
//! the real worker; and the same payloads unsigned, wrongly signed, stale, replayed or
//! posted to another tenant's source, which change nothing.

use base64::Engine as _;
use hmac::{Hmac, Mac as _};
use mailroom_app::ports::Clock as _;
use mailroom_test_support::{ReceiverReply, TestWebhookReceiver};
use mailroom_tests::{expect_json, expect_problem};
use reqwest::{Method, Response};
use rsa::{pkcs8::EncodePrivateKey as _, Pkcs1v15Sign, RsaPrivateKey};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use crate::delivery_support::Delivery;

const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:ses-feedback";

/// A stand-in for SNS: an RSA key, its self-signed certificate served (as PEM) by a real
/// HTTP server on loopback, which also answers subscription confirmations.
struct FakeSns {
    key: RsaPrivateKey,
    server: TestWebhookReceiver,
}

impl FakeSns {
    fn start() -> Self {
        let key = RsaPrivateKey::new(&mut rand::thread_rng(), 2048).expect("RSA key");
        let der = key.to_pkcs8_der().expect("PKCS#8");
        let pair = rcgen::KeyPair::try_from(der.as_bytes()).expect("rcgen key");
        let certificate = rcgen::CertificateParams::new(vec!["sns.us-east-1.amazonaws.com".into()])
            .expect("params")
            .self_signed(&pair)
            .expect("certificate");
        let pem = pem("CERTIFICATE", certificate.der());
        let server = TestWebhookReceiver::start_with(ReceiverReply::with_body(200, &pem));
        Self { key, server }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.server.address())
    }

    fn cert_url(&self) -> String {
        self.server
            .url("/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem")
    }

    /// Signs `message` (an SNS JSON object without its signature fields) as SNS does,
    /// with SignatureVersion `version`, naming `cert_url` as its certificate.
    fn sign(&self, mut message: Value, version: &str, cert_url: &str) -> Value {
        // Published now, as SNS would stamp it (a message an hour old is refused), unless
        // the test stamped it itself (`"Timestamp": "keep:…"`).
        let stamped = message["Timestamp"]
            .as_str()
            .and_then(|text| text.strip_prefix("keep:"))
            .map(str::to_owned);
        message["Timestamp"] = json!(stamped.unwrap_or_else(|| {
            mailroom_domain::Timestamp::from_datetime(time::OffsetDateTime::now_utc()).to_string()
        }));
        let kind = message["Type"].as_str().unwrap().to_owned();
        let names: &[&str] = if kind == "Notification" {
            &[
                "Message",
                "MessageId",
                "Subject",
                "Timestamp",
                "TopicArn",
                "Type",
            ]
        } else {
            &[
                "Message",
                "MessageId",
                "SubscribeURL",
                "Timestamp",
                "Token",
                "TopicArn",
                "Type",
            ]
        };
        let mut text = String::new();
        for name in names {
            if let Some(value) = message[*name].as_str() {
                text.push_str(&format!("{name}\n{value}\n"));
            }
        }
        let signature = if version == "1" {
            let digest = sha1::Sha1::digest(text.as_bytes());
            self.key.sign(Pkcs1v15Sign::new::<sha1::Sha1>(), &digest)
        } else {
            let digest = Sha256::digest(text.as_bytes());
            self.key.sign(Pkcs1v15Sign::new::<Sha256>(), &digest)
        }
        .expect("signature");
        message["SignatureVersion"] = json!(version);
        message["Signature"] = json!(base64::engine::general_purpose::STANDARD.encode(signature));
        message["SigningCertURL"] = json!(cert_url);
        message
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|chunk| std::str::from_utf8(chunk).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// The SES bounce notification of the SES documentation, for `recipient` and the
/// original `Message-ID` `header`, wrapped in an SNS notification of `topic`.
fn ses_bounce(topic: &str, recipient: &str, header: &str) -> Value {
    let event = json!({
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent", "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": recipient, "status": "5.1.1", "action": "failed",
                                   "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
            "timestamp": "2016-01-27T14:59:38.237Z",
            "feedbackId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000",
            "reportingMTA": "dsn; a8-70.smtp-out.amazonses.com"
        },
        "mail": {
            "timestamp": "2016-01-27T14:59:38.237Z", "source": "john@example.com",
            "messageId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000",
            "destination": [recipient],
            "headersTruncated": false,
            "headers": [{"name": "Message-ID", "value": header}]
        }
    });
    json!({
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": topic,
        "Subject": "Amazon SES Email Event Notification",
        "Message": event.to_string(),
        "Timestamp": "2016-01-27T14:59:39.000Z",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=x"
    })
}

async fn create_source(setup: &Delivery, body: Value) -> Value {
    setup.post("/feedback-sources", &body).await
}

/// Posts to a source's URL (the path part; the host is the test server), as a provider:
/// no token.
async fn post_event(
    setup: &Delivery,
    url: &str,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, String)],
) -> Response {
    let path = &url[url.find("/v2/").expect("a /v2 URL")..];
    let mut request = setup
        .app
        .request(Method::POST, path, None)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.expect("sent")
}

async fn delivered(setup: &Delivery, email: &str) -> Value {
    let queued = setup.queue(email).await;
    setup.drain().await;
    let message = setup.message(&queued["_id"]).await;
    assert_eq!(message["status"], "sent", "{message}");
    message
}

async fn events_of(setup: &Delivery, event: &str) -> Vec<Value> {
    let page = setup.get(&format!("/webhook-events?event={event}")).await;
    page["items"].as_array().expect("items").clone()
}

async fn subscribe(setup: &Delivery, events: &[&str]) {
    let body = json!({"url": "http://127.0.0.1:9/hooks", "authType": "none", "events": events});
    let response = setup
        .app
        .send_json(Method::PUT, &setup.path("/webhooks"), &setup.token, &body)
        .await;
    expect_json(response, 200).await;
}

#[tokio::test]
async fn ses_through_sns_confirms_the_subscription_and_records_a_signed_bounce_only() {
    let sns = FakeSns::start();
    let origin = sns.origin();
    let setup = Delivery::new(|config| config.sns_test_origin = Some(origin)).await;
    subscribe(&setup, &["contact.bounced"]).await;
    let source = create_source(&setup, json!({"provider": "ses", "topicArns": [TOPIC]})).await;
    let url = source["url"].as_str().unwrap().to_owned();
    assert!(
        url.ends_with(&format!(
            "/v2/feedback-sources/{}/{}/events",
            setup.account,
            source["_id"].as_str().unwrap()
        )),
        "{url}"
    );

    // The subscription confirmation of the SNS documentation, signed (version 1).
    let subscribe_url = sns
        .server
        .url("/?Action=ConfirmSubscription&TopicArn=x&Token=2336412f37");
    let confirmation = sns.sign(
        json!({
            "Type": "SubscriptionConfirmation",
            "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
            "Token": "2336412f37",
            "TopicArn": TOPIC,
            "Message": "You have chosen to subscribe to the topic. To confirm the subscription, visit the SubscribeURL included in this message.",
            "SubscribeURL": subscribe_url,
            "Timestamp": "2012-04-26T20:45:04.751Z"
        }),
        "1",
        &sns.cert_url(),
    );
    let answer = expect_json(
        post_event(&setup, &url, confirmation.to_string(), &[]).await,
        200,
    )
    .await;
    assert_eq!(answer["confirmed"], true, "{answer}");
    let fetched: Vec<String> = sns
        .server
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert!(
        fetched.iter().any(|path| path.ends_with(".pem")),
        "{fetched:?}"
    );
    assert!(
        fetched
            .iter()
            .any(|path| path.starts_with("/?Action=ConfirmSubscription")),
        "{fetched:?}"
    );

    let message = delivered(&setup, "jane@example.com").await;
    let header = message["messageId"].as_str().unwrap();
    let notification = ses_bounce(TOPIC, "jane@example.com", header);

    // Unsigned, wrongly signed, or of another topic: refused, nothing changes.
    let unsigned = post_event(&setup, &url, notification.to_string(), &[]).await;
    expect_problem(unsigned, 401).await;
    let mut forged = sns.sign(notification.clone(), "2", &sns.cert_url());
    forged["Message"] = json!(forged["Message"]
        .as_str()
        .unwrap()
        .replace("5.1.1", "5.1.2"));
    expect_problem(post_event(&setup, &url, forged.to_string(), &[]).await, 401).await;
    let other_topic = sns.sign(
        ses_bounce(
            "arn:aws:sns:us-east-1:123456789012:someone-else",
            "jane@example.com",
            header,
        ),
        "2",
        &sns.cert_url(),
    );
    expect_problem(
        post_event(&setup, &url, other_topic.to_string(), &[]).await,
        401,
    )
    .await;
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");
    assert!(events_of(&setup, "contact.bounced").await.is_empty());

    // Signed, but published 61 minutes ago, or 6 minutes ahead: refused before any
    // certificate is fetched (a replay buys no fetch).
    let fetches = sns.server.requests().len();
    for minutes in [-61, 6] {
        let mut stale = notification.clone();
        let at = mailroom_domain::Timestamp::from_datetime(
            time::OffsetDateTime::now_utc() + time::Duration::minutes(minutes),
        );
        stale["Timestamp"] = json!(format!("keep:{at}"));
        let stale = sns.sign(stale, "2", &sns.cert_url());
        expect_problem(post_event(&setup, &url, stale.to_string(), &[]).await, 401).await;
    }
    assert_eq!(
        sns.server.requests().len(),
        fetches,
        "no certificate fetched"
    );
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");

    // Signed (version 2): the message bounces, the contact is flagged, counted, notified.
    let signed = sns.sign(notification, "2", &sns.cert_url());
    let answer = expect_json(post_event(&setup, &url, signed.to_string(), &[]).await, 200).await;
    assert_eq!(
        answer,
        json!({"received": 1, "recorded": 1, "ignored": 0, "confirmed": false})
    );
    assert_eq!(setup.message(&message["_id"]).await["status"], "bounced");
    let contact = setup.contact(&message["contactId"]).await;
    assert!(contact["hardBounced"].is_string(), "{contact}");
    assert_eq!(setup.today().await["bounced"], 1);
    assert_eq!(events_of(&setup, "contact.bounced").await.len(), 1);
    // SNS delivers at least once: the same message again changes nothing.
    let again = expect_json(post_event(&setup, &url, signed.to_string(), &[]).await, 200).await;
    assert_eq!(again["recorded"], 0, "{again}");
    assert_eq!(setup.today().await["bounced"], 1);
    let source = setup
        .get(&format!(
            "/feedback-sources/{}",
            source["_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(source["eventsRecorded"], 1, "{source}");
    assert_eq!(source["eventsIgnored"], 1, "{source}");
}

#[tokio::test]
async fn a_certificate_url_off_the_sns_host_is_refused_without_any_fetch() {
    let sns = FakeSns::start();
    let elsewhere = TestWebhookReceiver::start();
    let origin = sns.origin();
    let setup = Delivery::new(|config| config.sns_test_origin = Some(origin)).await;
    let source = create_source(&setup, json!({"provider": "ses", "topicArns": [TOPIC]})).await;
    let url = source["url"].as_str().unwrap();
    let message = delivered(&setup, "jane@example.com").await;
    let notification = ses_bounce(
        TOPIC,
        "jane@example.com",
        message["messageId"].as_str().unwrap(),
    );
    // Correctly signed, but naming a certificate on another host (and then a
    // non-.pem path on the allowed one).
    let off_host = sns.sign(notification.clone(), "2", &elsewhere.url("/cert.pem"));
    expect_problem(
        post_event(&setup, url, off_host.to_string(), &[]).await,
        401,
    )
    .await;
    let not_pem = sns.sign(notification, "2", &sns.server.url("/cert.txt"));
    expect_problem(post_event(&setup, url, not_pem.to_string(), &[]).await, 401).await;
    assert!(
        elsewhere.requests().is_empty(),
        "fetched from a non-SNS host"
    );
    assert!(sns.server.requests().is_empty(), "fetched a non-.pem URL");
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");
}

fn mailgun_body(key: &str, timestamp: i64, token: &str, event: &Value) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(timestamp.to_string().as_bytes());
    mac.update(token.as_bytes());
    let signature = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    json!({
        "signature": {"timestamp": timestamp.to_string(), "token": token, "signature": signature},
        "event-data": event
    })
    .to_string()
}

/// The `failed` event of Mailgun's documentation (trimmed), for `recipient`.
fn mailgun_failed(recipient: &str, header: &str, severity: &str) -> Value {
    json!({
        "event": "failed", "id": "G9Bn5sl1TC6nu79C8C0bwg", "timestamp": 1521233195.375624,
        "log-level": "error", "severity": severity, "reason": "bounce",
        "recipient": recipient, "recipient-domain": "example.com",
        "message": {"headers": {"to": recipient, "message-id": header.trim_matches(['<', '>']),
                                "from": "Bob <bob@example.com>", "subject": "Test permanent_fail webhook"},
                    "attachments": [], "size": 111},
        "delivery-status": {"attempt-no": 1, "message": "", "code": 605,
                            "description": "Not delivering to previously bounced address",
                            "session-seconds": 0.0}
    })
}

#[tokio::test]
async fn mailgun_signed_events_record_and_stale_replayed_or_foreign_ones_are_refused() {
    let setup = Delivery::new(|_| {}).await;
    let key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
    let source = create_source(&setup, json!({"provider": "mailgun", "signingKey": key})).await;
    assert_eq!(source["hasSigningKey"], true);
    assert!(
        !source.to_string().contains(key),
        "the key is never shown: {source}"
    );
    let url = source["url"].as_str().unwrap();
    let message = delivered(&setup, "alice@example.com").await;
    let header = message["messageId"].as_str().unwrap();
    let now = i64::try_from(setup.app.clock.now().unix_millis() / 1000).unwrap();
    let event = mailgun_failed("alice@example.com", header, "permanent");

    // Another key (another tenant's valid Mailgun account), a stale timestamp: refused.
    let foreign = mailgun_body("key-someone-else", now, "token-1", &event);
    expect_problem(post_event(&setup, url, foreign, &[]).await, 401).await;
    let stale = mailgun_body(key, now - 600, "token-2", &event);
    expect_problem(post_event(&setup, url, stale, &[]).await, 401).await;
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");

    // A temporary failure is accepted and ignored.
    let temporary = mailgun_body(
        key,
        now,
        "token-3",
        &mailgun_failed("alice@example.com", header, "temporary"),
    );
    let answer = expect_json(post_event(&setup, url, temporary, &[]).await, 200).await;
    assert_eq!(answer["ignored"], 1, "{answer}");
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");

    let signed = mailgun_body(key, now, "token-4", &event);
    let answer = expect_json(post_event(&setup, url, signed.clone(), &[]).await, 200).await;
    assert_eq!(answer["recorded"], 1, "{answer}");
    assert_eq!(setup.message(&message["_id"]).await["status"], "bounced");
    assert_eq!(setup.today().await["bounced"], 1);
    // The same request again is a replay.
    expect_problem(post_event(&setup, url, signed, &[]).await, 401).await;

    // A complaint.
    let other = delivered(&setup, "bob@example.com").await;
    let complained = json!({"event": "complained", "recipient": "bob@example.com", "timestamp": 1521233195.375624});
    let body = mailgun_body(key, now, "token-5", &complained);
    let answer = expect_json(post_event(&setup, url, body, &[]).await, 200).await;
    assert_eq!(answer["recorded"], 1, "{answer}");
    assert!(setup.contact(&other["contactId"]).await["complaintDate"].is_string());
    assert_eq!(setup.today().await["complained"], 1);
}

#[tokio::test]
async fn sendgrid_signed_batches_record_bounces_and_spam_reports_and_unsigned_ones_do_not() {
    use p256::{
        ecdsa::{signature::Signer as _, Signature, SigningKey},
        pkcs8::EncodePublicKey as _,
    };
    let setup = Delivery::new(|_| {}).await;
    subscribe(&setup, &["contact.bounced", "contact.complained"]).await;
    let signing = SigningKey::random(&mut rand::thread_rng());
    let public_key = base64::engine::general_purpose::STANDARD.encode(
        signing
            .verifying_key()
            .to_public_key_der()
            .unwrap()
            .as_bytes(),
    );
    let source = create_source(
        &setup,
        json!({"provider": "sendgrid", "publicKey": public_key}),
    )
    .await;
    let url = source["url"].as_str().unwrap();
    let bounced = delivered(&setup, "example@test.com").await;
    let complaining = delivered(&setup, "spam@test.com").await;
    // The events of SendGrid's documentation: a bounce, a blocked bounce, a spam report,
    // a deferral and a drop.
    let body = json!([
        {"email": "example@test.com", "timestamp": 1513299569, "smtp-id": bounced["messageId"], "event": "bounce",
         "category": "cat facts", "sg_event_id": "6g4ZI7SA-xmRDv57GoPIPw==", "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
         "reason": "500 unknown recipient", "status": "5.0.0", "type": "bounce"},
        {"email": "example@test.com", "timestamp": 1513299569, "event": "bounce", "type": "blocked", "reason": "421 try later", "status": "4.0.0"},
        {"email": "spam@test.com", "timestamp": 1513299569, "event": "spamreport", "sg_event_id": "x", "sg_message_id": "y"},
        {"email": "example@test.com", "timestamp": 1513299569, "event": "deferred", "response": "400 try again later", "attempt": "5"},
        {"email": "example@test.com", "timestamp": 1513299569, "event": "dropped", "reason": "Bounced Address", "status": "5.0.0"}
    ])
    .to_string();
    let now = setup.app.clock.now().unix_millis() / 1000;
    let timestamp = &now.to_string();
    let signature: Signature = signing.sign(&[timestamp.as_bytes(), body.as_bytes()].concat());
    let signature = base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());

    expect_problem(post_event(&setup, url, body.clone(), &[]).await, 401).await;
    let tampered = body.replace("spamreport", "open");
    let headers = [
        ("X-Twilio-Email-Event-Webhook-Signature", signature.clone()),
        (
            "X-Twilio-Email-Event-Webhook-Timestamp",
            timestamp.to_owned(),
        ),
    ];
    expect_problem(post_event(&setup, url, tampered, &headers).await, 401).await;
    // Signed 6 minutes ago (or ahead), past the 5 minutes allowed: refused as stale. A
    // minute more than the bound, since the server's clock moves on while the requests
    // before this one run (one second more made a timestamp ahead pass on a slow machine).
    for skew in [-360, 360] {
        let at = (now + skew).to_string();
        let signature: Signature = signing.sign(&[at.as_bytes(), body.as_bytes()].concat());
        let signature =
            base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
        let stale = [
            ("X-Twilio-Email-Event-Webhook-Signature", signature),
            ("X-Twilio-Email-Event-Webhook-Timestamp", at),
        ];
        expect_problem(post_event(&setup, url, body.clone(), &stale).await, 401).await;
    }
    assert_eq!(setup.message(&bounced["_id"]).await["status"], "sent");
    assert!(events_of(&setup, "contact.complained").await.is_empty());

    let answer = expect_json(post_event(&setup, url, body, &headers).await, 200).await;
    assert_eq!(
        answer,
        json!({"received": 5, "recorded": 2, "ignored": 3, "confirmed": false})
    );
    assert_eq!(setup.message(&bounced["_id"]).await["status"], "bounced");
    assert!(setup.contact(&complaining["contactId"]).await["complaintDate"].is_string());
    assert_eq!(events_of(&setup, "contact.bounced").await.len(), 1);
    assert_eq!(events_of(&setup, "contact.complained").await.len(), 1);
    let today = setup.today().await;
    assert_eq!(
        (today["bounced"].clone(), today["complained"].clone()),
        (json!(1), json!(1))
    );
}

#[tokio::test]
async fn postmark_posts_carry_the_generated_secret_and_nothing_else_gets_in() {
    let setup = Delivery::new(|_| {}).await;
    let source = create_source(&setup, json!({"provider": "postmark"})).await;
    let secret = source["secret"]
        .as_str()
        .expect("the secret, this once")
        .to_owned();
    let with_credentials = source["urlWithCredentials"].as_str().unwrap();
    assert!(
        with_credentials.contains(&format!("mailroom:{secret}@")),
        "{with_credentials}"
    );
    let id = source["_id"].as_str().unwrap();
    let shown = setup.get(&format!("/feedback-sources/{id}")).await;
    assert!(
        shown.get("secret").is_none() && !shown.to_string().contains(&secret),
        "{shown}"
    );
    let url = source["url"].as_str().unwrap();
    let message = delivered(&setup, "john@example.com").await;
    // Postmark's documented bounce webhook example.
    let bounce = json!({
        "RecordType": "Bounce", "MessageStream": "outbound", "ID": 4323372036854775807u64,
        "Type": "HardBounce", "TypeCode": 1, "Name": "Hard bounce", "Tag": "Test",
        "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "Metadata": {"a_key": "a_value"},
        "ServerID": 23, "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
        "Details": "Test bounce details", "Email": "john@example.com", "From": "sender@example.com",
        "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": true, "Inactive": true,
        "CanActivate": true, "Subject": "Test subject", "Content": "<Full dump of bounce>"
    })
    .to_string();
    let basic = |password: &str| {
        vec![(
            "Authorization",
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("mailroom:{password}"))
            ),
        )]
    };
    expect_problem(post_event(&setup, url, bounce.clone(), &[]).await, 401).await;
    expect_problem(
        post_event(&setup, url, bounce.clone(), &basic("guess")).await,
        401,
    )
    .await;
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");

    let answer = expect_json(post_event(&setup, url, bounce, &basic(&secret)).await, 200).await;
    assert_eq!(answer["recorded"], 1, "{answer}");
    assert_eq!(setup.message(&message["_id"]).await["status"], "bounced");

    let complaint = json!({
        "RecordType": "SpamComplaint", "MessageStream": "outbound", "ID": 42, "Type": "SpamComplaint",
        "TypeCode": 512, "Name": "Spam complaint", "Email": "john@example.com", "From": "sender@example.com",
        "BouncedAt": "2019-11-05T16:33:54.9070259Z", "Subject": "Test subject"
    })
    .to_string();
    let answer = expect_json(
        post_event(&setup, url, complaint, &basic(&secret)).await,
        200,
    )
    .await;
    assert_eq!(answer["recorded"], 1, "{answer}");
    assert_eq!(setup.today().await["complained"], 1);

    // Malformed JSON from an authenticated Postmark is a 400; an unknown recipient is
    // accepted and ignored.
    expect_problem(post_event(&setup, url, "{", &basic(&secret)).await, 400).await;
    let stranger =
        json!({"RecordType": "Bounce", "Type": "HardBounce", "Email": "nobody@example.net"})
            .to_string();
    let answer = expect_json(
        post_event(&setup, url, stranger, &basic(&secret)).await,
        200,
    )
    .await;
    assert_eq!(answer["ignored"], 1, "{answer}");
}

#[tokio::test]
async fn a_tenant_cannot_post_into_another_account_even_with_valid_credentials() {
    let setup = Delivery::new(|_| {}).await;
    let message = delivered(&setup, "alice@example.com").await;
    let mine = create_source(
        &setup,
        json!({"provider": "mailgun", "signingKey": "key-mine-0001"}),
    )
    .await;
    // Another tenant, with its own account and Mailgun source.
    let other_token = setup.app.user_token("eve@example.com").await;
    let other_account = setup.app.create_account(&other_token, "Eve").await;
    let created = setup
        .app
        .send_json(
            Method::POST,
            &format!("/v2/accounts/{other_account}/feedback-sources"),
            &other_token,
            &json!({"provider": "mailgun", "signingKey": "key-eve-0002"}),
        )
        .await;
    let theirs = expect_json(created, 200).await;
    let now = i64::try_from(setup.app.clock.now().unix_millis() / 1000).unwrap();
    let event = mailgun_failed(
        "alice@example.com",
        message["messageId"].as_str().unwrap(),
        "permanent",
    );
    let body = mailgun_body("key-eve-0002", now, "token-eve", &event);

    // Eve's correctly signed event, posted to my source, to my account with her source
    // id, and to her source (where my contact does not exist).
    let mine_url = mine["url"].as_str().unwrap();
    expect_problem(post_event(&setup, mine_url, body.clone(), &[]).await, 401).await;
    let mixed = format!(
        "/v2/feedback-sources/{}/{}/events",
        setup.account,
        theirs["_id"].as_str().unwrap()
    );
    expect_problem(post_event(&setup, &mixed, body.clone(), &[]).await, 401).await;
    let answer = expect_json(
        post_event(&setup, theirs["url"].as_str().unwrap(), body, &[]).await,
        200,
    )
    .await;
    assert_eq!(answer["recorded"], 0, "{answer}");
    assert_eq!(setup.message(&message["_id"]).await["status"], "sent");
    assert_eq!(setup.today().await["bounced"], 0);

    // Management is per account too.
    let theirs_path = format!(
        "/v2/accounts/{}/feedback-sources/{}",
        setup.account,
        theirs["_id"].as_str().unwrap()
    );
    expect_problem(setup.app.get(&theirs_path, &setup.token).await, 404).await;
    // A malformed id is refused like an unknown one.
    expect_problem(
        post_event(&setup, "/v2/feedback-sources/x/y/events", "{}", &[]).await,
        401,
    )
    .await;
}

#[tokio::test]
async fn sources_are_validated_listed_and_deleted() {
    let setup = Delivery::new(|_| {}).await;
    for (body, field) in [
        (json!({"provider": "sparkpost"}), "provider"),
        (json!({"provider": "ses"}), "topicArns"),
        (
            json!({"provider": "ses", "topicArns": ["arn:aws:sqs:us-east-1:123456789012:q"]}),
            "topicArns",
        ),
        (json!({"provider": "mailgun"}), "signingKey"),
        (
            json!({"provider": "sendgrid", "publicKey": "bm90IGEga2V5"}),
            "publicKey",
        ),
        (
            json!({"provider": "postmark", "signingKey": "k"}),
            "signingKey",
        ),
    ] {
        let response = setup
            .app
            .send_json(
                Method::POST,
                &setup.path("/feedback-sources"),
                &setup.token,
                &body,
            )
            .await;
        let problem = expect_problem(response, 400).await;
        assert!(problem.to_string().contains(field), "{body}: {problem}");
    }
    let ses = create_source(
        &setup,
        json!({"provider": "ses", "topicArns": [TOPIC, TOPIC]}),
    )
    .await;
    assert_eq!(ses["topicArns"], json!([TOPIC]));
    let postmark = create_source(&setup, json!({"provider": "postmark"})).await;
    let list = setup.get("/feedback-sources").await;
    let ids: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["_id"])
        .collect();
    assert_eq!(ids, vec![&ses["_id"], &postmark["_id"]]);
    let path = setup.path(&format!(
        "/feedback-sources/{}",
        postmark["_id"].as_str().unwrap()
    ));
    expect_json(
        setup
            .app
            .request(Method::DELETE, &path, Some(&setup.token))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    expect_problem(setup.app.get(&path, &setup.token).await, 404).await;
    // Its URL now refuses even the right secret.
    let secret = postmark["secret"].as_str().unwrap();
    let header = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("mailroom:{secret}"))
    );
    let body = json!({"RecordType": "SpamComplaint", "Email": "a@example.com"}).to_string();
    let response = post_event(
        &setup,
        postmark["url"].as_str().unwrap(),
        body,
        &[("Authorization", header)],
    )
    .await;
    expect_problem(response, 401).await;
}

fn basic_auth(secret: &str) -> (&'static str, String) {
    (
        "Authorization",
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("mailroom:{secret}"))
        ),
    )
}

#[tokio::test]
async fn failed_provider_posts_count_as_failed_authentications_then_429() {
    let setup = Delivery::new(|config| {
        config.auth_failure_limit = Some(mailroom_server::config::RateLimit {
            per_second: 3.0 / 60.0,
            burst: 3,
        });
    })
    .await;
    let working = create_source(&setup, json!({"provider": "postmark"})).await;
    let other = create_source(&setup, json!({"provider": "postmark"})).await;
    let body = json!({"RecordType": "SpamComplaint", "Email": "a@example.com"}).to_string();
    let working_url = working["url"].as_str().unwrap();
    let working_auth = basic_auth(working["secret"].as_str().unwrap());
    let answer = post_event(
        &setup,
        working_url,
        body.clone(),
        std::slice::from_ref(&working_auth),
    )
    .await;
    expect_json(answer, 200).await;

    let url = other["url"].as_str().unwrap();
    for _ in 0..3 {
        expect_problem(post_event(&setup, url, body.clone(), &[]).await, 401).await;
    }
    // The address's allowance is spent: refused before any lookup, even with the right
    // secret, unless the source authenticated from this address recently (a provider's
    // addresses are shared by all its customers).
    let auth = basic_auth(other["secret"].as_str().unwrap());
    let response = post_event(&setup, url, body.clone(), &[auth]).await;
    assert_eq!(response.status(), 429);
    assert!(response.headers().get("retry-after").is_some());
    let answer = post_event(&setup, working_url, body, &[working_auth]).await;
    expect_json(answer, 200).await;
}

#[tokio::test]
async fn the_certificate_fetch_passes_the_egress_guard() {
    // Private egress is not allowed here (the default): the loopback stand-in for SNS
    // is the allowed origin, but the egress rules of the connector refuse it (plain
    // http, a loopback address; crates/webhook/src/sns.rs tests each), so nothing is
    // fetched and the provider is told to retry.
    let sns = FakeSns::start();
    let origin = sns.origin();
    let app = mailroom_tests::spawn_app_with(|config| config.sns_test_origin = Some(origin)).await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let created = app
        .send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/feedback-sources"),
            &token,
            &json!({"provider": "ses", "topicArns": [TOPIC]}),
        )
        .await;
    let source = expect_json(created, 200).await;
    let url = source["url"].as_str().unwrap();
    let path = &url[url.find("/v2/").unwrap()..];
    let signed = sns.sign(
        ses_bounce(TOPIC, "jane@example.com", "<x@acme.example>"),
        "2",
        &sns.cert_url(),
    );
    let response = app
        .request(Method::POST, path, None)
        .header("content-type", "application/json")
        .body(signed.to_string())
        .send()
        .await
        .unwrap();
    expect_problem(response, 503).await;
    assert!(
        sns.server.requests().is_empty(),
        "connected to a refused address"
    );
}

/// A certificate name SNS does not serve (404) cannot authenticate anything: 401, counted
/// as a failed authentication, so made-up names cannot buy one fetch each without end.
#[tokio::test]
async fn a_certificate_sns_does_not_serve_is_a_failed_authentication() {
    let sns = FakeSns::start();
    let missing = TestWebhookReceiver::start_with(ReceiverReply::with_body(404, "no such key"));
    let origin = format!("http://{}", missing.address());
    let setup = Delivery::new(|config| {
        config.sns_test_origin = Some(origin);
        config.auth_failure_limit = Some(mailroom_server::config::RateLimit {
            per_second: 2.0 / 60.0,
            burst: 2,
        });
    })
    .await;
    let source = create_source(&setup, json!({"provider": "ses", "topicArns": [TOPIC]})).await;
    let url = source["url"].as_str().unwrap();
    let notification = ses_bounce(TOPIC, "jane@example.com", "<x@acme.example>");
    for n in 0..2 {
        let cert = missing.url(&format!("/SimpleNotificationService-{n:032x}.pem"));
        let signed = sns.sign(notification.clone(), "2", &cert);
        expect_problem(post_event(&setup, url, signed.to_string(), &[]).await, 401).await;
    }
    assert_eq!(missing.requests().len(), 2);
    // The address's allowance is spent: the third made-up name is not fetched.
    let cert = missing.url("/SimpleNotificationService-ffff.pem");
    let signed = sns.sign(notification, "2", &cert);
    let response = post_event(&setup, url, signed.to_string(), &[]).await;
    assert_eq!(response.status(), 429);
    assert_eq!(missing.requests().len(), 2);
}

#[tokio::test]
async fn a_source_that_authenticated_from_one_address_is_not_exempt_from_another() {
    let setup = Delivery::new(|config| {
        config.auth_failure_limit = Some(mailroom_server::config::RateLimit {
            per_second: 3.0 / 60.0,
            burst: 3,
        });
        // Clients are named by X-Forwarded-For from the loopback proxy.
        config.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let working = create_source(&setup, json!({"provider": "postmark"})).await;
    let body = json!({"RecordType": "SpamComplaint", "Email": "a@example.com"}).to_string();
    let url = working["url"].as_str().unwrap();
    let auth = basic_auth(working["secret"].as_str().unwrap());
    let from = |address: &str, auth: Option<&(&'static str, String)>| {
        let mut headers = vec![("x-forwarded-for", address.to_owned())];
        headers.extend(auth.cloned());
        headers
    };
    // The provider's address authenticates the source.
    let provider = "203.0.113.1";
    let answer = post_event(&setup, url, body.clone(), &from(provider, Some(&auth))).await;
    expect_json(answer, 200).await;

    // Another address spends its allowance, then names the same source, with or without
    // its secret: 429 before any lookup (its ids are public).
    let stranger = "198.51.100.7";
    for _ in 0..3 {
        let response = post_event(&setup, url, body.clone(), &from(stranger, None)).await;
        expect_problem(response, 401).await;
    }
    for auth in [None, Some(&auth)] {
        let response = post_event(&setup, url, body.clone(), &from(stranger, auth)).await;
        assert_eq!(response.status(), 429);
    }
    // The provider's address, its allowance spent too, still reaches the source it
    // authenticated from there.
    for _ in 0..3 {
        let response = post_event(&setup, url, body.clone(), &from(provider, None)).await;
        assert!(matches!(response.status().as_u16(), 401 | 429));
    }
    let answer = post_event(&setup, url, body, &from(provider, Some(&auth))).await;
    expect_json(answer, 200).await;
}
