//! The sender against real receivers on loopback: TLS with host-name verification, the
//! egress guard before any connection, headers, and connection reuse.

use std::time::Duration;

use mailroom_app::ports::{SendError, WebhookAuth, WebhookRequest, WebhookSender};
use mailroom_domain::{
    secret::SecretString,
    webhook::{SigningSecret, WebhookUrl},
    webhook_signature::{verify, DEFAULT_TOLERANCE},
    Timestamp, Uuid, WebhookEventId,
};
use mailroom_test_support::{ReceiverReply, TestWebhookReceiver};
use mailroom_webhook::{HyperWebhookSender, SenderSettings};
use tokio_rustls::rustls::pki_types::CertificateDer;

fn request(url: &str, auth: WebhookAuth) -> WebhookRequest {
    WebhookRequest {
        url: WebhookUrl::parse(url).expect("valid URL"),
        event_id: WebhookEventId::from_uuid(Uuid::now_v7()),
        timestamp: Timestamp::from_datetime(time::OffsetDateTime::now_utc()),
        body: br#"{"type":"contact.deleted","timestamp":"2026-11-22T12:00:00.000Z","data":{}}"#
            .to_vec(),
        signing_secret: SigningSecret::from_random([5u8; 32]),
        auth,
    }
}

fn sender(allow_private_egress: bool, trust: Option<&[u8]>) -> HyperWebhookSender {
    HyperWebhookSender::new(SenderSettings {
        allow_private_egress,
        timeout: Duration::from_secs(5),
        extra_roots: trust
            .map(|der| vec![CertificateDer::from(der.to_vec())])
            .unwrap_or_default(),
        ..SenderSettings::default()
    })
}

#[tokio::test]
async fn https_deliveries_reach_the_checked_address_and_verify_the_host_name() {
    let receiver = TestWebhookReceiver::start_tls();
    let sender = sender(true, receiver.certificate_der());
    let request = request(
        &receiver.url("/in"),
        WebhookAuth::Bearer {
            token: SecretString::new("tok-1234"),
        },
    );
    let answer = sender.send(&request).await.expect("delivered over TLS");
    assert_eq!(answer.status, 200);
    let received = receiver.requests();
    assert_eq!(received.len(), 1);
    let got = &received[0];
    assert_eq!(got.path, "/in");
    assert_eq!(got.body, request.body);
    assert_eq!(got.header("authorization"), Some("Bearer tok-1234"));
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(
        got.header("host"),
        Some(&*format!("localhost:{}", receiver.address().port()))
    );
    let signed = verify(
        got.header("webhook-id").expect("id"),
        got.header("webhook-timestamp").expect("timestamp"),
        &got.body,
        got.header("webhook-signature").expect("signature"),
        request.signing_secret.secret().expose(),
        DEFAULT_TOLERANCE,
        std::time::SystemTime::now(),
    );
    assert_eq!(signed, Ok(()));
}

#[tokio::test]
async fn a_certificate_that_is_untrusted_or_for_another_name_is_refused() {
    let receiver = TestWebhookReceiver::start_tls();
    let untrusted = sender(true, None)
        .send(&request(&receiver.url("/in"), WebhookAuth::None))
        .await;
    assert!(matches!(untrusted, Err(SendError::Tls(_))), "{untrusted:?}");
    // The certificate names `localhost`; an IP-literal URL must not pass with it.
    let by_address = format!("https://127.0.0.1:{}/in", receiver.address().port());
    let wrong_name = sender(true, receiver.certificate_der())
        .send(&request(&by_address, WebhookAuth::None))
        .await;
    assert!(
        matches!(wrong_name, Err(SendError::Tls(_))),
        "{wrong_name:?}"
    );
    assert!(receiver.requests().is_empty());
}

#[tokio::test]
async fn the_egress_guard_refuses_before_any_connection() {
    let receiver = TestWebhookReceiver::start_tls();
    let strict = sender(false, receiver.certificate_der());
    let port = receiver.address().port();
    for url in [
        format!("https://127.0.0.1:{port}/in"),
        format!("https://localhost:{port}/in"),
        format!("https://[::ffff:127.0.0.1]:{port}/in"),
    ] {
        let refused = strict.send(&request(&url, WebhookAuth::None)).await;
        match refused {
            Err(SendError::Refused(reason)) => assert!(reason.contains("loopback"), "{reason}"),
            other => panic!("{url}: {other:?}"),
        }
    }
    let plain = TestWebhookReceiver::start();
    let refused = strict
        .send(&request(&plain.url("/in"), WebhookAuth::None))
        .await;
    assert!(matches!(refused, Err(SendError::Refused(_))), "{refused:?}");
    assert_eq!(receiver.connection_count() + plain.connection_count(), 0);
}

#[tokio::test]
async fn connections_are_pooled_and_basic_auth_is_encoded() {
    let receiver = TestWebhookReceiver::start();
    receiver.script([
        ReceiverReply::with_body(503, "busy"),
        ReceiverReply::with_header(429, "Retry-After", "30"),
    ]);
    let sender = sender(true, None);
    let auth = WebhookAuth::Basic {
        username: "mailroom".into(),
        password: SecretString::new("pa55"),
    };
    let first = sender
        .send(&request(&receiver.url("/in"), auth.clone()))
        .await;
    let first = first.expect("answered");
    assert_eq!((first.status, first.body_excerpt.as_str()), (503, "busy"));
    let second = sender
        .send(&request(&receiver.url("/in"), auth.clone()))
        .await
        .expect("answered");
    assert_eq!(second.status, 429);
    assert_eq!(second.retry_after, Some(Duration::from_secs(30)));
    let third = sender
        .send(&request(&receiver.url("/in"), auth))
        .await
        .expect("answered");
    assert_eq!(third.status, 200);
    assert_eq!(receiver.connection_count(), 1, "one pooled connection");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].header("authorization"),
        Some("Basic bWFpbHJvb206cGE1NQ==")
    );
}
