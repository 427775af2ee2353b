//! The test SMTP server itself, spoken to line by line: later delivery tests rely on it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use mailroom_test_support::{ReceivedMessage, TestSmtpOptions, TestSmtpServer};

/// A plaintext client that sends a line and returns the complete reply.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(server: &TestSmtpServer) -> Self {
        let stream = TcpStream::connect(server.address()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut client = Self {
            reader: BufReader::new(stream),
        };
        assert!(client.reply().starts_with("220 "));
        client
    }

    /// The reply's lines joined with `\n`, trailing spaces trimmed.
    fn reply(&mut self) -> String {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end().to_owned();
            let last = line.as_bytes().get(3) != Some(&b'-');
            lines.push(line);
            if last {
                return lines.join("\n");
            }
        }
    }

    fn send(&mut self, line: &str) -> String {
        let stream = self.reader.get_mut();
        stream.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        self.reply()
    }
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn with_auth() -> TestSmtpOptions {
    TestSmtpOptions {
        auth: Some(("ann".to_owned(), "secret".to_owned())),
        ..TestSmtpOptions::default()
    }
}

#[test]
fn auth_login_and_plain_continuation_both_work() {
    let server = TestSmtpServer::start(with_auth());

    let mut client = Client::connect(&server);
    assert!(client.send("EHLO test").contains("AUTH PLAIN LOGIN"));
    assert_eq!(client.send("AUTH LOGIN"), "334 VXNlcm5hbWU6");
    assert_eq!(client.send(&b64("ann")), "334 UGFzc3dvcmQ6");
    assert!(client.send(&b64("secret")).starts_with("235 "));

    let mut client = Client::connect(&server);
    client.send("EHLO test");
    assert_eq!(client.send("AUTH PLAIN"), "334");
    assert!(client.send(&b64("\0ann\0wrong")).starts_with("535 5.7.8"));
    assert_eq!(client.send("AUTH PLAIN"), "334");
    assert!(client.send(&b64("\0ann\0secret")).starts_with("235 "));
    assert_eq!(server.connection_count(), 2);
}

#[test]
fn mail_needs_auth_when_auth_is_configured() {
    let server = TestSmtpServer::start(with_auth());
    let mut client = Client::connect(&server);
    client.send("EHLO test");
    assert!(client.send("MAIL FROM:<a@example.com>").starts_with("530 "));
    assert!(client
        .send(&format!("AUTH PLAIN {}", b64("\0ann\0secret")))
        .starts_with("235 "));
    assert!(client.send("MAIL FROM:<a@example.com>").starts_with("250 "));
}

#[test]
fn data_is_recorded_dot_unstuffed() {
    let server = TestSmtpServer::start(TestSmtpOptions::default());
    let mut client = Client::connect(&server);
    assert!(!client.send("EHLO test").contains("AUTH"));
    assert!(client
        .send("MAIL FROM:<from@example.com> BODY=8BITMIME")
        .starts_with("250 "));
    assert!(client.send("RCPT TO:<one@example.com>").starts_with("250 "));
    assert!(client.send("RCPT TO:<two@example.com>").starts_with("250 "));
    assert!(client.send("DATA").starts_with("354 "));
    let reply = client.send("Subject: hi\r\n\r\n..leading dot\r\nend\r\n.");
    assert!(reply.starts_with("250 "), "{reply}");
    assert!(client.send("NOOP").starts_with("250 "));
    assert!(client.send("QUIT").starts_with("221 "));

    assert_eq!(
        server.messages(),
        vec![ReceivedMessage {
            from: "from@example.com".into(),
            recipients: vec!["one@example.com".into(), "two@example.com".into()],
            data: "Subject: hi\r\n\r\n.leading dot\r\nend\r\n".into(),
            authenticated_as: None,
            authenticated_with: None,
            tls: false,
            hello: "test".into(),
            pipelined: false,
        }]
    );
}

#[test]
fn scripted_replies_override_rcpt_and_data() {
    let server = TestSmtpServer::start(TestSmtpOptions {
        reply_to_rcpt: Some("550 5.1.1 no such user".into()),
        ..TestSmtpOptions::default()
    });
    let mut client = Client::connect(&server);
    client.send("EHLO test");
    client.send("MAIL FROM:<from@example.com>");
    assert_eq!(
        client.send("RCPT TO:<x@example.com>"),
        "550 5.1.1 no such user"
    );
    assert!(client.send("DATA").starts_with("554 "));
    assert!(client.send("RSET").starts_with("250 "));

    let server = TestSmtpServer::start(TestSmtpOptions {
        reply_to_data: Some("451 4.3.0 try again later".into()),
        ..TestSmtpOptions::default()
    });
    let mut client = Client::connect(&server);
    client.send("EHLO test");
    client.send("MAIL FROM:<>");
    client.send("RCPT TO:<x@example.com>");
    client.send("DATA");
    assert_eq!(client.send("body\r\n."), "451 4.3.0 try again later");
    assert!(server.messages().is_empty());
}

#[test]
fn a_delayed_acceptance_holds_the_message_in_flight_even_when_the_client_hangs_up() {
    let server = TestSmtpServer::start(TestSmtpOptions {
        accept_delay: Some(Duration::from_millis(300)),
        ..TestSmtpOptions::default()
    });
    let mut client = Client::connect(&server);
    assert!(client.send("EHLO worker-a").starts_with("250"));
    assert!(client.send("MAIL FROM:<a@example.com>").starts_with("250 "));
    assert!(client.send("RCPT TO:<b@example.com>").starts_with("250 "));
    assert!(client.send("DATA").starts_with("354 "));
    // The end of DATA without waiting for the answer, then hang up, as a killed client.
    let stream = client.reader.get_mut();
    stream
        .write_all(b"Subject: hi\r\n\r\nbody\r\n.\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(server.in_flight("worker-a"), 1);
    assert_eq!(server.in_flight("someone-else"), 0);
    assert_eq!(server.message_count(), 0, "not accepted before the delay");
    drop(client);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(server.in_flight("worker-a"), 0);
    let messages = server.messages();
    assert_eq!(messages.len(), 1, "accepted although the client left");
    assert_eq!(messages[0].hello, "worker-a");
    assert_eq!(messages[0].recipients, ["b@example.com"]);
}
