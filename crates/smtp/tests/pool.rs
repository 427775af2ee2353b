//! The mailer's connection pool against the real test SMTP server on loopback: reuse,
//! the per-server bound, the pace, a server that closes idle connections, and who a
//! refusal blames, with the envelope pipelined (RFC 2920) and one command at a time.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use mailroom_app::ports::{Mailer, OutgoingMail, SmtpSecurity};
use mailroom_domain::message::{AttemptFault, ReplyClass, SmtpStage};
use mailroom_domain::secret::SecretString;
use mailroom_smtp::{MailerSettings, SmtpMailer, SmtpPoolSettings};
use mailroom_test_support::{loopback_mail, TestSmtpOptions, TestSmtpServer, TlsMode};

fn mailer(pool: SmtpPoolSettings) -> SmtpMailer {
    SmtpMailer::new(MailerSettings {
        allow_private_egress: true,
        timeout: Duration::from_secs(10),
        pool,
    })
}

fn mail(server: &TestSmtpServer, security: SmtpSecurity, n: usize) -> OutgoingMail {
    let mut mail = loopback_mail(server.port(), n as u64);
    mail.endpoint.security = security;
    mail.endpoint.allow_insecure_tls = true;
    mail.endpoint.user = "ann".into();
    mail.endpoint.password = SecretString::new("secret");
    mail
}

fn server(options: TestSmtpOptions) -> TestSmtpServer {
    TestSmtpServer::start(TestSmtpOptions {
        auth: Some(("ann".into(), "secret".into())),
        ..options
    })
}

/// Both kinds of server: one that offers `PIPELINING` and one that does not.
const BOTH: [bool; 2] = [true, false];

/// A server that offers `PIPELINING` or not.
fn server_pipelining(pipelining: bool, options: TestSmtpOptions) -> TestSmtpServer {
    server(TestSmtpOptions {
        no_pipelining: !pipelining,
        ..options
    })
}

/// Sends `mails` concurrently and expects every one accepted.
async fn send_all(mailer: &SmtpMailer, mails: &[OutgoingMail]) {
    let results = join_all(mails.iter().map(|mail| mailer.send(mail))).await;
    for result in results {
        let reply = result.expect("accepted");
        assert_eq!(reply.reply.code, 250, "{reply:?}");
    }
}

fn subjects(server: &TestSmtpServer) -> Vec<String> {
    let mut subjects: Vec<String> = server
        .messages()
        .iter()
        .filter_map(|message| {
            message
                .data
                .lines()
                .find_map(|line| line.strip_prefix("Subject: ").map(str::to_owned))
        })
        .collect();
    subjects.sort();
    subjects
}

#[tokio::test]
async fn ten_messages_in_a_row_share_one_connection() {
    let server = server(TestSmtpOptions::default());
    let mailer = mailer(SmtpPoolSettings::default());
    for n in 0..10 {
        let reply = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, n))
            .await
            .expect("accepted");
        assert_eq!(reply.reply.code, 250);
    }
    assert_eq!(server.messages().len(), 10);
    assert_eq!(server.connection_count(), 1);
    assert!(server
        .messages()
        .iter()
        .all(|message| message.authenticated_as.as_deref() == Some("ann")));
}

#[tokio::test]
async fn concurrent_messages_reuse_at_most_the_bound_of_connections() {
    let server = server(TestSmtpOptions {
        tls: TlsMode::Implicit,
        ..TestSmtpOptions::default()
    });
    let mailer = mailer(SmtpPoolSettings {
        max_connections: 3,
        ..SmtpPoolSettings::default()
    });
    let mails: Vec<_> = (0..30)
        .map(|n| mail(&server, SmtpSecurity::ImplicitTls, n))
        .collect();
    send_all(&mailer, &mails).await;
    assert_eq!(server.messages().len(), 30);
    assert!(server.messages().iter().all(|message| message.tls));
    assert!(
        (1..=3).contains(&server.connection_count()),
        "{} connections",
        server.connection_count()
    );
    assert!(server.peak_open_connections() <= 3);
    // A second round reuses the same connections.
    let before = server.connection_count();
    send_all(&mailer, &mails[..10]).await;
    assert_eq!(server.connection_count(), before);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_replaced_and_nothing_is_sent_twice() {
    for pipelining in BOTH {
        let server = server_pipelining(
            pipelining,
            TestSmtpOptions {
                idle_disconnect: Some(Duration::from_millis(200)),
                ..TestSmtpOptions::default()
            },
        );
        let mailer = mailer(SmtpPoolSettings::default());
        for n in 0..3 {
            let reply = mailer
                .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, n))
                .await;
            assert_eq!(reply.expect("accepted").reply.code, 250, "{pipelining}");
            // Long enough for the server to say 421 and hang up on the idle connection.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(
            subjects(&server),
            ["Message 0", "Message 1", "Message 2"],
            "each message exactly once (pipelining: {pipelining})"
        );
        assert_eq!(server.connection_count(), 3);
    }
}

#[tokio::test]
async fn the_envelope_goes_in_one_write_only_to_a_server_that_offers_pipelining() {
    for pipelining in BOTH {
        let server = server_pipelining(pipelining, TestSmtpOptions::default());
        let mailer = mailer(SmtpPoolSettings::default());
        let mut mail = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
        mail.rendered.cc = Some("team@acme.example".into());
        mailer.send(&mail).await.expect("accepted");
        mailer
            .send(&self::mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
            .await
            .expect("accepted");
        let received = server.messages();
        assert_eq!(received.len(), 2);
        for message in &received {
            assert_eq!(message.pipelined, pipelining, "{message:?}");
        }
        assert_eq!(
            received[0].recipients,
            ["reader0@example.org", "team@acme.example"]
        );
        assert_eq!(server.connection_count(), 1);
    }
}

#[tokio::test]
async fn lines_that_start_with_a_dot_arrive_as_they_were_written() {
    let server = server(TestSmtpOptions::default());
    let mailer = mailer(SmtpPoolSettings::default());
    let mut dotted = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
    dotted.rendered.html = ".first\n<p>a</p>\n.b\n..c\n.\nend".into();
    mailer.send(&dotted).await.expect("accepted");
    mailer
        .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
        .await
        .expect("the next transaction starts cleanly");
    let received = server.messages();
    // The server undoes the dot-stuffing; what it kept is what was written.
    assert!(
        received[0]
            .data
            .contains("\r\n\r\n.first\r\n<p>a</p>\r\n.b\r\n..c\r\n.\r\nend"),
        "{}",
        received[0].data
    );
    assert_eq!(received.len(), 2);
}

#[tokio::test]
async fn an_envelope_of_more_than_100_recipients_goes_one_command_at_a_time() {
    let server = server_pipelining(true, TestSmtpOptions::default());
    let mailer = mailer(SmtpPoolSettings::default());
    let mut many = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
    // 100 copies, the most a message may have: 101 recipients.
    let copies: Vec<String> = (0..100).map(|n| format!("copy{n}@acme.example")).collect();
    many.rendered.bcc = Some(copies.join(", "));
    mailer.send(&many).await.expect("accepted");
    mailer
        .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
        .await
        .expect("accepted");
    let received = server.messages();
    assert_eq!(received[0].recipients.len(), 101);
    assert!(!received[0].pipelined, "101 recipients went pipelined");
    assert!(
        received[1].pipelined,
        "one recipient went one command at a time"
    );
}

#[tokio::test]
async fn a_refused_recipient_keeps_the_connection_for_the_next_message() {
    for pipelining in BOTH {
        let server = server_pipelining(pipelining, TestSmtpOptions::default());
        server.script_rcpt_replies(["550 5.1.1 no such user"]);
        let mailer = mailer(SmtpPoolSettings::default());
        let refused = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 0))
            .await
            .expect_err("refused");
        assert!(
            matches!(&refused, AttemptFault::Reply(SmtpStage::ContactRecipient, reply) if reply.code == 550),
            "{refused:?}"
        );
        let reply = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
            .await
            .expect("accepted after RSET");
        assert_eq!(reply.reply.code, 250);
        assert_eq!(subjects(&server), ["Message 1"]);
        assert_eq!(server.connection_count(), 1, "pipelining: {pipelining}");
    }
}

#[tokio::test]
async fn a_refused_contact_with_an_accepted_copy_sends_nothing_and_blames_the_contact() {
    for pipelining in BOTH {
        let server = server_pipelining(pipelining, TestSmtpOptions::default());
        server.refuse_recipient("reader0@example.org", "550 5.1.1 no such user");
        let mailer = mailer(SmtpPoolSettings::default());
        let mut refused_mail = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
        refused_mail.rendered.bcc = Some("audit@acme.example".into());
        let refused = mailer.send(&refused_mail).await.expect_err("refused");
        assert!(
            matches!(&refused, AttemptFault::Reply(SmtpStage::ContactRecipient, reply) if reply.code == 550),
            "{refused:?}"
        );
        mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
            .await
            .expect("accepted");
        // The copy alone never gets the message.
        assert_eq!(subjects(&server), ["Message 1"], "pipelining: {pipelining}");
        // Pipelined, DATA was answered 354 for the copy: the connection is closed
        // instead of sending content; stepwise, DATA was never written and RSET keeps it.
        let sessions = if pipelining { 2 } else { 1 };
        assert_eq!(
            server.connection_count(),
            sessions,
            "pipelining: {pipelining}"
        );
    }
}

#[tokio::test]
async fn a_refusal_after_data_is_not_sent_again() {
    for pipelining in BOTH {
        let server = server_pipelining(
            pipelining,
            TestSmtpOptions {
                reply_to_data: Some("451 4.3.0 try again later".into()),
                ..TestSmtpOptions::default()
            },
        );
        let mailer = mailer(SmtpPoolSettings::default());
        let refused = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 0))
            .await
            .expect_err("refused");
        assert!(
            matches!(&refused, AttemptFault::Reply(SmtpStage::Data { contact_only: true }, reply) if reply.code == 451),
            "{refused:?}"
        );
        assert_eq!(server.connection_count(), 1, "no second connection");
        // The refused content ended the transaction: the next one starts cleanly on the
        // same connection (a left-over transaction would be answered 503).
        let again = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
            .await
            .expect_err("refused");
        assert!(
            matches!(&again, AttemptFault::Reply(_, reply) if reply.code == 451),
            "{again:?}"
        );
        assert_eq!(server.connection_count(), 1, "pipelining: {pipelining}");
    }
}

#[tokio::test]
async fn the_rate_limit_spaces_messages_to_one_server() {
    let server = server(TestSmtpOptions::default());
    let mailer = mailer(SmtpPoolSettings {
        messages_per_second: Some(5.0),
        ..SmtpPoolSettings::default()
    });
    let mails: Vec<_> = (0..10)
        .map(|n| mail(&server, SmtpSecurity::StartTlsOpportunistic, n))
        .collect();
    let started = Instant::now();
    send_all(&mailer, &mails).await;
    let elapsed = started.elapsed();
    assert_eq!(server.messages().len(), 10);
    // The first at once, then one every 200 ms.
    assert!(elapsed >= Duration::from_millis(1_750), "{elapsed:?}");
}

#[tokio::test]
async fn a_refused_copy_is_reported_and_the_others_get_the_message() {
    for pipelining in BOTH {
        let server = server_pipelining(pipelining, TestSmtpOptions::default());
        server.refuse_recipient("audit@acme.example", "550 5.1.1 no such user");
        let mailer = mailer(SmtpPoolSettings::default());
        let mut mail = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
        mail.rendered.cc = Some("team@acme.example".into());
        mail.rendered.bcc = Some("audit@acme.example".into());
        let accepted = mailer.send(&mail).await.expect("accepted");
        assert_eq!(accepted.reply.code, 250);
        assert_eq!(accepted.refused_copies.len(), 1, "{accepted:?}");
        assert_eq!(accepted.refused_copies[0].0, "audit@acme.example");
        assert_eq!(accepted.refused_copies[0].1.code, 550);
        assert_eq!(
            accepted.copies, 1,
            "the accepted copy counts, the refused one not"
        );
        let received = server.messages();
        assert_eq!(
            received[0].recipients,
            ["reader0@example.org", "team@acme.example"]
        );
        assert_eq!(received[0].pipelined, pipelining);
    }
}

#[tokio::test]
async fn a_refused_mail_from_names_its_stage_and_keeps_the_connection() {
    for pipelining in BOTH {
        let server = server_pipelining(pipelining, TestSmtpOptions::default());
        server.script_mail_replies(["550 sender not allowed"]);
        let mailer = mailer(SmtpPoolSettings::default());
        let mut refused_mail = mail(&server, SmtpSecurity::StartTlsOpportunistic, 0);
        refused_mail.rendered.cc = Some("team@acme.example".into());
        let refused = mailer.send(&refused_mail).await.expect_err("refused");
        assert!(
            matches!(&refused, AttemptFault::Reply(SmtpStage::MailFrom, reply) if reply.code == 550),
            "{refused:?}"
        );
        assert_eq!(refused.classify(), ReplyClass::PermanentFailure);
        // The pipelined RCPT TOs and DATA were answered 503 and read: the next
        // transaction gets its own replies.
        mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, 1))
            .await
            .expect("accepted after RSET");
        assert_eq!(subjects(&server), ["Message 1"]);
        assert_eq!(server.connection_count(), 1, "pipelining: {pipelining}");
    }
}

#[tokio::test]
async fn a_refused_login_is_not_tried_again_at_once_unless_the_password_changes() {
    let server = server(TestSmtpOptions::default());
    server.set_credentials([("ann", "rotated")]);
    let mailer = mailer(SmtpPoolSettings::default());
    for n in 0..3 {
        let refused = mailer
            .send(&mail(&server, SmtpSecurity::StartTlsOpportunistic, n))
            .await
            .expect_err("refused");
        assert!(
            matches!(&refused, AttemptFault::Reply(SmtpStage::Authentication, reply) if reply.code == 535),
            "{refused:?}"
        );
        assert_eq!(refused.classify(), ReplyClass::ServerFault);
    }
    assert_eq!(
        server.connection_count(),
        1,
        "one failed login, not one per message"
    );

    let mut fixed = mail(&server, SmtpSecurity::StartTlsOpportunistic, 3);
    fixed.endpoint.password = SecretString::new("rotated");
    mailer
        .send(&fixed)
        .await
        .expect("accepted with the new password");
    assert_eq!(server.connection_count(), 2);
    assert_eq!(
        server.messages()[0].authenticated_with.as_deref(),
        Some("rotated")
    );
}
