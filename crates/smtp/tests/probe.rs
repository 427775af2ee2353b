//! `SmtpProbe` against a real SMTP server on loopback.

use std::time::Duration;

use mailroom_app::ports::{
    CredentialCheck, MailServerProbe, ProbeError, SmtpEndpoint, SmtpSecurity,
};
use mailroom_domain::secret::SecretString;
use mailroom_smtp::{ProbeSettings, SmtpProbe};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};

const USER: &str = "relay-user";
const PASSWORD: &str = "correct horse battery staple";

fn probe(allow_private_egress: bool) -> SmtpProbe {
    SmtpProbe::new(ProbeSettings {
        allow_private_egress,
        timeout: Duration::from_secs(5),
    })
}

fn server(tls: TlsMode, auth: bool) -> TestSmtpServer {
    TestSmtpServer::start(TestSmtpOptions {
        tls,
        auth: auth.then(|| (USER.to_owned(), PASSWORD.to_owned())),
        ..TestSmtpOptions::default()
    })
}

fn endpoint(host: &str, port: u16, security: SmtpSecurity) -> SmtpEndpoint {
    SmtpEndpoint {
        host: host.to_owned(),
        port,
        security,
        allow_insecure_tls: false,
        user: USER.to_owned(),
        password: SecretString::new(PASSWORD),
        saved: None,
    }
}

/// The server's certificate is self-signed for `localhost`, so TLS tests name that host.
fn insecure(mut endpoint: SmtpEndpoint) -> SmtpEndpoint {
    endpoint.allow_insecure_tls = true;
    endpoint
}

#[test]
fn the_right_password_authenticates_and_a_plain_connection_says_it_went_in_clear() {
    let server = server(TlsMode::None, true);
    let target = endpoint(
        "127.0.0.1",
        server.port(),
        SmtpSecurity::StartTlsOpportunistic,
    );
    assert_eq!(
        probe(true).verify(&target),
        Ok(CredentialCheck::AuthenticatedInClear)
    );
    assert_eq!(server.connection_count(), 1);
}

#[test]
fn a_wrong_password_is_refused_with_the_servers_reply() {
    let server = server(TlsMode::None, true);
    let mut target = endpoint(
        "127.0.0.1",
        server.port(),
        SmtpSecurity::StartTlsOpportunistic,
    );
    target.password = SecretString::new("wrong");
    assert_eq!(
        probe(true).verify(&target),
        Err(ProbeError::AuthRefused(
            "535 5.7.8 Authentication credentials invalid".to_owned()
        ))
    );
}

#[test]
fn a_server_that_refuses_every_login_is_an_auth_refusal() {
    let server = TestSmtpServer::start(TestSmtpOptions {
        refuse_auth: true,
        ..TestSmtpOptions::default()
    });
    let target = endpoint(
        "127.0.0.1",
        server.port(),
        SmtpSecurity::StartTlsOpportunistic,
    );
    let error = probe(true).verify(&target).unwrap_err();
    assert!(
        matches!(&error, ProbeError::AuthRefused(reply) if reply.starts_with("535 ")),
        "{error:?}"
    );
}

#[test]
fn a_relay_without_auth_is_reported_as_such() {
    let server = server(TlsMode::None, false);
    let target = endpoint(
        "127.0.0.1",
        server.port(),
        SmtpSecurity::StartTlsOpportunistic,
    );
    assert_eq!(
        probe(true).verify(&target),
        Ok(CredentialCheck::NoAuthAdvertised)
    );
}

#[test]
fn required_starttls_with_a_self_signed_certificate_and_insecure_tls_authenticates() {
    let server = server(TlsMode::StartTls, true);
    let target = insecure(endpoint(
        "localhost",
        server.port(),
        SmtpSecurity::StartTlsRequired,
    ));
    assert_eq!(
        probe(true).verify(&target),
        Ok(CredentialCheck::Authenticated)
    );
}

#[test]
fn opportunistic_starttls_upgrades_when_offered() {
    let server = server(TlsMode::StartTls, true);
    // Verified TLS against a self-signed certificate fails: proof that the upgrade happened.
    let target = endpoint(
        "localhost",
        server.port(),
        SmtpSecurity::StartTlsOpportunistic,
    );
    let error = probe(true).verify(&target).unwrap_err();
    assert!(matches!(&error, ProbeError::Tls(_)), "{error:?}");
    let target = insecure(target);
    assert_eq!(
        probe(true).verify(&target),
        Ok(CredentialCheck::Authenticated)
    );
}

#[test]
fn implicit_tls_with_a_self_signed_certificate_and_insecure_tls_authenticates() {
    let server = server(TlsMode::Implicit, true);
    let target = insecure(endpoint(
        "localhost",
        server.port(),
        SmtpSecurity::ImplicitTls,
    ));
    assert_eq!(
        probe(true).verify(&target),
        Ok(CredentialCheck::Authenticated)
    );
}

#[test]
fn implicit_tls_with_a_self_signed_certificate_is_refused_when_verified() {
    let server = server(TlsMode::Implicit, true);
    let target = endpoint("localhost", server.port(), SmtpSecurity::ImplicitTls);
    let error = probe(true).verify(&target).unwrap_err();
    match &error {
        ProbeError::Tls(text) => {
            assert!(text.contains("invalid peer certificate"), "{text}");
            assert!(text.contains("allowInsecureTLS"), "{text}");
        }
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[test]
fn implicit_tls_against_a_plaintext_server_is_a_tls_error() {
    let server = server(TlsMode::None, true);
    let target = insecure(endpoint(
        "localhost",
        server.port(),
        SmtpSecurity::ImplicitTls,
    ));
    let error = probe(true).verify(&target).unwrap_err();
    assert!(matches!(&error, ProbeError::Tls(_)), "{error:?}");
}

#[test]
fn required_starttls_against_a_server_without_it_is_refused() {
    let server = server(TlsMode::None, true);
    let target = insecure(endpoint(
        "127.0.0.1",
        server.port(),
        SmtpSecurity::StartTlsRequired,
    ));
    assert_eq!(
        probe(true).verify(&target),
        Err(ProbeError::Tls(
            "the server does not offer STARTTLS".to_owned()
        ))
    );
}

#[test]
fn private_and_loopback_hosts_are_refused_before_any_connection() {
    let server = server(TlsMode::None, true);
    let hosts = [
        "127.0.0.1",
        "10.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "::1",
        "[::1]",
        "fe80::1",
        "::ffff:127.0.0.1",
        "localhost",
    ];
    for host in hosts {
        for security in [
            SmtpSecurity::StartTlsOpportunistic,
            SmtpSecurity::ImplicitTls,
        ] {
            let target = endpoint(host, server.port(), security);
            let error = probe(false).verify(&target).unwrap_err();
            assert!(
                matches!(&error, ProbeError::EgressRefused(_)),
                "{host}: {error:?}"
            );
        }
    }
    assert_eq!(server.connection_count(), 0);
}

#[test]
fn an_egress_refusal_names_the_address_and_its_range() {
    let target = endpoint("localhost", 25, SmtpSecurity::StartTlsOpportunistic);
    let error = probe(false).verify(&target).unwrap_err();
    let ProbeError::EgressRefused(text) = &error else {
        panic!("expected an egress refusal, got {error:?}");
    };
    assert!(
        text.contains("(resolved from localhost) is loopback"),
        "{text}"
    );
    assert!(
        error
            .to_string()
            .starts_with("the mail server address is not allowed: "),
        "{error}"
    );
}

#[test]
fn a_closed_port_is_a_connect_error() {
    // Bind and drop a listener: the port is free and nothing answers on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap();
    let target = endpoint("127.0.0.1", port, SmtpSecurity::StartTlsOpportunistic);
    let error = probe(true).verify(&target).unwrap_err();
    match &error {
        ProbeError::Connect(text) => assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}"),
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[test]
fn a_silent_server_is_a_timeout() {
    // Accepts TCP (the kernel's backlog) but never greets.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = SmtpProbe::new(ProbeSettings {
        allow_private_egress: true,
        timeout: Duration::from_millis(300),
    });
    let target = endpoint("127.0.0.1", port, SmtpSecurity::StartTlsOpportunistic);
    let error = probe.verify(&target).unwrap_err();
    assert!(matches!(&error, ProbeError::Timeout(_)), "{error:?}");
    drop(listener);
}
