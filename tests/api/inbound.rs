//! VERP return paths and the inbound SMTP listener, end to end on loopback: mail from a
//! domain whose return path is verified goes out with `MAIL FROM:<bounces+token@…>`
//! through the test SMTP server; the "remote" side (lettre, as a mail server would) then
//! sends a DSN or ARF report to that address at Mailroom's inbound listener; the contact
//! is hard-bounced or complained, `contact.bounced` reaches a real webhook receiver, and
//! the next announcement skips the contact. Forged and replayed reports change nothing.

use std::net::SocketAddr;

use lettre::{
    address::Envelope,
    transport::smtp::client::{Certificate, Tls, TlsParameters},
    AsyncSmtpTransport, AsyncTransport, Tokio1Executor,
};
use mailroom_server::{
    announcement_worker::AnnouncementWorker, config::InboundConfig, webhook_worker::WebhookWorker,
};
use mailroom_test_support::{TestDnsServer, TestWebhookReceiver};
use reqwest::Method;
use serde_json::{json, Value};

use crate::delivery_support::Delivery;
use mailroom_tests::expect_json;

const INBOUND_HOST: &str = "in.mailroom.test";

struct Inbound {
    setup: Delivery,
    _dns: TestDnsServer,
    receiver: TestWebhookReceiver,
    port: u16,
}

impl Inbound {
    /// An account with a verified `acme.example` (return path included), a webhook
    /// receiver subscribed to bounces and complaints, and the inbound listener on a free
    /// loopback port; `inbound` adjusts the listener's settings.
    async fn new(inbound: impl FnOnce(&mut InboundConfig)) -> Self {
        let dns = TestDnsServer::start();
        let dns_address = dns.address();
        let setup = Delivery::new(|config| {
            config.dns_server = Some(dns_address);
            config.inbound_host = Some(INBOUND_HOST.to_owned());
            config.inbound.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            inbound(&mut config.inbound);
        })
        .await;
        let domain = setup
            .post("/domains", &json!({ "name": "acme.example" }))
            .await;
        for record in domain["records"].as_array().expect("records") {
            let name = record["name"].as_str().expect("name");
            let value = record["value"].as_str().expect("value");
            match record["type"].as_str() {
                Some("TXT") => dns.add_txt(name, value),
                Some("MX") => dns.add_mx(name, 10, value),
                other => panic!("unexpected record type {other:?}"),
            }
        }
        let id = domain["_id"].as_str().expect("id");
        let verified = setup
            .post(&format!("/domains/{id}/verify"), &json!({}))
            .await;
        assert_eq!(verified["status"], "verified", "{verified}");
        let receiver = TestWebhookReceiver::start();
        let hook = json!({
            "url": receiver.url("/hooks"), "authType": "none",
            "events": ["contact.bounced", "contact.complained"]
        });
        let response = setup
            .app
            .send_json(Method::PUT, &setup.path("/webhooks"), &setup.token, &hook)
            .await;
        expect_json(response, 200).await;
        let port = setup.app.inbound_port.expect("the inbound listener runs");
        Self {
            setup,
            _dns: dns,
            receiver,
            port,
        }
    }

    /// Sends to `email` and delivers; answers the message (sent) and its `MAIL FROM`.
    async fn delivered(&self, email: &str) -> (Value, String) {
        let queued = self.setup.queue(email).await;
        self.setup.drain().await;
        let message = self.setup.message(&queued["_id"]).await;
        assert_eq!(message["status"], "sent", "{message}");
        let received = self
            .setup
            .smtp
            .messages()
            .into_iter()
            .rev()
            .find(|m| m.recipients.iter().any(|r| r == email))
            .expect("received");
        (message, received.from)
    }

    fn transport(&self) -> AsyncSmtpTransport<Tokio1Executor> {
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1")
            .port(self.port)
            .hello_name(lettre::transport::smtp::extension::ClientId::Domain(
                "mx.example.net".into(),
            ))
            .build()
    }

    /// Sends `raw` from the null sender to `to`, as a bouncing server does; answers the
    /// reply code of a refusal.
    async fn send_report(&self, to: &str, raw: &str) -> Result<(), String> {
        send_with(&self.transport(), to, raw).await
    }

    async fn contact_of(&self, message: &Value) -> Value {
        self.setup.contact(&message["contactId"]).await
    }

    async fn deliver_webhooks(&self) {
        WebhookWorker::new(self.setup.app.services.clone(), &self.setup.app.config)
            .run_once()
            .await
            .expect("webhook round");
    }

    fn webhook_events(&self) -> Vec<Value> {
        self.receiver
            .requests()
            .iter()
            .map(|request| serde_json::from_slice(&request.body).expect("json"))
            .collect()
    }
}

async fn send_with(
    transport: &AsyncSmtpTransport<Tokio1Executor>,
    to: &str,
    raw: &str,
) -> Result<(), String> {
    let envelope = Envelope::new(None, vec![to.parse().expect("an address")]).expect("envelope");
    transport
        .send_raw(&envelope, raw.as_bytes())
        .await
        .map(|_| ())
        .map_err(|error| {
            error
                .status()
                .map_or_else(|| error.to_string(), |code| code.to_string())
        })
}

/// A feedback fixture with its placeholders filled in, lines ending in CRLF.
fn fixture(name: &str, message_id: &str, recipient: &str) -> String {
    let path = format!("{}/fixtures/feedback/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{path}: {error}"))
        .replace("{{MESSAGE_ID}}", message_id)
        .replace("{{RECIPIENT}}", recipient)
        .replace("\r\n", "\n")
        .replace('\n', "\r\n")
}

fn is_unset(value: &Value) -> bool {
    value.is_null()
}

fn inbound_count(outcome: &str) -> u64 {
    let counters = mailroom_server::metrics::delivery_counters()
        .registry()
        .gather();
    counters
        .iter()
        .filter(|family| family.get_name() == "mailroom_inbound_smtp_total")
        .flat_map(|family| family.get_metric())
        .filter(|metric| {
            metric
                .get_label()
                .iter()
                .any(|label| label.get_name() == "outcome" && label.get_value() == outcome)
        })
        .map(|metric| metric.get_counter().get_value() as u64)
        .sum()
}

#[tokio::test]
async fn a_dsn_to_the_verp_address_hard_bounces_the_contact_once_and_the_next_announcement_skips_it(
) {
    let inbound = Inbound::new(|_| {}).await;
    let setup = &inbound.setup;
    let (message, mail_from) = inbound.delivered("grace@example.org").await;
    // The envelope sender is the VERP address; the From header and DKIM stay.
    assert!(mail_from.starts_with("bounces+"), "{mail_from}");
    assert!(mail_from.ends_with("@bounces.acme.example"), "{mail_from}");
    let token = mail_from
        .strip_prefix("bounces+")
        .and_then(|rest| rest.split('@').next())
        .unwrap();
    assert_eq!(token.len(), 42, "{token}");
    let data = &setup.smtp.messages()[0].data;
    assert!(data.contains("From: Acme <hello@acme.example>"), "{data}");
    assert!(data.contains("DKIM-Signature:"), "{data}");

    // The remote server bounces it later, to the return path.
    let header = message["messageId"].as_str().unwrap();
    let dsn = fixture("dsn-postfix.eml", header, "grace@example.org");
    let recorded_before = inbound_count("recorded_bounce");
    inbound.send_report(&mail_from, &dsn).await.expect("250");
    assert_eq!(inbound_count("recorded_bounce"), recorded_before + 1);

    let bounced = setup.message(&message["_id"]).await;
    assert_eq!(bounced["status"], "bounced", "{bounced}");
    assert!(bounced["lastReply"].as_str().unwrap().contains("5.1.1"));
    let contact = inbound.contact_of(&message).await;
    assert!(contact["hardBounced"].is_string(), "{contact}");
    assert_eq!(setup.today().await["bounced"], 1);

    inbound.deliver_webhooks().await;
    let events = inbound.webhook_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "contact.bounced", "{}", events[0]);

    // The same DSN again: accepted, and nothing new.
    let repeated_before = inbound_count("repeated");
    inbound.send_report(&mail_from, &dsn).await.expect("250");
    assert_eq!(inbound_count("repeated"), repeated_before + 1);
    assert_eq!(setup.today().await["bounced"], 1, "counted once");
    inbound.deliver_webhooks().await;
    assert_eq!(inbound.webhook_events().len(), 1, "one webhook");
    assert_eq!(
        inbound.contact_of(&message).await["hardBounced"],
        contact["hardBounced"]
    );

    // The next announcement skips the contact.
    let template = setup
        .post(
            "/templates",
            &json!({"name": "News", "slug": "news", "subject": "News", "content": "<p>Hi</p>"}),
        )
        .await;
    let announcement = setup
        .post(
            "/announcements",
            &json!({"name": "Launch", "templateId": template["_id"], "includeUnsubscribed": false}),
        )
        .await;
    let worker = AnnouncementWorker::new(setup.app.services.clone(), 100);
    for _ in 0..10 {
        if worker
            .run_once()
            .await
            .expect("announcement round")
            .expanded
            .is_none()
        {
            break;
        }
    }
    setup.drain().await;
    let page = setup.get("/messages?limit=100").await;
    let items = page["items"].as_array().expect("items");
    let to_grace: Vec<&Value> = items
        .iter()
        .filter(|m| m["announcementId"] == announcement["_id"])
        .filter(|m| m["email"] == "grace@example.org")
        .collect();
    assert_eq!(to_grace.len(), 1, "{page}");
    assert_eq!(to_grace[0]["status"], "skipped", "{}", to_grace[0]);
    assert_eq!(to_grace[0]["skipReason"], "bounce_blocked");
}

#[tokio::test]
async fn forged_tokens_other_domains_and_relaying_are_refused_and_change_nothing() {
    let inbound = Inbound::new(|_| {}).await;
    let (message, mail_from) = inbound.delivered("grace@example.org").await;
    let dsn = fixture(
        "dsn-postfix.eml",
        message["messageId"].as_str().unwrap(),
        "grace@example.org",
    );
    let (local, domain) = mail_from.split_once('@').unwrap();
    // One character of the token changed (the message id part), the tag kept.
    let mut forged = local.to_owned().into_bytes();
    forged[8] = if forged[8] == b'a' { b'b' } else { b'a' };
    let forged = format!("{}@{domain}", String::from_utf8(forged).unwrap());
    // The tag's last character changed.
    let mut tag_changed = local.to_owned().into_bytes();
    let last = tag_changed.len() - 2;
    tag_changed[last] = if tag_changed[last] == b'a' {
        b'b'
    } else {
        b'a'
    };
    let tag_changed = format!("{}@{domain}", String::from_utf8(tag_changed).unwrap());
    let token = local.strip_prefix("bounces+").unwrap();
    let uppercase = format!("bounces+{}@{domain}", token.to_ascii_uppercase());
    let other_domain = format!("{local}@bounces.other.example");
    let before = (
        inbound_count("bad_token"),
        inbound_count("relay_refused"),
        inbound_count("unknown_domain"),
    );
    for address in [
        forged,
        tag_changed,
        uppercase,
        other_domain,
        "postmaster@bounces.acme.example".to_owned(),
        "grace@example.org".to_owned(),
        "someone@in.mailroom.test".to_owned(),
    ] {
        assert_eq!(
            inbound.send_report(&address, &dsn).await,
            Err("550".to_owned()),
            "{address}"
        );
    }
    assert_eq!(inbound_count("bad_token"), before.0 + 4);
    assert_eq!(inbound_count("relay_refused"), before.1 + 2);
    assert_eq!(inbound_count("unknown_domain"), before.2 + 1);
    let contact = inbound.contact_of(&message).await;
    assert!(is_unset(&contact["hardBounced"]), "{contact}");
    assert_eq!(
        inbound.setup.message(&message["_id"]).await["status"],
        "sent"
    );
    assert_eq!(inbound.setup.today().await["bounced"], 0);
    inbound.deliver_webhooks().await;
    assert!(inbound.webhook_events().is_empty());
}

#[tokio::test]
async fn an_arf_complaint_sets_the_complaint_date_and_a_delay_changes_nothing() {
    let inbound = Inbound::new(|_| {}).await;
    let (complained, complained_from) = inbound.delivered("grace@example.org").await;
    let (delayed, delayed_from) = inbound.delivered("bob@example.org").await;

    // A delay notice: accepted and ignored.
    let delay = fixture(
        "dsn-delayed.eml",
        delayed["messageId"].as_str().unwrap(),
        "bob@example.org",
    );
    let ignored_before = inbound_count("ignored");
    inbound
        .send_report(&delayed_from, &delay)
        .await
        .expect("250");
    assert_eq!(inbound_count("ignored"), ignored_before + 1);
    assert_eq!(
        inbound.setup.message(&delayed["_id"]).await["status"],
        "sent"
    );
    assert!(is_unset(&inbound.contact_of(&delayed).await["hardBounced"]));

    // A complaint.
    let arf = fixture(
        "arf-yahoo.eml",
        complained["messageId"].as_str().unwrap(),
        "grace@example.org",
    );
    inbound
        .send_report(&complained_from, &arf)
        .await
        .expect("250");
    let contact = inbound.contact_of(&complained).await;
    assert!(contact["complaintDate"].is_string(), "{contact}");
    assert_eq!(inbound.setup.today().await["complained"], 1);

    // Mail that is no report (an auto-reply) is accepted and dropped.
    let dropped_before = inbound_count("dropped_not_a_report");
    let reply = "From: bob@example.org\r\nSubject: Out of office\r\n\r\nBack Monday.\r\n";
    inbound
        .send_report(&delayed_from, reply)
        .await
        .expect("250");
    assert_eq!(inbound_count("dropped_not_a_report"), dropped_before + 1);

    inbound.deliver_webhooks().await;
    let events = inbound.webhook_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "contact.complained");
}

#[tokio::test]
async fn an_oversized_message_gets_552_and_records_nothing() {
    let inbound = Inbound::new(|config| config.max_message_bytes = 4096).await;
    let (message, mail_from) = inbound.delivered("grace@example.org").await;
    let mut dsn = fixture(
        "dsn-postfix.eml",
        message["messageId"].as_str().unwrap(),
        "grace@example.org",
    );
    dsn.push_str(&"X-Padding: 0123456789012345678901234567890123456789\r\n".repeat(200));
    assert!(dsn.len() > 4096);
    assert_eq!(
        inbound.send_report(&mail_from, &dsn).await,
        Err("552".to_owned())
    );
    assert!(is_unset(&inbound.contact_of(&message).await["hardBounced"]));

    // The listener advertises its limit.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    let ehlo = smtp_exchange(&mut stream, &["EHLO mx.example.net", "QUIT"]).await;
    assert!(ehlo.contains("250-SIZE 4096"), "{ehlo}");
    assert!(
        !ehlo.contains("STARTTLS"),
        "no certificate, no STARTTLS: {ehlo}"
    );
}

/// PEM armour around DER bytes (rcgen is built without its `pem` feature here).
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// Reads the greeting, then sends each command after reading the previous reply;
/// answers everything read.
async fn smtp_exchange(stream: &mut tokio::net::TcpStream, commands: &[&str]) -> String {
    smtp_session(stream, true, commands).await
}

/// [`smtp_exchange`], reading a greeting first only when `greeting` is set.
async fn smtp_session(
    stream: &mut tokio::net::TcpStream,
    greeting: bool,
    commands: &[&str],
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut transcript = String::new();
    let mut buffer = vec![0u8; 8192];
    async fn read(
        stream: &mut tokio::net::TcpStream,
        buffer: &mut [u8],
    ) -> Result<std::io::Result<usize>, tokio::time::error::Elapsed> {
        tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(buffer)).await
    }
    if greeting {
        let n = read(stream, &mut buffer).await.unwrap().unwrap();
        transcript.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    for command in commands {
        stream
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .unwrap();
        let n = read(stream, &mut buffer).await.unwrap().unwrap();
        transcript.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    transcript
}

#[tokio::test]
async fn starttls_with_a_configured_certificate_carries_the_report() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("mailroom-inbound-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert_path = dir.join(format!("cert-{}.pem", rand::random::<u32>()));
    let key_path = dir.join(format!("key-{}.pem", rand::random::<u32>()));
    let cert_pem = pem("CERTIFICATE", certified.cert.der());
    std::fs::write(&cert_path, &cert_pem).unwrap();
    std::fs::write(
        &key_path,
        pem("PRIVATE KEY", &certified.signing_key.serialize_der()),
    )
    .unwrap();
    let paths = (cert_path.clone(), key_path.clone());
    let inbound = Inbound::new(move |config| config.tls = Some(paths)).await;
    let (message, mail_from) = inbound.delivered("grace@example.org").await;
    let dsn = fixture(
        "dsn-postfix.eml",
        message["messageId"].as_str().unwrap(),
        "grace@example.org",
    );
    let tls = TlsParameters::builder("localhost".to_owned())
        .add_root_certificate(Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .build_rustls()
        .unwrap();
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1")
        .port(inbound.port)
        .tls(Tls::Required(tls))
        .build();
    send_with(&transport, &mail_from, &dsn)
        .await
        .expect("sent over STARTTLS");
    assert!(inbound.contact_of(&message).await["hardBounced"].is_string());
    let _ = std::fs::remove_file(cert_path);
    let _ = std::fs::remove_file(key_path);
}

#[tokio::test]
async fn connections_recipients_lines_and_accepted_messages_are_bounded_per_client() {
    let inbound = Inbound::new(|config| {
        config.max_connections_per_ip = 1;
        config.messages_per_minute = 1;
    })
    .await;
    let (message, mail_from) = inbound.delivered("grace@example.org").await;
    let delay = fixture(
        "dsn-delayed.eml",
        message["messageId"].as_str().unwrap(),
        "grace@example.org",
    );

    // A second connection from the same address while one is open: 421. (The first is
    // greeted before the second connects, so it holds the address's one slot.)
    let mut first = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    let greeting = smtp_exchange(&mut first, &[]).await;
    assert!(greeting.starts_with("220 "), "{greeting}");
    let mut second = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    let refused = smtp_exchange(&mut second, &[]).await;
    assert!(refused.starts_with("421 "), "{refused}");

    // Recipients beyond the limit (5): 452. A line beyond 2048 bytes: 500.
    let mut commands = vec!["EHLO mx.example.net".to_owned(), "MAIL FROM:<>".to_owned()];
    for _ in 0..6 {
        commands.push(format!("RCPT TO:<{mail_from}>"));
    }
    commands.push(format!("NOOP {}", "x".repeat(3000)));
    commands.push("RSET".to_owned());
    commands.push("QUIT".to_owned());
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let transcript = smtp_session(&mut first, false, &commands).await;
    assert_eq!(transcript.matches("250 2.1.5").count(), 5, "{transcript}");
    assert!(transcript.contains("452 4.5.3"), "{transcript}");
    assert!(
        transcript.contains("500 5.5.2 Line too long"),
        "{transcript}"
    );
    drop(first);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    // One accepted message a minute: the second is told to come back later.
    inbound.send_report(&mail_from, &delay).await.expect("250");
    assert_eq!(
        inbound.send_report(&mail_from, &delay).await,
        Err("450".to_owned())
    );
}

#[tokio::test]
async fn a_session_looping_mail_rcpt_rset_gets_421_within_100_rcpts_and_one_lookup() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let inbound = Inbound::new(|_| {}).await;
    let (_, mail_from) = inbound.delivered("grace@example.org").await;
    let lookups_before = inbound_count("recipient_lookup");

    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    let greeting = smtp_exchange(&mut stream, &["EHLO mx.example.net"]).await;
    assert!(greeting.contains("250 "), "{greeting}");
    // Up to 1,000 cycles of MAIL, five RCPTs of one valid address, RSET.
    let mut cycle = vec!["MAIL FROM:<>".to_owned()];
    cycle.extend((0..5).map(|_| format!("RCPT TO:<{mail_from}>")));
    cycle.push("RSET".to_owned());
    let mut buffer = vec![0u8; 4096];
    let mut rcpts = 0;
    let mut closed = None;
    'cycles: for _ in 0..1_000 {
        for command in &cycle {
            if stream
                .write_all(format!("{command}\r\n").as_bytes())
                .await
                .is_err()
            {
                break 'cycles;
            }
            if command.starts_with("RCPT") {
                rcpts += 1;
            }
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buffer))
                    .await
                    .expect("a reply within 5 s");
            let text = String::from_utf8_lossy(&buffer[..read.unwrap_or(0)]).into_owned();
            if text.starts_with("421") || text.is_empty() {
                closed = Some(text);
                break 'cycles;
            }
        }
    }
    let closed = closed.expect("the session was closed");
    assert!(
        closed.starts_with("421 4.7.0 Too many commands"),
        "{closed}"
    );
    assert_eq!(rcpts, 101, "the 101st RCPT is refused with 421");
    // One address, looked up once for the whole session.
    assert_eq!(inbound_count("recipient_lookup") - lookups_before, 1);
    assert_eq!(inbound_count("too_many_commands"), 1);
}

#[tokio::test]
async fn a_session_sending_only_noop_gets_421_after_50() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let inbound = Inbound::new(|_| {}).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    smtp_exchange(&mut stream, &[]).await;
    let mut buffer = vec![0u8; 4096];
    let mut sent = 0;
    let closed = loop {
        assert!(sent < 1_000, "NOOP for ever");
        stream.write_all(b"NOOP\r\n").await.unwrap();
        sent += 1;
        let n = stream.read(&mut buffer).await.unwrap();
        let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
        if !text.starts_with("250") {
            break text;
        }
    };
    assert!(
        closed.starts_with("421 4.7.0 Too many commands"),
        "{closed}"
    );
    assert_eq!(sent, 51);
}

#[tokio::test]
async fn rcpts_beyond_4_times_what_the_accepted_messages_carry_get_450_per_address() {
    // One message a minute of at most 5 recipients: 20 RCPTs a minute per address.
    let inbound = Inbound::new(|config| config.messages_per_minute = 1).await;
    let (_, mail_from) = inbound.delivered("grace@example.org").await;
    let rcpt = format!("RCPT TO:<{mail_from}>");
    let mut transcript = String::new();
    for _ in 0..2 {
        // Two sessions, so no session bound is what stops them.
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
            .await
            .unwrap();
        let mut commands = vec!["EHLO mx.example.net", "MAIL FROM:<>"];
        for _ in 0..12 {
            commands.push(&rcpt);
            if commands.len() % 6 == 1 {
                commands.push("RSET");
                commands.push("MAIL FROM:<>");
            }
        }
        commands.push("QUIT");
        transcript.push_str(&smtp_exchange(&mut stream, &commands).await);
    }
    assert_eq!(transcript.matches("250 2.1.5").count(), 20, "{transcript}");
    assert_eq!(
        transcript.matches("450 4.7.1 Too many recipients").count(),
        4,
        "{transcript}"
    );
}

#[tokio::test]
async fn a_session_idling_between_noops_gets_421_once_its_2_s_of_waiting_are_spent() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let inbound =
        Inbound::new(|config| config.idle_budget = std::time::Duration::from_secs(2)).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbound.port))
        .await
        .unwrap();
    smtp_exchange(&mut stream, &[]).await;
    let started = std::time::Instant::now();
    let mut buffer = vec![0u8; 4096];
    let mut noops = 0;
    let closed = loop {
        assert!(noops < 20, "NOOP every 400 ms for ever");
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        if stream.write_all(b"NOOP\r\n").await.is_err() {
            break String::new();
        }
        noops += 1;
        let n = stream.read(&mut buffer).await.unwrap_or(0);
        let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
        if !text.starts_with("250") {
            break text;
        }
    };
    let took = started.elapsed();
    assert!(closed.starts_with("421 4.4.2 Idle too long"), "{closed:?}");
    assert!(noops <= 7, "{noops} NOOPs before the 421");
    assert!(took < std::time::Duration::from_secs(4), "{took:?}");
}
