//! What a hostile mail server may send back is bounded: on delivery connections a reply
//! line over 4 KiB (or a reply over 64 KiB) is a connection fault, and memory does not
//! grow with what the server sends.

use std::time::{Duration, Instant};

use mailroom_app::ports::{MailServerProbe, Mailer, OutgoingMail, ProbeError};
use mailroom_domain::message::AttemptFault;
use mailroom_smtp::{
    MailerSettings, ProbeSettings, SmtpMailer, SmtpPoolSettings, SmtpProbe, PROBE_DEADLINE,
};
use mailroom_test_support::{loopback_mail, HostileSmtpServer, Hostility};

const GIB: u64 = 1 << 30;

fn mail(port: u16) -> OutgoingMail {
    loopback_mail(port, 1)
}

/// Resident and peak resident memory of this process, in KiB (Linux).
fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

async fn send_to(server: &HostileSmtpServer) -> Result<u16, AttemptFault> {
    let mailer = SmtpMailer::new(MailerSettings {
        allow_private_egress: true,
        timeout: Duration::from_secs(20),
        pool: SmtpPoolSettings::default(),
    });
    mailer
        .send(&mail(server.port()))
        .await
        .map(|accepted| accepted.reply.code)
}

fn assert_too_long(fault: &AttemptFault) {
    match fault {
        AttemptFault::Connection(text) => assert!(
            text.contains("longer than 4096 bytes"),
            "the fault names the 4 KiB line bound: {text}"
        ),
        other => panic!("expected a transient connection fault, got {other:?}"),
    }
}

#[tokio::test]
async fn a_1_gib_reply_line_to_mail_from_is_a_connection_fault_and_rss_grows_under_32_mib() {
    // Greeting and both EHLOs (lettre's, then the mailer's own, which looks for
    // PIPELINING) are answered properly; MAIL FROM gets `250 ` and 1 GiB without a newline.
    let server = HostileSmtpServer::start(Some(2), Hostility::Stream { bytes: GIB });
    let rss_before = rss_kib("VmRSS:");
    let started = Instant::now();
    let fault = send_to(&server).await.expect_err("refused");
    assert_too_long(&fault);
    let peak_growth_kib = rss_kib("VmHWM:").saturating_sub(rss_before);
    println!(
        "refused in {:?}; peak RSS growth {peak_growth_kib} KiB; {} hostile bytes sent",
        started.elapsed(),
        server.hostile_bytes_sent()
    );
    assert!(
        peak_growth_kib <= 32 * 1024,
        "peak RSS grew by {peak_growth_kib} KiB (bound: 32 MiB)"
    );
    // Refused at once, not after reading the gibibyte (or timing out).
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        server.hostile_bytes_sent() < GIB / 16,
        "the mailer stopped reading: {} bytes were sent",
        server.hostile_bytes_sent()
    );
}

#[tokio::test]
async fn a_greeting_without_a_newline_is_a_connection_fault() {
    let server = HostileSmtpServer::start(None, Hostility::Stream { bytes: GIB });
    let fault = send_to(&server).await.expect_err("refused");
    assert_too_long(&fault);
}

#[test]
fn the_probe_gives_up_on_a_dripping_server_at_its_30_s_deadline_whatever_the_step_timeout() {
    // One byte a second, never a newline; the step timeout alone would wait a minute.
    let server = HostileSmtpServer::start(
        None,
        Hostility::Drip {
            every: Duration::from_secs(1),
            bytes: 120,
        },
    );
    let probe = SmtpProbe::new(ProbeSettings {
        allow_private_egress: true,
        timeout: Duration::from_secs(60),
    });
    let started = Instant::now();
    let error = probe.verify(&mail(server.port()).endpoint).unwrap_err();
    let elapsed = started.elapsed();
    println!("gave up after {elapsed:?}: {error}");
    assert_eq!(PROBE_DEADLINE, Duration::from_secs(30));
    assert!(
        elapsed >= Duration::from_secs(29) && elapsed < Duration::from_secs(32),
        "gave up after {elapsed:?}"
    );
    match &error {
        ProbeError::Timeout(text) => assert!(text.contains("deadline of 30 s"), "{text}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn the_probe_refuses_a_1_gib_ehlo_reply_line_as_a_protocol_error() {
    let server = HostileSmtpServer::start(Some(0), Hostility::Stream { bytes: GIB });
    let probe = SmtpProbe::new(ProbeSettings {
        allow_private_egress: true,
        timeout: Duration::from_secs(10),
    });
    let error = probe.verify(&mail(server.port()).endpoint).unwrap_err();
    assert_eq!(
        error,
        ProbeError::Protocol("the mail server sent a reply line longer than 4096 bytes".to_owned())
    );
}
